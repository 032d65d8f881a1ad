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
 * The parts live in tools/run/ (run.h lists them); this file holds main
 * and the loop that runs one generation of workers.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "run/run.h"

static double t_start; /* launcher start, monotonic */

/* One generation's progress through the loop in run_generation. */
typedef struct gen_state {
    int multi;          /* more than one node: the outcome is shared */
    int local_done;     /* all local workers ended and were recorded */
    double drain_until; /* after the last worker: how long pipes may stay open */
    int decided;        /* oc holds the generation's outcome */
    run_outcome oc;
} gen_state;

/* Starts every local worker; when one cannot start, the generation is over. */
static void start_workers(job *J, gen_state *g) {
    workers_reset(J);
    for (int i = 0; i < J->o->nproc; i++)
        if (worker_spawn(J, &J->w[i]) != 0) {
            outcome_set(&g->oc, RUN_START_FAILED, J->o->node_rank, -1, 0,
                        "node %d could not start its workers", J->o->node_rank);
            publish_outcome(J, &g->oc, NULL);
            g->decided = 1;
            stop_workers(J);
            break;
        }
}

/* Every local worker has ended and its output is read (or has had a
 * second to be): records this node's part of the outcome. Returns 1 when
 * the generation is over. */
static int local_end(job *J, gen_state *g, double now) {
    opts *o = J->o;
    int open_streams = 0;
    for (int i = 0; i < o->nproc; i++)
        open_streams += (J->w[i].out.fd >= 0) + (J->w[i].err.fd >= 0);
    if (J->alive == 0 && !g->drain_until) g->drain_until = now + 1.0;
    if (J->alive > 0 || (open_streams > 0 && now < g->drain_until)) return 0;
    if (!g->local_done) {
        g->local_done = 1;
        if (!g->decided && J->got_signal) {
            char sn[32];
            outcome_set(&g->oc, RUN_INTERRUPTED, o->node_rank, -1, J->got_signal,
                        "node %d's launcher got %s", o->node_rank,
                        sig_name(J->got_signal, sn, sizeof sn));
            publish_outcome(J, &g->oc, NULL);
            g->decided = 1;
        }
        if (!g->decided && !g->multi) {
            outcome_set(&g->oc, RUN_OK, -1, -1, 0, "ok");
            g->decided = 1;
        }
        if (!g->decided && g->multi) /* our workers succeeded: count us in */
            g->decided = count_node_done(J, &g->oc) != 0;
    }
    return g->decided;
}

/* Multi-node: heartbeats, the other nodes, the outcome one of them set.
 * Returns 1 when the outcome was decided here. */
static int watch_nodes(job *J, gen_state *g, double now) {
    if (!g->multi || g->decided || !(g->local_done || now >= J->next_tick)) return 0;
    run_outcome t = { RUN_OK, -1, -1, 0, NULL };
    int got = 0;
    if (now >= J->next_tick) {
        J->next_tick = now + J->o->monitor_interval;
        got = heartbeat(J, &t);
    }
    if (!got && g->local_done) { /* block briefly on the outcome key */
        double slice = J->next_tick - ddpc__now();
        if (slice > 0.25) slice = 0.25;
        got = read_outcome(J, slice > 0 ? slice : 0, &t);
    } else if (!got) {
        got = read_outcome(J, 0, &t);
    }
    if (!got) return 0;
    if (t.kind == RUN_NODE_LOST) { /* nobody waits for that node; the others are told */
        J->node_lost = 1;
        if (!J->store_lost) publish_outcome(J, &t, &t);
    }
    if (t.kind == RUN_NODE_JOINED && !J->store_lost) publish_outcome(J, &t, &t);
    outcome_clear(&g->oc);
    g->oc = t;
    g->decided = 1;
    if (t.kind != RUN_OK) stop_workers(J);
    return 1;
}

/* Waits for output, a signal, a child's end, a tick or the kill time, and
 * handles what came. */
static void wait_events(job *J, gen_state *g, double now) {
    static struct pollfd pf[1 + 2 * MAX_NPROC];
    static stream *ps[1 + 2 * MAX_NPROC];
    static worker *pw[1 + 2 * MAX_NPROC];
    int np = 0;
    pf[np] = (struct pollfd){ J->sfd, POLLIN, 0 };
    ps[np] = NULL;
    pw[np++] = NULL;
    for (int i = 0; i < J->o->nproc; i++) {
        worker *w = &J->w[i];
        stream *ss[2] = { &w->out, &w->err };
        for (int k = 0; k < 2; k++)
            if (ss[k]->fd >= 0) {
                pf[np] = (struct pollfd){ ss[k]->fd, POLLIN, 0 };
                ps[np] = ss[k];
                pw[np++] = w;
            }
    }
    double wake = 1e300;
    if (J->kill_at && J->alive) wake = J->kill_at;
    if (g->multi && !g->decided && J->next_tick < wake) wake = J->next_tick;
    if (J->alive == 0 && g->drain_until < wake) wake = g->drain_until;
    if (g->multi && g->local_done && !g->decided) wake = now; /* loop back to the outcome wait */
    int ms = wake >= 1e299 ? -1 : ddpc__deadline_ms(wake, 0);
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
}

