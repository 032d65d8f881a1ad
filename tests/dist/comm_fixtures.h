/*
 * comm_fixtures.h — what the communicator tests share (test_comm_*.c):
 * ranks' communicators made from the environment with short timeouts
 * (env_comm), checks that same-host peers use the transport asked for and
 * leave no shared-memory segment behind, logs captured to a file, allreduce
 * and every-collective smoke bodies, a store served by a process of its
 * own, and the bad-environment checks.
 *
 * Functions are static inline: each test file is its own program and uses
 * a part of them.
 */
#ifndef DDPC_TEST_COMM_FIXTURES_H
#define DDPC_TEST_COMM_FIXTURES_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/sock.h"
#include "comm/comm.h"
#include "test.h"

static int g_port __attribute__((unused));

/* Each rank's pid, in memory shared with the test process (NULL: not kept). */
static pid_t *g_pids __attribute__((unused));

static inline void pids_init(void) {
    g_pids =
        mmap(NULL, sizeof(pid_t) * 256, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(g_pids != MAP_FAILED);
    memset(g_pids, 0, sizeof(pid_t) * 256);
}

/* Entries in /dev/shm named like a segment of process pid (or of any
 * process: pid 0) -- "ddpc-<pid>-<random>". */
static inline int shm_segments(pid_t pid) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    char pre[32];
    if (pid)
        snprintf(pre, sizeof pre, "ddpc-%d-", (int)pid);
    else
        snprintf(pre, sizeof pre, "ddpc");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, pre, strlen(pre))) n++;
    closedir(d);
    return n;
}

/* After a run: no rank left a segment behind (killed ones included). */
static inline void check_no_segments_left(int world) {
    for (int r = 0; r < world && g_pids; r++)
        if (g_pids[r])
            CHECK_MSG(shm_segments(g_pids[r]) == 0, "rank %d (pid %d) left a segment in /dev/shm",
                      r, (int)g_pids[r]);
}

static inline int shm_wanted(void) {
    const char *v = getenv("DDPC_SHM");
    return !(v && !strcmp(v, "0"));
}

/* Peers in the same block of per_node ranks must use same_host, the others
 * tcp. */
static inline void check_transports(ddpc_comm *c, const char *same_host, int per_node) {
    int me = ddpc_comm_rank(c);
    for (int p = 0; p < ddpc_comm_size(c); p++) {
        const char *want = p == me ? "self" : p / per_node == me / per_node ? same_host : "tcp";
        const char *got = ddpc__peer_transport(c, p);
        CHECK_MSG(got && !strcmp(got, want), "rank %d talks to rank %d over %s, want %s", me, p,
                  got ? got : "(null)", want);
    }
}

/* A file this rank's stderr goes to until slurp_log reads it back and
 * restores stderr (so that a failed check on the log is seen). */
static int g_stderr __attribute__((unused)) = -1;

static inline void log_to_file(const char *tag, int rank) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/ddpc-test-%s-%d-%d.log", tag, (int)getppid(), rank);
    fflush(stderr);
    g_stderr = dup(2);
    CHECK(freopen(path, "w", stderr) != NULL);
}

static inline const char *slurp_log(const char *tag, int rank) {
    static char buf[65536];
    char path[128];
    fflush(stderr);
    snprintf(path, sizeof path, "/tmp/ddpc-test-%s-%d-%d.log", tag, (int)getppid(), rank);
    FILE *r = fopen(path, "r");
    CHECK(r != NULL);
    size_t n = fread(buf, 1, sizeof buf - 1, r);
    buf[n] = '\0';
    fclose(r);
    unlink(path);
    if (g_stderr >= 0) dup2(g_stderr, 2);
    return buf;
}

/* Sets the rank's environment (short timeouts) and creates the communicator. */
static inline ddpc_comm *env_comm_unchecked(int rank, int world) {
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    if (g_pids) g_pids[rank] = getpid();
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    CHECK_EQ(ddpc_comm_size(c), world);
    return c;
}

/* env_comm_unchecked, then checks that same-host peers use shared memory
 * unless DDPC_SHM=0, and that the segments it made are gone from /dev/shm
 * already. */
