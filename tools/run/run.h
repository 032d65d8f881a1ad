/*
 * run.h — the parts of ddpc-run, the launcher (tools/ddpc-run.c holds its
 * main and the generation loop). One job per file, read in this order:
 *
 *   options.c     argv (ddpc-run's and torchrun's flags), their PET_
 *                 variables, srun's step -> opts
 *   console.c     what reaches the terminal: ddpc-run's own messages, the
 *                 workers' prefixed lines, rank 0's updating progress line
 *   workers.c     spawning workers, their pipes and log files, signals,
 *                 the kill grace, reaping
 *   rendezvous.c  the job's store: joining, node membership, heartbeats,
 *                 the generation's outcome shared by all nodes
 *   outcome.c     the typed outcome of a generation: produced where the
 *                 event happens, stored as text between nodes, read by the
 *                 restart and exit-code decisions and the summary
 *
 * Everything runs on one thread (the store server has its own).
 */
#ifndef DDPC_RUN_H
#define DDPC_RUN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ddpc/ddpc.h"
#include "ddpc/store.h"

#define MAX_NPROC     1024
#define LINE_CAP      65536 /* a longer line without '\n' is broken here */
#define TAIL_LINES    10    /* stderr lines kept per worker for the failure summary */
#define TAIL_LINE_CAP 400
#define EXIT_USAGE    2

/* ------------------------------------------------------------ options.c */

enum { BIND_AUTO, BIND_NONE, BIND_CORE };

typedef struct opts {
    int nproc; /* workers on this node */
    int nnodes;
    int node_rank;
    /* --nnodes=MIN:MAX (MIN < MAX): the rendezvous sets nnodes and node_rank
     * (rendezvous.c: elastic_join); 0, 0 otherwise */
    int min_nodes, max_nodes;
    double last_call; /* --rdzv-conf last_call_timeout=S: seconds to wait for more than MIN */
    char master_addr[256];
    int master_port;
    int rdzv_port; /* --rdzv-endpoint's port: wins over --master-port, as in torchrun */
    int standalone;
    int max_restarts;
    double monitor_interval; /* seconds between heartbeats / remote checks */
    double join_timeout;     /* seconds for all nodes to join (DDPC_CONNECT_TIMEOUT) */
    double hb_timeout;       /* seconds without a heartbeat before a node is lost */
    double grace;            /* seconds between SIGTERM and SIGKILL */
    char log_dir[PATH_MAX];
    int redirects[MAX_NPROC]; /* per local rank: bit 1 stdout, bit 2 stderr */
    int tee[MAX_NPROC];
    int log_any; /* log_dir given */
    char run_id[129];
    int no_python, module;
    int bind;      /* --bind-to: BIND_AUTO, BIND_NONE or BIND_CORE (workers.c: worker_cpu) */
    char **argv;   /* PROGRAM ARGS..., NULL-terminated (borrowed from main) */
    int rank_base; /* global rank of this node's local rank 0 */
    int world;     /* ranks in the job */
    /* --rank-table / RANK_TABLE_FILE: the table (owned) and its absolute path */
    ddpc_rank_table *table;
    char table_path[PATH_MAX];
} opts;

/* Fills o from the command line, over the options' PET_ variables, over
 * srun's step (one task per node), over the defaults; exits 2 with a
 * message on bad usage, 0 after --help or --env. */
void run_parse_args(int argc, char **argv, opts *o);

/* ------------------------------------------------------------ ranktable.c */

/* Lays the job out as the rank table at path says (HCCL's file, what
 * RANK_TABLE_FILE names): one node per server, this node the server given
 * by node_rank (>= 0), else the one whose host_ip or server_id is
 * HCCL_IF_IP, else one of this machine's addresses or its hostname; its
 * ranks and their number from the table; node 0's host the job store's
 * unless master_given. 0, or -1 with the reason said. */
int run_rank_table(opts *o, const char *path, int node_rank, int master_given);
/* Worker rank r's extra variables in a rank-table job (RANK_TABLE_FILE,
 * RANK_ID, RANK_SIZE, DEVICE_ID): fills mine from m on; returns the new m. */
int run_rank_table_env(const opts *o, int rank, char **mine, int m);

/* ------------------------------------------------------------ console.c */

/* "ddpc-run: " + the message + '\n' on stderr, in one write. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* vasprintf or NULL. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "SIGTERM", or "signal N". */
const char *sig_name(int sig, char *buf, size_t n);
/* Writes all n bytes to fd, retrying EINTR; a closed console is ignored. */
void write_all(int fd, const char *p, size_t n);
/* Turns on rank 0's progress line: from now on console_bar() draws. */
void console_progress_on(void);
int console_progress(void);
/* Writes one whole line ("[r]: text\n") to fd 1 or 2 in one write. A
 * progress line on the terminal is cleared first and redrawn after it. */
