/*
 * test_coll.c — the collective correctness matrix: every collective x dtype x
 * op at counts 0, 1, 7, 4097, world-1 and 1<<20 on world sizes 1, 2, 3, 4, 5
 * and 8, each result checked element by element against a reference this
 * file computes itself; every root of the rooted collectives; in-place
 * variants; DDPC_ALGO=ring/rhd/tree forced; several async operations
 * outstanding; barrier; send/recv; collectives on split communicators.
 *
 * One TEST per (world size, algorithm): the ranks are forked processes
 * (t_run_ranks, with a deadline) that bootstrap once and loop over every
 * combination. A wrong result does not stop the loop: each rank prints one
 * line per failing combination ("FAIL allreduce w=3 rank=1 algo=ring
 * float16 avg count=4097 ...: element 12 is 3, want 4") and fails at the
 * end, so one run names every broken combination. A collective that returns
 * an error ends the rank at once (the others then fail on their timeout).
 *
 * Inputs depend on (call, rank, element index) through a hash, so that a
 * wrong order, offset, block or stale buffer is caught:
 *   - integer types: the hash's raw bits, full range (sums and products
 *     wrap; the reference wraps the same way);
 *   - float types in reductions: small integers in [-14, 14] (sum, max, min,
 *     avg), or +-{0.5, 1, 2} (prod), so every sum and product over <= 8
 *     ranks is exact in every float type, float16 and bfloat16 included,
 *     whatever the reduction order. avg is compared to S/world rounded once
 *     to the dtype, with a tolerance of one unit in the last place of the
 *     dtype (an implementation may multiply by 1/world instead of dividing);
 *   - data-movement collectives: the hash's raw bytes, compared bytewise.
 * Every receive buffer has guard elements after it that must stay untouched,
 * reduce's non-root receive buffers must stay untouched entirely, and an
 * out-of-place call must leave its send buffer as it was.
 *
 * Subset at count 1<<20 (every other count covers every dtype and op):
 *   reducing collectives: float32 sum, float32 avg, int32 sum, int64 max,
 *   bfloat16 sum; the others (and send/recv): float32, int32, uint8.
 * Forced algorithms (ring, rhd, tree) run the collectives that have a
 * choice of algorithm (allreduce, broadcast, reduce, allgather,
 * reduce-scatter) at every count, over every dtype with sum and every op
 * with int8, float16 and float32 (the kernels are the algorithm's
 * neighbours, not its choice; auto covers every dtype x op); at 1<<20 only
 * float32 sum and bfloat16 sum. In-place variants, all roots, async,
 * barrier and send/recv run under auto.
 *
 * Transports: ranks of one host use shared memory unless DDPC_SHM=0; a
 * subset runs again over TCP (DDPC_SHM=0) and over 4 KiB rings
 * (DDPC_SHM_BYTES=4096, smaller than the messages).
 */
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define GUARD 8          /* elements after every buffer that must stay untouched */
#define BIG (1u << 20)   /* the large count */
#define MAX_PRINT 25     /* failure lines per rank before going quiet */

enum { C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_GATHER,
       C_SCATTER, C_ALLTOALL, C_NCOLL };
static const char *const coll_names[C_NCOLL] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather", "scatter",
    "alltoall"};

static int is_reducing(int c) { return c == C_ALLREDUCE || c == C_REDUCE || c == C_REDUCE_SCATTER; }
static int is_rooted(int c) {
    return c == C_BROADCAST || c == C_REDUCE || c == C_GATHER || c == C_SCATTER;
}
static int has_inplace(int c) { return c <= C_REDUCE_SCATTER; }
static int has_algo_choice(int c) { return c <= C_REDUCE_SCATTER; }

typedef struct {
    int port;
    const char *algo;
    atomic_long *shared; /* a counter in memory shared by the ranks (barrier test) */
} job;

typedef struct {
    ddpc_comm *c;
    int rank, world;
    const char *algo;
    long ops, fails;
    uint64_t salt; /* one per call, so stale data from an earlier call is caught */
} ctx;

/* ------------------------------------------------------------ values */

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* The input of rank r at global index g in the call with this salt: one
 * multiply-xorshift round over distinct odd multiples, cheap enough to run
 * world times per checked element. */
static uint64_t hv(uint64_t salt, int r, size_t g) {
    uint64_t x = ((uint64_t)g + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)r + 1) * 0xc2b2ae3d27d4eb4full ^ salt;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}
/* h reduced to [0, m) without a division (top 32 bits times m). */
static int range(uint64_t h, int m) { return (int)(((h >> 32) * (uint64_t)m) >> 32); }

