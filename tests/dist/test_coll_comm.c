/*
 * test_coll_comm.c — the operations beside the collectives: barrier,
 * send/recv (a ring, and all pairs at once) and collectives on split
 * communicators, every result checked (coll_check.h); world sizes 1 to 8,
 * shared memory, TCP and 4 KiB rings.
 */
#include "coll_check.h"

/* ------------------------------------------------------------ barrier */

/*
 * Each round, rank r waits r milliseconds, bumps a counter shared by all
 * ranks, and enters the barrier; after it, every rank must see all world
 * bumps of this round. A barrier that does not wait is caught by rank 0,
 * which arrives first.
 */
static void barrier_rounds(ctx *x, atomic_long *shared) {
    combo k = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 0, 0, 0 };
    for (int round = 1; round <= 10; round++) {
        usleep((useconds_t)(x->rank * 1000));
        atomic_fetch_add(shared, 1);
        ddpc_status s = ddpc_barrier(x->c);
        x->ops++;
        if (s != DDPC_OK) call_failed(x, &k, "barrier", s);
        long seen = atomic_load(shared);
        if (seen < (long)x->world * round)
            report(x, &k, "after barrier round %d the counter is %ld, want >= %ld", round, seen,
                   (long)x->world * round);
    }
}

/* ------------------------------------------------------------ send/recv */

/*
 * 1. A ring: rank r sends to r+1 and receives from r-1, even ranks sending
 *    first and odd ranks receiving first (no cycle of waits even if sends
 *    are synchronous), every dtype at every count (1<<20: the big subset).
 * 2. All pairs at once: an async send to and an async receive from every
 *    other rank outstanding together, then waited.
 */
static void p2p(ctx *x) {
    int w = x->world, r = x->rank;
    if (w == 1) return;
    size_t counts[6];
    int nc = counts_for(w, counts);
    int next = (r + 1) % w, prev = (r + w - 1) % w;
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++)
        for (int ci = 0; ci < nc; ci++) {
            size_t n = counts[ci], es = ddpc_dtype_size((ddpc_dtype)t);
            if (n == BIG && !big_ok(C_BROADCAST, (ddpc_dtype)t, DDPC_SUM)) continue;
            combo k = { C_BROADCAST, (ddpc_dtype)t, DDPC_SUM, n, -1, 0 };
            x->salt = mix64(x->salt + 3);
            unsigned char *sb = xmalloc(n * es), *rb = xmalloc((n + GUARD) * es);
            memset(rb, 0xa5, (n + GUARD) * es);
            for (size_t i = 0; i < n; i++) put_raw(sb, i, es, hv(x->salt, r, i));
            ddpc_status s;
            if (r % 2 == 0) {
                if ((s = ddpc_send(x->c, sb, n, (ddpc_dtype)t, next)) != DDPC_OK)
                    call_failed(x, &k, "send", s);
                if ((s = ddpc_recv(x->c, rb, n, (ddpc_dtype)t, prev)) != DDPC_OK)
                    call_failed(x, &k, "recv", s);
            } else {
                if ((s = ddpc_recv(x->c, rb, n, (ddpc_dtype)t, prev)) != DDPC_OK)
                    call_failed(x, &k, "recv", s);
                if ((s = ddpc_send(x->c, sb, n, (ddpc_dtype)t, next)) != DDPC_OK)
                    call_failed(x, &k, "send", s);
            }
            x->ops += 2;
            for (size_t j = 0; j < n; j++)
                if (!check_raw_elem(x, &k, rb, j, prev, j)) {
                    fprintf(stderr, "     (that was send/recv %d -> %d)\n", prev, r);
                    break;
                }
            check_untouched(x, &k, rb, n * es, (n + GUARD) * es,
                            "guard after recv buffer (send/recv)");
            free(sb);
            free(rb);
        }
    /* 2. all pairs */
    enum { N = 7 };
    combo k = { C_BROADCAST, DDPC_INT32, DDPC_SUM, N, -1, 0 };
    x->salt = mix64(x->salt + 5);
    int32_t sb[N], (*rb)[N] = xmalloc(sizeof(int32_t[N]) * (size_t)w);
    ddpc_work **ws = xmalloc(sizeof(ddpc_work *) * 2 * (size_t)w);
    for (int i = 0; i < N; i++) put_raw(sb, (size_t)i, 4, hv(x->salt, r, (size_t)i));
    int nw = 0;
    for (int d = 1; d < w; d++) {
        ddpc_status s = ddpc_send_async(x->c, sb, N, DDPC_INT32, (r + d) % w, &ws[nw++]);
        if (s != DDPC_OK) call_failed(x, &k, "send_async (all pairs)", s);
        s = ddpc_recv_async(x->c, rb[(r + w - d) % w], N, DDPC_INT32, (r + w - d) % w, &ws[nw++]);
        if (s != DDPC_OK) call_failed(x, &k, "recv_async (all pairs)", s);
    }
    for (int i = 0; i < nw; i++) {
        ddpc_status s = ddpc_work_wait(ws[i], 60);
        if (s != DDPC_OK) call_failed(x, &k, "work_wait (all pairs send/recv)", s);
        ddpc_work_destroy(ws[i]);
        x->ops++;
    }
    for (int p = 0; p < w; p++) {
        if (p == r) continue;
        for (size_t j = 0; j < N; j++)
            if (!check_raw_elem(x, &k, rb[p], j, p, j)) {
                fprintf(stderr, "     (that was all-pairs send/recv %d -> %d)\n", p, r);
                break;
            }
    }
    free(rb);
    free(ws);
}

