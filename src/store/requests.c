/*
 * requests.c — what the store's server does with a decoded request
 * (store_req, decode.c): the handlers of set, get, add, compare-set, wait,
 * check, delete, num_keys and ping over the keys' table (table.c), their
 * dispatch table, and the parked GET or WAIT answered once its keys exist
 * or its timeout passes. Each answer is encoded in its client's protocol
 * (ddpc's frames or TCPStore's bare payloads) and queued on the connection;
 * writing it, and everything else about connections, is server.c's.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "store/conn.h"

/* A request that cannot be served: ddpc answers RS_ERROR and goes on;
 * a TCPStore client is disconnected, as torch's own server does. */
#define refuse(c, ...)                                             \
    ((c)->proto == PROTO_TORCH ? ddpc__conn_fail((c), __VA_ARGS__) \
                               : ddpc__conn_reply_msg((c), RS_ERROR, __VA_ARGS__))

/* An OK answer in the connection's protocol: ddpc frames it; TCPStore
 * sends the payload alone, after its u64 length when with_len. */
static void answer(conn *c, const void *p, size_t n, int with_len) {
    if (c->proto == PROTO_DDPC) {
        ddpc__conn_reply(c, RS_OK, p, n);
        return;
    }
    unsigned char l[8];
    put_u64(l, n);
    ddpc__conn_queue(c, l, with_len ? 8 : 0, p, n);
}

static void answer_i64(conn *c, int64_t v) {
    unsigned char b[8];
    put_i64(b, v);
    answer(c, b, 8, 0);
}

/* Parses a stored value as a decimal int64 (what add writes). */
static int parse_int(const unsigned char *v, size_t n, int64_t *out) {
    if (n == 0 || n > 20) return -1;
    size_t i = 0;
    int neg = 0;
    if (v[0] == '-' || v[0] == '+') {
        neg = v[0] == '-';
        i = 1;
        if (n == 1) return -1;
    }
    uint64_t acc = 0;
    for (; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        if (acc > (UINT64_MAX - (v[i] - '0')) / 10) return -1;
        acc = acc * 10 + (v[i] - '0');
    }
    if (!neg && acc > (uint64_t)INT64_MAX) return -1;
    if (neg && acc > (uint64_t)INT64_MAX + 1) return -1;
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 0;
}

/* The request just handled is done: drop its bytes from the input (a
 * TCPStore client may have sent the next ones behind it). */
void ddpc__req_done(conn *c) {
    size_t n = c->proto == PROTO_TORCH ? c->req_len : c->in_have;
    if (n < c->in_have) memmove(c->in, c->in + n, c->in_have - n);
    c->in_have -= n;
    c->req_len = 0;
}

/* Number of q's keys missing from the table; their names go into names
 * (when not NULL) as far as they fit. */
static uint32_t missing_keys(const struct ddpc_store_server *s, const store_req *q,
                             ddpc__strbuf *names) {
    const unsigned char *p = q->keys;
    uint32_t missing = 0;
    for (uint32_t i = 0; i < q->nkeys; i++) {
        uint32_t kn;
        const char *k = ddpc__store_req_key(q, &p, &kn);
        if (ddpc__tab_find(&s->tab, k, kn)) continue;
        if (names) ddpc__sb_printf(names, "%s'%.*s'", missing ? ", " : "", (int)kn, k);
        missing++;
    }
    return missing;
}

/* Re-examines a parked GET or WAIT (c->wq, whose bytes are still in c->in):
 * replies when its keys exist, or RS_TIMEOUT once its deadline has passed
 * (a TCPStore wait has none: its client gives up by closing). */
void ddpc__req_check_waiter(struct ddpc_store_server *s, conn *c, double now) {
    const store_req *q = &c->wq;
    if (q->op == OP_GET) {
        ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
        if (e)
            ddpc__conn_reply(c, RS_OK, e->val, e->vlen);
        else if (now >= c->deadline)
            ddpc__conn_reply_msg(c, RS_TIMEOUT, "key '%.*s' was not set in time",
                                 (int)(q->klen > 200 ? 200 : q->klen), q->key);
        else
            return;
    } else {
        char msg[800];
        ddpc__strbuf names;
        ddpc__sb_fixed(&names, msg, sizeof msg);
        uint32_t missing = missing_keys(s, q, &names);
        if (missing && now < c->deadline) return;
        if (missing == 0) {
            unsigned char stop = TWAIT_STOP_WAITING;
            answer(c, &stop, c->proto == PROTO_TORCH, 0);
        } else {
            ddpc__conn_reply_msg(c, RS_TIMEOUT, "%u of %u keys were not set in time: %s%s", missing,
                                 q->nkeys, msg, names.cut ? ", ..." : "");
        }
    }
    if (c->state == C_WAITING) c->state = C_READY;
    ddpc__req_done(c);
}

/* ------------------------------------------------------------ requests */

/* A request handler answers q on c, refuses it, or parks it (GET and WAIT
 * whose keys are missing). Returns 1 when q is finished with, 0 when it is
 * parked: a parked request's bytes stay in c->in until check_waiter
 * answers it. */
typedef int (*op_fn)(struct ddpc_store_server *s, conn *c, const store_req *q);

/* At most 200 bytes of a key, for messages. */
#define KSHOW(q) (int)((q)->klen > 200 ? 200 : (q)->klen), (q)->key

