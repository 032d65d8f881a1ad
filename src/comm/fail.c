/*
 * fail.c — what happens when anything fails: the header checks that catch
 * ranks calling different collectives, the failure of an operation and its
 * notices to the peers, and the texts that name the rank at fault.
 *
 * Any failure is fatal for the communicator (the byte streams are no longer
 * in step): ddpc__fail records the error and shuts every connection down,
 * which is how the failure reaches ranks not directly involved. A peer's
 * failure notice (a header with DDPC_F_FAIL) makes this rank fail too,
 * naming the rank the peer lost or both calls of a mismatch.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm/progress.h"

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

void ddpc__describe(const ddpc__hdr *h, char *buf, size_t len) {
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

ddpc_status ddpc__fail(ddpc__exec *e, ddpc_status s, const char *fmt, ...) {
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
    ddpc__hdr note = e->fp;
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
void ddpc__send_notes(ddpc__exec *e, const ddpc__hdr *note, int close) {
    ddpc_comm *c = e->c;
    double note_by = ddpc__deadline_in(0.25);
    for (int p = 0; p < c->size; p++) {
        ddpc__peer *pe = &c->peers[p];
        int at_boundary = !pe->sq || pe->sq->x.done == 0;
        if (pe->conn && p != e->lost && !at_boundary && !ddpc__aborted(c) && pe->tp->send_rest) {
            at_boundary = pe->tp->send_rest(pe->conn, &pe->sq->x, note_by, c->abort_fd) == DDPC_OK;
        } else if (pe->conn && p != e->lost && !at_boundary && !ddpc__aborted(c)) {
            ddpc__xfer *x = &pe->sq->x;
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

static int same_call(const ddpc__hdr *a, const ddpc__hdr *b) {
    return a->kind == b->kind && a->dtype == b->dtype && a->op == b->op && a->root == b->root &&
           a->count == b->count && a->seq == b->seq;
}

/* A peer's failure notice h: fail this rank too, naming the rank it lost or
 * both calls of a mismatch. */
ddpc_status ddpc__peer_failed(ddpc__exec *e, int peer, const ddpc__hdr *h) {
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
ddpc_status ddpc__check_hdr(ddpc__exec *e, const ddpc__req *r) {
    const ddpc__hdr *h = &r->hdr, *w = &r->want;
    char mine[160], theirs[160];
    if (h->magic != DDPC_MSG_MAGIC)
        return ddpc__fail(e, DDPC_ERR_PROTOCOL,
                          "rank %d sent a message without ddpc's magic (0x%08x): corrupt stream",
                          r->peer, (unsigned)h->magic);
    if (h->flags == DDPC_F_FAIL) return ddpc__peer_failed(e, r->peer, h);
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
        ddpc__peer *pe = &c->peers[p];
        if (p == skip || !pe->conn || pe->bye || pe->noted) continue;
        int fd = pe->tp->poll_fd(pe->conn);
        if (fd < 0) continue;
        struct pollfd pf = { fd, POLLIN, 0 };
        if (poll(&pf, 1, 0) != 1) continue;
        char tmp[sizeof(ddpc__hdr)];
        size_t got;
        int eof;
        if (pe->tp->peek(pe->conn, tmp, sizeof tmp, &got, &eof) != DDPC_OK || !eof) continue;
        int n = snprintf(buf + used, len - used, "%s %d", used ? "" : "; also closed: rank", p);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
}

ddpc_status ddpc__lost(ddpc__exec *e, int peer, ddpc_status s, const char *dir) {
    ddpc__peer *pe = &e->c->peers[peer];
    /* did it leave a failure notice (naming the rank it lost) before closing?
     * (readable where its stream is at a message boundary: no receive from
     * it begun; a send that failed first must not hide the notice) */
    if (s == DDPC_ERR_PEER_LOST && (!pe->rq || pe->rq->x.done == 0) && !pe->rx_future) {
        ddpc__hdr h;
        size_t got = 0;
        int eof = 0;
        if (pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof) == DDPC_OK && got >= sizeof h &&
            h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_FAIL)
            return ddpc__peer_failed(e, peer, &h);
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
