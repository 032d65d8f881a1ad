/*
 * recorder.c — the flight recorder: each communicator keeps its last
 * DDPC_TRACE_BUFFER operations in a ring (sequence number, op, dtype,
 * count, root or peer, algorithm, when it was queued, started and ended,
 * and its state), and the process writes every communicator's ring to
 * DDPC_TRACE_DIR/flight-<rank>.txt when something goes wrong (a timeout, a
 * lost peer, an abort: ddpc__fail and ddpc_comm_abort call ddpc__rec_dump)
 * and on SIGUSR1. `ddpc-trace DIR` reads all ranks' files and says where
 * each rank stopped (tools/ddpc-trace.c).
 *
 * Cost when nothing goes wrong: a few stores per operation, no lock: the
 * thread that writes an entry owns it through the entry's version (odd
 * while written, a seqlock), and a dump copies each entry between two
 * reads of its version, retrying a few times and skipping an entry being
 * rewritten. A writer that finds its entry taken (the ring wrapped onto an
 * operation still running) leaves it: that entry is already the newer
 * operation's. No clock read of its own but on failure: the start time is
 * the one the operation's deadline was taken from, and a successful
 * operation ends at its last clock read (its start, or its last wait:
 * ddpc__exec's now), a failed one when it failed. The SIGUSR1 handler only writes a byte to a pipe (write() is
 * async-signal-safe); a thread of the recorder reads it and writes the
 * files. The handler is installed only where a trace directory is set and
 * nobody else handles SIGUSR1.
 *
 * File format (text, one record a line, fields as key=value):
 *   ddpc-flight 1
 *   process rank=R pid=P host=H time=WALL reason=TEXT...
 *   comm id=PREFIX rank=r size=n addr=IP:PORT recorded=N
 *   error TEXT...                                  (the last error, if any)
 *   peer rank=p addr=IP:PORT last_rx=WALL         (0: never heard from)
 *   op id=I seq=S kind=K dtype=T count=C op=O root=R algo=A state=X
 *      status=ST queued=WALL start=WALL end=WALL       (one line; 0: not yet)
 *   end
 * Times are wall-clock seconds (so that files from several hosts compare).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "comm/comm.h"

/* Every field is written and read with relaxed atomics, between the
 * version's acquire and release (see the file's opening comment). */
typedef struct rec_entry {
    uint32_t ver; /* even: stable; odd: being written */
    uint64_t id;  /* 1 + the operation's index in this record; 0 = empty */
    uint64_t seq;
    uint64_t count;
    int32_t root; /* root, or the peer of a send/receive; -1 */
    uint8_t kind, dtype, op, state;
    int32_t status;
    const char *algo;                /* static text or NULL */
    double t_queued, t_start, t_end; /* ddpc__now(); 0 = not yet */
} rec_entry;

struct ddpc__rec {
    ddpc_comm *c; /* borrowed: registered while it lives */
    rec_entry *ring;
    size_t cap;
    uint64_t next_id;       /* atomic: the last id handed out */
    struct ddpc__rec *next; /* the registry's list */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ddpc__rec *reg_head;
static char trace_dir[1024];
static int trace_dir_read;
static int sig_pipe[2] = { -1, -1 };

/* ------------------------------------------------------------ SIGUSR1 */

static void on_sigusr1(int sig) {
    (void)sig;
    int saved = errno;
    char b = 1;
    if (write(sig_pipe[1], &b, 1) < 0) { /* full: a dump is pending anyway */
    }
    errno = saved;
}

static void *dump_thread(void *arg) {
    (void)arg;
    for (;;) {
        char b[16];
        ssize_t n = read(sig_pipe[0], b, sizeof b);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return NULL;
        ddpc__rec_dump("SIGUSR1");
    }
}

/* Installs the SIGUSR1 handler and its thread once, where SIGUSR1 is not
 * handled already (reg_mu held). */
static void install_signal(void) {
    static int done;
    if (done) return;
    done = 1;
    struct sigaction old;
    if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL) {
        DDPC_INFO(COLL, "flight recorder: SIGUSR1 is handled by the program; no dump on SIGUSR1");
        return;
    }
    if (pipe2(sig_pipe, O_CLOEXEC) != 0) return;
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    /* the thread must not take signals meant for the program's threads */
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    int rc = pthread_create(&th, &at, dump_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigusr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

/* ------------------------------------------------------------ recording */

ddpc_status ddpc__rec_init(ddpc_comm *c) {
    long cap;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_TRACE_BUFFER, &cap));
    double settle = -1;
    if (ddpc__env_isset(DDPC_ENV_STALL_SETTLE))
        DDPC_CHECK(ddpc__env_double(DDPC_ENV_STALL_SETTLE, &settle));
    if (settle < 0) { /* a tenth of the timeout, 0.2 to 2 s */
        settle = c->exec_timeout / 10;
        settle = settle < 0.2 ? 0.2 : settle > 2 ? 2 : settle;
    }
    c->settle_s = settle;
    if (cap == 0) return DDPC_OK;
    struct ddpc__rec *r = calloc(1, sizeof *r);
    rec_entry *ring = calloc((size_t)cap, sizeof *ring);
    if (!r || !ring) {
        free(r);
        free(ring);
        return ddpc__err(DDPC_ERR_NOMEM,
                         "out of memory for a flight recorder of %ld entries "
                         "(DDPC_TRACE_BUFFER)",
                         cap);
    }
    r->c = c;
    r->ring = ring;
    r->cap = (size_t)cap;
    c->rec = r;
    return DDPC_OK;
}

