/*
 * ddpc-run — the launcher: torchrun's job, in C, for ddpc programs and for
 * any program that reads torchrun's environment (PyTorch DDP scripts too).
 *
 *   ddpc-run [options] PROGRAM [ARGS...]
 *
 * On each node one ddpc-run starts --nproc-per-node workers. The launcher
 * of node 0 hosts the job's store at MASTER_ADDR:MASTER_PORT, as torchrun's
 * agent does; the launchers of all nodes join through it, start their
 * workers together, watch them, and stop or restart them together. Workers
 * are told TORCHELASTIC_USE_AGENT_STORE=True and meet in the same store: a
 * ddpc program with ddpc's protocol, a PyTorch program with c10d TCPStore's
 * (the server speaks both), each under its own keys.
 *
 * One thread runs everything (the store server has its own): an event loop
 * over a signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP) and the workers' output
 * pipes, so start-up and shutdown never wait on a sleep. Workers run in their
 * own process groups with PR_SET_PDEATHSIG as a backstop; the launcher is a
 * child subreaper, so nothing a worker leaves behind outlives the job.
 *
 * Store keys (all under "run/<run-id>/"):
 *   config            "nnodes=N nproc=P max_restarts=K" (a second job differing is refused)
 *   node/<r>          "host pid" of the launcher that claimed node rank r
 *   hb/<r>            heartbeat counter, bumped every monitor interval
 *   gen<g>/start/<r>  node r is ready to start generation g (a barrier)
 *   gen<g>/ndone      nodes whose workers all exited 0
 *   gen<g>/outcome    "ok", "fail\n<summary>" (restartable) or "abort\n<summary>"
 *   exit/<r>          node r has finished (node 0 keeps the store up until all have)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "base/sock.h"
#include "ddpc/store.h"

extern char **environ;

#define MAX_NPROC 1024
#define LINE_CAP 65536      /* a longer line without '\n' is broken here */
#define TAIL_LINES 10       /* stderr lines kept per worker for the failure summary */
#define TAIL_LINE_CAP 400
#define EXIT_USAGE 2

/* ------------------------------------------------------------ options */

typedef struct opts {
    int nproc;              /* workers on this node */
    int nnodes;
    int node_rank;
    char master_addr[256];
    int master_port;
    int rdzv_port;          /* --rdzv-endpoint's port: wins over --master-port, as in torchrun */
    int standalone;
    int max_restarts;
    double monitor_interval;  /* seconds between heartbeats / remote checks */
    double join_timeout;      /* seconds for all nodes to join (DDPC_CONNECT_TIMEOUT) */
    double hb_timeout;        /* seconds without a heartbeat before a node is lost */
    double grace;             /* seconds between SIGTERM and SIGKILL */
    char log_dir[PATH_MAX];
    int redirects[MAX_NPROC]; /* per local rank: bit 1 stdout, bit 2 stderr */
    int tee[MAX_NPROC];
    int log_any;              /* log_dir given */
    char run_id[129];
    int no_python, module;
    char **argv;              /* PROGRAM ARGS..., NULL-terminated (borrowed from main) */
} opts;

static void usage(FILE *f) {
    fprintf(f,
"usage: ddpc-run [options] PROGRAM [ARGS...]\n"
"\n"
"Starts --nproc-per-node copies of PROGRAM on this node with torchrun's\n"
"environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
"ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), hosts\n"
"the job's store at MASTER_ADDR:MASTER_PORT on node 0 (the workers use it as\n"
"torchrun's agent store: TORCHELASTIC_USE_AGENT_STORE=True), prefixes their output\n"
"lines with \"[rank]: \", and stops every worker on every node when one fails.\n"
"Every option is also accepted with underscores (--nproc_per_node) and as\n"
"\"--opt value\" as well as \"--opt=value\".\n"
"\n"
"  --nproc-per-node=N     workers on this node (or auto/cpu: one per core; default 1)\n"
"  --nnodes=N             nodes in the job (N or N:N; default 1)\n"
"  --node-rank=R          this node's rank, 0..nnodes-1 (default 0); node R's\n"
"                         workers are ranks R*N .. R*N+N-1\n"
"  --master-addr=HOST     host of node 0 (default 127.0.0.1)\n"
"  --master-port=PORT     port of the job's store on node 0 (default 29500)\n"
"  --standalone           one node on free ports (ignores --master-*)\n"
"  --max-restarts=K       restart all workers on all nodes up to K times (default 0)\n"
"  --monitor-interval=S   seconds between heartbeats and checks of other nodes\n"
"                         (default 1)\n"
"  --heartbeat-timeout=S  a node silent this long is lost (default 10; also\n"
"                         DDPC_HEARTBEAT_TIMEOUT)\n"
"  --join-timeout=S       seconds for all nodes to join (default DDPC_CONNECT_TIMEOUT)\n"
"  --grace=S              seconds between SIGTERM and SIGKILL when stopping\n"
"                         workers (default 5; also DDPC_KILL_GRACE)\n"
"  --run-id=ID            job id shared by all nodes (default \"none\")\n"
"  --rdzv-id=ID           same as --run-id\n"
"  --rdzv-endpoint=H[:P]  node 0's host and the store's port (as\n"
"                         --master-addr=H --master-port=P)\n"
"  --rdzv-backend=B       c10d or static: accepted for torchrun's command lines\n"
"  --start-method=M       spawn, fork or forkserver: accepted, workers are always exec'd\n"
"  --log-dir=DIR          write DIR/<run-id>/attempt_<restart>/<rank>/{stdout,stderr}.log\n"
"                         (with neither --redirects nor --tee: both streams, teed)\n"
"  -r, --redirects=SPEC   streams to the log files only: 0 none, 1 stdout,\n"
"                         2 stderr, 3 both, or per local rank \"0:3,1:2\"\n"
"  -t, --tee=SPEC         streams to the log files and the console (same SPEC)\n"
"  --no-python            run PROGRAM as it is even when it ends in .py\n"
"  -m, --module           PROGRAM is a Python module: run \"python3 -u -m PROGRAM\"\n"
"  --env                  print the environment variables ddpc reads (Markdown)\n"
"  -h, --help             this text\n"
"\n"
"A PROGRAM ending in .py runs as \"$DDPC_PYTHON -u PROGRAM\" (DDPC_PYTHON default\n"
"python3). OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are set to 1 when unset\n"
"and more than one worker runs per node. Signals SIGINT, SIGTERM and SIGHUP\n"
"are forwarded to every worker. Exit status: 0 when every worker on every\n"
"node exited 0; the first failed worker's exit code (128+N for signal N);\n"
"128+N when ddpc-run itself got signal N; 1 for a job that could not start;\n"
"2 for bad usage.\n");
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ddpc-run: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see ddpc-run --help)\n");
    va_end(ap);
    exit(EXIT_USAGE);
}

