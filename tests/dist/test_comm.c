/* test_comm.c — communicators: bootstrap (env, URL, unique id), queries,
 * split, async ordering, abort, timeouts, a killed rank, bad environments,
 * mismatches, interface choice; plus smoke tests of each collective.
 * Ranks of one host use shared memory unless DDPC_SHM=0: every communicator
 * made by env_comm checks that its peers use the transport the environment
 * asks for and that no segment of its own is left in /dev/shm; the shm
 * section checks fallbacks, small rings and namespace "nodes". */
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

static int g_port;

/* ------------------------------------------------------------ shm helpers */

/* Each rank's pid, in memory shared with the test process (NULL: not kept). */
static pid_t *g_pids;

static void pids_init(void) {
    g_pids = mmap(NULL, sizeof(pid_t) * 256, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(g_pids != MAP_FAILED);
    memset(g_pids, 0, sizeof(pid_t) * 256);
}

/* Entries in /dev/shm named like a segment of process pid (or of any
 * process: pid 0) -- "ddpc-<pid>-<random>". */
static int shm_segments(pid_t pid) {
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    char pre[32];
    if (pid) snprintf(pre, sizeof pre, "ddpc-%d-", (int)pid);
    else snprintf(pre, sizeof pre, "ddpc");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, pre, strlen(pre))) n++;
    closedir(d);
    return n;
}

/* After a run: no rank left a segment behind (killed ones included). */
static void check_no_segments_left(int world) {
    for (int r = 0; r < world && g_pids; r++)
        if (g_pids[r]) CHECK_MSG(shm_segments(g_pids[r]) == 0, "rank %d (pid %d) left a segment in /dev/shm", r, (int)g_pids[r]);
}

static int shm_wanted(void) {
    const char *v = getenv("DDPC_SHM");
    return !(v && !strcmp(v, "0"));
}

/* Peers in the same block of per_node ranks must use same_host, the others
 * tcp. */
static void check_transports(ddpc_comm *c, const char *same_host, int per_node) {
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
static int g_stderr = -1;

static void log_to_file(const char *tag, int rank) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/ddpc-test-%s-%d-%d.log", tag, (int)getppid(), rank);
    fflush(stderr);
    g_stderr = dup(2);
    CHECK(freopen(path, "w", stderr) != NULL);
}

static const char *slurp_log(const char *tag, int rank) {
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

/* Sets the rank's environment (short timeouts) and creates the communicator;
 * checks that same-host peers use shared memory unless DDPC_SHM=0, and that
 * the segments it made are gone from /dev/shm already. */
static ddpc_comm *env_comm(int rank, int world) {
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    if (g_pids) g_pids[rank] = getpid();
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    CHECK_EQ(ddpc_comm_size(c), world);
    check_transports(c, shm_wanted() ? "shm" : "tcp", world);
    CHECK_EQ(shm_segments(getpid()), 0);
    return c;
}

/* ------------------------------------------------------------ allreduce smoke */

/* Allreduces at every interesting count (up to 1<<20 floats, larger than
 * any shared-memory ring in these tests), sum out of place, max in place. */
static void allreduce_checks(ddpc_comm *c, int rank, int world) {
    size_t counts[] = {0, 1, 7, 4097, (size_t)world - 1, 100000, 1u << 20};
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

static void allreduce_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_world(int world, t_rank_fn fn, double secs) {
    g_port = t_free_port();
    pids_init();
    t_run_ranks(world, secs, fn, NULL);
    check_no_segments_left(world);
}

TEST_T(comm_allreduce_w1, 30) { run_world(1, allreduce_body, 25); }
TEST_T(comm_allreduce_w2, 60) { run_world(2, allreduce_body, 55); }
TEST_T(comm_allreduce_w3, 60) { run_world(3, allreduce_body, 55); }
TEST_T(comm_allreduce_w5, 90) { run_world(5, allreduce_body, 85); }

/* ------------------------------------------------------------ every collective */

/* Value rank r contributes at index i (exact in int32 and float32). */
static int32_t val(int r, size_t i) { return (int32_t)((r + 1) * 3 + (int)(i % 101)); }

static void all_colls_body(int rank, int world, void *arg) {
    const char *algo = arg;
    if (algo) setenv("DDPC_ALGO", algo, 1);
    setenv("DDPC_CHUNK", "8192", 1); /* many chunks even for mid sizes */
    ddpc_comm *c = env_comm(rank, world);
    size_t counts[] = {1, 7, 4097, (size_t)world - 1, 70000};
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
            for (size_t i = 0; i < n; i++) CHECK_EQ(y[(size_t)r * n + i], val(r, (size_t)rank * n + i));
        /* float16 avg, bfloat16 sum: one rounding of the float32 result */
        uint16_t *h = malloc(2 * n), *hb = malloc(2 * n);
        for (size_t i = 0; i < n; i++) h[i] = ddpc_float_to_half((float)val(rank, i) / 8);
        CHECK_OK(ddpc_allreduce(c, h, hb, n, DDPC_FLOAT16, DDPC_AVG));
        for (size_t i = 0; i < n; i++) {
            float s = 0;
            for (int r = 0; r < world; r++) s += ddpc_half_to_float(ddpc_float_to_half((float)val(r, i) / 8));
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

static void run_all(int world, const char *algo) {
    g_port = t_free_port();
    pids_init();
    t_run_ranks(world, 100, all_colls_body, (void *)algo);
    check_no_segments_left(world);
}

TEST_T(comm_colls_w1, 30) { run_all(1, NULL); }
TEST_T(comm_colls_w2, 60) { run_all(2, NULL); }
TEST_T(comm_colls_w3_auto, 110) { run_all(3, NULL); }
TEST_T(comm_colls_w4_ring, 110) { run_all(4, "ring"); }
TEST_T(comm_colls_w5_tree, 110) { run_all(5, "tree"); }
TEST_T(comm_colls_w6_rhd, 110) { run_all(6, "rhd"); }

/* ------------------------------------------------------------ bootstrap variants */

static void sum_check(ddpc_comm *c, int expect_sum) {
    int32_t x = ddpc_comm_rank(c), y = -1;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, expect_sum);
}

static void url_body(int rank, int world, void *arg) {
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_url(&c, url, rank, world));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    CHECK_EQ(ddpc_comm_size(c), world);
    CHECK_EQ(ddpc_comm_local_rank(c), rank); /* one host */
    CHECK_EQ(ddpc_comm_local_size(c), world);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_init_url, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, url_body, NULL);
    ddpc_comm *c;
    CHECK_STATUS(ddpc_comm_create_url(&c, "http://x:1", 0, 1), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "tcp://");
    CHECK_STATUS(ddpc_comm_create_url(&c, "tcp://127.0.0.1:99999", 0, 1), DDPC_ERR_INVALID_ARG);
    CHECK_STATUS(ddpc_comm_create_url(&c, "tcp://127.0.0.1:5000", 3, 2), DDPC_ERR_INVALID_ARG);
}

static int g_pipe[2];

static void uid_body(int rank, int world, void *arg) {
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    ddpc_unique_id id;
    if (rank == 0) {
        CHECK_OK(ddpc_get_unique_id(&id));
        for (int i = 1; i < world; i++) CHECK(write(g_pipe[1], &id, sizeof id) == (ssize_t)sizeof id);
    } else {
        CHECK(read(g_pipe[0], &id, sizeof id) == (ssize_t)sizeof id);
    }
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_rank(&c, world, &id, rank));
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_init_unique_id, 30) {
    CHECK(pipe(g_pipe) == 0);
    t_run_ranks(4, 25, uid_body, NULL);
    ddpc_unique_id bad;
    memset(&bad, 0, sizeof bad);
    ddpc_comm *c;
    CHECK_STATUS(ddpc_comm_create_rank(&c, 2, &bad, 0), DDPC_ERR_INVALID_ARG);
}

