/*
 * progress.c — moving posted messages: the per-peer send and receive queues
 * and the spin-then-poll wait. Header checks and failures are fail.c's,
 * point-to-point tag matching tags.c's.
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
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/progress.h"

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

void ddpc__enqueue(ddpc__req **head, ddpc__req **tail, ddpc__req *r) {
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

void ddpc__post_send_flags(ddpc__exec *e, ddpc__req *r, int peer, const void *buf, size_t nbytes,
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
    ddpc__peer *p = &e->c->peers[peer];
    ddpc__enqueue(&p->sq, &p->sq_tail, r);
}

void ddpc__post_send(ddpc__exec *e, ddpc__req *r, int peer, const void *buf, size_t nbytes) {
    ddpc__post_send_flags(e, r, peer, buf, nbytes, DDPC_F_DATA);
}

void ddpc__post_recv_flags(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes,
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
    ddpc__peer *p = &e->c->peers[peer];
    ddpc__enqueue(&p->rq, &p->rq_tail, r);
}

void ddpc__post_recv(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes) {
    ddpc__post_recv_flags(e, r, peer, buf, nbytes, DDPC_F_DATA);
}

void ddpc__post_recv_combine(ddpc__exec *e, ddpc__req *r, int peer, void *buf, size_t nbytes,
                             ddpc__combine_fn fn, void *ctx, size_t unit) {
    ddpc__post_recv_flags(e, r, peer, buf, nbytes, DDPC_F_DATA);
    r->x.combine = fn;
    r->x.combine_ctx = ctx;
    r->x.unit = unit;
}

int ddpc__peer_combines(const ddpc__exec *e, int peer) {
    const ddpc__peer *pe = &e->c->peers[peer];
    return pe->conn && pe->tp->combines;
}

/* One non-blocking pass over every queue; *moved = 1 if any byte moved.
 * A peer with messages posted and no connection yet gets one (link.c). */
static ddpc_status drive(ddpc__exec *e, int *moved) {
    ddpc_comm *c = e->c;
    int linking = 0;
    for (int p = 0; p < c->size; p++) {
        ddpc__peer *pe = &c->peers[p];
        ddpc__req *r;
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
            if (s != DDPC_OK) return ddpc__lost(e, p, s, "sending to");
            if (r->x.done < r->x.total) break;
            r->done = 1;
            pe->sq = r->next;
            if (!pe->sq) pe->sq_tail = NULL;
        }
        if (pe->ux_head && pe->rq) DDPC_CHECK(ddpc__match_ux(e, pe, moved));
        while ((r = pe->rq) != NULL) {
            if (r->tagged && r->x.done == 0 && !r->ux_buf) {
                int wait = 0;
                DDPC_CHECK(ddpc__route(e, p, &wait));
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
            if (!r->checked && r->x.done >= sizeof(ddpc__hdr)) {
                r->checked = 1;
                DDPC_CHECK(ddpc__check_hdr(e, r));
                if (pe->noted) break; /* it was a notice (r is dropped) */
            }
            if (s != DDPC_OK) return ddpc__lost(e, p, s, "receiving from");
            if (r->x.done < r->x.total) break;
            r->done = 1;
            pe->rq = r->next;
            if (!pe->rq) pe->rq_tail = NULL;
            if (r->ux) { /* whole: held until a receive of its tag (a posted one may want it) */
                pe->ux_in = NULL;
                r->next = NULL;
                ddpc__enqueue(&pe->ux_head, &pe->ux_tail, r);
                if (pe->rq) DDPC_CHECK(ddpc__match_ux(e, pe, moved));
            }
        }
    }
    if (linking) DDPC_CHECK(ddpc__link_poll(e, moved));
    return DDPC_OK;
}

/* Looks at an idle connection that poll() reported: lost, goodbye, or data
 * for a later operation. */
