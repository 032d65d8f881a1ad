/*
 * streams.c — one pair's link over several TCP connections (streams), so
 * that a fat link with latency is filled (DDPC_SOCKETS_PER_PEER; NCCL's
 * NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS), between ranks of
 * different hosts. The communicator makes the connections (src/comm/link.c:
 * each one through the job token's handshake and a hello) and hands them
 * over (connect); this file moves messages on them.
 *
 * How a transfer (one message: header + payload) is split, the same rule
 * on both ends, from the transfer's length alone:
 *   1. below 2 x PART_MIN bytes it goes whole on stream 0;
 *   2. else in parts = min(streams, total / PART_MIN) contiguous parts of
 *      about total / parts bytes (64-byte multiples), part k on stream k, in
 *      order; each stream carries its parts of successive transfers in
 *      order, so every message starts on stream 0 with its header.
 * Sender and receiver agree whenever the header does (same nbytes); a
 * header that differs is a failure of the operation anyway (progress.c),
 * and stream 0 alone is read until the header is in (a call that completes
 * it moves nothing else), so a peer's notice (a header alone) is read as
 * it was sent. Bytes go straight between the caller's buffers and the
 * sockets, no copy.
 *
 * Waiting: poll_fd is an epoll descriptor holding every stream; arm sets
 * each stream's interest to what the transfer under way still needs of it
 * (and end of stream on the others), so one poll() entry covers N sockets.
 * Any stream ending where bytes are still owed is the peer lost, as one
 * socket closing is; the others' ends are noticed by peek and by arm.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "transport/transport.h"

#define PART_MIN ((size_t)64 << 10) /* NCCL's smallest split too */

static const ddpc__transport *const tcp = &ddpc__transport_tcp;

/* One direction's transfer under way: part k = [lo[k], lo[k + 1]). */
typedef struct dir {
    int active, parts;
    size_t head; /* bytes of the transfer's first range (the header), read first */
    size_t lo[DDPC_STREAMS_MAX + 1];
    size_t off[DDPC_STREAMS_MAX]; /* bytes of part k moved */
} dir;

struct ddpc__conn {
    int n;
    ddpc__conn *s[DDPC_STREAMS_MAX]; /* TCP connections, owned */
    int ep;                          /* epoll: every stream */
    uint32_t armed[DDPC_STREAMS_MAX];
    int gone; /* k + 1: stream k ended with nothing waiting on stream 0 (the peer is lost) */
    dir tx, rx;
};

/* Makes the link out of n connections (taken: closed on failure too). */
static ddpc_status streams_create(ddpc__conn **streams, int n, ddpc__conn **out) {
    *out = NULL;
    ddpc__conn *c = calloc(1, sizeof *c);
    ddpc_status s = DDPC_OK;
    if (c) c->ep = -1;
    if (n < 2 || n > DDPC_STREAMS_MAX)
        s = ddpc__err(DDPC_ERR_INVALID_ARG, "streams: %d connections (2 to %d)", n,
                      DDPC_STREAMS_MAX);
    else if (!c)
        s = ddpc__err(DDPC_ERR_NOMEM, "streams: out of memory for a connection");
    else if ((c->ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        s = ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "epoll_create1");
    for (int k = 0; s == DDPC_OK && k < n; k++) {
        struct epoll_event ev = { .events = 0, .data.u32 = (uint32_t)k };
        if (epoll_ctl(c->ep, EPOLL_CTL_ADD, tcp->poll_fd(streams[k]), &ev) != 0)
            s = ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "epoll_ctl");
    }
    if (s != DDPC_OK) {
        for (int k = 0; k < n; k++) tcp->close(streams[k]);
        if (c && c->ep >= 0) close(c->ep);
        free(c);
        return s;
    }
    c->n = n;
    memcpy(c->s, streams, sizeof *streams * (size_t)n);
    *out = c;
    return DDPC_OK;
}

int ddpc__streams_count(const ddpc__conn *c) { return c ? c->n : 0; }

int ddpc__streams_fd(const ddpc__conn *c, int k) {
    return c && k >= 0 && k < c->n ? tcp->poll_fd(c->s[k]) : -1;
}

/* Lays out x's parts on d (rule 1 and 2 above). */
static void layout(const ddpc__conn *c, dir *d, const ddpc__xfer *x) {
    size_t total = x->total, parts = total / PART_MIN;
    if (parts > (size_t)c->n) parts = (size_t)c->n;
    if (parts < 2 || (x->niov > 0 && x->iov[0].iov_len > PART_MIN)) parts = 1;
    size_t per = ((total + parts - 1) / parts + 63) & ~(size_t)63;
    for (size_t k = 0; k < parts; k++) {
        d->lo[k] = k * per;
        d->off[k] = 0;
    }
    d->lo[parts] = total;
    d->parts = (int)parts;
    d->head = x->niov == 2 ? x->iov[0].iov_len : 0;
    d->active = 1;
}