/* ------------------------------------------------------------ split */

/*
 * Collectives on sub-communicators: ranks split by parity, ordered by key
 * -rank (so new ranks run backwards), then a few collectives of each kind
 * checked on each half; the halves run concurrently.
 */
static void split_pass(ctx *x) {
    combo k0 = { C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 0, 0, 0 };
    ddpc_comm *sub = NULL;
    ddpc_status s = ddpc_comm_split(x->c, x->rank % 2, -x->rank, &sub);
    if (s != DDPC_OK) call_failed(x, &k0, "comm_split", s);
    int want_rank = 0, want_size = 0;
    for (int r = x->rank % 2; r < x->world; r += 2) {
        want_size++;
        if (r > x->rank) want_rank++;
    }
    if (!sub || ddpc_comm_size(sub) != want_size || ddpc_comm_rank(sub) != want_rank) {
        report(x, &k0, "split: got rank %d of %d, want %d of %d", sub ? ddpc_comm_rank(sub) : -1,
               sub ? ddpc_comm_size(sub) : -1, want_rank, want_size);
        ddpc_comm_destroy(sub);
        return;
    }
    ctx y = {
        .c = sub, .rank = want_rank, .world = want_size, .algo = "auto(split)", .salt = x->salt
    };
    static const ddpc_dtype ts[] = { DDPC_INT8, DDPC_FLOAT16, DDPC_FLOAT32 };
    for (int coll = 0; coll < C_NCOLL; coll++)
        for (int ti = 0; ti < 3; ti++)
            for (size_t n = 7; n <= 4097; n += 4090) {
                combo k = { coll, ts[ti],        is_reducing(coll) ? DDPC_MAX : DDPC_SUM,
                            n,    want_size - 1, 0 };
                run_one(&y, &k);
                if (is_reducing(coll)) {
                    k.op = DDPC_AVG;
                    run_one(&y, &k);
                }
            }
    x->ops += y.ops;
    x->fails += y.fails;
    s = ddpc_comm_destroy(sub);
    if (s != DDPC_OK) call_failed(x, &k0, "destroying the split communicator", s);
}

/* ------------------------------------------------------------ the jobs */

static void comm_job(ctx *x, const job *j) {
    barrier_rounds(x, j->shared);
    p2p(x);
    if (x->world >= 3) split_pass(x);
}

COLL_AUTO_TESTS(coll_comm, comm_job)
