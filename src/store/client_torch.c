/*
 * client_torch.c — the store client's calls in PyTorch's c10d TCPStore
 * protocol (proto.h), in either of its dialects: torch 1.13's, and torch
 * 2.x's, whose server serves a connection only after its VALIDATE
 * (ddpc__store_torch_probe finds which; client.c's opening comment says
 * how). Requests are {query, fields}; replies are fixed-size or a u64
 * length and bytes. A 1.13 TCPStore cannot cancel a wait: a wait that
 * times out drops the connection, and the next call reconnects; in 2.x it
 * is cancelled (CANCEL_WAIT) and the connection kept. client.c checks the
 * arguments and connects.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/sock.h"
#include "base/strbuf.h"
#include "store/client.h"
#include "store/proto.h"

/* torch 2.x's VALIDATE, opening each of its connections (proto.h). */
ddpc_status ddpc__store_torch_validate(ddpc_store *st, double deadline) {
    unsigned char v[TORCH_VALIDATE_LEN] = { T2_VALIDATE };
    put_u32(v + 1, TORCH_VALIDATE_MAGIC);
    return ddpc__sock_write_full(st->fd, v, sizeof v, deadline, -1);
}

/* Finds the dialect of the TCPStore on st->fd (client.c's opening comment):
 * torch 2.x's answers VALIDATE + GETNUMKEYS within PROBE_S; otherwise the
 * probe connection is closed and a fresh one speaks torch 1.13's. */
ddpc_status ddpc__store_torch_probe(ddpc_store *st, double deadline, double timeout_s) {
    double pd = ddpc__now() + PROBE_S < deadline ? ddpc__now() + PROBE_S : deadline;
    unsigned char q = T2_GETNUMKEYS, n[8];
    ddpc_status s = ddpc__store_torch_validate(st, pd);
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
    return ddpc__store_open(st, deadline, timeout_s);
}

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
        s = ddpc__store_open(r, ddpc__now() + r->op_timeout, r->op_timeout);
        if (s == DDPC_OK && r->tdialect == TORCH_2)
            s = ddpc__store_torch_validate(r, ddpc__now() + r->op_timeout);
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

static ddpc_status torch_set(ddpc_store *st, const char *key, const void *val, size_t len) {
    ddpc__strbuf b = tb_start(st, OP_SET, key);
    tb_bytes(&b, val, len);
    return trpc(st, "set", &b, 0, 0, NULL, NULL, NULL);
}

static ddpc_status torch_add(ddpc_store *st, const char *key, int64_t delta, int64_t *result) {
    ddpc__strbuf b = tb_start(st, OP_ADD, key);
    unsigned char d[8];
    int64_t v;
    put_i64(d, delta);
    ddpc__sb_put(&b, d, 8);
    DDPC_CHECK(torch_int(st, "add", &b, &v));
    if (result) *result = v;
    return DDPC_OK;
}

static ddpc_status torch_compare_set(ddpc_store *st, const char *key, const void *expected,
                                     size_t expected_len, const void *desired, size_t desired_len,
                                     void **actual, size_t *actual_len) {
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

static ddpc_status torch_wait(ddpc_store *st, const char *const *keys, int n, double timeout_s) {
    int ready = 0;
    ddpc_status s = torch_keys(st, timeout_s > 0 ? OP_WAIT : OP_CHECK, keys, n, timeout_s, &ready);
    if (s == DDPC_OK && !ready) s = DDPC_ERR_TIMEOUT;
    if (s == DDPC_ERR_TIMEOUT)
        return ddpc__err(s, "store at %s: wait: %d keys ('%s%s'%s) were not all set within %g s",
                         st->root->addr, n, st->prefix, keys[0], n > 1 ? ", ..." : "",
                         timeout_s > 0 ? timeout_s : 0);
    return s;
}

static ddpc_status torch_check(ddpc_store *st, const char *key, int *exists) {
    return torch_keys(st, OP_CHECK, &key, 1, 0, exists);
}

static ddpc_status torch_delete(ddpc_store *st, const char *key, int *deleted) {
    int64_t v = 0;
    ddpc__strbuf b = tb_start(st, OP_DELETE, key);
    DDPC_CHECK(torch_int(st, "delete", &b, &v));
    if (deleted) *deleted = v > 0;
    return DDPC_OK;
}

static ddpc_status torch_ping(ddpc_store *st) {
    int64_t n;
    return torch_num_keys(st, &n);
}

const ddpc__store_proto ddpc__store_proto_torch = {
    .name = "torch",
    .set = torch_set,
    .get = torch_get,
    .add = torch_add,
    .compare_set = torch_compare_set,
    .wait = torch_wait,
    .check = torch_check,
    .del = torch_delete,
    .num_keys = torch_num_keys,
    .ping = torch_ping,
};
