/* test_stall.c — stalls and partitions, explained: a rank frozen with SIGSTOP
 * and a link cut between two network namespaces mid-collective fail every
 * other rank's call within DDPC_TIMEOUT (plus DDPC_STALL_SETTLE), naming
 * the silent peer with both addresses and the collective; the flight
 * recorder's files (on the timeout, on SIGUSR1, on abort) and what
 * ddpc-trace says of them. */
#include <sys/stat.h>

#include "comm_fixtures.h"

static double g_timeout = 2.0, g_settle = 1.0;
static char g_master[32];     /* MASTER_ADDR when not loopback */
static const char *g_streams; /* set: each rank its own host, this DDPC_SOCKETS_PER_PEER */

/* Rank env, short timeouts, the flight recorder into the test's directory. */
static ddpc_comm *stall_comm(int rank, int world) {
    char v[32];
    t_set_rank_env(rank, world, g_port);
    if (g_master[0]) setenv("MASTER_ADDR", g_master, 1);
    setenv("DDPC_CONNECT_TIMEOUT", "30", 1);
    snprintf(v, sizeof v, "%g", g_timeout * t_slow());
    setenv("DDPC_TIMEOUT", v, 1);
    snprintf(v, sizeof v, "%g", g_settle * t_slow());
    setenv("DDPC_STALL_SETTLE", v, 1);
    setenv("DDPC_TRACE_DIR", t_tmp_dir(), 1);
    if (g_streams) {
        snprintf(v, sizeof v, "stall-h%d", rank);
        setenv("DDPC_HOST_ID", v, 1);
        setenv("DDPC_SOCKETS_PER_PEER", g_streams, 1);
    }
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    return c;
}

