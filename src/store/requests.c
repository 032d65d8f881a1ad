/*
 * requests.c — what the store's server does with a decoded request
 * (store_req, decode.c): the handlers of set, get, add, compare-set, wait,
 * check, delete, num_keys and ping over the keys' table (table.c), torch
 * 2.x's append, multi_get/multi_set, cancel_wait, queues, list_keys and
 * barrier, their dispatch table, and the parked GET, WAIT or BARRIER
 * answered once its keys exist (the barrier: once its key is changed by
 * the last arrival) or its timeout passes. Each answer is encoded in its client's protocol
 * (ddpc's frames or TCPStore's bare payloads) and queued on the connection;
 * writing it, and everything else about connections, is server.c's.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* key was changed in a way that wakes its waiters (torch's
 * wakeupWaitingClients): a parked BARRIER on it is answered, and every
 * parked request is looked at again. */
static void touched(struct ddpc_store_server *s, const char *k, uint32_t kn) {
    ddpc__entry *e = ddpc__tab_find(&s->tab, k, kn);
    if (e) e->wake = ++s->wake_seq;
    s->dirty = 1;
}

/* Number of items in a torch 2.x queue (its value: u64 len + bytes each). */
static int64_t queue_count(const ddpc__entry *e) {
    int64_t n = 0;
    for (size_t off = 0; e && off + 8 <= e->vlen; off += 8 + (size_t)get_u64(e->val + off)) n++;
    return n;
}

/* Number of q's keys missing from the table (with queues: a torch 2.x
 * queue holding items counts as present, as torch's checkKeys says);
 * their names go into names (when not NULL) as far as they fit. */
static uint32_t missing_keys(const struct ddpc_store_server *s, const store_req *q,
                             ddpc__strbuf *names, int queues) {
    const unsigned char *p = q->keys;
    uint32_t missing = 0;
    for (uint32_t i = 0; i < q->nkeys; i++) {
        uint32_t kn;
        const char *k = ddpc__store_req_key(q, &p, &kn);
        if (ddpc__tab_find(&s->tab, k, kn)) continue;
        if (queues && q->dialect == TORCH_2 && ddpc__tab_find(&s->queues, k, kn)) continue;
        if (names) ddpc__sb_printf(names, "%s'%.*s'", missing ? ", " : "", (int)kn, k);
        missing++;
    }
    return missing;
}

/* Re-examines a parked GET, WAIT or BARRIER (c->wq, whose bytes are still
 * in c->in): replies when its keys exist (a barrier: when its key was
 * touched since it parked), or RS_TIMEOUT once its deadline has passed (a
 * TCPStore wait has none: its client gives up by closing, or in torch 2.x
 * by CANCEL_WAIT). A queue's items wake a WAIT only as they are pushed. */
