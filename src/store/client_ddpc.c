/*
 * client_ddpc.c — the store client's calls in ddpc's own wire protocol
 * (proto.h): a u32 length, then {op, [u32 timeout ms], key, ...}; the reply
 * a u32 length, then {status, body}. One request and one reply at a time on
 * the root handle's connection; any I/O error or malformed reply marks the
 * connection broken. client.c checks the arguments and connects; the
 * server is server.c.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/base.h"
#include "base/sock.h"
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
ddpc_status ddpc__store_ddpc_handshake(ddpc_store *st, double deadline) {
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

static ddpc_status ddpc_set(ddpc_store *st, const char *key, const void *val, size_t len) {
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

static ddpc_status ddpc_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                            size_t *len) {
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

static ddpc_status ddpc_add(ddpc_store *st, const char *key, int64_t delta, int64_t *result) {
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

static ddpc_status ddpc_compare_set(ddpc_store *st, const char *key, const void *expected,
                                    size_t expected_len, const void *desired, size_t desired_len,
                                    void **actual, size_t *actual_len) {
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

static ddpc_status ddpc_wait(ddpc_store *st, const char *const *keys, int n, double timeout_s) {
    size_t total = 1 + 4 + 4;
    for (int i = 0; i < n; i++) total += 4 + st->prefix_len + strlen(keys[i]);
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

static ddpc_status ddpc_check(ddpc_store *st, const char *key, int *exists) {
    return key_flag(st, OP_CHECK, "check", key, exists);
}

static ddpc_status ddpc_delete(ddpc_store *st, const char *key, int *deleted) {
    return key_flag(st, OP_DELETE, "delete", key, deleted);
}

static ddpc_status ddpc_num_keys(ddpc_store *st, int64_t *n) {
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

static ddpc_status ddpc_ping(ddpc_store *st) {
    unsigned char op = OP_PING;
    struct iovec iov[1] = { { &op, 1 } };
    int rs;
    unsigned char *b;
    size_t bl;
    DDPC_CHECK(rpc(st, "ping", iov, 1, 0, &rs, &b, &bl));
    free(b);
    return DDPC_OK;
}

const ddpc__store_proto ddpc__store_proto_ddpc = {
    .name = "ddpc",
    .set = ddpc_set,
    .get = ddpc_get,
    .add = ddpc_add,
    .compare_set = ddpc_compare_set,
    .wait = ddpc_wait,
    .check = ddpc_check,
    .del = ddpc_delete,
    .num_keys = ddpc_num_keys,
    .ping = ddpc_ping,
};
