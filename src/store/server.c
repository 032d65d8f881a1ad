/*
 * server.c — the store's server: one thread, non-blocking sockets
 * multiplexed with poll(), over the keys' hash table (table.c).
 *
 * Two protocols share one table: ddpc's own (framed, with a handshake,
 * server-side timeouts and error replies) and PyTorch's c10d TCPStore
 * (torch 1.13's queries and torch 2.x's), told apart by a connection's
 * first bytes; both decode into one store_req
 * (decode.c) that requests.c executes, encoding each reply in its client's
 * protocol. Every connection is a small state machine (handshake, ready,
 * waiting on keys, closing). A connection is read only while it has no reply pending,
 * so its memory is bounded by one request plus one reply, and a client that
 * stops reading stalls only itself. GET and WAIT park their connection until
 * the keys exist or the request's own timeout passes, at which point the
 * server answers RS_TIMEOUT itself. Bad input is answered with RS_ERROR, then
 * the connection is flushed, half-closed, drained briefly and closed.
 *
 * Who is let in (the job token's handshake) is gate.c's; what a request
 * does is requests.c's (conn.h: the connection they share). The wire
 * format is in proto.h; the client is client.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/base.h"
#include "base/env.h"
#include "base/sock.h"
#include "base/util.h"
#include "store/conn.h"
#include "store/gate.h"
#include "store/proto.h"
#include "store/server.h"
#include "store/table.h"

/* ------------------------------------------------------- connections */

#define READ_CHUNK      (1u << 20) /* most bytes read per recv */
#define CLOSE_LINGER_S  1.0        /* how long a closing connection is drained */
#define CLOSE_DRAIN_MAX (1u << 20) /* most bytes discarded while draining */
#define MAX_CONNS       65536

