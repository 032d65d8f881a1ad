/*
 * client.c — the store's client: one blocking TCP connection per handle,
 * one request and one reply at a time, every call bounded by a deadline.
 *
 * Prefixed views are client-side: a view holds its prefix and borrows the
 * connection of the client it was made from. Any I/O error or malformed
 * reply marks the connection broken (the stream can no longer be trusted);
 * later calls fail at once with DDPC_ERR_PEER_LOST naming host:port.
 *
 * Two protocols behind one API (DDPC_STORE_PROTOCOL): ddpc's own, and
 * PyTorch's c10d TCPStore, so that a ddpc program meets torchrun's agent
 * store. "auto" tries ddpc's handshake and falls back to TCPStore when the
 * server closes on it (torch 1.13's does) or stays silent for PROBE_S
 * (torch 2.x's libuv server ignores a first query that is not VALIDATE).
 *
 * TCPStore has two dialects (proto.h): torch 1.13's, and torch 2.x's, whose
 * server serves a connection only after its VALIDATE. "torch" (and auto's
 * fallback) finds which by sending 2.x's VALIDATE and GETNUMKEYS: a 2.x
 * server answers at once; a 1.13 server reads those 6 bytes as the start of
 * a SET whose 8-byte key length has not all come, so it waits (allocating
 * nothing) until PROBE_S has passed and the probe connection closes, and
 * the client reconnects in 1.13's dialect. The other order would be unsafe:
 * a 1.13 server given a whole VALIDATE + query reads a key length of over
 * 50 GB and tries to allocate it. "torch1" and "torch2" name the dialect
 * and skip the probe. A 1.13 TCPStore cannot cancel a wait: a wait that
 * times out drops the connection, and the next call reconnects; in 2.x it
 * is cancelled (CANCEL_WAIT) and the connection kept.
 *
 * The wire formats are in proto.h; the server is server.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/base.h"
#include "base/env.h"
#include "base/sock.h"
#include "base/strbuf.h"
#include "store/client.h"
#include "store/proto.h"

/* Seconds as the wire's u32 milliseconds (<= 0 -> 0, capped near 49 days). */
static uint32_t wire_ms(double s) {
    if (!(s > 0)) return 0;
    if (s > 4.0e6) return 4000000000u;
    return (uint32_t)(s * 1000.0 + 0.5);
}

/* Writes prefix + key as a str field into *dst (advanced). The caller
 * checked the length with full_key_len. */
static unsigned char *put_key(const ddpc_store *st, unsigned char *dst, const char *key) {
    size_t kl = strlen(key);
    put_u32(dst, (uint32_t)(st->prefix_len + kl));
    memcpy(dst + 4, st->prefix, st->prefix_len);
    memcpy(dst + 4 + st->prefix_len, key, kl);
    return dst + 4 + st->prefix_len + kl;
}

/* Validates a key (with the view's prefix) and returns its full length. */
static ddpc_status full_key_len(const ddpc_store *st, const char *what, const char *key,
                                size_t *len) {
    if (!key) return ddpc__err(DDPC_ERR_INVALID_ARG, "store %s: key is NULL", what);
    size_t n = st->prefix_len + strlen(key);
    if (n == 0) return ddpc__err(DDPC_ERR_INVALID_ARG, "store %s: key is empty", what);
    if (n > DDPC_STORE_MAX_KEY)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store %s: key '%.60s...' is %zu bytes with its prefix; the limit is %d "
                         "(DDPC_STORE_MAX_KEY)",
                         what, key, n, DDPC_STORE_MAX_KEY);
    *len = n;
    return DDPC_OK;
}

/* Sends one request (the iovecs, concatenated, form the body after the
 * 4-byte length) and reads its reply. wait_s is how long the server may
 * legitimately hold the request (GET/WAIT); the client allows op_timeout on
 * top. On DDPC_OK, *rstatus is the reply's status and *body (malloc'd, NUL
 * appended) / *blen its payload. */