static long parse_int_opt(const char *name, const char *v, long lo, long hi) {
    long x;
    if (ddpc_parse_long(name, v, lo, hi, &x) != DDPC_OK) die_usage("--%s: %s", name, ddpc_last_error());
    return x;
}

static double parse_real_opt(const char *name, const char *v, double lo, double hi) {
    double x;
    if (ddpc_parse_double(name, v, lo, hi, &x) != DDPC_OK) die_usage("--%s: %s", name, ddpc_last_error());
    return x;
}

/* "3" for every local rank, or "0:1,1:2" per local rank. */
static void parse_std_spec(const char *name, const char *v, int *out) {
    if (strchr(v, ':') == NULL) {
        int c = (int)parse_int_opt(name, v, 0, 3);
        for (int i = 0; i < MAX_NPROC; i++) out[i] = c;
        return;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) die_usage("--%s=%s: '%s' is not LOCAL_RANK:CODE", name, v, tok);
        *colon = 0;
        int lr = (int)parse_int_opt(name, tok, 0, MAX_NPROC - 1);
        out[lr] = (int)parse_int_opt(name, colon + 1, 0, 3);
    }
}

static double env_real(const char *name, double lo, double hi) {
    double x;
    if (ddpc_env_double(name, lo, hi, &x) != DDPC_OK) die_usage("%s", ddpc_last_error());
    return x;
}

static void parse_args(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->nproc = 1;
    o->nnodes = 1;
    snprintf(o->master_addr, sizeof o->master_addr, "%s", "127.0.0.1");
    o->master_port = 29500;
    o->monitor_interval = 1.0;
    o->join_timeout = env_real("DDPC_CONNECT_TIMEOUT", 0.001, 1e7);
    o->hb_timeout = env_real("DDPC_HEARTBEAT_TIMEOUT", 0.001, 1e7);
    o->grace = env_real("DDPC_KILL_GRACE", 0, 1e6);
    snprintf(o->run_id, sizeof o->run_id, "none");
    int have_redirects = 0, have_tee = 0, i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == 0) break; /* PROGRAM */
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "-m")) {
            o->module = 1;
            continue;
        }
        /* torchrun's short forms -r SPEC and -t SPEC */
        char longform[64];
        if ((!strcmp(a, "-r") || !strcmp(a, "-t")) && i + 1 < argc) {
            snprintf(longform, sizeof longform, "--%s", a[1] == 'r' ? "redirects" : "tee");
            a = longform;
        }
        if (a[1] != '-') die_usage("unknown option %s", a);
        /* normalise: --a_b=c -> name "a-b", value "c" */
        char name[64];
        const char *eq = strchr(a, '='), *val = NULL;
        size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nl >= sizeof name) die_usage("unknown option %.80s", a);
        memcpy(name, a + 2, nl);
        name[nl] = 0;
        for (char *p = name; *p; p++)
            if (*p == '_') *p = '-';
        static const char *flags[] = {"standalone", "no-python", "module", "env", "help", NULL};
        int is_flag = 0;
        for (int f = 0; flags[f]; f++) is_flag |= !strcmp(name, flags[f]);
        if (is_flag) {
            if (eq) die_usage("--%s takes no value", name);
        } else {
            static const char *known[] = {"nproc-per-node", "nnodes", "node-rank", "master-addr",
                                          "master-port", "max-restarts",
                                          "monitor-interval", "heartbeat-timeout", "join-timeout",
                                          "grace", "run-id", "rdzv-id", "log-dir", "redirects", "tee",
                                          "rdzv-endpoint", "rdzv-backend", "start-method", NULL};
            int k = 0;
            while (known[k] && strcmp(known[k], name)) k++;
            if (!known[k]) die_usage("unknown option --%s", name);
            if (eq) val = eq + 1;
            else if (i + 1 < argc) val = argv[++i];
            else die_usage("--%s needs a value", name);
        }
        if (!strcmp(name, "standalone")) o->standalone = 1;
        else if (!strcmp(name, "no-python")) o->no_python = 1;
        else if (!strcmp(name, "module")) o->module = 1;
        else if (!strcmp(name, "env")) {
            ddpc_env_print(stdout, 1);
            exit(0);
        } else if (!strcmp(name, "nproc-per-node")) {
            if (!strcmp(val, "auto") || !strcmp(val, "cpu")) {
                long n = sysconf(_SC_NPROCESSORS_ONLN);
                o->nproc = n > 0 ? (int)(n < MAX_NPROC ? n : MAX_NPROC) : 1;
            } else if (!strcmp(val, "gpu")) {
                die_usage("--nproc-per-node=gpu: ddpc runs on CPUs; give a number");
            } else {
                o->nproc = (int)parse_int_opt(name, val, 1, MAX_NPROC);
            }
        } else if (!strcmp(name, "nnodes")) {
            const char *colon = strchr(val, ':');
            if (colon) {
                char lo[32];
                snprintf(lo, sizeof lo, "%.*s", (int)(colon - val), val);
                long a1 = parse_int_opt(name, lo, 1, 65536), a2 = parse_int_opt(name, colon + 1, 1, 65536);
                if (a1 != a2)
                    die_usage("--nnodes=%s: elastic node ranges are not supported; give MIN == MAX", val);
                o->nnodes = (int)a1;
            } else {
                o->nnodes = (int)parse_int_opt(name, val, 1, 65536);
            }
        } else if (!strcmp(name, "node-rank")) o->node_rank = (int)parse_int_opt(name, val, 0, 65535);
        else if (!strcmp(name, "master-addr")) {
            if (!*val || strlen(val) >= sizeof o->master_addr) die_usage("--master-addr='%s' is not a host", val);
            snprintf(o->master_addr, sizeof o->master_addr, "%s", val);
        } else if (!strcmp(name, "master-port")) o->master_port = (int)parse_int_opt(name, val, 1, 65535);
        else if (!strcmp(name, "max-restarts")) o->max_restarts = (int)parse_int_opt(name, val, 0, 1000000);
        else if (!strcmp(name, "monitor-interval"))
            o->monitor_interval = parse_real_opt(name, val, 0.001, 3600);
        else if (!strcmp(name, "heartbeat-timeout")) o->hb_timeout = parse_real_opt(name, val, 0.001, 1e7);
        else if (!strcmp(name, "join-timeout")) o->join_timeout = parse_real_opt(name, val, 0.001, 1e7);
        else if (!strcmp(name, "grace")) o->grace = parse_real_opt(name, val, 0, 1e6);
        else if (!strcmp(name, "run-id") || !strcmp(name, "rdzv-id")) {
            size_t n = strlen(val);
            if (n == 0 || n >= sizeof o->run_id) die_usage("--%s='%s' must be 1 to 128 characters", name, val);
            for (const char *p = val; *p; p++)
                if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
                      (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                    die_usage("--%s='%s': use letters, digits, '-', '_' and '.'", name, val);
            snprintf(o->run_id, sizeof o->run_id, "%s", val);
        } else if (!strcmp(name, "rdzv-endpoint")) { /* HOST[:PORT]: where node 0's store is */
            const char *colon = strrchr(val, ':');
            size_t hl = colon ? (size_t)(colon - val) : strlen(val);
            if (hl == 0 || hl >= sizeof o->master_addr) die_usage("--rdzv-endpoint='%s' is not HOST[:PORT]", val);
            snprintf(o->master_addr, sizeof o->master_addr, "%.*s", (int)hl, val);
            if (colon) o->rdzv_port = (int)parse_int_opt(name, colon + 1, 1, 65535);
        } else if (!strcmp(name, "rdzv-backend")) {
            if (strcmp(val, "c10d") && strcmp(val, "static"))
                die_usage("--rdzv-backend=%s: only c10d and static (both mean ddpc-run's own store) are supported", val);
        } else if (!strcmp(name, "start-method")) {
            if (strcmp(val, "spawn") && strcmp(val, "fork") && strcmp(val, "forkserver"))
                die_usage("--start-method=%s is not spawn, fork or forkserver", val);
        } else if (!strcmp(name, "log-dir")) {
            if (!*val || strlen(val) >= sizeof o->log_dir - 64) die_usage("--log-dir='%s' is not usable", val);
            snprintf(o->log_dir, sizeof o->log_dir, "%s", val);
            o->log_any = 1;
        } else if (!strcmp(name, "redirects")) {
            parse_std_spec(name, val, o->redirects);
            have_redirects = 1;
        } else if (!strcmp(name, "tee")) {
            parse_std_spec(name, val, o->tee);
            have_tee = 1;
        }
    }
    if (i >= argc) die_usage("no PROGRAM to run");
    o->argv = argv + i;
    if (o->rdzv_port) o->master_port = o->rdzv_port;
    if (o->standalone) o->nnodes = 1, o->node_rank = 0;
    if (o->node_rank >= o->nnodes)
        die_usage("--node-rank=%d is out of range for --nnodes=%d (0..%d)", o->node_rank, o->nnodes,
                  o->nnodes - 1);
    if ((have_redirects || have_tee) && !o->log_any)
        die_usage("--redirects and --tee need --log-dir");
    if (o->log_any && !have_redirects && !have_tee)
        for (int k = 0; k < MAX_NPROC; k++) o->tee[k] = 3;
    for (int k = 0; k < MAX_NPROC; k++) o->tee[k] &= ~o->redirects[k];
}