static void conn_free(conn *c) {
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Queues h + p as the connection's reply; on memory shortage the
 * connection is closed instead. */
void ddpc__conn_queue(conn *c, const void *h, size_t hn, const void *p, size_t n) {
    unsigned char *o = malloc(hn + n + 1);
    if (!o) {
        DDPC_WARN(STORE, "store: out of memory replying to %s; closing it", c->peer);
        c->state = C_CLOSING;
        c->deadline = 0; /* closes at once */
        return;
    }
    if (hn) memcpy(o, h, hn);
    if (n) memcpy(o + hn, p, n);
    free(c->out);
    c->out = o;
    c->out_len = hn + n;
    c->out_off = 0;
}

/* A ddpc reply frame: status and payload. */
void ddpc__conn_reply(conn *c, int status, const void *p, size_t n) {
    unsigned char h[5];
    put_u32(h, (uint32_t)(1 + n));
    h[4] = (unsigned char)status;
    ddpc__conn_queue(c, h, 5, p, n);
}

void ddpc__conn_reply_msg(conn *c, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    ddpc__conn_reply(c, status, msg, (size_t)n);
}

/* Answers a protocol violation (ddpc: an RS_ERROR frame; TCPStore has no
 * error reply) and starts closing the connection. */
void ddpc__conn_fail(conn *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    DDPC_INFO(STORE, "store: closing %s: %s", c->peer, msg);
    if (c->proto != PROTO_TORCH) ddpc__conn_reply_msg(c, RS_ERROR, "%s", msg);
    c->state = C_CLOSING;
    c->deadline = ddpc__now() + CLOSE_LINGER_S;
}

/* The first 8 bytes of a connection that did not open with a TCPStore query. */
static void handle_handshake(conn *c) {
    uint32_t magic = get_u32(c->in), ver = get_u32(c->in + 4);
    c->in_have = 0;
    c->proto = PROTO_DDPC;
    if (magic == DDPC_AUTH_MAGIC) { /* the client has a job token, this store none */
        unsigned char v[DDPC_AUTH_VERDICT];
        put_u32(v, DDPC_AUTH_MAGIC);
        put_u32(v + 4, DDPC_AUTH_NO_TOKEN);
        ddpc__conn_queue(c, v, sizeof v, NULL, 0);
        DDPC_WARN(STORE,
                  "store: closing %s: it has a job token, but DDPC_JOB_TOKEN is unset for this "
                  "store",
                  c->peer);
        c->state = C_CLOSING;
        c->deadline = ddpc__now() + CLOSE_LINGER_S;
        return;
    }
    if (magic != STORE_MAGIC) {
        ddpc__conn_fail(c,
                        "bad handshake: magic 0x%08x is not ddpc's store protocol (0x%08x) nor a "
                        "TCPStore query",
                        magic, STORE_MAGIC);
        return;
    }
    if (ver != STORE_VERSION) {
        ddpc__conn_fail(
            c, "bad handshake: store protocol version %u is not supported (server speaks %u)", ver,
            STORE_VERSION);
        return;
    }
    unsigned char v[4];
    put_u32(v, STORE_VERSION);
    ddpc__conn_reply(c, RS_OK, v, 4);
    c->state = C_READY;
}

/* Refuses c (a WARN naming its address and why) and starts closing it;
 * a reply already queued still goes out. */
static void refuse_conn(conn *c, const char *why) {
    DDPC_WARN(STORE, "store: refused the connection from %s: %s", c->peer, why);
    c->state = C_CLOSING;
    c->deadline = ddpc__now() + CLOSE_LINGER_S;
}

/* With a job token, a connection's bytes until it has proved it (gate.c).
 * -1: drop the connection at once. */
static int auth_read(struct ddpc_store_server *s, conn *c) {
    for (int rounds = 0; rounds < 5 && !c->admitted && c->state == C_HANDSHAKE && !c->out_len;
         rounds++) {
        unsigned char out[DDPC_GATE_OUT];
        size_t olen = 0;
        char why[256];
        int r = ddpc__gate_read(&s->gate, &c->pending, c->fd, c->peer, out, &olen, why, sizeof why);
        if (olen) ddpc__conn_queue(c, out, olen, NULL, 0);
        if (r == DDPC_GATE_LOST) return -1;
        if (r == DDPC_GATE_WAIT) return 0;
        if (r == DDPC_GATE_REFUSED) refuse_conn(c, why);
        if (r == DDPC_GATE_TORCH) c->admitted = 1;
        if (r == DDPC_GATE_PROVED) {
            c->admitted = 1; /* the store's own handshake follows */
            DDPC_TRACE(STORE, "store: %s proved the job token", c->peer);
        }
    }
    return 0;
}

/* Bytes the input buffer should hold before the next step, or 0 when a
 * frame's header says it is too large or empty (the connection has then
 * been failed). A TCPStore request has no length: read what comes, the
 * decoder bounds it. */
static size_t frame_need(conn *c) {
    if (c->state == C_HANDSHAKE) return c->in_have ? 8 : 1;
    if (c->proto == PROTO_TORCH) /* room doubles, from 4 KiB to READ_CHUNK */
        return c->in_have + (c->in_have < 4096         ? 4096
                             : c->in_have < READ_CHUNK ? c->in_have
                                                       : READ_CHUNK);
    if (c->in_have < 4) return 4;
    uint32_t len = get_u32(c->in);
    if (len == 0) {
        ddpc__conn_fail(c, "empty frame");
        return 0;
    }
    if (len > STORE_MAX_REQUEST) {
        ddpc__conn_fail(c, "request of %u bytes exceeds the store's limit of %" PRIu64 " bytes",
                        len, (uint64_t)STORE_MAX_REQUEST);
        return 0;
    }
    return 4 + (size_t)len;
}

/* A TCPStore connection's dialect, from its first bytes (proto.h): torch
 * 2.x's VALIDATE (0, then the magic; consumed here) or else torch 1.13. 0
 * while those bytes are still on their way. */
static int torch_dialect(conn *c) {
    if (c->dialect) return c->dialect;
    if (c->in[0] != T2_VALIDATE) return c->dialect = TORCH_1;
    if (c->in_have < TORCH_VALIDATE_LEN) return 0;
    if (get_u32(c->in + 1) != TORCH_VALIDATE_MAGIC) return c->dialect = TORCH_1;
    DDPC_TRACE(STORE, "store: %s speaks torch 2.x's TCPStore", c->peer);
    c->req_len = TORCH_VALIDATE_LEN;
    ddpc__req_done(c);
    return c->dialect = TORCH_2;
}

/* TCPStore: handles the requests already in the buffer, in order, until
 * one is incomplete, parks, or leaves a reply that cannot be written yet. */
static int conn_write(conn *c);
static int torch_pump(struct ddpc_store_server *s, conn *c) {
    while (c->proto == PROTO_TORCH && c->state == C_READY && c->in_have) {
        if (c->out_len) {
            if (conn_write(c) < 0) return -1;
            if (c->out_len) return 0;
        }
        if (!torch_dialect(c)) return 0;
        if (!c->in_have) return 0;
        store_req q;
        char why[256];
        long n = ddpc__store_decode_torch(c->in, c->in_have, c->dialect, &q, why, sizeof why);
        if (n < 0) ddpc__conn_fail(c, "%s", why);
        if (n <= 0) return 0;
        c->req_len = (size_t)n;
        ddpc__req_handle(s, c, &q);
    }
    return 0;
}

/* Reads what is available of the current frame; handles it when complete.
 * Returns -1 when the connection is to be dropped at once. */
static int conn_read(struct ddpc_store_server *s, conn *c) {
    for (int rounds = 0;
         rounds < 16 && !c->out_len && (c->state == C_HANDSHAKE || c->state == C_READY); rounds++) {
        if (!c->admitted) {
            if (auth_read(s, c) < 0) return -1;
            if (!c->admitted) return 0;
            continue;
        }
        size_t need = frame_need(c);
        if (!need) return 0;
        /* grow with what arrives, not with what the header announces */
        size_t want = c->in_have + READ_CHUNK < need ? c->in_have + READ_CHUNK : need;
        if (want < 64) want = 64;
        if (want > c->in_cap) {
            size_t dbl = c->in_cap * 2 < need ? c->in_cap * 2 : need;
            if (dbl > want) want = dbl;
            unsigned char *p = realloc(c->in, want);
            if (!p) {
                DDPC_WARN(STORE, "store: out of memory reading from %s; dropping it", c->peer);
                return -1;
            }
            c->in = p;
            c->in_cap = want;
        }
        size_t room = (c->in_cap < need ? c->in_cap : need) - c->in_have;
        ssize_t n = recv(c->fd, c->in + c->in_have, room, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            DDPC_TRACE(STORE, "store: %s: recv: %s", c->peer, strerror(errno));
            return -1;
        }
        if (n == 0) {
            if (c->in_have == 0) return -1; /* clean close between requests */
            ddpc__conn_fail(c, "truncated %s: the connection closed after %zu bytes",
                            c->proto == PROTO_TORCH ? "TCPStore request" : "frame", c->in_have);
            return 0;
        }
        c->in_have += (size_t)n;
        if (c->state == C_HANDSHAKE && c->in[0] < TQ_COUNT) { /* a TCPStore client */
            c->proto = PROTO_TORCH;
            c->state = C_READY;
        }
        if (c->proto == PROTO_TORCH) {
            if (torch_pump(s, c) < 0) return -1;
            continue;
        }
        if (c->state == C_HANDSHAKE) {
            if (c->in_have == 8) handle_handshake(c);
            continue;
        }
        if (c->in_have < need || need == 4) continue;
        store_req q;
        char why[256];
        if (ddpc__store_decode_ddpc(c->in + 4, c->in_have - 4, &q, why, sizeof why) != 0)
            ddpc__conn_fail(c, "%s", why);
        else
            ddpc__req_handle(s, c, &q);
    }
    return 0;
}

/* Writes what it can of the pending reply. -1: drop the connection. */
static int conn_write(conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        DDPC_TRACE(STORE, "store: %s: send: %s", c->peer, strerror(errno));
        return -1;
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    return 0;
}

/* A closing connection: after its reply is out, half-close, then discard
 * input until EOF, the linger deadline or the drain limit. -1: drop it. */
static int conn_close_step(conn *c, double now) {
    if (c->out_len) return now >= c->deadline ? -1 : 0;
    if (!c->wr_shut) {
        shutdown(c->fd, SHUT_WR);
        c->wr_shut = 1;
    }
    for (;;) {
        char buf[4096];
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            c->drained += (size_t)n;
            if (c->drained > CLOSE_DRAIN_MAX) return -1;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return now >= c->deadline ? -1 : 0;
        return -1;
    }
}

static void accept_all(struct ddpc_store_server *s) {
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                DDPC_WARN(STORE, "store: cannot accept more connections (%s); pausing 100 ms",
                          strerror(errno));
                s->accept_pause = ddpc__now() + 0.1;
            }
            return;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c || (s->nconns == s->cap && s->cap >= MAX_CONNS)) {
            DDPC_WARN(STORE, "store: refusing a connection (%s)",
                      c ? "too many connections" : "out of memory");
            free(c);
            close(fd);
            continue;
        }
        if (s->nconns == s->cap) {
            int cap = s->cap ? s->cap * 2 : 16;
            conn **p = realloc(s->conns, (size_t)cap * sizeof *p);
            if (!p) {
                free(c);
                close(fd);
                continue;
            }
            s->conns = p;
            s->cap = cap;
        }
        if (!ddpc__admit_addr("store", (struct sockaddr *)&ss)) {
            free(c);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int port = 0;
        char host[64];
        ddpc__sock_addr_str((struct sockaddr *)&ss, host, sizeof host, &port);
        snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
        c->fd = fd;
        c->state = C_HANDSHAKE;
        c->admitted = !s->gate.token;
        c->deadline = s->gate.token ? ddpc__now() + s->gate.auth_s : 0;
        s->conns[s->nconns++] = c;
        DDPC_TRACE(STORE, "store: connection from %s (%d open)", c->peer, s->nconns);
    }
}

