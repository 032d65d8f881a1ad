/*
 * options.c — ddpc-run's command line: its own flags and torchrun's (with
 * dashes or underscores, "--opt=value" or "--opt value", -r/-t/-m), read
 * into an opts, and each option's environment form as torchrun reads it
 * (PET_NNODES for --nnodes: what a Kubeflow PyTorchJob sets). Bad usage
 * ends the process with status 2 and a message naming the option (and the
 * variable it came from); nothing else here has side effects.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "run.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: ddpc-run [options] PROGRAM [ARGS...]\n"
        "\n"
        "Starts --nproc-per-node copies of PROGRAM on this node with torchrun's\n"
        "environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,\n"
        "ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*), hosts\n"
        "the job's store at MASTER_ADDR:MASTER_PORT on node 0 (the workers use it as\n"
        "torchrun's agent store: TORCHELASTIC_USE_AGENT_STORE=True), prefixes their output\n"
        "lines with \"[rank]: \", and stops every worker on every node when one fails.\n"
        "Every option is also accepted with underscores (--nproc_per_node) and as\n"
        "\"--opt value\" as well as \"--opt=value\", and, as torchrun reads them,\n"
        "from the environment as PET_ + its name in capitals with underscores\n"
        "(PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR,\n"
        "PET_MASTER_PORT, PET_RDZV_ENDPOINT, ...; what a Kubeflow PyTorchJob sets);\n"
        "a flag's variable is an integer, non-zero for on (PET_STANDALONE=1); an\n"
        "empty variable counts as unset; the command line wins over the variable.\n"
        "--help and --env have no variable.\n"
        "Under srun as one task per node (srun --ntasks-per-node=1 ddpc-run ...), Slurm's\n"
        "step gives the defaults of --nnodes (SLURM_STEP_NUM_NODES), --node-rank\n"
        "(SLURM_NODEID), --master-addr (the first node of SLURM_STEP_NODELIST) and\n"
        "--run-id (SLURM_JOB_ID); PET_ variables and the command line still win.\n"
        "\n"
        "  --nproc-per-node=N     workers on this node (or auto/cpu: one per core; default 1)\n"
        "  --nnodes=N             nodes in the job (N or N:N; default 1); MIN:MAX (with\n"
        "                         --rdzv-backend=c10d --rdzv-endpoint): any number of nodes\n"
        "                         from MIN to MAX form the job, ranked as they join\n"
        "  --node-rank=R          this node's rank, 0..nnodes-1 (default 0); node R's\n"
        "                         workers are ranks R*N .. R*N+N-1\n"
        "  --master-addr=HOST     host of node 0 (default 127.0.0.1)\n"
        "  --master-port=PORT     port of the job's store on node 0 (default 29500)\n"
        "  --standalone           one node on free ports (ignores --master-*)\n"
        "  --rank-table=FILE      HCCL's rank table (also RANK_TABLE_FILE when no\n"
        "                         --nproc-per-node/--nnodes is given): a node per server,\n"
        "                         this one found by --node-rank, else HCCL_IF_IP, else\n"
        "                         this machine's addresses and name; its workers are the\n"
        "                         server's ranks, told RANK_ID, RANK_SIZE, DEVICE_ID and\n"
        "                         RANK_TABLE_FILE too; node 0 is the file's first server\n"
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
        "  --rdzv-backend=B       c10d or static: both mean ddpc-run's store; with c10d and\n"
        "                         several nodes, each node needs its --node-rank\n"
        "  --rdzv-conf=K=V,...    torchrun's: join_timeout=S is --join-timeout;\n"
        "                         last_call_timeout=S: with --nnodes=MIN:MAX, start S s after\n"
        "                         MIN nodes joined (default 30) unless MAX join first; other keys\n"
        "                         are accepted\n"
        "  --start-method=M       spawn, fork or forkserver: accepted, workers are always exec'd\n"
        "  --log-dir=DIR          write DIR/<run-id>/attempt_<restart>/<rank>/{stdout,stderr}.log\n"
        "                         (with neither --redirects nor --tee: both streams, teed)\n"
        "  -r, --redirects=SPEC   streams to the log files only: 0 none, 1 stdout,\n"
        "                         2 stderr, 3 both, or per local rank \"0:3,1:2\"\n"
        "  -t, --tee=SPEC         streams to the log files and the console (same SPEC)\n"
        "  --bind-to=B            core: local rank i runs on the i-th CPU ddpc-run may\n"
        "                         use; none: wherever the kernel puts it; auto (default):\n"
        "                         core where this node runs 2 or more workers and they do\n"
        "                         not outnumber those CPUs, else none (mpirun binds too)\n"
        "  --no-python            run PROGRAM as it is even when it ends in .py\n"
        "  -m, --module           PROGRAM is a Python module: run \"python3 -u -m PROGRAM\"\n"
        "  --env                  print the environment variables ddpc reads (Markdown)\n"
        "  -h, --help             this text\n"
        "\n"
        "A PROGRAM ending in .py runs as \"$DDPC_PYTHON -u PROGRAM\" (DDPC_PYTHON default\n"
        "python3). OMP_NUM_THREADS and OPENBLAS_NUM_THREADS are set to 1 when unset\n"
        "and more than one worker runs per node. Signals SIGINT, SIGTERM and SIGHUP\n"
        "are forwarded to every worker. When ddpc-run's stderr is a terminal, rank 0\n"
        "is told DDPC_PROGRESS=1 (unless set) and its '\\r' progress updates show as\n"
        "one updating line there; log files get only the line's final state. Exit\n"
        "status: 0 when every worker on every node exited 0; the first failed\n"
        "worker's exit code (128+N for signal N); 128+N when ddpc-run itself got\n"
        "signal N; 1 for a job that could not start; 2 for bad usage.\n");
}

/* The variable the option being read came from ("PET_NNODES"), NULL for
 * the command line: usage errors name it. */
