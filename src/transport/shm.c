/*
 * shm.c — the shared-memory transport: two ranks of one host move their
 * bytes through a segment holding two single-producer/single-consumer byte
 * rings, one per direction, and keep the TCP connection they bootstrapped
 * over as doorbell and liveness channel.
 *
 * Set-up (the segment, mapped over the pair's TCP connection) is
 * shm_segment.c's; this file moves the bytes.
 *
 * Transfers. send copies what fits into the outgoing ring and publishes head;
 * recv copies out and publishes tail; peek copies without consuming; the
 * reader of head or tail acquires what its writer released. No system call
 * on that path. A receive that asks to combine (ddpc__xfer's combine: a
 * reducing step of a collective) has its payload combined straight from the
 * ring into its destination, whole elements at a time (combine_from_ring).
 *
 * How send writes a large copy into the ring (DDPC_SHM_COPY): "cached"
 * stores go through this core's cache, and each line must first be taken
 * from the reader's cache, where the previous lap left it; "stream"
 * (non-temporal) stores write the lines to memory, past both caches. Which
 * is faster depends on where the two cores sit: sharing a cache, cached
 * copies run about twice as fast; apart (another chiplet or socket, as a
 * hypervisor may place two vCPUs, and move them while a job runs), taking
 * each line from the other cache makes them ten times slower, and streaming
 * wins. "auto" times its copies of 64 KiB or more, tries the other kind on
 * a 32 KiB slice of every 16th, and streams while that costs less than half
 * as much per byte lately (see pick_copy).
 *
 * Waiting. A side that cannot move arms before its progress loop sleeps
 * in poll() on the socket (see arm in transport.h): it sets its "sleeping"
 * flag and re-checks the ring. The other side, after publishing, checks the
 * flag and, if it is set, clears it and writes one doorbell byte to the
 * socket. Either the sleeper sees the new head/tail or the publisher sees
 * the flag (each side stores, then loads the other's variable, all four
 * sequentially consistent), so no wake-up is lost. The socket also brings
 * EOF when the peer closes, crashes or is killed; shutdown() shuts it down
 * and marks the rings, so the peer sees this side as gone.
 */
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/shm_impl.h"

/* ------------------------------------------------------------ doorbell */

/* One byte on the socket: wakes the peer sleeping in poll(). Never blocks;
 * at most two bells are ever unread (one per flag), so EAGAIN does not
 * happen, and a dead peer is noticed by the next transfer. */
static void ring_bell(ddpc__conn *c) {
    char b = 0;
    while (send(c->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR) {}
}

/* Drops the doorbell bytes waiting on the socket; 1 when the peer is gone
 * (EOF or an error: it closed, crashed, was killed, or this side shut down). */
static int drain_bells(ddpc__conn *c) {
    char buf[64];
    while (!c->peer_eof) {
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) continue;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        c->peer_eof = 1;
    }
    return c->peer_eof;
}

/* After publishing head or tail (a seq_cst store): wake the other side if
 * it sleeps on flag. seq_cst on both sides' store-then-load, not fences:
 * ThreadSanitizer does not model fences. */
static void wake_if_sleeping(ddpc__conn *c, uint32_t *flag) {
    if (__atomic_load_n(flag, __ATOMIC_SEQ_CST) && __atomic_exchange_n(flag, 0, __ATOMIC_ACQ_REL))
        ring_bell(c);
}

static int is_shut(const ddpc__conn *c) { return __atomic_load_n(&c->shut, __ATOMIC_ACQUIRE); }

/* ------------------------------------------------------------ transfers */

int ddpc__shm_copy_policy(const char *v) {
    if (!v || !strcmp(v, "auto")) return COPY_AUTO;
    if (!strcmp(v, "cached")) return COPY_CACHED;
    if (!strcmp(v, "stream")) return COPY_STREAM;
    return -1;
}

/* memcpy, with stream set through non-temporal stores for the 16-byte
 * aligned middle of dst (x86-64, 256 bytes or more; elsewhere plain
 * memcpy). The fence orders them before the release of head that
 * publishes them. */