static void ompi_body(int rank, int world, void *arg) {
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    char b[16];
    snprintf(b, sizeof b, "%d", rank);
    setenv("OMPI_COMM_WORLD_RANK", b, 1);
    snprintf(b, sizeof b, "%d", world);
    setenv("OMPI_COMM_WORLD_SIZE", b, 1);
    snprintf(b, sizeof b, "%d", g_port);
    setenv("MASTER_PORT", b, 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_init_ompi_vars, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, ompi_body, NULL);
}

/* ------------------------------------------------------------ agent store */

/* torchrun's contract: the launcher hosts the store at MASTER_ADDR:MASTER_PORT
 * and says TORCHELASTIC_USE_AGENT_STORE=True; every rank is a client, and
 * each restart attempt rendezvouses under its own keys in the same store. */
static void agent_body(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, g_port);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    setenv("DDPC_STORE_PROTOCOL", (const char *)arg, 1);
    for (int attempt = 0; attempt < 2; attempt++) {
        char b[16];
        snprintf(b, sizeof b, "%d", attempt);
        setenv("TORCHELASTIC_RESTART_COUNT", b, 1);
        ddpc_comm *c = NULL;
        CHECK_OK(ddpc_comm_create_env(&c));
        sum_check(c, world * (world - 1) / 2);
        CHECK_OK(ddpc_comm_destroy(c));
    }
}

/* A launcher: a process of its own (ranks forked beside a running server
 * thread would find its memory lost) serving a store at g_port until *down
 * is closed. Returns its pid. */
static pid_t store_process(int *down_fd) {
    int up[2], down[2];
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    pid_t launcher = fork();
    CHECK(launcher >= 0);
    if (launcher == 0) {
        close(up[0]);
        close(down[1]);
        ddpc_store_server *srv = NULL;
        int port = ddpc_store_server_create("127.0.0.1", 0, &srv) == DDPC_OK ? ddpc_store_server_port(srv) : -1;
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

static void run_agent(const char *proto) {
    int down = -1;
    pid_t launcher = store_process(&down);
    t_run_ranks(3, 25, agent_body, (void *)proto);
    /* the ranks left their keys under ddpc/attempt_<n>/, nowhere else */
    ddpc_store *st = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", g_port, 5, &st));
    int64_t n = 0;
    CHECK_OK(ddpc_store_num_keys(st, &n));
    CHECK(n > 0);
    int ex = 0;
    CHECK_OK(ddpc_store_check(st, "ddpc/attempt_0/comm0/peer/2", &ex));
    CHECK_EQ(ex, 1);
    CHECK_OK(ddpc_store_check(st, "ddpc/attempt_1/comm1/peer/2", &ex));
    CHECK_EQ(ex, 1);
    CHECK_OK(ddpc_store_check(st, "ddpc/comm0/peer/2", &ex));
    CHECK_EQ(ex, 0);
    ddpc_store_destroy(st);
    close(down); /* the launcher stops its store */
    int status = 0;
    CHECK_EQ(waitpid(launcher, &status, 0), launcher);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_T(comm_agent_store_ddpc_protocol, 30) { run_agent("ddpc"); }
TEST_T(comm_agent_store_torch_protocol, 30) { run_agent("torch"); }

/* ------------------------------------------------------------ split */

static void split_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    ddpc_comm *s = NULL;
    int color = rank == world - 1 ? -1 : rank % 2;
    CHECK_OK(ddpc_comm_split(c, color, -rank, &s));
    if (color < 0) {
        CHECK(s == NULL);
    } else {
        int members = 0, sum = 0, before = 0;
        for (int r = 0; r < world - 1; r++)
            if (r % 2 == color) {
                members++;
                sum += r;
                if (r > rank) before++; /* key = -rank: higher old ranks first */
            }
        CHECK_EQ(ddpc_comm_size(s), members);
        CHECK_EQ(ddpc_comm_rank(s), before);
        int32_t x = rank, y = -1;
        CHECK_OK(ddpc_allreduce(s, &x, &y, 1, DDPC_INT32, DDPC_SUM));
        CHECK_EQ(y, sum);
        /* a split of the split */
        ddpc_comm *s2 = NULL;
        CHECK_OK(ddpc_comm_split(s, 0, 0, &s2));
        CHECK_EQ(ddpc_comm_size(s2), members);
        CHECK_OK(ddpc_comm_destroy(s2));
    }
    /* the parent still works */
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(s));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_split, 40) {
    g_port = t_free_port();
    t_run_ranks(5, 35, split_body, NULL);
}

/* ------------------------------------------------------------ async */

static void async_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    enum { K = 6 };
    size_t n = 50000;
    float *buf[K];
    ddpc_work *w[K];
    for (int k = 0; k < K; k++) {
        buf[k] = malloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) buf[k][i] = (float)(k * 100 + rank);
    }
    for (int k = 0; k < K; k++) CHECK_OK(ddpc_allreduce_async(c, buf[k], buf[k], n, DDPC_FLOAT32, DDPC_SUM, &w[k]));
    /* a blocking call after queued ones runs after them, in order */
    int32_t x = 1, y = 0;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, world);
    int done = 0;
    CHECK_OK(ddpc_work_test(w[0], &done));
    CHECK_EQ(done, 1); /* ran before the blocking call */
    for (int k = K - 1; k >= 0; k--) {
        CHECK_OK(ddpc_work_wait(w[k], 10));
        float want = (float)(world * k * 100 + world * (world - 1) / 2);
        for (size_t i = 0; i < n; i += 997) CHECK_NEAR(buf[k][i], want, 0);
        ddpc_work_destroy(w[k]);
        free(buf[k]);
    }
    /* broadcast + barrier async, freed without waiting */
    ddpc_work *wb, *wr;
    int32_t v = rank == 1 ? 42 : 0;
    CHECK_OK(ddpc_broadcast_async(c, &v, &v, 1, DDPC_INT32, 1, &wb));
    CHECK_OK(ddpc_barrier_async(c, &wr));
    ddpc_work_destroy(wb);
    CHECK_OK(ddpc_work_wait(wr, -1));
    ddpc_work_destroy(wr);
    CHECK_EQ(v, 42);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_async_outstanding, 40) {
    g_port = t_free_port();
    t_run_ranks(3, 35, async_body, NULL);
}

static void wait_timeout_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t x = rank + 1, y = 0;
    if (rank == 1) ddpc__sleep(1.0);
    ddpc_work *w;
    CHECK_OK(ddpc_allreduce_async(c, &x, &y, 1, DDPC_INT32, DDPC_SUM, &w));
    if (rank == 0) {
        double t0 = ddpc__now();
        CHECK_STATUS(ddpc_work_wait(w, 0), DDPC_ERR_TIMEOUT); /* 0: a poll */
        CHECK_STATUS(ddpc_work_wait(w, 0.2), DDPC_ERR_TIMEOUT);
        CHECK(ddpc__now() - t0 < 0.9 * t_slow());
        int done = 1;
        CHECK_OK(ddpc_work_test(w, &done));
        CHECK_EQ(done, 0);
    }
    CHECK_OK(ddpc_work_wait(w, -1));
    CHECK_EQ(y, 3);
    ddpc_work_destroy(w);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_work_wait_timeout, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, wait_timeout_body, NULL);
}