void ddpc__req_check_waiter(struct ddpc_store_server *s, conn *c, double now) {
    const store_req *q = &c->wq;
    if (q->op == OP_BARRIER) {
        ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
        if (!e || e->wake == c->wait_wake) return;
        unsigned char stop = TWAIT_STOP_WAITING;
        ddpc__conn_queue(c, &stop, 1, NULL, 0);
    } else if (q->op == OP_GET) {
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
        uint32_t missing = missing_keys(s, q, &names, 0);
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

/* Parks q on c until check_waiter answers it; a TCPStore request already
 * behind it in c->in means its client gave up on it (see server.c's
 * conn_step), so it is dropped at once. */
static void park(conn *c, const store_req *q, double now) {
    c->wq = *q;
    c->deadline = q->wait_s < 0 ? 1e300 : now + q->wait_s;
    c->state = C_WAITING;
}
static void gave_up_already(conn *c) {
    if (c->state == C_WAITING && c->proto == PROTO_TORCH && c->in_have > c->req_len) {
        c->state = C_READY;
        ddpc__req_done(c);
    }
}

/* GET (ddpc) and WAIT: parked until the keys exist or the timeout passes. */
static int op_wait(struct ddpc_store_server *s, conn *c, const store_req *q) {
    double now = ddpc__now();
    if (q->op == OP_WAIT && q->dialect == TORCH_2 && missing_keys(s, q, NULL, 1) == 0) {
        unsigned char stop = TWAIT_STOP_WAITING; /* queues count here (torch's waitKeys) */
        answer(c, &stop, 1, 0);
        return 1;
    }
    park(c, q, now);
    ddpc__req_check_waiter(s, c, now);
    gave_up_already(c);
    return 0;
}

/* ddpc's GET waits; TCPStore's clients wait first. An absent key ends a
 * torch 1.13 connection and answers empty bytes in torch 2.x. */
static int op_get(struct ddpc_store_server *s, conn *c, const store_req *q) {
    if (q->proto == PROTO_DDPC) return op_wait(s, c, q);
    ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
    if (!e && q->dialect == TORCH_2) {
        answer(c, NULL, 0, 1);
        return 1;
    }
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
    touched(s, q->key, q->klen);
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
    touched(s, q->key, q->klen);
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
        touched(s, q->key, q->klen);
        e = ddpc__tab_find(&s->tab, q->key, q->klen);
    }
    answer(c, e->val, e->vlen, 1);
    return 1;
}

static int op_check(struct ddpc_store_server *s, conn *c, const store_req *q) {
    int all = missing_keys(s, q, NULL, 1) == 0;
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

/* ddpc: an empty RS_OK; torch 2.x: its nonce back. */
static int op_ping(struct ddpc_store_server *s, conn *c, const store_req *q) {
    if (c->proto == PROTO_DDPC) {
        ddpc__conn_reply(c, RS_OK, NULL, 0);
        return 1;
    }
    unsigned char n[4];
    put_u32(n, q->nonce);
    answer(c, n, 4, 0);
    return 1;
}

/* ------------------------------------------ torch 2.x's further queries */

/* The key's value, with the bytes added at its end (created when absent). */
static int op_append(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
    if (e && e->vlen + q->n1 > DDPC_STORE_MAX_VALUE) {
        refuse(c, "append: key '%.*s' would exceed DDPC_STORE_MAX_VALUE (%u bytes)", KSHOW(q),
               DDPC_STORE_MAX_VALUE);
        return 1;
    }
    if (ddpc__tab_append(&s->tab, q->key, q->klen, q->v1, q->n1) != 0) {
        refuse(c, "append: server out of memory");
        return 1;
    }
    touched(s, q->key, q->klen);
    return 1;
}

/* Queues the reply built in *b (freeing it), or refuses q when building it
 * ran out of memory. Returns 1 (the request is done). */
static int answer_sb(conn *c, ddpc__strbuf *b, const char *what) {
    if (b->oom)
        refuse(c, "%s: server out of memory", what);
    else
        ddpc__conn_queue(c, b->p, b->len, NULL, 0);
    ddpc__sb_free(b);
    return 1;
}

/* Each key's value, empty when absent (the client waited for them first). */
static int op_multi_get(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__strbuf b = DDPC_STRBUF_HEAP;
    const unsigned char *p = q->keys;
    for (uint32_t i = 0; i < q->nkeys; i++) {
        uint32_t kn;
        const char *k = ddpc__store_req_key(q, &p, &kn);
        ddpc__entry *e = ddpc__tab_find(&s->tab, k, kn);
        unsigned char l[8];
        put_u64(l, e ? e->vlen : 0);
        ddpc__sb_put(&b, l, 8);
        if (e) ddpc__sb_put(&b, e->val, e->vlen);
    }
    return answer_sb(c, &b, "multi_get");
}

static int op_multi_set(struct ddpc_store_server *s, conn *c, const store_req *q) {
    const unsigned char *p = q->keys, *v;
    for (uint32_t i = 0; i < q->nkeys; i++) {
        uint32_t kn, vn;
        const char *k = ddpc__store_req_pair(q, &p, &kn, &v, &vn);
        if (ddpc__tab_set(&s->tab, k, kn, v, vn) != 0) {
            refuse(c, "multi_set: server out of memory");
            return 1;
        }
        touched(s, k, kn);
    }
    return 1;
}

/* The parked WAIT or BARRIER this answers was dropped as it arrived
 * (server.c's conn_step); with none parked the answer is the same. */
static int op_cancel_wait(struct ddpc_store_server *s, conn *c, const store_req *q) {
    unsigned char r = TWAIT_CANCELED;
    answer(c, &r, 1, 0);
    return 1;
}

/* 1 when k[0, kn) is among q's keys. */
static int has_key(const store_req *q, const char *k, uint32_t kn) {
    const unsigned char *p = q->keys;
    for (uint32_t i = 0; i < q->nkeys; i++) {
        uint32_t n;
        const char *x = ddpc__store_req_key(q, &p, &n);
        if (n == kn && memcmp(x, k, kn) == 0) return 1;
    }
    return 0;
}

/* Largest a queue may grow, all its items together. */
#define QUEUE_MAX_BYTES ((size_t)4 * DDPC_STORE_MAX_VALUE)

/* Appends an item, then wakes the first parked torch 2.x WAIT that the
 * queue's key completes (one per item, as torch's wakeupOneWaitingClient). */
static int op_queue_push(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__entry *e = ddpc__tab_find(&s->queues, q->key, q->klen);
    if (e && e->vlen + 8 + q->n1 > QUEUE_MAX_BYTES) {
        refuse(c, "queue_push: queue '%.*s' would exceed %zu bytes", KSHOW(q), QUEUE_MAX_BYTES);
        return 1;
    }
    unsigned char *item = malloc(8 + (size_t)q->n1);
    if (!item || (put_u64(item, q->n1), memcpy(item + 8, q->v1, q->n1),
                  ddpc__tab_append(&s->queues, q->key, q->klen, item, 8 + (size_t)q->n1) != 0)) {
        free(item);
        refuse(c, "queue_push: server out of memory");
        return 1;
    }
    free(item);
    for (int i = 0; i < s->nconns; i++) {
        conn *w = s->conns[i];
        if (!w || w == c || w->state != C_WAITING || w->wq.op != OP_WAIT ||
            w->wq.dialect != TORCH_2 || !has_key(&w->wq, q->key, q->klen))
            continue;
        const unsigned char *p = w->wq.keys;
        uint32_t ready = 0;
        for (uint32_t j = 0; j < w->wq.nkeys; j++) {
            uint32_t kn;
            const char *k = ddpc__store_req_key(&w->wq, &p, &kn);
            ready +=
                (kn == q->klen && !memcmp(k, q->key, kn)) || ddpc__tab_find(&s->tab, k, kn) != NULL;
        }
        if (ready < w->wq.nkeys) continue;
        unsigned char stop = TWAIT_STOP_WAITING;
        answer(w, &stop, 1, 0);
        w->state = C_READY;
        ddpc__req_done(w);
        break;
    }
    return 1;
}

/* The number of items, then (if any) the first, removed. */
static int op_queue_pop(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__entry *e = ddpc__tab_find(&s->queues, q->key, q->klen);
    int64_t n = queue_count(e);
    unsigned char h[16];
    put_i64(h, n);
    if (n == 0) {
        ddpc__conn_queue(c, h, 8, NULL, 0);
        return 1;
    }
    size_t len = (size_t)get_u64(e->val);
    memcpy(h + 8, e->val, 8);
    ddpc__conn_queue(c, h, 16, e->val + 8, len);
    if (n == 1) {
        ddpc__tab_del(&s->queues, q->key, q->klen);
    } else {
        memmove(e->val, e->val + 8 + len, e->vlen - 8 - len);
        e->vlen -= 8 + len;
    }
    return 1;
}

static int op_queue_len(struct ddpc_store_server *s, conn *c, const store_req *q) {
    answer_i64(c, queue_count(ddpc__tab_find(&s->queues, q->key, q->klen)));
    return 1;
}

/* The number of keys, then each key as bytes (queues are not keys). */
static int op_list_keys(struct ddpc_store_server *s, conn *c, const store_req *q) {
    ddpc__strbuf b = DDPC_STRBUF_HEAP;
    unsigned char l[8];
    put_i64(l, (int64_t)s->tab.n);
    ddpc__sb_put(&b, l, 8);
    for (size_t i = 0; i < s->tab.nb; i++)
        for (const ddpc__entry *e = s->tab.b[i]; e; e = e->next) {
            put_u64(l, e->klen);
            ddpc__sb_put(&b, l, 8);
            ddpc__sb_put(&b, e->key, e->klen);
        }
    return answer_sb(c, &b, "list_keys");
}

/* Adds 1 to the key's counter; the arrival that brings it to the world
 * size (q->delta) wakes the others and is answered at once, the others
 * park until then (or until the key is otherwise changed, as in torch). */
static int op_barrier(struct ddpc_store_server *s, conn *c, const store_req *q) {
    int64_t n = 0;
    ddpc__entry *e = ddpc__tab_find(&s->tab, q->key, q->klen);
    if (e && (parse_int(e->val, e->vlen, &n) != 0 || n == INT64_MAX)) {
        refuse(c, "barrier: the value of key '%.*s' is not a counter", KSHOW(q));
        return 1;
    }
    char num[24];
    int len = snprintf(num, sizeof num, "%" PRId64, n + 1);
    if (ddpc__tab_set(&s->tab, q->key, q->klen, num, (size_t)len) != 0) {
        refuse(c, "barrier: server out of memory");
        return 1;
    }
    if (n + 1 >= q->delta) {
        touched(s, q->key, q->klen);
        unsigned char stop = TWAIT_STOP_WAITING;
        answer(c, &stop, 1, 0);
        return 1;
    }
    park(c, q, ddpc__now());
    c->wait_wake = ddpc__tab_find(&s->tab, q->key, q->klen)->wake;
    gave_up_already(c);
    return 0;
}

/* The request dispatcher's table, indexed by OP_*: both protocols decode
 * into these operations (their names and request layouts are decode.c's). */
static const struct op_handler {
    int op;
    op_fn fn;
} handlers[OP_COUNT] = {
    [OP_SET] = { OP_SET, op_set },
    [OP_GET] = { OP_GET, op_get },
    [OP_ADD] = { OP_ADD, op_add },
    [OP_CAS] = { OP_CAS, op_cas },
    [OP_WAIT] = { OP_WAIT, op_wait },
    [OP_CHECK] = { OP_CHECK, op_check },
    [OP_DELETE] = { OP_DELETE, op_delete },
    [OP_NUM_KEYS] = { OP_NUM_KEYS, op_num_keys },
    [OP_PING] = { OP_PING, op_ping },
    [OP_APPEND] = { OP_APPEND, op_append },
    [OP_MULTI_GET] = { OP_MULTI_GET, op_multi_get },
    [OP_MULTI_SET] = { OP_MULTI_SET, op_multi_set },
    [OP_CANCEL_WAIT] = { OP_CANCEL_WAIT, op_cancel_wait },
    [OP_QUEUE_PUSH] = { OP_QUEUE_PUSH, op_queue_push },
    [OP_QUEUE_POP] = { OP_QUEUE_POP, op_queue_pop },
    [OP_QUEUE_LEN] = { OP_QUEUE_LEN, op_queue_len },
    [OP_LIST_KEYS] = { OP_LIST_KEYS, op_list_keys },
    [OP_BARRIER] = { OP_BARRIER, op_barrier },
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
