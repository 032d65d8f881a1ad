/*
 * test_hier.c — several "hosts" on one machine (DDPC_HOST_ID per rank) and
 * the hierarchical collectives over them:
 *   - the host layout: host count, each rank's host and local rank, shared
 *     memory only between ranks of one host id, the INFO line;
 *   - allreduce, reduce-scatter, allgather and broadcast under
 *     DDPC_ALGO=hier (forced) and auto, every dtype x op at counts 0, 1, 7,
 *     4097, 100003 (large path, uneven blocks) and 1<<20 (a subset), in
 *     place too, checked element by element against the reference
 *     (coll_check.h) on layouts 2x2, 3 hosts of {1,2,3} and {3,2,1}, 2x4,
 *     4x2, interleaved hosts, {3,1}, {1,3,2,2} (a host of one between
 *     larger ones), 2x1, 1x3 and DDPC_SHM=0, all four hierarchical on
 *     every layout; HCCL_ALGO's level1:H-D_R and level1:ring; flat on
 *     interleaved hosts, where the flat ring runs in host order;
 *   - the other collectives still right under hier and flat;
 *   - auto picks the hierarchical algorithms where the communicator spans
 *     several hosts and some host has several ranks (TRACE log), flat and
 *     one rank per host do not; flat on interleaved hosts orders its ring
 *     by host;
 *   - the pipelined hierarchical allreduce (DDPC_CHUNK=4096 makes the cost
 *     model cut a few MiB into pieces) on 2x2, 4x2, 3x2 and over TCP,
 *     every dtype, sum/avg/max, a prime count, in place;
 *   - auto's cost model as run: its choice across hosts for 8 B, 1 MiB and
 *     32 MiB on 4x2, 4x1 and 3x1, logged at INFO, the results checked.
 * Ranks are forked processes with a deadline (coll_check.h's run_job);
 * 8 ranks may share 2 cores.
 */
#include "coll/coll.h"
#include "coll_check.h"
#include "comm/comm.h"

#define MAXW 16

/* A job with its host layout: host[r] is rank r's host index (hosts
 * numbered in order of their lowest rank, as the communicator does). */
typedef struct hjob {
    job j; /* first: the body gets it back from coll_check.h's job pointer */
    int world, nhosts;
    int host[MAXW];
    int want_hier;      /* what ddpc__tune_hier must say for a non-empty allreduce */
    int want_host_ring; /* the flat ring must run in host order (not hierarchical, and
                         * some host's ranks not together in rank order) */
} hjob;

/* ------------------------------------------------------------ layout */

static int shm_on(void) {
    const char *v = getenv("DDPC_SHM");
    return !(v && !strcmp(v, "0"));
}

/* The job for the layout given as the host index of each rank ("0011")
 * under DDPC_ALGO=algo. */
static void make_job(hjob *hj, const char *layout, const char *algo, coll_body body) {
    memset(hj, 0, sizeof *hj);
    hj->world = (int)strlen(layout);
    CHECK(hj->world <= MAXW);
    int most = 0;
    for (int r = 0; r < hj->world; r++) {
        hj->host[r] = layout[r] - '0';
        if (hj->host[r] + 1 > hj->nhosts) hj->nhosts = hj->host[r] + 1;
    }
    for (int h = 0; h < hj->nhosts; h++) {
        int k = 0;
        for (int r = 0; r < hj->world; r++) k += hj->host[r] == h;
        if (k > most) most = k;
    }
    int hier = !strcmp(algo, "hier") || strstr(algo, "level1:ring") || strstr(algo, "level1:H-D_R");
    hj->want_hier = hj->nhosts >= 2 && (hier || (!strcmp(algo, "auto") && most >= 2));
    int breaks = 0;
    for (int r = 0; r < hj->world; r++) breaks += hj->host[r] != hj->host[(r + 1) % hj->world];
    hj->want_host_ring = hj->nhosts >= 2 && !hj->want_hier && breaks > hj->nhosts;
    hj->j = (job){ t_free_port(), algo, NULL, body };
}

