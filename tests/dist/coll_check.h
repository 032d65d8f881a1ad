/*
 * coll_check.h — what the collective tests share (test_coll_*.c): inputs
 * computed from (call, rank, element), a reference for every reduction,
 * one collective call run and checked element by element, failure lines
 * that name the combination, and the job that forks the ranks.
 *
 * A wrong result does not stop a rank: it prints one line per failing
 * combination ("FAIL allreduce w=3 rank=1 algo=ring float16 avg count=4097
 * ...: element 12 is 3, want 4") and fails at the end, so one run names
 * every broken combination. A collective that returns an error ends the
 * rank at once (the others then fail on their timeout).
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
 * Functions are static inline: each test file is its own program and uses
 * a part of them.
 */
#ifndef DDPC_TEST_COLL_CHECK_H
#define DDPC_TEST_COLL_CHECK_H

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

#define GUARD     8          /* elements after every buffer that must stay untouched */
#define BIG       (1u << 20) /* the large count */
#define MAX_PRINT 25         /* failure lines per rank before going quiet */

enum {
    C_ALLREDUCE,
    C_BROADCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_REDUCE_SCATTER,
    C_GATHER,
    C_SCATTER,
    C_ALLTOALL,
    C_NCOLL
};
static const char *const coll_names[C_NCOLL] = { "allreduce", "broadcast",      "reduce",
                                                 "allgather", "reduce_scatter", "gather",
                                                 "scatter",   "alltoall" };

static inline int is_reducing(int c) {
    return c == C_ALLREDUCE || c == C_REDUCE || c == C_REDUCE_SCATTER;
}
static inline int is_rooted(int c) {
    return c == C_BROADCAST || c == C_REDUCE || c == C_GATHER || c == C_SCATTER;
}
static inline int has_inplace(int c) { return c <= C_REDUCE_SCATTER; }
static inline int has_algo_choice(int c) { return c <= C_REDUCE_SCATTER; }

typedef struct {
    ddpc_comm *c;
    int rank, world;
    const char *algo;
    long ops, fails;
    uint64_t salt; /* one per call, so stale data from an earlier call is caught */
} ctx;

struct job;
/* What a job's ranks run between bootstrap and destroy. */
typedef void (*coll_body)(ctx *x, const struct job *j);

typedef struct job {
    int port;
    const char *algo;
    atomic_long *shared; /* a counter in memory shared by the ranks (barrier test) */
    coll_body body;
} job;

/* ------------------------------------------------------------ values */

static inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* The input of rank r at global index g in the call with this salt: one
 * multiply-xorshift round over distinct odd multiples, cheap enough to run
 * world times per checked element. */
static inline uint64_t hv(uint64_t salt, int r, size_t g) {
    uint64_t x = ((uint64_t)g + 1) * 0x9e3779b97f4a7c15ull ^
                 ((uint64_t)r + 1) * 0xc2b2ae3d27d4eb4full ^ salt;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}
/* h reduced to [0, m) without a division (top 32 bits times m). */
static inline int range(uint64_t h, int m) { return (int)(((h >> 32) * (uint64_t)m) >> 32); }

static inline int is_int(ddpc_dtype t) {
    return t <= DDPC_UINT64 || t == DDPC_INT16 || t == DDPC_UINT16;
}
static inline int is_signed(ddpc_dtype t) {
    return t == DDPC_INT8 || t == DDPC_INT16 || t == DDPC_INT32 || t == DDPC_INT64;
}
static inline int is_bitwise(ddpc_op op) {
    return op == DDPC_BAND || op == DDPC_BOR || op == DDPC_BXOR;
}
static inline uint64_t mask_of(size_t es) { return es == 8 ? ~0ull : (1ull << (8 * es)) - 1; }

/* The integer value of raw bits x truncated to t, sign-extended if signed. */
static inline uint64_t norm_int(uint64_t x, ddpc_dtype t) {
    size_t es = ddpc_dtype_size(t);
    x &= mask_of(es);
    if (is_signed(t) && es < 8 && (x >> (8 * es - 1)) & 1) x |= ~mask_of(es);
    return x;
}

/* The float input of a reduction (exact in every float dtype). */
static inline double red_fval(ddpc_op op, uint64_t h) {
    static const double prod_vals[6] = { 0.5, 1, 2, -0.5, -1, -2 };
    if (op == DDPC_PROD) return prod_vals[range(h, 6)];
    return (double)(range(h, 29) - 14);
}