static inline ddpc_comm *env_comm(int rank, int world) {
    ddpc_comm *c = env_comm_unchecked(rank, world);
    check_transports(c, shm_wanted() ? "shm" : "tcp", world);
    CHECK_EQ(shm_segments(getpid()), 0);
    return c;
}

/* Allreduces at every interesting count (up to 1<<20 floats, larger than
 * any shared-memory ring in these tests), sum out of place, max in place. */
static inline void allreduce_checks(ddpc_comm *c, int rank, int world) {
    size_t counts[] = { 0, 1, 7, 4097, (size_t)world - 1, 100000, 1u << 20 };
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        float *x = malloc(sizeof(float) * (n + 1)), *y = malloc(sizeof(float) * (n + 1));
        for (size_t i = 0; i < n; i++) x[i] = (float)(rank + 1) * (float)(i % 13);
        CHECK_OK(ddpc_allreduce(c, x, y, n, DDPC_FLOAT32, DDPC_SUM));
        float tot = (float)(world * (world + 1) / 2);
        for (size_t i = 0; i < n; i++)
            CHECK_MSG(y[i] == tot * (float)(i % 13), "count %zu: y[%zu]=%g want %g", n, i, y[i],
                      tot * (float)(i % 13));
        /* in place, max */
        CHECK_OK(ddpc_allreduce(c, x, x, n, DDPC_FLOAT32, DDPC_MAX));
        for (size_t i = 0; i < n; i++) CHECK(x[i] == (float)world * (float)(i % 13));
        free(x);
        free(y);
    }
}

/* Small allreduces (checked) until rank 0's log (log_to_file(tag, 0)) holds
 * needle times times, at most 500; whether it did. */
static inline int collectives_until_logged(ddpc_comm *c, const char *tag, const char *needle,
                                           int times) {
    int rank = ddpc_comm_rank(c), world = ddpc_comm_size(c), done = 0;
    for (int it = 0; it < 500 && !done; it++) {
        int32_t x[2] = { rank + it, 0 }, y[2] = { 0, 0 };
        if (rank == 0) {
            char path[128], buf[8192];
            fflush(stderr);
            snprintf(path, sizeof path, "/tmp/ddpc-test-%s-%d-0.log", tag, (int)getppid());
            FILE *f = fopen(path, "r");
            size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
            buf[n] = '\0';
            if (f) fclose(f);
            const char *u = buf;
            int seen = 0;
            while (seen < times && (u = strstr(u, needle))) seen++, u++;
            x[1] = seen == times;
        }
        CHECK_OK(ddpc_allreduce(c, x, y, 2, DDPC_INT32, DDPC_SUM));
        CHECK_EQ(y[0], world * (world - 1) / 2 + world * it);
        done = y[1] > 0;
        if (!done) ddpc__sleep(0.01);
    }
    return done;
}

/* Allreduces of n floats in which rank 2 kills itself in the middle of its
 * 4th: every other rank's call fails within 5 s naming it, and later calls
 * at once. Destroys c. */
static inline void rank2_killed_checks(ddpc_comm *c, int rank, size_t n) {
    float *x = calloc(n, sizeof(float));
    for (int it = 0; it < 1000; it++) {
        if (rank == 2 && it == 3) {
            ddpc_work *w;
            CHECK_OK(ddpc_allreduce_async(c, x, x, n, DDPC_FLOAT32, DDPC_SUM, &w));
            ddpc__sleep(0.05); /* in the middle of it */
            raise(SIGKILL);
        }
        double t0 = ddpc__now();
        ddpc_status s = ddpc_allreduce(c, x, x, n, DDPC_FLOAT32, DDPC_SUM);
        if (s == DDPC_OK) continue;
        double took = ddpc__now() - t0;
        CHECK_MSG(took < 5.0, "rank %d noticed after %.2f s", rank, took);
        CHECK_CONTAINS(ddpc_last_error(), "lost rank 2");
        CHECK_CONTAINS(ddpc_comm_last_error(c), "lost rank 2");
        CHECK(s == DDPC_ERR_PEER_LOST);
        /* later calls fail at once, with the first error */
        CHECK(ddpc_barrier(c) == DDPC_ERR_PEER_LOST);
        CHECK_OK(ddpc_comm_destroy(c));
        free(x);
        return;
    }
    CHECK_MSG(0, "rank %d never saw rank 2 die", rank);
}

