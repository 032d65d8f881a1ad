/*
 * server.c — the store's server: one thread, non-blocking sockets
 * multiplexed with poll(), a hash table of keys.
 *
 * Every connection is a small state machine (handshake, ready, waiting on
 * keys, closing). A connection is read only while it has no reply pending,
 * so its memory is bounded by one request plus one reply, and a client that
 * stops reading stalls only itself. GET and WAIT park their connection until
 * the keys exist or the request's own timeout passes, at which point the
 * server answers RS_TIMEOUT itself. Bad input is answered with RS_ERROR, then
 * the connection is flushed, half-closed, drained briefly and closed.
 *
 * The wire format is in proto.h; the client is client.c.
 */
#include <errno.h>
#include <inttypes.h>
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

#include "base/base.h"
#include "base/sock.h"
#include "store/proto.h"

/* ------------------------------------------------------------ the table */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    char *key;            /* owned, klen bytes (not NUL-terminated on the wire) */
    uint32_t klen;
    unsigned char *val;   /* owned, vlen bytes (+1 NUL so integers parse) */
    size_t vlen;
} entry;

typedef struct table {
    entry **b;   /* nb buckets */
    size_t nb;
    size_t n;    /* number of keys */
} table;

static uint64_t fnv1a(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

static entry *tab_find(const table *t, const char *k, uint32_t kn) {
    if (!t->nb) return NULL;
    uint64_t h = fnv1a(k, kn);
    for (entry *e = t->b[h % t->nb]; e; e = e->next)
        if (e->hash == h && e->klen == kn && memcmp(e->key, k, kn) == 0) return e;
    return NULL;
}

/* Grows the bucket array when the load passes 1; keeps the old one when
 * memory is short (chains just get longer). */
static void tab_grow(table *t) {
    size_t nb = t->nb ? t->nb * 2 : 64;
    entry **b = calloc(nb, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < t->nb; i++)
        for (entry *e = t->b[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash % nb];
            b[e->hash % nb] = e;
        }
    free(t->b);
    t->b = b;
    t->nb = nb;
}

/* Sets key to a copy of val; 0 on success, -1 when out of memory (the old
 * value, if any, is kept). */
static int tab_set(table *t, const char *k, uint32_t kn, const void *val, size_t vn) {
    unsigned char *v = malloc(vn + 1);
    if (!v) return -1;
    if (vn) memcpy(v, val, vn);
    v[vn] = 0;
    entry *e = tab_find(t, k, kn);
    if (e) {
        free(e->val);
        e->val = v;
        e->vlen = vn;
        return 0;
    }
    if (t->n >= t->nb) tab_grow(t);
    if (!t->nb || !(e = calloc(1, sizeof *e)) || !(e->key = malloc(kn ? kn : 1))) {
        free(e);
        free(v);
        return -1;
    }
    memcpy(e->key, k, kn);
    e->klen = kn;
    e->hash = fnv1a(k, kn);
    e->val = v;
    e->vlen = vn;
    e->next = t->b[e->hash % t->nb];
    t->b[e->hash % t->nb] = e;
    t->n++;
    return 0;
}

static int tab_del(table *t, const char *k, uint32_t kn) {
    if (!t->nb) return 0;
    uint64_t h = fnv1a(k, kn);
    for (entry **pp = &t->b[h % t->nb]; *pp; pp = &(*pp)->next) {
        entry *e = *pp;
        if (e->hash == h && e->klen == kn && memcmp(e->key, k, kn) == 0) {
            *pp = e->next;
            free(e->key);
            free(e->val);
            free(e);
            t->n--;
            return 1;
        }
    }
    return 0;
}

static void tab_free(table *t) {
    for (size_t i = 0; i < t->nb; i++)
        for (entry *e = t->b[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->key);
            free(e->val);
            free(e);
        }
    free(t->b);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------- connections */

enum { C_HANDSHAKE, C_READY, C_WAITING, C_CLOSING };

#define READ_CHUNK (1u << 20)      /* most bytes read per recv */
#define CLOSE_LINGER_S 1.0         /* how long a closing connection is drained */
#define CLOSE_DRAIN_MAX (1u << 20) /* most bytes discarded while draining */
#define MAX_CONNS 65536

typedef struct conn {
    int fd;
    int state;
    char peer[72];        /* "addr:port" of the client, for logs */
    unsigned char *in;    /* the frame being read (header included) */
    size_t in_have;       /* bytes of it read so far */
    size_t in_cap;
    unsigned char *out;   /* the reply being written */
    size_t out_len, out_off;
    double deadline;      /* waiting: the request's timeout; closing: linger end */
    size_t drained;       /* closing: bytes discarded */
    int wr_shut;          /* closing: shutdown(SHUT_WR) done */
} conn;

struct ddpc_store_server {
    int lfd;
    int port;
    int wake_fd;            /* eventfd: stop request */
    pthread_t thread;
    conn **conns;           /* nconns live connections */
    int nconns, cap;
    table tab;
    int dirty;              /* a key was set since waiters were last checked */
    double accept_pause;    /* accept paused until then (fd limit reached) */
};

static void conn_free(conn *c) {
    if (c->fd >= 0) close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Queues a reply of status and payload p1 + p2; on memory shortage the
 * connection is closed instead. */
static void reply2(conn *c, int status, const void *p1, size_t n1, const void *p2, size_t n2) {
    size_t len = 1 + n1 + n2;
    unsigned char *o = malloc(4 + len);
    if (!o) {
        DDPC_WARN(STORE, "store: out of memory replying to %s; closing it", c->peer);
        c->state = C_CLOSING;
        c->deadline = 0; /* closes at once */
        return;
    }
    put_u32(o, (uint32_t)len);
    o[4] = (unsigned char)status;
    if (n1) memcpy(o + 5, p1, n1);
    if (n2) memcpy(o + 5 + n1, p2, n2);
    free(c->out);
    c->out = o;
    c->out_len = 4 + len;
    c->out_off = 0;
}

static void reply(conn *c, int status, const void *p, size_t n) { reply2(c, status, p, n, NULL, 0); }

static void reply_msg(conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply_msg(conn *c, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    reply(c, status, msg, (size_t)n);
}

/* Answers a protocol violation and starts closing the connection. */
static void fail_conn(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_conn(conn *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    DDPC_INFO(STORE, "store: closing %s: %s", c->peer, msg);
    reply_msg(c, RS_ERROR, "%s", msg);
    c->state = C_CLOSING;
    c->deadline = ddpc_now() + CLOSE_LINGER_S;
}

/* A cursor over a request body; every take fails once the body is short. */
typedef struct cur {
    const unsigned char *p;
    size_t left;
    int bad;
} cur;

static uint32_t take_u32(cur *r) {
    if (r->bad) return 0;
    if (r->left < 4) { r->bad = 1; return 0; }
    uint32_t v = get_u32(r->p);
    r->p += 4;
    r->left -= 4;
    return v;
}
static int64_t take_i64(cur *r) {
    if (r->bad) return 0;
    if (r->left < 8) { r->bad = 1; return 0; }
    int64_t v = get_i64(r->p);
    r->p += 8;
    r->left -= 8;
    return v;
}
/* A u32-length-prefixed field of at most max bytes. */
static const unsigned char *take_bytes(cur *r, uint64_t max, uint32_t *n) {
    uint32_t len = take_u32(r);
    *n = 0;
    if (r->bad) return NULL;
    if (len > max || len > r->left) { r->bad = 1; return NULL; }
    const unsigned char *p = r->p;
    r->p += len;
    r->left -= len;
    *n = len;
    return p;
}

static const char *op_name(int op) {
    static const char *names[] = {"?", "set", "get", "add", "compare_set", "wait",
                                  "check", "delete", "num_keys", "ping"};
    return op > 0 && op < OP_COUNT ? names[op] : "?";
}

/* Decodes a key field, failing the connection when it is missing, empty or
 * longer than DDPC_STORE_MAX_KEY. */
static const char *take_key(conn *c, cur *r, uint32_t *kn, int op) {
    uint32_t len = r->left >= 4 ? get_u32(r->p) : 0;
    if (!r->bad && r->left >= 4 && len > DDPC_STORE_MAX_KEY) {
        fail_conn(c, "%s: key of %u bytes exceeds DDPC_STORE_MAX_KEY (%d)", op_name(op), len,
                  DDPC_STORE_MAX_KEY);
        r->bad = 2;
        return NULL;
    }
    const char *k = (const char *)take_bytes(r, DDPC_STORE_MAX_KEY, kn);
    if (!r->bad && *kn == 0) {
        fail_conn(c, "%s: empty key", op_name(op));
        r->bad = 2;
        return NULL;
    }
    return k;
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

/* Re-examines a parked GET or WAIT (its frame is still in c->in): replies
 * when its keys exist, or RS_TIMEOUT once its deadline has passed. */
static void check_waiter(struct ddpc_store_server *s, conn *c, double now) {
    cur r = {c->in + 5, c->in_have - 5, 0};
    int op = c->in[4];
    take_u32(&r); /* timeout, already in c->deadline */
    if (op == OP_GET) {
        uint32_t kn;
        const char *k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
        entry *e = tab_find(&s->tab, k, kn);
        if (e) reply(c, RS_OK, e->val, e->vlen);
        else if (now >= c->deadline)
            reply_msg(c, RS_TIMEOUT, "key '%.*s' was not set in time", (int)(kn > 200 ? 200 : kn), k);
        else return;
    } else {
        uint32_t n = take_u32(&r), missing = 0;
        char msg[800];
        size_t used = 0;
        int cut = 0;
        msg[0] = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t kn;
            const char *k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
            if (tab_find(&s->tab, k, kn)) continue;
            if (missing++ == 0 && now < c->deadline) return; /* not done, not expired */
            if (used + kn + 8 < sizeof msg)
                used += (size_t)snprintf(msg + used, sizeof msg - used, "%s'%.*s'", used ? ", " : "",
                                         (int)kn, k);
            else cut = 1;
        }
        if (missing == 0) reply(c, RS_OK, NULL, 0);
        else
            reply_msg(c, RS_TIMEOUT, "%u of %u keys were not set in time: %s%s", missing, n, msg,
                      cut ? ", ..." : "");
    }
    if (c->state == C_WAITING) c->state = C_READY;
    c->in_have = 0;
}

/* Handles one complete request frame in c->in (c->in_have bytes). */
static void handle_request(struct ddpc_store_server *s, conn *c) {
    int op = c->in[4];
    cur r = {c->in + 5, c->in_have - 5, 0};
    uint32_t kn = 0, n1 = 0, n2 = 0;
    const char *k = NULL;
    const unsigned char *v1, *v2;
    unsigned char num[24];

    if (op <= 0 || op >= OP_COUNT) {
        fail_conn(c, "unknown operation %d", op);
        return;
    }
    if (op == OP_GET || op == OP_WAIT) {
        uint32_t ms = take_u32(&r);
        double now = ddpc_now();
        c->deadline = now + ms / 1000.0;
        if (op == OP_GET) {
            k = take_key(c, &r, &kn, op);
        } else {
            uint32_t n = take_u32(&r);
            if (!r.bad && (n == 0 || n > STORE_MAX_WAIT_KEYS)) {
                fail_conn(c, "wait: %u keys is outside [1, %d]", n, STORE_MAX_WAIT_KEYS);
                return;
            }
            for (uint32_t i = 0; i < n && !r.bad; i++) take_key(c, &r, &kn, op);
        }
        if (r.bad == 2) return;
        if (r.bad || r.left) {
            fail_conn(c, "%s: malformed request of %zu bytes", op_name(op), c->in_have - 4);
            return;
        }
        c->state = C_WAITING;
        check_waiter(s, c, now);
        return;
    }

    switch (op) {
    case OP_SET:
        k = take_key(c, &r, &kn, op);
        if (r.bad == 2) return;
        if (!r.bad && r.left >= 4 && get_u32(r.p) > DDPC_STORE_MAX_VALUE) {
            fail_conn(c, "set: value of %u bytes exceeds DDPC_STORE_MAX_VALUE (%u)", get_u32(r.p),
                      DDPC_STORE_MAX_VALUE);
            return;
        }
        v1 = take_bytes(&r, DDPC_STORE_MAX_VALUE, &n1);
        break;
    case OP_ADD:
    case OP_CHECK:
    case OP_DELETE:
        k = take_key(c, &r, &kn, op);
        if (op == OP_ADD) take_i64(&r);
        break;
    case OP_CAS:
        k = take_key(c, &r, &kn, op);
        if (r.bad == 2) return;
        v1 = take_bytes(&r, DDPC_STORE_MAX_VALUE, &n1);
        v2 = take_bytes(&r, DDPC_STORE_MAX_VALUE, &n2);
        break;
    default:
        break;
    }
    if (r.bad == 2) return;
    if (r.bad || r.left) {
        fail_conn(c, "%s: malformed request of %zu bytes", op_name(op), c->in_have - 4);
        return;
    }

    /* the request is well formed: execute it */
    r = (cur){c->in + 5, c->in_have - 5, 0};
    switch (op) {
    case OP_SET:
        k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
        v1 = take_bytes(&r, DDPC_STORE_MAX_VALUE, &n1);
        if (tab_set(&s->tab, k, kn, v1, n1) != 0) {
            reply_msg(c, RS_ERROR, "set: server out of memory");
            break;
        }
        s->dirty = 1;
        reply(c, RS_OK, NULL, 0);
        break;
    case OP_ADD: {
        k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
        int64_t delta = take_i64(&r), cur_v = 0, res;
        entry *e = tab_find(&s->tab, k, kn);
        if (e && parse_int(e->val, e->vlen, &cur_v) != 0) {
            reply_msg(c, RS_ERROR, "add: the value of key '%.*s' is not an integer",
                      (int)(kn > 200 ? 200 : kn), k);
            break;
        }
        if (__builtin_add_overflow(cur_v, delta, &res)) {
            reply_msg(c, RS_ERROR, "add: %" PRId64 " + %" PRId64 " overflows int64 at key '%.*s'", cur_v,
                      delta, (int)(kn > 200 ? 200 : kn), k);
            break;
        }
        int len = snprintf((char *)num, sizeof num, "%" PRId64, res);
        if (tab_set(&s->tab, k, kn, num, (size_t)len) != 0) {
            reply_msg(c, RS_ERROR, "add: server out of memory");
            break;
        }
        s->dirty = 1;
        put_i64(num, res);
        reply(c, RS_OK, num, 8);
        break;
    }
    case OP_CAS: {
        k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
        v1 = take_bytes(&r, DDPC_STORE_MAX_VALUE, &n1);
        v2 = take_bytes(&r, DDPC_STORE_MAX_VALUE, &n2);
        entry *e = tab_find(&s->tab, k, kn);
        /* torch's TCPStore: absent and expected empty -> set; absent and
         * expected non-empty -> answer expected; present -> swap if equal. */
        if (!e) {
            if (n1 == 0) {
                if (tab_set(&s->tab, k, kn, v2, n2) != 0) {
                    reply_msg(c, RS_ERROR, "compare_set: server out of memory");
                    break;
                }
                s->dirty = 1;
                reply(c, RS_OK, v2, n2);
            } else {
                reply(c, RS_OK, v1, n1);
            }
        } else {
            if (e->vlen == n1 && memcmp(e->val, v1, n1) == 0) {
                if (tab_set(&s->tab, k, kn, v2, n2) != 0) {
                    reply_msg(c, RS_ERROR, "compare_set: server out of memory");
                    break;
                }
                s->dirty = 1;
                e = tab_find(&s->tab, k, kn);
            }
            reply(c, RS_OK, e->val, e->vlen);
        }
        break;
    }
    case OP_CHECK:
        k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
        num[0] = tab_find(&s->tab, k, kn) != NULL;
        reply(c, RS_OK, num, 1);
        break;
    case OP_DELETE:
        k = (const char *)take_bytes(&r, DDPC_STORE_MAX_KEY, &kn);
        num[0] = (unsigned char)tab_del(&s->tab, k, kn);
        reply(c, RS_OK, num, 1);
        break;
    case OP_NUM_KEYS:
        put_i64(num, (int64_t)s->tab.n);
        reply(c, RS_OK, num, 8);
        break;
    case OP_PING:
        reply(c, RS_OK, NULL, 0);
        break;
    }
    c->in_have = 0;
}

static void handle_handshake(conn *c) {
    uint32_t magic = get_u32(c->in), ver = get_u32(c->in + 4);
    c->in_have = 0;
    if (magic != STORE_MAGIC) {
        fail_conn(c, "bad handshake: magic 0x%08x is not ddpc's store protocol (0x%08x)", magic,
                  STORE_MAGIC);
        return;
    }
    if (ver != STORE_VERSION) {
        fail_conn(c, "bad handshake: store protocol version %u is not supported (server speaks %u)",
                  ver, STORE_VERSION);
        return;
    }
    unsigned char v[4];
    put_u32(v, STORE_VERSION);
    reply(c, RS_OK, v, 4);
    c->state = C_READY;
}

/* Bytes the frame being read needs in total, or 0 when its header says it
 * is too large or empty (the connection has then been failed). */
static size_t frame_need(conn *c) {
    if (c->state == C_HANDSHAKE) return 8;
    if (c->in_have < 4) return 4;
    uint32_t len = get_u32(c->in);
    if (len == 0) {
        fail_conn(c, "empty frame");
        return 0;
    }
    if (len > STORE_MAX_REQUEST) {
        fail_conn(c, "request of %u bytes exceeds the store's limit of %" PRIu64 " bytes", len,
                  (uint64_t)STORE_MAX_REQUEST);
        return 0;
    }
    return 4 + (size_t)len;
}

/* Reads what is available of the current frame; handles it when complete.
 * Returns -1 when the connection is to be dropped at once. */
static int conn_read(struct ddpc_store_server *s, conn *c) {
    for (int rounds = 0; rounds < 16 && !c->out_len &&
                         (c->state == C_HANDSHAKE || c->state == C_READY); rounds++) {
        size_t need = frame_need(c);
        if (!need) return 0;
        /* grow with what arrives, not with what the header announces */
        size_t want = c->in_have + READ_CHUNK < need ? c->in_have + READ_CHUNK : need;
        if (want < 64) want = 64;
        if (want > c->in_cap) {
            size_t dbl = c->in_cap * 2 < need ? c->in_cap * 2 : need;
            if (dbl > want) want = dbl;
            {
                unsigned char *p = realloc(c->in, want);
                if (!p) {
                    DDPC_WARN(STORE, "store: out of memory reading from %s; dropping it", c->peer);
                    return -1;
                }
                c->in = p;
                c->in_cap = want;
            }
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
            if (c->in_have == 0) return -1; /* clean close between frames */
            fail_conn(c, "truncated frame: the connection closed after %zu of %zu bytes", c->in_have,
                      need);
            return 0;
        }
        c->in_have += (size_t)n;
        if (c->in_have < need || need == 4) continue;
        if (c->state == C_HANDSHAKE) handle_handshake(c);
        else handle_request(s, c);
    }
    return 0;
}

/* Writes what it can of the pending reply. -1: drop the connection. */
static int conn_write(conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
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
                s->accept_pause = ddpc_now() + 0.1;
            }
            return;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c || (s->nconns == s->cap && s->cap >= MAX_CONNS)) {
            DDPC_WARN(STORE, "store: refusing a connection (%s)", c ? "too many connections" : "out of memory");
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
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int port = 0;
        char host[64];
        ddpc_sock_addr_str((struct sockaddr *)&ss, host, sizeof host, &port);
        snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
        c->fd = fd;
        c->state = C_HANDSHAKE;
        s->conns[s->nconns++] = c;
        DDPC_TRACE(STORE, "store: connection from %s (%d open)", c->peer, s->nconns);
    }
}

/* The server thread: poll, accept, read, answer, time out waiters. */
static void *server_main(void *arg) {
    struct ddpc_store_server *s = arg;
    struct pollfd *pf = NULL;
    int pf_cap = 0;
    for (;;) {
        double now = ddpc_now(), next = 1e300;
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
        pf[0] = (struct pollfd){s->wake_fd, POLLIN, 0};
        pf[1] = (struct pollfd){s->lfd, (short)(now >= s->accept_pause ? POLLIN : 0), 0};
        if (now < s->accept_pause && s->accept_pause < next) next = s->accept_pause;
        for (int i = 0; i < s->nconns; i++) {
            conn *c = s->conns[i];
            short ev = 0;
            if (c->out_len) ev |= POLLOUT;
            else if (c->state != C_WAITING) ev |= POLLIN;
            else ev |= POLLRDHUP; /* a waiting client that goes away */
            if ((c->state == C_WAITING || c->state == C_CLOSING) && c->deadline < next)
                next = c->deadline;
            pf[i + 2] = (struct pollfd){c->fd, ev, 0};
        }
        int ms = next >= 1e299 ? -1 : ddpc_deadline_ms(next, 1000);
        int n = poll(pf, (nfds_t)s->nconns + 2, ms);
        if (n < 0 && errno != EINTR) {
            DDPC_WARN(STORE, "store: poll: %s; stopping the server", strerror(errno));
            break;
        }
        if (n > 0 && (pf[0].revents & POLLIN)) break;
        now = ddpc_now();
        int nc = s->nconns;
        for (int i = 0; i < nc; i++) {
            conn *c = s->conns[i];
            short re = n > 0 ? pf[i + 2].revents : 0;
            int drop = 0;
            if (re & POLLNVAL) drop = 1;
            if (!drop && c->state == C_WAITING && (re & (POLLRDHUP | POLLHUP | POLLERR))) {
                DDPC_TRACE(STORE, "store: %s left while waiting", c->peer);
                drop = 1;
            }
            if (!drop && c->out_len && (re & (POLLOUT | POLLHUP | POLLERR))) drop = conn_write(c) < 0;
            if (!drop && !c->out_len && (re & (POLLIN | POLLHUP | POLLERR)) &&
                (c->state == C_HANDSHAKE || c->state == C_READY))
                drop = conn_read(s, c) < 0;
            if (!drop && c->state == C_WAITING && now >= c->deadline) check_waiter(s, c, now);
            if (!drop && c->out_len && c->out_off == 0) drop = conn_write(c) < 0; /* answer at once */
            if (!drop && c->state == C_CLOSING) drop = conn_close_step(c, now) < 0;
            if (drop) {
                conn_free(c);
                s->conns[i] = NULL;
            }
        }
        if (s->dirty) { /* keys were set: wake the waiters they satisfy */
            s->dirty = 0;
            for (int i = 0; i < nc; i++) {
                conn *c = s->conns[i];
                if (!c || c->state != C_WAITING) continue;
                check_waiter(s, c, now);
                if (c->out_len && conn_write(c) < 0) {
                    conn_free(c);
                    s->conns[i] = NULL;
                }
            }
        }
        int j = 0;
        for (int i = 0; i < nc; i++)
            if (s->conns[i]) s->conns[j++] = s->conns[i];
        s->nconns = j;
        if (n > 0 && (pf[1].revents & POLLIN)) accept_all(s);
    }
    free(pf);
    return NULL;
}

ddpc_status ddpc_store_server_start(const char *host, int port, ddpc_store_server **out) {
    if (!out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_store_server_start: out is NULL");
    *out = NULL;
    struct ddpc_store_server *s = calloc(1, sizeof *s);
    if (!s) return ddpc_err(DDPC_ERR_NOMEM, "store server: out of memory");
    s->lfd = s->wake_fd = -1;
    ddpc_status st = ddpc_sock_listen(host, port, 1024, &s->lfd, &s->port);
    if (st != DDPC_OK) {
        free(s);
        return ddpc_err_wrap(st, "store server");
    }
    ddpc_sock_set_nonblock(s->lfd, 1);
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_fd < 0) {
        st = ddpc_err_errno(DDPC_ERR_SYSTEM, errno, "store server: eventfd");
        goto fail;
    }
    /* the thread takes no signals: a launcher reads them with signalfd */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        st = ddpc_err_errno(DDPC_ERR_SYSTEM, rc, "store server: pthread_create");
        goto fail;
    }
    DDPC_INFO(STORE, "store server listening on %s:%d", host && *host ? host : "*", s->port);
    *out = s;
    return DDPC_OK;
fail:
    if (s->wake_fd >= 0) close(s->wake_fd);
    close(s->lfd);
    free(s);
    return st;
}

int ddpc_store_server_port(const ddpc_store_server *s) { return s ? s->port : -1; }

void ddpc_store_server_stop(ddpc_store_server *s) {
    if (!s) return;
    uint64_t one = 1;
    while (write(s->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {}
    pthread_join(s->thread, NULL);
    for (int i = 0; i < s->nconns; i++) conn_free(s->conns[i]);
    free(s->conns);
    tab_free(&s->tab);
    close(s->wake_fd);
    close(s->lfd);
    DDPC_TRACE(STORE, "store server on port %d stopped", s->port);
    free(s);
}