static int is_int(ddpc_dtype t) { return t <= DDPC_UINT64 || t == DDPC_INT16 || t == DDPC_UINT16; }
static int is_signed(ddpc_dtype t) {
    return t == DDPC_INT8 || t == DDPC_INT16 || t == DDPC_INT32 || t == DDPC_INT64;
}
static int is_bitwise(ddpc_op op) { return op == DDPC_BAND || op == DDPC_BOR || op == DDPC_BXOR; }
static uint64_t mask_of(size_t es) { return es == 8 ? ~0ull : (1ull << (8 * es)) - 1; }

/* The integer value of raw bits x truncated to t, sign-extended if signed. */
static uint64_t norm_int(uint64_t x, ddpc_dtype t) {
    size_t es = ddpc_dtype_size(t);
    x &= mask_of(es);
    if (is_signed(t) && es < 8 && (x >> (8 * es - 1)) & 1) x |= ~mask_of(es);
    return x;
}

/* The float input of a reduction (exact in every float dtype). */
static double red_fval(ddpc_op op, uint64_t h) {
    static const double prod_vals[6] = {0.5, 1, 2, -0.5, -1, -2};
    if (op == DDPC_PROD) return prod_vals[range(h, 6)];
    return (double)(range(h, 29) - 14);
}

static void store_f(void *buf, size_t i, ddpc_dtype t, double v) {
    switch (t) {
    case DDPC_FLOAT16: ((uint16_t *)buf)[i] = ddpc_float_to_half((float)v); break;
    case DDPC_BFLOAT16: ((uint16_t *)buf)[i] = ddpc_float_to_bf16((float)v); break;
    case DDPC_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case DDPC_FLOAT64: ((double *)buf)[i] = v; break;
    default: break;
    }
}
static double load_f(const void *buf, size_t i, ddpc_dtype t) {
    switch (t) {
    case DDPC_FLOAT16: return ddpc_half_to_float(((const uint16_t *)buf)[i]);
    case DDPC_BFLOAT16: return ddpc_bf16_to_float(((const uint16_t *)buf)[i]);
    case DDPC_FLOAT32: return ((const float *)buf)[i];
    case DDPC_FLOAT64: return ((const double *)buf)[i];
    default: return 0;
    }
}
static uint64_t load_bits(const void *buf, size_t i, size_t es) {
    uint64_t x = 0;
    memcpy(&x, (const char *)buf + i * es, es);
    return x;
}

/* Rank r's reduction input at global index g. */
static void put_red(void *buf, size_t i, ddpc_dtype t, ddpc_op op, uint64_t h) {
    size_t es = ddpc_dtype_size(t);
    if (is_int(t)) memcpy((char *)buf + i * es, &h, es);
    else store_f(buf, i, t, red_fval(op, h));
}
/* Raw bytes for data movement. */
static void put_raw(void *buf, size_t i, size_t es, uint64_t h) { memcpy((char *)buf + i * es, &h, es); }

/* The expected reduction over ranks 0..world-1 at global index g: integer
 * bits in *bits (integers), value in *f (floats). */
static void ref_red(const ctx *x, ddpc_dtype t, ddpc_op op, size_t g, uint64_t *bits, double *f) {
    int w = x->world;
    if (is_int(t)) {
        int sg = is_signed(t);
        uint64_t acc = 0;
        for (int r = 0; r < w; r++) {
            uint64_t v = norm_int(hv(x->salt, r, g), t);
            if (r == 0) { acc = v; continue; }
            switch (op) {
            case DDPC_SUM: case DDPC_AVG: acc += v; break;
            case DDPC_PROD: acc *= v; break;
            case DDPC_MAX: acc = (sg ? (int64_t)v > (int64_t)acc : v > acc) ? v : acc; break;
            case DDPC_BAND: acc &= v; break;
            case DDPC_BOR: acc |= v; break;
            case DDPC_BXOR: acc ^= v; break;
            default: acc = (sg ? (int64_t)v < (int64_t)acc : v < acc) ? v : acc; break;
            }
        }
        acc = norm_int(acc, t);
        if (op == DDPC_AVG)
            acc = sg ? (uint64_t)((int64_t)acc / w) : acc / (uint64_t)w;
        *bits = acc & mask_of(ddpc_dtype_size(t));
        return;
    }
    double acc = 0;
    for (int r = 0; r < w; r++) {
        double v = red_fval(op, hv(x->salt, r, g));
        if (r == 0) { acc = v; continue; }
        switch (op) {
        case DDPC_SUM: case DDPC_AVG: acc += v; break;
        case DDPC_PROD: acc *= v; break;
        case DDPC_MAX: acc = v > acc ? v : acc; break;
        default: acc = v < acc ? v : acc; break;
        }
    }
    if (op == DDPC_AVG) {
        float q = (float)acc / (float)w;
        switch (t) {
        case DDPC_FLOAT64: acc = acc / w; break;
        case DDPC_FLOAT32: acc = q; break;
        case DDPC_FLOAT16: acc = ddpc_half_to_float(ddpc_float_to_half(q)); break;
        default: acc = ddpc_bf16_to_float(ddpc_float_to_bf16(q)); break;
        }
    }
    *f = acc;
}