/* The text of file path (up to 64 KiB; "" when missing). */
static const char *slurp(const char *path) {
    static char buf[65536];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Waits (at most secs) for rank r's flight record to exist. */
static int wait_flight(int r, double secs) {
    char name[32];
    snprintf(name, sizeof name, "flight-%d.txt", r);
    const char *p = t_tmp_path(name);
    double until = ddpc__now() + secs * t_slow();
    struct stat st;
    while (stat(p, &st) != 0 && ddpc__now() < until) ddpc__sleep(0.02);
    return stat(p, &st) == 0;
}

/* ------------------------------------------------------------ SIGSTOP */

/* Allreduces of n floats until one fails: rank 2 stops itself (SIGSTOP)
 * in the middle of #3 and, once let go, fails too, and destroys c (DDPC_OK
 * returned; on another rank a failed check). Others: the failed call's
 * status, in *took how long it took, *limit how long it may (DDPC_TIMEOUT
 * + the settle). */
static ddpc_status allreduce_until_stall(ddpc_comm *c, int rank, size_t n, double *took,
                                         double *limit) {
    float *x = calloc(n, sizeof(float));
    ddpc_status s = DDPC_OK;
    *took = 0;
    *limit = (g_timeout + g_settle + 2.0) * t_slow();
    for (int it = 0; it < 100 && s == DDPC_OK; it++) {
        if (rank == 2 && it == 3) {
            ddpc_work *w;
            CHECK_OK(ddpc_allreduce_async(c, x, x, n, DDPC_FLOAT32, DDPC_SUM, &w));
            ddpc__sleep(0.01); /* in the middle of it */
            raise(SIGSTOP);
            /* continued by rank 0: the others gave up; so does this rank */
            CHECK(ddpc_work_wait(w, -1) != DDPC_OK || ddpc_barrier(c) != DDPC_OK);
            ddpc_work_destroy(w);
            break;
        }
        double t0 = ddpc__now();
        s = ddpc_allreduce(c, x, x, n, DDPC_FLOAT32, DDPC_SUM);
        *took = ddpc__now() - t0;
    }
    free(x);
    if (s == DDPC_OK) {
        ddpc_comm_destroy(c);
        CHECK_MSG(rank == 2, "rank %d never saw rank 2 stall", rank);
    }
    return s;
}

/* Rank 2 stops itself in the middle of allreduce #3; the others must fail
 * with DDPC_ERR_TIMEOUT naming rank 2, its address and the collective.
 * Rank 0 then runs ddpc-trace on the records (rank 2 left none: it is
 * frozen) and lets rank 2 go on, which then fails too. */
static void sigstop_body(int rank, int world, void *arg) {
    g_pids[rank] = getpid();
    ddpc_comm *c = stall_comm(rank, world);
    double took, limit;
    ddpc_status s = allreduce_until_stall(c, rank, 1u << 20, &took, &limit);
    if (s == DDPC_OK) return; /* rank 2 (c destroyed) */
    const char *e = ddpc_last_error();
    CHECK_MSG(s == DDPC_ERR_TIMEOUT, "rank %d: %s (%s)", rank, ddpc_status_str(s), e);
    CHECK_MSG(took < limit, "rank %d failed after %.2f s (limit %.1f): %s", rank, took, limit, e);
    CHECK_CONTAINS(e, "rank 2 is silent");
    CHECK_CONTAINS(e, "allreduce(count=1048576, float32, sum) #");
    char want[96];
    snprintf(want, sizeof want, "local rank %d 127.0.0.1:", rank);
    CHECK_CONTAINS(e, want);
    CHECK_CONTAINS(e, "remote rank 2 127.0.0.1:");
    CHECK_CONTAINS(e, "DDPC_TIMEOUT");
    CHECK_CONTAINS(ddpc_comm_last_error(c), "rank 2 is silent");
    /* this rank's flight record: written at the timeout */
    CHECK(wait_flight(rank, 5));
    if (rank == 0) {
        CHECK_MSG(wait_flight(1, 10) && wait_flight(3, 10), "ranks 1 and 3 wrote no record");
        char out[8192];
        int rc =
            t_run_cmdf(20 * t_slow(), out, sizeof out, "%s %s", t_bin("ddpc-trace"), t_tmp_dir());
        kill(g_pids[2], SIGCONT); /* first: a failed check below must not leave it stopped */
        CHECK_MSG(rc == 0, "ddpc-trace exit %d: %s", rc, out);
        fprintf(stderr, "ddpc-trace says:\n%s", out);
        CHECK_CONTAINS(out, "4 ranks");
        CHECK_CONTAINS(out, "rank 2 left no record");
        CHECK_CONTAINS(out, "Silent: rank 2 (named by ranks 0, 1, 3)");
        CHECK_CONTAINS(out, "allreduce(count=1048576, float32, sum)");
    }
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_sigstop(void) {
    g_port = t_free_port();
    t_tmp_dir(); /* made here: the ranks share it */
    pids_init();
    int st[4];
    t_run_ranks_status(4, 60, sigstop_body, NULL, st);
    for (int r = 0; r < 4; r++)
        CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0,
                  "rank %d failed or hung (status %d)", r, st[r]);
    t_tmp_remove();
}

TEST_T(stall_sigstop_names_silent_rank, 90) { run_sigstop(); }
TEST_T(stall_sigstop_names_silent_rank_tcp, 90) {
    setenv("DDPC_SHM", "0", 1);
    run_sigstop();
}
/* each rank a host of its own, 4 connections per pair: the notices still
 * travel (on a link's first connection) and name the silent rank */
TEST_T(stall_sigstop_names_silent_rank_4_sockets_per_peer, 90) {
    g_streams = "4";
    run_sigstop();
}

/* Two ranks: the one waiting names the other at once (no settle needed). */
static void pair_body(int rank, int world, void *arg) {
    g_pids[rank] = getpid();
    ddpc_comm *c = stall_comm(rank, world);
    int32_t x = 1, y = 0;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    if (rank == 1) {
        raise(SIGSTOP);
        ddpc_comm_destroy(c);
        return;
    }
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_broadcast(c, &x, &y, 1, DDPC_INT32, 1), DDPC_ERR_TIMEOUT);
    CHECK(ddpc__now() - t0 < (g_timeout + 2.0) * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), "broadcast(count=1, int32, root=1) #1");
    CHECK_CONTAINS(ddpc_last_error(), "rank 1 is silent");
    CHECK_CONTAINS(ddpc_last_error(), "local rank 0 127.0.0.1:");
    CHECK_CONTAINS(ddpc_last_error(), "remote rank 1 127.0.0.1:");
    kill(g_pids[1], SIGCONT);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(stall_pair_names_peer, 40) {
    g_port = t_free_port();
    t_tmp_dir(); /* made here: the ranks share it */
    pids_init();
    t_run_ranks(2, 30, pair_body, NULL);
    t_tmp_remove();
}

/* ------------------------------------------------------------ lazy links */

/* 24 ranks connected on first use (DDPC_LAZY_CONNECT=1), an allreduce of
 * algorithm arg (ring: a rank down the ring waits on its left neighbour,
 * which waits on its own; rhd: on partners at distances 1, 2, 4, ...):
 * rank 2 stops itself in the middle of allreduce #3. The chain of waits
 * runs through ranks a rank has no connection to, and every live rank must
 * still name rank 2. Each writes what it named to the test's directory;
 * rank 0 lets rank 2 go on once all have. */