/* ------------------------------------------------------------ abort */

#include <pthread.h>

typedef struct {
    ddpc_comm *c;
    ddpc_status st;
    double took;
} blocked_call;

static void *blocked_thread(void *arg) {
    blocked_call *b = arg;
    int32_t x = 1, y = 0;
    double t0 = ddpc__now();
    b->st = ddpc_allreduce(b->c, &x, &y, 1, DDPC_INT32, DDPC_SUM);
    b->took = ddpc__now() - t0;
    return NULL;
}

static void abort_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    if (rank == 0) {
        /* a blocking call on another thread and a queued async one */
        blocked_call b = {c, DDPC_OK, 0};
        pthread_t th;
        pthread_create(&th, NULL, blocked_thread, &b);
        ddpc__sleep(0.3);
        ddpc_work *w;
        int32_t x = 1, y;
        CHECK_OK(ddpc_allreduce_async(c, &x, &y, 1, DDPC_INT32, DDPC_SUM, &w));
        CHECK_OK(ddpc_comm_abort(c));
        pthread_join(th, NULL);
        CHECK_STATUS(b.st, DDPC_ERR_ABORTED);
        CHECK(b.took < 2.0 * t_slow());
        CHECK_STATUS(ddpc_work_wait(w, 5), DDPC_ERR_ABORTED);
        ddpc_work_destroy(w);
        CHECK_STATUS(ddpc_barrier(c), DDPC_ERR_ABORTED);
        CHECK_CONTAINS(ddpc_comm_last_error(c), "abort");
    } else {
        /* the peer sees rank 0 as lost, quickly */
        ddpc__sleep(0.8);
        int32_t x = 1, y;
        double t0 = ddpc__now();
        /* the first may complete from what rank 0 sent before it aborted */
        ddpc_status s = ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM);
        if (s == DDPC_OK) s = ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM);
        CHECK(s != DDPC_OK);
        CHECK(ddpc__now() - t0 < 3.0 * t_slow());
        CHECK_CONTAINS(ddpc_comm_last_error(c), "rank 0");
    }
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_abort_wakes_blocked, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, abort_body, NULL);
}

/* ------------------------------------------------------------ a killed rank */

static void killed_body(int rank, int world, void *arg) {
    setenv("DDPC_TIMEOUT", "60", 1);
    ddpc_comm *c = env_comm(rank, world);
    setenv("DDPC_TIMEOUT", "60", 1);
    size_t n = world > 4 ? 1u << 20 : 4u << 20;
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

static void run_killed(int world) {
    g_port = t_free_port();
    pids_init();
    int st[16];
    t_run_ranks_status(world, 30, killed_body, NULL, st);
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

TEST_T(comm_rank_killed_mid_collective, 40) { run_killed(4); }
TEST_T(comm_rank_killed_mid_collective_w8, 40) { run_killed(8); }
TEST_T(comm_rank_killed_mid_collective_tcp, 40) {
    setenv("DDPC_SHM", "0", 1); /* TCP keeps its coverage */
    run_killed(4);
}
TEST_T(comm_rank_killed_mid_collective_shm_small_ring, 40) {
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_SHM_BYTES", "4096", 1); /* killed while the rings wrap and fill */
    run_killed(4);
}

/* ------------------------------------------------------------ bad environments */

static void clear_env(void) {
    const char *v[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                       "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                       "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT", "DDPC_TIMEOUT", "DDPC_ALGO", "DDPC_SHM_COPY",
                       "DDPC_CONNECT_TIMEOUT", "DDPC_IF_IP", "HCCL_IF_IP", "DDPC_SOCKET_IFNAME",
                       "HCCL_SOCKET_IFNAME"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) unsetenv(v[i]);
}

/* init_env must fail with want, its message containing needle, quickly. */
static void bad_env(ddpc_status want, const char *needle) {
    ddpc_comm *c = (ddpc_comm *)1;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_comm_create_env(&c), want);
    CHECK(c == NULL);
    CHECK(ddpc__now() - t0 < 3.0 * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), needle);
    CHECK(strchr(ddpc_last_error(), '\n') == NULL); /* one line */
}

TEST_T(comm_bad_environment, 40) {
    char port[16];
    snprintf(port, sizeof port, "%d", t_free_port());
    clear_env();
    bad_env(DDPC_ERR_ENV, "RANK is not set");
    setenv("RANK", "abc", 1);
    setenv("WORLD_SIZE", "2", 1);
    bad_env(DDPC_ERR_ENV, "RANK='abc'");
    setenv("RANK", "2", 1);
    bad_env(DDPC_ERR_ENV, "RANK=2 is not below WORLD_SIZE=2");
    unsetenv("WORLD_SIZE");
    bad_env(DDPC_ERR_ENV, "WORLD_SIZE is not set");
    setenv("WORLD_SIZE", "0", 1);
    setenv("RANK", "0", 1);
    bad_env(DDPC_ERR_ENV, "WORLD_SIZE='0'");
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_PORT", "70000", 1);
    bad_env(DDPC_ERR_ENV, "MASTER_PORT='70000'");
    setenv("MASTER_PORT", "x1", 1);
    bad_env(DDPC_ERR_ENV, "MASTER_PORT='x1'");
    setenv("MASTER_PORT", port, 1);
    setenv("DDPC_TIMEOUT", "soon", 1);
    bad_env(DDPC_ERR_ENV, "DDPC_TIMEOUT='soon'");
    unsetenv("DDPC_TIMEOUT");
    setenv("HCCL_EXEC_TIMEOUT", "-3", 1);
    bad_env(DDPC_ERR_ENV, "HCCL_EXEC_TIMEOUT='-3'");
    unsetenv("HCCL_EXEC_TIMEOUT");
    setenv("DDPC_ALGO", "fastest", 1);
    bad_env(DDPC_ERR_ENV, "DDPC_ALGO='fastest'");
    unsetenv("DDPC_ALGO");
    setenv("DDPC_SHM_COPY", "fast", 1);
    bad_env(DDPC_ERR_ENV, "DDPC_SHM_COPY='fast' is not one of auto, cached, stream");
    unsetenv("DDPC_SHM_COPY");
    setenv("LOCAL_RANK", "5", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    bad_env(DDPC_ERR_ENV, "LOCAL_RANK='5'");
    unsetenv("LOCAL_RANK");
    unsetenv("LOCAL_WORLD_SIZE");
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "first", 1);
    bad_env(DDPC_ERR_ENV, "TORCHELASTIC_RESTART_COUNT='first'");
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    unsetenv("TORCHELASTIC_RESTART_COUNT");
    /* rank 0 cannot host the store on an address that is not this host's */
    setenv("MASTER_ADDR", "198.18.0.1", 1);
    bad_env(DDPC_ERR_ENV, "MASTER_ADDR=198.18.0.1");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    /* port in use */
    int fd, bound;
    CHECK_OK(ddpc__sock_listen("127.0.0.1", 0, 4, &fd, &bound));
    char inuse[16];
    snprintf(inuse, sizeof inuse, "%d", bound);
    setenv("MASTER_PORT", inuse, 1);
    bad_env(DDPC_ERR_ENV, "in use");
    CHECK_CONTAINS(ddpc_last_error(), inuse);
    close(fd);
}

