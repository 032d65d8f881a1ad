/*
 * test_coll_async.c — asynchronous collectives: several operations of
 * different kinds outstanding at once, and many allreduces queued on one
 * communicator, blocking calls between queued ones, every result checked
 * (coll_check.h); world sizes 1 to 8,
 * shared memory, TCP and 4 KiB rings.
 */
#include "coll_check.h"

/* ------------------------------------------------------------ async */

/*
 * Several operations outstanding at once on distinct buffers, of different
 * kinds, dtypes and sizes; polled with ddpc_work_test, waited in reverse
 * order, then every result checked.
 */
static void async_batch(ctx *x, int round) {
    enum { K = 8 };
    int w = x->world, r = x->rank;
    struct {
        int coll;
        ddpc_dtype t;
        ddpc_op op;
        size_t n;
    } spec[K] = {
        { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 4097 },
        { C_ALLREDUCE, DDPC_INT64, DDPC_MAX, 7 },
        { C_BROADCAST, DDPC_UINT8, DDPC_SUM, 1000 },
        { C_ALLGATHER, DDPC_FLOAT16, DDPC_SUM, 33 },
        { C_REDUCE_SCATTER, DDPC_BFLOAT16, DDPC_SUM, 100 },
        { C_ALLREDUCE, DDPC_FLOAT64, DDPC_AVG, 1u << 16 },
        { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 1u << 18 },
        { C_ALLTOALL, DDPC_INT32, DDPC_SUM, 5 },
    };
    void *sb[K], *rb[K];
    uint64_t salts[K];
    ddpc_work *wk[K + 1];
    int root = round % w;
    for (int i = 0; i < K; i++) {
        size_t n = spec[i].n, es = ddpc_dtype_size(spec[i].t), sn = n, rn = n;
        if (spec[i].coll == C_ALLGATHER) rn = (size_t)w * n;
        if (spec[i].coll == C_REDUCE_SCATTER) sn = (size_t)w * n;
        if (spec[i].coll == C_ALLTOALL) sn = rn = (size_t)w * n;
        sb[i] = xmalloc(sn * es);
        rb[i] = xmalloc(rn * es);
        memset(rb[i], 0xa5, rn * es);
        x->salt = salts[i] = mix64(x->salt + 0x77 + (uint64_t)i);
        for (size_t j = 0; j < sn; j++) {
            if (is_reducing(spec[i].coll))
                put_red(sb[i], j, spec[i].t, spec[i].op, hv(salts[i], r, j));
            else
                put_raw(sb[i], j, es, hv(salts[i], spec[i].coll == C_BROADCAST ? root : r, j));
        }
        ddpc_status s = DDPC_OK;
        combo k = { spec[i].coll, spec[i].t, spec[i].op, n, root, 0 };
        switch (spec[i].coll) {
        case C_ALLREDUCE:
            s = ddpc_allreduce_async(x->c, sb[i], rb[i], n, spec[i].t, spec[i].op, &wk[i]);
            break;
        case C_BROADCAST:
            s = ddpc_broadcast_async(x->c, sb[i], rb[i], n, spec[i].t, root, &wk[i]);
            break;
        case C_ALLGATHER: s = ddpc_allgather_async(x->c, sb[i], rb[i], n, spec[i].t, &wk[i]); break;
        case C_REDUCE_SCATTER:
            s = ddpc_reduce_scatter_async(x->c, sb[i], rb[i], n, spec[i].t, spec[i].op, &wk[i]);
            break;
        case C_ALLTOALL: s = ddpc_alltoall_async(x->c, sb[i], rb[i], n, spec[i].t, &wk[i]); break;
        default: break;
        }
        x->ops++;
        if (s != DDPC_OK) call_failed(x, &k, "issuing an async operation", s);
    }
    combo kb = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 0, 0, 0 };
    ddpc_status s = ddpc_barrier_async(x->c, &wk[K]);
    if (s != DDPC_OK) call_failed(x, &kb, "barrier_async", s);
    /* the last one issued completes last: poll it, bounded in time */
    int done = 0;
    double t0 = (double)time(NULL);
    while (!done && (double)time(NULL) - t0 < 60) {
        s = ddpc_work_test(wk[K], &done);
        if (done || s != DDPC_OK) break;
        usleep(200);
    }
    if (s != DDPC_OK || !done)
        call_failed(x, &kb, done ? "barrier_async test" : "barrier_async never completed", s);
    for (int i = K; i >= 0; i--) {
        combo k = { i < K ? spec[i].coll : C_ALLREDUCE,
                    i < K ? spec[i].t : DDPC_FLOAT32,
                    i < K ? spec[i].op : DDPC_SUM,
                    i < K ? spec[i].n : 0,
                    root,
                    0 };
        s = ddpc_work_wait(wk[i], 60);
        if (s != DDPC_OK) call_failed(x, &k, "work_wait", s);
        /* every earlier operation completed before the later ones */
        if (i < K) {
            int d = 0;
            s = ddpc_work_test(wk[i], &d);
            if (s != DDPC_OK || !d)
                report(x, &k, "work_test after wait says done=%d, %s", d, ddpc_status_str(s));
        }
        ddpc_work_destroy(wk[i]);
    }
    for (int i = 0; i < K; i++) {
        combo k = { spec[i].coll, spec[i].t, spec[i].op, spec[i].n, root, 0 };
        size_t n = spec[i].n;
        x->salt = salts[i];
        switch (spec[i].coll) {
        case C_ALLREDUCE:
            for (size_t j = 0; j < n; j++)
                if (!check_red_elem(x, &k, rb[i], j, j)) break;
            break;
        case C_REDUCE_SCATTER:
            for (size_t j = 0; j < n; j++)
                if (!check_red_elem(x, &k, rb[i], j, (size_t)r * n + j)) break;
            break;
        case C_BROADCAST:
            for (size_t j = 0; j < n; j++)
                if (!check_raw_elem(x, &k, rb[i], j, root, j)) break;
            break;
        case C_ALLGATHER:
            for (size_t j = 0; j < (size_t)w * n; j++)
                if (!check_raw_elem(x, &k, rb[i], j, (int)(j / n), j % n)) break;
            break;
        case C_ALLTOALL:
            for (size_t j = 0; j < (size_t)w * n; j++)
                if (!check_raw_elem(x, &k, rb[i], j, (int)(j / n), (size_t)r * n + j % n)) break;
            break;
        default: break;
        }
        free(sb[i]);
        free(rb[i]);
    }
}