/* The layout the communicator found is the one the job set up. */
static void check_layout(ctx *x, const hjob *hj) {
    ddpc_comm *c = x->c;
    int r = x->rank, local = 0, lsize = 0, most = 0;
    for (int q = 0; q < hj->world; q++) {
        if (hj->host[q] == hj->host[r]) {
            lsize++;
            if (q < r) local++;
        }
        int k = 0;
        for (int p = 0; p < hj->world; p++) k += hj->host[p] == hj->host[q];
        if (k > most) most = k;
    }
    CHECK_EQ(c->nhosts, hj->nhosts);
    CHECK_EQ(c->host, hj->host[r]);
    CHECK_EQ(c->local_rank, local);
    CHECK_EQ(c->local_size, lsize);
    CHECK_EQ(ddpc_comm_local_rank(c), local);
    CHECK_EQ(ddpc_comm_local_size(c), lsize);
    CHECK_EQ(c->max_local, most);
    for (int q = 0; q < hj->world; q++) {
        CHECK_EQ(c->host_of[q], hj->host[q]);
        if (q == r) continue;
        const char *want = hj->host[q] == hj->host[r] && shm_on() ? "shm" : "tcp";
        CHECK_MSG(!strcmp(ddpc__peer_transport(c, q), want), "rank %d to rank %d: %s, want %s", r,
                  q, ddpc__peer_transport(c, q), want);
    }
    CHECK_EQ(ddpc__tune_hier(c, DDPC_K_ALLREDUCE, 1), hj->want_hier);
    CHECK_EQ(ddpc__tune_hier(c, DDPC_K_REDUCE_SCATTER, 1), hj->want_hier);
    CHECK_EQ(ddpc__tune_hier(c, DDPC_K_ALLGATHER, 1), hj->want_hier);
    CHECK_EQ(ddpc__tune_hier(c, DDPC_K_ALLREDUCE, 0), 0);
    CHECK_EQ(ddpc__tune_hier(c, DDPC_K_BROADCAST, 1), hj->want_hier);
    CHECK_EQ(ddpc__tune_hier(c, DDPC_K_REDUCE, 1), 0);
}

/* ------------------------------------------------------------ the bodies */

/* Allreduce and reduce-scatter: every dtype x op at counts 0, 1, 7, 4097,
 * 100003 and (coll_check.h's subset; reduce-scatter float32 sum only)
 * 1<<20; in place at 7, 4097 and 100003. Allgather and broadcast (roots
 * varying): every dtype at those counts (1<<20: float32, int32, uint8). */
static void matrix(ctx *x) {
    static const size_t counts[] = { 0, 1, 7, 4097, 100003, BIG };
    static const int colls[] = { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER, C_BROADCAST };
    for (int ki = 0; ki < 4; ki++)
        for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
            for (int op = 0; op < DDPC_OP_COUNT; op++) {
                int coll = colls[ki];
                if (is_bitwise((ddpc_op)op) && !is_int((ddpc_dtype)t)) continue;
                if (!is_reducing(coll) && op > 0) continue;
                for (int ci = 0; ci < 6; ci++) {
                    if (counts[ci] > 4097 && !lean_ok(coll, (ddpc_dtype)t, (ddpc_op)op)) continue;
                    if (counts[ci] == BIG && !big_ok(coll, (ddpc_dtype)t, (ddpc_op)op)) continue;
                    if (counts[ci] == BIG && coll == C_REDUCE_SCATTER &&
                        (t != DDPC_FLOAT32 || op != DDPC_SUM))
                        continue;
                    int root = (t + ci) % x->world;
                    combo k = { coll, (ddpc_dtype)t, (ddpc_op)op, counts[ci], root, 0 };
                    run_one(x, &k);
                    if (counts[ci] == 7 || counts[ci] == 4097 || counts[ci] == 100003) {
                        k.inplace = 1;
                        run_one(x, &k);
                    }
                }
            }
}