/* world ranks of fn, which kills rank 2 (rank2_killed_checks): it died,
 * every other rank passed, no segment was left behind. */
static inline void run_rank2_killed(int world, t_rank_fn fn, void *arg) {
    g_port = t_free_port();
    pids_init();
    int st[16];
    t_run_ranks_status(world, 30, fn, arg, st);
    check_no_segments_left(world);
    for (int r = 0; r < world; r++) {
        if (r == 2) {
            CHECK(st[r] != -1 && WIFSIGNALED(st[r]));
            continue;
        }
        CHECK_MSG(st[r] != -1, "rank %d hung", r);
        CHECK_MSG(WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d failed", r);
    }
}

static inline void allreduce_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
}

static inline void run_world(int world, t_rank_fn fn, double secs) {
    g_port = t_free_port();
    pids_init();
    t_run_ranks(world, secs, fn, NULL);
    check_no_segments_left(world);
}

/* Value rank r contributes at index i (exact in int32 and float32). */
static inline int32_t val(int r, size_t i) { return (int32_t)((r + 1) * 3 + (int)(i % 101)); }

static inline void all_colls_body(int rank, int world, void *arg) {
    const char *algo = arg;
    if (algo) setenv("DDPC_ALGO", algo, 1);
    setenv("DDPC_CHUNK", "8192", 1); /* many chunks even for mid sizes */
    ddpc_comm *c = env_comm(rank, world);
    size_t counts[] = { 1, 7, 4097, (size_t)world - 1, 70000 };
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        if (n == 0) continue;
        size_t W = (size_t)world;
        int32_t *x = malloc(4 * n * W), *y = malloc(4 * n * W), *z = malloc(4 * n * W);
        for (size_t i = 0; i < n * W; i++) x[i] = val(rank, i);
        /* allreduce sum, int32 */
        CHECK_OK(ddpc_allreduce(c, x, y, n, DDPC_INT32, DDPC_SUM));
        for (size_t i = 0; i < n; i++) {
            int32_t want = 0;
            for (int r = 0; r < world; r++) want += val(r, i);
            CHECK_MSG(y[i] == want, "allreduce n=%zu [%zu] %d want %d", n, i, y[i], want);
        }
        /* broadcast from the last rank, in place */
        int root = world - 1;
        memcpy(y, x, 4 * n);
        CHECK_OK(ddpc_broadcast(c, y, y, n, DDPC_INT32, root));
        for (size_t i = 0; i < n; i++) CHECK_EQ(y[i], val(root, i));
        /* reduce (min) to rank world/2 */
        root = world / 2;
        for (size_t i = 0; i < n; i++) z[i] = -7;
        CHECK_OK(ddpc_reduce(c, x, z, n, DDPC_INT32, DDPC_MIN, root));
        for (size_t i = 0; i < n; i++) CHECK_EQ(z[i], rank == root ? val(0, i) : -7);
        /* allgather */
        CHECK_OK(ddpc_allgather(c, x, y, n, DDPC_INT32));
        for (int r = 0; r < world; r++)
            for (size_t i = 0; i < n; i++) CHECK_EQ(y[(size_t)r * n + i], val(r, i));
        /* reduce_scatter sum over n*W */
        CHECK_OK(ddpc_reduce_scatter(c, x, z, n, DDPC_INT32, DDPC_SUM));
        for (size_t i = 0; i < n; i++) {
            int32_t want = 0;
            for (int r = 0; r < world; r++) want += val(r, (size_t)rank * n + i);
            CHECK_EQ(z[i], want);
        }
        /* gather to 0 */
        CHECK_OK(ddpc_gather(c, x, y, n, DDPC_INT32, 0));
        if (rank == 0)
            for (int r = 0; r < world; r++)
                for (size_t i = 0; i < n; i++) CHECK_EQ(y[(size_t)r * n + i], val(r, i));
        /* scatter from world-1: rank j gets block j of root's x */
        CHECK_OK(ddpc_scatter(c, x, z, n, DDPC_INT32, world - 1));
        for (size_t i = 0; i < n; i++) CHECK_EQ(z[i], val(world - 1, (size_t)rank * n + i));
        /* alltoall: block j of rank i lands in block i of rank j */
        CHECK_OK(ddpc_alltoall(c, x, y, n, DDPC_INT32));
        for (int r = 0; r < world; r++)
            for (size_t i = 0; i < n; i++)
                CHECK_EQ(y[(size_t)r * n + i], val(r, (size_t)rank * n + i));
        /* float16 avg, bfloat16 sum: one rounding of the float32 result */
        uint16_t *h = malloc(2 * n), *hb = malloc(2 * n);
        for (size_t i = 0; i < n; i++) h[i] = ddpc_float_to_half((float)val(rank, i) / 8);
        CHECK_OK(ddpc_allreduce(c, h, hb, n, DDPC_FLOAT16, DDPC_AVG));
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (int r = 0; r < world; r++)
                s += ddpc_half_to_float(ddpc_float_to_half((float)val(r, i) / 8));
            CHECK_EQ(hb[i], ddpc_float_to_half(s / (float)world));
        }
        free(h);
        free(hb);
        CHECK_OK(ddpc_barrier(c));
        free(x);
        free(y);
        free(z);
    }
    CHECK_OK(ddpc_comm_destroy(c));
}

