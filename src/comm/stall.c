/*
 * stall.c — what a rank does when an operation times out: the notice
 * exchange that finds the one silent rank (progress.c calls it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"

/* ------------------------------------------------------------ stalls
 *
 * A timed-out rank knows whom it waits on, not whether that peer is the
 * silent one or only waits in turn (in a ring, one frozen rank stalls
 * everyone). So it does not fail at once: it tells every peer "timed out,
 * waiting on W" (a DDPC_F_WAIT notice) and collects theirs for
 * DDPC_STALL_SETTLE seconds; a rank that receives a notice first joins in
 * with its own. Then it follows the chain of waits from its own: the first
 * rank on it that sent no notice is the silent one (frozen, cut off, or
 * not calling the collective), and every rank names that same rank.
 *
 * With connections made on first use (link.c) a rank is connected to a few
 * of the ranks on its chain only, so every notice is passed on: a rank
 * that hears one for the first time, from its sender or passed on, sends
 * it on (DDPC_F_RELAY, behind its own notice) to every peer it told its
 * own, and keeps reading its noted peers' streams for theirs until it
 * concludes. A notice so travels along the connections that exist, and a
 * rank ends its settle early only once its chain ends at a rank it is
 * connected to (or in a cycle), not at one it has merely not heard of
 * yet. */

/* The peer e's rank waits on: the first with a posted receive (no data from
 * it), else the first with a posted send (it does not read); -1 when none.
 * *reading: whether it is a receive. */
static int waited_peer(ddpc_comm *c, int *reading) {
    *reading = 0;
    for (int p = 0; p < c->size; p++)
        if (c->peers[p].rq && !c->peers[p].noted) {
            *reading = 1;
            return p;
        }
    for (int p = 0; p < c->size; p++)
        if (c->peers[p].sq && !c->peers[p].noted) return p;
    return -1;
}

/* "host:port" (IPv6 in brackets) of rank p as published. */
static void addr_of(const ddpc_comm *c, int p, char *buf, size_t len) {
    const char *ip = p == c->rank ? c->ip : c->peers[p].ep.ip;
    int port = c->peers[p].ep.port;
    snprintf(buf, len, strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip[0] ? ip : "?", port);
}

/* Every connected peer has sent its notice (or said goodbye). */
static int all_noted(const ddpc_comm *c) {
    for (int p = 0; p < c->size; p++) {
        const ddpc__peer *pe = &c->peers[p];
        if (p != c->rank && pe->conn && !pe->noted && !pe->bye) return 0;
    }
    return 1;
}

/* Whether the chain of waits from this rank ends where it can judge: at a
 * rank it is connected to that has not noted (silent as far as it can
 * tell), back at itself, or in a cycle; not at a rank whose notice may
 * still be passed on to it. */
static int chain_known(const ddpc__exec *e) {
    const ddpc_comm *c = e->c;
    int cur = e->waits_on, hops = 0;
    while (cur >= 0 && cur != c->rank && c->peers[cur].heard && hops++ < c->size)
        cur = c->peers[cur].waits_on;
    return cur < 0 || cur == c->rank || hops > c->size || c->peers[cur].conn != NULL;
}

/* Passes on rank origin's notice (it waits on rank waits) to every peer
 * this rank told its own, but origin and from (who sent it here), each
 * within a quarter of a second; a peer that does not take it in time is
 * sent no more. */
static void relay(ddpc__exec *e, int origin, int waits, int from) {
    ddpc_comm *c = e->c;
    ddpc__hdr note = e->fp;
    note.flags = DDPC_F_RELAY;
    note.nbytes = 0;
    note.root = origin;
    note.rsvd = (uint32_t)waits;
    for (int p = 0; p < c->size; p++) {
        ddpc__peer *pe = &c->peers[p];
        if (p == origin || p == from || !pe->conn || !pe->notes.told || pe->notes.deaf) continue;
        if (pe->tp->send_full(pe->conn, &note, sizeof note, ddpc__deadline_in(0.25), c->abort_fd) !=
            DDPC_OK)
            pe->notes.deaf = 1;
    }
}

/* Rank origin's notice, from its sender from: recorded once, and passed
 * on while this rank settles (before, settle passes on what it heard). */
static void hear(ddpc__exec *e, int origin, int waits, int from) {
    ddpc_comm *c = e->c;
    if (origin < 0 || origin >= c->size || origin == c->rank || c->peers[origin].heard) return;
    if (waits < -1 || waits >= c->size) waits = -1; /* not a rank: it waits on nobody known */
    c->peers[origin].heard = 1;
    c->peers[origin].waits_on = waits;
    if (origin != from)
        DDPC_INFO(COLL, "rank %d: rank %d passed on that rank %d waits on rank %d", c->rank, from,
                  origin, waits);
    if (e->settle_until > 0) relay(e, origin, waits, from);
}