static const char *from_var;

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ddpc-run: error: ");
    vfprintf(stderr, fmt, ap);
    if (from_var)
        fprintf(stderr, " (from the environment: %s='%s'; see ddpc-run --help)\n", from_var,
                getenv(from_var));
    else
        fprintf(stderr, " (see ddpc-run --help)\n");
    va_end(ap);
    exit(EXIT_USAGE);
}

static long parse_int_opt(const char *name, const char *v, long lo, long hi) {
    long x;
    if (ddpc__parse_long(name, v, lo, hi, &x) != DDPC_OK)
        die_usage("--%s: %s", name, ddpc_last_error());
    return x;
}

static double parse_real_opt(const char *name, const char *v, double lo, double hi) {
    double x;
    if (ddpc__parse_double(name, v, lo, hi, &x) != DDPC_OK)
        die_usage("--%s: %s", name, ddpc_last_error());
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
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) die_usage("--%s=%s: '%s' is not LOCAL_RANK:CODE", name, v, tok);
        *colon = 0;
        int lr = (int)parse_int_opt(name, tok, 0, MAX_NPROC - 1);
        out[lr] = (int)parse_int_opt(name, colon + 1, 0, 3);
    }
}

static double env_real(ddpc__env_id id) {
    double x;
    if (ddpc__env_double(id, &x) != DDPC_OK) die_usage("%s", ddpc_last_error());
    return x;
}

static void set_defaults(opts *o) {
    memset(o, 0, sizeof *o);
    o->nproc = 1;
    o->nnodes = 1;
    snprintf(o->master_addr, sizeof o->master_addr, "%s", "127.0.0.1");
    o->master_port = 29500;
    o->monitor_interval = 1.0;
    o->join_timeout = env_real(DDPC_ENV_CONNECT_TIMEOUT);
    o->hb_timeout = env_real(DDPC_ENV_HEARTBEAT_TIMEOUT);
    o->grace = env_real(DDPC_ENV_KILL_GRACE);
    o->last_call = 30; /* torchrun's default */
    snprintf(o->run_id, sizeof o->run_id, "none");
}

/* One option: what it sets in o. seen collects SEEN_* bits. */
typedef void setter(opts *o, const char *name, const char *val, int *seen);
enum {
    SEEN_REDIRECTS = 1,
    SEEN_TEE = 2,
    SEEN_NODE_RANK = 4,
    SEEN_C10D = 8,
    SEEN_LAYOUT = 16, /* --nproc-per-node, --nnodes or --standalone */
    SEEN_MASTER = 32  /* --master-addr or --rdzv-endpoint */
};