/* Many outstanding at once, as DDP's buckets: 48 allreduces of different
 * sizes and dtypes issued back to back, then waited in issue order. */
static void async_many(ctx *x) {
    enum { M = 48 };
    static const ddpc_dtype ts[] = { DDPC_INT32, DDPC_FLOAT32, DDPC_BFLOAT16, DDPC_UINT64 };
    void *sb[M], *rb[M];
    uint64_t salts[M];
    ddpc_work *wk[M];
    for (int i = 0; i < M; i++) {
        ddpc_dtype t = ts[i % 4];
        size_t n = (size_t)(i * 37 % 301) + 1, es = ddpc_dtype_size(t);
        combo k = { C_ALLREDUCE, t, DDPC_SUM, n, 0, 0 };
        sb[i] = xmalloc(n * es);
        rb[i] = xmalloc(n * es);
        x->salt = salts[i] = mix64(x->salt + 0x99 + (uint64_t)i);
        for (size_t j = 0; j < n; j++) put_red(sb[i], j, t, DDPC_SUM, hv(salts[i], x->rank, j));
        ddpc_status s = ddpc_allreduce_async(x->c, sb[i], rb[i], n, t, DDPC_SUM, &wk[i]);
        x->ops++;
        if (s != DDPC_OK) call_failed(x, &k, "allreduce_async (48 outstanding)", s);
    }
    for (int i = 0; i < M; i++) {
        ddpc_dtype t = ts[i % 4];
        size_t n = (size_t)(i * 37 % 301) + 1;
        combo k = { C_ALLREDUCE, t, DDPC_SUM, n, 0, 0 };
        ddpc_status s = ddpc_work_wait(wk[i], 60);
        if (s != DDPC_OK) call_failed(x, &k, "work_wait (48 outstanding)", s);
        ddpc_work_destroy(wk[i]);
        x->salt = salts[i];
        for (size_t j = 0; j < n; j++)
            if (!check_red_elem(x, &k, rb[i], j, j)) break;
        free(sb[i]);
        free(rb[i]);
    }
}