/* ---------------------------------------------------------- messages */

static double t_start; /* launcher start, monotonic */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char buf[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(buf, sizeof buf, "ddpc-run: ");
    n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf - 1) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (ssize_t off = 0, w; off < n; off += w)
        if ((w = write(2, buf + off, (size_t)(n - off))) <= 0) {
            if (w < 0 && errno == EINTR) { w = 0; continue; }
            break;
        }
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a closed console is not the job's problem */
        p += w;
        n -= (size_t)w;
    }
}

static const char *sig_name(int sig, char *buf, size_t n) {
    const char *abbr = sigabbrev_np(sig);
    if (abbr) snprintf(buf, n, "SIG%s", abbr);
    else snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* ------------------------------------------------------------ workers */

typedef struct stream {
    int fd;             /* read end of the pipe; -1 once closed */
    int out_fd;         /* console: 1 or 2 */
    int console;        /* echo to the console with the rank prefix */
    int log_fd;         /* log file or -1 */
    char *buf;          /* LINE_CAP bytes: the partial line */
    size_t n;
} stream;

typedef struct worker {
    int local_rank, rank;
    pid_t pid;          /* also its process group id */
    int alive;
    int status;         /* wait status once reaped */
    double t_exit;
    stream out, err;
    char tail[TAIL_LINES][TAIL_LINE_CAP]; /* last stderr lines, a ring */
    int tail_n;         /* lines ever written to the ring */
} worker;

typedef struct job {
    opts *o;
    char host[256];
    ddpc_store_server *server;  /* node 0 only */
    ddpc_store *store;          /* every node */
    int store_lost;
    int joined;                 /* every node joined: the end is confirmed to node 0 */
    int node_lost;              /* a node's launcher fell silent: nobody waits for it */
    int sfd;                    /* signalfd */
    worker *w;                  /* o->nproc workers */
    int alive;
    int gen;
    double gen_start;
    int got_signal;             /* first SIGINT/SIGTERM/SIGHUP received, or 0 */
    double kill_at;             /* when SIGKILL follows the SIGTERM (0 = none pending) */
    char **envp;                /* the environment base for workers (owned) */
    int envn;
    char **exec_argv;           /* what is executed (owned array, borrowed strings) */
    int64_t *hb_val;            /* last heartbeat value seen per node */
    double *hb_seen;            /* when it last changed */
    double next_tick;
} job;

static void emit_line(job *J, worker *w, stream *s, const char *line, size_t len) {
    if (s->console) {
        char pre[32];
        int pn = snprintf(pre, sizeof pre, "[%d]: ", w->rank);
        char stackbuf[8192], *b = len + 40 <= sizeof stackbuf ? stackbuf : malloc(len + 40);
        if (b) {
            memcpy(b, pre, (size_t)pn);
            memcpy(b + pn, line, len);
            b[pn + len] = '\n';
            write_all(s->out_fd, b, (size_t)pn + len + 1); /* one write: lines never interleave */
            if (b != stackbuf) free(b);
        }
    }
    if (s->log_fd >= 0) {
        write_all(s->log_fd, line, len);
        write_all(s->log_fd, "\n", 1);
    }
    if (s == &w->err) {
        char *t = w->tail[w->tail_n % TAIL_LINES];
        snprintf(t, TAIL_LINE_CAP, "%.*s", (int)(len < TAIL_LINE_CAP ? len : TAIL_LINE_CAP - 1), line);
        w->tail_n++;
    }
    (void)J;
}

/* Reads what the pipe holds; emits every complete line. Closes on EOF. */
static void stream_read(job *J, worker *w, stream *s) {
    for (int rounds = 0; rounds < 8 && s->fd >= 0; rounds++) {
        ssize_t n = read(s->fd, s->buf + s->n, LINE_CAP - s->n);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) return;
            n = 0;
        }
        if (n == 0) { /* EOF: flush a last unterminated line */
            if (s->n) emit_line(J, w, s, s->buf, s->n);
            s->n = 0;
            close(s->fd);
            s->fd = -1;
            return;
        }
        s->n += (size_t)n;
        size_t start = 0;
        for (size_t i = s->n - (size_t)n; i < s->n; i++)
            if (s->buf[i] == '\n') {
                emit_line(J, w, s, s->buf + start, i - start);
                start = i + 1;
            }
        if (start == 0 && s->n == LINE_CAP) { /* an endless line: break it */
            emit_line(J, w, s, s->buf, s->n);
            start = s->n;
        }
        memmove(s->buf, s->buf + start, s->n - start);
        s->n -= start;
    }
}