static void copy_in(char *dst, const char *src, size_t n, int stream) {
#if defined(__x86_64__)
    if (stream && n >= 256) {
        size_t lead = (16 - ((uintptr_t)dst & 15)) & 15;
        memcpy(dst, src, lead);
        dst += lead, src += lead, n -= lead;
        size_t body = n & ~(size_t)63;
        for (size_t i = 0; i < body; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
            __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(src + i + 48));
            _mm_stream_si128((__m128i *)(dst + i), a);
            _mm_stream_si128((__m128i *)(dst + i + 16), b);
            _mm_stream_si128((__m128i *)(dst + i + 32), d);
            _mm_stream_si128((__m128i *)(dst + i + 48), e);
        }
        _mm_sfence();
        dst += body, src += body, n -= body;
    }
#endif
    memcpy(dst, src, n);
}

/* Copies up to n bytes between the unmoved part of x and a ring's data
 * (cap bytes, logical position pos, wrapping); advances x->done. Into the
 * ring through copy_in (stream: non-temporal). */
static size_t copy_xfer(ddpc__xfer *x, char *data, uint64_t cap, uint64_t pos, size_t n,
                        int to_ring, int stream) {
    size_t moved = 0, skip = x->done;
    size_t off = (size_t)(pos % cap); /* the ring offset of the next byte */
    if (skip == 0 && n >= x->total && x->total <= cap - off && x->total < 256) {
        /* a whole small message (a header and its payload) without the
         * ring's end in it: two plain copies (copy_in streams nothing under
         * 256 bytes) */
        char *d = data + off;
        for (int k = 0; k < x->niov; k++) {
            if (to_ring)
                memcpy(d, x->iov[k].iov_base, x->iov[k].iov_len);
            else
                memcpy(x->iov[k].iov_base, d, x->iov[k].iov_len);
            d += x->iov[k].iov_len;
        }
        x->done = x->total;
        return x->total;
    }
    int i = 0;
    while (i < x->niov && skip >= x->iov[i].iov_len) skip -= x->iov[i++].iov_len;
    while (moved < n && i < x->niov) {
        char *p = (char *)x->iov[i].iov_base + skip;
        size_t len = x->iov[i].iov_len - skip;
        if (len > n - moved) len = n - moved;
        size_t first = cap - off < len ? (size_t)(cap - off) : len;
        if (to_ring) {
            copy_in(data + off, p, first, stream);
            if (len > first) copy_in(data, p + first, len - first, stream);
        } else {
            memcpy(p, data + off, first);
            if (len > first) memcpy(p + first, data, len - first);
        }
        off = len > first ? len - first : off + len == cap ? 0 : off + len;
        moved += len;
        skip += len;
        if (skip == x->iov[i].iov_len) {
            i++;
            skip = 0;
        }
    }
    x->done += moved;
    return moved;
}

/* Folds one timed copy (bytes in secs, streaming or not) into that kind's
 * recent cost; one sample counts a quarter, and at most four times the
 * estimate, so that a preemption mid-copy does not flip the choice alone. */
static void note_cost(ddpc__conn *c, int stream, size_t bytes, double secs) {
    double v = secs * 1e9 / ((double)bytes / 1024.0), *est = &c->ns_per_kib[stream];
    if (*est > 0 && v > 4 * *est) v = 4 * *est;
    *est = *est > 0 ? 0.75 * *est + 0.25 * v : v;
}

/* Auto, once both kinds are measured: stream where that costs this side
 * less than half as much per byte. Only the writer's side is timed, and the
 * reader pays for streamed lines (they come from memory, not from this
 * core's cache: about twice the time where the cores share a cache), so
 * streaming has to win by that much. Apart, it wins by ten times. */
static void pick_copy(ddpc__conn *c) {
    int was = c->stream;
    if (c->ns_per_kib[0] > 0 && c->ns_per_kib[1] > 0)
        c->stream = 2 * c->ns_per_kib[1] < c->ns_per_kib[0];
    if (c->stream != was)
        DDPC_TRACE(SHM, "copies to %s now %s (cached %.0f ns/KiB, streaming %.0f ns/KiB)",
                   c->peer_name, c->stream ? "stream" : "go through the cache", c->ns_per_kib[0],
                   c->ns_per_kib[1]);
}

/* Copies n (> 0) bytes of x into the ring at tx_head, the way the policy
 * says; auto times large copies and now and then probes the other kind. */