static double ulp_rel(ddpc_dtype t) {
    switch (t) {
    case DDPC_FLOAT16: return ldexp(1.0, -10);
    case DDPC_BFLOAT16: return ldexp(1.0, -7);
    case DDPC_FLOAT32: return ldexp(1.0, -23);
    default: return ldexp(1.0, -52);
    }
}

/* ------------------------------------------------------------ reporting */

typedef struct {
    int coll;
    ddpc_dtype t;
    ddpc_op op;
    size_t count;
    int root, inplace;
} combo;

static void describe(const ctx *x, const combo *k, char *buf, size_t len) {
    snprintf(buf, len, "%s w=%d rank=%d algo=%s %s%s%s count=%zu root=%d%s", coll_names[k->coll],
             x->world, x->rank, x->algo, ddpc_dtype_name(k->t), is_reducing(k->coll) ? " " : "",
             is_reducing(k->coll) ? ddpc_op_name(k->op) : "", k->count,
             is_rooted(k->coll) ? k->root : -1, k->inplace ? " in-place" : "");
}

static void report(ctx *x, const combo *k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(ctx *x, const combo *k, const char *fmt, ...) {
    if (x->fails++ >= MAX_PRINT) return;
    char d[256], m[256];
    describe(x, k, d, sizeof d);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL %s: %s\n", d, m);
}

/* A collective returned an error: the ranks are out of step now, so stop. */
static void call_failed(ctx *x, const combo *k, const char *what, ddpc_status s) {
    char d[256];
    describe(x, k, d, sizeof d);
    fprintf(stderr, "ERROR %s: %s -> %s (%s)\n", d, what, ddpc_status_str(s),
            ddpc_comm_last_error(x->c));
    fflush(stderr);
    _exit(1);
}

/* Element j of got (reduction result at global index g) against the reference. */
static int check_red_elem(ctx *x, const combo *k, const void *got, size_t j, size_t g) {
    uint64_t bits = 0;
    double f = 0;
    ref_red(x, k->t, k->op, g, &bits, &f);
    if (is_int(k->t)) {
        uint64_t v = load_bits(got, j, ddpc_dtype_size(k->t));
        if (v == bits) return 1;
        report(x, k, "element %zu is %lld (0x%llx), want %lld (0x%llx)", j,
               (long long)norm_int(v, k->t), (unsigned long long)v,
               (long long)norm_int(bits, k->t), (unsigned long long)bits);
        return 0;
    }
    double v = load_f(got, j, k->t);
    double tol = k->op == DDPC_AVG ? ulp_rel(k->t) * fabs(f) : 0;
    if (fabs(v - f) <= tol) return 1;
    report(x, k, "element %zu is %.9g, want %.9g", j, v, f);
    return 0;
}

static int check_raw_elem(ctx *x, const combo *k, const void *got, size_t j, int src, size_t g) {
    size_t es = ddpc_dtype_size(k->t);
    uint64_t want = hv(x->salt, src, g) & mask_of(es), v = load_bits(got, j, es);
    if (v == want) return 1;
    report(x, k, "element %zu is 0x%llx, want 0x%llx (rank %d's element %zu)", j,
           (unsigned long long)v, (unsigned long long)want, src, g);
    return 0;
}

static void check_untouched(ctx *x, const combo *k, const unsigned char *p, size_t from,
                            size_t to, const char *what) {
    for (size_t i = from; i < to; i++)
        if (p[i] != 0xa5) {
            report(x, k, "%s: byte %zu was overwritten (0x%02x)", what, i, p[i]);
            return;
        }
}

/* ------------------------------------------------------------ one call */

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) t_fail(__FILE__, __LINE__, "out of memory (%zu bytes)", n);
    return p;
}

/*
 * Runs collective k once on this rank and checks its result:
 *   1. sizes: send and receive element counts of the collective;
 *   2. fills send with this rank's inputs, receive with 0xa5 (guards too);
 *   3. calls it (in place when k->inplace, with NCCL's in-place layout);
 *   4. checks every output element, the guards, and untouched buffers.
 */