static ddpc_status rpc(ddpc_store *st, const char *what, struct iovec *iov, int niov, double wait_s,
                       int *rstatus, unsigned char **body, size_t *blen) {
    ddpc_store *r = st->root;
    *body = NULL;
    *blen = 0;
    if (r->broken)
        return ddpc__err(DDPC_ERR_PEER_LOST,
                         "store at %s: %s: the connection is unusable after an earlier error",
                         r->addr, what);
    uint64_t total = 0;
    for (int i = 0; i < niov; i++) total += iov[i].iov_len;
    if (total > STORE_MAX_REQUEST)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store %s: request of %llu bytes is too large", what,
                         (unsigned long long)total);
    double deadline = ddpc__now() + (wait_s > 0 ? wait_s : 0) + r->op_timeout;
    unsigned char hdr[4];
    put_u32(hdr, (uint32_t)total);
    ddpc_status s = ddpc__sock_write_full(r->fd, hdr, 4, deadline, -1);
    for (int i = 0; i < niov && s == DDPC_OK; i++)
        if (iov[i].iov_len)
            s = ddpc__sock_write_full(r->fd, iov[i].iov_base, iov[i].iov_len, deadline, -1);
    if (s == DDPC_OK) s = ddpc__sock_read_full(r->fd, hdr, 4, deadline, -1);
    uint32_t len = s == DDPC_OK ? get_u32(hdr) : 0;
    if (s == DDPC_OK && (len == 0 || len > STORE_MAX_REPLY)) {
        r->broken = 1;
        return ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: %s: reply of %u bytes is malformed",
                         r->addr, what, len);
    }
    unsigned char *b = NULL;
    if (s == DDPC_OK) {
        b = malloc((size_t)len + 1);
        if (!b) {
            r->broken = 1;
            return ddpc__err(DDPC_ERR_NOMEM, "store at %s: %s: no memory for a %u-byte reply",
                             r->addr, what, len);
        }
        s = ddpc__sock_read_full(r->fd, b, len, deadline, -1);
    }
    if (s != DDPC_OK) {
        free(b);
        r->broken = 1;
        if (s == DDPC_ERR_TIMEOUT)
            return ddpc__err(DDPC_ERR_TIMEOUT,
                             "store at %s: %s: no reply within %.0f s (DDPC_STORE_TIMEOUT)",
                             r->addr, what, (wait_s > 0 ? wait_s : 0) + r->op_timeout);
        if (s == DDPC_ERR_PEER_LOST)
            return ddpc__err(DDPC_ERR_PEER_LOST,
                             "store at %s: %s: connection lost (%s); is the store's host alive?",
                             r->addr, what, ddpc_last_error());
        return ddpc__err_wrap(s, "store at %s: %s", r->addr, what);
    }
    *rstatus = b[0];
    memmove(b, b + 1, len - 1);
    b[len - 1] = 0;
    *body = b;
    *blen = len - 1;
    if (*rstatus == RS_OK) return DDPC_OK;
    ddpc_status e = *rstatus == RS_TIMEOUT ? DDPC_ERR_TIMEOUT : DDPC_ERR_INVALID_ARG;
    if (*rstatus != RS_TIMEOUT && *rstatus != RS_ERROR) {
        r->broken = 1;
        e = DDPC_ERR_PROTOCOL;
    }
    ddpc__err(e, "store at %s: %s: %s", r->addr, what, (char *)b);
    free(b);
    *body = NULL;
    *blen = 0;
    return e;
}

/* ddpc's handshake on st->fd: magic + version, answered by RS_OK + the
 * server's version; bounded by deadline. */
static ddpc_status ddpc_handshake(ddpc_store *st, double deadline) {
    unsigned char hs[8], hdr[4], *b = NULL;
    put_u32(hs, STORE_MAGIC);
    put_u32(hs + 4, STORE_VERSION);
    /* raw I/O: the handshake has no length prefix */
    ddpc_status s = ddpc__sock_write_full(st->fd, hs, 8, deadline, -1);
    if (s == DDPC_OK) s = ddpc__sock_read_full(st->fd, hdr, 4, deadline, -1);
    uint32_t len = s == DDPC_OK ? get_u32(hdr) : 0;
    if (s == DDPC_OK && (len == 0 || len > 4096))
        s = ddpc__err(DDPC_ERR_PROTOCOL, "the peer at %s is not a ddpc store (bad handshake reply)",
                      st->addr);
    if (s == DDPC_OK && !(b = malloc(len + 1)))
        s = ddpc__err(DDPC_ERR_NOMEM, "store client: out of memory");
    if (s == DDPC_OK) s = ddpc__sock_read_full(st->fd, b, len, deadline, -1);
    if (s == DDPC_OK) {
        b[len] = 0;
        if (b[0] != RS_OK)
            s = ddpc__err(DDPC_ERR_PROTOCOL, "the store at %s refused the handshake: %s", st->addr,
                          (char *)b + 1);
        else if (len != 5 || get_u32(b + 1) != STORE_VERSION)
            s = ddpc__err(DDPC_ERR_PROTOCOL,
                          "the store at %s answered the handshake with a bad reply", st->addr);
    }
    free(b);
    return s;
}

/* Opens st's connection (st->fd) before deadline; reports a failure
 * naming host:port and timeout_s. */
static ddpc_status open_conn(ddpc_store *st, double deadline, double timeout_s) {
    ddpc_status s = ddpc__sock_connect(st->host, st->port, deadline, &st->fd);
    if (s == DDPC_ERR_TIMEOUT)
        return ddpc__err(DDPC_ERR_TIMEOUT, "no store answered at %s within %.3g s (%s)", st->addr,
                         timeout_s, ddpc_last_error());
    if (s != DDPC_OK) return ddpc__err_wrap(s, "connecting to the store at %s", st->addr);
    ddpc__sock_tune(st->fd, 0);
    return DDPC_OK;
}

static ddpc_status torch_num_keys(ddpc_store *st, int64_t *n);

/* How long a server may take to show which protocol it speaks: ddpc's
 * answers its handshake, torch 2.x's a VALIDATE + GETNUMKEYS, from their
 * poll loops, at once. */
#define PROBE_S 2.0