static inline void store_f(void *buf, size_t i, ddpc_dtype t, double v) {
    switch (t) {
    case DDPC_FLOAT16: ((uint16_t *)buf)[i] = ddpc_float_to_half((float)v); break;
    case DDPC_BFLOAT16: ((uint16_t *)buf)[i] = ddpc_float_to_bf16((float)v); break;
    case DDPC_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case DDPC_FLOAT64: ((double *)buf)[i] = v; break;
    default: break;
    }
}
static inline double load_f(const void *buf, size_t i, ddpc_dtype t) {
    switch (t) {
    case DDPC_FLOAT16: return ddpc_half_to_float(((const uint16_t *)buf)[i]);
    case DDPC_BFLOAT16: return ddpc_bf16_to_float(((const uint16_t *)buf)[i]);
    case DDPC_FLOAT32: return ((const float *)buf)[i];
    case DDPC_FLOAT64: return ((const double *)buf)[i];
    default: return 0;
    }
}
static inline uint64_t load_bits(const void *buf, size_t i, size_t es) {
    uint64_t x = 0;
    memcpy(&x, (const char *)buf + i * es, es);
    return x;
}

/* Rank r's reduction input at global index g. */
static inline void put_red(void *buf, size_t i, ddpc_dtype t, ddpc_op op, uint64_t h) {
    size_t es = ddpc_dtype_size(t);
    if (is_int(t))
        memcpy((char *)buf + i * es, &h, es);
    else
        store_f(buf, i, t, red_fval(op, h));
}
/* Raw bytes for data movement. */
static inline void put_raw(void *buf, size_t i, size_t es, uint64_t h) {
    memcpy((char *)buf + i * es, &h, es);
}

/* The expected reduction over ranks 0..world-1 at global index g: integer
 * bits in *bits (integers), value in *f (floats). */