static void run_one(ctx *x, const combo *k) {
    int w = x->world, r = x->rank, root = k->root;
    size_t n = k->count, es = ddpc_dtype_size(k->t), sn = n, rn = n;
    x->salt = mix64(x->salt + 0x51ed27);
    switch (k->coll) {
    case C_ALLGATHER: case C_GATHER: rn = (size_t)w * n; break;
    case C_REDUCE_SCATTER: case C_SCATTER: sn = (size_t)w * n; break;
    case C_ALLTOALL: sn = rn = (size_t)w * n; break;
    default: break;
    }
    /* in place, one buffer holds both: the larger of the two layouts */
    size_t bn = k->inplace ? (sn > rn ? sn : rn) : sn;
    unsigned char *sbuf = xmalloc((bn + GUARD) * es);
    unsigned char *rbuf = k->inplace ? sbuf : xmalloc((rn + GUARD) * es);
    memset(sbuf, 0xa5, (bn + GUARD) * es);
    if (!k->inplace) memset(rbuf, 0xa5, (rn + GUARD) * es);

    /* 2. inputs */
    unsigned char *send = sbuf, *recv = rbuf;
    switch (k->coll) {
    case C_ALLREDUCE: case C_REDUCE: case C_REDUCE_SCATTER:
        for (size_t i = 0; i < sn; i++) put_red(sbuf, i, k->t, k->op, hv(x->salt, r, i));
        if (k->inplace && k->coll == C_REDUCE_SCATTER) recv = sbuf + (size_t)r * n * es;
        break;
    case C_BROADCAST: case C_SCATTER:
        if (r == root)
            for (size_t i = 0; i < sn; i++) put_raw(sbuf, i, es, hv(x->salt, root, i));
        break;
    case C_ALLGATHER: case C_GATHER:
        if (k->inplace) { /* own block already in place in the receive buffer */
            send = sbuf + (size_t)r * n * es;
            for (size_t i = 0; i < n; i++) put_raw(send, i, es, hv(x->salt, r, i));
        } else {
            for (size_t i = 0; i < n; i++) put_raw(sbuf, i, es, hv(x->salt, r, i));
        }
        break;
    case C_ALLTOALL:
        for (size_t i = 0; i < sn; i++) put_raw(sbuf, i, es, hv(x->salt, r, i));
        break;
    default: break;
    }

    /* out of place, the send buffer must come back unchanged */
    unsigned char *snap = NULL;
    if (!k->inplace) {
        snap = xmalloc(sn * es);
        memcpy(snap, sbuf, sn * es);
    }

    /* 3. the call */
    ddpc_status s = DDPC_OK;
    switch (k->coll) {
    case C_ALLREDUCE: s = ddpc_allreduce(x->c, send, recv, n, k->t, k->op); break;
    case C_BROADCAST: s = ddpc_broadcast(x->c, send, recv, n, k->t, root); break;
    case C_REDUCE: s = ddpc_reduce(x->c, send, recv, n, k->t, k->op, root); break;
    case C_ALLGATHER: s = ddpc_allgather(x->c, send, recv, n, k->t); break;
    case C_REDUCE_SCATTER: s = ddpc_reduce_scatter(x->c, send, recv, n, k->t, k->op); break;
    case C_GATHER: s = ddpc_gather(x->c, send, recv, n, k->t, root); break;
    case C_SCATTER: s = ddpc_scatter(x->c, send, recv, n, k->t, root); break;
    case C_ALLTOALL: s = ddpc_alltoall(x->c, send, recv, n, k->t); break;
    default: break;
    }
    x->ops++;
    if (s != DDPC_OK) call_failed(x, k, coll_names[k->coll], s);

    /* 4. results */
    switch (k->coll) {
    case C_ALLREDUCE:
        for (size_t j = 0; j < n; j++)
            if (!check_red_elem(x, k, recv, j, j)) break;
        break;
    case C_REDUCE:
        if (r == root) {
            for (size_t j = 0; j < n; j++)
                if (!check_red_elem(x, k, recv, j, j)) break;
        } else if (!k->inplace) {
            check_untouched(x, k, recv, 0, rn * es, "non-root receive buffer");
        }
        break;
    case C_REDUCE_SCATTER:
        for (size_t j = 0; j < n; j++)
            if (!check_red_elem(x, k, recv, j, (size_t)r * n + j)) break;
        break;
    case C_BROADCAST:
        for (size_t j = 0; j < n; j++)
            if (!check_raw_elem(x, k, recv, j, root, j)) break;
        break;
    case C_ALLGATHER: case C_GATHER:
        if (k->coll == C_GATHER && r != root) break;
        for (size_t j = 0; j < rn; j++)
            if (!check_raw_elem(x, k, recv, j, (int)(j / (n ? n : 1)), j % (n ? n : 1))) break;
        break;
    case C_SCATTER:
        for (size_t j = 0; j < n; j++)
            if (!check_raw_elem(x, k, recv, j, root, (size_t)r * n + j)) break;
        break;
    case C_ALLTOALL:
        for (size_t j = 0; j < rn; j++)
            if (!check_raw_elem(x, k, recv, j, (int)(j / n), (size_t)r * n + j % n)) break;
        break;
    default: break;
    }
    if (k->inplace) check_untouched(x, k, sbuf, bn * es, (bn + GUARD) * es, "guard after buffer");
    else check_untouched(x, k, rbuf, rn * es, (rn + GUARD) * es, "guard after receive buffer");
    if (snap && memcmp(snap, sbuf, sn * es) != 0) {
        size_t i = 0;
        while (snap[i] == sbuf[i]) i++;
        report(x, k, "the send buffer was modified (byte %zu)", i);
    }
    free(snap);
    free(sbuf);
    if (!k->inplace) free(rbuf);
}