static ddpc_status inspect_idle(ddpc__exec *e, int p) {
    ddpc__peer *pe = &e->c->peers[p];
    ddpc__hdr h;
    size_t got;
    int eof;
    ddpc_status s = pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof);
    if (s != DDPC_OK) return ddpc__lost(e, p, s, "watching");
    if (eof) {
        ddpc__err(DDPC_ERR_PEER_LOST, "connection closed");
        return ddpc__lost(e, p, DDPC_ERR_PEER_LOST, "watching");
    }
    if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_BYE)
        pe->bye = 1;
    else if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_WAIT)
        return ddpc__stall_notice(e, p, &h, NULL, 0);
    else if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.flags == DDPC_F_FAIL &&
             !(e->fp.kind != DDPC_K_SEND && h.kind != DDPC_K_SEND && h.seq > e->fp.seq))
        return ddpc__peer_failed(e, p, &h);
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
 *    core (ranks outnumbering cores) runs instead. A yield that keeps the
 *    rank off its CPU for DDPC_YIELD_LOST_S or more gave the CPU to some other
 *    program for a time slice (milliseconds): yielding on, every message
 *    would wait a slice (allreduce of 8 B took 8-12 ms beside a `yes` on
 *    each CPU, 23 us sleeping at once), while a rank asleep in poll is
 *    woken, and run, as soon as its peer rings. So the wait sleeps at
 *    once, and so do the next 16 waits; each later lost yield doubles
 *    that run (up to YIELD_SKIP_MAX), a wait whose yields all come back
 *    quickly resets it. */
#define YIELD_SKIP_MAX 4096u

static void yield_lost(ddpc_comm *c) {
    c->yield_backoff = c->yield_backoff ? c->yield_backoff * 2 : 16;
    if (c->yield_backoff > YIELD_SKIP_MAX) c->yield_backoff = YIELD_SKIP_MAX;
    c->yield_skip = c->yield_backoff;
}

static ddpc_status spin(ddpc__exec *e, int *moved) {
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
        if (c->yield_skip > 0) {
            c->yield_skip--;
            return DDPC_OK; /* sleeps */
        }
        double t = ddpc__now(), until = t + c->spin_s;
        for (;;) {
            sched_yield();
            double now = ddpc__now();
            int lost = now - t >= DDPC_YIELD_LOST_S;
            e->now = t = now;
            if (lost) yield_lost(c);
            DDPC_CHECK(drive(e, moved));
            if (*moved || lost) break;
            if (ddpc__aborted(c))
                return ddpc__fail(e, DDPC_ERR_ABORTED,
                                  "the communicator was aborted (ddpc_comm_abort)");
            if (now >= until) break;
        }
        if (c->yield_skip == 0) c->yield_backoff = 0; /* every yield came back quickly */
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
        ddpc__peer *pe = &c->peers[p];
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
        ddpc__peer *pe = &c->peers[ps->pidx[i]];
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
static ddpc_status sleep_in_poll(ddpc__exec *e) {
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
        ddpc__peer *pe = &c->peers[p];
        if (!ps.pf[i].revents || pe->rq || pe->sq) continue;
        if (pe->noted)
            DDPC_CHECK_GOTO(ddpc__stall_read(e, p), s, out);
        else
            DDPC_CHECK_GOTO(inspect_idle(e, p), s, out);
    }
    int moved = 0;
    if (links) DDPC_CHECK_GOTO(ddpc__link_poll(e, &moved), s, out);
    if (ddpc__aborted(c))
        s = ddpc__fail(e, DDPC_ERR_ABORTED, "the communicator was aborted (ddpc_comm_abort)");
    else if (k == 0 && ddpc__expired(e->deadline))
        s = ddpc__stall_timed_out(e);
out:
    pollset_free(&ps);
    return s;
}