TEST_T(comm_unreachable_master, 20) {
    clear_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    char port[16];
    snprintf(port, sizeof port, "%d", t_free_port());
    setenv("MASTER_PORT", port, 1);
    setenv("DDPC_CONNECT_TIMEOUT", "1", 1);
    ddpc_comm *c;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_comm_create_env(&c), DDPC_ERR_TIMEOUT);
    double took = ddpc__now() - t0;
    CHECK_MSG(took < 4.0, "took %.2f s", took);
    CHECK_CONTAINS(ddpc_last_error(), "MASTER_ADDR=127.0.0.1");
    CHECK_CONTAINS(ddpc_last_error(), port);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_CONNECT_TIMEOUT");
}

/* Ranks 0 and 1 of 3 come; 2 never does. */
static void missing_body(int rank, int world, void *arg) {
    t_set_rank_env(rank, 3, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "1.5", 1);
    ddpc_comm *c;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_comm_create_env(&c), DDPC_ERR_TIMEOUT);
    CHECK(ddpc__now() - t0 < 5.0 * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), "ranks 2 of 3 never arrived");
}

TEST_T(comm_connect_timeout_names_missing, 20) {
    g_port = t_free_port();
    t_run_ranks(2, 15, missing_body, NULL);
}

/* ------------------------------------------------------------ mismatches */

typedef struct {
    int which;
} mm_arg;

static void mismatch_body(int rank, int world, void *arg) {
    int which = ((mm_arg *)arg)->which;
    ddpc_comm *c = env_comm(rank, world);
    int32_t buf[64] = {0}, out[64 * 8];
    sum_check(c, world * (world - 1) / 2); /* one good one first */
    ddpc_status s;
    const char *mine = "", *theirs = "";
    switch (which) {
    case 0: /* op */
        s = ddpc_allreduce(c, buf, out, 8, DDPC_INT32, rank == 1 ? DDPC_MAX : DDPC_SUM);
        mine = rank == 1 ? "max" : "sum";
        theirs = rank == 1 ? "sum" : "max";
        break;
    case 1: /* count */
        s = ddpc_allreduce(c, buf, out, rank == 1 ? 9 : 8, DDPC_INT32, DDPC_SUM);
        mine = rank == 1 ? "count=9" : "count=8";
        theirs = rank == 1 ? "count=8" : "count=9";
        break;
    case 2: /* dtype */
        s = ddpc_allreduce(c, buf, out, 8, rank == 1 ? DDPC_FLOAT32 : DDPC_INT32, DDPC_SUM);
        mine = rank == 1 ? "float32" : "int32";
        theirs = rank == 1 ? "int32" : "float32";
        break;
    case 3: /* root */
        s = ddpc_broadcast(c, buf, buf, 8, DDPC_INT32, rank == 1 ? 1 : 0);
        mine = rank == 1 ? "root=1" : "root=0";
        theirs = rank == 1 ? "root=0" : "root=1";
        break;
    default: /* kind */
        if (rank == 1) s = ddpc_allgather(c, buf, out, 8, DDPC_INT32);
        else s = ddpc_allreduce(c, buf, out, 8, DDPC_INT32, DDPC_SUM);
        mine = rank == 1 ? "allgather" : "allreduce";
        theirs = rank == 1 ? "allreduce" : "allgather";
        break;
    }
    /* the odd one out names both calls; the others fail too (naming what
     * they saw: the mismatch, or the odd one giving up), none hangs */
    if (rank == 1) {
        CHECK_STATUS(s, DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), mine);
        CHECK_CONTAINS(ddpc_last_error(), theirs);
        CHECK_CONTAINS(ddpc_last_error(), "this rank (1)");
        CHECK_CONTAINS(ddpc_comm_last_error(c), theirs);
    } else {
        CHECK_MSG(s == DDPC_ERR_MISMATCH || s == DDPC_ERR_PEER_LOST || (which == 3 && s == DDPC_OK),
                  "rank %d: %s (%s)", rank, ddpc_status_str(s), ddpc_last_error());
        if (s == DDPC_ERR_MISMATCH) CHECK_CONTAINS(ddpc_last_error(), "mismatch");
    }
    /* the communicator stays failed */
    if (s != DDPC_OK) CHECK_EQ(ddpc_barrier(c), s);
    else CHECK(ddpc_barrier(c) != DDPC_OK);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_mismatch(int which, int world) {
    mm_arg a = {which};
    g_port = t_free_port();
    t_run_ranks(world, 25, mismatch_body, &a);
}

TEST_T(comm_mismatch_op, 30) { run_mismatch(0, 2); }
TEST_T(comm_mismatch_count, 30) { run_mismatch(1, 3); }
TEST_T(comm_mismatch_dtype, 30) { run_mismatch(2, 2); }
TEST_T(comm_mismatch_root, 30) { run_mismatch(3, 3); }
TEST_T(comm_mismatch_kind, 30) { run_mismatch(4, 4); }

static void p2p_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t a[100], b[100];
    for (int i = 0; i < 100; i++) a[i] = rank * 1000 + i;
    if (rank == 0) {
        CHECK_OK(ddpc_send(c, a, 100, DDPC_INT32, 1));
        CHECK_OK(ddpc_recv(c, b, 100, DDPC_INT32, 1));
        for (int i = 0; i < 100; i++) CHECK_EQ(b[i], 1000 + i);
        CHECK_OK(ddpc_send(c, a, 10, DDPC_INT32, 1)); /* receiver expects 11 */
    } else {
        CHECK_OK(ddpc_recv(c, b, 100, DDPC_INT32, 0));
        for (int i = 0; i < 100; i++) CHECK_EQ(b[i], i);
        CHECK_OK(ddpc_send(c, a, 100, DDPC_INT32, 0));
        CHECK_STATUS(ddpc_recv(c, b, 11, DDPC_INT32, 0), DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), "count=10");
    }
    CHECK_STATUS(ddpc_send(c, a, 1, DDPC_INT32, rank), DDPC_ERR_INVALID_ARG);
    ddpc_comm_destroy(c);
}

TEST_T(comm_send_recv, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, p2p_body, NULL);
}

/* Both ranks send each other 16 MiB before receiving, as torch's
 * batch_isend_irecv does: the queued sends and receives progress together
 * (one would otherwise wait forever on the other's full buffers), and a
 * collective after them still runs in order. */
