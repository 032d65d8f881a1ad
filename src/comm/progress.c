/*
 * progress.c — moving posted messages: the per-peer send and receive queues,
 * header checks (sequence number and fingerprint), the spin-then-poll wait,
 * and what happens when anything fails.
 *
 * Only the thread executing an operation calls these. Each peer has a FIFO
 * of posted sends and one of posted receives; only the head of each moves,
 * so messages on one connection never interleave. A wait first retries the
 * transfers (for DDPC_SPIN_US), then sleeps in poll() on every connection
 * with work plus the abort eventfd, bounded by the operation's deadline.
 * Shared-memory connections are armed first (transport.h), so that their
 * peers ring the doorbell socket that poll() watches.
 *
 * Idle connections are watched too, so that a peer that dies while this rank
 * waits on someone else is noticed at once: when one becomes readable we
 * peek. End of stream with nothing before it is a lost peer; a goodbye
 * header is a clean close; anything else is data for a later operation
 * (left where it is, and the connection no longer watched until then).
 *
 * Any failure is fatal for the communicator (the byte streams are no longer
 * in step): ddpc__fail records the error and shuts every connection down,
 * which is how the failure reaches ranks not directly involved.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"

static const char *const kind_names[DDPC_K_COUNT] = {
    [DDPC_K_ALLREDUCE] = "allreduce",
    [DDPC_K_BROADCAST] = "broadcast",
    [DDPC_K_REDUCE] = "reduce",
    [DDPC_K_ALLGATHER] = "allgather",
    [DDPC_K_REDUCE_SCATTER] = "reduce_scatter",
    [DDPC_K_GATHER] = "gather",
    [DDPC_K_SCATTER] = "scatter",
    [DDPC_K_ALLTOALL] = "alltoall",
    [DDPC_K_ALLTOALLV] = "alltoallv",
    [DDPC_K_BARRIER] = "barrier",
    [DDPC_K_SEND] = "send/recv",
    [DDPC_K_RECV] = "send/recv",
};

const char *ddpc__kind_name(int kind) {
    return kind > 0 && kind < DDPC_K_COUNT ? kind_names[kind] : "?";
}

void ddpc__describe(const ddpc_hdr *h, char *buf, size_t len) {
    const char *k = ddpc__kind_name(h->kind);
    const char *t = ddpc_dtype_name((ddpc_dtype)h->dtype);
    const char *o = ddpc_op_name((ddpc_op)h->op);
    unsigned long long n = (unsigned long long)h->count;
    switch (h->kind) {
    case DDPC_K_ALLREDUCE:
    case DDPC_K_REDUCE_SCATTER: snprintf(buf, len, "%s(count=%llu, %s, %s)", k, n, t, o); break;
    case DDPC_K_REDUCE:
        snprintf(buf, len, "%s(count=%llu, %s, %s, root=%d)", k, n, t, o, (int)h->root);
        break;
    case DDPC_K_BROADCAST:
    case DDPC_K_GATHER:
    case DDPC_K_SCATTER:
        snprintf(buf, len, "%s(count=%llu, %s, root=%d)", k, n, t, (int)h->root);
        break;
    case DDPC_K_BARRIER: snprintf(buf, len, "barrier()"); break;
    case DDPC_K_SEND:
        snprintf(buf, len, "%s(count=%llu, %s, tag=%d)", k, n, t, (int)h->root);
        break;
    default: snprintf(buf, len, "%s(count=%llu, %s)", k, n, t); break;
    }
}

static int is_aborted(ddpc_comm *c) { return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE); }

ddpc_status ddpc__fail(ddpc_exec *e, ddpc_status s, const char *fmt, ...) {
    ddpc_comm *c = e->c;
    char what[640], desc[160], full[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ddpc__describe(&e->fp, desc, sizeof desc);
    const char *hint = "set DDPC_DEBUG=INFO for more detail";
    if (s == DDPC_ERR_TIMEOUT)
        hint = "raise DDPC_TIMEOUT if the peers are only slow; DDPC_DEBUG=INFO for more";
    else if (s == DDPC_ERR_MISMATCH)
        hint = "set DDPC_DEBUG=TRACE to log every collective on every rank";
    snprintf(full, sizeof full, "rank %d: %s #%" PRIu64 " failed: %s (%s)", c->rank, desc,
             e->fp.seq, what, hint);
    int first = c->failed == DDPC_OK;
    if (first) c->failed = s;
    pthread_mutex_lock(&c->err_mu);
    snprintf(c->last_err, sizeof c->last_err, "%s", full);
    pthread_mutex_unlock(&c->err_mu);
    DDPC_WARN(COLL, "%s", full);
    ddpc_hdr note = e->fp;
    note.flags = DDPC_F_FAIL;
    note.nbytes = (uint64_t)s;
    note.rsvd = (uint32_t)(s == DDPC_ERR_MISMATCH ? e->culprit : e->lost);
    ddpc__send_notes(e, &note, 1);
    ddpc__rec_end(e, s);
    if (first) ddpc__rec_dump(full);
    return ddpc__err(s, "%s", full);
}

/* Tells every peer note, at a message boundary of its stream, so ranks
 * that only see this one close can name the rank really lost: a message
 * half sent is finished first (a peer reads on while its operation lasts;
 * a full shared-memory ring is the usual case), all of it within a quarter
 * of a second so that a peer that does not read costs little. Every posted
 * send is dropped; with close set, the receives too and every connection
 * is shut down. */
