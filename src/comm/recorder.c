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
 * Cost when nothing goes wrong: one uncontended mutex and a few stores per
 * operation. The SIGUSR1 handler only writes a byte to a pipe (write() is
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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "comm/comm.h"

typedef struct rec_entry {
    uint64_t id; /* 1 + the operation's index in this record; 0 = empty */
    uint64_t seq;
    uint64_t count;
    int32_t root; /* root, or the peer of a send/receive; -1 */
    uint8_t kind, dtype, op, state;
    int32_t status;
    const char *algo;                /* static text or NULL */
    double t_queued, t_start, t_end; /* ddpc__now(); 0 = not yet */
} rec_entry;

struct ddpc_rec {
    pthread_mutex_t mu;
    ddpc_comm *c; /* borrowed: registered while it lives */
    rec_entry *ring;
    size_t cap;
    uint64_t next_id;
    struct ddpc_rec *next; /* the registry's list */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ddpc_rec *reg_head;
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
    struct ddpc_rec *r = calloc(1, sizeof *r);
    rec_entry *ring = calloc((size_t)cap, sizeof *ring);
    if (!r || !ring) {
        free(r);
        free(ring);
        return ddpc__err(DDPC_ERR_NOMEM,
                         "out of memory for a flight recorder of %ld entries "
                         "(DDPC_TRACE_BUFFER)",
                         cap);
    }
    pthread_mutex_init(&r->mu, NULL);
    r->c = c;
    r->ring = ring;
    r->cap = (size_t)cap;
    c->rec = r;
    return DDPC_OK;
}

void ddpc__rec_register(ddpc_comm *c) {
    struct ddpc_rec *r = c->rec;
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
    struct ddpc_rec *r = c->rec;
    if (!r) return;
    pthread_mutex_lock(&reg_mu);
    for (struct ddpc_rec **pp = &reg_head; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&reg_mu);
    pthread_mutex_destroy(&r->mu);
    free(r->ring);
    free(r);
    c->rec = NULL;
}

/* A new entry for a (r->mu held). */
static rec_entry *entry_new(struct ddpc_rec *r, const ddpc_args *a) {
    uint64_t id = ++r->next_id;
    rec_entry *x = &r->ring[(id - 1) % r->cap];
    memset(x, 0, sizeof *x);
    x->id = id;
    x->kind = (uint8_t)a->kind;
    x->dtype = (uint8_t)a->dtype;
    x->op = (uint8_t)a->op;
    x->count = a->count;
    x->root = a->root;
    return x;
}

/* Entry id, or NULL when it has been overwritten (r->mu held). */
static rec_entry *entry_get(struct ddpc_rec *r, uint64_t id) {
    rec_entry *x = &r->ring[(id - 1) % r->cap];
    return id && x->id == id ? x : NULL;
}

uint64_t ddpc__rec_queued(ddpc_comm *c, const ddpc_args *a) {
    struct ddpc_rec *r = c->rec;
    if (!r) return 0;
    pthread_mutex_lock(&r->mu);
    rec_entry *x = entry_new(r, a);
    x->state = DDPC_REC_QUEUED;
    x->t_queued = ddpc__now();
    uint64_t id = x->id;
    pthread_mutex_unlock(&r->mu);
    return id;
}

void ddpc__rec_start(ddpc_exec *e) {
    struct ddpc_rec *r = e->c->rec;
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    rec_entry *x = entry_get(r, e->a.rec);
    if (!x) x = entry_new(r, &e->a);
    x->seq = e->fp.seq;
    x->state = DDPC_REC_RUNNING;
    x->t_start = ddpc__now();
    e->rec = x->id;
    pthread_mutex_unlock(&r->mu);
}

void ddpc__rec_end(ddpc_exec *e, ddpc_status s) {
    if (!e->c || !e->c->rec || !e->rec) return;
    struct ddpc_rec *r = e->c->rec;
    pthread_mutex_lock(&r->mu);
    rec_entry *x = entry_get(r, e->rec);
    if (x && x->state == DDPC_REC_RUNNING) {
        x->seq = e->fp.seq; /* a send/receive gets its number once posted */
        x->root = e->a.root;
        x->algo = e->algo;
        x->state = s == DDPC_OK ? DDPC_REC_DONE : DDPC_REC_FAILED;
        x->status = (int32_t)s;
        x->t_end = ddpc__now();
    }
    pthread_mutex_unlock(&r->mu);
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
static void dump_one(FILE *f, struct ddpc_rec *r, double off) {
    ddpc_comm *c = r->c;
    char err[1024];
    pthread_mutex_lock(&c->err_mu);
    snprintf(err, sizeof err, "%s", c->last_err);
    pthread_mutex_unlock(&c->err_mu);
    pthread_mutex_lock(&r->mu);
    const char *ip = c->ip[0] ? c->ip : "?";
    fprintf(f, "comm id=%s rank=%d size=%d addr=%s:%d recorded=%" PRIu64 "\n",
            c->prefix[0] ? c->prefix : "-", c->rank, c->size, ip, c->peers[c->rank].port,
            r->next_id);
    if (err[0]) {
        fputs("error ", f);
        one_line(f, err);
    }
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        ddpc_peer *pe = &c->peers[p];
        double rx;
        __atomic_load(&pe->last_rx, &rx, __ATOMIC_RELAXED);
        fprintf(f, "peer rank=%d addr=%s:%d last_rx=%.6f\n", p, pe->ip[0] ? pe->ip : "?", pe->port,
                rx > 0 ? rx + off : 0.0);
    }
    uint64_t first = r->next_id > r->cap ? r->next_id - r->cap + 1 : 1;
    for (uint64_t id = first; id <= r->next_id; id++) {
        rec_entry *x = entry_get(r, id);
        if (!x) continue;
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
    pthread_mutex_unlock(&r->mu);
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
        for (struct ddpc_rec *r = reg_head; r; r = r->next) rank = r->c->rank;
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
    for (struct ddpc_rec *r = reg_head; r; r = r->next) dump_one(f, r, off);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        DDPC_WARN(COLL, "flight recorder: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    } else {
        DDPC_INFO(COLL, "flight recorder: wrote %s (%s)", path, why ? why : "-");
    }
    pthread_mutex_unlock(&reg_mu);
}