static void p2p_exchange_body(int rank, int world, void *arg) {
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = env_comm(rank, world);
    size_t n = 4u << 20;
    float *out = malloc(sizeof(float) * n), *in = malloc(sizeof(float) * n);
    CHECK(out && in);
    for (size_t i = 0; i < n; i++) out[i] = (float)(rank * 7 + (int)(i % 1000));
    int peer = 1 - rank;
    for (int round = 0; round < 3; round++) {
        ddpc_work *ws, *wr, *wa;
        memset(in, 0, sizeof(float) * n);
        CHECK_OK(ddpc_send_async(c, out, n, DDPC_FLOAT32, peer, &ws));
        CHECK_OK(ddpc_recv_async(c, in, n, DDPC_FLOAT32, peer, &wr));
        int32_t x = 1, y = 0;
        CHECK_OK(ddpc_allreduce_async(c, &x, &y, 1, DDPC_INT32, DDPC_SUM, &wa));
        /* round 1 waits for the receive first, round 2 for the collective */
        if (round == 1) CHECK_OK(ddpc_work_wait(wr, -1));
        if (round == 2) CHECK_OK(ddpc_work_wait(wa, -1));
        CHECK_OK(ddpc_work_wait(ws, -1));
        CHECK_OK(ddpc_work_wait(wr, -1));
        CHECK_OK(ddpc_work_wait(wa, -1));
        ddpc_work_destroy(ws);
        ddpc_work_destroy(wr);
        ddpc_work_destroy(wa);
        CHECK_EQ(y, 2);
        for (size_t i = 0; i < n; i += 4099) CHECK_NEAR(in[i], (float)(peer * 7 + (int)(i % 1000)), 0);
        CHECK_NEAR(in[n - 1], (float)(peer * 7 + (int)((n - 1) % 1000)), 0);
    }
    free(out);
    free(in);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_send_recv_exchange_large, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 55, p2p_exchange_body, NULL);
}

/* Many sends and receives queued while a batch of them runs: the batch
 * takes them in as they come and grows past its first room with requests
 * already posted, which must stay where they were posted. */
static void p2p_many_body(int rank, int world, void *arg) {
    enum { K = 96, N = 16384 };
    ddpc_comm *c = env_comm(rank, world);
    float *out = malloc(sizeof(float) * N * K), *in = calloc((size_t)N * K, sizeof(float));
    CHECK(out && in);
    ddpc_work *ws[K], *wr[K];
    int peer = 1 - rank;
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) out[(size_t)k * N + i] = (float)(rank * 1000 + k + i % 7);
        CHECK_OK(ddpc_send_async(c, out + (size_t)k * N, N, DDPC_FLOAT32, peer, &ws[k]));
        CHECK_OK(ddpc_recv_async(c, in + (size_t)k * N, N, DDPC_FLOAT32, peer, &wr[k]));
    }
    for (int k = 0; k < K; k++) {
        CHECK_OK(ddpc_work_wait(ws[k], -1));
        CHECK_OK(ddpc_work_wait(wr[k], -1));
        ddpc_work_destroy(ws[k]);
        ddpc_work_destroy(wr[k]);
        for (int i = 0; i < N; i += 997)
            CHECK_NEAR(in[(size_t)k * N + i], (float)(peer * 1000 + k + i % 7), 0);
    }
    free(out);
    free(in);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_send_recv_many_queued, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, p2p_many_body, NULL);
}

/* Receives from any source: rank 0 takes one message from each other rank
 * in whatever order they come (rank r sleeps (world - r) * 30 ms first, so
 * the last rank's usually comes first), learns each sender, then a receive
 * from a named rank queued behind an any-source one still gets that rank's
 * next message, in order. */
static void any_source_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t v[2];
    if (rank == 0) {
        int seen[8] = {0};
        for (int k = 1; k < world; k++) {
            ddpc_work *w;
            CHECK_OK(ddpc_recv_async(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE, &w));
            CHECK_EQ(ddpc_work_source(w) == -1 || ddpc_work_source(w) > 0, 1);
            CHECK_OK(ddpc_work_wait(w, -1));
            int src = ddpc_work_source(w);
            ddpc_work_destroy(w);
            CHECK(src >= 1 && src < world);
            CHECK_EQ(v[0], src);
            CHECK_EQ(v[1], 100);
            seen[src]++;
        }
        for (int r = 1; r < world; r++) CHECK_EQ(seen[r], 1);
        /* rank 1 sends 200 then 300: any-source takes the first, rank 1's
         * named receive the second */
        ddpc_work *wa, *wn;
        int32_t u[2];
        CHECK_OK(ddpc_recv_async(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE, &wa));
        CHECK_OK(ddpc_recv_async(c, u, 2, DDPC_INT32, 1, &wn));
        CHECK_OK(ddpc_work_wait(wn, -1));
        CHECK_OK(ddpc_work_wait(wa, -1));
        CHECK_EQ(ddpc_work_source(wa), 1);
        CHECK_EQ(v[1], 200);
        CHECK_EQ(u[1], 300);
        ddpc_work_destroy(wa);
        ddpc_work_destroy(wn);
        CHECK_OK(ddpc_recv(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE)); /* blocking form */
        CHECK_EQ(v[1], 400);
    } else {
        ddpc__sleep(0.03 * (world - rank));
        v[0] = rank, v[1] = 100;
        CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
        if (rank == 1) {
            v[1] = 200;
            CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
            v[1] = 300;
            CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
            v[1] = 400;
            CHECK_OK(ddpc_send(c, v, 2, DDPC_INT32, 0));
        }
    }
    CHECK_STATUS(ddpc_send(c, v, 2, DDPC_INT32, DDPC_ANY_SOURCE), DDPC_ERR_INVALID_ARG);
    CHECK_OK(ddpc_barrier(c));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_recv_any_source, 30) {
    g_port = t_free_port();
    t_run_ranks(4, 25, any_source_body, NULL);
}

/* Uneven all-to-all: rank r sends (r + j) % 3 + (j == 0) elements to rank
 * j, value 1000 r + 10 j + k; a receive count that disagrees with the
 * sender's is DDPC_ERR_MISMATCH naming both sizes. */
static size_t a2av_n(int from, int to) { return (size_t)((from + to) % 3 + (to == 0)); }

static void alltoallv_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    size_t sc[8], sd[8], rc[8], rd[8], st = 0, rt = 0;
    for (int j = 0; j < world; j++) {
        sc[j] = a2av_n(rank, j), sd[j] = st, st += sc[j] + 1; /* a gap after each block */
        rc[j] = a2av_n(j, rank), rd[j] = rt, rt += rc[j];
    }
    int64_t *send = calloc(st + 1, 8), *recv = calloc(rt + 1, 8);
    for (int j = 0; j < world; j++)
        for (size_t k = 0; k < sc[j]; k++) send[sd[j] + k] = 1000 * rank + 10 * j + (int64_t)k;
    CHECK_OK(ddpc_alltoallv(c, send, sc, sd, recv, rc, rd, DDPC_INT64));
    for (int j = 0; j < world; j++)
        for (size_t k = 0; k < rc[j]; k++) CHECK_EQ(recv[rd[j] + k], 1000 * j + 10 * rank + (int64_t)k);
    ddpc_work *w;
    CHECK_OK(ddpc_alltoallv_async(c, send, sc, sd, recv, rc, rd, DDPC_INT64, &w));
    memset(sc, 0xff, sizeof sc); /* the arrays were copied */
    CHECK_OK(ddpc_work_wait(w, -1));
    ddpc_work_destroy(w);
    for (int j = 0; j < world; j++) sc[j] = a2av_n(rank, j);
    if (rank == 1) rc[0]++; /* expects one more from rank 0 than it sends */
    ddpc_status s = ddpc_alltoallv(c, send, sc, sd, recv, rc, rd, DDPC_INT64);
    if (rank == 1) { /* the others may have finished their part first */
        CHECK_STATUS(s, DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), "alltoallv: rank 0 sends this rank (1) ");
    }
    CHECK_STATUS(ddpc_alltoallv(c, send, NULL, sd, recv, rc, rd, DDPC_INT64), DDPC_ERR_INVALID_ARG);
    free(send);
    free(recv);
    ddpc_comm_destroy(c);
}

