/*
 * stall.c — what a rank does when an operation times out: the notice
 * exchange that finds the one silent rank (progress.c calls it).
 */
#include <inttypes.h>
#include <stdio.h>
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
 * not calling the collective), and every rank names that same rank. */

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
    const char *ip = p == c->rank ? c->ip : c->peers[p].ip;
    int port = c->peers[p].port;
    snprintf(buf, len, strchr(ip, ':') ? "[%s]:%d" : "%s:%d", ip[0] ? ip : "?", port);
}

/* Every connected peer has sent its notice (or said goodbye). */
static int all_noted(const ddpc_comm *c) {
    for (int p = 0; p < c->size; p++) {
        const ddpc_peer *pe = &c->peers[p];
        if (p != c->rank && pe->conn && !pe->noted && !pe->bye) return 0;
    }
    return 1;
}

/* The settle is over: names the silent rank at the end of the chain of
 * waits, in HCCL's link-error terms (the local and the remote rank with
 * their addresses), and fails e with DDPC_ERR_TIMEOUT. */
static ddpc_status conclude(ddpc_exec *e) {
    ddpc_comm *c = e->c;
    char chain[256], mine[80], theirs[80], since[96] = "";
    size_t used = (size_t)snprintf(chain, sizeof chain, "%d", c->rank);
    int cur = e->waits_on, hops = 0;
    while (cur >= 0 && cur != c->rank && c->peers[cur].noted && hops++ < c->size) {
        int n = snprintf(chain + used, sizeof chain - used, " -> %d", cur);
        if (n > 0 && (size_t)n < sizeof chain - used) used += (size_t)n;
        cur = c->peers[cur].waits_on;
    }
    int silent = cur >= 0 && cur != c->rank && cur < c->size && !c->peers[cur].noted ? cur : -1;
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
    static const char *const linking[] = {
        [DDPC_LINK_NONE] = "not connected",
        [DDPC_LINK_ASKED] = "it has not answered this rank's connection",
        [DDPC_LINK_OFFERED] = "it has not answered this rank's shared-memory offer",
        [DDPC_LINK_REFUSED] = "its connection to this rank has not come",
        [DDPC_LINK_UP] = "",
        [DDPC_LINK_PROVING] = "it has not answered this rank's job-token handshake",
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
    DDPC_WARN(COLL, "| %s(%d) | %d | %s(%d) | %d | %s | time out |", c->peers[silent].ip, silent,
              c->peers[silent].port, c->ip, c->rank, c->peers[c->rank].port,
              silent == e->waits_on ? "waiter" : "bystander");
    return ddpc__fail(e, DDPC_ERR_TIMEOUT,
                      "timed out after %g s (DDPC_TIMEOUT): rank %d is silent (wait chain %s%s); "
                      "link: local rank %d %s, remote rank %d %s, status time out",
                      timeout, silent, chain, since, c->rank, mine, silent, theirs);
}

/* Starts the settle: tells every peer that this rank timed out waiting on
 * waits_on, then collects notices until all peers sent one or
 * DDPC_STALL_SETTLE has passed (the deadline of e becomes the settle's). */
static ddpc_status settle(ddpc_exec *e, int waits_on) {
    ddpc_comm *c = e->c;
    e->settle_until = ddpc__deadline_in(c->settle_s > 0 ? c->settle_s : 1e-3);
    e->deadline = e->settle_until;
    e->waits_on = waits_on;
    ddpc_hdr note = e->fp;
    note.flags = DDPC_F_WAIT;
    note.nbytes = 0;
    note.rsvd = (uint32_t)waits_on;
    ddpc__send_notes(e, &note, 0);
    DDPC_INFO(COLL,
              "rank %d: #%" PRIu64 " timed out waiting on rank %d; collecting notices for %g s",
              c->rank, e->fp.seq, waits_on, c->settle_s);
    while (!all_noted(c) && !ddpc__expired(e->settle_until)) DDPC_CHECK(ddpc__progress(e, 1));
    return conclude(e);
}

/* A peer's DDPC_F_WAIT notice: it timed out waiting on the rank in h->rsvd.
 * Recorded (the peer is no longer driven or watched); a rank not settling
 * yet starts to. */
ddpc_status ddpc__stall_notice(ddpc_exec *e, int peer, const ddpc_hdr *h) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[peer];
    int reading, waits_on = waited_peer(c, &reading);
    pe->noted = 1;
    pe->waits_on = (int32_t)h->rsvd;
    pe->sq = pe->sq_tail = pe->rq = pe->rq_tail = NULL;
    DDPC_INFO(COLL, "rank %d: rank %d timed out in #%" PRIu64 " waiting on rank %d", c->rank, peer,
              h->seq, pe->waits_on);
    if (e->settle_until > 0) return DDPC_OK;
    if (waits_on < 0) waits_on = peer; /* nothing else pending: the op waits on it */
    return settle(e, waits_on);
}

/* The deadline passed: with more than two ranks, settle first; once the
 * settle is over too, conclude. */
ddpc_status ddpc__stall_timed_out(ddpc_exec *e) {
    if (e->settle_until > 0) return conclude(e);
    int reading, w = waited_peer(e->c, &reading);
    if (e->c->size <= 2 || w < 0) {
        e->waits_on = w;
        return conclude(e);
    }
    return settle(e, w);
}