void ddpc__send_notes(ddpc_exec *e, const ddpc_hdr *note, int close) {
    ddpc_comm *c = e->c;
    double note_by = ddpc__deadline_in(0.25);
    for (int p = 0; p < c->size; p++) {
        ddpc_peer *pe = &c->peers[p];
        int at_boundary = !pe->sq || pe->sq->x.done == 0;
        if (pe->conn && p != e->lost && !at_boundary && !is_aborted(c) && pe->tp->send_rest) {
            at_boundary = pe->tp->send_rest(pe->conn, &pe->sq->x, note_by, c->abort_fd) == DDPC_OK;
        } else if (pe->conn && p != e->lost && !at_boundary && !is_aborted(c)) {
            ddpc_xfer *x = &pe->sq->x;
            size_t off = x->done;
            at_boundary = 1;
            for (int i = 0; i < x->niov && at_boundary; i++) {
                size_t len = x->iov[i].iov_len;
                if (off < len && pe->tp->send_full(pe->conn, (char *)x->iov[i].iov_base + off,
                                                   len - off, note_by, c->abort_fd) != DDPC_OK)
                    at_boundary = 0;
                off = off > len ? off - len : 0;
            }
        }
        if (pe->conn && p != e->lost && at_boundary)
            pe->tp->send_full(pe->conn, note, sizeof *note, note_by, c->abort_fd);
        pe->sq = pe->sq_tail = NULL;
        if (!close) continue;
        pe->rq = pe->rq_tail = NULL;
        if (pe->conn) pe->tp->shutdown(pe->conn);
    }
}

void *ddpc__scratch(ddpc_comm *c, size_t nbytes) {
    if (nbytes <= c->scratch_len && c->scratch) return c->scratch;
    free(c->scratch);
    c->scratch = NULL;
    c->scratch_len = 0;
    size_t want = nbytes < 4096 ? 4096 : nbytes;
    void *p = NULL;
    if (posix_memalign(&p, 64, want) != 0) return NULL;
    c->scratch = p;
    c->scratch_len = want;
    return p;
}