/* One connection's turn after poll (revents re): its waiter given up or
 * gone, its reply written, its requests read and answered, its deadline,
 * its closing. -1: drop it. */
static int conn_step(struct ddpc_store_server *s, conn *c, short re, double now) {
    if (re & POLLNVAL) return -1;
    if (c->state == C_WAITING && c->proto == PROTO_TORCH && (re & POLLIN) &&
        !(re & (POLLRDHUP | POLLHUP | POLLERR))) {
        /* a TCPStore client cannot cancel a wait: one that sends its
         * next request has given up on it, as torch's server assumes */
        c->state = C_READY;
        ddpc__req_done(c);
    }
    if (c->state == C_WAITING && (re & (POLLRDHUP | POLLHUP | POLLERR))) {
        DDPC_TRACE(STORE, "store: %s left while waiting", c->peer);
        return -1;
    }
    if (c->out_len && (re & (POLLOUT | POLLHUP | POLLERR)) && conn_write(c) < 0) return -1;
    if (!c->out_len && (re & (POLLIN | POLLHUP | POLLERR)) &&
        (c->state == C_HANDSHAKE || c->state == C_READY) && conn_read(s, c) < 0)
        return -1;
    if (!c->admitted && c->state != C_CLOSING && now >= c->deadline && s->gate.allow_torch &&
        c->pending.stage == 0) {
        /* PyTorch 1.13's TCPStore opens a second connection for watch_key
         * callbacks and sends nothing on it until it watches a key: where
         * torch clients are served, a connection that has sent nothing is
         * kept (its first byte still goes through the gate) */
        DDPC_INFO(STORE,
                  "store: %s has sent nothing in DDPC_AUTH_TIMEOUT=%g s: kept as a TCPStore "
                  "client's idle connection (DDPC_STORE_TORCH=1)",
                  c->peer, s->gate.auth_s);
        c->deadline = HUGE_VAL;
    }
    if (!c->admitted && c->state != C_CLOSING && now >= c->deadline) {
        DDPC_WARN(STORE,
                  "store: refused the connection from %s: it did not prove the job token "
                  "within DDPC_AUTH_TIMEOUT=%g s",
                  c->peer, s->gate.auth_s);
        return -1;
    }
    if (c->state == C_WAITING && now >= c->deadline) ddpc__req_check_waiter(s, c, now);
    if (torch_pump(s, c) < 0) return -1; /* requests queued behind one just answered */
    if (c->out_len && c->out_off == 0 && conn_write(c) < 0) return -1; /* answer at once */
    if (c->state == C_CLOSING && conn_close_step(c, now) < 0) return -1;
    return 0;
}