/* torch 2.x's VALIDATE, opening each of its connections (proto.h). */
static ddpc_status torch_validate(ddpc_store *st, double deadline) {
    unsigned char v[TORCH_VALIDATE_LEN] = { T2_VALIDATE };
    put_u32(v + 1, TORCH_VALIDATE_MAGIC);
    return ddpc__sock_write_full(st->fd, v, sizeof v, deadline, -1);
}

/* Finds the dialect of the TCPStore on st->fd (the comment at the top):
 * torch 2.x's answers VALIDATE + GETNUMKEYS within PROBE_S; otherwise the
 * probe connection is closed and a fresh one speaks torch 1.13's. */
static ddpc_status torch_probe(ddpc_store *st, double deadline, double timeout_s) {
    double pd = ddpc__now() + PROBE_S < deadline ? ddpc__now() + PROBE_S : deadline;
    unsigned char q = T2_GETNUMKEYS, n[8];
    ddpc_status s = torch_validate(st, pd);
    if (s == DDPC_OK) s = ddpc__sock_write_full(st->fd, &q, 1, pd, -1);
    if (s == DDPC_OK) s = ddpc__sock_read_full(st->fd, n, 8, pd, -1);
    if (s == DDPC_OK) {
        st->tdialect = TORCH_2;
        return DDPC_OK;
    }
    DDPC_TRACE(STORE, "store at %s: no answer to torch 2.x's VALIDATE (%s); speaking torch 1.13's",
               st->addr, ddpc_last_error());
    close(st->fd);
    st->fd = -1;
    st->tdialect = TORCH_1;
    return open_conn(st, deadline, timeout_s);
}

/* With a job token (DDPC_JOB_TOKEN), proves it to the server on st->fd and
 * checks the server's proof (auth.h); nothing to do without one. A server
 * that closes on it may be PyTorch's TCPStore, which cannot authenticate:
 * DDPC_ERR_PEER_LOST lets "auto" fall back to its protocol, warned. */
static ddpc_status prove_token(ddpc_store *st, double deadline) {
    const char *token = NULL;
    DDPC_CHECK(ddpc__auth_token(&token));
    if (!token) return DDPC_OK;
    char peer[320];
    snprintf(peer, sizeof peer, "the store at %s", st->addr);
    ddpc_status s = ddpc__auth_client(st->fd, token, DDPC_AUTH_STORE, deadline, -1, peer);
    if (s == DDPC_ERR_PEER_LOST)
        DDPC_WARN(STORE,
                  "%s; if it is PyTorch's TCPStore, it cannot check DDPC_JOB_TOKEN: this store "
                  "connection is not authenticated (connections between ranks still are)",
                  ddpc_last_error());
    return s;
}

ddpc_status ddpc_store_create_tcp(const char *host, int port, double timeout_s, ddpc_store **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_create_tcp: out is NULL");
    *out = NULL;
    if (!host || !*host) host = "127.0.0.1";
    if (port <= 0 || port > 65535)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store port %d is out of range [1, 65535]", port);
    if (strlen(host) > 255) return ddpc__err(DDPC_ERR_INVALID_ARG, "store host name is too long");
    if (!(timeout_s > 0)) DDPC_CHECK(ddpc__env_double(DDPC_ENV_CONNECT_TIMEOUT, &timeout_s));
    double op_timeout;
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_STORE_TIMEOUT, &op_timeout));
    const char *want = ddpc__env(DDPC_ENV_STORE_PROTOCOL, NULL);
    int torch_as = !strcmp(want, "torch1") ? TORCH_1 : !strcmp(want, "torch2") ? TORCH_2 : 0;
    if (strcmp(want, "auto") && strcmp(want, "ddpc") && strcmp(want, "torch") && !torch_as)
        return ddpc__err(DDPC_ERR_ENV,
                         "DDPC_STORE_PROTOCOL='%s' is not auto, ddpc, torch, torch1 or torch2",
                         want);
    ddpc_store *st = calloc(1, sizeof *st);
    if (!st || !(st->prefix = strdup(""))) {
        free(st);
        return ddpc__err(DDPC_ERR_NOMEM, "store client: out of memory");
    }
    st->root = st;
    st->fd = -1;
    st->op_timeout = op_timeout;
    snprintf(st->host, sizeof st->host, "%s", host);
    st->port = port;
    snprintf(st->addr, sizeof st->addr, "%s:%d", host, port);
    double deadline = ddpc__now() + timeout_s;
    ddpc_status s = open_conn(st, deadline, timeout_s);
    /* bounded by what is left of the connect timeout, at least 1 s, at most
     * DDPC_STORE_TIMEOUT */
    double left = deadline - ddpc__now();
    double hs_deadline = ddpc__now() + (left > 1 ? (left < op_timeout ? left : op_timeout) : 1);
    int is_auto = !strcmp(want, "auto");
    st->proto = strcmp(want, "ddpc") && !is_auto ? PROTO_TORCH : PROTO_DDPC;
    st->tdialect = torch_as;
    if (s == DDPC_OK && st->proto == PROTO_DDPC) {
        /* auto: a torch 2.x server says nothing to a handshake; wait PROBE_S for it */
        double hd =
            is_auto && ddpc__now() + PROBE_S < hs_deadline ? ddpc__now() + PROBE_S : hs_deadline;
        s = prove_token(st, hd);
        if (s == DDPC_OK) s = ddpc_handshake(st, hd);
        if ((s == DDPC_ERR_PEER_LOST || s == DDPC_ERR_TIMEOUT) && is_auto) {
            /* closed on, or silent to, our handshake: perhaps a PyTorch TCPStore */
            DDPC_TRACE(STORE, "store at %s %s ddpc's handshake; trying TCPStore's protocol",
                       st->addr, s == DDPC_ERR_TIMEOUT ? "did not answer" : "closed on");
            close(st->fd);
            st->fd = -1;
            st->proto = PROTO_TORCH;
            s = open_conn(st, deadline, timeout_s);
        } else if (s == DDPC_ERR_PEER_LOST || s == DDPC_ERR_TIMEOUT) {
            s = ddpc__err(s, "store at %s: handshake failed (%s); is it a ddpc store?", st->addr,
                          ddpc_last_error());
        }
    }
    if (s == DDPC_OK && st->proto == PROTO_TORCH && !st->tdialect)
        s = torch_probe(st, hs_deadline, timeout_s);
    else if (s == DDPC_OK && st->tdialect == TORCH_2)
        s = torch_validate(st, hs_deadline);
    if (s == DDPC_OK && st->proto == PROTO_TORCH) {
        int64_t n;
        double keep = st->op_timeout;
        st->op_timeout = hs_deadline - ddpc__now() > 0.001 ? hs_deadline - ddpc__now() : 0.001;
        s = torch_num_keys(st, &n);
        st->op_timeout = keep;
        if (s != DDPC_OK)
            s = ddpc__err(
                s,
                "store at %s answers neither ddpc's store protocol nor PyTorch's TCPStore's (%s)",
                st->addr, ddpc_last_error());
    }
    if (s != DDPC_OK) {
        if (st->fd >= 0) close(st->fd);
        free(st->prefix);
        free(st);
        return s;
    }
    DDPC_TRACE(STORE, "connected to the store at %s (%s protocol)", st->addr,
               st->proto == PROTO_DDPC   ? "ddpc"
               : st->tdialect == TORCH_2 ? "torch 2.x's TCPStore"
                                         : "torch 1.13's TCPStore");
    *out = st;
    return DDPC_OK;
}