static void enqueue(ddpc_req **head, ddpc_req **tail, ddpc_req *r) {
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

void ddpc__post_send_flags(ddpc_exec *e, ddpc_req *r, int peer, const void *buf, size_t nbytes,
                           int flags) {
    r->hdr = e->fp;
    r->hdr.flags = (uint8_t)flags;
    r->hdr.nbytes = nbytes;
    ddpc__xfer_init(&r->x, &r->hdr, sizeof r->hdr, (void *)buf, nbytes);
    r->peer = peer;
    r->is_send = 1;
    r->done = 0;
    r->checked = 1;
    r->tagged = r->ux = 0;
    r->ux_buf = NULL;
    ddpc_peer *p = &e->c->peers[peer];
    enqueue(&p->sq, &p->sq_tail, r);
}

void ddpc__post_send(ddpc_exec *e, ddpc_req *r, int peer, const void *buf, size_t nbytes) {
    ddpc__post_send_flags(e, r, peer, buf, nbytes, DDPC_F_DATA);
}

void ddpc__post_recv_flags(ddpc_exec *e, ddpc_req *r, int peer, void *buf, size_t nbytes,
                           int flags) {
    r->want = e->fp;
    r->want.flags = (uint8_t)flags;
    r->want.nbytes = nbytes;
    memset(&r->hdr, 0, sizeof r->hdr);
    ddpc__xfer_init(&r->x, &r->hdr, sizeof r->hdr, buf, nbytes);
    r->peer = peer;
    r->is_send = 0;
    r->done = 0;
    r->checked = 0;
    r->tagged = r->ux = 0;
    r->ux_buf = NULL;
    ddpc_peer *p = &e->c->peers[peer];
    enqueue(&p->rq, &p->rq_tail, r);
}

void ddpc__post_recv(ddpc_exec *e, ddpc_req *r, int peer, void *buf, size_t nbytes) {
    ddpc__post_recv_flags(e, r, peer, buf, nbytes, DDPC_F_DATA);
}

void ddpc__post_recv_combine(ddpc_exec *e, ddpc_req *r, int peer, void *buf, size_t nbytes,
                             ddpc_combine_fn fn, void *ctx, size_t unit) {
    ddpc__post_recv_flags(e, r, peer, buf, nbytes, DDPC_F_DATA);
    r->x.combine = fn;
    r->x.combine_ctx = ctx;
    r->x.unit = unit;
}

int ddpc__peer_combines(const ddpc_exec *e, int peer) {
    const ddpc_peer *pe = &e->c->peers[peer];
    return pe->conn && pe->tp->combines;
}

static int same_call(const ddpc_hdr *a, const ddpc_hdr *b) {
    return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
           a->count == b->count && a->seq == b->seq;
}

/* A peer's failure notice h: fail this rank too, naming the rank it lost or
 * both calls of a mismatch. */
static ddpc_status peer_failed(ddpc_exec *e, int peer, const ddpc_hdr *h) {
    ddpc_status st = h->nbytes < DDPC_STATUS_COUNT ? (ddpc_status)h->nbytes : DDPC_ERR_PEER_LOST;
    int who = (int32_t)h->rsvd;
    char mine[160], theirs[160];
    if (st == DDPC_ERR_PEER_LOST && who >= 0 && who < e->c->size) {
        e->lost = who;
        return ddpc__fail(e, DDPC_ERR_PEER_LOST,
                          "lost rank %d (rank %d saw it go and gave up; it exited, crashed, was "
                          "killed or aborted)",
                          who, peer);
    }
    if (st == DDPC_ERR_MISMATCH) {
        ddpc__describe(&e->fp, mine, sizeof mine);
        ddpc__describe(h, theirs, sizeof theirs);
        e->culprit = same_call(h, &e->fp) ? who : peer;
        if (h->seq != e->fp.seq) /* a failure in an operation this rank is not in */
            return ddpc__fail(
                e, DDPC_ERR_MISMATCH,
                "rank %d found a collective mismatch in its operation #%llu (%s) and gave up", peer,
                (unsigned long long)h->seq, theirs);
        if (!same_call(h, &e->fp))
            return ddpc__fail(
                e, DDPC_ERR_MISMATCH,
                "collective mismatch: this rank (%d) called %s as operation #%llu but rank %d "
                "called %s as operation #%llu",
                e->c->rank, mine, (unsigned long long)e->fp.seq, peer, theirs,
                (unsigned long long)h->seq);
        return ddpc__fail(
            e, DDPC_ERR_MISMATCH,
            "collective mismatch: rank %d's call differs from rank %d's and this rank's "
            "(%d) %s as operation #%llu",
            who, peer, e->c->rank, mine, (unsigned long long)e->fp.seq);
    }
    if (st == DDPC_ERR_TIMEOUT && who >= 0 && who < e->c->size && who != e->c->rank) {
        e->lost = who;
        return ddpc__fail(e, DDPC_ERR_TIMEOUT,
                          "rank %d is silent: rank %d timed out (DDPC_TIMEOUT) in its operation "
                          "#%llu and found it so",
                          who, peer, (unsigned long long)h->seq);
    }
    if (st == DDPC_ERR_ABORTED)
        return ddpc__fail(e, DDPC_ERR_PEER_LOST, "lost rank %d: it aborted its communicator", peer);
    return ddpc__fail(e, DDPC_ERR_PEER_LOST, "lost rank %d: it failed (%s) and gave up", peer,
                      ddpc_status_str(st));
}

/* Compares a received header with the expected one. */
static ddpc_status check_hdr(ddpc_exec *e, const ddpc_req *r) {
    const ddpc_hdr *h = &r->hdr, *w = &r->want;
    char mine[160], theirs[160];
    if (h->magic != DDPC_MSG_MAGIC)
        return ddpc__fail(e, DDPC_ERR_PROTOCOL,
                          "rank %d sent a message without ddpc's magic (0x%08x): corrupt stream",
                          r->peer, (unsigned)h->magic);
    if (h->flags == DDPC_F_FAIL) return peer_failed(e, r->peer, h);
    if (h->flags == DDPC_F_WAIT) /* what came behind it in the same read is more notices */
        return ddpc__stall_notice(e, r->peer, h, r->x.niov > 1 ? r->x.iov[1].iov_base : NULL,
                                  r->x.done - r->x.iov[0].iov_len);
    if (h->flags == DDPC_F_BYE) {
        ddpc__describe(w, mine, sizeof mine);
        return ddpc__fail(
            e, DDPC_ERR_MISMATCH,
            "rank %d destroyed its communicator while this rank (%d) waits in %s #%" PRIu64
            ": the ranks issued different numbers of operations",
            r->peer, e->c->rank, mine, w->seq);
    }
    if (!same_call(h, w) || h->flags != w->flags) {
        e->culprit = r->peer;
        ddpc__describe(w, mine, sizeof mine);
        ddpc__describe(h, theirs, sizeof theirs);
        return ddpc__fail(e, DDPC_ERR_MISMATCH,
                          "collective mismatch: this rank (%d) called %s as operation #%" PRIu64
                          " but rank %d called %s as operation #%" PRIu64,
                          e->c->rank, mine, w->seq, r->peer, theirs, h->seq);
    }
    if (h->nbytes != w->nbytes && w->kind == DDPC_K_ALLTOALLV) {
        e->culprit = r->peer;
        return ddpc__fail(
            e, DDPC_ERR_MISMATCH,
            "alltoallv: rank %d sends this rank (%d) %llu bytes, but this rank's receive count "
            "from it is %llu bytes",
            r->peer, e->c->rank, (unsigned long long)h->nbytes, (unsigned long long)w->nbytes);
    }
    if (h->nbytes != w->nbytes)
        return ddpc__fail(e, DDPC_ERR_PROTOCOL,
                          "rank %d sent %llu bytes where this rank expects %llu (a bug in ddpc)",
                          r->peer, (unsigned long long)h->nbytes, (unsigned long long)w->nbytes);
    return DDPC_OK;
}

/* The ranks (other than skip) whose connection has already closed, as
 * ", also closed: ranks 3 5" (or ""). Does not block. */
static void closed_peers(ddpc_comm *c, int skip, char *buf, size_t len) {
    buf[0] = '\0';
    size_t used = 0;
    for (int p = 0; p < c->size; p++) {
        ddpc_peer *pe = &c->peers[p];
        if (p == skip || !pe->conn || pe->bye || pe->noted) continue;
        int fd = pe->tp->poll_fd(pe->conn);
        if (fd < 0) continue;
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 0) != 1) continue;
        char tmp[sizeof(ddpc_hdr)];
        size_t got;
        int eof;
        if (pe->tp->peek(pe->conn, tmp, sizeof tmp, &got, &eof) != DDPC_OK || !eof) continue;
        int n = snprintf(buf + used, len - used, "%s %d", used ? "" : "; also closed: rank", p);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
}

