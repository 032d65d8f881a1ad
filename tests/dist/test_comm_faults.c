/* test_comm_faults.c — what goes wrong, named and bounded: abort, a killed rank, bad
 * environments, an unreachable master, mismatched collectives, the exec
 * timeout. */
#include "comm_fixtures.h"

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
        blocked_call b = { c, DDPC_OK, 0 };
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
    rank2_killed_checks(c, rank, world > 4 ? 1u << 20 : 4u << 20);
}

static void run_killed(int world) { run_rank2_killed(world, killed_body, NULL); }

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

/* Ranks 0 and 1 of 3 come; 2 never does. arg: rank 1's
 * DDPC_CONNECT_TIMEOUT, when not 1.5 s. */
static void missing_body(int rank, int world, void *arg) {
    t_set_rank_env(rank, 3, g_port);
    char t1[32];
    snprintf(t1, sizeof t1, "%g", arg ? *(const double *)arg : 1.5);
    setenv("DDPC_CONNECT_TIMEOUT", rank == 1 ? t1 : "1.5", 1);
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

/* Rank 1's first wait for rank 0's table takes all of its timeout (under
 * 1 s): the missing rank is still named, looked up after that wait. */
TEST_T(comm_connect_timeout_names_missing_after_one_wait, 20) {
    g_port = t_free_port();
    double t1 = 0.8;
    t_run_ranks(2, 15, missing_body, &t1);
}

/* ------------------------------------------------------------ mismatches */

/* What rank 1, the odd one out, changes in its call. */
enum {
    MM_OP,
    MM_COUNT,
    MM_DTYPE,
    MM_ROOT,
    MM_KIND,
    /* rooted collectives whose data crosses the link root <-> root+1, which
     * carries no check of its own (ddpc__check_ring_post) */
    MM_BCAST_COUNT,
    MM_REDUCE_OP,
    MM_GATHER_COUNT,
    MM_SCATTER_COUNT,
};

typedef struct {
    int which;
} mm_arg;

static void mismatch_body(int rank, int world, void *arg) {
    int which = ((mm_arg *)arg)->which, odd = rank == 1;
    ddpc_comm *c = env_comm(rank, world);
    int32_t buf[64] = { 0 }, out[64 * 8];
    sum_check(c, world * (world - 1) / 2); /* one good one first */
    ddpc_status s;
    /* how rank 1's call and the others' are named in the error */
    const char *one = "", *rest = "";
    size_t count = odd ? 9 : 8;
    ddpc_op op = odd ? DDPC_MAX : DDPC_SUM;
    switch (which) {
    case MM_OP:
        s = ddpc_allreduce(c, buf, out, 8, DDPC_INT32, op);
        one = "max", rest = "sum";
        break;
    case MM_COUNT:
        s = ddpc_allreduce(c, buf, out, count, DDPC_INT32, DDPC_SUM);
        one = "count=9", rest = "count=8";
        break;
    case MM_DTYPE:
        s = ddpc_allreduce(c, buf, out, 8, odd ? DDPC_FLOAT32 : DDPC_INT32, DDPC_SUM);
        one = "float32", rest = "int32";
        break;
    case MM_ROOT:
        s = ddpc_broadcast(c, buf, buf, 8, DDPC_INT32, odd ? 1 : 0);
        one = "root=1", rest = "root=0";
        break;
    case MM_BCAST_COUNT: /* root+1 checks only the data's header */
        s = ddpc_broadcast(c, buf, buf, count, DDPC_INT32, 0);
        one = "count=9", rest = "count=8";
        break;
    case MM_REDUCE_OP: /* root+1 sends the root only its data */
        s = ddpc_reduce(c, buf, out, 8, DDPC_INT32, op, 0);
        one = "max", rest = "sum";
        break;
    case MM_GATHER_COUNT: /* root+1 sends the root only its data */
        s = ddpc_gather(c, buf, out, count, DDPC_INT32, 0);
        one = "count=9", rest = "count=8";
        break;
    case MM_SCATTER_COUNT: /* the root sends root+1 only its data */
        s = ddpc_scatter(c, out, buf, count, DDPC_INT32, 0);
        one = "count=9", rest = "count=8";
        break;
    default: /* MM_KIND */
        if (odd)
            s = ddpc_allgather(c, buf, out, 8, DDPC_INT32);
        else
            s = ddpc_allreduce(c, buf, out, 8, DDPC_INT32, DDPC_SUM);
        one = "allgather", rest = "allreduce";
        break;
    }
    const char *mine = odd ? one : rest, *theirs = odd ? rest : one;
    /* a broadcast's root may return before its neighbours' checks come in
     * (ddpc__check_ring_post): a mismatch it alone sees fails its next
     * call, naming the broadcast */
    int rooted = which == MM_ROOT || which >= MM_BCAST_COUNT;
    if (rooted && s == DDPC_OK) s = ddpc_barrier(c);
    /* the odd one out names both calls; the others fail too (naming what
     * they saw: the mismatch, or the odd one giving up), none hangs */
    if (odd) {
        CHECK_STATUS(s, DDPC_ERR_MISMATCH);
        CHECK_CONTAINS(ddpc_last_error(), mine);
        CHECK_CONTAINS(ddpc_last_error(), theirs);
        CHECK_CONTAINS(ddpc_last_error(), "this rank (1)");
        CHECK_CONTAINS(ddpc_comm_last_error(c), theirs);
    } else {
        CHECK_MSG(s == DDPC_ERR_MISMATCH || s == DDPC_ERR_PEER_LOST || (rooted && s == DDPC_OK),
                  "rank %d: %s (%s)", rank, ddpc_status_str(s), ddpc_last_error());
        if (s == DDPC_ERR_MISMATCH) CHECK_CONTAINS(ddpc_last_error(), "mismatch");
    }
    /* the communicator stays failed */
    if (s != DDPC_OK)
        CHECK_EQ(ddpc_barrier(c), s);
    else
        CHECK(ddpc_barrier(c) != DDPC_OK);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_mismatch(int which, int world) {
    mm_arg a = { which };
    g_port = t_free_port();
    t_run_ranks(world, 25, mismatch_body, &a);
}

TEST_T(comm_mismatch_op, 30) { run_mismatch(MM_OP, 2); }
TEST_T(comm_mismatch_count, 30) { run_mismatch(MM_COUNT, 3); }
TEST_T(comm_mismatch_dtype, 30) { run_mismatch(MM_DTYPE, 2); }
TEST_T(comm_mismatch_root, 30) { run_mismatch(MM_ROOT, 3); }
/* both ranks root: each only sends, and the check comes after its data */
TEST_T(comm_mismatch_root_2ranks, 30) { run_mismatch(MM_ROOT, 2); }
TEST_T(comm_mismatch_kind, 30) { run_mismatch(MM_KIND, 4); }
TEST_T(comm_mismatch_broadcast_count, 30) { run_mismatch(MM_BCAST_COUNT, 2); }
TEST_T(comm_mismatch_broadcast_count_3ranks, 30) { run_mismatch(MM_BCAST_COUNT, 3); }
TEST_T(comm_mismatch_reduce_op, 30) { run_mismatch(MM_REDUCE_OP, 2); }
TEST_T(comm_mismatch_reduce_op_3ranks, 30) { run_mismatch(MM_REDUCE_OP, 3); }
TEST_T(comm_mismatch_gather_count, 30) { run_mismatch(MM_GATHER_COUNT, 2); }
TEST_T(comm_mismatch_scatter_count_3ranks, 30) { run_mismatch(MM_SCATTER_COUNT, 3); }

/* Both ranks root of the last broadcast: each only sends, and the mismatch
 * fails the broadcast where the peer's check comes in while it sends, else
 * ddpc_comm_destroy, which waits for the parked checks. */
static void mismatch_last_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t buf[8] = { 0 };
    sum_check(c, world * (world - 1) / 2);
    ddpc_status s = ddpc_broadcast(c, buf, buf, 8, DDPC_INT32, rank);
    if (s == DDPC_OK)
        s = ddpc_comm_destroy(c);
    else
        CHECK_OK(ddpc_comm_destroy(c)); /* failed: closes at once */
    CHECK_STATUS(s, DDPC_ERR_MISMATCH);
    CHECK_CONTAINS(ddpc_last_error(), "root=0");
    CHECK_CONTAINS(ddpc_last_error(), "root=1");
}

TEST_T(comm_mismatch_root_at_destroy, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, mismatch_last_body, NULL);
}

/* A broadcast's root runs ahead: its calls return while its peer has not
 * started them (up to DDPC_PARKED checks), and each arrives intact. */
static void run_ahead_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    enum { CALLS = 8 };
    int32_t v[CALLS][5];
    if (rank == 0) {
        double t0 = ddpc__now();
        for (int i = 0; i < CALLS; i++) {
            for (int j = 0; j < 5; j++) v[i][j] = 100 * i + j;
            CHECK_OK(ddpc_broadcast(c, v[i], v[i], 5, DDPC_INT32, 0));
        }
        double took = ddpc__now() - t0;
        CHECK_MSG(took < 0.5, "the root waited %.2f s for a peer that sleeps 1.5 s", took);
    } else {
        ddpc__sleep(1.5);
        for (int i = 0; i < CALLS; i++) {
            memset(v[i], 0, sizeof v[i]);
            CHECK_OK(ddpc_broadcast(c, v[i], v[i], 5, DDPC_INT32, 0));
            for (int j = 0; j < 5; j++) CHECK_EQ(v[i][j], 100 * i + j);
        }
    }
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_broadcast_root_runs_ahead, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, run_ahead_body, NULL);
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
