/* test_comm.c — communicators: bootstrap (env, URL, unique id), queries,
 * split, async ordering, abort, timeouts, a killed rank, bad environments,
 * mismatches, interface choice; plus smoke tests of each collective. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "comm/comm.h"
#include "test.h"

static int g_port;

/* Sets the rank's environment (short timeouts) and creates the communicator. */
static ddpc_comm *env_comm(int rank, int world) {
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_init_env(&c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    CHECK_EQ(ddpc_comm_size(c), world);
    return c;
}

/* ------------------------------------------------------------ allreduce smoke */

static void allreduce_body(int rank, int world, void *arg) {
    size_t counts[] = {0, 1, 7, 4097, (size_t)world - 1, 100000, 1u << 20};
    ddpc_comm *c = env_comm(rank, world);
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
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_world(int world, t_rank_fn fn, double secs) {
    g_port = t_free_port();
    t_run_ranks(world, secs, fn, NULL);
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
    t_run_ranks(world, 100, all_colls_body, (void *)algo);
}

TEST_T(comm_colls_w1, 30) { run_all(1, NULL); }
TEST_T(comm_colls_w2, 60) { run_all(2, NULL); }
TEST_T(comm_colls_w3_auto, 110) { run_all(3, NULL); }
TEST_T(comm_colls_w4_ring, 110) { run_all(4, "ring"); }
TEST_T(comm_colls_w5_tree, 110) { run_all(5, "tree"); }
TEST_T(comm_colls_w6_rhd, 110) { run_all(6, "rhd"); }