static ddpc_status peer_failed(ddpc_exec *e, int peer, const ddpc_hdr *h);

static ddpc_status lost(ddpc_exec *e, int peer, ddpc_status s, const char *dir) {
    ddpc_peer *pe = &e->c->peers[peer];
    /* did it leave a failure notice (naming the rank it lost) before closing?
     * (readable where its stream is at a message boundary: no receive from
     * it begun; a send that failed first must not hide the notice) */
    if (s == DDPC_ERR_PEER_LOST && (!pe->rq || pe->rq->x.done == 0) && !pe->rx_future) {
        ddpc_hdr h;
        size_t got = 0;
        int eof = 0;
        if (pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof) == DDPC_OK && got >= sizeof h &&
            h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_FAIL)
            return peer_failed(e, peer, &h);
        if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_WAIT)
            return ddpc__stall_notice(e, peer, &h, NULL, 0);
    }
    e->lost = peer;
    char more[256];
    char why[512];
    snprintf(why, sizeof why, "%s", ddpc_last_error());
    closed_peers(e->c, peer, more, sizeof more);
    if (s == DDPC_ERR_PEER_LOST)
        return ddpc__fail(
            e, s, "lost rank %d while %s it (%s; it exited, crashed, was killed or aborted)%s",
            peer, dir, why, more);
    return ddpc__fail(e, s, "%s rank %d: %s%s", dir, peer, why, more);
}

/* ------------------------------------------------ tags (point to point)
 *
 * Point-to-point messages match by (peer, tag), as MPI's and gloo's do, on a
 * stream that carries them in the order they were sent. The receiver decides
 * where a message goes before it reads a byte of it: a tagged receive at the
 * head of the peer's queue peeks at the next header (transport.peek), and
 *   1. a point-to-point message whose tag a posted receive from that peer
 *      wants goes into the earliest such receive (moved to the head);
 *   2. one that no posted receive wants is read whole into a buffer of its
 *      own, an unexpected message kept per peer in arrival order, so that
 *      the stream moves on to what is wanted;
 *   3. anything else (a notice, a collective's message) is read by the head
 *      as before, and its header check names what went wrong.
 * A receive first takes the earliest unexpected message of its tag, so per
 * (peer, tag) messages still match in the order sent. A message is always
 * read the way it was sent (header and payload in one transfer), which the
 * streams transport needs (its split follows the transfer's length).
 *
 * No deadlock: whenever a rank waits for any message from a peer it reads
 * that peer's stream, so a sender never waits on a tag the receiver has not
 * reached (beyond the transport's buffers, as before). Memory: unexpected
 * messages hold c->ux_bytes of payload in all, at most
 * DDPC_P2P_UNEXPECTED_BYTES; a message that would pass that fails the
 * operation with an error naming the variable, never a silent stall. */

static int is_p2p_data(const ddpc_hdr *h) {
    return h->magic == DDPC_MSG_MAGIC && h->kind == DDPC_K_SEND && h->flags == DDPC_F_DATA;
}

void ddpc__post_recv_tagged(ddpc_exec *e, ddpc_req *r, int peer, void *buf, size_t nbytes) {
    ddpc__post_recv(e, r, peer, buf, nbytes);
    r->tagged = 1;
}

static void ux_release(ddpc_comm *c, ddpc_req *u) {
    c->ux_bytes -= u->x.niov > 1 ? u->x.iov[1].iov_len : 0;
    free(u->ux_buf);
    free(u);
}

/* Gives r the unexpected message u of its tag (u is freed): its header is
 * checked as one read off the stream would be. */
static ddpc_status take_ux(ddpc_exec *e, ddpc_req *r, ddpc_req *u) {
    r->hdr = u->hdr;
    r->want.seq = u->hdr.seq;
    r->checked = 1;
    size_t n = u->x.niov > 1 ? u->x.iov[1].iov_len : 0;
    ddpc_status s = check_hdr(e, r);
    if (s == DDPC_OK && n) memcpy(r->x.iov[1].iov_base, u->ux_buf, n);
    ux_release(e->c, u);
    DDPC_CHECK(s);
    r->x.done = r->x.total;
    r->done = 1;
    return DDPC_OK;
}

/* Completes every receive posted from pe that has read nothing yet and whose
 * tag an unexpected message holds, in the order posted; *moved = 1 when one
 * completed (so that the wait does not go to sleep in poll: no byte may
 * come to wake it). */