ddpc_status ddpc__progress(ddpc__exec *e, int block) {
    ddpc_comm *c = e->c;
    if (ddpc__aborted(c))
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

ddpc_status ddpc__wait(ddpc__exec *e, ddpc__req *r) {
    while (!r->done) DDPC_CHECK(ddpc__progress(e, 1));
    return DDPC_OK;
}

ddpc_status ddpc__wait_all(ddpc__exec *e, ddpc__req *rs, int n) {
    for (int i = 0; i < n; i++) DDPC_CHECK(ddpc__wait(e, &rs[i]));
    return DDPC_OK;
}

/* Posts the check sends to the ring neighbours into r (*n of them); a
 * receive from each goes to park(peer) or, with park NULL, into r too.
 * Where this operation's data goes from rank `from` to rank `to` (-1:
 * nothing said), that link needs no check: the data's header carries the
 * same fingerprint, checked as it arrives. */
static ddpc_status ring_post(ddpc__exec *e, ddpc__req *r, int *n,
                             ddpc_status (*park)(ddpc__exec *, int), int from, int to) {
    ddpc_comm *c = e->c;
    int size = c->size, me = c->rank, next = (me + 1) % size, prev = (me + size - 1) % size;
    *n = 0;
    if (size == 1) return DDPC_OK;
    /* both directions: every neighbour of an odd one out notices */
    int sends[2] = { next, prev }, recvs[2] = { prev, next }, ways = size > 2 ? 2 : 1;
    for (int k = 0; k < ways; k++)
        if (!(me == from && sends[k] == to))
            ddpc__post_send_flags(e, &r[(*n)++], sends[k], NULL, 0, DDPC_F_CHECK);
    for (int k = 0; k < ways; k++) {
        if (me == to && recvs[k] == from) continue;
        if (park)
            DDPC_CHECK(park(e, recvs[k]));
        else
            ddpc__post_recv_flags(e, &r[(*n)++], recvs[k], NULL, 0, DDPC_F_CHECK);
    }
    return DDPC_OK;
}

/* Parks a check receive from peer in the communicator's next slot, once
 * the receive parked there DDPC_PARKED receives ago is done. */
static ddpc_status park(ddpc__exec *e, int peer) {
    ddpc_comm *c = e->c;
    ddpc__req *r = &c->parked[c->nparked % DDPC_PARKED];
    if (c->nparked >= DDPC_PARKED) DDPC_CHECK(ddpc__wait(e, r));
    ddpc__post_recv_flags(e, r, peer, NULL, 0, DDPC_F_CHECK);
    c->nparked++;
    return DDPC_OK;
}

ddpc_status ddpc__check_ring(ddpc__exec *e) {
    ddpc__req r[4];
    int n;
    DDPC_CHECK(ring_post(e, r, &n, NULL, -1, -1));
    return ddpc__wait_all(e, r, n);
}

ddpc_status ddpc__check_ring_post(ddpc__exec *e, ddpc__req r[2], int *n, int from, int to) {
    return ring_post(e, r, n, park, from, to);
}

ddpc_status ddpc__check_ring_wait(ddpc__exec *e, ddpc__req r[2], int n, ddpc_status s) {
    return s != DDPC_OK ? s : ddpc__wait_all(e, r, n);
}

ddpc_status ddpc__check_parked_finish(ddpc_comm *c) {
    uint64_t first = c->nparked > DDPC_PARKED ? c->nparked - DDPC_PARKED : 0;
    ddpc__exec e;
    memset(&e, 0, sizeof e);
    e.c = c;
    e.deadline = c->exec_timeout > 0 ? ddpc__deadline_in(c->exec_timeout) : INFINITY;
    e.lost = e.culprit = e.waits_on = -1;
    for (uint64_t i = first; i < c->nparked; i++) {
        ddpc__req *r = &c->parked[i % DDPC_PARKED];
        if (r->done) continue;
        e.fp = r->want; /* the operation it belongs to, for the messages */
        e.fp.flags = 0;
        e.now = ddpc__now();
        DDPC_CHECK(ddpc__wait(&e, r));
    }
    return DDPC_OK;
}
