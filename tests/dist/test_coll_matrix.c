/*
 * test_coll_matrix.c — the collective correctness matrix: every collective
 * x dtype x op at counts 0, 1, 7, 4097, world-1 and 1<<20 on world sizes 1,
 * 2, 3, 4, 5 and 8, each result checked element by element against a
 * reference (coll_check.h); every root of the rooted collectives; in-place
 * variants; DDPC_ALGO=ring/rhd/tree forced; bitwise ops refused on floats.
 * Async operations, barrier, send/recv and split communicators are
 * test_coll_async.c's and test_coll_comm.c's; ddpc-bench test_coll_bench.c's.
 *
 * One TEST per (world size, algorithm): the ranks are forked processes
 * (t_run_ranks, with a deadline) that bootstrap once and loop over every
 * combination.
 *
 * Subset at count 1<<20 (every other count covers every dtype and op):
 *   reducing collectives: float32 sum, float32 avg, int32 sum, int64 max,
 *   bfloat16 sum; the others (and send/recv): float32, int32, uint8.
 * Forced algorithms (ring, rhd, tree) run the collectives that have a
 * choice of algorithm (allreduce, broadcast, reduce, allgather,
 * reduce-scatter) at every count, over every dtype with sum and every op
 * with int8, float16 and float32 (the kernels are the algorithm's
 * neighbours, not its choice; auto covers every dtype x op); at 1<<20 only
 * float32 sum and bfloat16 sum. In-place variants, all roots and the
 * bitwise refusals run under auto.
 *
 * Transports: ranks of one host use shared memory unless DDPC_SHM=0; a
 * subset runs again over TCP (DDPC_SHM=0) and over 4 KiB rings
 * (DDPC_SHM_BYTES=4096, smaller than the messages).
 */
#include "coll_check.h"

/* ------------------------------------------------------------ the matrix */

static void matrix(ctx *x, int forced) {
    size_t counts[6];
    int nc = counts_for(x->world, counts);
    long idx = 0;
    for (int coll = 0; coll < C_NCOLL; coll++) {
        if (forced && !has_algo_choice(coll)) continue;
        for (int t = 0; t < DDPC_DTYPE_COUNT; t++) {
            int nops = is_reducing(coll) ? DDPC_OP_COUNT : 1;
            if (forced && t != DDPC_INT8 && t != DDPC_FLOAT16 && t != DDPC_FLOAT32) nops = 1;
            for (int op = 0; op < nops; op++) {
                if (is_bitwise((ddpc_op)op) && !is_int((ddpc_dtype)t))
                    continue; /* see bitwise_floats_refused */
                for (int ci = 0; ci < nc; ci++) {
                    if (counts[ci] == BIG && !big_ok(coll, (ddpc_dtype)t, (ddpc_op)op)) continue;
                    if (forced && counts[ci] == BIG && op != DDPC_SUM) continue;
                    if (forced && counts[ci] == BIG && is_reducing(coll) && t != DDPC_FLOAT32 &&
                        t != DDPC_BFLOAT16)
                        continue;
                    combo k = { coll,       (ddpc_dtype)t,           (ddpc_op)op,
                                counts[ci], (int)(idx++ % x->world), 0 };
                    run_one(x, &k);
                    if (!forced && has_inplace(coll) && (counts[ci] == 7 || counts[ci] == 4097)) {
                        k.inplace = 1;
                        run_one(x, &k);
                    }
                }
            }
        }
    }
}

/* Every root of the rooted collectives, at small sizes. */
static void all_roots(ctx *x) {
    static const ddpc_dtype ts[] = { DDPC_INT8, DDPC_INT64, DDPC_FLOAT16, DDPC_FLOAT32 };
    static const size_t cs[] = { 1, 7 };
    for (int root = 0; root < x->world; root++)
        for (int ti = 0; ti < 4; ti++)
            for (int ci = 0; ci < 2; ci++) {
                combo k = { C_BROADCAST, ts[ti], DDPC_SUM, cs[ci], root, 0 };
                run_one(x, &k);
                k.inplace = 1;
                run_one(x, &k);
                k = (combo){ C_REDUCE, ts[ti], DDPC_SUM, cs[ci], root, 0 };
                run_one(x, &k);
                k.op = DDPC_MIN;
                k.inplace = 1;
                run_one(x, &k);
                k = (combo){ C_GATHER, ts[ti], DDPC_SUM, cs[ci], root, 0 };
                run_one(x, &k);
                k.coll = C_SCATTER;
                run_one(x, &k);
            }
}

