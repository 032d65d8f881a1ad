/*
 * decode.c — the store's request decoders: ddpc's framed protocol and
 * PyTorch's c10d TCPStore protocol, both into one store_req (proto.h).
 *
 * Decoders only read: they check every length against what is there and
 * against the store's limits, and name the first problem. Executing a
 * request and encoding its reply is the server's job (server.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "store/proto.h"

/* Where an operation's request differs: its keys, what follows them, and
 * in ddpc's protocol a timeout before them. One row per OP_*; both
 * protocols' fields come in this order (proto.h). */
enum {
    K_NONE,           /* no key */
    K_ONE,            /* one key */
    K_LIST,           /* a count, then that many keys */
    K_ONE_TORCH_LIST, /* one key in ddpc's protocol, a list in TCPStore's */
    K_PAIRS           /* a count, then that many (key, value) pairs */
};
static const struct op_layout {
    const char *name;
    unsigned char keys;    /* K_* */
    unsigned char values;  /* value fields after the keys (CAS: expected, desired) */
    unsigned char delta;   /* an i64 after the keys */
    unsigned char timeout; /* ddpc's protocol: a u32 timeout_ms before the keys */
    unsigned char nonce;   /* TCPStore's protocol: a u32 nonce after the keys */
} layouts[OP_COUNT] = {
    [0] = { "?", K_NONE, 0, 0, 0 },
    [OP_SET] = { "set", K_ONE, 1, 0, 0 },
    [OP_GET] = { "get", K_ONE, 0, 0, 1 },
    [OP_ADD] = { "add", K_ONE, 0, 1, 0 },
    [OP_CAS] = { "compare_set", K_ONE, 2, 0, 0 },
    [OP_WAIT] = { "wait", K_LIST, 0, 0, 1 },
    [OP_CHECK] = { "check", K_ONE_TORCH_LIST, 0, 0, 0 },
    [OP_DELETE] = { "delete", K_ONE, 0, 0, 0 },
    [OP_NUM_KEYS] = { "num_keys", K_NONE, 0, 0, 0 },
    [OP_PING] = { "ping", K_NONE, 0, 0, 0, 1 },
    [OP_APPEND] = { "append", K_ONE, 1, 0, 0 },
    [OP_MULTI_GET] = { "multi_get", K_LIST, 0, 0, 0 },
    [OP_MULTI_SET] = { "multi_set", K_PAIRS, 0, 0, 0 },
    [OP_CANCEL_WAIT] = { "cancel_wait", K_NONE, 0, 0, 0 },
    [OP_QUEUE_PUSH] = { "queue_push", K_ONE, 1, 0, 0 },
    [OP_QUEUE_POP] = { "queue_pop", K_ONE, 0, 0, 0 },
    [OP_QUEUE_LEN] = { "queue_len", K_ONE, 0, 0, 0 },
    [OP_LIST_KEYS] = { "list_keys", K_NONE, 0, 0, 0 },
    [OP_BARRIER] = { "barrier", K_ONE, 0, 1, 0 },
};

const char *ddpc__store_op_name(int op) { return op > 0 && op < OP_COUNT ? layouts[op].name : "?"; }

/* A cursor over a request; lw is the width of its length fields. */
typedef struct cur {
    const unsigned char *p;
    size_t left;
    int lw;
    int short_; /* ran past the end */
} cur;

static int take_n(cur *r, size_t n, const unsigned char **at) {
    if (r->short_ || r->left < n) {
        r->short_ = 1;
        return -1;
    }
    *at = r->p;
    r->p += n;
    r->left -= n;
    return 0;
}

/* A length field (4 or 8 bytes). */
static int take_len(cur *r, uint64_t *v) {
    const unsigned char *at;
    if (take_n(r, (size_t)r->lw, &at)) return -1;
    *v = r->lw == 4 ? get_u32(at) : get_u64(at);
    return 0;
}

/* A length-prefixed field of at most max bytes. 0 ok, -1 short, -2 too long
 * (*n then holds the declared length). */
static int take_field(cur *r, uint64_t max, const unsigned char **at, uint64_t *n) {
    if (take_len(r, n)) return -1;
    if (*n > max) return -2;
    return take_n(r, (size_t)*n, at);
}

/* A key field: non-empty, at most DDPC_STORE_MAX_KEY bytes. -2 names the
 * problem in why. */