static void lazy_body(int rank, int world, void *arg) {
    g_pids[rank] = getpid();
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    setenv("DDPC_ALGO", arg, 1);
    setenv("DDPC_SHM_BYTES", "65536", 1);
    ddpc_comm *c = stall_comm(rank, world);
    CHECK_EQ(c->lazy, 1);
    double took, limit;
    ddpc_status s = allreduce_until_stall(c, rank, 1u << 16, &took, &limit);
    if (s == DDPC_OK) return; /* rank 2 (c destroyed) */
    char e[1024], name[32];
    snprintf(e, sizeof e, "%s", ddpc_last_error());
    snprintf(name, sizeof name, "named-%d.txt", rank);
    FILE *f = fopen(t_tmp_path(name), "w");
    CHECK(f != NULL);
    fprintf(f, "%s\n", e);
    fclose(f);
    if (rank == 0) { /* every live rank has said whom it names: let rank 2 go */
        double until = ddpc__now() + 30 * t_slow();
        for (int r = 1; r < world; r++) {
            snprintf(name, sizeof name, "named-%d.txt", r);
            struct stat st;
            while (r != 2 && stat(t_tmp_path(name), &st) != 0 && ddpc__now() < until)
                ddpc__sleep(0.02);
        }
        kill(g_pids[2], SIGCONT);
    }
    CHECK_MSG(s == DDPC_ERR_TIMEOUT, "rank %d: %s (%s)", rank, ddpc_status_str(s), e);
    CHECK_MSG(took < limit, "rank %d failed after %.2f s (limit %.1f): %s", rank, took, limit, e);
    CHECK_MSG(strstr(e, "rank 2 is silent") != NULL, "rank %d named another: %s", rank, e);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_lazy(const char *algo) {
    g_port = t_free_port();
    t_tmp_dir(); /* made here: the ranks share it */
    pids_init();
    int st[24];
    t_run_ranks_status(24, 100, lazy_body, (void *)algo, st);
    for (int r = 0; r < 24; r++)
        CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0,
                  "rank %d failed or hung (status %d)", r, st[r]);
    t_tmp_remove();
}

TEST_T(stall_lazy_24_ranks_name_the_same_silent_rank, 120) { run_lazy("ring"); }
TEST_T(stall_lazy_24_ranks_name_the_same_silent_rank_rhd, 120) { run_lazy("rhd"); }

/* ------------------------------------------------------------ a link cut */

static char g_ns[2][32], g_veth[32];
static const int g_subnet = 23;

/* Ranks 0, 1 in namespace A (198.18.23.1), 2, 3 in B (.2); rank 0 takes
 * A's end of the veth pair down in the middle of allreduce #3. Each side
 * must name a rank of the other side, with its address. */
static void cut_body(int rank, int world, void *arg) {
    char path[96];
    snprintf(path, sizeof path, "/var/run/netns/%s", g_ns[rank / 2]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK_MSG(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "entering %s: %s", path, strerror(errno));
    close(fd);
    ddpc_comm *c = stall_comm(rank, world);
    size_t n = 1u << 20;
    float *x = calloc(n, sizeof(float));
    for (int it = 0; it < 100; it++) {
        ddpc_work *w = NULL;
        double t0 = ddpc__now();
        ddpc_status s;
        if (rank == 0 && it == 3) {
            CHECK_OK(ddpc_allreduce_async(c, x, x, n, DDPC_FLOAT32, DDPC_SUM, &w));
            char cmd[160], out[512];
            snprintf(cmd, sizeof cmd, "ip -n %s link set %s down 2>&1", g_ns[0], g_veth);
            CHECK_MSG(t_run_cmd(cmd, 10, out, sizeof out) == 0, "%s: %s", cmd, out);
            s = ddpc_work_wait(w, -1);
            ddpc_work_destroy(w);
        } else {
            s = ddpc_allreduce(c, x, x, n, DDPC_FLOAT32, DDPC_SUM);
        }
        if (s == DDPC_OK) continue;
        double took = ddpc__now() - t0, limit = (g_timeout + g_settle + 3.0) * t_slow();
        const char *e = ddpc_last_error();
        CHECK_MSG(s == DDPC_ERR_TIMEOUT, "rank %d: %s (%s)", rank, ddpc_status_str(s), e);
        CHECK_MSG(took < limit, "rank %d failed after %.2f s: %s", rank, took, e);
        CHECK_CONTAINS(e, "allreduce(count=1048576, float32, sum) #");
        char mine[64], theirs[64];
        snprintf(mine, sizeof mine, "local rank %d 198.18.%d.%d:", rank, g_subnet, 1 + rank / 2);
        snprintf(theirs, sizeof theirs, " 198.18.%d.%d:", g_subnet, 2 - rank / 2);
        CHECK_CONTAINS(e, mine);
        CHECK_CONTAINS(e, theirs);
        /* the ring's cut links are 1 -> 2 and 3 -> 0: A waits on 3, B on 1 */
        CHECK_CONTAINS(e, rank < 2 ? "remote rank 3" : "remote rank 1");
        CHECK_CONTAINS(e, rank < 2 ? "rank 3 is silent" : "rank 1 is silent");
        free(x);
        CHECK_OK(ddpc_comm_destroy(c));
        return;
    }
    CHECK_MSG(0, "rank %d never saw the cut", rank);
}

TEST_T(stall_link_cut_between_namespaces, 90) {
    t_netns_pair("St", g_subnet, g_ns[0], g_ns[1]);
    snprintf(g_veth, sizeof g_veth, "dSta%d", (int)getpid() % 100000);
    snprintf(g_master, sizeof g_master, "198.18.%d.1", g_subnet);
    g_port = t_free_port();
    t_tmp_dir();                    /* made here: the ranks share it */
    setenv("DDPC_ALGO", "ring", 1); /* the cut links: 1 -> 2 and 3 -> 0 */
    int st[4];
    t_run_ranks_status(4, 60, cut_body, NULL, st);
    t_netns_del(g_ns[0], g_ns[1]);
    for (int r = 0; r < 4; r++)
        CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0,
                  "rank %d failed or hung (status %d)", r, st[r]);
    t_tmp_remove();
}