static size_t send_copy(ddpc__conn *c, ddpc__xfer *x, size_t n) {
    if (c->copy_policy != COPY_AUTO)
        return copy_xfer(x, c->txd, c->cap, c->tx_head, n, 1, c->copy_policy == COPY_STREAM);
    size_t left = x->total - x->done;
    if (n > left) n = left;
    if (n < COPY_LARGE) return copy_xfer(x, c->txd, c->cap, c->tx_head, n, 1, c->stream);
    size_t done = 0;
    if (c->large_copies++ % COPY_PROBE_EVERY == 0 || c->ns_per_kib[!c->stream] == 0) {
        double t0 = ddpc__now();
        done = copy_xfer(x, c->txd, c->cap, c->tx_head, COPY_PROBE, 1, !c->stream);
        note_cost(c, !c->stream, done, ddpc__now() - t0);
    }
    double t0 = ddpc__now();
    size_t rest = copy_xfer(x, c->txd, c->cap, c->tx_head + done, n - done, 1, c->stream);
    note_cost(c, c->stream, rest, ddpc__now() - t0);
    pick_copy(c);
    return done + rest;
}

static ddpc_status shm_send(ddpc__conn *c, ddpc__xfer *x, size_t *moved) {
    if (moved) *moved = 0;
    if (is_shut(c))
        return ddpc__err(DDPC_ERR_PEER_LOST, "send: this side shut the connection down");
    uint32_t gone = __atomic_load_n(&c->tx->cons_gone, __ATOMIC_ACQUIRE);
    if (gone == GONE_SHUT ||
        (gone == GONE_CLOSED && __atomic_load_n(&c->rx->head, __ATOMIC_ACQUIRE) != c->rx_tail)) {
        if (moved) *moved = x->total - x->done;
        x->done = x->total;
        return DDPC_OK;
    }
    if (gone || c->peer_eof)
        return ddpc__err(DDPC_ERR_PEER_LOST, "send: the peer closed the connection");
    if (x->done >= x->total) return DDPC_OK;
    size_t room = (size_t)(c->cap - (c->tx_head - c->tx_tail));
    if (room < x->total - x->done) {
        c->tx_tail = __atomic_load_n(&c->tx->tail, __ATOMIC_ACQUIRE);
        room = (size_t)(c->cap - (c->tx_head - c->tx_tail));
    }
    if (room == 0) return DDPC_OK;
    size_t n = send_copy(c, x, room);
    c->tx_head += n;
    __atomic_store_n(&c->tx->head, c->tx_head, __ATOMIC_SEQ_CST);
    wake_if_sleeping(c, &c->tx->cons_sleeping);
    if (moved) *moved = n;
    return DDPC_OK;
}

/* Combines the first n bytes of the ring's unread data (n a multiple of
 * x->unit) into x's iov[1] at x->done. A unit split by the ring's end, and
 * data not aligned for the unit (an earlier message of another type left
 * it so), go through an aligned bounce buffer, so that combine always reads
 * whole, aligned elements. */
static void combine_from_ring(ddpc__conn *c, ddpc__xfer *x, size_t n) {
    char *dst = (char *)x->iov[1].iov_base + (x->done - x->iov[0].iov_len);
    size_t unit = x->unit, off = (size_t)(c->rx_tail % c->cap);
    _Alignas(64) char bounce[4096];
    while (n > 0) {
        size_t span = (size_t)c->cap - off < n ? (size_t)c->cap - off : n; /* to the ring's end */
        const char *src = c->rxd + off;
        size_t len;
        if (span >= unit && (uintptr_t)src % unit == 0) { /* whole aligned units in place */
            len = span - span % unit;
            x->combine(dst, src, len, x->combine_ctx);
        } else { /* bounce: up to a buffer of units, possibly across the end */
            len = n < sizeof bounce ? n : sizeof bounce - sizeof bounce % unit;
            size_t first = span < len ? span : len;
            memcpy(bounce, src, first);
            memcpy(bounce + first, c->rxd, len - first);
            x->combine(dst, bounce, len, x->combine_ctx);
        }
        dst += len;
        n -= len;
        off = (off + len) % (size_t)c->cap;
    }
}