const char *ddpc_store_protocol(const ddpc_store *st) {
    if (!st) return "";
    return st->root->proto == PROTO_TORCH ? "torch" : st->root->proto == PROTO_OPS ? "ops" : "ddpc";
}

/* --------------------------------------------- PyTorch's TCPStore protocol */

static void tb_u64(ddpc__strbuf *b, uint64_t v) {
    unsigned char x[8];
    put_u64(x, v);
    ddpc__sb_put(b, x, 8);
}
/* A bytes field: u64 length + bytes. */
static void tb_bytes(ddpc__strbuf *b, const void *v, size_t n) {
    tb_u64(b, n);
    ddpc__sb_put(b, v, n);
}
/* The view's prefix + key as one str field (checked by full_key_len). */
static void tb_key(ddpc__strbuf *b, const ddpc_store *st, const char *key) {
    size_t kl = strlen(key);
    tb_u64(b, st->prefix_len + kl);
    ddpc__sb_put(b, st->prefix, st->prefix_len);
    ddpc__sb_put(b, key, kl);
}
/* A request's head: the query type of operation op (OP_*) in the
 * server's dialect, then its key (if any). */
static ddpc__strbuf tb_start(const ddpc_store *st, int op, const char *key) {
    static const unsigned char query[OP_DDPC_COUNT][2] = {
        [OP_SET] = { TQ_SET, T2_SET },
        [OP_GET] = { TQ_GET, T2_GET },
        [OP_ADD] = { TQ_ADD, T2_ADD },
        [OP_CAS] = { TQ_COMPARE_SET, T2_COMPARE_SET },
        [OP_WAIT] = { TQ_WAIT, T2_WAIT },
        [OP_CHECK] = { TQ_CHECK, T2_CHECK },
        [OP_DELETE] = { TQ_DELETE_KEY, T2_DELETE_KEY },
        [OP_NUM_KEYS] = { TQ_GETNUMKEYS, T2_GETNUMKEYS },
    };
    ddpc__strbuf b = DDPC_STRBUF_HEAP; /* oom remembers a failed growth */
    unsigned char q = query[op][st->root->tdialect == TORCH_2];
    ddpc__sb_put(&b, &q, 1);
    if (key) tb_key(&b, st, key);
    return b;
}

/* torch 2.x: cancels the WAIT on r->fd that timed out. The server answers
 * WAIT_CANCELED, after STOP_WAITING when the keys came meanwhile. */
static ddpc_status torch_cancel_wait(ddpc_store *r) {
    double deadline = ddpc__now() + r->op_timeout;
    unsigned char q = T2_CANCEL_WAIT, v = 0xff;
    ddpc_status s = ddpc__sock_write_full(r->fd, &q, 1, deadline, -1);
    if (s == DDPC_OK) s = ddpc__sock_read_full(r->fd, &v, 1, deadline, -1);
    if (s == DDPC_OK && v == TWAIT_STOP_WAITING)
        s = ddpc__sock_read_full(r->fd, &v, 1, deadline, -1);
    if (s == DDPC_OK && v != TWAIT_CANCELED)
        s = ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: cancel_wait: unexpected reply %u", r->addr,
                      v);
    return s;
}