void ddpc__rec_register(ddpc_comm *c) {
    struct ddpc__rec *r = c->rec;
    if (!r) return;
    pthread_mutex_lock(&reg_mu);
    if (!trace_dir_read) {
        trace_dir_read = 1;
        const char *d = ddpc__env(DDPC_ENV_TRACE_DIR, NULL);
        snprintf(trace_dir, sizeof trace_dir, "%s", d ? d : "");
    }
    r->next = reg_head;
    reg_head = r;
    if (trace_dir[0]) install_signal();
    pthread_mutex_unlock(&reg_mu);
}

void ddpc__rec_fini(ddpc_comm *c) {
    struct ddpc__rec *r = c->rec;
    if (!r) return;
    pthread_mutex_lock(&reg_mu);
    for (struct ddpc__rec **pp = &reg_head; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
    free(r->ring);
    free(r);
    c->rec = NULL;
}

#define SET(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define GET(field)    __atomic_load_n(&(field), __ATOMIC_RELAXED)
static void set_time(double *field, double v) { __atomic_store(field, &v, __ATOMIC_RELAXED); }

/* Takes entry x for writing: 1 when taken (its version odd), 0 when another
 * thread writes it now (the ring wrapped onto it: leave it). */
static int entry_take(rec_entry *x) {
    uint32_t v = __atomic_load_n(&x->ver, __ATOMIC_RELAXED);
    if (v & 1) return 0;
    if (!__atomic_compare_exchange_n(&x->ver, &v, v + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 0;
    __atomic_thread_fence(__ATOMIC_RELEASE); /* the odd version before the fields (seqlock) */
    return 1;
}
static void entry_give(rec_entry *x) { __atomic_add_fetch(&x->ver, 1, __ATOMIC_RELEASE); }

/* A new entry for a, taken (entry_take); NULL when its slot is being
 * written by another thread. *id gets its id either way. */
static rec_entry *entry_new(struct ddpc__rec *r, const ddpc__args *a, uint64_t *id) {
    *id = __atomic_add_fetch(&r->next_id, 1, __ATOMIC_RELAXED);
    rec_entry *x = &r->ring[(*id - 1) % r->cap];
    if (!entry_take(x)) return NULL;
    SET(x->id, *id);
    SET(x->seq, 0);
    SET(x->count, (uint64_t)a->count);
    SET(x->root, a->root);
    SET(x->kind, (uint8_t)a->kind);
    SET(x->dtype, (uint8_t)a->dtype);
    SET(x->op, (uint8_t)a->op);
    SET(x->state, 0);
    SET(x->status, 0);
    SET(x->algo, (const char *)NULL);
    set_time(&x->t_queued, 0);
    set_time(&x->t_start, 0);
    set_time(&x->t_end, 0);
    return x;
}

/* Entry id, taken; NULL when it has been overwritten or is being written. */
static rec_entry *entry_get(struct ddpc__rec *r, uint64_t id) {
    if (!id) return NULL;
    rec_entry *x = &r->ring[(id - 1) % r->cap];
    if (GET(x->id) != id || !entry_take(x)) return NULL;
    if (GET(x->id) == id) return x;
    entry_give(x);
    return NULL;
}

uint64_t ddpc__rec_queued(ddpc_comm *c, const ddpc__args *a) {
    struct ddpc__rec *r = c->rec;
    if (!r) return 0;
    uint64_t id;
    rec_entry *x = entry_new(r, a, &id);
    if (!x) return 0;
    SET(x->state, (uint8_t)DDPC_REC_QUEUED);
    set_time(&x->t_queued, ddpc__now());
    entry_give(x);
    return id;
}

void ddpc__rec_start(ddpc__exec *e, double now) {
    struct ddpc__rec *r = e->c->rec;
    if (!r) return;
    uint64_t id = e->a.rec;
    rec_entry *x = entry_get(r, id);
    if (!x) x = entry_new(r, &e->a, &id);
    e->rec = x ? id : 0;
    if (!x) return;
    SET(x->seq, e->fp.seq);
    SET(x->state, (uint8_t)DDPC_REC_RUNNING);
    set_time(&x->t_start, now);
    entry_give(x);
}

void ddpc__rec_end(ddpc__exec *e, ddpc_status s) {
    if (!e->c || !e->c->rec || !e->rec) return;
    rec_entry *x = entry_get(e->c->rec, e->rec);
    if (!x) return;
    if (GET(x->state) == DDPC_REC_RUNNING) {
        SET(x->seq, e->fp.seq); /* a send/receive gets its number once posted */
        SET(x->root, e->a.root);
        SET(x->algo, e->algo);
        SET(x->state, (uint8_t)(s == DDPC_OK ? DDPC_REC_DONE : DDPC_REC_FAILED));
        SET(x->status, (int32_t)s);
        /* a failure's own clock read (ddpc-trace orders the ranks' first
         * failures by it); a success ends at its last one (e->now) */
        set_time(&x->t_end, s == DDPC_OK ? e->now : ddpc__now());
    }
    entry_give(x);
}

/* Copies entry id into *out as it stood between two reads of its version
 * (a few tries); 0 when it is not id's any more or kept changing. */
static int entry_copy(struct ddpc__rec *r, uint64_t id, rec_entry *out) {
    rec_entry *x = &r->ring[(id - 1) % r->cap];
    for (int tries = 0; tries < 64; tries++) {
        uint32_t v = __atomic_load_n(&x->ver, __ATOMIC_ACQUIRE);
        if (v & 1) {
            sched_yield(); /* a writer holds it for a few stores */
            continue;
        }
        out->id = GET(x->id);
        out->seq = GET(x->seq);
        out->count = GET(x->count);
        out->root = GET(x->root);
        out->kind = GET(x->kind);
        out->dtype = GET(x->dtype);
        out->op = GET(x->op);
        out->state = GET(x->state);
        out->status = GET(x->status);
        out->algo = GET(x->algo);
        __atomic_load(&x->t_queued, &out->t_queued, __ATOMIC_RELAXED);
        __atomic_load(&x->t_start, &out->t_start, __ATOMIC_RELAXED);
        __atomic_load(&x->t_end, &out->t_end, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&x->ver, __ATOMIC_RELAXED) == v) return out->id == id;
    }
    return 0;
}

/* ------------------------------------------------------------ dumping */

static const char *state_name(int st) {
    switch (st) {
    case DDPC_REC_QUEUED: return "queued";
    case DDPC_REC_RUNNING: return "running";
    case DDPC_REC_DONE: return "done";
    case DDPC_REC_FAILED: return "failed";
    default: return "?";
    }
}

/* A status as one token: "timed_out_waiting_for_peers". */
static void status_token(ddpc_status s, char *buf, size_t len) {
    snprintf(buf, len, "%s", s == DDPC_OK ? "ok" : ddpc_status_str(s));
    for (char *p = buf; *p; p++)
        if (*p == ' ' || *p == '=') *p = '_';
}

/* Text on one line: newlines become spaces. */
static void one_line(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    fputc('\n', f);
}

/* Writes r's communicator and ring to f; off turns ddpc__now() into wall time. */
static void dump_one(FILE *f, struct ddpc__rec *r, double off) {
    ddpc_comm *c = r->c;
    char err[1024];
    pthread_mutex_lock(&c->err_mu);
    snprintf(err, sizeof err, "%s", c->last_err);
    pthread_mutex_unlock(&c->err_mu);
    uint64_t last = __atomic_load_n(&r->next_id, __ATOMIC_RELAXED);
    const char *ip = c->ip[0] ? c->ip : "?";
    fprintf(f, "comm id=%s rank=%d size=%d addr=%s:%d recorded=%" PRIu64 "\n",
            c->prefix[0] ? c->prefix : "-", c->rank, c->size, ip, c->peers[c->rank].ep.port, last);
    if (err[0]) {
        fputs("error ", f);
        one_line(f, err);
    }
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        ddpc__peer *pe = &c->peers[p];
        double rx;
        __atomic_load(&pe->last_rx, &rx, __ATOMIC_RELAXED);
        fprintf(f, "peer rank=%d addr=%s:%d last_rx=%.6f\n", p, pe->ep.ip[0] ? pe->ep.ip : "?",
                pe->ep.port, rx > 0 ? rx + off : 0.0);
    }
    uint64_t first = last > r->cap ? last - r->cap + 1 : 1;
    for (uint64_t id = first; id <= last; id++) {
        rec_entry copy, *x = &copy;
        if (!entry_copy(r, id, x)) continue;
        char st[64];
        status_token(x->state == DDPC_REC_FAILED ? x->status : DDPC_OK, st, sizeof st);
        fprintf(f,
                "op id=%" PRIu64 " seq=%" PRIu64 " kind=%s dtype=%s count=%" PRIu64
                " op=%s root=%d algo=%s state=%s status=%s queued=%.6f start=%.6f end=%.6f\n",
                x->id, x->seq, ddpc__kind_name(x->kind), ddpc_dtype_name((ddpc_dtype)x->dtype),
                x->count, ddpc_op_name((ddpc_op)x->op), (int)x->root, x->algo ? x->algo : "-",
                state_name(x->state), st, x->t_queued > 0 ? x->t_queued + off : 0.0,
                x->t_start > 0 ? x->t_start + off : 0.0, x->t_end > 0 ? x->t_end + off : 0.0);
    }
    fputs("end\n", f);
}

void ddpc__rec_dump(const char *why) {
    pthread_mutex_lock(&reg_mu);
    if (!trace_dir[0] || !reg_head) {
        pthread_mutex_unlock(&reg_mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wall = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9, off = wall - ddpc__now();
    long rank = -1;
    if (ddpc__env_isset(DDPC_ENV_RANK) && ddpc__env_long(DDPC_ENV_RANK, &rank) != DDPC_OK)
        rank = -1;
    if (rank < 0) /* the first communicator made: the one the others were split from */
        for (struct ddpc__rec *r = reg_head; r; r = r->next) rank = r->c->rank;
    char path[1200], tmp[1300], host[256] = "?";
    if (mkdir(trace_dir, 0755) != 0 && errno != EEXIST)
        DDPC_WARN(COLL, "flight recorder: cannot create DDPC_TRACE_DIR=%s: %s", trace_dir,
                  strerror(errno));
    snprintf(path, sizeof path, "%s/flight-%ld.txt", trace_dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    gethostname(host, sizeof host - 1);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        DDPC_WARN(COLL, "flight recorder: cannot write %s: %s", tmp, strerror(errno));
        pthread_mutex_unlock(&reg_mu);
        return;
    }
    fprintf(f, "ddpc-flight 1\nprocess rank=%ld pid=%d host=%s time=%.6f reason=", rank,
            (int)getpid(), host, wall);
    one_line(f, why ? why : "-");
    for (struct ddpc__rec *r = reg_head; r; r = r->next) dump_one(f, r, off);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        DDPC_WARN(COLL, "flight recorder: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    } else {
        DDPC_INFO(COLL, "flight recorder: wrote %s (%s)", path, why ? why : "-");
    }
    pthread_mutex_unlock(&reg_mu);
}