/* The other collectives, a few dtypes and counts, every root once. */
static void others(ctx *x) {
    static const ddpc_dtype ts[] = { DDPC_INT8, DDPC_FLOAT16, DDPC_FLOAT32 };
    static const size_t cs[] = { 1, 4097, 100003 };
    for (int coll = C_BROADCAST; coll < C_NCOLL; coll++)
        for (int ti = 0; ti < 3; ti++)
            for (int ci = 0; ci < 3; ci++) {
                if (cs[ci] > 4097 && !lean_ok(coll, ts[ti], DDPC_SUM)) continue;
                combo k = { coll, ts[ti], DDPC_SUM, cs[ci], (ti * 3 + ci) % x->world, 0 };
                run_one(x, &k);
            }
}

static void hier_body(ctx *x, const job *j) {
    const hjob *hj = (const hjob *)j;
    check_layout(x, hj);
    matrix(x);
    others(x);
}

/* ------------------------------------------------------------ the jobs */

static void hier_rank(int rank, int world, void *arg) {
    const hjob *hj = arg;
    char id[32];
    snprintf(id, sizeof id, "host %c", 'a' + hj->host[rank]); /* the space becomes '_' */
    setenv("DDPC_HOST_ID", id, 1);
    rank_main(rank, world, (void *)&hj->j);
}

/* Runs body on the layout (see make_job) under DDPC_ALGO=algo. */
static void run_layout(const char *layout, const char *algo, double timeout_s, coll_body body) {
    hjob hj;
    make_job(&hj, layout, algo, body);
    t_run_ranks(hj.world, timeout_s, hier_rank, &hj);
}

#define HIER_TEST(NAME, LAYOUT, ALGO, SECS) \
    TEST_T(NAME, SECS) { run_layout(LAYOUT, #ALGO, (SECS)-5, hier_body); }

HIER_TEST(hier_2x2, "0011", hier, 120)
HIER_TEST(hier_2x2_auto, "0011", auto, 120)
HIER_TEST(hier_3h_123, "011222", hier, 200)
HIER_TEST(hier_3h_123_auto, "011222", auto, 200)
HIER_TEST(hier_3h_321, "000112", hier, 200)
HIER_TEST(hier_2x4, "00001111", hier, 300)
HIER_TEST(hier_2x4_auto, "00001111", auto, 300)
HIER_TEST(hier_4x2, "00112233", hier, 300)
HIER_TEST(hier_4x2_auto, "00112233", auto, 300)
HIER_TEST(hier_interleaved, "010101", hier, 200)
HIER_TEST(hier_interleaved_flat, "010101", flat, 200)
HIER_TEST(hier_3_1, "0001", hier, 120)
HIER_TEST(hier_4h_1322, "01112233", hier, 300)
HIER_TEST(hier_2x1, "01", hier, 90)
HIER_TEST(hier_2x1_auto, "01", auto, 90)
HIER_TEST(hier_2x2_flat, "0011", flat, 120)
HIER_TEST(hier_2x2_ring, "0011", ring, 120)
HIER_TEST(hier_1x3, "000", hier, 90)
HIER_TEST(hier_4x4_auto, "0000111122223333", auto, 400)

/* HCCL_ALGO's syntax in DDPC_ALGO (test_algo.c checks the alias):
 * hierarchical, the inter-host step of allreduce recursive halving-doubling
 * (3 hosts: the fold to 2) or a ring. */
TEST_T(hier_3h_123_hccl_hd_r, 200) {
    run_layout("011222", "level0:NA;level1:H-D_R", 195, hier_body);
}
TEST_T(hier_4x2_hccl_ring, 300) { run_layout("00112233", "level0:NA;level1:ring", 295, hier_body); }

TEST_T(hier_2x2_tcp, 120) {
    setenv("DDPC_SHM", "0", 1);
    run_layout("0011", "hier", 115, hier_body);
}

/* The pipelined hierarchical allreduce (hier.c's hier_pipe): with
 * DDPC_CHUNK=4096 and DDPC_NET_US=0 auto's cost model cuts vectors of 1-8
 * MiB into 16 pieces (test_algo.c checks the model); every dtype at 1<<20
 * and a prime count (uneven pieces and blocks), sum, avg and max, in
 * place too. */
static void pipe_body(ctx *x, const job *j) {
    static const size_t counts[] = { BIG, 1000003 };
    static const ddpc_op ops[] = { DDPC_SUM, DDPC_AVG, DDPC_MAX };
    check_layout(x, (const hjob *)j);
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
        for (int oi = 0; oi < 3; oi++)
            for (int ci = 0; ci < 2; ci++) {
                if (oi != 0 && (t == DDPC_INT8 || t == DDPC_UINT8 || t == DDPC_INT16)) continue;
                combo k = { C_ALLREDUCE, (ddpc_dtype)t, ops[oi], counts[ci], 0, ci };
                run_one(x, &k);
            }
}

#define PIPE_TEST(NAME, LAYOUT, SECS)                    \
    TEST_T(NAME, SECS) {                                 \
        setenv("DDPC_CHUNK", "4096", 1);                 \
        setenv("DDPC_NET_US", "0", 1);                   \
        run_layout(LAYOUT, "auto", (SECS)-5, pipe_body); \
    }

PIPE_TEST(hier_pipe_2x2, "0011", 200)
PIPE_TEST(hier_pipe_4x2, "00112233", 300)
PIPE_TEST(hier_pipe_3x2, "001122", 300)
TEST_T(hier_pipe_2x2_tcp, 200) {
    setenv("DDPC_SHM", "0", 1);
    setenv("DDPC_CHUNK", "4096", 1);
    setenv("DDPC_NET_US", "0", 1);
    run_layout("0011", "auto", 195, pipe_body);
}

/* ------------------------------------------------------------ auto's choice */

/* Rank 0's log file (the test process's pid in its name). */
static const char *log_path(void) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ddpc-test-hier-%d.log", (int)getppid());
    return path;
}

/* Two allreduces (large and small path), a reduce-scatter and an
 * allgather under the job's algorithm. */
static void choice_body(ctx *x, const job *j) {
    combo k = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 1 << 16, 0, 0 };
    run_one(x, &k);
    k.count = 3;
    run_one(x, &k);
    k.coll = C_REDUCE_SCATTER;
    run_one(x, &k);
    k.coll = C_ALLGATHER;
    run_one(x, &k);
    k.coll = C_BROADCAST;
    k.root = x->world - 1;
    run_one(x, &k);
    k.count = 1 << 16;
    run_one(x, &k);
}