/* ------------------------------------------------------------ the recorder */

/* SIGUSR1 writes the record of a healthy job: the last DDPC_TRACE_BUFFER
 * operations, each done, with seq, kind, dtype, count, root and times. */
static void sigusr1_body(int rank, int world, void *arg) {
    setenv("DDPC_TRACE_BUFFER", "4", 1);
    ddpc_comm *c = stall_comm(rank, world);
    int32_t x[8] = { 0 }, y[8];
    for (int i = 0; i < 5; i++) CHECK_OK(ddpc_allreduce(c, x, y, 8, DDPC_INT32, DDPC_SUM));
    CHECK_OK(ddpc_broadcast(c, x, x, 3, DDPC_INT32, 1));
    ddpc_work *w;
    CHECK_OK(ddpc_allreduce_async(c, x, y, 2, DDPC_FLOAT32, DDPC_MAX, &w));
    CHECK_OK(ddpc_work_wait(w, -1));
    ddpc_work_destroy(w);
    raise(SIGUSR1); /* the recorder's thread writes; this process lives on */
    CHECK(wait_flight(rank, 5));
    char name[32];
    snprintf(name, sizeof name, "flight-%d.txt", rank);
    ddpc__sleep(0.1); /* the rename is atomic; give the thread time to finish logging */
    const char *f = slurp(t_tmp_path(name));
    CHECK_CONTAINS(f, "ddpc-flight 1\n");
    CHECK_CONTAINS(f, "reason=SIGUSR1");
    char want[160];
    snprintf(want, sizeof want, "comm id=ddpc/comm0/ rank=%d size=2 ", rank);
    CHECK_CONTAINS(f, want);
    CHECK_CONTAINS(f, "recorded=7\n");
    /* 4 kept: allreduce #3, #4, the broadcast #5, the async allreduce #6 */
    CHECK(!strstr(f, " seq=2 "));
    CHECK_CONTAINS(f, "seq=4 kind=allreduce dtype=int32 count=8 op=sum root=-1 algo=");
    CHECK_CONTAINS(f, "seq=5 kind=broadcast dtype=int32 count=3 op=");
    CHECK_CONTAINS(f, " root=1 algo=tree state=done status=ok");
    CHECK_CONTAINS(f, "seq=6 kind=allreduce dtype=float32 count=2 op=max");
    const char *q = strstr(f, "seq=6 ");
    CHECK(q && strstr(q, "queued=") && !strstr(q, "queued=0.000000 "));
    int ops = 0;
    for (const char *p = f; (p = strstr(p, "\nop id=")); p++) ops++;
    CHECK_EQ(ops, 4);
    snprintf(want, sizeof want, "peer rank=%d addr=127.0.0.1:", 1 - rank);
    CHECK_CONTAINS(f, want);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(recorder_dumps_on_sigusr1, 40) {
    g_port = t_free_port();
    t_tmp_dir(); /* made here: the ranks share it */
    t_run_ranks(2, 30, sigusr1_body, NULL);
    t_tmp_remove();
}

/* An abort writes the record too, and says so. */
static void abort_body(int rank, int world, void *arg) {
    ddpc_comm *c = stall_comm(rank, world);
    CHECK_OK(ddpc_barrier(c));
    if (rank == 0) {
        CHECK_OK(ddpc_comm_abort(c));
        CHECK(wait_flight(0, 5));
        const char *f = slurp(t_tmp_path("flight-0.txt"));
        CHECK_CONTAINS(f, "reason=rank 0: the communicator was aborted");
        CHECK_CONTAINS(f, "kind=barrier");
    } else {
        ddpc_status s = ddpc_barrier(c);
        CHECK(s != DDPC_OK);
    }
    ddpc_comm_destroy(c);
}

TEST_T(recorder_dumps_on_abort, 40) {
    g_port = t_free_port();
    t_tmp_dir(); /* made here: the ranks share it */
    t_run_ranks(2, 30, abort_body, NULL);
    t_tmp_remove();
}

TEST_T(recorder_bad_settings, 20) {
    clear_env();
    t_set_rank_env(0, 1, t_free_port());
    setenv("DDPC_TRACE_BUFFER", "-5", 1);
    bad_env(DDPC_ERR_ENV, "DDPC_TRACE_BUFFER='-5'");
    setenv("DDPC_TRACE_BUFFER", "10", 1);
    setenv("DDPC_STALL_SETTLE", "soon", 1);
    bad_env(DDPC_ERR_ENV, "DDPC_STALL_SETTLE='soon'");
}

/* ------------------------------------------------------------ under ddpc-run */

/* This program is also ddpc-run's worker in stall_under_ddpc_run (with
 * DDPC_STALL_WORKER=1): allreduces until rank 2 stops itself; the others
 * print their error and exit 1. Runs before the test harness's main. */
__attribute__((constructor(500))) static void stall_worker(void) {
    if (!getenv("DDPC_STALL_WORKER")) return;
    ddpc_comm *c = NULL;
    if (ddpc_comm_create_env(&c) != DDPC_OK) {
        fprintf(stderr, "worker: %s\n", ddpc_last_error());
        _exit(3);
    }
    float x[4096] = { 0 };
    for (int it = 0; it < 1000; it++) {
        if (ddpc_comm_rank(c) == 2 && it == 3) raise(SIGSTOP);
        if (ddpc_allreduce(c, x, x, 4096, DDPC_FLOAT32, DDPC_SUM) != DDPC_OK) {
            fprintf(stderr, "worker: %s\n", ddpc_last_error());
            _exit(1);
        }
    }
    ddpc_comm_destroy(c);
    _exit(0);
}

TEST_T(stall_under_ddpc_run_summary_and_records, 90) {
    char self[4096], out[1 << 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = '\0';
    const char *d = t_tmp_dir();
    int rc = t_run_cmdf(60 * t_slow(), out, sizeof out,
                        "DDPC_STALL_WORKER=1 DDPC_TIMEOUT=%g DDPC_STALL_SETTLE=%g "
                        "DDPC_KILL_GRACE=1 %s --nproc-per-node=4 --standalone --log-dir=%s "
                        "--run-id=stall --max-restarts=0 %s 2>&1",
                        g_timeout * t_slow(), g_settle * t_slow(), t_bin("ddpc-run"), d, self);
    CHECK_MSG(rc != 0 && rc != -1, "ddpc-run exit %d: %s", rc, out);
    /* the summary names the silent rank and where the records are */
    CHECK_CONTAINS(out, "job failed");
    CHECK_CONTAINS(out, "rank 2 is silent");
    CHECK_CONTAINS(out, "remote rank 2 127.0.0.1:");
    char want[4200];
    snprintf(want, sizeof want, "ranks wrote a flight record in %s/stall/attempt_0", d);
    CHECK_CONTAINS(out, want);
    snprintf(want, sizeof want, "%s/stall/attempt_0", d);
    rc = t_run_cmdf(20 * t_slow(), out, sizeof out, "%s %s", t_bin("ddpc-trace"), want);
    CHECK_MSG(rc == 0, "ddpc-trace exit %d: %s", rc, out);
    CHECK_CONTAINS(out, "4 ranks, records from 3 (rank 2 left no record");
    CHECK_CONTAINS(out, "Silent: rank 2");
    t_run_cmdf(10, out, sizeof out, "rm -rf %s/stall", d);
    t_tmp_remove();
}