/* Blocking calls between asynchronous ones still queued or running: a
 * blocking call takes the right to execute without the queue's lock when
 * nothing is queued or running, and must otherwise wait its turn (calls
 * out of order would pair different operations across ranks: a mismatch,
 * or wrong sums). Even rounds queue A async allreduces of a size that
 * keeps the progress thread busy, then make one blocking allreduce; odd
 * rounds make one blocking allreduce with those still outstanding, then
 * wait for them; every result checked. */
static void async_mixed_blocking(ctx *x) {
    enum { R = 24, A = 3 };
    size_t nb = 7, na = 20011;
    float *bs = xmalloc(nb * sizeof *bs), *br = xmalloc(nb * sizeof *br);
    float *as[A], *ar[A];
    ddpc_work *wk[A] = { 0 };
    uint64_t asalt[A] = { 0 };
    combo kb = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, nb, 0, 0 };
    combo ka = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, na, 0, 0 };
    for (int i = 0; i < A; i++) {
        as[i] = xmalloc(na * sizeof(float));
        ar[i] = xmalloc(na * sizeof(float));
    }
    for (int round = 0; round < R; round++) {
        int queues = round % 2 == 0; /* R is even: the next round waits for them */
        for (int i = 0; queues && i < A; i++) {
            x->salt = asalt[i] = mix64(x->salt + 0x55 + (uint64_t)(round * A + i));
            for (size_t j = 0; j < na; j++)
                put_red(as[i], j, DDPC_FLOAT32, DDPC_SUM, hv(asalt[i], x->rank, j));
            ddpc_status s =
                ddpc_allreduce_async(x->c, as[i], ar[i], na, DDPC_FLOAT32, DDPC_SUM, &wk[i]);
            x->ops++;
            if (s != DDPC_OK) call_failed(x, &ka, "allreduce_async (mixed with blocking)", s);
        }
        uint64_t bsalt = x->salt = mix64(x->salt + 0x66 + (uint64_t)round);
        for (size_t j = 0; j < nb; j++)
            put_red(bs, j, DDPC_FLOAT32, DDPC_SUM, hv(bsalt, x->rank, j));
        ddpc_status s = ddpc_allreduce(x->c, bs, br, nb, DDPC_FLOAT32, DDPC_SUM);
        x->ops++;
        if (s != DDPC_OK) call_failed(x, &kb, "allreduce (blocking, async ones queued)", s);
        for (size_t j = 0; j < nb; j++)
            if (!check_red_elem(x, &kb, br, j, j)) break;
        if (queues) continue;
        for (int i = 0; i < A; i++) {
            s = ddpc_work_wait(wk[i], 60);
            if (s != DDPC_OK) call_failed(x, &ka, "work_wait (mixed with blocking)", s);
            ddpc_work_destroy(wk[i]);
            wk[i] = NULL;
            x->salt = asalt[i];
            for (size_t j = 0; j < na; j++)
                if (!check_red_elem(x, &ka, ar[i], j, j)) break;
        }
    }
    for (int i = 0; i < A; i++) {
        free(as[i]);
        free(ar[i]);
    }
    free(bs);
    free(br);
}

/* ------------------------------------------------------------ the jobs */

static void async_job(ctx *x, const job *j) {
    for (int round = 0; round < 3; round++) async_batch(x, round);
    async_many(x);
    async_mixed_blocking(x);
}

COLL_AUTO_TESTS(coll_async, async_job)