TEST_T(comm_alltoallv, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, alltoallv_body, NULL);
}

/* ------------------------------------------------ a caller's own store */

/* The caller's store, as ddpc_store_ops: here a ddpc store client (any
 * store with set, a get that waits and add would do), counting its calls. */
typedef struct kv_ctx {
    ddpc_store *st;
    int calls;
} kv_ctx;

static ddpc_status kv_set(void *ctx, const char *key, const void *val, size_t len, char *err, size_t errlen) {
    kv_ctx *k = ctx;
    k->calls++;
    return ddpc_store_set(k->st, key, val, len);
}
static ddpc_status kv_get(void *ctx, const char *key, double timeout_s, void **val, size_t *len, char *err,
                          size_t errlen) {
    kv_ctx *k = ctx;
    k->calls++;
    ddpc_status s = ddpc_store_get(k->st, key, timeout_s, val, len);
    if (s != DDPC_OK && s != DDPC_ERR_TIMEOUT) snprintf(err, errlen, "%s", ddpc_last_error());
    return s;
}
static ddpc_status kv_add(void *ctx, const char *key, int64_t delta, int64_t *result, char *err, size_t errlen) {
    kv_ctx *k = ctx;
    k->calls++;
    return ddpc_store_add(k->st, key, delta, result);
}
static ddpc_status kv_broken(void *ctx, const char *key, int64_t delta, int64_t *result, char *err,
                             size_t errlen) {
    snprintf(err, errlen, "the service said no");
    return DDPC_ERR_PEER_LOST;
}

static void ops_body(int rank, int world, void *arg) {
    ddpc_store *tcp = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", g_port, 10, &tcp));
    kv_ctx k = {tcp, 0};
    ddpc_store_ops ops = {kv_set, kv_get, kv_add};
    ddpc_store *st = NULL;
    CHECK_OK(ddpc_store_create_ops(&ops, &k, "the test's store", &st));
    CHECK(!strcmp(ddpc_store_protocol(st), "ops"));
    ddpc_comm_options opt = ddpc_comm_options_default();
    opt.connect_timeout_s = 10;
    opt.exec_timeout_s = 5;
    opt.progress_thread = 0; /* the waiters run the queue */
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_store(&c, st, rank, world, &opt));
    CHECK(k.calls >= 3);
    sum_check(c, world * (world - 1) / 2);
    int32_t a[3] = {rank, rank, rank}, b = rank;
    ddpc_work *w1, *w2;
    CHECK_OK(ddpc_allreduce_async(c, a, a, 3, DDPC_INT32, DDPC_SUM, &w1));
    CHECK_OK(ddpc_allreduce_async(c, &b, &b, 1, DDPC_INT32, DDPC_MAX, &w2));
    int done = 1;
    CHECK_OK(ddpc_work_test(w1, &done)); /* nobody runs it yet */
    CHECK_EQ(done, 0);
    CHECK_OK(ddpc_work_wait(w2, 5.0)); /* runs the queue up to w2 */
    CHECK_OK(ddpc_work_test(w1, &done));
    CHECK_EQ(done, 1);
    CHECK_EQ(a[2], world * (world - 1) / 2);
    CHECK_EQ(b, world - 1);
    ddpc_work_destroy(w1);
    ddpc_work_destroy(w2);
    CHECK_OK(ddpc_allreduce_async(c, a, a, 3, DDPC_INT32, DDPC_SUM, &w1));
    ddpc_work_destroy(w1); /* runs it: nobody else would */
    CHECK_EQ(a[0], world * world * (world - 1) / 2);
    /* a split meets through the same store */
    ddpc_comm *s = NULL;
    CHECK_OK(ddpc_comm_split(c, rank % 2, 0, &s));
    int32_t x = 1, y = 0;
    CHECK_OK(ddpc_allreduce(s, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, (world + 1 - rank % 2) / 2);
    CHECK_OK(ddpc_comm_destroy(s));
    CHECK_OK(ddpc_comm_destroy(c));
    /* what such a store cannot do, it says */
    CHECK_STATUS(ddpc_store_delete(st, "x", NULL), DDPC_ERR_INVALID_ARG);
    int64_t nk;
    CHECK_STATUS(ddpc_store_num_keys(st, &nk), DDPC_ERR_INVALID_ARG);
    ddpc_store_destroy(st);
    /* a failing store: the error names it and its reason */
    if (rank == 0) {
        ddpc_store_ops bad = {kv_set, kv_get, kv_broken};
        CHECK_OK(ddpc_store_create_ops(&bad, &k, "the flaky service", &st));
        CHECK_STATUS(ddpc_store_add(st, "n", 1, &nk), DDPC_ERR_PEER_LOST);
        CHECK_CONTAINS(ddpc_last_error(), "the flaky service");
        CHECK_CONTAINS(ddpc_last_error(), "the service said no");
        ddpc_store_destroy(st);
        ddpc_store_ops none = {kv_set, NULL, kv_add};
        CHECK_STATUS(ddpc_store_create_ops(&none, &k, "x", &st), DDPC_ERR_INVALID_ARG);
    }
    ddpc_store_destroy(tcp);
}

TEST_T(comm_init_store_ops, 40) {
    int down = -1;
    pid_t launcher = store_process(&down);
    t_run_ranks(3, 35, ops_body, NULL);
    close(down);
    int status = 0;
    CHECK_EQ(waitpid(launcher, &status, 0), launcher);
}

/* ------------------------------------------------------------ interfaces */

TEST(comm_ifname_syntax) {
    CHECK(ddpc__ifname_match("eth,enp", "eth0"));
    CHECK(ddpc__ifname_match("eth,enp", "enp3s0"));
    CHECK(!ddpc__ifname_match("eth,enp", "lo"));
    CHECK(!ddpc__ifname_match("^eth", "eth1"));
    CHECK(ddpc__ifname_match("^eth", "lo"));
    CHECK(ddpc__ifname_match("=eth0", "eth0"));
    CHECK(!ddpc__ifname_match("=eth0", "eth01"));
    CHECK(!ddpc__ifname_match("^=eth0", "eth0"));
    CHECK(ddpc__ifname_match("^=eth0", "eth01"));
    CHECK(ddpc__ifname_match("=lo,=eth0", "lo"));
}

static void iface_body(int rank, int world, void *arg) {
    const char *spec = arg;
    char var[64];
    snprintf(var, sizeof var, "%s", spec);
    char *eq = strchr(var, ':');
    *eq = '\0';
    setenv(var, eq + 1, 1);
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, 1);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_iface(const char *spec) {
    g_port = t_free_port();
    t_run_ranks(2, 20, iface_body, (void *)spec);
}

TEST_T(comm_iface_by_ip, 30) {
    run_iface("DDPC_IF_IP:127.0.0.1");
    run_iface("HCCL_IF_IP:127.0.0.1");
}

TEST_T(comm_iface_by_name, 30) {
    run_iface("DDPC_SOCKET_IFNAME:lo");
    run_iface("HCCL_SOCKET_IFNAME:=lo");
}

