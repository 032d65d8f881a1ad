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