static ddpc_status match_ux(ddpc_exec *e, ddpc_peer *pe, int *moved) {
    ddpc_req **rp = &pe->rq, *prev = NULL;
    while (*rp && pe->ux_head) {
        ddpc_req *r = *rp, *u = NULL, *uprev = NULL;
        if (r->tagged && !r->ux && r->x.done == 0)
            for (u = pe->ux_head; u && u->hdr.root != r->want.root; uprev = u, u = u->next) {}
        if (!u) {
            prev = r;
            rp = &r->next;
            continue;
        }
        if (uprev)
            uprev->next = u->next;
        else
            pe->ux_head = u->next;
        if (pe->ux_tail == u) pe->ux_tail = uprev;
        *rp = r->next;
        if (pe->rq_tail == r) pe->rq_tail = prev;
        *moved = 1;
        DDPC_CHECK(take_ux(e, r, u));
    }
    return DDPC_OK;
}

/* Readies u to read the whole message h as unexpected; fails when held
 * messages would pass DDPC_P2P_UNEXPECTED_BYTES. */
static ddpc_status ux_ready(ddpc_exec *e, int p, ddpc_req *u, const ddpc_hdr *h) {
    ddpc_comm *c = e->c;
    size_t n = (size_t)h->nbytes;
    if (h->nbytes > c->ux_max || c->ux_bytes > c->ux_max - n)
        return ddpc__fail(e, DDPC_ERR_NOMEM,
                          "rank %d sent a message with tag %d (%llu bytes) that no receive "
                          "posted here wants yet, and holding it aside would take the unexpected "
                          "messages held past DDPC_P2P_UNEXPECTED_BYTES=%zu bytes (%zu held): "
                          "post the receives sooner or raise it",
                          p, (int)h->root, (unsigned long long)h->nbytes, c->ux_max, c->ux_bytes);
    u->ux_buf = malloc(n ? n : 1);
    if (!u->ux_buf)
        return ddpc__fail(e, DDPC_ERR_NOMEM,
                          "out of memory for an unexpected message of %llu bytes from rank %d",
                          (unsigned long long)h->nbytes, p);
    c->ux_bytes += n;
    u->want = *h;
    memset(&u->hdr, 0, sizeof u->hdr);
    ddpc__xfer_init(&u->x, &u->hdr, sizeof u->hdr, u->ux_buf, n);
    u->checked = 0;
    return DDPC_OK;
}

/* A receive for the next message from p, of any tag, kept as unexpected. */
static ddpc_req *ux_new(int p) {
    ddpc_req *u = calloc(1, sizeof *u);
    if (!u) return NULL;
    u->want.magic = DDPC_MSG_MAGIC;
    u->want.kind = DDPC_K_SEND;
    u->want.root = -1;
    ddpc__xfer_init(&u->x, &u->hdr, sizeof u->hdr, NULL, 0);
    u->peer = p;
    u->tagged = u->ux = 1;
    return u;
}

/* The head of p's receives is tagged and has read nothing: peeks at the next
 * header and puts at the head the receive it belongs to (see above). *wait
 * = 1 while the header has not all come. */
static ddpc_status route(ddpc_exec *e, int p, int *wait) {
    ddpc_peer *pe = &e->c->peers[p];
    ddpc_req *r = pe->rq, *q, *qprev = NULL;
    ddpc_hdr h;
    size_t got = 0;
    int eof = 0;
    ddpc_status s = pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof);
    if (s != DDPC_OK) return lost(e, p, s, "receiving from");
    if (eof) return DDPC_OK; /* the read finds it gone */
    if (got < sizeof h) {
        *wait = 1;
        return DDPC_OK;
    }
    if (!is_p2p_data(&h)) return DDPC_OK; /* 3. */
    if (!r->ux && r->want.root == h.root) {
        r->want.seq = h.seq;
        return DDPC_OK;
    }
    for (q = r; q; qprev = q, q = q->next) /* 1. */
        if (q->tagged && !q->ux && q->x.done == 0 && q->want.root == h.root) break;
    if (q) {
        qprev->next = q->next;
        if (pe->rq_tail == q) pe->rq_tail = qprev;
        q->next = pe->rq;
        pe->rq = q;
        q->want.seq = h.seq;
        if (r->ux) { /* a drain (ddpc__p2p_drain) that is no longer needed */
            qprev = q;
            while (qprev->next != r) qprev = qprev->next;
            qprev->next = r->next;
            if (pe->rq_tail == r) pe->rq_tail = qprev;
            pe->ux_in = NULL;
            free(r);
        }
        return DDPC_OK;
    }
    ddpc_req *u = r; /* 2. */
    if (!r->ux) {
        u = ux_new(p);
        if (!u) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for an unexpected message");
        u->next = pe->rq;
        pe->rq = u;
        pe->ux_in = u;
    }
    return ux_ready(e, p, u, &h);
}