/* --rank-table FILE (else RANK_TABLE_FILE, when no layout is given). */
static const char *rank_table_opt;

static void set_help(opts *o, const char *name, const char *val, int *seen) {
    usage(stdout);
    exit(0);
}

static void set_env(opts *o, const char *name, const char *val, int *seen) {
    ddpc__env_print(stdout, 1);
    exit(0);
}

static void set_standalone(opts *o, const char *name, const char *val, int *seen) {
    o->standalone = 1;
    *seen |= SEEN_LAYOUT;
}

static void set_rank_table(opts *o, const char *name, const char *val, int *seen) {
    if (!*val) die_usage("--rank-table needs a file");
    rank_table_opt = val;
}
static void set_no_python(opts *o, const char *name, const char *val, int *seen) {
    o->no_python = 1;
}
static void set_module(opts *o, const char *name, const char *val, int *seen) { o->module = 1; }

static void set_nproc(opts *o, const char *name, const char *val, int *seen) {
    *seen |= SEEN_LAYOUT;
    if (!strcmp(val, "auto") || !strcmp(val, "cpu")) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->nproc = n > 0 ? (int)(n < MAX_NPROC ? n : MAX_NPROC) : 1;
    } else if (!strcmp(val, "gpu")) {
        die_usage("--nproc-per-node=gpu: ddpc runs on CPUs; give a number");
    } else {
        o->nproc = (int)parse_int_opt(name, val, 1, MAX_NPROC);
    }
}

static void set_nnodes(opts *o, const char *name, const char *val, int *seen) {
    *seen |= SEEN_LAYOUT;
    const char *colon = strchr(val, ':');
    if (!colon) {
        o->nnodes = (int)parse_int_opt(name, val, 1, 65536);
        return;
    }
    char lo[32];
    snprintf(lo, sizeof lo, "%.*s", (int)(colon - val), val);
    long a1 = parse_int_opt(name, lo, 1, 65536), a2 = parse_int_opt(name, colon + 1, 1, 65536);
    if (a1 > a2) die_usage("--nnodes=%s: MIN is above MAX", val);
    o->nnodes = (int)a1;
    o->min_nodes = o->max_nodes = 0;
    if (a1 < a2) o->min_nodes = (int)a1, o->max_nodes = (int)a2; /* elastic */
}