/* Runs rank 0 (hier_rank) logging at level for subsys into a file, and
 * returns what it logged (static storage). */
static const char *logged_rank0(int world, void *arg, const char *level, const char *subsys) {
    int saved = dup(2); /* the checks report on the real stderr */
    CHECK(saved >= 0 && freopen(log_path(), "w", stderr) != NULL);
    setenv("DDPC_DEBUG", level, 1);
    setenv("DDPC_DEBUG_SUBSYS", subsys, 1);
    hier_rank(0, world, arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    static char buf[1 << 20];
    FILE *f = fopen(log_path(), "r");
    CHECK(f != NULL);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(log_path());
    return buf;
}

/* Rank 0 logs at TRACE into a file, then checks that the log shows the
 * host layout and says (or, under flat and on one rank per host, does not
 * say) that both allreduces ran hierarchically. */
static void choice_rank(int rank, int world, void *arg) {
    const hjob *hj = arg;
    if (rank != 0) {
        hier_rank(rank, world, arg);
        return;
    }
    const char *buf = logged_rank0(world, arg, "TRACE", "INIT,COLL");
    char want[64];
    snprintf(want, sizeof want, "host layout: %d host%s", hj->nhosts, hj->nhosts > 1 ? "s" : "");
    CHECK_CONTAINS(buf, want);
    CHECK_CONTAINS(buf, "host 0 'host_a': ranks 0");
    if (hj->want_hier) {
        CHECK_CONTAINS(buf, "hierarchical allreduce of 65536 elements");
        CHECK_CONTAINS(buf, "hierarchical allreduce of 3 elements");
        CHECK_CONTAINS(buf, "hierarchical broadcast of 12 bytes");
        CHECK_CONTAINS(buf, "hierarchical broadcast of 262144 bytes");
    } else {
        CHECK_MSG(!strstr(buf, "hierarchical allreduce") && !strstr(buf, "hierarchical broadcast"),
                  "ran hierarchically: %s", buf);
    }
    if (hj->want_host_ring)
        CHECK_CONTAINS(buf, "flat ring in host order");
    else
        CHECK_MSG(!strstr(buf, "flat ring in host order"), "host-ordered ring: %s", buf);
    if (hj->want_hier) {
        CHECK_CONTAINS(buf, "hierarchical reduce-scatter of 3 elements");
        CHECK_CONTAINS(buf, "hierarchical allgather of 12 bytes");
    } else {
        CHECK_MSG(!strstr(buf, "hierarchical reduce-scatter") &&
                      !strstr(buf, "hierarchical allgather"),
                  "ran hierarchically: %s", buf);
    }
}

static void run_choice(const char *layout, const char *algo) {
    hjob hj;
    make_job(&hj, layout, algo, choice_body);
    t_run_ranks(hj.world, 55, choice_rank, &hj);
}

TEST(hier_auto_picks_hier_2x2) { run_choice("0011", "auto"); }
TEST(hier_auto_picks_hier_3h) { run_choice("011222", "auto"); }
TEST(hier_auto_flat_one_per_host) { run_choice("012", "auto"); }
TEST(hier_auto_flat_one_host) { run_choice("0000", "auto"); }
TEST(hier_flat_forced) { run_choice("0011", "flat"); }
/* Hosts interleaved in rank order: the flat ring goes host by host. */
TEST(hier_flat_interleaved_host_order) { run_choice("010101", "flat"); }

/* ------------------------------------------------ auto's cost model, run */

/* Allreduces of 8 B, 1 MiB and 32 MiB (float32 sum), checked. */
static void model_body(ctx *x, const job *j) {
    static const size_t counts[] = { 2, 1 << 18, 1 << 23 };
    (void)j;
    for (int i = 0; i < 3; i++) {
        combo k = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, counts[i], 0, 0 };
        run_one(x, &k);
    }
}