TEST_T(comm_iface_errors, 30) {
    char ip[64], ifn[64];
    clear_env();
    setenv("DDPC_IF_IP", "198.18.7.7", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_IF_IP=198.18.7.7");
    CHECK_CONTAINS(ddpc_last_error(), "lo");
    setenv("DDPC_IF_IP", "not-an-ip", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_IF_IP='not-an-ip'");
    unsetenv("DDPC_IF_IP");
    setenv("HCCL_SOCKET_IFNAME", "=nosuchif0", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_SOCKET_IFNAME==nosuchif0");
    unsetenv("HCCL_SOCKET_IFNAME");
    CHECK_OK(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn));
    CHECK_STR(ip, "127.0.0.1");
    CHECK_STR(ifn, "lo");
    /* through init_env: a one-line error naming the variable */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    char port[16];
    snprintf(port, sizeof port, "%d", t_free_port());
    setenv("MASTER_PORT", port, 1);
    setenv("DDPC_SOCKET_IFNAME", "nosuch", 1);
    bad_env(DDPC_ERR_NOT_FOUND, "DDPC_SOCKET_IFNAME=nosuch");
}

TEST_T(comm_iface_ipv6, 30) {
    char ip[64], ifn[64];
    clear_env();
    setenv("DDPC_IF_IP", "::1", 1);
    if (ddpc__choose_ip("::1", ip, sizeof ip, ifn, sizeof ifn) != DDPC_OK) SKIP("no ::1 here: %s", ddpc_last_error());
    unsetenv("DDPC_IF_IP");
    run_iface("DDPC_IF_IP:::1");
}

/* ------------------------------------------------------------ exec timeout */

static void exec_timeout_body(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    unsetenv("DDPC_TIMEOUT");
    setenv("HCCL_EXEC_TIMEOUT", "0.5", 1); /* the HCCL alias */
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    int32_t x = 1, y = 0;
    if (rank == 0) {
        double t0 = ddpc__now();
        CHECK_STATUS(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM), DDPC_ERR_TIMEOUT);
        double took = ddpc__now() - t0;
        CHECK_MSG(took > 0.4 && took < 2.0, "timed out after %.2f s", took);
        CHECK_CONTAINS(ddpc_last_error(), "DDPC_TIMEOUT");
        CHECK_CONTAINS(ddpc_last_error(), "rank 1");
        CHECK_CONTAINS(ddpc_comm_last_error(c), "timed out");
    } else {
        ddpc__sleep(2.0);
        /* rank 0 gave up: this rank learns it, at once (the first call may
         * still complete from the data rank 0 sent before it gave up) */
        double t0 = ddpc__now();
        ddpc_status s = ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM);
        if (s == DDPC_OK) {
            CHECK_EQ(y, 2);
            s = ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM);
        }
        CHECK(s != DDPC_OK);
        CHECK(ddpc__now() - t0 < 2.0 * t_slow());
        CHECK_CONTAINS(ddpc_last_error(), "rank 0");
    }
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_exec_timeout, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, exec_timeout_body, NULL);
}

/* ------------------------------------------------------------ INFO log, base port */

static void info_body(int rank, int world, void *arg) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/ddpc-test-info-%d-%d.log", (int)getppid(), rank);
    int saved = dup(2); /* the checks below report on the real stderr */
    FILE *f = freopen(path, "w", stderr);
    CHECK(saved >= 0 && f != NULL);
    setenv("DDPC_DEBUG", "INFO", 1);
    char base[16];
    snprintf(base, sizeof base, "%d", *(int *)arg);
    setenv("HCCL_IF_BASE_PORT", base, 1);
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[16384];
    FILE *r = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, r);
    buf[n] = '\0';
    fclose(r);
    unlink(path);
    CHECK_CONTAINS(buf, "DDPC_TIMEOUT=20 (DDPC_TIMEOUT)");
    CHECK_CONTAINS(buf, "DDPC_ALGO=auto (default)");
    CHECK_CONTAINS(buf, "DDPC_IF_BASE_PORT=");
    CHECK_CONTAINS(buf, "(HCCL_IF_BASE_PORT)");
    CHECK_CONTAINS(buf, "listening on 127.0.0.1 (interface lo");
    /* data ports come from the base range */
    char want[64];
    snprintf(want, sizeof want, "listening on 127.0.0.1:%d", *(int *)arg + rank);
    char want2[64];
    snprintf(want2, sizeof want2, "listening on 127.0.0.1:%d", *(int *)arg + 1 - rank);
    CHECK_MSG(strstr(buf, want) || strstr(buf, want2), "no '%s' in the log: %s", want, buf);
}

TEST_T(comm_info_log_and_base_port, 30) {
    /* the two ranks listen on base and base + 1, both free and neither the
     * store's port: a rank pushed to base + 2 would fail the test */
    int base = t_free_port_pair();
    do g_port = t_free_port();
    while (g_port == base || g_port == base + 1);
    t_run_ranks(2, 25, info_body, &base);
}

/* ------------------------------------------------------------ clean close */

static void early_destroy_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, world * (world - 1) / 2);
    if (rank == 2) { /* done early: a goodbye, not a crash */
        CHECK_OK(ddpc_comm_destroy(c));
        return;
    }
    ddpc__sleep(0.3); /* rank 2 is gone by now */
    int32_t v[1000];
    for (int it = 0; it < 20; it++) {
        for (int i = 0; i < 1000; i++) v[i] = rank == 0 ? it * i : -1;
        if (rank == 0) CHECK_OK(ddpc_send(c, v, 1000, DDPC_INT32, 1));
        else {
            CHECK_OK(ddpc_recv(c, v, 1000, DDPC_INT32, 0));
            for (int i = 0; i < 1000; i++) CHECK_EQ(v[i], it * i);
        }
    }
    /* a collective needs rank 2: named as gone, not a hang */
    double t0 = ddpc__now();
    ddpc_status s = ddpc_barrier(c);
    CHECK(s == DDPC_ERR_MISMATCH || s == DDPC_ERR_PEER_LOST);
    CHECK(ddpc__now() - t0 < 3.0 * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), "rank 2");
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_peer_destroyed_early_is_not_a_crash, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, early_destroy_body, NULL);
}

/* ------------------------------------------------------------ re-init */

static void reinit_body(int rank, int world, void *arg) {
    for (int round = 0; round < 6; round++) {
        if (rank == 0 && round % 2) ddpc__sleep(0.05); /* others reach the old store first */
        ddpc_comm *c = env_comm(rank, world);
        sum_check(c, world * (world - 1) / 2);
        CHECK_OK(ddpc_comm_destroy(c));
    }
}

TEST_T(comm_reinit_same_port, 40) {
    g_port = t_free_port();
    t_run_ranks(3, 35, reinit_body, NULL);
}

/* ------------------------------------------------------------ shared memory */

/* arg: the transport expected between the ranks ("shm" or "tcp"); the INFO
 * line that says so is checked too. */