static int take_key(cur *r, int op, const unsigned char **at, uint32_t *kn, char *why, size_t wl) {
    uint64_t n = 0;
    int rc = take_field(r, DDPC_STORE_MAX_KEY, at, &n);
    if (rc == -2) {
        snprintf(why, wl, "%s: key of %" PRIu64 " bytes exceeds DDPC_STORE_MAX_KEY (%d)",
                 ddpc__store_op_name(op), n, DDPC_STORE_MAX_KEY);
        return -2;
    }
    if (rc == 0 && n == 0) {
        snprintf(why, wl, "%s: empty key", ddpc__store_op_name(op));
        return -2;
    }
    *kn = (uint32_t)n;
    return rc;
}

/* A value field of at most DDPC_STORE_MAX_VALUE bytes. */
static int take_value(cur *r, int op, const unsigned char **at, uint32_t *vn, char *why,
                      size_t wl) {
    uint64_t n = 0;
    int rc = take_field(r, DDPC_STORE_MAX_VALUE, at, &n);
    if (rc == -2)
        snprintf(why, wl, "%s: value of %" PRIu64 " bytes exceeds DDPC_STORE_MAX_VALUE (%u)",
                 ddpc__store_op_name(op), n, DDPC_STORE_MAX_VALUE);
    *vn = (uint32_t)n;
    return rc;
}

/* MULTI_SET's pairs, q->nkeys of them: each value within
 * DDPC_STORE_MAX_VALUE and the whole request within STORE_MAX_REQUEST,
 * checked as soon as a value's length is there. */
static int take_pairs(cur *r, store_req *q, const unsigned char *start, char *why, size_t wl) {
    int rc;
    for (uint32_t i = 0; i < q->nkeys; i++) {
        const unsigned char *k, *v;
        uint32_t kn;
        uint64_t vn;
        if ((rc = take_key(r, q->op, &k, &kn, why, wl))) return rc;
        if (take_len(r, &vn)) return -1;
        if (vn > DDPC_STORE_MAX_VALUE || (uint64_t)(r->p - start) + vn > STORE_MAX_REQUEST) {
            snprintf(why, wl,
                     "multi_set: a value of %" PRIu64 " bytes takes the request past %" PRIu64
                     " bytes (DDPC_STORE_MAX_VALUE %u each)",
                     vn, (uint64_t)STORE_MAX_REQUEST, DDPC_STORE_MAX_VALUE);
            return -2;
        }
        if (take_n(r, (size_t)vn, &v)) return -1;
        if (i == 0) {
            q->key = (const char *)k;
            q->klen = kn;
        }
    }
    return 0;
}

/* The fields after the op (and, for ddpc's GET/WAIT, the timeout), as
 * q->op's layout says; the protocols differ only in the width of length
 * fields, in CHECK's keys and in PING's nonce. Returns 0, -1 (short) or -2
 * (why filled). */
static int take_fields(cur *r, store_req *q, char *why, size_t wl) {
    const struct op_layout *l = &layouts[q->op];
    const unsigned char *start = r->p;
    int rc;
    q->nkeys = l->keys != K_NONE;
    if (l->keys == K_LIST || l->keys == K_PAIRS ||
        (l->keys == K_ONE_TORCH_LIST && q->proto == PROTO_TORCH)) {
        uint64_t n;
        int lo = q->dialect == TORCH_2 ? 0 : 1; /* torch 2.x's server takes empty lists */
        if (take_len(r, &n)) return -1;
        if (n < (uint64_t)lo || n > STORE_MAX_WAIT_KEYS) {
            snprintf(why, wl, "%s: %" PRIu64 " keys is outside [%d, %d]", l->name, n, lo,
                     STORE_MAX_WAIT_KEYS);
            return -2;
        }
        q->nkeys = (uint32_t)n;
    }
    q->keys = r->p;
    if (l->keys == K_PAIRS) return take_pairs(r, q, start, why, wl);
    for (uint32_t i = 0; i < q->nkeys; i++) {
        const unsigned char *k;
        uint32_t kn;
        if ((rc = take_key(r, q->op, &k, &kn, why, wl))) return rc;
        if (i == 0) {
            q->key = (const char *)k;
            q->klen = kn;
        }
    }
    if (l->nonce && q->proto == PROTO_TORCH) {
        const unsigned char *d;
        if (take_n(r, 4, &d)) return -1;
        q->nonce = get_u32(d);
    }
    if (l->values >= 1 && (rc = take_value(r, q->op, &q->v1, &q->n1, why, wl))) return rc;
    if (l->values >= 2 && (rc = take_value(r, q->op, &q->v2, &q->n2, why, wl))) return rc;
    if (l->delta) {
        const unsigned char *d;
        if (take_n(r, 8, &d)) return -1;
        q->delta = get_i64(d);
    }
    return 0;
}