/* Sends a TCPStore request (freeing it) and reads its reply: nothing
 * (want = 0), a fixed-size value (want = 1 or 8 bytes, into fixed), or
 * with want < 0 a u64-length-prefixed value (*body, malloc'd, NUL
 * appended). wait_s > 0: the reply may legitimately take that long (a
 * WAIT); then DDPC_ERR_TIMEOUT, and the connection is dropped to be
 * re-opened by the next call (TCPStore cannot cancel a wait). */
static ddpc_status trpc(ddpc_store *st, const char *what, ddpc__strbuf *req, double wait_s,
                        int want, unsigned char *fixed, unsigned char **body, size_t *blen) {
    ddpc_store *r = st->root;
    ddpc_status s = DDPC_OK;
    if (body) *body = NULL;
    if (blen) *blen = 0;
    int oom = req->oom;
    if (oom)
        s = ddpc__err(DDPC_ERR_NOMEM, "store %s: out of memory", what);
    else if (r->broken)
        s = ddpc__err(DDPC_ERR_PEER_LOST,
                      "store at %s: %s: the connection is unusable after an earlier error", r->addr,
                      what);
    else if (r->fd < 0) {
        s = open_conn(r, ddpc__now() + r->op_timeout, r->op_timeout);
        if (s == DDPC_OK && r->tdialect == TORCH_2)
            s = torch_validate(r, ddpc__now() + r->op_timeout);
    }
    double deadline = ddpc__now() + r->op_timeout;
    if (s == DDPC_OK) s = ddpc__sock_write_full(r->fd, req->p, req->len, deadline, -1);
    ddpc__sb_free(req);
    if (s != DDPC_OK || want == 0) goto out;
    double rdl = wait_s > 0 ? ddpc__now() + wait_s : deadline;
    unsigned char len8[8];
    s = ddpc__sock_read_full(r->fd, want > 0 ? fixed : len8, want > 0 ? (size_t)want : 8, rdl, -1);
    if (s == DDPC_ERR_TIMEOUT &&
        wait_s > 0) { /* the wait ran out: cancel it, or forget the stream */
        if (r->tdialect != TORCH_2 || torch_cancel_wait(r) != DDPC_OK) {
            close(r->fd);
            r->fd = -1;
        }
        return ddpc__err(DDPC_ERR_TIMEOUT, "store at %s: %s: not done within %g s", r->addr, what,
                         wait_s);
    }
    if (s != DDPC_OK || want > 0) goto out;
    uint64_t len = get_u64(len8);
    if (len > STORE_MAX_REPLY) {
        r->broken = 1;
        return ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: %s: reply of %llu bytes is malformed",
                         r->addr, what, (unsigned long long)len);
    }
    unsigned char *b = malloc((size_t)len + 1);
    if (!b) {
        r->broken = 1;
        return ddpc__err(DDPC_ERR_NOMEM, "store at %s: %s: no memory for a %llu-byte reply",
                         r->addr, what, (unsigned long long)len);
    }
    s = ddpc__sock_read_full(r->fd, b, (size_t)len, deadline, -1);
    if (s != DDPC_OK) {
        free(b);
        goto out;
    }
    b[len] = 0;
    *body = b;
    *blen = (size_t)len;
out:
    if (s == DDPC_OK || oom) return s;
    if (s == DDPC_ERR_PEER_LOST && r->fd >= 0) {
        /* a TCPStore closes on a request it cannot serve: reconnect next time */
        close(r->fd);
        r->fd = -1;
        return ddpc__err(
            DDPC_ERR_PEER_LOST,
            "store at %s: %s: the TCPStore closed the connection (%s; it does so on a request it "
            "cannot serve, such as add to a value that is not an integer)",
            r->addr, what, ddpc_last_error());
    }
    r->broken = 1;
    if (s == DDPC_ERR_TIMEOUT)
        return ddpc__err(DDPC_ERR_TIMEOUT,
                         "store at %s: %s: no reply within %.0f s (DDPC_STORE_TIMEOUT)", r->addr,
                         what, r->op_timeout);
    return ddpc__err_wrap(s, "store at %s: %s", r->addr, what);
}

/* CHECK or WAIT (query: OP_CHECK, OP_WAIT) on the keys: *ready = all
 * exist. WAIT (wait_s > 0) gives
 * DDPC_ERR_TIMEOUT when they do not come in time. */
static ddpc_status torch_keys(ddpc_store *st, int query, const char *const *keys, int n,
                              double wait_s, int *ready) {
    ddpc__strbuf b = tb_start(st, query, NULL);
    tb_u64(&b, (uint64_t)n);
    for (int i = 0; i < n; i++) tb_key(&b, st, keys[i]);
    unsigned char v = 0xff;
    const char *what = query == OP_WAIT ? "wait" : "check";
    DDPC_CHECK(trpc(st, what, &b, query == OP_WAIT ? wait_s : 0, 1, &v, NULL, NULL));
    if (v > 1 || (query == OP_WAIT && v != TWAIT_STOP_WAITING)) {
        st->root->broken = 1;
        return ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: %s: unexpected reply %u", st->root->addr,
                         what, v);
    }
    *ready = v == 0;
    return DDPC_OK;
}