/* Keys were set: answers the waiters among conns[0..nc) they satisfy. */
static void wake_waiters(struct ddpc_store_server *s, int nc, double now) {
    s->dirty = 0;
    for (int i = 0; i < nc; i++) {
        conn *c = s->conns[i];
        if (!c || c->state != C_WAITING) continue;
        ddpc__req_check_waiter(s, c, now);
        if (torch_pump(s, c) < 0 || (c->out_len && conn_write(c) < 0)) {
            conn_free(c);
            s->conns[i] = NULL;
        }
    }
}

/* The server thread: poll, accept, read, answer, time out waiters. */
static void *server_main(void *arg) {
    struct ddpc_store_server *s = arg;
    struct pollfd *pf = NULL;
    int pf_cap = 0;
    for (;;) {
        double now = ddpc__now(), next = 1e300;
        if (pf_cap < s->nconns + 2) {
            int cap = (s->nconns + 2) * 2;
            struct pollfd *p = realloc(pf, (size_t)cap * sizeof *p);
            if (!p) {
                DDPC_WARN(STORE, "store: out of memory; stopping the server");
                break;
            }
            pf = p;
            pf_cap = cap;
        }
        pf[0] = (struct pollfd){ s->wake_fd, POLLIN, 0 };
        pf[1] = (struct pollfd){ s->lfd, (short)(now >= s->accept_pause ? POLLIN : 0), 0 };
        if (now < s->accept_pause && s->accept_pause < next) next = s->accept_pause;
        for (int i = 0; i < s->nconns; i++) {
            conn *c = s->conns[i];
            short ev = 0;
            if (c->out_len)
                ev |= POLLOUT;
            else if (c->state != C_WAITING)
                ev |= POLLIN;
            else
                ev |= POLLRDHUP |
                      (c->proto == PROTO_TORCH ? POLLIN : 0); /* it goes away, or gives up */
            if ((c->state == C_WAITING || c->state == C_CLOSING || !c->admitted) &&
                c->deadline < next)
                next = c->deadline;
            pf[i + 2] = (struct pollfd){ c->fd, ev, 0 };
        }
        int ms = next >= 1e299 ? -1 : ddpc__deadline_ms(next, 1000);
        int n = poll(pf, (nfds_t)s->nconns + 2, ms);
        if (n < 0 && errno != EINTR) {
            DDPC_WARN(STORE, "store: poll: %s; stopping the server", strerror(errno));
            break;
        }
        if (n > 0 && (pf[0].revents & POLLIN)) break;
        now = ddpc__now();
        int nc = s->nconns;
        for (int i = 0; i < nc; i++)
            if (conn_step(s, s->conns[i], n > 0 ? pf[i + 2].revents : 0, now) < 0) {
                conn_free(s->conns[i]);
                s->conns[i] = NULL;
            }
        if (s->dirty) wake_waiters(s, nc, now);
        int j = 0;
        for (int i = 0; i < nc; i++)
            if (s->conns[i]) s->conns[j++] = s->conns[i];
        s->nconns = j;
        if (n > 0 && (pf[1].revents & POLLIN)) accept_all(s);
    }
    free(pf);
    return NULL;
}