/* The expected INFO lines of rank 0, for model_rank. */
static const char *const *model_want;

/* Rank 0 logs INFO (COLL) into a file and finds there each of model_want:
 * the choice of the cost model (test_algo.c checks the model itself) for
 * each size, logged once. */
static void model_rank(int rank, int world, void *arg) {
    if (rank != 0) {
        hier_rank(rank, world, arg);
        return;
    }
    const char *buf = logged_rank0(world, arg, "INFO", "COLL");
    for (int i = 0; model_want[i]; i++) CHECK_CONTAINS(buf, model_want[i]);
}

static void run_model(const char *layout, const char *const *want) {
    hjob hj;
    model_want = want;
    make_job(&hj, layout, "auto", model_body);
    t_run_ranks(hj.world, 115, model_rank, &hj);
}

/* 4 hosts x 2: recursive doubling across hosts for 8 B, halving-doubling
 * (2 steps each way) for 1 MiB, the pipelined ring for 32 MiB. */
TEST_T(hier_auto_model_4x2, 120) {
    static const char *const want[] = {
        "allreduce of 8 bytes on 4 hosts x 2: recursive doubling (DDPC_ALGO=auto's cost model",
        "allreduce of 1048576 bytes on 4 hosts x 2: halving-doubling (",
        "allreduce of 33554432 bytes on 4 hosts x 2: ring in 8 pipelined pieces (", NULL
    };
    run_model("00112233", want);
}

/* One rank per host (the flat allreduce): the same model without the
 * host's steps (fewer elements than ranks: recursive doubling, unlogged);
 * on 3 hosts the ring, as halving-doubling would fold 3 into 2. Each
 * choice is logged at INFO once. */
TEST_T(hier_auto_model_4x1, 120) {
    static const char *const want[] = {
        "allreduce of 1048576 bytes on 4 hosts x 1: halving-doubling (", NULL
    };
    run_model("0123", want);
}
TEST_T(hier_auto_model_3x1, 120) {
    static const char *const want[] = { "allreduce of 1048576 bytes on 3 hosts x 1: ring (", NULL };
    run_model("012", want);
}