static inline void ref_red(const ctx *x, ddpc_dtype t, ddpc_op op, size_t g, uint64_t *bits,
                           double *f) {
    int w = x->world;
    if (is_int(t)) {
        int sg = is_signed(t);
        uint64_t acc = 0;
        for (int r = 0; r < w; r++) {
            uint64_t v = norm_int(hv(x->salt, r, g), t);
            if (r == 0) {
                acc = v;
                continue;
            }
            switch (op) {
            case DDPC_SUM:
            case DDPC_AVG: acc += v; break;
            case DDPC_PROD: acc *= v; break;
            case DDPC_MAX: acc = (sg ? (int64_t)v > (int64_t)acc : v > acc) ? v : acc; break;
            case DDPC_BAND: acc &= v; break;
            case DDPC_BOR: acc |= v; break;
            case DDPC_BXOR: acc ^= v; break;
            default: acc = (sg ? (int64_t)v < (int64_t)acc : v < acc) ? v : acc; break;
            }
        }
        acc = norm_int(acc, t);
        if (op == DDPC_AVG) acc = sg ? (uint64_t)((int64_t)acc / w) : acc / (uint64_t)w;
        *bits = acc & mask_of(ddpc_dtype_size(t));
        return;
    }
    double acc = 0;
    for (int r = 0; r < w; r++) {
        double v = red_fval(op, hv(x->salt, r, g));
        if (r == 0) {
            acc = v;
            continue;
        }
        switch (op) {
        case DDPC_SUM:
        case DDPC_AVG: acc += v; break;
        case DDPC_PROD: acc *= v; break;
        case DDPC_MAX: acc = v > acc ? v : acc; break;
        default: acc = v < acc ? v : acc; break;
        }
    }
    /* one rounding to the dtype (ddpc stages float16 and bfloat16 through
     * float32): past 8 ranks a product can leave float16's range, and then
     * the right answer is an infinity */
    if (op != DDPC_AVG && t == DDPC_FLOAT16)
        acc = ddpc_half_to_float(ddpc_float_to_half((float)acc));
    if (op != DDPC_AVG && t == DDPC_BFLOAT16)
        acc = ddpc_bf16_to_float(ddpc_float_to_bf16((float)acc));
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

static inline double ulp_rel(ddpc_dtype t) {
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

static inline void describe(const ctx *x, const combo *k, char *buf, size_t len) {
    snprintf(buf, len, "%s w=%d rank=%d algo=%s %s%s%s count=%zu root=%d%s", coll_names[k->coll],
             x->world, x->rank, x->algo, ddpc_dtype_name(k->t), is_reducing(k->coll) ? " " : "",
             is_reducing(k->coll) ? ddpc_op_name(k->op) : "", k->count,
             is_rooted(k->coll) ? k->root : -1, k->inplace ? " in-place" : "");
}

static inline void report(ctx *x, const combo *k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void report(ctx *x, const combo *k, const char *fmt, ...) {
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
static inline void call_failed(ctx *x, const combo *k, const char *what, ddpc_status s) {
    char d[256];
    describe(x, k, d, sizeof d);
    fprintf(stderr, "ERROR %s: %s -> %s (%s)\n", d, what, ddpc_status_str(s),
            ddpc_comm_last_error(x->c));
    fflush(stderr);
    _exit(1);
}

/* Element j of got (reduction result at global index g) against the reference. */
static inline int check_red_elem(ctx *x, const combo *k, const void *got, size_t j, size_t g) {
    uint64_t bits = 0;
    double f = 0;
    ref_red(x, k->t, k->op, g, &bits, &f);
    if (is_int(k->t)) {
        uint64_t v = load_bits(got, j, ddpc_dtype_size(k->t));
        if (v == bits) return 1;
        report(x, k, "element %zu is %lld (0x%llx), want %lld (0x%llx)", j,
               (long long)norm_int(v, k->t), (unsigned long long)v, (long long)norm_int(bits, k->t),
               (unsigned long long)bits);
        return 0;
    }
    double v = load_f(got, j, k->t);
    double tol = k->op == DDPC_AVG ? ulp_rel(k->t) * fabs(f) : 0;
    if (v == f || fabs(v - f) <= tol) return 1; /* == first: an infinity equals itself */
    report(x, k, "element %zu is %.9g, want %.9g", j, v, f);
    return 0;
}

static inline int check_raw_elem(ctx *x, const combo *k, const void *got, size_t j, int src,
                                 size_t g) {
    size_t es = ddpc_dtype_size(k->t);
    uint64_t want = hv(x->salt, src, g) & mask_of(es), v = load_bits(got, j, es);
    if (v == want) return 1;
    report(x, k, "element %zu is 0x%llx, want 0x%llx (rank %d's element %zu)", j,
           (unsigned long long)v, (unsigned long long)want, src, g);
    return 0;
}

static inline void check_untouched(ctx *x, const combo *k, const unsigned char *p, size_t from,
                                   size_t to, const char *what) {
    for (size_t i = from; i < to; i++)
        if (p[i] != 0xa5) {
            report(x, k, "%s: byte %zu was overwritten (0x%02x)", what, i, p[i]);
            return;
        }
}

/* ------------------------------------------------------------ one call */

static inline void *xmalloc(size_t n) {
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
static inline void run_one(ctx *x, const combo *k) {
    int w = x->world, r = x->rank, root = k->root;
    size_t n = k->count, es = ddpc_dtype_size(k->t), sn = n, rn = n;
    x->salt = mix64(x->salt + 0x51ed27);
    switch (k->coll) {
    case C_ALLGATHER:
    case C_GATHER: rn = (size_t)w * n; break;
    case C_REDUCE_SCATTER:
    case C_SCATTER: sn = (size_t)w * n; break;
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
    case C_ALLREDUCE:
    case C_REDUCE:
    case C_REDUCE_SCATTER:
        for (size_t i = 0; i < sn; i++) put_red(sbuf, i, k->t, k->op, hv(x->salt, r, i));
        if (k->inplace && k->coll == C_REDUCE_SCATTER) recv = sbuf + (size_t)r * n * es;
        break;
    case C_BROADCAST:
    case C_SCATTER:
        if (r == root)
            for (size_t i = 0; i < sn; i++) put_raw(sbuf, i, es, hv(x->salt, root, i));
        break;
    case C_ALLGATHER:
    case C_GATHER:
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
    case C_ALLGATHER:
    case C_GATHER:
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
    if (k->inplace)
        check_untouched(x, k, sbuf, bn * es, (bn + GUARD) * es, "guard after buffer");
    else
        check_untouched(x, k, rbuf, rn * es, (rn + GUARD) * es, "guard after receive buffer");
    if (snap && memcmp(snap, sbuf, sn * es) != 0) {
        size_t i = 0;
        while (snap[i] == sbuf[i]) i++;
        report(x, k, "the send buffer was modified (byte %zu)", i);
    }
    free(snap);
    free(sbuf);
    if (!k->inplace) free(rbuf);
}

/* ------------------------------------------------------------ counts */

/* DDPC_TEST_LEAN=1 (CI's sanitizer run, make check-asan LEAN=1): counts
 * above 4097 run for float32 (sum where the collective reduces) only;
 * every dtype and op still runs at 0, 1, 7, 4097 and world-1. The plain
 * suite runs the whole matrix; the sanitizers need each code path once, not
 * each dtype's large buffer. */
static inline int lean(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("DDPC_TEST_LEAN");
        v = e && *e && strcmp(e, "0") != 0;
    }
    return v;
}

/* Whether a count above 4097 is run for this collective, dtype and op under
 * DDPC_TEST_LEAN (always when it is unset). */
static inline int lean_ok(int coll, ddpc_dtype t, ddpc_op op) {
    return !lean() || (t == DDPC_FLOAT32 && (!is_reducing(coll) || op == DDPC_SUM));
}

/* Whether count 1<<20 is run for this collective, dtype and op (see top). */
static inline int big_ok(int coll, ddpc_dtype t, ddpc_op op) {
    if (!lean_ok(coll, t, op)) return 0;
    if (is_reducing(coll))
        return (t == DDPC_FLOAT32 && (op == DDPC_SUM || op == DDPC_AVG)) ||
               (t == DDPC_INT32 && op == DDPC_SUM) || (t == DDPC_INT64 && op == DDPC_MAX) ||
               (t == DDPC_BFLOAT16 && op == DDPC_SUM);
    return t == DDPC_FLOAT32 || t == DDPC_INT32 || t == DDPC_UINT8;
}

/* {0, 1, 7, 4097, world-1, 1<<20} without repeats. */
static inline int counts_for(int world, size_t *out) {
    size_t c[] = { 0, 1, 7, 4097, (size_t)world - 1, BIG };
    int n = 0;
    for (int i = 0; i < 6; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= out[j] == c[i];
        if (!dup) out[n++] = c[i];
    }
    return n;
}

/* ------------------------------------------------------------ the jobs */

static inline double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void rank_main(int rank, int world, void *arg) {
    const job *j = arg;
    char url[64];
    setenv("DDPC_ALGO", j->algo, 1);
    setenv("DDPC_TIMEOUT", "60", 1);
    setenv("DDPC_CONNECT_TIMEOUT", "60", 1);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", j->port);
    ctx x = { .rank = rank, .world = world, .algo = j->algo, .salt = 12345 };
    double t0 = wall();
    ddpc_status s = ddpc_comm_create_url(url, rank, world, &x.c);
    CHECK_MSG(s == DDPC_OK, "rank %d of %d: ddpc_comm_create_url(%s) -> %s (%s)", rank, world, url,
              ddpc_status_str(s), ddpc_last_error());
    CHECK_EQ(ddpc_comm_rank(x.c), rank);
    CHECK_EQ(ddpc_comm_size(x.c), world);
    double t1 = wall();
    j->body(&x, j);
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

/* Forks world ranks that bootstrap a communicator with DDPC_ALGO=algo, run
 * body and destroy it, within timeout_s. */
static inline void run_job(int world, const char *algo, double timeout_s, coll_body body) {
    atomic_long *shared =
        mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shared != MAP_FAILED);
    atomic_store(shared, 0);
    job j = { t_free_port(), algo, shared, body };
    t_run_ranks(world, timeout_s, rank_main, &j);
    munmap(shared, sizeof *shared);
}

/* A test of world ranks under DDPC_ALGO=algo running body; the harness's
 * deadline is SECS, the ranks' 5 s less. */
#define COLL_JOB_TEST(NAME, W, ALGO, BODY, SECS) \
    TEST_T(NAME, SECS) { run_job(W, #ALGO, (SECS)-5, BODY); }
/* The same with one environment variable set for all ranks. */
#define COLL_JOB_TEST_ENV(NAME, W, ALGO, BODY, VAR, VAL, SECS) \
    TEST_T(NAME, SECS) {                                       \
        setenv(VAR, VAL, 1);                                   \
        run_job(W, #ALGO, (SECS)-5, BODY);                     \
    }
/* A body's tests under auto, named PFX_w<world>[_<transport>]: 1 to 8 ranks
 * on shared memory; 2 and 3 over TCP and over 4 KiB rings; 2 with
 * streaming copies. */
#define COLL_AUTO_TESTS(PFX, BODY)                                                 \
    COLL_JOB_TEST(PFX##_w1, 1, auto, BODY, 60)                                     \
    COLL_JOB_TEST(PFX##_w2, 2, auto, BODY, 60)                                     \
    COLL_JOB_TEST(PFX##_w3, 3, auto, BODY, 90)                                     \
    COLL_JOB_TEST(PFX##_w4, 4, auto, BODY, 90)                                     \
    COLL_JOB_TEST(PFX##_w5, 5, auto, BODY, 120)                                    \
    COLL_JOB_TEST(PFX##_w8, 8, auto, BODY, 180)                                    \
    COLL_JOB_TEST_ENV(PFX##_w2_tcp, 2, auto, BODY, "DDPC_SHM", "0", 60)            \
    COLL_JOB_TEST_ENV(PFX##_w3_tcp, 3, auto, BODY, "DDPC_SHM", "0", 90)            \
    COLL_JOB_TEST_ENV(PFX##_w2_shm4k, 2, auto, BODY, "DDPC_SHM_BYTES", "4096", 60) \
    COLL_JOB_TEST_ENV(PFX##_w3_shm4k, 3, auto, BODY, "DDPC_SHM_BYTES", "4096", 90) \
    COLL_JOB_TEST_ENV(PFX##_w2_shmstream, 2, auto, BODY, "DDPC_SHM_COPY", "stream", 60)

#endif /* DDPC_TEST_COLL_CHECK_H */