void console_line(int fd, const char *prefix, const char *line, size_t len);
/* Draws prefix + text as the updating progress line on fd. */
void console_bar(int fd, const char *prefix, const char *text, size_t len);
/* The progress line's last text (NULL when none is shown), and its end:
 * a newline after it, so that it stays on the terminal as it stands. */
const char *console_bar_text(size_t *len);
void console_bar_end(void);
void console_bar_drop(void);

/* ------------------------------------------------------------ workers.c */

typedef struct stream {
    int fd;       /* read end of the pipe; -1 once closed */
    int out_fd;   /* console: 1 or 2 */
    int console;  /* echo to the console with the rank prefix */
    int log_fd;   /* log file or -1 */
    int progress; /* '\r' ends an update of the progress line (rank 0 on a terminal) */
    int in_bar;   /* the last piece ended with '\r': the partial line is the bar */
    char *buf;    /* LINE_CAP bytes: the partial line */
    size_t n;
} stream;

typedef struct worker {
    int local_rank, rank;
    pid_t pid; /* also its process group id */
    int alive;
    int status; /* wait status once reaped */
    double t_exit;
    stream out, err;
    char tail[TAIL_LINES][TAIL_LINE_CAP]; /* last stderr lines, a ring */
    int tail_n;                           /* lines ever written to the ring */
} worker;

typedef struct job {
    opts *o;
    char host[256];
    ddpc_store_server *server; /* node 0 only */
    ddpc_store *store;         /* every node */
    int store_lost;
    int rdzv_host; /* --nnodes=MIN:MAX: this launcher hosts the store (node 0) */
    int round;     /* --nnodes=MIN:MAX: membership changes so far; keys under "r<round>/" */
    int first_gen; /* the generation this launcher starts at (a late node: the job's) */
    int joined;    /* every node joined: the end is confirmed to node 0 */
    int node_lost; /* a node's launcher fell silent: nobody waits for it */
    int sfd;       /* signalfd */
    worker *w;     /* o->nproc workers */
    int alive;
    int gen;
    double gen_start;
    int got_signal; /* first SIGINT/SIGTERM/SIGHUP received, or 0 */
    double kill_at; /* when SIGKILL follows the SIGTERM (0 = none pending) */
    char **envp;    /* the environment base for workers (owned) */
    int envn;
    char **exec_argv; /* what is executed (owned array, borrowed strings) */
    int64_t *hb_val;  /* last heartbeat value seen per node */
    double *hb_seen;  /* when it last changed */
    double next_tick;
    int progress_env; /* rank 0 is told DDPC_PROGRESS=1 */
} job;

/* Builds the inherited part of the workers' environment once. 0 or -1. */
int build_base_env(job *J);
/* Resets the workers' records for a new generation. */
void workers_reset(job *J);
/* Forks and executes worker w with its environment. 0 or -1 (said why). */
int worker_spawn(job *J, worker *w);
/* Reads what the pipe holds; emits every complete line. Closes on EOF. */
void stream_read(job *J, worker *w, stream *s);
/* Emits partial lines and closes every stream of the generation. */
void workers_close_streams(job *J);
void signal_workers(job *J, int sig);
/* A worker failed: the others, which ddpc-run gave a DDPC_TRACE_DIR (its
 * --log-dir), are asked for their flight records (SIGUSR1, sent only to a
 * worker that catches it, as ddpc's recorder does; another program keeps
 * its plain SIGTERM) and given half a second to write them. */
void ask_for_records(job *J);
/* SIGTERM to every live worker now, SIGKILL after the grace period. */
void stop_workers(job *J);
/* Reaps every exited child; returns the index of the first worker that
 * failed in this call, or -1. */
int reap(job *J);
/* Drains the signalfd without blocking. The first SIGINT/SIGTERM/SIGHUP is
 * forwarded to every worker and recorded in J->got_signal (SIGKILL follows
 * after the grace period); a second one kills the workers at once. SIGCHLD
 * only wakes the loop: reap() does the waiting. */
void handle_signals(job *J);
/* Kills and reaps any process still parented to us (orphans adopted as a
 * subreaper), so that nothing outlives ddpc-run. */
void reap_orphans(void);

/* ------------------------------------------------------------ outcome.c */