/* A reader waiting for a small message (want bytes, at most PREFETCH_MAX)
 * asks at each poll for the lines it will land in (not past the ring's
 * end), so that once the writer has written them their fetch overlaps the
 * fetch of head instead of following it: one cache miss's wait instead of
 * two (2 ranks, 8-128 B: 0.51-0.54 us against 0.70-0.73). Larger messages
 * are left alone: asking for lines the writer is still filling slowed
 * 512 B-2 KiB by 12-19%. */
#define PREFETCH_MAX 192
static void prefetch_next(const ddpc__conn *c, size_t want) {
    if (want > PREFETCH_MAX) return;
    size_t off = (size_t)(c->rx_tail % c->cap);
    size_t end = off + want;
    if (end > c->cap) end = (size_t)c->cap;
    for (size_t at = off & ~(size_t)63; at < end; at += 64) __builtin_prefetch(c->rxd + at);
}

static ddpc_status shm_recv(ddpc__conn *c, ddpc__xfer *x, size_t *moved) {
    if (moved) *moved = 0;
    if (is_shut(c))
        return ddpc__err(DDPC_ERR_PEER_LOST, "recv: this side shut the connection down");
    if (x->done >= x->total) return DDPC_OK;
    /* gone first, head second: what the peer wrote before it left is read */
    int gone = c->peer_eof || __atomic_load_n(&c->rx->prod_gone, __ATOMIC_ACQUIRE);
    uint64_t head = __atomic_load_n(&c->rx->head, __ATOMIC_ACQUIRE);
    size_t avail = (size_t)(head - c->rx_tail);
    if (avail == 0) {
        prefetch_next(c, x->total - x->done);
        return gone ? ddpc__err(DDPC_ERR_PEER_LOST, "the peer closed the connection") : DDPC_OK;
    }
    size_t n;
    if (x->combine && x->niov == 2 && x->done >= x->iov[0].iov_len) {
        n = x->total - x->done < avail ? x->total - x->done : avail;
        n -= n % x->unit; /* a unit in part waits for the rest */
        if (n == 0) return DDPC_OK;
        combine_from_ring(c, x, n);
        x->done += n;
    } else {
        if (x->combine && x->niov == 2 && avail > x->iov[0].iov_len - x->done)
            avail = x->iov[0].iov_len - x->done; /* the header alone: checked before combining */
        n = copy_xfer(x, c->rxd, c->cap, c->rx_tail, avail, 0, 0);
    }
    c->rx_tail += n;
    __atomic_store_n(&c->rx->tail, c->rx_tail, __ATOMIC_SEQ_CST);
    wake_if_sleeping(c, &c->rx->prod_sleeping);
    if (moved) *moved = n;
    return DDPC_OK;
}

static ddpc_status shm_peek(ddpc__conn *c, void *buf, size_t len, size_t *got, int *eof) {
    *got = 0;
    *eof = 0;
    int gone = drain_bells(c) || is_shut(c) || __atomic_load_n(&c->rx->prod_gone, __ATOMIC_ACQUIRE);
    uint64_t head = __atomic_load_n(&c->rx->head, __ATOMIC_ACQUIRE);
    size_t avail = (size_t)(head - c->rx_tail);
    if (avail == 0) {
        *eof = gone;
        return DDPC_OK;
    }
    ddpc__xfer x;
    ddpc__xfer_init(&x, buf, len < avail ? len : avail, NULL, 0);
    *got = copy_xfer(&x, c->rxd, c->cap, c->rx_tail, x.total, 0, 0);
    return DDPC_OK;
}

/* Ready for events already (no need to sleep)? After the sleeping flags'
 * seq_cst stores: seq_cst loads of head and tail. */
static int ready(ddpc__conn *c, short events) {
    if (c->peer_eof || is_shut(c)) return 1;
    if ((events & POLLIN) && (__atomic_load_n(&c->rx->head, __ATOMIC_SEQ_CST) != c->rx_tail ||
                              __atomic_load_n(&c->rx->prod_gone, __ATOMIC_ACQUIRE)))
        return 1;
    if ((events & POLLOUT) &&
        (c->tx_head - __atomic_load_n(&c->tx->tail, __ATOMIC_SEQ_CST) < c->cap ||
         __atomic_load_n(&c->tx->cons_gone, __ATOMIC_ACQUIRE)))
        return 1;
    return 0;
}