/* The notices of peer p are read no further; with all, every peer's (the
 * settle is over). */
static void notes_end(ddpc_comm *c, int p, int all) {
    for (int q = all ? 0 : p; q < (all ? c->size : p + 1); q++) {
        struct ddpc__notes *n = &c->peers[q].notes;
        n->done = 1;
        free(n->more);
        n->more = NULL;
        n->nmore = n->off = 0;
    }
}

ddpc_status ddpc__stall_read(ddpc__exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    struct ddpc__notes *n = &pe->notes;
    for (int k = 0; k < 4 * c->size + 8 && !n->done && pe->conn; k++) {
        size_t want = sizeof n->in - n->have;
        if (n->off < n->nmore) { /* what came with its notice first */
            size_t take = n->nmore - n->off < want ? n->nmore - n->off : want;
            memcpy((char *)&n->in + n->have, n->more + n->off, take);
            n->off += take;
            n->have += take;
        } else {
            ddpc__xfer x;
            size_t mv = 0;
            ddpc__xfer_init(&x, (char *)&n->in + n->have, want, NULL, 0);
            if (pe->tp->recv(pe->conn, &x, &mv) != DDPC_OK) { /* gone: it has no more to say */
                notes_end(c, p, 0);
                return DDPC_OK;
            }
            n->have += mv;
            if (!mv) return DDPC_OK;
        }
        if (n->have < sizeof n->in) continue;
        n->have = 0;
        const ddpc__hdr *h = &n->in;
        if (h->magic == DDPC_MSG_MAGIC && h->flags == DDPC_F_WAIT)
            hear(e, p, (int32_t)h->rsvd, p);
        else if (h->magic == DDPC_MSG_MAGIC && h->flags == DDPC_F_RELAY)
            hear(e, h->root, (int32_t)h->rsvd, p);
        else /* its failure (it concluded), or anything else: no more notices */
            notes_end(c, p, 0);
    }
    return DDPC_OK;
}

/* The settle is over: names the silent rank at the end of the chain of
 * waits, in HCCL's link-error terms (the local and the remote rank with
 * their addresses), and fails e with DDPC_ERR_TIMEOUT. */
static ddpc_status conclude(ddpc__exec *e) {
    ddpc_comm *c = e->c;
    char chain[256], mine[80], theirs[80], since[96] = "";
    size_t used = (size_t)snprintf(chain, sizeof chain, "%d", c->rank);
    notes_end(c, 0, 1);
    int cur = e->waits_on, hops = 0;
    while (cur >= 0 && cur != c->rank && c->peers[cur].heard && hops++ < c->size) {
        int n = snprintf(chain + used, sizeof chain - used, " -> %d", cur);
        if (n > 0 && (size_t)n < sizeof chain - used) used += (size_t)n;
        cur = c->peers[cur].waits_on;
    }
    int silent = cur >= 0 && cur != c->rank && cur < c->size && !c->peers[cur].heard ? cur : -1;
    if (silent >= 0) {
        int n = snprintf(chain + used, sizeof chain - used, " -> %d", silent);
        if (n > 0 && (size_t)n < sizeof chain - used) used += (size_t)n;
    }
    double timeout = c->exec_timeout;
    if (cur == c->rank && hops > 0) { /* the others waited on this rank: it was stopped */
        e->lost = e->waits_on;
        return ddpc__fail(e, DDPC_ERR_TIMEOUT,
                          "timed out after %g s (DDPC_TIMEOUT): the peers timed out waiting on "
                          "this rank (wait chain %s -> %d): it was stopped, descheduled or "
                          "slower than DDPC_TIMEOUT",
                          timeout, chain, c->rank);
    }
    if (silent < 0) {
        e->lost = e->waits_on;
        if (e->waits_on < 0)
            return ddpc__fail(e, DDPC_ERR_TIMEOUT,
                              "timed out after %g s (DDPC_TIMEOUT) with nothing posted to wait on",
                              timeout);
        return ddpc__fail(e, DDPC_ERR_TIMEOUT,
                          "timed out after %g s (DDPC_TIMEOUT) waiting on rank %d, and every rank "
                          "on the chain of waits said it waits too (%s): ranks that wait on each "
                          "other, or a collective one of them never issued",
                          timeout, e->waits_on, chain);
    }
    e->lost = silent;
    addr_of(c, c->rank, mine, sizeof mine);
    addr_of(c, silent, theirs, sizeof theirs);
    static const char *const linking[DDPC_LINK_STATES] = {
        [DDPC_LINK_NONE] = "not connected",
        [DDPC_LINK_ASKED] = "it has not answered this rank's connection",
        [DDPC_LINK_OFFERED] = "it has not answered this rank's shared-memory offer",
        [DDPC_LINK_REFUSED] = "its connection to this rank has not come",
        [DDPC_LINK_UP] = "",
        [DDPC_LINK_PROVING] = "it has not answered this rank's job-token handshake",
        [DDPC_LINK_GATHER] = "its link's further connections have not all come",
        [DDPC_LINK_STREAMS] = "it has not answered this rank's further connections",
        [DDPC_LINK_JOINING] = "it has not sent its shared-memory offer",
    };
    if (!c->peers[silent].conn) /* a lazy link still under way (link.c) */
        snprintf(since, sizeof since, "; %s", linking[c->peers[silent].link]);
    else if (c->peers[silent].last_rx > 0)
        snprintf(since, sizeof since, "; last data from it %.1f s ago",
                 ddpc__now() - c->peers[silent].last_rx);
    else
        snprintf(since, sizeof since, "; no data from it in this communicator");
    DDPC_WARN(COLL, "_________________________LINK_ERROR_INFO___________________________");
    DDPC_WARN(COLL, "| dest_ip(user_rank) | dest_port | src_ip(user_rank) | src_port | MyRole | "
                    "Status |");
    DDPC_WARN(COLL, "| %s(%d) | %d | %s(%d) | %d | %s | time out |", c->peers[silent].ep.ip, silent,
              c->peers[silent].ep.port, c->ip, c->rank, c->peers[c->rank].ep.port,
              silent == e->waits_on ? "waiter" : "bystander");
    return ddpc__fail(e, DDPC_ERR_TIMEOUT,
                      "timed out after %g s (DDPC_TIMEOUT): rank %d is silent (wait chain %s%s); "
                      "link: local rank %d %s, remote rank %d %s, status time out",
                      timeout, silent, chain, since, c->rank, mine, silent, theirs);
}