/*
 * Floats have no bitwise ops: every reducing call, sync and async, with a
 * float dtype and band/bor/bxor is DDPC_ERR_INVALID_ARG naming op and dtype,
 * and uses up no sequence number (the collectives after it still match).
 */
static void bitwise_floats_refused(ctx *x) {
    static const ddpc_dtype fts[] = { DDPC_FLOAT16, DDPC_BFLOAT16, DDPC_FLOAT32, DDPC_FLOAT64 };
    double *sb = xmalloc((size_t)x->world * sizeof(double)), rb[1] = { 0 };
    for (int i = 0; i < x->world; i++) sb[i] = 1;
    for (int ti = 0; ti < 4; ti++)
        for (int op = DDPC_BAND; op <= DDPC_BXOR; op++) {
            ddpc_dtype t = fts[ti];
            char want[96];
            snprintf(want, sizeof want, "op %s needs an integer dtype, got %s",
                     ddpc_op_name((ddpc_op)op), ddpc_dtype_name(t));
            for (int call = 0; call < 6; call++) {
                ddpc_work *w = NULL;
                ddpc_status s;
                switch (call) {
                case 0: s = ddpc_allreduce(x->c, sb, rb, 1, t, (ddpc_op)op); break;
                case 1: s = ddpc_allreduce_async(x->c, sb, rb, 1, t, (ddpc_op)op, &w); break;
                case 2: s = ddpc_reduce(x->c, sb, rb, 1, t, (ddpc_op)op, 0); break;
                case 3: s = ddpc_reduce_async(x->c, sb, rb, 1, t, (ddpc_op)op, 0, &w); break;
                case 4: s = ddpc_reduce_scatter(x->c, sb, rb, 1, t, (ddpc_op)op); break;
                default: s = ddpc_reduce_scatter_async(x->c, sb, rb, 1, t, (ddpc_op)op, &w); break;
                }
                x->ops++;
                CHECK_MSG(s == DDPC_ERR_INVALID_ARG && w == NULL, "%s %s call %d: %s (%s)",
                          ddpc_dtype_name(t), ddpc_op_name((ddpc_op)op), call, ddpc_status_str(s),
                          ddpc_last_error());
                CHECK_CONTAINS(ddpc_last_error(), want);
            }
        }
    free(sb);
}

/* ------------------------------------------------------------ the jobs */

/* The matrix under the job's algorithm; under auto also every root and the
 * bitwise refusals. */
static void matrix_job(ctx *x, const job *j) {
    int forced = strcmp(j->algo, "auto") != 0;
    matrix(x, forced);
    if (!forced) {
        bitwise_floats_refused(x);
        all_roots(x);
    }
}

#define COLL_TEST(W, ALGO, SECS) COLL_JOB_TEST(coll_w##W##_##ALGO, W, ALGO, matrix_job, SECS)

COLL_TEST(1, auto, 60)
COLL_TEST(2, auto, 120)
COLL_TEST(3, auto, 150)
COLL_TEST(4, auto, 180)
COLL_TEST(5, auto, 200)
COLL_TEST(8, auto, 300)
COLL_TEST(1, ring, 60)
COLL_TEST(2, ring, 120)
COLL_TEST(3, ring, 150)
COLL_TEST(4, ring, 180)
COLL_TEST(5, ring, 200)
COLL_TEST(8, ring, 300)
COLL_TEST(2, rhd, 120)
COLL_TEST(3, rhd, 150)
COLL_TEST(4, rhd, 180)
COLL_TEST(5, rhd, 200)
COLL_TEST(8, rhd, 300)
COLL_TEST(2, tree, 120)
COLL_TEST(3, tree, 150)
COLL_TEST(4, tree, 180)
COLL_TEST(5, tree, 200)
COLL_TEST(8, tree, 300)