static inline void run_all(int world, const char *algo) {
    g_port = t_free_port();
    pids_init();
    t_run_ranks(world, 100, all_colls_body, (void *)algo);
    check_no_segments_left(world);
}

static inline void sum_check(ddpc_comm *c, int expect_sum) {
    int32_t x = ddpc_comm_rank(c), y = -1;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, expect_sum);
}

/* A launcher: a process of its own (ranks forked beside a running server
 * thread would find its memory lost) serving a store at g_port until *down
 * is closed. Returns its pid. */
static inline pid_t store_process(int *down_fd) {
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t launcher = fork();
    CHECK(launcher >= 0);
    if (launcher == 0) {
        close(up[0]);
        close(down[1]);
        ddpc_store_server *srv = NULL;
        int port = ddpc_store_server_create("127.0.0.1", 0, &srv) == DDPC_OK
                       ? ddpc_store_server_port(srv)
                       : -1;
        char b;
        if (write(up[1], &port, sizeof port) == (ssize_t)sizeof port) (void)!read(down[0], &b, 1);
        ddpc_store_server_destroy(srv);
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    CHECK_EQ(read(up[0], &g_port, sizeof g_port), (ssize_t)sizeof g_port);
    CHECK(g_port > 0);
    close(up[0]);
    *down_fd = down[1];
    return launcher;
}

static inline void clear_env(void) {
    const char *v[] = { "RANK",
                        "WORLD_SIZE",
                        "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE",
                        "MASTER_ADDR",
                        "MASTER_PORT",
                        "OMPI_COMM_WORLD_RANK",
                        "OMPI_COMM_WORLD_SIZE",
                        "SLURM_PROCID",
                        "SLURM_NTASKS",
                        "TORCHELASTIC_USE_AGENT_STORE",
                        "TORCHELASTIC_RESTART_COUNT",
                        "DDPC_TIMEOUT",
                        "DDPC_ALGO",
                        "DDPC_SHM_COPY",
                        "DDPC_CONNECT_TIMEOUT",
                        "DDPC_IF_IP",
                        "HCCL_IF_IP",
                        "DDPC_SOCKET_IFNAME",
                        "HCCL_SOCKET_IFNAME" };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) unsetenv(v[i]);
}

/* init_env must fail with want, its message containing needle, quickly. */
static inline void bad_env(ddpc_status want, const char *needle) {
    ddpc_comm *c = (ddpc_comm *)1;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_comm_create_env(&c), want);
    CHECK(c == NULL);
    CHECK(ddpc__now() - t0 < 3.0 * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), needle);
    CHECK(strchr(ddpc_last_error(), '\n') == NULL); /* one line */
}

#endif /* DDPC_TEST_COMM_FIXTURES_H */