/* Reaps the workers that ended; the first failure (unless the job is
 * already stopping) becomes the generation's outcome. */
static void watch_workers(job *J, gen_state *g) {
    int f = reap(J);
    if (f < 0 || g->decided || J->got_signal || J->kill_at) return;
    worker *w = &J->w[f];
    /* its last stderr lines may still be in the pipe: read them first */
    for (int k = 0; k < 200 && w->err.fd >= 0; k++) {
        struct pollfd p1 = { w->err.fd, POLLIN, 0 };
        if (poll(&p1, 1, 20) <= 0) break;
        stream_read(J, w, &w->err);
    }
    run_outcome mine = { RUN_OK, -1, -1, 0, NULL };
    outcome_worker_failed(J, w, &mine);
    publish_outcome(J, &mine, &g->oc);
    outcome_clear(&mine);
    g->decided = 1;
    ask_for_records(J);
    stop_workers(J);
}

/* The grace period after SIGTERM is over: SIGKILL to what still runs. */
static void kill_stragglers(job *J) {
    if (!J->kill_at || !J->alive || ddpc__now() < J->kill_at) return;
    say("workers still running %.1f s after SIGTERM: sending SIGKILL", J->o->grace);
    signal_workers(J, SIGKILL);
    J->kill_at = ddpc__now() + 3600; /* once */
}

/* Runs one generation: starts the workers, streams their output, watches
 * them (and the other nodes), stops them. *oc gets how it ended. */
static void run_generation(job *J, run_outcome *oc) {
    /* elastic, even alone: the store is watched for nodes that join */
    gen_state g = { .multi = J->o->nnodes > 1 || J->o->max_nodes,
                    .oc = { RUN_OK, -1, -1, 0, NULL } };
    J->gen_start = ddpc__now();
    J->kill_at = 0;
    start_workers(J, &g);
    J->next_tick = g.multi ? ddpc__now() + J->o->monitor_interval : 0;
    for (;;) {
        double now = ddpc__now();
        if (local_end(J, &g, now)) break;
        if (watch_nodes(J, &g, now)) continue;
        wait_events(J, &g, now);
        watch_workers(J, &g);
        kill_stragglers(J);
    }
    workers_close_streams(J);
    outcome_clear(oc);
    *oc = g.oc;
}

/* What to execute: PROGRAM, or python for a .py / -m module. 0 or -1. */
static int build_exec_argv(job *J) {
    opts *o = J->o;
    int nargs = 0, k = 0;
    while (o->argv[nargs]) nargs++;
    J->exec_argv = calloc((size_t)nargs + 4, sizeof *J->exec_argv);
    if (!J->exec_argv) return -1;
    size_t pl = strlen(o->argv[0]);
    if (o->module || (!o->no_python && pl > 3 && !strcmp(o->argv[0] + pl - 3, ".py"))) {
        const char *py = ddpc__env(DDPC_ENV_PYTHON, NULL);
        J->exec_argv[k++] = (char *)(py && *py ? py : "python3");
        J->exec_argv[k++] = "-u";
        if (o->module) J->exec_argv[k++] = "-m";
    }
    for (int i = 0; i < nargs; i++) J->exec_argv[k++] = o->argv[i];
    return 0;
}

/* Signals are read through a signalfd (the store thread blocks them all);
 * orphans of the workers are adopted. 0 or -1 (said why). */
static int setup_signals(job *J) {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);
    J->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (J->sfd < 0) {
        say("signalfd: %s", strerror(errno));
        return -1;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    return 0;
}

/* The job's memory: workers, their line buffers, heartbeat records, the
 * workers' environment. 0 or -1 (said why). */