int ddpc__p2p_waiting(ddpc_comm *c, int peer, int tag) {
    ddpc_peer *pe = &c->peers[peer];
    for (ddpc_req *r = pe->rq; r; r = r->next)
        if (r->tagged && !r->ux && r->want.root == tag) return 0; /* posted first: its */
    for (ddpc_req *u = pe->ux_head; u; u = u->next)
        if (u->hdr.root == tag) return 1;
    if (pe->rq || !pe->conn) return 0;
    ddpc_hdr h;
    size_t got = 0;
    int eof = 0;
    if (pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof) != DDPC_OK || got < sizeof h ||
        !is_p2p_data(&h))
        return 0;
    return h.root == tag ? 1 : -1;
}

ddpc_status ddpc__p2p_drain(ddpc_comm *c, int peer) {
    ddpc_peer *pe = &c->peers[peer];
    if (pe->rq || pe->ux_in) return DDPC_OK;
    ddpc_req *u = ux_new(peer);
    if (!u) return ddpc__err(DDPC_ERR_NOMEM, "out of memory for an unexpected message");
    pe->ux_in = u;
    enqueue(&pe->rq, &pe->rq_tail, u);
    return DDPC_OK;
}

void ddpc__ux_free(ddpc_comm *c) {
    for (int p = 0; p < c->size; p++) {
        ddpc_peer *pe = &c->peers[p];
        while (pe->ux_head) {
            ddpc_req *u = pe->ux_head;
            pe->ux_head = u->next;
            ux_release(c, u);
        }
        pe->ux_tail = NULL;
        if (pe->ux_in) ux_release(c, pe->ux_in);
        pe->ux_in = NULL;
    }
}

/* One non-blocking pass over every queue; *moved = 1 if any byte moved.
 * A peer with messages posted and no connection yet gets one (link.c). */
static ddpc_status drive(ddpc_exec *e, int *moved) {
    ddpc_comm *c = e->c;
    int linking = 0;
    for (int p = 0; p < c->size; p++) {
        ddpc_peer *pe = &c->peers[p];
        ddpc_req *r;
        if (pe->noted) { /* timed out: only its notices are read */
            DDPC_CHECK(ddpc__stall_read(e, p));
            continue;
        }
        if (!pe->conn) {
            if (!pe->sq && !pe->rq) continue;
            DDPC_CHECK(ddpc__link_need(e, p));
            if (!pe->conn) {
                linking = 1;
                continue;
            }
        }
        while ((r = pe->sq) != NULL) {
            size_t mv = 0;
            ddpc_status s = pe->tp->send(pe->conn, &r->x, &mv);
            if (mv) *moved = 1;
            if (s != DDPC_OK) return lost(e, p, s, "sending to");
            if (r->x.done < r->x.total) break;
            r->done = 1;
            pe->sq = r->next;
            if (!pe->sq) pe->sq_tail = NULL;
        }
        if (pe->ux_head && pe->rq) DDPC_CHECK(match_ux(e, pe, moved));
        while ((r = pe->rq) != NULL) {
            if (r->tagged && r->x.done == 0 && !r->ux_buf) {
                int wait = 0;
                DDPC_CHECK(route(e, p, &wait));
                if (wait) break;
                r = pe->rq;
            }
            size_t mv = 0;
            ddpc_status s = pe->tp->recv(pe->conn, &r->x, &mv);
            if (mv) {
                *moved = 1;
                pe->rx_future = 0;
                /* read by the recorder's dump and the stall message */
                __atomic_store(&pe->last_rx, &e->now, __ATOMIC_RELAXED);
            }
            if (!r->checked && r->x.done >= sizeof(ddpc_hdr)) {
                r->checked = 1;
                DDPC_CHECK(check_hdr(e, r));
                if (pe->noted) break; /* it was a notice (r is dropped) */
            }
            if (s != DDPC_OK) return lost(e, p, s, "receiving from");
            if (r->x.done < r->x.total) break;
            r->done = 1;
            pe->rq = r->next;
            if (!pe->rq) pe->rq_tail = NULL;
            if (r->ux) { /* whole: held until a receive of its tag (a posted one may want it) */
                pe->ux_in = NULL;
                r->next = NULL;
                enqueue(&pe->ux_head, &pe->ux_tail, r);
                if (pe->rq) DDPC_CHECK(match_ux(e, pe, moved));
            }
        }
    }
    if (linking) DDPC_CHECK(ddpc__link_poll(e, moved));
    return DDPC_OK;
}

/* Looks at an idle connection that poll() reported: lost, goodbye, or data
 * for a later operation. */
static ddpc_status inspect_idle(ddpc_exec *e, int p) {
    ddpc_peer *pe = &e->c->peers[p];
    ddpc_hdr h;
    size_t got;
    int eof;
    ddpc_status s = pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof);
    if (s != DDPC_OK) return lost(e, p, s, "watching");
    if (eof) {
        ddpc__err(DDPC_ERR_PEER_LOST, "connection closed");
        return lost(e, p, DDPC_ERR_PEER_LOST, "watching");
    }
    if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_BYE)
        pe->bye = 1;
    else if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_WAIT)
        return ddpc__stall_notice(e, p, &h, NULL, 0);
    else if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_FAIL &&
             !(e->fp.kind != DDPC_K_SEND && h.kind != DDPC_K_SEND && h.seq > e->fp.seq))
        return peer_failed(e, p, &h);
    else if (got > 0)
        pe->rx_future = 1; /* data, or a failure in a later operation: for later */
    /* got == 0 without EOF: nothing after all (a transport's late doorbell) */
    return DDPC_OK;
}