/* The transfer that moves bytes [a, b) of x's ranges, into sub. */
static void slice(const ddpc__xfer *x, size_t a, size_t b, ddpc__xfer *sub) {
    memset(sub, 0, sizeof *sub);
    size_t at = 0;
    for (int i = 0; i < x->niov; i++) {
        size_t len = x->iov[i].iov_len, s = a > at ? a - at : 0, e = b - at < len ? b - at : len;
        if (b > at && s < len && s < e)
            sub->iov[sub->niov++] = (struct iovec){ (char *)x->iov[i].iov_base + s, e - s };
        at += len;
    }
    sub->total = b - a;
}

typedef ddpc_status (*move_fn)(ddpc__conn *, ddpc__xfer *, size_t *);

/* Moves what stream k can of bytes [d->lo[k] + d->off[k], end) of x. */
static ddpc_status move_part(ddpc__conn *c, dir *d, ddpc__xfer *x, int k, size_t end, move_fn mv) {
    size_t from = d->lo[k] + d->off[k];
    if (from >= end) return DDPC_OK;
    ddpc__xfer sub;
    slice(x, from, end, &sub);
    size_t got = 0;
    ddpc_status s = mv(c->s[k], &sub, &got);
    d->off[k] += got;
    x->done += got;
    return s;
}

static void begin(ddpc__conn *c, dir *d, const ddpc__xfer *x) {
    if (!d->active || x->done == 0) layout(c, d, x);
}

static void end_if_done(dir *d, const ddpc__xfer *x) {
    if (x->done >= x->total) d->active = 0;
}

/* Whether stream k has ended with nothing left to read on it. */
static int stream_ended(ddpc__conn *c, int k) {
    char b;
    size_t got = 0;
    int eof = 0;
    if (tcp->peek(c->s[k], &b, 1, &got, &eof) != DDPC_OK) return 1;
    return eof;
}

/* k + 1 for the first stream that has ended with nothing left to read on
 * it, else 0 (one poll() for all, then a peek where one ended). */
static int ended_stream(ddpc__conn *c) {
    struct pollfd pf[DDPC_STREAMS_MAX];
    for (int k = 0; k < c->n; k++) pf[k] = (struct pollfd){ tcp->poll_fd(c->s[k]), POLLRDHUP, 0 };
    if (poll(pf, (nfds_t)c->n, 0) <= 0) return 0;
    for (int k = 0; k < c->n; k++)
        if ((pf[k].revents & (POLLRDHUP | POLLHUP | POLLERR)) && stream_ended(c, k)) return k + 1;
    return 0;
}

static ddpc_status gone(const ddpc__conn *c) {
    return ddpc__err(DDPC_ERR_PEER_LOST, "the peer closed connection %d of %d", c->gone, c->n);
}

static ddpc_status st_send(ddpc__conn *c, ddpc__xfer *x, size_t *moved) {
    size_t start = x->done;
    ddpc_status s = c->gone ? gone(c) : DDPC_OK;
    if (s == DDPC_OK && x->done < x->total) {
        begin(c, &c->tx, x);
        for (int k = 0; k < c->tx.parts && s == DDPC_OK; k++)
            s = move_part(c, &c->tx, x, k, c->tx.lo[k + 1], tcp->send);
        end_if_done(&c->tx, x);
    }
    if (moved) *moved = x->done - start;
    return s;
}

/* Whether a receive of several parts is still reading its header (on
 * stream 0 alone). */
static int in_header(const dir *d) { return d->active && d->parts > 1 && d->off[0] < d->head; }

static ddpc_status st_recv(ddpc__conn *c, ddpc__xfer *x, size_t *moved) {
    size_t start = x->done;
    ddpc_status s = DDPC_OK;
    if (moved) *moved = 0;
    if (x->done >= x->total) return DDPC_OK;
    if (c->gone) return gone(c);
    dir *d = &c->rx;
    begin(c, d, x);
    if (in_header(d)) { /* stream 0 alone until the header is in */
        s = move_part(c, d, x, 0, d->head, tcp->recv);
    } else {
        for (int k = 0; k < d->parts && s == DDPC_OK; k++)
            s = move_part(c, d, x, k, d->lo[k + 1], tcp->recv);
    }
    end_if_done(d, x);
    if (moved) *moved = x->done - start;
    return s;
}

/* Stream 0's waiting bytes; *eof also when any other stream has ended with
 * nothing waiting anywhere (one of the N closing is the peer lost). */
static ddpc_status st_peek(ddpc__conn *c, void *buf, size_t len, size_t *got, int *eof) {
    DDPC_CHECK(tcp->peek(c->s[0], buf, len, got, eof));
    if (!*eof && *got == 0) *eof = ended_stream(c) != 0;
    return DDPC_OK;
}

static ddpc_status st_send_full(ddpc__conn *c, const void *buf, size_t len, double deadline,
                                int abort_fd) {
    return tcp->send_full(c->s[0], buf, len, deadline, abort_fd);
}