/* An integer reply (ADD, DELETE_KEY, GETNUMKEYS). */
static ddpc_status torch_int(ddpc_store *st, const char *what, ddpc__strbuf *b, int64_t *out) {
    unsigned char v[8];
    DDPC_CHECK(trpc(st, what, b, 0, 8, v, NULL, NULL));
    *out = get_i64(v);
    return DDPC_OK;
}

static ddpc_status torch_num_keys(ddpc_store *st, int64_t *n) {
    ddpc__strbuf b = tb_start(st, OP_NUM_KEYS, NULL);
    return torch_int(st, "num_keys", &b, n);
}

/* get: wait for the key (or, with no timeout, check it once), then fetch. */
static ddpc_status torch_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                             size_t *len) {
    int ready = 0;
    ddpc_status s = torch_keys(st, timeout_s > 0 ? OP_WAIT : OP_CHECK, &key, 1, timeout_s, &ready);
    if (s == DDPC_OK && !ready) s = DDPC_ERR_TIMEOUT;
    if (s == DDPC_ERR_TIMEOUT)
        return ddpc__err(s, "store at %s: key '%s%s' was not set within %g s", st->root->addr,
                         st->prefix, key, timeout_s > 0 ? timeout_s : 0);
    DDPC_CHECK(s);
    ddpc__strbuf b = tb_start(st, OP_GET, key);
    unsigned char *v;
    size_t n;
    DDPC_CHECK(trpc(st, "get", &b, 0, -1, NULL, &v, &n));
    *val = v;
    if (len) *len = n;
    return DDPC_OK;
}

ddpc_status ddpc_store_set_timeout(ddpc_store *st, double seconds) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_set_timeout: store is NULL");
    if (!(seconds > 0))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store request timeout %g s must be > 0", seconds);
    st->root->op_timeout = seconds;
    return DDPC_OK;
}

const char *ddpc_store_addr(const ddpc_store *st) { return st ? st->root->addr : ""; }

ddpc_status ddpc_store_prefixed(ddpc_store *st, const char *prefix, ddpc_store **out) {
    if (!st || !prefix || !out)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_store_prefixed: store, prefix and out must be non-NULL");
    *out = NULL;
    size_t pl = strlen(prefix);
    if (st->prefix_len + pl >= DDPC_STORE_MAX_KEY)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store prefix '%.60s' leaves no room for keys (DDPC_STORE_MAX_KEY %d)",
                         prefix, DDPC_STORE_MAX_KEY);
    ddpc_store *v = calloc(1, sizeof *v);
    char *p = malloc(st->prefix_len + pl + 1);
    if (!v || !p) {
        free(v);
        free(p);
        return ddpc__err(DDPC_ERR_NOMEM, "store view: out of memory");
    }
    memcpy(p, st->prefix, st->prefix_len);
    memcpy(p + st->prefix_len, prefix, pl + 1);
    v->root = st->root;
    v->prefix = p;
    v->prefix_len = st->prefix_len + pl;
    v->fd = -1;
    *out = v;
    return DDPC_OK;
}

void ddpc_store_destroy(ddpc_store *st) {
    if (!st) return;
    if (st->root == st && st->fd >= 0) close(st->fd);
    free(st->prefix);
    free(st);
}

/* Encodes the common request head: op, then (optional) u32 timeout, then
 * the key. Returns the bytes written into buf (sized by the caller). */
static size_t head(const ddpc_store *st, unsigned char *buf, int op, int with_ms, double timeout_s,
                   const char *key) {
    unsigned char *p = buf;
    *p++ = (unsigned char)op;
    if (with_ms) {
        put_u32(p, wire_ms(timeout_s));
        p += 4;
    }
    if (key) p = put_key(st, p, key);
    return (size_t)(p - buf);
}

#define HEAD_MAX (1 + 4 + 4 + DDPC_STORE_MAX_KEY)

ddpc_status ddpc_store_set(ddpc_store *st, const char *key, const void *val, size_t len) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_set: store is NULL");
    size_t kl;
    DDPC_CHECK(full_key_len(st, "set", key, &kl));
    if (len > DDPC_STORE_MAX_VALUE)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store set '%.60s': value of %zu bytes exceeds "
                         "DDPC_STORE_MAX_VALUE (%u)",
                         key, len, DDPC_STORE_MAX_VALUE);
    if (len && !val)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store set '%.60s': value is NULL", key);
    if (st->root->proto == PROTO_OPS) return ddpc__ops_set(st, key, val, len);
    if (st->root->proto == PROTO_TORCH) {
        ddpc__strbuf b = tb_start(st, OP_SET, key);
        tb_bytes(&b, val, len);
        return trpc(st, "set", &b, 0, 0, NULL, NULL, NULL);
    }
    unsigned char h[HEAD_MAX + 4];
    size_t hn = head(st, h, OP_SET, 0, 0, key);
    put_u32(h + hn, (uint32_t)len);
    struct iovec iov[2] = { { h, hn + 4 }, { (void *)val, len } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, "set", iov, 2, 0, &rs, &b, &bl));
    free(b);
    return DDPC_OK;
}