/* 1. Spins: cheap retries catch a reply that is microseconds away. *moved
 * = 1 when something moved.
 * a. Where every local rank has a CPU, the first tries only pause: a peer
 *    on another core often answers in under a microsecond, less than one
 *    sched_yield costs under a hypervisor. Their number adapts: a wait they
 *    end restores it; one they do not end halves it, down to none, since
 *    the peers are then late or not running (the scheduler or the
 *    hypervisor may have put two ranks on one core, where a rank that does
 *    not yield keeps its peer off it); every 64th wait tries them all again.
 * b. The rest yield the core at each try, so that a peer waiting for this
 *    core (ranks outnumbering cores) runs instead. */
static ddpc_status spin(ddpc_exec *e, int *moved) {
    ddpc_comm *c = e->c;
    if (c->busy_polls > 0) {
        int n = c->poll_budget;
        if (c->poll_waits % 16 == 0) e->now = ddpc__now(); /* last_rx's clock, now and then */
        if (c->poll_waits++ % 64 == 0) n = c->busy_polls;
        for (int i = 0; i < n; i++) {
            ddpc__cpu_relax();
            DDPC_CHECK(drive(e, moved));
            if (*moved) {
                c->poll_budget = c->busy_polls;
                return DDPC_OK;
            }
        }
        c->poll_budget /= 2;
    }
    if (c->spin_s > 0) {
        double until = ddpc__now() + c->spin_s;
        do {
            sched_yield();
            DDPC_CHECK(drive(e, moved));
            if (*moved) return DDPC_OK;
            if (is_aborted(c))
                return ddpc__fail(e, DDPC_ERR_ABORTED,
                                  "the communicator was aborted (ddpc_comm_abort)");
        } while ((e->now = ddpc__now()) < until);
    }
    return DDPC_OK;
}

/* What one sleep in poll watches: the abort eventfd first, then each
 * connection with work, and the idle ones (to notice a peer's death), and
 * last what lazy connections wait on (link.c). */
typedef struct pollset {
    struct pollfd *pf;
    int *pidx;    /* the peer of each entry; -1 for the abort eventfd, -2 for links */
    short *ready; /* POLLIN for an entry its transport's arm found ready */
    int n, nready, cap;
    struct pollfd pf_small[17];
    int pidx_small[17];
    short ready_small[17];
} pollset;

/* Room for c's connections, its abort eventfd and its links' descriptors:
 * on the stack for up to 17 in all, else on the heap. */
static ddpc_status pollset_init(ddpc_comm *c, pollset *ps) {
    ps->pf = ps->pf_small;
    ps->pidx = ps->pidx_small;
    ps->ready = ps->ready_small;
    ps->n = ps->nready = 0;
    size_t cap = (size_t)c->size + 1 +
                 (c->lis ? (size_t)c->size * (size_t)c->streams + 1 + (size_t)c->ninc : 0);
    ps->cap = (int)cap;
    if (cap <= 17) return DDPC_OK;
    ps->pf = malloc(sizeof *ps->pf * cap);
    ps->pidx = malloc(sizeof *ps->pidx * cap);
    ps->ready = malloc(sizeof *ps->ready * cap);
    if (ps->pf && ps->pidx && ps->ready) return DDPC_OK;
    free(ps->pf);
    free(ps->pidx);
    free(ps->ready);
    return DDPC_ERR_NOMEM;
}

static void pollset_free(pollset *ps) {
    if (ps->pf == ps->pf_small) return;
    free(ps->pf);
    free(ps->pidx);
    free(ps->ready);
}

/* Fills ps: the abort eventfd, then every connection with work or idle; a
 * transport with arm (shm) is told first, and may already be ready. */
static void pollset_fill(ddpc_comm *c, pollset *ps) {
    int n = 0;
    ps->pf[n] = (struct pollfd){ c->abort_fd, POLLIN, 0 };
    ps->ready[n] = 0;
    ps->pidx[n++] = -1;
    for (int p = 0; p < c->size; p++) {
        ddpc_peer *pe = &c->peers[p];
        if (!pe->conn || (pe->noted && pe->notes.done)) continue;
        short ev = 0;
        if (pe->rq) ev |= POLLIN;
        if (pe->sq) ev |= POLLOUT;
        if (!ev && ((!pe->rx_future && !pe->bye) || pe->noted)) ev = POLLIN;
        if (!ev) continue;
        int fd = pe->tp->poll_fd(pe->conn);
        if (fd < 0) continue;
        ps->ready[n] = 0;
        if (pe->tp->arm) {
            if (pe->tp->arm(pe->conn, ev)) {
                ps->ready[n] = POLLIN;
                ps->nready++;
            }
            ev = POLLIN; /* the doorbell; the socket is always writable */
        }
        ps->pf[n] = (struct pollfd){ fd, ev, 0 };
        ps->pidx[n++] = p;
    }
    int fds[ps->cap > n ? ps->cap - n : 1];
    int k = ddpc__link_fds(c, fds, ps->cap - n);
    for (int i = 0; i < k; i++) {
        ps->pf[n] = (struct pollfd){ fds[i], POLLIN, 0 };
        ps->ready[n] = 0;
        ps->pidx[n++] = -2;
    }
    ps->n = n;
}