/* GET (ddpc) and WAIT: parked until the keys exist or the timeout passes. */
static int op_wait(struct ddpc_store_server *s, conn *c, const store_req *q) {
    double now = ddpc__now();
    c->wq = *q;
    c->deadline = q->wait_s < 0 ? 1e300 : now + q->wait_s;
    c->state = C_WAITING;
    ddpc__req_check_waiter(s, c, now);
    if (c->state == C_WAITING && q->proto == PROTO_TORCH && c->in_have > c->req_len) {
        c->state = C_READY; /* its next request is here: it gave up already (see server_main) */
        ddpc__req_done(c);
    }
    return 0;
}

/* ddpc's GET waits; TCPStore's clients wait first, and an absent key ends
 * the connection. */
static int op_get(struct ddpc_store_server *s, conn *c, const store_req *q) {
    if (q->proto == PROTO_DDPC) return op_wait(s, c, q);
    ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
    if (!e) {
        ddpc__conn_fail(c, "get: key '%.*s' does not exist", KSHOW(q));
        return 1;
    }
    answer(c, e->val, e->vlen, 1);
    return 1;
}

static int op_set(struct ddpc_store_server *s, conn *c, const store_req *q) {
    if (ddpc__tab_set(&s->tab, q->key, q->klen, q->v1, q->n1) != 0) {
        refuse(c, "set: server out of memory");
        return 1;
    }
    s->dirty = 1;
    if (c->proto == PROTO_DDPC) ddpc__conn_reply(c, RS_OK, NULL, 0);
    return 1;
}

/* The value, absent meaning 0, plus delta, stored as decimal text. */
static int op_add(struct ddpc_store_server *s, conn *c, const store_req *q) {
    int64_t cur_v = 0, res;
    ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
    if (e && parse_int(e->val, e->vlen, &cur_v) != 0) {
        refuse(c, "add: the value of key '%.*s' is not an integer", KSHOW(q));
        return 1;
    }
    if (__builtin_add_overflow(cur_v, q->delta, &res)) {
        refuse(c, "add: %" PRId64 " + %" PRId64 " overflows int64 at key '%.*s'", cur_v, q->delta,
               KSHOW(q));
        return 1;
    }
    char num[24];
    int len = snprintf(num, sizeof num, "%" PRId64, res);
    if (ddpc__tab_set(&s->tab, q->key, q->klen, num, (size_t)len) != 0) {
        refuse(c, "add: server out of memory");
        return 1;
    }
    s->dirty = 1;
    answer_i64(c, res);
    return 1;
}

/* torch's TCPStore: absent and expected empty -> set; absent and expected
 * non-empty -> answer expected; present -> swap if equal. */
static int op_cas(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
    if (!e && q->n1) {
        answer(c, q->v1, q->n1, 1);
        return 1;
    }
    if (!e || (e->vlen == q->n1 && memcmp(e->val, q->v1, q->n1) == 0)) {
        if (ddpc__tab_set(&s->tab, q->key, q->klen, q->v2, q->n2) != 0) {
            refuse(c, "compare_set: server out of memory");
            return 1;
        }
        s->dirty = 1;
        e = ddpc__tab_find(&s->tab, q->key, q->klen);
    }
    answer(c, e->val, e->vlen, 1);
    return 1;
}

static int op_check(struct ddpc_store_server *s, conn *c, const store_req *q) {
    int all = missing_keys(s, q, NULL) == 0;
    unsigned char r =
        (unsigned char)(c->proto == PROTO_TORCH ? (all ? TCHECK_READY : TCHECK_NOT_READY) : all);
    answer(c, &r, 1, 0);
    return 1;
}

static int op_delete(struct ddpc_store_server *s, conn *c, const store_req *q) {
    int del = ddpc__tab_del(&s->tab, q->key, q->klen);
    if (c->proto == PROTO_TORCH) {
        answer_i64(c, del);
    } else {
        unsigned char r = (unsigned char)del;
        ddpc__conn_reply(c, RS_OK, &r, 1);
    }
    return 1;
}

static int op_num_keys(struct ddpc_store_server *s, conn *c, const store_req *q) {
    answer_i64(c, (int64_t)s->tab.n);
    return 1;
}

static int op_ping(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__conn_reply(c, RS_OK, NULL, 0);
    return 1;
}

/* The request dispatcher's table, indexed by OP_*: both protocols decode
 * into these operations (their names and request layouts are decode.c's). */
static const struct op_handler {
    int op;
    op_fn fn;
} handlers[OP_COUNT] = {
    [OP_SET] = { OP_SET, op_set },          [OP_GET] = { OP_GET, op_get },
    [OP_ADD] = { OP_ADD, op_add },          [OP_CAS] = { OP_CAS, op_cas },
    [OP_WAIT] = { OP_WAIT, op_wait },       [OP_CHECK] = { OP_CHECK, op_check },
    [OP_DELETE] = { OP_DELETE, op_delete }, [OP_NUM_KEYS] = { OP_NUM_KEYS, op_num_keys },
    [OP_PING] = { OP_PING, op_ping },
};

/* Executes one decoded request and, when it is finished with, drops its
 * bytes from the input. */
void ddpc__req_handle(struct ddpc_store_server *s, conn *c, const store_req *q) {
    if (q->op <= 0 || q->op >= OP_COUNT ||
        handlers[q->op].op != q->op) { /* the decoders let none through */
        ddpc__conn_fail(c, "unknown operation %d", q->op);
        return;
    }
    if (handlers[q->op].fn(s, c, q) && c->state == C_READY) ddpc__req_done(c);
}