ddpc_status ddpc_store_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                           size_t *len) {
    if (!st || !val)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_get: store and val must be non-NULL");
    *val = NULL;
    if (len) *len = 0;
    size_t kl;
    DDPC_CHECK(full_key_len(st, "get", key, &kl));
    if (st->root->proto == PROTO_OPS) return ddpc__ops_get(st, key, timeout_s, val, len);
    if (st->root->proto == PROTO_TORCH) return torch_get(st, key, timeout_s, val, len);
    unsigned char h[HEAD_MAX];
    struct iovec iov[1] = { { h, head(st, h, OP_GET, 1, timeout_s, key) } };
    int rs;
    unsigned char *b;
    size_t bl;
    ddpc_status s = rpc(st, "get", iov, 1, timeout_s, &rs, &b, &bl);
    if (s == DDPC_ERR_TIMEOUT && !st->root->broken)
        return ddpc__err(s, "store at %s: key '%s%s' was not set within %g s", st->root->addr,
                         st->prefix, key, timeout_s > 0 ? timeout_s : 0);
    DDPC_CHECK(s);
    *val = b;
    if (len) *len = bl;
    return DDPC_OK;
}

ddpc_status ddpc_store_add(ddpc_store *st, const char *key, int64_t delta, int64_t *result) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_add: store is NULL");
    size_t kl;
    DDPC_CHECK(full_key_len(st, "add", key, &kl));
    if (st->root->proto == PROTO_OPS) return ddpc__ops_add(st, key, delta, result);
    if (st->root->proto == PROTO_TORCH) {
        ddpc__strbuf b = tb_start(st, OP_ADD, key);
        unsigned char d[8];
        int64_t v;
        put_i64(d, delta);
        ddpc__sb_put(&b, d, 8);
        DDPC_CHECK(torch_int(st, "add", &b, &v));
        if (result) *result = v;
        return DDPC_OK;
    }
    unsigned char h[HEAD_MAX + 8];
    size_t hn = head(st, h, OP_ADD, 0, 0, key);
    put_i64(h + hn, delta);
    struct iovec iov[1] = { { h, hn + 8 } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, "add", iov, 1, 0, &rs, &b, &bl));
    if (bl != 8) {
        free(b);
        st->root->broken = 1;
        return ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: add: reply of %zu bytes, want 8",
                         st->root->addr, bl);
    }
    if (result) *result = get_i64(b);
    free(b);
    return DDPC_OK;
}

ddpc_status ddpc_store_compare_set(ddpc_store *st, const char *key, const void *expected,
                                   size_t expected_len, const void *desired, size_t desired_len,
                                   void **actual, size_t *actual_len) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_compare_set: store is NULL");
    if (actual) *actual = NULL;
    if (actual_len) *actual_len = 0;
    size_t kl;
    DDPC_CHECK(full_key_len(st, "compare_set", key, &kl));
    if (expected_len > DDPC_STORE_MAX_VALUE || desired_len > DDPC_STORE_MAX_VALUE)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store compare_set '%.60s': a value exceeds "
                         "DDPC_STORE_MAX_VALUE (%u)",
                         key, DDPC_STORE_MAX_VALUE);
    if ((expected_len && !expected) || (desired_len && !desired))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store compare_set '%.60s': a value is NULL", key);
    if (st->root->proto == PROTO_OPS) {
        if (expected_len)
            return ddpc__err(DDPC_ERR_INVALID_ARG,
                             "%s: compare_set '%.60s': a store made of set, get and "
                             "add can only create an absent key (expected must be empty)",
                             st->root->addr, key);
        return ddpc__ops_create(st, key, desired, desired_len, actual, actual_len);
    }
    if (st->root->proto == PROTO_TORCH) {
        ddpc__strbuf b = tb_start(st, OP_CAS, key);
        tb_bytes(&b, expected, expected_len);
        tb_bytes(&b, desired, desired_len);
        unsigned char *v;
        size_t n;
        DDPC_CHECK(trpc(st, "compare_set", &b, 0, -1, NULL, &v, &n));
        if (actual)
            *actual = v;
        else
            free(v);
        if (actual_len) *actual_len = n;
        return DDPC_OK;
    }
    unsigned char h[HEAD_MAX + 4], m[4];
    size_t hn = head(st, h, OP_CAS, 0, 0, key);
    put_u32(h + hn, (uint32_t)expected_len);
    put_u32(m, (uint32_t)desired_len);
    struct iovec iov[4] = { { h, hn + 4 },
                            { (void *)expected, expected_len },
                            { m, 4 },
                            { (void *)desired, desired_len } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, "compare_set", iov, 4, 0, &rs, &b, &bl));
    if (actual)
        *actual = b;
    else
        free(b);
    if (actual_len) *actual_len = bl;
    return DDPC_OK;
}