static int mkdir_p(const char *path) {
    char buf[PATH_MAX + 256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

/* Sets up worker w's pipes and log files. 0 or -1 (said why). */
static int worker_streams(job *J, worker *w, int pout[2], int perr[2]) {
    opts *o = J->o;
    if (pipe2(pout, O_CLOEXEC) != 0 || pipe2(perr, O_CLOEXEC) != 0) {
        say("cannot create pipes for rank %d: %s", w->rank, strerror(errno));
        return -1;
    }
    fcntl(pout[0], F_SETFL, O_NONBLOCK);
    fcntl(perr[0], F_SETFL, O_NONBLOCK);
    int lr = w->local_rank;
    stream *ss[2] = {&w->out, &w->err};
    for (int k = 0; k < 2; k++) {
        stream *s = ss[k];
        s->fd = k ? perr[0] : pout[0];
        s->out_fd = k ? 2 : 1;
        s->n = 0;
        s->log_fd = -1;
        int bit = k ? 2 : 1;
        s->console = !(o->redirects[lr] & bit);
        if (o->log_any && ((o->redirects[lr] | o->tee[lr]) & bit)) {
            char dir[PATH_MAX + 200], path[PATH_MAX + 240];
            snprintf(dir, sizeof dir, "%s/%s/attempt_%d/%d", o->log_dir, o->run_id, J->gen, w->rank);
            if (mkdir_p(dir) != 0) {
                say("cannot create log directory %s: %s", dir, strerror(errno));
                return -1;
            }
            snprintf(path, sizeof path, "%s/%s.log", dir, k ? "stderr" : "stdout");
            s->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (s->log_fd < 0) {
                say("cannot open log file %s: %s", path, strerror(errno));
                return -1;
            }
        }
    }
    return 0;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

/* The variables ddpc-run sets (and removes from the inherited environment). */
static const char *const our_vars[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", NULL};

static int is_our_var(const char *entry) {
    for (int i = 0; our_vars[i]; i++) {
        size_t n = strlen(our_vars[i]);
        if (!strncmp(entry, our_vars[i], n) && entry[n] == '=') return 1;
    }
    return 0;
}

/* Builds the inherited part of the workers' environment once. */
static int build_base_env(job *J) {
    int n = 0;
    while (environ[n]) n++;
    J->envp = calloc((size_t)n + 40, sizeof *J->envp);
    if (!J->envp) return -1;
    for (int i = 0; i < n; i++)
        if (!is_our_var(environ[i])) J->envp[J->envn++] = environ[i];
    if (J->o->nproc > 1) {
        int told = 0;
        if (!getenv("OMP_NUM_THREADS")) {
            J->envp[J->envn++] = "OMP_NUM_THREADS=1";
            told = 1;
        }
        if (!getenv("OPENBLAS_NUM_THREADS")) {
            J->envp[J->envn++] = "OPENBLAS_NUM_THREADS=1";
            told = 1;
        }
        if (told)
            say("setting OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 (where unset) for each of the %d "
                "workers, to avoid overloading the system; tune them for your application",
                J->o->nproc);
    }
    return 0;
}

/* Forks and executes worker w with its environment. */
static int worker_spawn(job *J, worker *w) {
    opts *o = J->o;
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if (worker_streams(J, w, pout, perr) != 0) return -1;
    int world = o->nnodes * o->nproc;
    char *mine[24];
    int m = 0;
    mine[m++] = xasprintf("RANK=%d", w->rank);
    mine[m++] = xasprintf("LOCAL_RANK=%d", w->local_rank);
    mine[m++] = xasprintf("WORLD_SIZE=%d", world);
    mine[m++] = xasprintf("LOCAL_WORLD_SIZE=%d", o->nproc);
    mine[m++] = xasprintf("GROUP_RANK=%d", o->node_rank);
    mine[m++] = xasprintf("GROUP_WORLD_SIZE=%d", o->nnodes);
    mine[m++] = xasprintf("ROLE_RANK=%d", w->rank);
    mine[m++] = xasprintf("ROLE_WORLD_SIZE=%d", world);
    mine[m++] = xasprintf("ROLE_NAME=default");
    mine[m++] = xasprintf("MASTER_ADDR=%s", o->master_addr);
    mine[m++] = xasprintf("MASTER_PORT=%d", o->master_port);
    mine[m++] = xasprintf("TORCHELASTIC_RESTART_COUNT=%d", J->gen);
    mine[m++] = xasprintf("TORCHELASTIC_MAX_RESTARTS=%d", o->max_restarts);
    mine[m++] = xasprintf("TORCHELASTIC_RUN_ID=%s", o->run_id);
    mine[m++] = xasprintf("TORCHELASTIC_USE_AGENT_STORE=True");
    int ok = 1;
    for (int i = 0; i < m; i++) ok &= mine[i] != NULL;
    for (int i = 0; i < m; i++) J->envp[J->envn + i] = mine[i];
    J->envp[J->envn + m] = NULL;
    pid_t parent = getpid();
    pid_t pid = ok ? fork() : -1;
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the launcher dies: so does the worker */
        if (getppid() != parent) _exit(127);
        /* default dispositions: a signal ignored by whoever started us
         * (a background job's SIGINT) must still reach the workers */
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        execvpe(J->exec_argv[0], J->exec_argv, J->envp);
        dprintf(2, "ddpc-run: cannot execute '%s': %s\n", J->exec_argv[0], strerror(errno));
        _exit(127);
    }
    int err = errno;
    for (int i = 0; i < m; i++) free(mine[i]);
    close(pout[1]);
    close(perr[1]);
    if (pid < 0) {
        say("cannot start rank %d: %s", w->rank, ok ? strerror(err) : "out of memory");
        close(pout[0]);
        close(perr[0]);
        w->out.fd = w->err.fd = -1;
        return -1;
    }
    setpgid(pid, pid); /* also here: no window where a signal to the group misses it */
    w->pid = pid;
    w->alive = 1;
    w->status = 0;
    w->tail_n = 0;
    J->alive++;
    DDPC_TRACE(RUN, "started rank %d (local %d) as pid %d", w->rank, w->local_rank, (int)pid);
    return 0;
}

static void signal_workers(job *J, int sig) {
    for (int i = 0; i < J->o->nproc; i++) {
        worker *w = &J->w[i];
        if (!w->alive) continue;
        kill(-w->pid, sig);
        kill(w->pid, sig);
    }
}

/* SIGTERM to every live worker now, SIGKILL after the grace period. */
static void stop_workers(job *J) {
    if (J->kill_at) return;
    signal_workers(J, SIGTERM);
    J->kill_at = ddpc_now() + (J->o->grace > 0 ? J->o->grace : 0.001);
}

/* Reaps every exited child (workers and orphans adopted as subreaper).
 * Returns the index of the first worker that failed in this call, or -1. */
static int reap(job *J) {
    int first_fail = -1;
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0) break;
        for (int i = 0; i < J->o->nproc; i++) {
            worker *w = &J->w[i];
            if (w->pid != pid || !w->alive) continue;
            w->alive = 0;
            w->status = st;
            w->t_exit = ddpc_now();
            J->alive--;
            kill(-pid, SIGKILL); /* whatever it left running in its group */
            int failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            DDPC_TRACE(RUN, "rank %d (pid %d) ended: status 0x%x", w->rank, (int)pid, st);
            if (failed && first_fail < 0) first_fail = i;
        }
    }
    return first_fail;
}

/* The failure summary for worker w, in torchrun's shape. */
static char *failure_summary(job *J, worker *w) {
    char how[96], sn[32];
    if (WIFSIGNALED(w->status))
        snprintf(how, sizeof how, "killed by %s (%s)", sig_name(WTERMSIG(w->status), sn, sizeof sn),
                 strsignal(WTERMSIG(w->status)));
    else
        snprintf(how, sizeof how, "exit code %d", WEXITSTATUS(w->status));
    size_t cap = 1024 + TAIL_LINES * (TAIL_LINE_CAP + 16);
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t n = (size_t)snprintf(s, cap,
                                "first failure: rank %d (local rank %d, node %d on %s, pid %d): %s, "
                                "%.3f s after it started (restart %d)",
                                w->rank, w->local_rank, J->o->node_rank, J->host, (int)w->pid, how,
                                w->t_exit - J->gen_start, J->gen);
    int have = w->tail_n < TAIL_LINES ? w->tail_n : TAIL_LINES;
    if (have == 0) n += (size_t)snprintf(s + n, cap - n, "\n  (it wrote nothing to stderr)");
    else n += (size_t)snprintf(s + n, cap - n, "\n  last %d line%s of its stderr:", have, have > 1 ? "s" : "");
    for (int k = w->tail_n - have; k < w->tail_n && n < cap; k++)
        n += (size_t)snprintf(s + n, cap - n, "\n    [%d]: %s", w->rank, w->tail[k % TAIL_LINES]);
    return s;
}

/* ------------------------------------------------------ coordination */

static char *key(job *J, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *key(job *J, const char *fmt, ...) {
    static char buf[512];
    int n = snprintf(buf, sizeof buf, "run/%s/", J->o->run_id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    return buf;
}

/* Drains the signalfd without blocking. The first SIGINT/SIGTERM/SIGHUP is
 * forwarded to every worker and recorded in J->got_signal (SIGKILL follows
 * after the grace period); a second one kills the workers at once. SIGCHLD
 * only wakes the loop: reap() does the waiting. */
static void handle_signals(job *J);

/* Waits (in slices, handling signals) until the key "what/<r>" (or
 * "gen<gen>/what/<r>" when gen >= 0) exists for every node r, at most
 * timeout_s. Returns 0 when all exist, 1 on timeout, -1 on a store error or
 * (when interruptible) a stop signal. missing (may be NULL) gets the list
 * of the nodes whose key is absent. */
static int wait_nodes(job *J, const char *what, int gen, double timeout_s, int interruptible, char *missing,
                      size_t mlen) {
    int n = J->o->nnodes;
    char **keys = calloc((size_t)n, sizeof *keys);
    if (!keys) return -1;
    for (int r = 0; r < n; r++) {
        if (gen >= 0) keys[r] = strdup(key(J, "gen%d/%s/%d", gen, what, r));
        else keys[r] = strdup(key(J, "%s/%d", what, r));
        if (!keys[r]) return -1;
    }
    double deadline = ddpc_now() + timeout_s;
    int rc = 1;
    for (;;) {
        handle_signals(J);
        if (J->got_signal && interruptible) {
            rc = -1;
            break;
        }
        double left = deadline - ddpc_now();
        if (left <= 0) break;
        ddpc_status s = ddpc_store_wait(J->store, (const char *const *)keys, n, left < 0.25 ? left : 0.25);
        if (s == DDPC_OK) {
            rc = 0;
            break;
        }
        if (s != DDPC_ERR_TIMEOUT) {
            say("lost the job's store: %s", ddpc_last_error());
            J->store_lost = 1;
            rc = -1;
            break;
        }
    }
    if (rc == 1 && missing) {
        size_t used = 0;
        missing[0] = 0;
        for (int r = 0; r < n && used + 16 < mlen; r++) {
            int ex = 1;
            if (ddpc_store_check(J->store, keys[r], &ex) == DDPC_OK && !ex)
                used += (size_t)snprintf(missing + used, mlen - used, "%s%d", used ? ", " : "", r);
        }
    }
    for (int r = 0; r < n; r++) free(keys[r]);
    free(keys);
    return rc;
}

/* Connects to (node 0: hosts) the store, checks the job's configuration
 * against a job already using this run id, claims this node's rank and
 * waits for every node. 0 or an exit code. */
static int join_job(job *J) {
    opts *o = J->o;
    if (o->node_rank == 0) {
        ddpc_status s = ddpc_store_server_start(o->master_addr, o->master_port, &J->server);
        if (s != DDPC_OK) {
            say("cannot host the job's store at %s:%d: %s (choose another with --master-port)",
                o->master_addr, o->master_port, ddpc_last_error());
            return 1;
        }
        o->master_port = ddpc_store_server_port(J->server);
    }
    ddpc_status s = ddpc_store_connect(o->master_addr, o->master_port, o->join_timeout, &J->store);
    if (s != DDPC_OK) {
        say("node %d cannot reach the job's store on node 0 at %s:%d within %g s: %s", o->node_rank,
            o->master_addr, o->master_port, o->join_timeout, ddpc_last_error());
        return 1;
    }
    /* a store that stops answering (node 0's launcher hung) counts as lost
     * within the heartbeat timeout, not DDPC_STORE_TIMEOUT */
    ddpc_store_set_timeout(J->store, o->hb_timeout > o->join_timeout ? o->join_timeout : o->hb_timeout);
    char want[128], me[320];
    snprintf(want, sizeof want, "nnodes=%d nproc_per_node=%d max_restarts=%d", o->nnodes, o->nproc,
             o->max_restarts);
    void *got = NULL;
    size_t gl = 0;
    s = ddpc_store_compare_set(J->store, key(J, "config"), NULL, 0, want, strlen(want), &got, &gl);
    if (s != DDPC_OK) {
        say("cannot register with the job's store: %s", ddpc_last_error());
        return 1;
    }
    if (gl != strlen(want) || memcmp(got, want, gl) != 0) {
        say("refusing to join: run id '%s' at %s:%d belongs to a job with %s, and this launcher has %s "
            "(give every node the same --nnodes, --nproc-per-node and --max-restarts, or another --run-id)",
            o->run_id, o->master_addr, o->master_port, (char *)got, want);
        free(got);
        return 1;
    }
    free(got);
    snprintf(me, sizeof me, "%s pid %d", J->host, (int)getpid());
    s = ddpc_store_compare_set(J->store, key(J, "node/%d", o->node_rank), NULL, 0, me, strlen(me), &got, &gl);
    if (s != DDPC_OK) {
        say("cannot register with the job's store: %s", ddpc_last_error());
        return 1;
    }
    if (gl != strlen(me) || memcmp(got, me, gl) != 0) {
        say("refusing to join: node rank %d of run id '%s' is already taken by the launcher on %s",
            o->node_rank, o->run_id, (char *)got);
        free(got);
        return 1;
    }
    free(got);
    if (o->nnodes > 1) {
        char missing[1024];
        int rc = wait_nodes(J, "node", -1, o->join_timeout, 1, missing, sizeof missing);
        if (rc == 1) {
            say("nodes %s of %d never joined within %g s (run id '%s', store at %s:%d); start them "
                "with --nnodes=%d --node-rank=R --master-addr=%s, or raise --join-timeout / "
                "DDPC_CONNECT_TIMEOUT",
                missing, o->nnodes, o->join_timeout, o->run_id, o->master_addr, o->master_port, o->nnodes,
                o->master_addr);
            return 1;
        }
        if (rc < 0) return J->got_signal ? 128 + J->got_signal : 1;
        say("node %d: all %d nodes joined (run id '%s')", o->node_rank, o->nnodes, o->run_id);
    }
    J->joined = 1;
    return 0;
}

/* Outcome of a generation. */
enum { GEN_OK, GEN_FAIL, GEN_ABORT };

/* Publishes this node's failure as the generation's outcome unless another
 * node got there first; returns the outcome text that won (malloc'd). */
static char *publish_outcome(job *J, const char *text) {
    if (J->o->nnodes == 1 || J->store_lost) return strdup(text);
    void *got = NULL;
    size_t gl = 0;
    if (ddpc_store_compare_set(J->store, key(J, "gen%d/outcome", J->gen), NULL, 0, text, strlen(text), &got,
                               &gl) != DDPC_OK) {
        J->store_lost = 1;
        return strdup(text);
    }
    return got;
}

/* Reads the generation's outcome if some node set it (NULL if not yet). */
static char *peek_outcome(job *J) {
    void *v = NULL;
    size_t n;
    ddpc_status s = ddpc_store_get(J->store, key(J, "gen%d/outcome", J->gen), 0, &v, &n);
    if (s == DDPC_OK) return v;
    if (s != DDPC_ERR_TIMEOUT) {
        J->store_lost = 1;
        char *t = xasprintf("abort\nnode %d lost the job's store on node 0 (%s): node 0's launcher is gone",
                            J->o->node_rank, ddpc_last_error());
        return t;
    }
    return NULL;
}

/* Heartbeats: bumps ours, checks the others'. Returns a malloc'd abort
 * outcome when a node fell silent or the store went away, else NULL. */
static char *heartbeat(job *J) {
    opts *o = J->o;
    double now = ddpc_now();
    if (ddpc_store_add(J->store, key(J, "hb/%d", o->node_rank), 1, NULL) != DDPC_OK) {
        J->store_lost = 1;
        return xasprintf("abort\nnode %d lost the job's store on node 0 (%s): node 0's launcher is gone",
                         o->node_rank, ddpc_last_error());
    }
    for (int r = 0; r < o->nnodes; r++) {
        if (r == o->node_rank) continue;
        int64_t v = 0;
        void *p = NULL;
        size_t n;
        ddpc_status s = ddpc_store_get(J->store, key(J, "hb/%d", r), 0, &p, &n);
        if (s == DDPC_OK) {
            v = strtoll((char *)p, NULL, 10);
            free(p);
        } else if (s != DDPC_ERR_TIMEOUT) {
            J->store_lost = 1;
            return xasprintf("abort\nnode %d lost the job's store on node 0 (%s)", o->node_rank,
                             ddpc_last_error());
        }
        if (v != J->hb_val[r] || J->hb_seen[r] == 0) {
            J->hb_val[r] = v;
            J->hb_seen[r] = now;
        } else if (now - J->hb_seen[r] > o->hb_timeout) {
            void *who = NULL;
            ddpc_store_get(J->store, key(J, "node/%d", r), 0, &who, &n);
            char *t = xasprintf("abort\nnode %d's launcher (%s) sent no heartbeat for %.1f s "
                                "(--heartbeat-timeout %g s); it is presumed dead",
                                r, who ? (char *)who : "?", now - J->hb_seen[r], o->hb_timeout);
            free(who);
            J->node_lost = 1;
            return t;
        }
    }
    return NULL;
}

static void handle_signals(job *J) {
    struct signalfd_siginfo si[16];
    for (;;) {
        ssize_t n = read(J->sfd, si, sizeof si);
        if (n <= 0) break;
        for (int i = 0; i < (int)(n / (ssize_t)sizeof si[0]); i++) {
            int sig = (int)si[i].ssi_signo;
            if (sig == SIGCHLD) continue; /* reap() runs in the loop */
            char sn[32];
            if (!J->got_signal) {
                J->got_signal = sig;
                say("got %s: forwarding it to the workers and stopping the job", sig_name(sig, sn, sizeof sn));
                signal_workers(J, sig);
                J->kill_at = ddpc_now() + (J->o->grace > 0 ? J->o->grace : 0.001);
            } else {
                say("got %s again: killing the workers now", sig_name(sig, sn, sizeof sn));
                signal_workers(J, SIGKILL);
            }
        }
    }
}

/* Runs one generation: starts the workers, streams their output, watches
 * them (and the other nodes), stops them. *outcome gets the text
 * ("ok", "fail\n...", "abort\n..."; malloc'd). */
static int run_generation(job *J, char **outcome) {
    opts *o = J->o;
    *outcome = NULL;
    J->gen_start = ddpc_now();
    J->kill_at = 0;
    for (int i = 0; i < o->nproc; i++) {
        worker *w = &J->w[i];
        w->local_rank = i;
        w->rank = o->node_rank * o->nproc + i;
        w->alive = 0;
        w->out.fd = w->err.fd = -1;
        w->out.log_fd = w->err.log_fd = -1;
    }
    for (int i = 0; i < o->nproc; i++)
        if (worker_spawn(J, &J->w[i]) != 0) {
            *outcome = xasprintf("abort\nnode %d could not start its workers", o->node_rank);
            free(publish_outcome(J, *outcome ? *outcome : "abort\n"));
            stop_workers(J);
            break;
        }
    int multi = o->nnodes > 1;
    int local_done = 0;        /* all local workers ended and were recorded */
    double drain_until = 0;    /* after the last worker: how long pipes may stay open */
    J->next_tick = multi ? ddpc_now() + o->monitor_interval : 0;
    struct pollfd pf[1 + 2 * MAX_NPROC];
    stream *ps[1 + 2 * MAX_NPROC];
    worker *pw[1 + 2 * MAX_NPROC];
    for (;;) {
        /* 1. the state: are we done? */
        int open_streams = 0;
        for (int i = 0; i < o->nproc; i++) open_streams += (J->w[i].out.fd >= 0) + (J->w[i].err.fd >= 0);
        double now = ddpc_now();
        if (J->alive == 0 && !drain_until) drain_until = now + 1.0;
        if (J->alive == 0 && (open_streams == 0 || now >= drain_until)) {
            if (!local_done) {
                local_done = 1;
                if (!*outcome && J->got_signal) {
                    char sn[32];
                    *outcome = xasprintf("abort\nnode %d's launcher got %s", o->node_rank,
                                         sig_name(J->got_signal, sn, sizeof sn));
                    char *won = publish_outcome(J, *outcome);
                    free(won);
                }
                if (!*outcome && !multi) *outcome = strdup("ok");
                if (!*outcome && multi) { /* our workers succeeded: count us in */
                    int64_t nd = 0;
                    if (ddpc_store_add(J->store, key(J, "gen%d/ndone", J->gen), 1, &nd) != DDPC_OK) {
                        J->store_lost = 1;
                        *outcome = xasprintf("abort\nnode %d lost the job's store (%s)", o->node_rank,
                                             ddpc_last_error());
                    } else if (nd == o->nnodes) {
                        free(publish_outcome(J, "ok"));
                    }
                }
            }
            if (*outcome) break;
        }

        /* 2. multi-node: wait for the outcome, heartbeat, watch the others */
        if (multi && !*outcome && (local_done || now >= J->next_tick)) {
            char *t = NULL;
            if (now >= J->next_tick) {
                J->next_tick = now + o->monitor_interval;
                t = heartbeat(J);
            }
            if (!t && local_done) { /* block briefly on the outcome key */
                void *v = NULL;
                size_t n;
                double slice = J->next_tick - ddpc_now();
                if (slice > 0.25) slice = 0.25;
                ddpc_status s = ddpc_store_get(J->store, key(J, "gen%d/outcome", J->gen), slice > 0 ? slice : 0,
                                               &v, &n);
                if (s == DDPC_OK) t = v;
                else if (s != DDPC_ERR_TIMEOUT) {
                    J->store_lost = 1;
                    t = xasprintf("abort\nnode %d lost the job's store on node 0 (%s)", o->node_rank,
                                  ddpc_last_error());
                }
            } else if (!t) {
                t = peek_outcome(J);
            }
            if (t) {
                if (strncmp(t, "ok", 2) != 0 && strncmp(t, "fail", 4) != 0 && strncmp(t, "abort", 5) != 0) {
                    free(t);
                    t = xasprintf("abort\nmalformed outcome in the job's store");
                }
                if (strstr(t, "sent no heartbeat")) J->node_lost = 1;
                if (strncmp(t, "abort\nnode", 10) == 0 && !J->store_lost && strstr(t, "heartbeat")) {
                    char *won = publish_outcome(J, t);
                    free(t);
                    t = won;
                }
                *outcome = t;
                if (strcmp(t, "ok") != 0) stop_workers(J);
                continue;
            }
        }

        /* 3. wait for output, a signal, a child's end, a tick or the kill time */
        int np = 0;
        pf[np] = (struct pollfd){J->sfd, POLLIN, 0};
        ps[np] = NULL;
        pw[np++] = NULL;
        for (int i = 0; i < o->nproc; i++) {
            worker *w = &J->w[i];
            stream *ss[2] = {&w->out, &w->err};
            for (int k = 0; k < 2; k++)
                if (ss[k]->fd >= 0) {
                    pf[np] = (struct pollfd){ss[k]->fd, POLLIN, 0};
                    ps[np] = ss[k];
                    pw[np++] = w;
                }
        }
        double wake = 1e300;
        if (J->kill_at && J->alive) wake = J->kill_at;
        if (multi && !*outcome && J->next_tick < wake) wake = J->next_tick;
        if (J->alive == 0 && drain_until < wake) wake = drain_until;
        if (multi && local_done && !*outcome) wake = now; /* loop back to the outcome wait */
        int ms = wake >= 1e299 ? -1 : ddpc_deadline_ms(wake, 0);
        if (wake < 1e299 && wake <= now) ms = 0;
        int n = poll(pf, (nfds_t)np, ms);
        if (n < 0 && errno != EINTR) {
            say("poll: %s", strerror(errno));
            stop_workers(J);
        }
        if (n > 0) {
            for (int i = 1; i < np; i++)
                if (pf[i].revents) stream_read(J, pw[i], ps[i]);
            if (pf[0].revents) handle_signals(J);
        }
        int f = reap(J);
        if (f >= 0 && !*outcome && !J->got_signal && !J->kill_at) { /* the first failure */
            /* its last stderr lines may still be in the pipe: read them first */
            for (int k = 0; k < 200 && J->w[f].err.fd >= 0; k++) {
                struct pollfd p1 = {J->w[f].err.fd, POLLIN, 0};
                if (poll(&p1, 1, 20) <= 0) break;
                stream_read(J, &J->w[f], &J->w[f].err);
            }
            char *sum = failure_summary(J, &J->w[f]);
            char *text = xasprintf("fail\n%s", sum ? sum : "first failure: (no memory for the summary)");
            free(sum);
            *outcome = publish_outcome(J, text ? text : "fail\n");
            free(text);
            stop_workers(J);
        }
        if (J->kill_at && J->alive && ddpc_now() >= J->kill_at) {
            say("workers still running %.1f s after SIGTERM: sending SIGKILL", o->grace);
            signal_workers(J, SIGKILL);
            J->kill_at = ddpc_now() + 3600; /* once */
        }
    }
    for (int i = 0; i < o->nproc; i++) {
        worker *w = &J->w[i];
        stream *ss[2] = {&w->out, &w->err};
        for (int k = 0; k < 2; k++) {
            if (ss[k]->fd >= 0) {
                if (ss[k]->n) emit_line(J, w, ss[k], ss[k]->buf, ss[k]->n);
                ss[k]->n = 0;
                close(ss[k]->fd);
                ss[k]->fd = -1;
            }
            if (ss[k]->log_fd >= 0) close(ss[k]->log_fd);
            ss[k]->log_fd = -1;
        }
    }
    if (!strcmp(*outcome, "ok")) return GEN_OK;
    return strncmp(*outcome, "fail", 4) == 0 ? GEN_FAIL : GEN_ABORT;
}

/* Kills and reaps any process still parented to us (orphans adopted as a
 * subreaper), so that nothing outlives ddpc-run. */
static void reap_orphans(void) {
    pid_t me = getpid();
    for (int round = 0; round < 3; round++) {
        DIR *d = opendir("/proc");
        int found = 0;
        if (!d) return;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            char path[300], buf[512];
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n <= 0) continue;
            buf[n] = 0;
            char *rp = strrchr(buf, ')');
            int ppid = 0;
            char state;
            if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2 || ppid != me) continue;
            kill((pid_t)atoi(e->d_name), SIGKILL);
            found = 1;
        }
        closedir(d);
        if (!found) break;
        for (int k = 0; k < 100; k++) {
            int st;
            pid_t p = waitpid(-1, &st, WNOHANG);
            if (p < 0) break;
            if (p == 0) ddpc_sleep(0.002);
        }
    }
    while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

/* Node 0 keeps the store up until every node has said it is finished (so
 * that none mistakes the store's end for a failure); the others say so. */
static void finish_job(job *J) {
    opts *o = J->o;
    if (o->nnodes == 1 || J->store_lost || !J->store || !J->joined || J->node_lost) return;
    if (ddpc_store_set(J->store, key(J, "exit/%d", o->node_rank), "", 0) != DDPC_OK) return;
    if (o->node_rank != 0) return;
    char missing[1024];
    double limit = o->grace + o->monitor_interval + 2;
    if (wait_nodes(J, "exit", -1, limit, 0, missing, sizeof missing) == 1)
        say("nodes %s did not confirm the end of the job within %.0f s", missing, limit);
}

int main(int argc, char **argv) {
    t_start = ddpc_now();
    opts o;
    parse_args(argc, argv, &o);
    job J;
    memset(&J, 0, sizeof J);
    J.o = &o;
    J.sfd = -1;
    if (gethostname(J.host, sizeof J.host) != 0) snprintf(J.host, sizeof J.host, "?");
    J.host[sizeof J.host - 1] = 0;

    /* what to execute: PROGRAM, or python for a .py / -m module */
    int nargs = 0;
    while (o.argv[nargs]) nargs++;
    J.exec_argv = calloc((size_t)nargs + 4, sizeof *J.exec_argv);
    if (!J.exec_argv) return 1;
    size_t pl = strlen(o.argv[0]);
    int k = 0;
    if (o.module || (!o.no_python && pl > 3 && !strcmp(o.argv[0] + pl - 3, ".py"))) {
        const char *py = ddpc_env_str("DDPC_PYTHON", NULL);
        J.exec_argv[k++] = (char *)(py && *py ? py : "python3");
        J.exec_argv[k++] = "-u";
        if (o.module) J.exec_argv[k++] = "-m";
    }
    for (int i = 0; i < nargs; i++) J.exec_argv[k++] = o.argv[i];

    if (o.standalone) { /* the store takes a free port on loopback */
        snprintf(o.master_addr, sizeof o.master_addr, "127.0.0.1");
        o.master_port = 0;
    }

    /* signals: read through a signalfd; the store thread blocks them all */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    J.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (J.sfd < 0) {
        say("signalfd: %s", strerror(errno));
        return 1;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    J.w = calloc((size_t)o.nproc, sizeof *J.w);
    J.hb_val = calloc((size_t)o.nnodes, sizeof *J.hb_val);
    J.hb_seen = calloc((size_t)o.nnodes, sizeof *J.hb_seen);
    if (!J.w || !J.hb_val || !J.hb_seen || build_base_env(&J) != 0) {
        say("out of memory");
        return 1;
    }
    for (int i = 0; i < o.nproc; i++) {
        J.w[i].out.buf = malloc(LINE_CAP);
        J.w[i].err.buf = malloc(LINE_CAP);
        if (!J.w[i].out.buf || !J.w[i].err.buf) {
            say("out of memory");
            return 1;
        }
    }

    int rc = join_job(&J);
    char *outcome = NULL;
    for (J.gen = 0; rc == 0; J.gen++) {
        if (o.nnodes > 1 && J.gen > 0) { /* every node has stopped: start together */
            ddpc_store_set(J.store, key(&J, "gen%d/start/%d", J.gen, o.node_rank), "", 0);
            char missing[1024];
            int w = wait_nodes(&J, "start", J.gen, o.join_timeout, 1, missing, sizeof missing);
            if (w != 0) {
                if (w == 1) say("nodes %s did not come back for restart %d within %g s", missing, J.gen, o.join_timeout);
                rc = J.got_signal ? 128 + J.got_signal : 1;
                break;
            }
        }
        free(outcome);
        int g = run_generation(&J, &outcome);
        if (g == GEN_OK) break;
        const char *text = strchr(outcome, '\n');
        text = text ? text + 1 : outcome;
        if (g == GEN_FAIL && J.gen < o.max_restarts && !J.got_signal) {
            say("%s", text);
            say("restarting all workers on all nodes (restart %d of at most %d)", J.gen + 1, o.max_restarts);
            continue;
        }
        if (g == GEN_FAIL || !J.got_signal)
            say("job failed%s. %s", g == GEN_FAIL && o.max_restarts ? " after all restarts" : "", text);
        /* exit code: the failed worker's own, or 128+signal for ddpc-run's */
        rc = 1;
        if (J.got_signal) rc = 128 + J.got_signal;
        else
            for (int i = 0; i < o.nproc; i++) {
                worker *w = &J.w[i];
                char pat[48];
                snprintf(pat, sizeof pat, "first failure: rank %d ", w->rank);
                if (!strstr(outcome, pat)) continue;
                if (WIFSIGNALED(w->status)) rc = 128 + WTERMSIG(w->status);
                else if (WIFEXITED(w->status) && WEXITSTATUS(w->status)) rc = WEXITSTATUS(w->status);
            }
        break;
    }
    free(outcome);
    signal_workers(&J, SIGKILL);
    reap(&J);
    finish_job(&J);
    reap_orphans();
    ddpc_store_close(J.store);
    ddpc_store_server_stop(J.server);
    for (int i = 0; i < o.nproc; i++) {
        free(J.w[i].out.buf);
        free(J.w[i].err.buf);
    }
    free(J.w);
    free(J.hb_val);
    free(J.hb_seen);
    free(J.envp);
    free(J.exec_argv);
    close(J.sfd);
    DDPC_INFO(RUN, "done in %.3f s, exit %d", ddpc_now() - t_start, rc);
    return rc;
}