int ddpc__store_decode_ddpc(const unsigned char *body, size_t len, store_req *q, char *why,
                            size_t whylen) {
    memset(q, 0, sizeof *q);
    q->proto = PROTO_DDPC;
    q->lw = 4;
    cur r = { body, len, 4, 0 };
    const unsigned char *at;
    if (take_n(&r, 1, &at)) {
        snprintf(why, whylen, "empty frame");
        return -1;
    }
    q->op = at[0];
    if (q->op <= 0 || q->op >= OP_DDPC_COUNT) {
        snprintf(why, whylen, "unknown operation %d", q->op);
        return -1;
    }
    if (layouts[q->op].timeout && take_n(&r, 4, &at) == 0) q->wait_s = get_u32(at) / 1000.0;
    int rc = take_fields(&r, q, why, whylen);
    if (rc == -2) return -1;
    if (rc || r.short_ || r.left) {
        snprintf(why, whylen, "%s: malformed request of %zu bytes", ddpc__store_op_name(q->op),
                 len);
        return -1;
    }
    return 0;
}

long ddpc__store_decode_torch(const unsigned char *buf, size_t len, int dialect, store_req *q,
                              char *why, size_t whylen) {
    static const int op_of1[TQ_COUNT] = {
        [TQ_SET] = OP_SET,
        [TQ_COMPARE_SET] = OP_CAS,
        [TQ_GET] = OP_GET,
        [TQ_ADD] = OP_ADD,
        [TQ_CHECK] = OP_CHECK,
        [TQ_WAIT] = OP_WAIT,
        [TQ_GETNUMKEYS] = OP_NUM_KEYS,
        [TQ_WATCH_KEY] = 0,
        [TQ_DELETE_KEY] = OP_DELETE,
    };
    static const int op_of2[T2_COUNT] = {
        [T2_VALIDATE] = 0, /* only first, and the server's (proto.h) */
        [T2_SET] = OP_SET,
        [T2_COMPARE_SET] = OP_CAS,
        [T2_GET] = OP_GET,
        [T2_ADD] = OP_ADD,
        [T2_CHECK] = OP_CHECK,
        [T2_WAIT] = OP_WAIT,
        [T2_GETNUMKEYS] = OP_NUM_KEYS,
        [T2_DELETE_KEY] = OP_DELETE,
        [T2_APPEND] = OP_APPEND,
        [T2_MULTI_GET] = OP_MULTI_GET,
        [T2_MULTI_SET] = OP_MULTI_SET,
        [T2_CANCEL_WAIT] = OP_CANCEL_WAIT,
        [T2_PING] = OP_PING,
        [T2_QUEUE_PUSH] = OP_QUEUE_PUSH,
        [T2_QUEUE_POP] = OP_QUEUE_POP,
        [T2_QUEUE_LEN] = OP_QUEUE_LEN,
        [T2_LIST_KEYS] = OP_LIST_KEYS,
        [T2_BARRIER] = OP_BARRIER,
    };
    memset(q, 0, sizeof *q);
    q->proto = PROTO_TORCH;
    q->dialect = dialect;
    q->lw = 8;
    q->wait_s = -1;
    if (len == 0) return 0;
    int two = dialect == TORCH_2, n = two ? T2_COUNT : TQ_COUNT;
    q->op = buf[0] < n ? (two ? op_of2 : op_of1)[buf[0]] : 0;
    if (!q->op) {
        snprintf(why, whylen, "TCPStore (torch %s) query type %d is %s", two ? "2.x" : "1.13",
                 buf[0],
                 !two && buf[0] == TQ_WATCH_KEY ? "not served (watch_key)"
                 : two && buf[0] == T2_VALIDATE ? "only the connection's first (validate)"
                                                : "unknown");
        return -1;
    }
    cur r = { buf + 1, len - 1, 8, 0 };
    int rc = take_fields(&r, q, why, whylen);
    if (rc == -2) return -1;
    if (rc || r.short_) return 0;
    return (long)(len - r.left);
}

const char *ddpc__store_req_key(const store_req *q, const unsigned char **p, uint32_t *klen) {
    uint64_t n = q->lw == 4 ? get_u32(*p) : get_u64(*p);
    const char *k = (const char *)*p + q->lw;
    *p += (size_t)q->lw + n;
    *klen = (uint32_t)n;
    return k;
}

const char *ddpc__store_req_pair(const store_req *q, const unsigned char **p, uint32_t *klen,
                                 const unsigned char **v, uint32_t *vn) {
    const char *k = ddpc__store_req_key(q, p, klen);
    uint64_t n = get_u64(*p);
    *v = *p + 8;
    *vn = (uint32_t)n;
    *p += 8 + n;
    return k;
}