/* ------------------------------------------------------------ the matrix */

/* Whether count 1<<20 is run for this collective, dtype and op (see top). */
static int big_ok(int coll, ddpc_dtype t, ddpc_op op) {
    if (is_reducing(coll))
        return (t == DDPC_FLOAT32 && (op == DDPC_SUM || op == DDPC_AVG)) ||
               (t == DDPC_INT32 && op == DDPC_SUM) || (t == DDPC_INT64 && op == DDPC_MAX) ||
               (t == DDPC_BFLOAT16 && op == DDPC_SUM);
    return t == DDPC_FLOAT32 || t == DDPC_INT32 || t == DDPC_UINT8;
}

/* {0, 1, 7, 4097, world-1, 1<<20} without repeats. */
static int counts_for(int world, size_t *out) {
    size_t c[] = {0, 1, 7, 4097, (size_t)world - 1, BIG};
    int n = 0;
    for (int i = 0; i < 6; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= out[j] == c[i];
        if (!dup) out[n++] = c[i];
    }
    return n;
}

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
                if (is_bitwise((ddpc_op)op) && !is_int((ddpc_dtype)t)) continue; /* see bitwise_floats_refused */
                for (int ci = 0; ci < nc; ci++) {
                    if (counts[ci] == BIG && !big_ok(coll, (ddpc_dtype)t, (ddpc_op)op)) continue;
                    if (forced && counts[ci] == BIG && op != DDPC_SUM) continue;
                    if (forced && counts[ci] == BIG && is_reducing(coll) && t != DDPC_FLOAT32 &&
                        t != DDPC_BFLOAT16) continue;
                    combo k = {coll, (ddpc_dtype)t, (ddpc_op)op, counts[ci],
                               (int)(idx++ % x->world), 0};
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
    static const ddpc_dtype ts[] = {DDPC_INT8, DDPC_INT64, DDPC_FLOAT16, DDPC_FLOAT32};
    static const size_t cs[] = {1, 7};
    for (int root = 0; root < x->world; root++)
        for (int ti = 0; ti < 4; ti++)
            for (int ci = 0; ci < 2; ci++) {
                combo k = {C_BROADCAST, ts[ti], DDPC_SUM, cs[ci], root, 0};
                run_one(x, &k);
                k.inplace = 1;
                run_one(x, &k);
                k = (combo){C_REDUCE, ts[ti], DDPC_SUM, cs[ci], root, 0};
                run_one(x, &k);
                k.op = DDPC_MIN;
                k.inplace = 1;
                run_one(x, &k);
                k = (combo){C_GATHER, ts[ti], DDPC_SUM, cs[ci], root, 0};
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
    static const ddpc_dtype fts[] = {DDPC_FLOAT16, DDPC_BFLOAT16, DDPC_FLOAT32, DDPC_FLOAT64};
    double *sb = xmalloc((size_t)x->world * sizeof(double)), rb[1] = {0};
    for (int i = 0; i < x->world; i++) sb[i] = 1;
    for (int ti = 0; ti < 4; ti++)
        for (int op = DDPC_BAND; op <= DDPC_BXOR; op++) {
            ddpc_dtype t = fts[ti];
            char want[96];
            snprintf(want, sizeof want, "op %s needs an integer dtype, got %s", ddpc_op_name((ddpc_op)op),
                     ddpc_dtype_name(t));
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

/* ------------------------------------------------------------ async */

/*
 * Several operations outstanding at once on distinct buffers, of different
 * kinds, dtypes and sizes; polled with ddpc_work_test, waited in reverse
 * order, then every result checked.
 */
static void async_batch(ctx *x, int round) {
    enum { K = 8 };
    int w = x->world, r = x->rank;
    struct { int coll; ddpc_dtype t; ddpc_op op; size_t n; } spec[K] = {
        {C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 4097},   {C_ALLREDUCE, DDPC_INT64, DDPC_MAX, 7},
        {C_BROADCAST, DDPC_UINT8, DDPC_SUM, 1000},     {C_ALLGATHER, DDPC_FLOAT16, DDPC_SUM, 33},
        {C_REDUCE_SCATTER, DDPC_BFLOAT16, DDPC_SUM, 100}, {C_ALLREDUCE, DDPC_FLOAT64, DDPC_AVG, 1u << 16},
        {C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 1u << 18}, {C_ALLTOALL, DDPC_INT32, DDPC_SUM, 5},
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
            if (is_reducing(spec[i].coll)) put_red(sb[i], j, spec[i].t, spec[i].op, hv(salts[i], r, j));
            else put_raw(sb[i], j, es, hv(salts[i], spec[i].coll == C_BROADCAST ? root : r, j));
        }
        ddpc_status s = DDPC_OK;
        combo k = {spec[i].coll, spec[i].t, spec[i].op, n, root, 0};
        switch (spec[i].coll) {
        case C_ALLREDUCE: s = ddpc_allreduce_async(x->c, sb[i], rb[i], n, spec[i].t, spec[i].op, &wk[i]); break;
        case C_BROADCAST: s = ddpc_broadcast_async(x->c, sb[i], rb[i], n, spec[i].t, root, &wk[i]); break;
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
    combo kb = {C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 0, 0, 0};
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
    if (s != DDPC_OK || !done) call_failed(x, &kb, done ? "barrier_async test" : "barrier_async never completed", s);
    for (int i = K; i >= 0; i--) {
        combo k = {i < K ? spec[i].coll : C_ALLREDUCE, i < K ? spec[i].t : DDPC_FLOAT32,
                   i < K ? spec[i].op : DDPC_SUM, i < K ? spec[i].n : 0, root, 0};
        s = ddpc_work_wait(wk[i], 60);
        if (s != DDPC_OK) call_failed(x, &k, "work_wait", s);
        /* every earlier operation completed before the later ones */
        if (i < K) {
            int d = 0;
            s = ddpc_work_test(wk[i], &d);
            if (s != DDPC_OK || !d) report(x, &k, "work_test after wait says done=%d, %s", d, ddpc_status_str(s));
        }
        ddpc_work_free(wk[i]);
    }
    for (int i = 0; i < K; i++) {
        combo k = {spec[i].coll, spec[i].t, spec[i].op, spec[i].n, root, 0};
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
    static const ddpc_dtype ts[] = {DDPC_INT32, DDPC_FLOAT32, DDPC_BFLOAT16, DDPC_UINT64};
    void *sb[M], *rb[M];
    uint64_t salts[M];
    ddpc_work *wk[M];
    for (int i = 0; i < M; i++) {
        ddpc_dtype t = ts[i % 4];
        size_t n = (size_t)(i * 37 % 301) + 1, es = ddpc_dtype_size(t);
        combo k = {C_ALLREDUCE, t, DDPC_SUM, n, 0, 0};
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
        combo k = {C_ALLREDUCE, t, DDPC_SUM, n, 0, 0};
        ddpc_status s = ddpc_work_wait(wk[i], 60);
        if (s != DDPC_OK) call_failed(x, &k, "work_wait (48 outstanding)", s);
        ddpc_work_free(wk[i]);
        x->salt = salts[i];
        for (size_t j = 0; j < n; j++)
            if (!check_red_elem(x, &k, rb[i], j, j)) break;
        free(sb[i]);
        free(rb[i]);
    }
}

/* ------------------------------------------------------------ barrier */

/*
 * Each round, rank r waits r milliseconds, bumps a counter shared by all
 * ranks, and enters the barrier; after it, every rank must see all world
 * bumps of this round. A barrier that does not wait is caught by rank 0,
 * which arrives first.
 */
static void barrier_rounds(ctx *x, atomic_long *shared) {
    combo k = {C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 0, 0, 0};
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
            combo k = {C_BROADCAST, (ddpc_dtype)t, DDPC_SUM, n, -1, 0};
            x->salt = mix64(x->salt + 3);
            unsigned char *sb = xmalloc(n * es), *rb = xmalloc((n + GUARD) * es);
            memset(rb, 0xa5, (n + GUARD) * es);
            for (size_t i = 0; i < n; i++) put_raw(sb, i, es, hv(x->salt, r, i));
            ddpc_status s;
            if (r % 2 == 0) {
                if ((s = ddpc_send(x->c, sb, n, (ddpc_dtype)t, next)) != DDPC_OK) call_failed(x, &k, "send", s);
                if ((s = ddpc_recv(x->c, rb, n, (ddpc_dtype)t, prev)) != DDPC_OK) call_failed(x, &k, "recv", s);
            } else {
                if ((s = ddpc_recv(x->c, rb, n, (ddpc_dtype)t, prev)) != DDPC_OK) call_failed(x, &k, "recv", s);
                if ((s = ddpc_send(x->c, sb, n, (ddpc_dtype)t, next)) != DDPC_OK) call_failed(x, &k, "send", s);
            }
            x->ops += 2;
            for (size_t j = 0; j < n; j++)
                if (!check_raw_elem(x, &k, rb, j, prev, j)) {
                    fprintf(stderr, "     (that was send/recv %d -> %d)\n", prev, r);
                    break;
                }
            check_untouched(x, &k, rb, n * es, (n + GUARD) * es, "guard after recv buffer (send/recv)");
            free(sb);
            free(rb);
        }
    /* 2. all pairs */
    enum { N = 7 };
    combo k = {C_BROADCAST, DDPC_INT32, DDPC_SUM, N, -1, 0};
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
        ddpc_work_free(ws[i]);
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
    combo k0 = {C_ALLREDUCE, DDPC_FLOAT32, DDPC_SUM, 0, 0, 0};
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
    ctx y = {.c = sub, .rank = want_rank, .world = want_size, .algo = "auto(split)", .salt = x->salt};
    static const ddpc_dtype ts[] = {DDPC_INT8, DDPC_FLOAT16, DDPC_FLOAT32};
    for (int coll = 0; coll < C_NCOLL; coll++)
        for (int ti = 0; ti < 3; ti++)
            for (size_t n = 7; n <= 4097; n += 4090) {
                combo k = {coll, ts[ti], is_reducing(coll) ? DDPC_MAX : DDPC_SUM, n,
                           want_size - 1, 0};
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

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void rank_main(int rank, int world, void *arg) {
    const job *j = arg;
    char url[64];
    setenv("DDPC_ALGO", j->algo, 1);
    setenv("DDPC_TIMEOUT", "60", 1);
    setenv("DDPC_CONNECT_TIMEOUT", "60", 1);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", j->port);
    ctx x = {.rank = rank, .world = world, .algo = j->algo, .salt = 12345};
    double t0 = wall();
    ddpc_status s = ddpc_comm_init_url(&x.c, url, rank, world);
    CHECK_MSG(s == DDPC_OK, "rank %d of %d: ddpc_comm_init_url(%s) -> %s (%s)", rank, world, url,
              ddpc_status_str(s), ddpc_last_error());
    CHECK_EQ(ddpc_comm_rank(x.c), rank);
    CHECK_EQ(ddpc_comm_size(x.c), world);
    double t1 = wall();
    int forced = strcmp(j->algo, "auto") != 0;
    matrix(&x, forced);
    if (!forced) {
        bitwise_floats_refused(&x);
        all_roots(&x);
        for (int round = 0; round < 3; round++) async_batch(&x, round);
        async_many(&x);
        barrier_rounds(&x, j->shared);
        p2p(&x);
        if (world >= 3) split_pass(&x);
    }
    double t2 = wall();
    s = ddpc_comm_destroy(x.c);
    CHECK_MSG(s == DDPC_OK, "rank %d: ddpc_comm_destroy -> %s (%s)", rank, ddpc_status_str(s),
              ddpc_last_error());
    if (rank == 0)
        printf("     world %d algo %s: %ld calls checked in %.1f s (bootstrap %.2f s)\n", world,
               j->algo, x.ops, t2 - t1, t1 - t0);
    CHECK_MSG(x.fails == 0, "rank %d of %d (algo %s): %ld failing combinations (first ones above)",
              rank, world, j->algo, x.fails);
}

static void run_job(int world, const char *algo, double timeout_s) {
    atomic_long *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shared != MAP_FAILED);
    atomic_store(shared, 0);
    job j = {t_free_port(), algo, shared};
    t_run_ranks(world, timeout_s, rank_main, &j);
    munmap(shared, sizeof *shared);
}

#define COLL_TEST(W, ALGO, SECS)                                                         \
    TEST_T(coll_w##W##_##ALGO, SECS) { run_job(W, #ALGO, (SECS) - 5); }

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
#define COLL_TEST_ENV(W, ALGO, TAG, VAR, VAL, SECS)                                      \
    TEST_T(coll_w##W##_##ALGO##_##TAG, SECS) {                                           \
        setenv(VAR, VAL, 1);                                                             \
        run_job(W, #ALGO, (SECS) - 5);                                                   \
    }

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
    run_job(3, "auto", 145);
}

/* ------------------------------------------------------------ ddpc-bench */

/* Runs ddpc-bench ARGS as 2 ranks with torchrun's variables; rank 0's output
 * into out. Returns the worse exit status of the two. */
static int bench2(const char *args, char *out, size_t outlen) {
    char cmd[2048];
    const char *b = t_bin("ddpc-bench");
    snprintf(cmd, sizeof cmd,
             "export MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=2 LOCAL_WORLD_SIZE=2; "
             "RANK=1 LOCAL_RANK=1 %s %s >/dev/null 2>&1 & p=$!; "
             "RANK=0 LOCAL_RANK=0 %s %s; a=$?; wait $p; b=$?; [ $a -ne 0 ] && exit $a; exit $b",
             t_free_port(), b, args, b, args);
    return t_run_cmd(cmd, 60, out, outlen);
}

/* Checks nccl-tests' table: a row per size from lo to hi (x4), each with
 * #wrong 0 and a positive time; the last line is the average bus bandwidth. */
static void check_table(const char *out, const char *type, const char *redop, size_t lo,
                        size_t hi, size_t multiple) {
    CHECK_CONTAINS(out, "busbw");
    CHECK_CONTAINS(out, "#wrong");
    size_t want = lo;
    int rows = 0;
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), p);
        size_t size, count;
        char ty[32], op[32], wrong[32];
        int root;
        double us, alg, bus;
        if (line[0] != '#' &&
            sscanf(line, "%zu %zu %31s %31s %d %lf %lf %lf %31s", &size, &count, ty, op, &root,
                   &us, &alg, &bus, wrong) == 9) {
            CHECK_MSG(size == want / multiple * multiple, "row %d has size %zu, want %zu: %s", rows,
                      size, want / multiple * multiple, line);
            CHECK_STR(ty, type);
            CHECK_STR(op, redop);
            CHECK_STR(wrong, "0");
            CHECK_MSG(us > 0 && alg >= 0 && bus >= 0, "bad figures in: %s", line);
            want *= 4;
            rows++;
        }
        p += len + (nl != NULL);
    }
    CHECK_MSG(want / 4 == hi, "the table stops at %zu, want %zu:\n%s", want / 4, hi, out);
    const char *last = strstr(out, "# Avg bus bandwidth : ");
    CHECK_MSG(last && !strchr(last, '\n') ? 1 : last && strchr(last, '\n')[1] == '\0',
              "'# Avg bus bandwidth : X' is not the last line:\n%s", out);
}

TEST_T(bench_allreduce_table, 90) {
    static char out[65536];
    int rc = bench2("allreduce -b 8 -e 32K -f 4 -n 3 -w 1", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "float32", "sum", 8, 32768, 4);
    rc = bench2("reduce-scatter -b 64 -e 4K -f 4 -n 2 -w 1 -d bfloat16 -o avg", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "bfloat16", "avg", 64, 4096, 4);
    rc = bench2("alltoall -b 64 -e 1K -f 4 -n 2 -w 0 -d int64", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    check_table(out, "int64", "none", 64, 1024, 16);
    rc = bench2("broadcast -b 4 -e 64 -f 4 -n 2 -w 0 -d uint8 -r 1 -c 0", out, sizeof out);
    CHECK_MSG(rc == 0, "exit %d:\n%s", rc, out);
    CHECK_CONTAINS(out, "N/A");
}

TEST(bench_bad_usage) {
    static const struct { const char *args, *needle; } cases[] = {
        {"", "COLLECTIVE"},
        {"allgatherv", "allgatherv"},
        {"allreduce -b 12Q", "-b"},
        {"allreduce -e", "-e"},
        {"allreduce -n 0", "-n"},
        {"allreduce -c 2", "-c"},
        {"allreduce -d float128", "float128"},
        {"allreduce -o mean", "mean"},
        {"allreduce -q 1", "-q"},
        {"allreduce -b 1M -e 1K", "-b"},
        {"allreduce -d float32 -o band", "-o band needs an integer -d, got float32"},
        {"reduce-scatter -d bf16 -o bxor", "bxor"},
    };
    char cmd[1024], out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s", t_bin("ddpc-bench"), cases[i].args);
        int rc = t_run_cmd(cmd, 20, out, sizeof out);
        CHECK_MSG(rc == 2, "'%s' exited %d, want 2: %s", cases[i].args, rc, out);
        CHECK_CONTAINS(out, cases[i].needle);
        CHECK_MSG(strchr(out, '\n') == out + strlen(out) - 1, "'%s': not one line: %s", cases[i].args, out);
    }
    snprintf(cmd, sizeof cmd, "%s --help", t_bin("ddpc-bench"));
    CHECK_EQ(t_run_cmd(cmd, 20, out, sizeof out), 0);
    CHECK_CONTAINS(out, "usage: ddpc-bench COLLECTIVE");
    snprintf(cmd, sizeof cmd, "RANK=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d %s allreduce",
             t_free_port(), t_bin("ddpc-bench"));
    int rc = t_run_cmd(cmd, 20, out, sizeof out);
    CHECK_MSG(rc == 1, "RANK=5 WORLD_SIZE=2 exited %d: %s", rc, out);
    CHECK_CONTAINS(out, "RANK");
}