/* Starts the settle: tells every peer that this rank timed out waiting on
 * waits_on, then collects notices until all peers sent one or
 * DDPC_STALL_SETTLE has passed (the deadline of e becomes the settle's). */
static ddpc_status settle(ddpc__exec *e, int waits_on) {
    ddpc_comm *c = e->c;
    e->settle_until = ddpc__deadline_in(c->settle_s > 0 ? c->settle_s : 1e-3);
    e->deadline = e->settle_until;
    e->waits_on = waits_on;
    ddpc__hdr note = e->fp;
    note.flags = DDPC_F_WAIT;
    note.nbytes = 0;
    note.rsvd = (uint32_t)waits_on;
    for (int p = 0; p < c->size; p++) /* who reads what this rank passes on */
        c->peers[p].notes.told = c->peers[p].conn != NULL && p != e->lost;
    ddpc__send_notes(e, &note, 0);
    for (int p = 0; p < c->size; p++) /* what it heard before: the notice that started it */
        if (c->peers[p].heard) relay(e, p, c->peers[p].waits_on, p);
    DDPC_INFO(COLL,
              "rank %d: #%" PRIu64 " timed out waiting on rank %d; collecting notices for %g s",
              c->rank, e->fp.seq, waits_on, c->settle_s);
    while (!(all_noted(c) && chain_known(e)) && !ddpc__expired(e->settle_until)) {
        ddpc_status s = ddpc__progress(e, 1);
        if (s != DDPC_OK) {
            notes_end(c, 0, 1);
            return s;
        }
    }
    return conclude(e);
}

/* A peer's DDPC_F_WAIT notice: it timed out waiting on the rank in h->rsvd.
 * Recorded (the peer is no longer driven or watched); a rank not settling
 * yet starts to. */
ddpc_status ddpc__stall_notice(ddpc__exec *e, int peer, const ddpc__hdr *h, const void *more,
                               size_t nmore) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[peer];
    int reading, waits_on = waited_peer(c, &reading);
    pe->noted = 1;
    pe->sq = pe->sq_tail = pe->rq = pe->rq_tail = NULL;
    if (nmore && !pe->notes.more && (pe->notes.more = malloc(nmore))) {
        memcpy(pe->notes.more, more, nmore);
        pe->notes.nmore = nmore;
        pe->notes.off = 0;
    } else if (nmore) { /* out of memory: its stream is out of step; read no more of it */
        pe->notes.done = 1;
    }
    hear(e, peer, (int32_t)h->rsvd, peer);
    DDPC_INFO(COLL, "rank %d: rank %d timed out in #%" PRIu64 " waiting on rank %d", c->rank, peer,
              h->seq, pe->waits_on);
    if (e->settle_until > 0) return DDPC_OK;
    if (waits_on < 0) waits_on = peer; /* nothing else pending: the op waits on it */
    return settle(e, waits_on);
}

/* The deadline passed: with more than two ranks, settle first; once the
 * settle is over too, conclude. */
ddpc_status ddpc__stall_timed_out(ddpc__exec *e) {
    if (e->settle_until > 0) return conclude(e);
    int reading, w = waited_peer(e->c, &reading);
    if (e->c->size <= 2 || w < 0) {
        e->waits_on = w;
        return conclude(e);
    }
    return settle(e, w);
}