ddpc_status ddpc_store_wait(ddpc_store *st, const char *const *keys, int n, double timeout_s) {
    if (!st || !keys)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_wait: store and keys must be non-NULL");
    if (n < 0 || n > STORE_MAX_WAIT_KEYS)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store wait: %d keys is outside [0, %d]", n,
                         STORE_MAX_WAIT_KEYS);
    if (n == 0) return DDPC_OK;
    size_t total = 1 + 4 + 4, kl;
    for (int i = 0; i < n; i++) {
        DDPC_CHECK(full_key_len(st, "wait", keys[i], &kl));
        total += 4 + kl;
    }
    if (st->root->proto == PROTO_OPS) return ddpc__ops_wait(st, keys, n, timeout_s);
    if (st->root->proto == PROTO_TORCH) {
        int ready = 0;
        ddpc_status s =
            torch_keys(st, timeout_s > 0 ? OP_WAIT : OP_CHECK, keys, n, timeout_s, &ready);
        if (s == DDPC_OK && !ready) s = DDPC_ERR_TIMEOUT;
        if (s == DDPC_ERR_TIMEOUT)
            return ddpc__err(s,
                             "store at %s: wait: %d keys ('%s%s'%s) were not all set within %g s",
                             st->root->addr, n, st->prefix, keys[0], n > 1 ? ", ..." : "",
                             timeout_s > 0 ? timeout_s : 0);
        return s;
    }
    unsigned char *buf = malloc(total), *p = buf;
    if (!buf) return ddpc__err(DDPC_ERR_NOMEM, "store wait: out of memory");
    *p++ = OP_WAIT;
    put_u32(p, wire_ms(timeout_s));
    put_u32(p + 4, (uint32_t)n);
    p += 8;
    for (int i = 0; i < n; i++) p = put_key(st, p, keys[i]);
    struct iovec iov[1] = { { buf, total } };
    int rs;
    unsigned char *b;
    size_t bl;
    ddpc_status s = rpc(st, "wait", iov, 1, timeout_s, &rs, &b, &bl);
    free(buf);
    DDPC_CHECK(s);
    free(b);
    return DDPC_OK;
}

/* check and delete: a key in, one byte out. */
static ddpc_status key_flag(ddpc_store *st, int op, const char *what, const char *key, int *flag) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "store %s: store is NULL", what);
    size_t kl;
    DDPC_CHECK(full_key_len(st, what, key, &kl));
    if (st->root->proto == PROTO_OPS) {
        if (op == OP_CHECK) return ddpc__ops_check(st, key, flag);
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: a store made of set, get and add cannot %s",
                         st->root->addr, what);
    }
    if (st->root->proto == PROTO_TORCH) {
        int64_t v = 0;
        if (op == OP_CHECK) return torch_keys(st, OP_CHECK, &key, 1, 0, flag);
        ddpc__strbuf b = tb_start(st, OP_DELETE, key);
        DDPC_CHECK(torch_int(st, what, &b, &v));
        if (flag) *flag = v > 0;
        return DDPC_OK;
    }
    unsigned char h[HEAD_MAX];
    struct iovec iov[1] = { { h, head(st, h, op, 0, 0, key) } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, what, iov, 1, 0, &rs, &b, &bl));
    int ok = bl == 1;
    if (ok && flag) *flag = b[0] != 0;
    free(b);
    if (!ok) {
        st->root->broken = 1;
        return ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: %s: reply of %zu bytes, want 1",
                         st->root->addr, what, bl);
    }
    return DDPC_OK;
}

ddpc_status ddpc_store_check(ddpc_store *st, const char *key, int *exists) {
    if (!exists) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_check: exists is NULL");
    return key_flag(st, OP_CHECK, "check", key, exists);
}

ddpc_status ddpc_store_delete(ddpc_store *st, const char *key, int *deleted) {
    return key_flag(st, OP_DELETE, "delete", key, deleted);
}

ddpc_status ddpc_store_num_keys(ddpc_store *st, int64_t *n) {
    if (!st || !n)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_num_keys: store and n must be non-NULL");
    if (st->root->proto == PROTO_OPS)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "%s: a store made of set, get and add cannot count its keys",
                         st->root->addr);
    if (st->root->proto == PROTO_TORCH) return torch_num_keys(st, n);
    unsigned char op = OP_NUM_KEYS;
    struct iovec iov[1] = { { &op, 1 } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, "num_keys", iov, 1, 0, &rs, &b, &bl));
    int ok = bl == 8;
    if (ok) *n = get_i64(b);
    free(b);
    if (!ok) {
        st->root->broken = 1;
        return ddpc__err(DDPC_ERR_PROTOCOL, "store at %s: num_keys: bad reply", st->root->addr);
    }
    return DDPC_OK;
}

ddpc_status ddpc_store_ping(ddpc_store *st) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_ping: store is NULL");
    if (st->root->proto == PROTO_OPS) return DDPC_OK;
    if (st->root->proto == PROTO_TORCH) {
        int64_t n;
        return torch_num_keys(st, &n);
    }
    unsigned char op = OP_PING;
    struct iovec iov[1] = { { &op, 1 } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, "ping", iov, 1, 0, &rs, &b, &bl));
    free(b);
    return DDPC_OK;
}