static int alloc_job(job *J) {
    opts *o = J->o;
    J->w = calloc((size_t)o->nproc, sizeof *J->w);
    J->hb_val = calloc((size_t)o->nnodes, sizeof *J->hb_val);
    J->hb_seen = calloc((size_t)o->nnodes, sizeof *J->hb_seen);
    if (!J->w || !J->hb_val || !J->hb_seen || build_base_env(J) != 0) goto oom;
    for (int i = 0; i < o->nproc; i++) {
        J->w[i].out.buf = malloc(LINE_CAP);
        J->w[i].err.buf = malloc(LINE_CAP);
        if (!J->w[i].out.buf || !J->w[i].err.buf) goto oom;
    }
    return 0;
oom:
    say("out of memory");
    return -1;
}

static void free_job(job *J) {
    for (int i = 0; J->w && i < J->o->nproc; i++) {
        free(J->w[i].out.buf);
        free(J->w[i].err.buf);
    }
    free(J->w);
    free(J->hb_val);
    free(J->hb_seen);
    free(J->envp);
    free(J->exec_argv);
    ddpc_rank_table_destroy(J->o->table);
    if (J->sfd >= 0) close(J->sfd);
}

/* Where the workers' flight records of the generation are (DDPC_TRACE_DIR,
 * beside the logs), when they wrote any: said with the command that
 * explains them. */
static void trace_hint(job *J) {
    const char *mine = getenv("DDPC_TRACE_DIR");
    char dir[PATH_MAX + 200];
    if (mine && *mine)
        snprintf(dir, sizeof dir, "%s", mine);
    else if (J->o->log_any)
        snprintf(dir, sizeof dir, "%s/%s/attempt_%d", J->o->log_dir, J->o->run_id, J->gen);
    else
        return;
    DIR *d = opendir(dir);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += !strncmp(e->d_name, "flight-", 7) && strstr(e->d_name, ".txt") &&
             !strstr(e->d_name, ".tmp");
    closedir(d);
    if (n)
        say("%d rank%s wrote a flight record in %s: `ddpc-trace %s` says where each stopped", n,
            n > 1 ? "s" : "", dir, dir);
}

/* Runs generations until one succeeds, one fails for good, or the restarts
 * are spent. Returns the exit code. */
static int run_job(job *J) {
    opts *o = J->o;
    run_outcome oc = { RUN_OK, -1, -1, 0, NULL };
    int rc = join_job(J);
    for (J->gen = J->first_gen; rc == 0; J->gen++) {
        if (o->nnodes > 1 && J->gen > 0 && (rc = await_restart(J)) != 0) break; /* start together */
        run_generation(J, &oc);
        if (oc.kind == RUN_OK) break;
        /* elastic: a lost node is a change of membership, restarted as one */
        int restartable =
            outcome_restartable(&oc) ||
            (o->max_nodes && (oc.kind == RUN_NODE_LOST || oc.kind == RUN_NODE_JOINED));
        if (restartable && J->gen < o->max_restarts && !J->got_signal) {
            say("%s", outcome_text(&oc));
            say("restarting all workers on all nodes (restart %d of at most %d)", J->gen + 1,
                o->max_restarts);
            if (o->max_nodes && (rc = elastic_rejoin(J)) != 0) break;
            continue;
        }
        if (restartable || !J->got_signal)
            say("job failed%s. %s", restartable && o->max_restarts ? " after all restarts" : "",
                outcome_text(&oc));
        trace_hint(J);
        rc = outcome_exit_code(J, &oc);
    }
    outcome_clear(&oc);
    return rc;
}

int main(int argc, char **argv) {
    t_start = ddpc__now();
    opts o;
    run_parse_args(argc, argv, &o);
    job J;
    memset(&J, 0, sizeof J);
    J.o = &o;
    J.sfd = -1;
    if (gethostname(J.host, sizeof J.host) != 0) snprintf(J.host, sizeof J.host, "?");
    J.host[sizeof J.host - 1] = 0;
    if (o.standalone) { /* the store takes a free port on loopback */
        snprintf(o.master_addr, sizeof o.master_addr, "127.0.0.1");
        o.master_port = 0;
    }
    if (isatty(2)) { /* rank 0's progress bar, as tqdm's under torchrun */
        console_progress_on();
        J.progress_env = !ddpc__env_isset(DDPC_ENV_PROGRESS);
    }
    int rc = 1;
    if (build_exec_argv(&J) != 0 || job_token(&J) != 0 || setup_signals(&J) != 0 ||
        alloc_job(&J) != 0)
        goto done;
    rc = run_job(&J);
    signal_workers(&J, SIGKILL);
    reap(&J);
    finish_job(&J);
    reap_orphans();
    ddpc_store_destroy(J.store);
    ddpc_store_server_destroy(J.server);
done:
    free_job(&J);
    DDPC_INFO(RUN, "done in %.3f s, exit %d", ddpc__now() - t_start, rc);
    return rc;
}
