/*
 * tags.c — point-to-point messages matched by (peer, tag), and the
 * unexpected messages held aside until a receive of their tag comes; the
 * progress engine (progress.c) calls route and match_ux as it drives a
 * peer's receives.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/progress.h"

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

static int is_p2p_data(const ddpc__hdr *h) {
    return h->magic == DDPC_MSG_MAGIC && h->kind == DDPC_K_SEND && h->flags == DDPC_F_DATA;
}

void ddpc__post_recv_tagged(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes) {
    ddpc__post_recv(e, r, peer, buf, nbytes);
    r->tagged = 1;
}

static void ux_release(ddpc_comm *c, ddpc__req *u) {
    c->ux_bytes -= u->x.niov > 1 ? u->x.iov[1].iov_len : 0;
    free(u->ux_buf);
    free(u);
}

/* Gives r the unexpected message u of its tag (u is freed): its header is
 * checked as one read off the stream would be. */
static ddpc_status take_ux(ddpc__exec *e, ddpc__req *r, ddpc__req *u) {
    r->hdr = u->hdr;
    r->want.seq = u->hdr.seq;
    r->checked = 1;
    size_t n = u->x.niov > 1 ? u->x.iov[1].iov_len : 0;
    ddpc_status s = ddpc__check_hdr(e, r);
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
ddpc_status ddpc__match_ux(ddpc__exec *e, ddpc__peer *pe, int *moved) {
    ddpc__req **rp = &pe->rq, *prev = NULL;
    while (*rp && pe->ux_head) {
        ddpc__req *r = *rp, *u = NULL, *uprev = NULL;
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
static ddpc_status ux_ready(ddpc__exec *e, int p, ddpc__req *u, const ddpc__hdr *h) {
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
static ddpc__req *ux_new(int p) {
    ddpc__req *u = calloc(1, sizeof *u);
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
ddpc_status ddpc__route(ddpc__exec *e, int p, int *wait) {
    ddpc__peer *pe = &e->c->peers[p];
    ddpc__req *r = pe->rq, *q, *qprev = NULL;
    ddpc__hdr h;
    size_t got = 0;
    int eof = 0;
    ddpc_status s = pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof);
    if (s != DDPC_OK) return ddpc__lost(e, p, s, "receiving from");
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
    ddpc__req *u = r; /* 2. */
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
    ddpc__peer *pe = &c->peers[peer];
    for (ddpc__req *r = pe->rq; r; r = r->next)
        if (r->tagged && !r->ux && r->want.root == tag) return 0; /* posted first: its */
    for (ddpc__req *u = pe->ux_head; u; u = u->next)
        if (u->hdr.root == tag) return 1;
    if (pe->rq || !pe->conn) return 0;
    ddpc__hdr h;
    size_t got = 0;
    int eof = 0;
    if (pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof) != DDPC_OK || got < sizeof h ||
        !is_p2p_data(&h))
        return 0;
    return h.root == tag ? 1 : -1;
}

ddpc_status ddpc__p2p_drain(ddpc_comm *c, int peer) {
    ddpc__peer *pe = &c->peers[peer];
    if (pe->rq || pe->ux_in) return DDPC_OK;
    ddpc__req *u = ux_new(peer);
    if (!u) return ddpc__err(DDPC_ERR_NOMEM, "out of memory for an unexpected message");
    pe->ux_in = u;
    ddpc__enqueue(&pe->rq, &pe->rq_tail, u);
    return DDPC_OK;
}

void ddpc__ux_free(ddpc_comm *c) {
    for (int p = 0; p < c->size; p++) {
        ddpc__peer *pe = &c->peers[p];
        while (pe->ux_head) {
            ddpc__req *u = pe->ux_head;
            pe->ux_head = u->next;
            ux_release(c, u);
        }
        pe->ux_tail = NULL;
        if (pe->ux_in) ux_release(c, pe->ux_in);
        pe->ux_in = NULL;
    }
}