/* Who the server admits, from the environment: the job token
 * (DDPC_JOB_TOKEN), how long a connection may take to prove it, TCPStore
 * clients (DDPC_STORE_TORCH), the whitelist (HCCL_WHITELIST_*), and where
 * it listens (*host; every address under DDPC_STORE_ANY_ADDR=1). */
static ddpc_status server_settings(struct ddpc_store_server *s, const char **host) {
    long any = 0;
    DDPC_CHECK(ddpc__gate_load(&s->gate));
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_STORE_ANY_ADDR, &any));
    if (any) *host = NULL;
    return DDPC_OK;
}

ddpc_status ddpc_store_server_create(const char *host, int port, ddpc_store_server **out) {
    return ddpc__store_server_create_ports(host, port, NULL, out);
}

ddpc_status ddpc__store_server_create_ports(const char *host, int port, const ddpc__ports *ports,
                                            ddpc_store_server **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_server_create: out is NULL");
    *out = NULL;
    struct ddpc_store_server *s = calloc(1, sizeof *s);
    if (!s) return ddpc__err(DDPC_ERR_NOMEM, "store server: out of memory");
    s->lfd = s->wake_fd = -1;
    ddpc_status st = server_settings(s, &host);
    if (st == DDPC_OK)
        st = ports ? ddpc__sock_listen_ports(host, ports, 1024, &s->lfd, &s->port)
                   : ddpc__sock_listen(host, port, 1024, &s->lfd, &s->port);
    if (st != DDPC_OK) {
        ddpc__gate_free(&s->gate);
        free(s);
        return ddpc__err_wrap(st, "store server");
    }
    ddpc__sock_set_nonblock(s->lfd, 1);
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_fd < 0) {
        st = ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "store server: eventfd");
        goto fail;
    }
    /* the thread takes no signals: a launcher reads them with signalfd */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        st = ddpc__err_errno(DDPC_ERR_SYSTEM, rc, "store server: pthread_create");
        goto fail;
    }
    DDPC_INFO(STORE, "store server listening on %s:%d", host && *host ? host : "*", s->port);
    *out = s;
    return DDPC_OK;
fail:
    if (s->wake_fd >= 0) close(s->wake_fd);
    close(s->lfd);
    ddpc__gate_free(&s->gate);
    free(s);
    return st;
}

int ddpc_store_server_port(const ddpc_store_server *s) { return s ? s->port : -1; }

void ddpc_store_server_destroy(ddpc_store_server *s) {
    if (!s) return;
    uint64_t one = 1;
    while (write(s->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {}
    pthread_join(s->thread, NULL);
    for (int i = 0; i < s->nconns; i++) conn_free(s->conns[i]);
    free(s->conns);
    ddpc__tab_free(&s->tab);
    ddpc__tab_free(&s->queues);
    close(s->wake_fd);
    close(s->lfd);
    DDPC_TRACE(STORE, "store server on port %d stopped", s->port);
    ddpc__gate_free(&s->gate);
    free(s);
}