static int shm_arm(ddpc__conn *c, short events) {
    if (!events) { /* awake again: the peer need not ring */
        __atomic_store_n(&c->rx->cons_sleeping, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->tx->prod_sleeping, 0, __ATOMIC_RELAXED);
        return 0;
    }
    if (drain_bells(c) || is_shut(c)) return 1;
    if (events & POLLIN) __atomic_store_n(&c->rx->cons_sleeping, 1, __ATOMIC_SEQ_CST);
    if (events & POLLOUT) __atomic_store_n(&c->tx->prod_sleeping, 1, __ATOMIC_SEQ_CST);
    return ready(c, events);
}

/* Sleeps until c may be ready for events, deadline, or abort_fd. */
static ddpc_status wait_conn(ddpc__conn *c, short events, double deadline, int abort_fd,
                             const char *what) {
    if (shm_arm(c, events)) {
        shm_arm(c, 0);
        return DDPC_OK;
    }
    struct pollfd pf[2] = { { c->fd, POLLIN, 0 }, { abort_fd, POLLIN, 0 } };
    int ms = ddpc__deadline_ms(deadline, 0);
    int k = ms == 0 ? 0 : poll(pf, abort_fd >= 0 ? 2 : 1, ms);
    int err = errno;
    shm_arm(c, 0);
    if (k < 0 && err != EINTR) return ddpc__err_errno(DDPC_ERR_SYSTEM, err, "poll");
    if (k > 0 && abort_fd >= 0 && pf[1].revents)
        return ddpc__err(DDPC_ERR_ABORTED, "aborted while %s", what);
    if (k == 0 && ddpc__expired(deadline)) return ddpc__err(DDPC_ERR_TIMEOUT, "timed out %s", what);
    return DDPC_OK;
}

static ddpc_status shm_send_full(ddpc__conn *c, const void *buf, size_t len, double deadline,
                                 int abort_fd) {
    ddpc__xfer x;
    ddpc__xfer_init(&x, (void *)buf, len, NULL, 0);
    while (x.done < x.total) {
        size_t mv = 0;
        DDPC_CHECK(shm_send(c, &x, &mv));
        if (!mv) DDPC_CHECK(wait_conn(c, POLLOUT, deadline, abort_fd, "writing to peer"));
    }
    return DDPC_OK;
}

static ddpc_status shm_recv_full(ddpc__conn *c, void *buf, size_t len, double deadline,
                                 int abort_fd) {
    ddpc__xfer x;
    ddpc__xfer_init(&x, buf, len, NULL, 0);
    while (x.done < x.total) {
        size_t mv = 0;
        DDPC_CHECK(shm_recv(c, &x, &mv));
        if (!mv) DDPC_CHECK(wait_conn(c, POLLIN, deadline, abort_fd, "reading from peer"));
    }
    return DDPC_OK;
}

static int shm_poll_fd(const ddpc__conn *c) { return c->fd; }

/* Marks this side gone in both rings (release: after everything it wrote). */
static void mark_gone(ddpc__conn *c, uint32_t how) {
    __atomic_store_n(&c->tx->prod_gone, how, __ATOMIC_RELEASE);
    __atomic_store_n(&c->rx->cons_gone, how, __ATOMIC_RELEASE);
}

static void shm_shutdown(ddpc__conn *c) {
    __atomic_store_n(&c->shut, 1, __ATOMIC_RELEASE);
    mark_gone(c, GONE_SHUT);
    shutdown(c->fd, SHUT_RDWR); /* the peer's poll sees EOF; so does this side's */
}

static void shm_close(ddpc__conn *c) {
    if (!c) return;
    mark_gone(c, GONE_CLOSED);
    munmap(c->base, c->len);
    close(c->fd);
    free(c);
}

const ddpc__transport ddpc__transport_shm = {
    .name = "shm",
    .can_connect = ddpc__shm_can_connect, /* set up over the pair's TCP connection */
    .setup = ddpc__shm_setup,
    .connect = ddpc__shm_connect,
    .free = ddpc__shm_free,
    .send = shm_send,
    .recv = shm_recv,
    .peek = shm_peek,
    .send_full = shm_send_full,
    .recv_full = shm_recv_full,
    .poll_fd = shm_poll_fd,
    .arm = shm_arm,
    .shutdown = shm_shutdown,
    .close = shm_close,
    .combines = 1,
};