static ddpc_status st_recv_full(ddpc__conn *c, void *buf, size_t len, double deadline,
                                int abort_fd) {
    return tcp->recv_full(c->s[0], buf, len, deadline, abort_fd);
}

/* Finishes send x, blocking until deadline (or abort_fd readable). */
static ddpc_status st_send_rest(ddpc__conn *c, ddpc__xfer *x, double deadline, int abort_fd) {
    for (int round = 0; round < 1 << 20; round++) {
        DDPC_CHECK(st_send(c, x, NULL));
        if (x->done >= x->total) return DDPC_OK;
        struct pollfd pf[DDPC_STREAMS_MAX + 1];
        int n = 0;
        for (int k = 0; k < c->tx.parts; k++)
            if (c->tx.lo[k] + c->tx.off[k] < c->tx.lo[k + 1])
                pf[n++] = (struct pollfd){ tcp->poll_fd(c->s[k]), POLLOUT, 0 };
        if (abort_fd >= 0) pf[n++] = (struct pollfd){ abort_fd, POLLIN, 0 };
        int ms = ddpc__deadline_ms(deadline, 100);
        if (ms == 0) return ddpc__err(DDPC_ERR_TIMEOUT, "timed out sending");
        if (poll(pf, (nfds_t)n, ms) < 0 && errno != EINTR)
            return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "poll");
        if (abort_fd >= 0 && (pf[n - 1].revents & POLLIN))
            return ddpc__err(DDPC_ERR_ABORTED, "aborted while sending");
    }
    return ddpc__err(DDPC_ERR_TIMEOUT, "timed out sending");
}

static int st_poll_fd(const ddpc__conn *c) { return c->ep; }

/* Each stream's interest: what the transfer under way still needs of it
 * (stream 0 alone while a receive waits for its header, or with none under
 * way), else only its end (EPOLLRDHUP; EPOLLHUP and EPOLLERR always come).
 * A stream that has ended while nothing waits on stream 0 (where a
 * goodbye or a failure notice would be) is the peer lost: 1, and every
 * later transfer fails. */
static int st_arm(ddpc__conn *c, short events) {
    if (!events) return 0; /* stays armed; poll_fd is only polled after arming */
    if (!c->gone) {
        int k = ended_stream(c);
        char b;
        size_t got = 0;
        int eof = 0;
        if (k && (tcp->peek(c->s[0], &b, 1, &got, &eof) != DDPC_OK || got == 0)) c->gone = k;
    }
    if (c->gone) return 1;
    for (int k = 0; k < c->n; k++) {
        uint32_t want = EPOLLRDHUP;
        const dir *r = &c->rx, *t = &c->tx;
        if (events & POLLIN) {
            if (!r->active || in_header(r) ? k == 0
                                           : (k < r->parts && r->lo[k] + r->off[k] < r->lo[k + 1]))
                want |= EPOLLIN;
        }
        if ((events & POLLOUT) &&
            (!t->active || (k < t->parts && t->lo[k] + t->off[k] < t->lo[k + 1])))
            want |= EPOLLOUT;
        if (want == c->armed[k]) continue;
        struct epoll_event ev = { .events = want, .data.u32 = (uint32_t)k };
        if (epoll_ctl(c->ep, EPOLL_CTL_MOD, tcp->poll_fd(c->s[k]), &ev) != 0) return 1;
        c->armed[k] = want;
    }
    return 0;
}

static void st_shutdown(ddpc__conn *c) {
    for (int k = 0; k < c->n; k++) tcp->shutdown(c->s[k]);
}

static void st_close(ddpc__conn *c) {
    if (!c) return;
    for (int k = 0; k < c->n; k++) tcp->close(c->s[k]);
    close(c->ep);
    free(c);
}

/* ------------------------------------------------------------ a pair */

/* Ranks of different hosts, DDPC_SOCKETS_PER_PEER above 1 (ranks of one
 * host keep one connection: shared memory carries their messages anyway). */
static int st_can_connect(const ddpc__pair *pair) {
    if (pair->streams < 2 || !strcmp(pair->self->host, pair->peer->host)) return 0;
    return pair->streams;
}

static ddpc_status st_connect(const ddpc__pair *pair, ddpc__conn **conns, int n, void *res,
                              double deadline, int abort_fd, ddpc__conn **out,
                              const ddpc__transport **used) {
    *used = &ddpc__transport_streams;
    return streams_create(conns, n, out);
}

const ddpc__transport ddpc__transport_streams = {
    .name = "tcp",
    .can_connect = st_can_connect,
    .connect = st_connect,
    .send = st_send,
    .recv = st_recv,
    .peek = st_peek,
    .send_full = st_send_full,
    .recv_full = st_recv_full,
    .send_rest = st_send_rest,
    .poll_fd = st_poll_fd,
    .arm = st_arm,
    .shutdown = st_shutdown,
    .close = st_close,
};