/* The ranks of one host use shared memory by default (every test above);
 * these runs set one variable for all ranks: DDPC_SHM=0 keeps TCP's
 * coverage, 4 KiB rings (smaller than most messages above) make every
 * large transfer wrap the ring and wait for room, and DDPC_SHM_COPY=stream
 * writes every copy of 256 bytes or more into the rings with non-temporal
 * stores (auto, above, uses both kinds on its large copies). */
#define COLL_TEST_ENV(W, ALGO, TAG, VAR, VAL, SECS) \
    COLL_JOB_TEST_ENV(coll_w##W##_##ALGO##_##TAG, W, ALGO, matrix_job, VAR, VAL, SECS)

COLL_TEST_ENV(2, auto, tcp, "DDPC_SHM", "0", 120)
COLL_TEST_ENV(3, auto, tcp, "DDPC_SHM", "0", 150)
COLL_TEST_ENV(4, ring, tcp, "DDPC_SHM", "0", 180)
COLL_TEST_ENV(5, rhd, tcp, "DDPC_SHM", "0", 200)
COLL_TEST_ENV(4, tree, tcp, "DDPC_SHM", "0", 180)
COLL_TEST_ENV(2, auto, shm4k, "DDPC_SHM_BYTES", "4096", 120)
COLL_TEST_ENV(3, auto, shm4k, "DDPC_SHM_BYTES", "4096", 150)
COLL_TEST_ENV(4, ring, shm4k, "DDPC_SHM_BYTES", "4096", 180)
COLL_TEST_ENV(5, rhd, shm4k, "DDPC_SHM_BYTES", "4096", 200)
COLL_TEST_ENV(4, tree, shm4k, "DDPC_SHM_BYTES", "4096", 180)
COLL_TEST_ENV(8, ring, shm4k, "DDPC_SHM_BYTES", "4096", 300)
COLL_TEST_ENV(2, auto, shmstream, "DDPC_SHM_COPY", "stream", 120)
COLL_TEST_ENV(5, ring, shmstream, "DDPC_SHM_COPY", "stream", 200)
COLL_TEST_ENV(3, rhd, shmcached, "DDPC_SHM_COPY", "cached", 150)

/* Streaming copies into 4 KiB rings: every copy wraps or ends unaligned. */
TEST_T(coll_w3_auto_shm4kstream, 150) {
    setenv("DDPC_SHM_BYTES", "4096", 1);
    setenv("DDPC_SHM_COPY", "stream", 1);
    run_job(3, "auto", 145, matrix_job);
}

/* ------------------------------------------------------------ many ranks */

/* 16 and 32 ranks on this machine's few cores: every collective x dtype x
 * op at counts 0, 1, 7, 4097 and world-1 (no 1<<20: a smaller matrix than
 * at 8), the root moving with each call; 64 KiB rings keep the /dev/shm
 * segments small (32 ranks: 496 pairs). */
static void many_ranks_job(ctx *x, const job *j) {
    static const size_t base[] = { 0, 1, 7, 4097 };
    size_t counts[5];
    int nc = 0;
    for (int i = 0; i < 4; i++) counts[nc++] = base[i];
    counts[nc++] = (size_t)x->world - 1;
    long idx = 0;
    for (int coll = 0; coll < C_NCOLL; coll++)
        for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
            for (int op = 0; op < (is_reducing(coll) ? DDPC_OP_COUNT : 1); op++) {
                if (is_bitwise((ddpc_op)op) && !is_int((ddpc_dtype)t)) continue;
                for (int ci = 0; ci < nc; ci++) {
                    combo k = { coll,       (ddpc_dtype)t,           (ddpc_op)op,
                                counts[ci], (int)(idx++ % x->world), 0 };
                    run_one(x, &k);
                }
            }
}

TEST_T(coll_w16_many_ranks, 300) {
    setenv("DDPC_SHM_BYTES", "65536", 1);
    run_job(16, "auto", 295, many_ranks_job);
}

TEST_T(coll_w32_many_ranks, 400) {
    setenv("DDPC_SHM_BYTES", "65536", 1);
    run_job(32, "auto", 395, many_ranks_job);
}