static void transport_body(int rank, int world, void *arg) {
    const char *want = arg;
    log_to_file("transport", rank);
    setenv("DDPC_DEBUG", "INFO", 1);
    setenv("DDPC_DEBUG_SUBSYS", "INIT,SHM", 1);
    ddpc_comm *c = env_comm(rank, world);
    check_transports(c, want, world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *log = slurp_log("transport", rank);
    char line[64];
    if (rank == 0) snprintf(line, sizeof line, "rank 0: %s to ranks 1-%d\n", want, world - 1);
    else snprintf(line, sizeof line, "rank %d: %s to ranks 0", rank, want);
    CHECK_CONTAINS(log, line);
    CHECK(!strstr(log, "WARN"));
}

TEST_T(comm_shm_between_ranks_of_one_host, 40) {
    setenv("DDPC_SHM", "1", 1);
    g_port = t_free_port();
    pids_init();
    t_run_ranks(4, 35, transport_body, "shm");
    check_no_segments_left(4);
}

/* Makes /dev/shm/<name> (a segment's name as shm.c spells it, or not). */
static void make_shm_name(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/%s", name);
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK_MSG(fd >= 0, "shm_open(%s): %s", path, strerror(errno));
    close(fd);
}

static int shm_name_exists(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    return access(path, F_OK) == 0;
}

static void two_rank_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
}

/* A segment left by a process that is gone (killed between creating it and
 * its peer's answer) is removed by the next process that offers one; a live
 * process's, and names not spelt as segments are, stay. */
TEST_T(comm_shm_stale_segments_of_dead_processes_removed, 40) {
    setenv("DDPC_SHM", "1", 1);
    pid_t dead = fork();
    CHECK(dead >= 0);
    if (dead == 0) _exit(0);
    CHECK(waitpid(dead, NULL, 0) == dead);
    char stale[64], live[64], odd[64];
    const char *hex = "0123456789abcdef0123456789abcdef";
    snprintf(stale, sizeof stale, "ddpc-%d-%s", (int)dead, hex);
    snprintf(live, sizeof live, "ddpc-%d-%s", (int)getpid(), hex);
    snprintf(odd, sizeof odd, "ddpc-%d-notasegment", (int)dead);
    make_shm_name(stale);
    make_shm_name(live);
    make_shm_name(odd);
    g_port = t_free_port();
    t_run_ranks(2, 35, two_rank_body, NULL);
    int stale_left = shm_name_exists(stale), live_left = shm_name_exists(live), odd_left = shm_name_exists(odd);
    char path[128];
    const char *names[] = {stale, live, odd};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "/%s", names[i]);
        shm_unlink(path);
    }
    CHECK_MSG(!stale_left, "/dev/shm/%s (pid %d is gone) is still there", stale, (int)dead);
    CHECK_MSG(live_left, "/dev/shm/%s of a live process was removed", live);
    CHECK_MSG(odd_left, "/dev/shm/%s (not a segment's name) was removed", odd);
}

TEST_T(comm_shm_off_is_tcp_everywhere, 40) {
    setenv("DDPC_SHM", "0", 1);
    g_port = t_free_port();
    t_run_ranks(4, 35, transport_body, "tcp");
}

/* Rings of 4 KiB: every message larger than a ring wraps it many times and
 * waits for room (flow control); every collective, every algorithm. */
TEST_T(comm_shm_ring_smaller_than_messages, 110) {
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_SHM_BYTES", "4096", 1);
    run_world(3, allreduce_body, 50);
    run_all(4, "ring");
    run_all(3, "rhd");
    run_all(3, "tree");
}

TEST_T(comm_shm_w8_on_two_cores, 60) {
    setenv("DDPC_SHM", "1", 1);
    run_world(8, allreduce_body, 55);
}

/* Rank 1 has DDPC_SHM=0 and rank 2 other DDPC_SHM_BYTES: the pairs with
 * them use TCP (with a warning on the ranks that wanted shm), 0-3 shm. */
static void differ_body(int rank, int world, void *arg) {
    log_to_file("differ", rank);
    setenv("DDPC_SHM", rank == 1 ? "0" : "1", 1);
    setenv("DDPC_SHM_BYTES", rank == 2 ? "8192" : "4096", 1);
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    for (int p = 0; p < world; p++) {
        const char *want = p == rank ? "self" : (p == 0 || p == 3) && (rank == 0 || rank == 3) ? "shm" : "tcp";
        CHECK_STR(ddpc__peer_transport(c, p), want);
    }
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *log = slurp_log("differ", rank);
    if (rank != 1) CHECK_CONTAINS(log, "rank 1 on this host has DDPC_SHM=0");
    if (rank == 0 || rank == 3) CHECK_CONTAINS(log, "rank 2 on this host has DDPC_SHM_BYTES=8192");
    if (rank == 2) CHECK_CONTAINS(log, "has DDPC_SHM_BYTES=4096, this rank 8192");
    if (rank == 1) CHECK(!strstr(log, "WARN"));
}

TEST_T(comm_shm_settings_that_differ_fall_back_to_tcp, 40) {
    g_port = t_free_port();
    t_run_ranks(4, 35, differ_body, NULL);
}

/* A /dev/shm too small for one segment: a warning naming the reason and
 * DDPC_SHM=0, TCP between every pair, collectives as usual, nothing left. */
static void full_body(int rank, int world, void *arg) {
    log_to_file("full", rank);
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_DEBUG", "INFO", 1);
    setenv("DDPC_DEBUG_SUBSYS", "INIT,SHM", 1);
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    check_transports(c, "tcp", world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *log = slurp_log("full", rank);
    CHECK_CONTAINS(log, "tcp to ranks");
    if (rank < world - 1) { /* the creators say why (the last rank only joins) */
        CHECK_CONTAINS(log, "no shared memory with rank");
        CHECK_CONTAINS(log, "posix_fallocate");
        CHECK_CONTAINS(log, "DDPC_SHM=0");
    }
}

TEST_T(comm_shm_full_dev_shm_falls_back_to_tcp, 40) {
    /* a private /dev/shm of 64 KiB for this test's processes only */
    if (geteuid() != 0) SKIP("needs root to mount a small /dev/shm");
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64k,mode=1777") != 0)
        SKIP("cannot mount a private /dev/shm: %s", strerror(errno));
    CHECK_EQ(shm_segments(0), 0);
    g_port = t_free_port();
    t_run_ranks(3, 35, full_body, NULL);
    CHECK_EQ(shm_segments(0), 0); /* the literal count: only this test's ranks write here */
}

/* Two network-namespace "nodes" of two ranks each (different host ids):
 * shm within a node, TCP across. */
static char g_ns[2][32];
static int g_subnet = 11;

static void netns_body(int rank, int world, void *arg) {
    char path[96];
    snprintf(path, sizeof path, "/var/run/netns/%s", g_ns[rank / 2]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK_MSG(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "entering %s: %s", path, strerror(errno));
    close(fd);
    t_set_rank_env(rank, world, g_port);
    char master[32], b[16];
    snprintf(master, sizeof master, "198.18.%d.1", g_subnet);
    setenv("MASTER_ADDR", master, 1);
    snprintf(b, sizeof b, "%d", rank % 2);
    setenv("LOCAL_RANK", b, 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_local_rank(c), rank % 2);
    CHECK_EQ(ddpc_comm_local_size(c), 2);
    check_transports(c, "shm", 2);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_shm_within_namespace_nodes_tcp_between, 60) {
    t_netns_pair("S", g_subnet, g_ns[0], g_ns[1]);
    g_port = t_free_port();
    int st[4];
    t_run_ranks_status(4, 45, netns_body, NULL, st);
    t_netns_del(g_ns[0], g_ns[1]);
    for (int r = 0; r < 4; r++)
        CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0, "rank %d failed (status %d)", r, st[r]);
}