/* Polls ps for at most ms (not at all when an armed one is ready), disarms
 * the armed ones and counts those ready as polled. poll()'s result; errno
 * kept in *err. */
static int pollset_wait(ddpc_comm *c, pollset *ps, int ms, int *err) {
    int k = poll(ps->pf, (nfds_t)ps->n, ps->nready ? 0 : ms);
    *err = errno;
    for (int i = 1; i < ps->n; i++) {
        if (ps->pidx[i] < 0) continue;
        ddpc_peer *pe = &c->peers[ps->pidx[i]];
        if (!pe->tp->arm) continue;
        pe->tp->arm(pe->conn, 0);
        if (k >= 0 && ps->ready[i]) {
            if (!ps->pf[i].revents) k++;
            ps->pf[i].revents |= ps->ready[i];
        }
    }
    return k;
}

/* 2. Sleeps in poll on the busy connections, the idle ones and abort,
 * until something can move, the deadline passes (or e->nap), or c is
 * aborted; an idle connection that woke it is looked at. */
static ddpc_status sleep_in_poll(ddpc_exec *e) {
    ddpc_comm *c = e->c;
    int ms = ddpc__deadline_ms(e->deadline, 0);
    if (ms == 0) return ddpc__stall_timed_out(e);
    if (e->nap > 0 && (ms < 0 || ms > (int)(e->nap * 1000) + 1)) ms = (int)(e->nap * 1000) + 1;
    pollset ps;
    if (pollset_init(c, &ps) != DDPC_OK)
        return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for poll");
    pollset_fill(c, &ps);
    int poll_errno = 0;
    int k = pollset_wait(c, &ps, ms, &poll_errno);
    e->now = ddpc__now();
    ddpc_status s = DDPC_OK;
    if (k < 0 && poll_errno != EINTR) {
        s = ddpc__fail(e, DDPC_ERR_SYSTEM, "poll: %s", strerror(poll_errno));
        goto out;
    }
    int links = 0;
    for (int i = 1; k > 0 && i < ps.n; i++) {
        int p = ps.pidx[i];
        if (p < 0) {
            links |= ps.pf[i].revents != 0;
            continue;
        }
        ddpc_peer *pe = &c->peers[p];
        if (!ps.pf[i].revents || pe->rq || pe->sq) continue;
        if (pe->noted)
            DDPC_CHECK_GOTO(ddpc__stall_read(e, p), s, out);
        else
            DDPC_CHECK_GOTO(inspect_idle(e, p), s, out);
    }
    int moved = 0;
    if (links) DDPC_CHECK_GOTO(ddpc__link_poll(e, &moved), s, out);
    if (is_aborted(c))
        s = ddpc__fail(e, DDPC_ERR_ABORTED, "the communicator was aborted (ddpc_comm_abort)");
    else if (k == 0 && ddpc__expired(e->deadline))
        s = ddpc__stall_timed_out(e);
out:
    pollset_free(&ps);
    return s;
}

ddpc_status ddpc__progress(ddpc_exec *e, int block) {
    ddpc_comm *c = e->c;
    if (is_aborted(c))
        return ddpc__fail(e, DDPC_ERR_ABORTED, "the communicator was aborted (ddpc_comm_abort)");
    int moved = 0;
    /* a lazy communicator answers its peers' connections now and then even
     * while it never sleeps (sleeping, poll wakes it for them) */
    if (c->lis && (c->link_tick++ & 255) == 0) DDPC_CHECK(ddpc__link_poll(e, &moved));
    DDPC_CHECK(drive(e, &moved));
    if (moved || !block) return DDPC_OK;
    DDPC_CHECK(spin(e, &moved));
    if (moved) return DDPC_OK;
    return sleep_in_poll(e);
}

ddpc_status ddpc__wait(ddpc_exec *e, ddpc_req *r) {
    while (!r->done) DDPC_CHECK(ddpc__progress(e, 1));
    return DDPC_OK;
}

ddpc_status ddpc__wait_all(ddpc_exec *e, ddpc_req *rs, int n) {
    for (int i = 0; i < n; i++) DDPC_CHECK(ddpc__wait(e, &rs[i]));
    return DDPC_OK;
}

ddpc_status ddpc__check_ring(ddpc_exec *e) {
    ddpc_comm *c = e->c;
    int n = c->size, next = (c->rank + 1) % n, prev = (c->rank + n - 1) % n;
    if (n == 1) return DDPC_OK;
    /* both directions: every neighbour of an odd one out notices */
    ddpc_req r[4];
    int k = 0;
    ddpc__post_send_flags(e, &r[k++], next, NULL, 0, DDPC_F_CHECK);
    ddpc__post_recv_flags(e, &r[k++], prev, NULL, 0, DDPC_F_CHECK);
    if (n > 2) {
        ddpc__post_send_flags(e, &r[k++], prev, NULL, 0, DDPC_F_CHECK);
        ddpc__post_recv_flags(e, &r[k++], next, NULL, 0, DDPC_F_CHECK);
    }
    return ddpc__wait_all(e, r, k);
}