static void set_run_id(opts *o, const char *name, const char *val, int *seen) {
    size_t n = strlen(val);
    if (n == 0 || n >= sizeof o->run_id)
        die_usage("--%s='%s' must be 1 to 128 characters", name, val);
    for (const char *p = val; *p; p++)
        if (!(*p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            die_usage("--%s='%s': use letters, digits, '-', '_' and '.'", name, val);
    snprintf(o->run_id, sizeof o->run_id, "%s", val);
}

/* HOST[:PORT]: where node 0's store is. */
static void set_rdzv_endpoint(opts *o, const char *name, const char *val, int *seen) {
    const char *colon = strrchr(val, ':');
    size_t hl = colon ? (size_t)(colon - val) : strlen(val);
    if (hl == 0 || hl >= sizeof o->master_addr)
        die_usage("--rdzv-endpoint='%s' is not HOST[:PORT]", val);
    snprintf(o->master_addr, sizeof o->master_addr, "%.*s", (int)hl, val);
    *seen |= SEEN_MASTER;
    o->rdzv_port = colon ? (int)parse_int_opt(name, colon + 1, 1, 65535) : 0;
}

static void set_node_rank(opts *o, const char *name, const char *val, int *seen) {
    o->node_rank = (int)parse_int_opt(name, val, 0, 65535);
    *seen |= SEEN_NODE_RANK;
}

static void set_master_addr(opts *o, const char *name, const char *val, int *seen) {
    if (!*val || strlen(val) >= sizeof o->master_addr)
        die_usage("--master-addr='%s' is not a host", val);
    snprintf(o->master_addr, sizeof o->master_addr, "%s", val);
    *seen |= SEEN_MASTER;
}

static void set_master_port(opts *o, const char *name, const char *val, int *seen) {
    o->master_port = (int)parse_int_opt(name, val, 1, 65535);
}

static void set_max_restarts(opts *o, const char *name, const char *val, int *seen) {
    o->max_restarts = (int)parse_int_opt(name, val, 0, 1000000);
}

static void set_monitor_interval(opts *o, const char *name, const char *val, int *seen) {
    o->monitor_interval = parse_real_opt(name, val, 0.001, 3600);
}

static void set_bind_to(opts *o, const char *name, const char *val, int *seen) {
    if (!strcmp(val, "auto"))
        o->bind = BIND_AUTO;
    else if (!strcmp(val, "none"))
        o->bind = BIND_NONE;
    else if (!strcmp(val, "core"))
        o->bind = BIND_CORE;
    else
        die_usage("--%s=%s is not auto, core or none", name, val);
}

static void set_hb_timeout(opts *o, const char *name, const char *val, int *seen) {
    o->hb_timeout = parse_real_opt(name, val, 0.001, 1e7);
}

static void set_join_timeout(opts *o, const char *name, const char *val, int *seen) {
    o->join_timeout = parse_real_opt(name, val, 0.001, 1e7);
}

static void set_grace(opts *o, const char *name, const char *val, int *seen) {
    o->grace = parse_real_opt(name, val, 0, 1e6);
}

static void set_rdzv_backend(opts *o, const char *name, const char *val, int *seen) {
    if (strcmp(val, "c10d") && strcmp(val, "static"))
        die_usage("--rdzv-backend=%s: only c10d and static (both mean ddpc-run's own store) are "
                  "supported",
                  val);
    if (!strcmp(val, "c10d"))
        *seen |= SEEN_C10D;
    else
        *seen &= ~SEEN_C10D;
}

/* torchrun's "KEY=VALUE,..." for its rendezvous: join_timeout (seconds)
 * sets the join timeout; last_call_timeout (seconds) how long an elastic
 * job waits for more than MIN nodes; the other keys (read_timeout,
 * close_timeout, ...) are accepted and have no use here. */
static void set_rdzv_conf(opts *o, const char *name, const char *val, int *seen) {
    char buf[1024];
    if (strlen(val) >= sizeof buf)
        die_usage("--rdzv-conf is longer than %zu bytes", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", val);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv) die_usage("--rdzv-conf=%s: '%s' is not KEY=VALUE", val, kv);
        *eq = 0;
        if (!strcmp(kv, "join_timeout")) o->join_timeout = parse_real_opt(name, eq + 1, 0.001, 1e7);
        if (!strcmp(kv, "last_call_timeout")) o->last_call = parse_real_opt(name, eq + 1, 0, 1e7);
    }
}

static void set_start_method(opts *o, const char *name, const char *val, int *seen) {
    if (strcmp(val, "spawn") && strcmp(val, "fork") && strcmp(val, "forkserver"))
        die_usage("--start-method=%s is not spawn, fork or forkserver", val);
}

static void set_log_dir(opts *o, const char *name, const char *val, int *seen) {
    if (!*val || strlen(val) >= sizeof o->log_dir - 64)
        die_usage("--log-dir='%s' is not usable", val);
    snprintf(o->log_dir, sizeof o->log_dir, "%s", val);
    o->log_any = 1;
}

static void set_redirects(opts *o, const char *name, const char *val, int *seen) {
    parse_std_spec(name, val, o->redirects);
    *seen |= SEEN_REDIRECTS;
}

static void set_tee(opts *o, const char *name, const char *val, int *seen) {
    parse_std_spec(name, val, o->tee);
    *seen |= SEEN_TEE;
}

/* The first host of a Slurm hostlist, each bracket replaced by its first
 * member: "node[01-04,07],gpu1" -> "node01", "r[1-2]-n[3,5]" -> "r1-n3".
 * 0, or -1 when there is none or it does not fit in n bytes. */
static int first_host(const char *list, char *out, size_t n) {
    size_t k = 0;
    for (const char *p = list; *p && *p != ',';) {
        if (*p == '[') {
            for (p++; *p && *p != ',' && *p != '-' && *p != ']'; p++) {
                if (k + 1 >= n) return -1;
                out[k++] = *p;
            }
            while (*p && *p != ']') p++;
            if (*p++ != ']') return -1;
        } else if (k + 1 < n) {
            out[k++] = *p++;
        } else {
            return -1;
        }
    }
    out[k] = 0;
    return k ? 0 : -1;
}

static long env_int(ddpc__env_id id) {
    long x;
    if (ddpc__env_long(id, &x) != DDPC_OK) die_usage("%s", ddpc_last_error());
    return x;
}

/* Under srun as one task per node (SLURM_STEP_NUM_TASKS equal to
 * SLURM_STEP_NUM_NODES), the step gives the defaults that PET_ variables
 * and the command line may still change: --nnodes (the step's nodes),
 * --node-rank (SLURM_NODEID), --master-addr (the step's first node),
 * --run-id (SLURM_JOB_ID). Returns 1 when it gave them. Several tasks per
 * node: Slurm's variables are left alone, and a note says how to run
 * ddpc-run under srun. */
static int slurm_defaults(opts *o) {
    if (!ddpc__env_isset(DDPC_ENV_SLURM_STEP_NUM_NODES) ||
        !ddpc__env_isset(DDPC_ENV_SLURM_STEP_NUM_TASKS) || !ddpc__env_isset(DDPC_ENV_SLURM_NODEID))
        return 0;
    long nodes = env_int(DDPC_ENV_SLURM_STEP_NUM_NODES),
         tasks = env_int(DDPC_ENV_SLURM_STEP_NUM_TASKS), node = env_int(DDPC_ENV_SLURM_NODEID);
    if (tasks != nodes) {
        say("note: srun started %ld tasks on %ld node(s); ddpc-run takes its node rank and master "
            "from Slurm only as one task per node (srun --ntasks-per-node=1 ddpc-run ...)",
            tasks, nodes);
        return 0;
    }
    const char *list = ddpc__env(DDPC_ENV_SLURM_STEP_NODELIST, NULL);
    const char *job = ddpc__env(DDPC_ENV_SLURM_JOB_ID, NULL);
    char host[sizeof o->master_addr];
    if (!list || first_host(list, host, sizeof host) != 0)
        die_usage("SLURM_STEP_NODELIST='%s' names no first node", list ? list : "");
    if (node >= nodes)
        die_usage("SLURM_NODEID=%ld is not below SLURM_STEP_NUM_NODES=%ld", node, nodes);
    o->nnodes = (int)nodes;
    o->node_rank = (int)node;
    snprintf(o->master_addr, sizeof o->master_addr, "%s", host);
    if (job && *job) {
        from_var = "SLURM_JOB_ID";
        set_run_id(o, "run-id", job, NULL);
        from_var = NULL;
    }
    return 1;
}

/* Every long option (normalised: dashes), whether it takes a value,
 * whether it is also read from its PET_ variable (all but --help and
 * --env), and its setter. */
static const struct option_row {
    const char *name;
    int takes_value;
    int from_env;
    setter *set;
} option_table[] = {
    { "help", 0, 0, set_help },
    { "env", 0, 0, set_env },
    { "standalone", 0, 1, set_standalone },
    { "no-python", 0, 1, set_no_python },
    { "module", 0, 1, set_module },
    { "nproc-per-node", 1, 1, set_nproc },
    { "rank-table", 1, 0, set_rank_table },
    { "nnodes", 1, 1, set_nnodes },
    { "node-rank", 1, 1, set_node_rank },
    { "master-addr", 1, 1, set_master_addr },
    { "master-port", 1, 1, set_master_port },
    { "max-restarts", 1, 1, set_max_restarts },
    { "monitor-interval", 1, 1, set_monitor_interval },
    { "heartbeat-timeout", 1, 1, set_hb_timeout },
    { "join-timeout", 1, 1, set_join_timeout },
    { "grace", 1, 1, set_grace },
    { "run-id", 1, 1, set_run_id },
    { "rdzv-id", 1, 1, set_run_id },
    { "log-dir", 1, 1, set_log_dir },
    { "redirects", 1, 1, set_redirects },
    { "tee", 1, 1, set_tee },
    { "rdzv-endpoint", 1, 1, set_rdzv_endpoint },
    { "rdzv-backend", 1, 1, set_rdzv_backend },
    { "rdzv-conf", 1, 1, set_rdzv_conf },
    { "start-method", 1, 1, set_start_method },
    { "bind-to", 1, 1, set_bind_to },
};
#define N_OPTIONS (sizeof option_table / sizeof option_table[0])

/* torchrun's environment form of an option (torch/distributed/
 * argparse_util.py, actions env and check_env): "PET_" + the option's dest,
 * upper case — "nproc-per-node" -> PET_NPROC_PER_NODE. */
static void option_var(const char *name, char var[80]) {
    int n = snprintf(var, 80, "PET_");
    for (const char *p = name; *p && n < 79; p++)
        var[n++] = *p == '-' ? '_' : (*p >= 'a' && *p <= 'z') ? (char)(*p - 'a' + 'A') : *p;
    var[n] = 0;
}

/* Sets o from the PET_ variable of every option the command line did not
 * give (given[k]: row k's setter was on it), as torchrun's parser does: a
 * variable is its option's default, so the command line wins and a bad
 * variable under a good option is never read. An empty variable counts as
 * unset. A value option takes the variable as its value; a flag is on when
 * the variable is a non-zero integer (torchrun's check_env; "0" leaves it
 * off). */
static void read_env_options(opts *o, const unsigned char given[], int *seen) {
    static char var[N_OPTIONS][80];
    for (size_t k = 0; k < N_OPTIONS; k++) {
        const struct option_row *row = &option_table[k];
        if (!row->from_env || given[k]) continue;
        option_var(row->name, var[k]);
        const char *v = getenv(var[k]);
        if (!v || !*v) continue;
        from_var = var[k];
        if (row->takes_value) {
            row->set(o, row->name, v, seen);
        } else if (parse_int_opt(row->name, v, -2147483647L, 2147483647L) != 0) {
            row->set(o, row->name, NULL, seen);
        }
        from_var = NULL;
    }
}

/* argv[*i] is an option: its normalised name ("--a_b=c" -> "a-b") in
 * name, its value (NULL for a flag) in *val, consuming argv[*i + 1] for
 * "--opt value". Returns its row. */
static const struct option_row *read_option(int argc, char **argv, int *i, char name[64],
                                            const char **val) {
    const char *a = argv[*i];
    if (!strcmp(a, "-h")) a = "--help";
    if (!strcmp(a, "-m")) a = "--module";
    /* torchrun's short forms -r SPEC and -t SPEC */
    if ((!strcmp(a, "-r") || !strcmp(a, "-t")) && *i + 1 < argc)
        a = a[1] == 'r' ? "--redirects" : "--tee";
    if (a[1] != '-') die_usage("unknown option %s", a);
    const char *eq = strchr(a, '=');
    size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    if (nl >= 64) die_usage("unknown option %.80s", a);
    memcpy(name, a + 2, nl);
    name[nl] = 0;
    for (char *p = name; *p; p++)
        if (*p == '_') *p = '-';
    const struct option_row *row = NULL;
    for (size_t k = 0; k < N_OPTIONS && !row; k++)
        if (!strcmp(option_table[k].name, name)) row = &option_table[k];
    if (!row) die_usage("unknown option --%s", name);
    *val = NULL;
    if (!row->takes_value) {
        if (eq) die_usage("--%s takes no value", name);
    } else if (eq) {
        *val = eq + 1;
    } else if (*i + 1 < argc) {
        *val = argv[++*i];
    } else {
        die_usage("--%s needs a value", name);
    }
    return row;
}

/* Checks the options against each other once all are read; seen holds
 * SEEN_* bits (SEEN_NODE_RANK also when Slurm gave the node rank). */
static void finish_options(opts *o, int seen) {
    int have_redirects = seen & SEEN_REDIRECTS, have_tee = seen & SEEN_TEE;
    if (o->rdzv_port) o->master_port = o->rdzv_port;
    if (o->standalone) o->nnodes = 1, o->node_rank = 0;
    /* torchrun's c10d rendezvous ranks the nodes as they join; ddpc-run's
     * nodes know theirs (a Kubeflow PyTorchJob with an elasticPolicy sets
     * no PET_NODE_RANK) */
    if (o->max_nodes && !o->standalone) {
        /* the nodes' ranks come from the rendezvous (rendezvous.c: elastic_join) */
        if (!(seen & SEEN_C10D) || !(seen & SEEN_MASTER))
            die_usage("--nnodes=%d:%d (elastic) needs --rdzv-backend=c10d and "
                      "--rdzv-endpoint=HOST:PORT (the node hosting the store)",
                      o->min_nodes, o->max_nodes);
        if (seen & SEEN_NODE_RANK)
            die_usage("--nnodes=%d:%d (elastic): the rendezvous ranks the nodes as they join; "
                      "drop --node-rank",
                      o->min_nodes, o->max_nodes);
        if (rank_table_opt) die_usage("--nnodes=MIN:MAX and --rank-table do not go together");
        seen |= SEEN_NODE_RANK;   /* given by the rendezvous */
        o->nnodes = o->max_nodes; /* until the rendezvous says */
    }
    if (o->standalone) o->min_nodes = o->max_nodes = 0;
    if ((seen & SEEN_C10D) && o->nnodes > 1 && !(seen & SEEN_NODE_RANK))
        die_usage("--rdzv-backend=c10d with --nnodes=%d and no --node-rank: ddpc-run's nodes do "
                  "not get their ranks as they join; give each node its --node-rank "
                  "(PET_NODE_RANK), 0 on the node at --rdzv-endpoint",
                  o->nnodes);
    /* a rank table lays the job out: one node per server */
    const char *table = rank_table_opt;
    if (!table && !(seen & SEEN_LAYOUT) && getenv("RANK_TABLE_FILE") && *getenv("RANK_TABLE_FILE"))
        table = getenv("RANK_TABLE_FILE");
    if (table && (seen & SEEN_LAYOUT))
        die_usage("--rank-table gives the nodes and their workers: drop --nproc-per-node, "
                  "--nnodes and --standalone");
    if (table && run_rank_table(o, table, (seen & SEEN_NODE_RANK) ? o->node_rank : -1,
                                (seen & SEEN_MASTER) != 0) != 0)
        exit(EXIT_USAGE);
    if (!table) {
        o->rank_base = o->node_rank * o->nproc;
        o->world = o->nnodes * o->nproc;
    }
    if (o->node_rank >= o->nnodes)
        die_usage("--node-rank=%d is out of range for --nnodes=%d (0..%d)", o->node_rank, o->nnodes,
                  o->nnodes - 1);
    if ((have_redirects || have_tee) && !o->log_any)
        die_usage("--redirects and --tee need --log-dir");
    if (o->log_any && !have_redirects && !have_tee)
        for (int k = 0; k < MAX_NPROC; k++) o->tee[k] = 3;
    for (int k = 0; k < MAX_NPROC; k++) o->tee[k] &= ~o->redirects[k];
}

/* Walks the options before PROGRAM; returns PROGRAM's index. With o,
 * applies each; without, marks in given[] the rows whose setter each one
 * uses (an alias marks its twin: --rdzv-id also stands for --run-id). */
static int walk_options(int argc, char **argv, opts *o, int *seen, unsigned char given[]) {
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return i + 1;
        if (a[0] != '-' || a[1] == 0) break; /* PROGRAM */
        char name[64];
        const char *val;
        const struct option_row *row = read_option(argc, argv, &i, name, &val);
        if (o)
            row->set(o, name, val, seen);
        else
            for (size_t k = 0; k < N_OPTIONS; k++)
                if (option_table[k].set == row->set) given[k] = 1;
    }
    return i;
}

void run_parse_args(int argc, char **argv, opts *o) {
    set_defaults(o);
    int seen = 0;
    unsigned char given[N_OPTIONS] = { 0 };
    /* 1. which options the command line gives (usage errors in it first);
     * 2. Slurm's defaults under srun; 3. the PET_ variables of the options
     * the command line does not give; 4. the command line's */
    walk_options(argc, argv, NULL, &seen, given);
    int slurm = slurm_defaults(o);
    read_env_options(o, given, &seen);
    int i = walk_options(argc, argv, o, &seen, given);
    if (i >= argc) die_usage("no PROGRAM to run");
    o->argv = argv + i;
    finish_options(o, seen | (slurm ? SEEN_NODE_RANK : 0));
    if (slurm)
        say("srun, one task per node: --nnodes=%d --node-rank=%d --master-addr=%s --run-id=%s "
            "(from Slurm's step unless given)",
            o->nnodes, o->node_rank, o->master_addr, o->run_id);
}