typedef enum run_kind {
    RUN_OK,               /* every worker on every node exited 0 */
    RUN_WORKER_FAILED,    /* a worker exited with a non-zero code (restartable) */
    RUN_WORKER_SIGNALLED, /* a worker was killed by a signal (restartable) */
    RUN_START_FAILED,     /* a node could not start its workers */
    RUN_INTERRUPTED,      /* a launcher got SIGINT, SIGTERM or SIGHUP */
    RUN_NODE_LOST,        /* a node's launcher sent no heartbeat in time */
    RUN_STORE_LOST,       /* the job's store on node 0 went away */
    RUN_NODE_JOINED,      /* --nnodes=MIN:MAX: a node waits to join (all restart with it) */
    RUN_MALFORMED,        /* the outcome in the store could not be read */
    RUN_KIND_COUNT
} run_kind;

typedef struct run_outcome {
    run_kind kind;
    int node;   /* node where it happened, -1 if none */
    int rank;   /* global rank of the worker concerned, -1 if none */
    int status; /* worker kinds: its wait status; RUN_INTERRUPTED: the signal */
    char *text; /* what users are told (owned; may be NULL when out of memory) */
} run_outcome;

/* Sets *oc (freeing what it held) to kind with a printf-formatted text. */
void outcome_set(run_outcome *oc, run_kind kind, int node, int rank, int status, const char *fmt,
                 ...) __attribute__((format(printf, 6, 7)));
void outcome_clear(run_outcome *oc);
/* The summary of worker w's failure, in torchrun's shape. */
void outcome_worker_failed(job *J, worker *w, run_outcome *oc);
/* Text form stored for the other nodes ("KIND NODE RANK STATUS\ntext",
 * malloc'd), and back: a text that does not parse is RUN_MALFORMED. */
char *outcome_encode(const run_outcome *oc);
void outcome_decode(const char *s, run_outcome *oc);
/* A worker's failure: the job may restart. */
int outcome_restartable(const run_outcome *oc);
/* The text users see ("" when none). */
const char *outcome_text(const run_outcome *oc);
/* The exit code: the failed worker's own when it ran on this node (128+N
 * for signal N), 128+N when this launcher got signal N, else 1. */
int outcome_exit_code(const job *J, const run_outcome *oc);

/* ---------------------------------------------------------- rendezvous.c */

/* "run/<run-id>/" + the formatted rest (a static buffer). */
char *key(job *J, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Who may join the job's store and connections (docs/SECURITY.md): for a
 * single-node job without DDPC_JOB_TOKEN (set empty: none is made, and
 * connections are not authenticated), generates one (32 random bytes,
 * in hex) into this process's environment, which the store and the
 * workers inherit; sets DDPC_STORE_TORCH=1 unless it is set, since any
 * worker may be a PyTorch program whose TCPStore client cannot prove a
 * token. Call before the workers' environment is built. 0 or -1 (said
 * why). */
int job_token(job *J);
/* Connects to (node 0: hosts) the store, checks the job's configuration
 * against a job already using this run id, claims this node's rank and
 * waits for every node. 0 or an exit code. */
int join_job(job *J);
/* Every node has stopped: waits for all to be ready for generation J->gen.
 * 0 or an exit code. */
int await_restart(job *J);
/* --nnodes=MIN:MAX, after a generation failed or lost a node: every node
 * still alive joins the next round of the rendezvous, which closes once
 * each node of the last round has joined or been silent for the heartbeat
 * timeout; the job goes on at the new size (nnodes, node_rank, world set),
 * or ends, said why, when fewer than MIN remain. 0 or an exit code. */
int elastic_rejoin(job *J);
/* Publishes mine as the generation's outcome unless another node got there
 * first; *won (may be NULL, may be mine) becomes the outcome that won. */
void publish_outcome(job *J, const run_outcome *mine, run_outcome *won);
/* This node's workers all exited 0: counts it in; the last node publishes
 * RUN_OK. 0, or -1 with *oc set (the store is lost). */
int count_node_done(job *J, run_outcome *oc);
/* Reads the generation's outcome, waiting at most wait_s. 1 with *oc set,
 * 0 when no node has set it yet (a lost store sets *oc and returns 1). */
int read_outcome(job *J, double wait_s, run_outcome *oc);
/* Heartbeats: bumps ours, checks the others'. 1 with *oc set when a node
 * fell silent or the store went away, else 0. */
int heartbeat(job *J, run_outcome *oc);
/* Node 0 keeps the store up until every node has said it is finished (so
 * that none mistakes the store's end for a failure); the others say so. */
void finish_job(job *J);

#endif /* DDPC_RUN_H */
