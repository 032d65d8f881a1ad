/*
 * ddpc-bench — the collective benchmark, after nccl-tests.
 *
 *   ddpc-bench COLLECTIVE [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS]
 *              [-w WARMUP] [-d DTYPE] [-o OP] [-r ROOT] [-c 0|1] [-F 0|1]
 *
 * Runs in every rank of a job whose launcher sets torchrun's variables
 * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: ddpc-run, torchrun, mpirun,
 * srun). For each size from MINBYTES to MAXBYTES (times FACTOR each step)
 * rank 0 prints one row of nccl-tests' table: size (B), count (elements),
 * type, redop, root, time (us), algbw (GB/s), busbw (GB/s), #wrong; and
 * last "# Avg bus bandwidth : X" (the mean busbw over the sizes).
 *
 * Sizes are nccl-tests': the bytes of the larger buffer of one rank (the
 * whole receive buffer of allgather, the whole send buffer of
 * reduce-scatter and alltoall), rounded down to whole elements per rank.
 * time is the MEDIAN over the ITERS timed iterations of each iteration's
 * MAXIMUM over the ranks (every call is timed on its own, after WARMUP
 * untimed ones and a barrier). algbw = size / time; busbw = algbw times
 * nccl-tests' factor: allreduce 2(n-1)/n, allgather, reduce-scatter and
 * alltoall (n-1)/n, broadcast and reduce 1.
 *
 * With -c 1 (the default) every size is also run once more on fresh inputs
 * that depend on rank and element index, and every element of the result
 * is checked against a reference computed here (exact for integers and
 * for float sums, products, max and min; one unit in the last place for
 * avg); #wrong sums the mismatches over the ranks, and any makes the exit
 * status 1. Bad usage: one line naming the option, exit status 2.
 *
 *   ddpc-bench bootstrap
 *
 * Times the communicator's creation instead: rank 0 prints how long the
 * ranks took from the first one entering ddpc_comm_create_env to the last
 * one leaving it (and from the last one entering), then the first
 * allreduce, broadcast and barrier after it (where connections are made
 * lazily, these make them), and each rank's open descriptors and sockets
 * after them (least and most over the ranks). bench/bootstrap.sh runs it.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "ddpc/ddpc.h"

enum { B_ALLREDUCE, B_BROADCAST, B_REDUCE, B_ALLGATHER, B_REDUCE_SCATTER, B_ALLTOALL, B_N };
static const char *const coll_names[B_N] = { "allreduce", "broadcast",      "reduce",
                                             "allgather", "reduce-scatter", "alltoall" };

typedef struct {
    int coll;
    size_t minb, maxb;
    long factor, iters, warmup;
    ddpc_dtype t;
    ddpc_op op;
    int root, check, fresh, inplace;
} opts;

static void usage(FILE *f) {
    fprintf(f, "usage: ddpc-bench COLLECTIVE [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] [-n ITERS]\n"
               "                  [-w WARMUP] [-d DTYPE] [-o OP] [-r ROOT] [-c 0|1]\n"
               "                  [-F 0|1] [-I 0|1]\n"
               "       ddpc-bench bootstrap   (times the communicator's creation)\n"
               "  COLLECTIVE  allreduce, broadcast, reduce, allgather, reduce-scatter, alltoall\n"
               "  -b MINBYTES smallest size, with K/M/G suffixes (default 8)\n"
               "  -e MAXBYTES largest size (default 64M)\n"
               "  -f FACTOR   multiply the size by FACTOR each step (default 2)\n"
               "  -n ITERS    timed iterations per size (default 20)\n"
               "  -w WARMUP   untimed iterations per size first (default 5)\n"
               "  -d DTYPE    int8 uint8 int16 uint16 int32 uint32 int64 uint64 float16 bfloat16\n"
               "              float32 float64\n"
               "              (default float32)\n"
               "  -o OP       sum prod max min avg band bor bxor (default sum)\n"
               "  -r ROOT     root of broadcast and reduce (default 0)\n"
               "  -c 0|1      check every size's result (default 1)\n"
               "  -F 0|1      1: store to every cache line of the input before each timed call,\n"
               "              untimed, as a training step leaves the data it wrote (default 0:\n"
               "              the buffer the last call left, as nccl-tests and OpenMPI's do)\n"
               "  -I 0|1      1: broadcast in place, one buffer for input and output (MPI_Bcast's\n"
               "              form; default 0: out of place, as nccl-tests' first column)\n"
               "Run one process per rank under a launcher that sets RANK, WORLD_SIZE,\n"
               "MASTER_ADDR, MASTER_PORT (ddpc-run, torchrun, mpirun). time is the median over\n"
               "iterations of the maximum over ranks; busbw uses nccl-tests' factors.\n");
}

static void bad_usage(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "ddpc-bench: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see ddpc-bench --help)\n");
    exit(2);
}

static void parse_args(int argc, char **argv, opts *o) {
    *o = (opts){ .coll = -1,
                 .minb = 8,
                 .maxb = 64u << 20,
                 .factor = 2,
                 .iters = 20,
                 .warmup = 5,
                 .t = DDPC_FLOAT32,
                 .op = DDPC_SUM,
                 .root = 0,
                 .check = 1 };
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            exit(0);
        }
    if (argc < 2)
        bad_usage("missing COLLECTIVE (%s%s)", "allreduce, broadcast, reduce, ",
                  "allgather, reduce-scatter, alltoall");
    for (int c = 0; c < B_N; c++)
        if (!strcmp(argv[1], coll_names[c])) o->coll = c;
    if (!strcmp(argv[1], "reduce_scatter")) o->coll = B_REDUCE_SCATTER;
    if (o->coll < 0)
        bad_usage("unknown collective '%s'%s", argv[1],
                  " (allreduce, broadcast, reduce, allgather, reduce-scatter, alltoall)");
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || !a[1] || a[2]) bad_usage("unexpected argument '%s'%s", a, "");
        if (i + 1 >= argc) bad_usage("option %s needs a value%s", a, "");
        const char *v = argv[++i];
        long l;
        switch (a[1]) {
        case 'b':
        case 'e':
            if (ddpc__parse_size(a, v, a[1] == 'b' ? &o->minb : &o->maxb) != DDPC_OK)
                bad_usage("%s: %s", a, ddpc_last_error());
            break;
        case 'f':
        case 'n':
        case 'w':
        case 'r':
        case 'c':
        case 'I':
        case 'F': {
            long lo = a[1] == 'f' || a[1] == 'n' ? 1 : 0;
            long hi = a[1] == 'c' || a[1] == 'F' || a[1] == 'I' ? 1
                      : a[1] == 'f'                             ? 1024
                                                                : 100000000;
            if (ddpc__parse_long(a, v, lo, hi, &l) != DDPC_OK)
                bad_usage("%s%s", ddpc_last_error(), "");
            if (a[1] == 'f')
                o->factor = l;
            else if (a[1] == 'n')
                o->iters = l;
            else if (a[1] == 'w')
                o->warmup = l;
            else if (a[1] == 'r')
                o->root = (int)l;
            else if (a[1] == 'c')
                o->check = (int)l;
            else if (a[1] == 'I')
                o->inplace = (int)l;
            else
                o->fresh = (int)l;
            break;
        }
        case 'd':
            if (ddpc_dtype_parse(v, &o->t) != DDPC_OK) bad_usage("-d: %s%s", ddpc_last_error(), "");
            break;
        case 'o':
            if (ddpc_op_parse(v, &o->op) != DDPC_OK) bad_usage("-o: %s%s", ddpc_last_error(), "");
            break;
        default: bad_usage("unknown option %s%s", a, "");
        }
    }
    if (o->minb > o->maxb) bad_usage("-b %s is larger than -e %s", "MINBYTES", "MAXBYTES");
    if (o->inplace && o->coll != B_BROADCAST)
        bad_usage("-I 1 is for broadcast only (%s%s)", coll_names[o->coll], "");
    if (o->factor < 2 && o->minb != o->maxb)
        bad_usage("-f must be at least 2 when -b < -e%s%s", "", "");
    /* the library refuses these too; say so before starting the ranks */
    int reducing = o->coll == B_ALLREDUCE || o->coll == B_REDUCE || o->coll == B_REDUCE_SCATTER;
    int bitwise = o->op == DDPC_BAND || o->op == DDPC_BOR || o->op == DDPC_BXOR;
    int flt = o->t == DDPC_FLOAT16 || o->t == DDPC_BFLOAT16 || o->t == DDPC_FLOAT32 ||
              o->t == DDPC_FLOAT64;
    if (reducing && bitwise && flt)
        bad_usage("-o %s needs an integer -d, got %s", ddpc_op_name(o->op), ddpc_dtype_name(o->t));
}

/* ------------------------------------------------------------ inputs */

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t hv(uint64_t salt, int r, size_t g) {
    return mix64(mix64(salt * 1000003u + (uint64_t)r) ^ (uint64_t)g);
}
static int is_int(ddpc_dtype t) { return t <= DDPC_UINT64 || t == DDPC_INT16 || t == DDPC_UINT16; }
static int is_signed(ddpc_dtype t) {
    return t == DDPC_INT8 || t == DDPC_INT16 || t == DDPC_INT32 || t == DDPC_INT64;
}
static uint64_t mask_of(size_t es) { return es == 8 ? ~0ull : (1ull << (8 * es)) - 1; }
static uint64_t norm_int(uint64_t x, ddpc_dtype t) {
    size_t es = ddpc_dtype_size(t);
    x &= mask_of(es);
    if (is_signed(t) && es < 8 && (x >> (8 * es - 1)) & 1) x |= ~mask_of(es);
    return x;
}
/* Float inputs: small integers (sum, max, min, avg) or +-{0.5, 1, 2} (prod),
 * exact in every float type, so sums and products are order-independent. */
static double fval(ddpc_op op, uint64_t h) {
    if (op == DDPC_PROD) {
        double m = ldexp(1.0, (int)(h % 3) - 1);
        return (h >> 8) & 1 ? -m : m;
    }
    return (double)((int)(h % 29) - 14);
}
static void put(void *buf, size_t i, ddpc_dtype t, ddpc_op op, uint64_t h) {
    size_t es = ddpc_dtype_size(t);
    if (is_int(t)) {
        memcpy((char *)buf + i * es, &h, es);
        return;
    }
    double v = fval(op, h);
    switch (t) {
    case DDPC_FLOAT16: ((uint16_t *)buf)[i] = ddpc_float_to_half((float)v); break;
    case DDPC_BFLOAT16: ((uint16_t *)buf)[i] = ddpc_float_to_bf16((float)v); break;
    case DDPC_FLOAT32: ((float *)buf)[i] = (float)v; break;
    default: ((double *)buf)[i] = v; break;
    }
}
static double getf(const void *buf, size_t i, ddpc_dtype t) {
    switch (t) {
    case DDPC_FLOAT16: return ddpc_half_to_float(((const uint16_t *)buf)[i]);
    case DDPC_BFLOAT16: return ddpc_bf16_to_float(((const uint16_t *)buf)[i]);
    case DDPC_FLOAT32: return ((const float *)buf)[i];
    default: return ((const double *)buf)[i];
    }
}

/* 1 when got[j] is rank src's input at index g (data movement). */
static int same_input(const void *got, size_t j, ddpc_dtype t, ddpc_op op, uint64_t salt, int src,
                      size_t g) {
    size_t es = ddpc_dtype_size(t);
    unsigned char want[8];
    put(want, 0, t, op, hv(salt, src, g));
    return memcmp((const char *)got + j * es, want, es) == 0;
}

/* 1 when got[j] is the reduction over all ranks of their inputs at index g. */
static int reduced_ok(const void *got, size_t j, ddpc_dtype t, ddpc_op op, uint64_t salt, int w,
                      size_t g) {
    if (is_int(t)) {
        int sg = is_signed(t);
        uint64_t acc = 0;
        for (int r = 0; r < w; r++) {
            uint64_t v = norm_int(hv(salt, r, g), t);
            if (r == 0)
                acc = v;
            else if (op == DDPC_SUM || op == DDPC_AVG)
                acc += v;
            else if (op == DDPC_PROD)
                acc *= v;
            else if (op == DDPC_MAX)
                acc = (sg ? (int64_t)v > (int64_t)acc : v > acc) ? v : acc;
            else if (op == DDPC_MIN)
                acc = (sg ? (int64_t)v < (int64_t)acc : v < acc) ? v : acc;
            else if (op == DDPC_BAND)
                acc &= v;
            else if (op == DDPC_BOR)
                acc |= v;
            else
                acc ^= v;
        }
        acc = norm_int(acc, t);
        if (op == DDPC_AVG) acc = sg ? (uint64_t)((int64_t)acc / w) : acc / (uint64_t)w;
        size_t es = ddpc_dtype_size(t);
        uint64_t v = 0;
        memcpy(&v, (const char *)got + j * es, es);
        return v == (acc & mask_of(es));
    }
    double acc = 0;
    for (int r = 0; r < w; r++) {
        double v = fval(op, hv(salt, r, g));
        if (r == 0)
            acc = v;
        else if (op == DDPC_SUM || op == DDPC_AVG)
            acc += v;
        else if (op == DDPC_PROD)
            acc *= v;
        else if (op == DDPC_MAX)
            acc = v > acc ? v : acc;
        else
            acc = v < acc ? v : acc;
    }
    double tol = 0;
    if (op == DDPC_AVG) {
        acc /= w;
        tol = fabs(acc) * (t == DDPC_FLOAT16    ? ldexp(1, -10)
                           : t == DDPC_BFLOAT16 ? ldexp(1, -7)
                           : t == DDPC_FLOAT32  ? ldexp(1, -23)
                                                : ldexp(1, -52));
        tol *= 1.0001;
    }
    return fabs(getf(got, j, t) - acc) <= tol;
}

/* ------------------------------------------------------------ running */

typedef struct {
    ddpc_comm *c;
    const opts *o;
    int rank, world;
    size_t n;      /* count argument of the call (per rank for allgather etc.) */
    size_t sn, rn; /* elements in the send and receive buffers */
    void *send, *recv;
} bench;

static ddpc_status call(bench *b) {
    const opts *o = b->o;
    switch (o->coll) {
    case B_ALLREDUCE: return ddpc_allreduce(b->c, b->send, b->recv, b->n, o->t, o->op);
    case B_BROADCAST: return ddpc_broadcast(b->c, b->send, b->recv, b->n, o->t, o->root);
    case B_REDUCE: return ddpc_reduce(b->c, b->send, b->recv, b->n, o->t, o->op, o->root);
    case B_ALLGATHER: return ddpc_allgather(b->c, b->send, b->recv, b->n, o->t);
    case B_REDUCE_SCATTER: return ddpc_reduce_scatter(b->c, b->send, b->recv, b->n, o->t, o->op);
    default: return ddpc_alltoall(b->c, b->send, b->recv, b->n, o->t);
    }
}

static void die(bench *b, const char *what, ddpc_status s) {
    /* a refused argument is in this thread's last error, not the communicator's */
    const char *msg = b->c ? ddpc_comm_last_error(b->c) : "";
    if (!msg || !*msg) msg = ddpc_last_error();
    fprintf(stderr, "ddpc-bench: rank %d: %s: %s (%s)\n", b->rank, what, ddpc_status_str(s), msg);
    exit(1);
}

/* -F 1: the input's lines made dirty in this core's cache, values kept. */
static void touch(void *buf, size_t bytes) {
    volatile char *p = buf;
    for (size_t i = 0; i < bytes; i += 64) p[i] = p[i];
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Fills the send buffer with this rank's inputs for salt. */
static void fill(bench *b, uint64_t salt) {
    const opts *o = b->o;
    int src = (o->coll == B_BROADCAST) ? o->root : b->rank;
    if (b->recv == b->send && b->rank != o->root) { /* in place: what the root's data replaces */
        memset(b->send, 0xa5, b->sn * ddpc_dtype_size(o->t));
        return;
    }
    for (size_t i = 0; i < b->sn; i++) put(b->send, i, o->t, o->op, hv(salt, src, i));
}

/* Mismatching elements of this rank's result for salt. */
static long verify(bench *b, uint64_t salt) {
    const opts *o = b->o;
    int r = b->rank, w = b->world;
    size_t n = b->n;
    long wrong = 0;
    switch (o->coll) {
    case B_ALLREDUCE:
        for (size_t j = 0; j < n; j++) wrong += !reduced_ok(b->recv, j, o->t, o->op, salt, w, j);
        break;
    case B_REDUCE:
        if (r == o->root)
            for (size_t j = 0; j < n; j++)
                wrong += !reduced_ok(b->recv, j, o->t, o->op, salt, w, j);
        break;
    case B_REDUCE_SCATTER:
        for (size_t j = 0; j < n; j++)
            wrong += !reduced_ok(b->recv, j, o->t, o->op, salt, w, (size_t)r * n + j);
        break;
    case B_BROADCAST:
        for (size_t j = 0; j < n; j++)
            wrong += !same_input(b->recv, j, o->t, o->op, salt, o->root, j);
        break;
    case B_ALLGATHER:
        for (size_t j = 0; j < b->rn; j++)
            wrong += !same_input(b->recv, j, o->t, o->op, salt, (int)(j / n), j % n);
        break;
    default: /* alltoall: block i of my recv is block r of rank i's send */
        for (size_t j = 0; j < b->rn; j++)
            wrong +=
                !same_input(b->recv, j, o->t, o->op, salt, (int)(j / n), (size_t)r * n + j % n);
        break;
    }
    return wrong;
}

/* Sets the counts for a size in bytes; returns the size actually used. */
static size_t set_size(bench *b, size_t bytes) {
    size_t es = ddpc_dtype_size(b->o->t), w = (size_t)b->world, total = bytes / es;
    switch (b->o->coll) {
    case B_ALLGATHER:
        b->n = total / w;
        b->sn = b->n;
        b->rn = b->n * w;
        return b->rn * es;
    case B_REDUCE_SCATTER:
        b->n = total / w;
        b->sn = b->n * w;
        b->rn = b->n;
        return b->sn * es;
    case B_ALLTOALL:
        b->n = total / w;
        b->sn = b->rn = b->n * w;
        return b->sn * es;
    default: b->n = b->sn = b->rn = total; return total * es;
    }
}

static double bus_factor(int coll, int w) {
    switch (coll) {
    case B_ALLREDUCE: return 2.0 * (w - 1) / w;
    case B_BROADCAST:
    case B_REDUCE: return 1.0;
    default: return (double)(w - 1) / w;
    }
}

/* One row of the table: a size's median time (the maximum over ranks of
 * each iteration, then the median over iterations) and, checked, the count
 * of wrong elements over all ranks. */
typedef struct {
    size_t used; /* bytes the call moved per rank, as nccl-tests counts them */
    double med;  /* seconds */
    long wrong;
} row;

static int is_rooted(const opts *o) { return o->coll == B_BROADCAST || o->coll == B_REDUCE; }
static int is_reducing(const opts *o) {
    return o->coll == B_ALLREDUCE || o->coll == B_REDUCE || o->coll == B_REDUCE_SCATTER;
}

static void print_header(const bench *b) {
    const opts *o = b->o;
    printf("# ddpc-bench %s: %d ranks, %s, %s, iters %ld, warmup %ld, check %d%s%s\n",
           coll_names[o->coll], b->world, ddpc_dtype_name(o->t),
           is_reducing(o) ? ddpc_op_name(o->op) : "-", o->iters, o->warmup, o->check,
           o->fresh ? ", input written before each call" : "", o->inplace ? ", in place" : "");
    printf("# time: median over iterations of the maximum over ranks\n#\n");
    printf("# %10s %12s %8s %6s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong");
    printf("# %10s %12s %8s %6s %6s %10s %8s %8s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
}

/* Times one size: warm-up, a barrier, the timed iterations; then, with
 * checking on, one more call on fresh inputs, verified. times has o->iters
 * places. Ends the process on a failed call (die). */
static row run_size(bench *b, size_t bytes, double *times, uint64_t salt) {
    const opts *o = b->o;
    ddpc_status s;
    row r = { .used = set_size(b, bytes) };
    fill(b, salt);
    for (long i = 0; i < o->warmup; i++)
        if ((s = call(b)) != DDPC_OK) die(b, "warm-up", s);
    if ((s = ddpc_barrier(b->c)) != DDPC_OK) die(b, "barrier", s);
    for (long i = 0; i < o->iters; i++) {
        if (o->fresh) touch(b->send, b->sn * ddpc_dtype_size(o->t));
        double t0 = now_s();
        if ((s = call(b)) != DDPC_OK) die(b, coll_names[o->coll], s);
        times[i] = now_s() - t0;
    }
    s = ddpc_allreduce(b->c, times, times, (size_t)o->iters, DDPC_FLOAT64, DDPC_MAX);
    if (s != DDPC_OK) die(b, "allreduce of the timings", s);
    qsort(times, (size_t)o->iters, sizeof(double), cmp_double);
    long n = o->iters;
    r.med = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    if (o->check) {
        fill(b, salt + 1);
        if (b->recv != b->send) memset(b->recv, 0xa5, b->rn * ddpc_dtype_size(o->t));
        if ((s = call(b)) != DDPC_OK) die(b, "checked run", s);
        int64_t wr = verify(b, salt + 1);
        if ((s = ddpc_allreduce(b->c, &wr, &wr, 1, DDPC_INT64, DDPC_SUM)) != DDPC_OK)
            die(b, "allreduce of the error counts", s);
        r.wrong = (long)wr;
    }
    return r;
}

static void print_row(const bench *b, const row *r, double algbw, double busbw) {
    const opts *o = b->o;
    char wr[16];
    if (o->check)
        snprintf(wr, sizeof wr, "%ld", r->wrong);
    else
        snprintf(wr, sizeof wr, "N/A");
    printf("  %10zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %6s\n", r->used,
           r->used / ddpc_dtype_size(o->t), ddpc_dtype_name(o->t),
           is_reducing(o) ? ddpc_op_name(o->op) : "none", is_rooted(o) ? o->root : -1, r->med * 1e6,
           algbw, busbw, wr);
    fflush(stdout);
}

/* The buffers for the largest size (with room for any rounding); 0 or 1
 * (out of memory, said on stderr). */
static int alloc_buffers(bench *b, double **times) {
    size_t es = ddpc_dtype_size(b->o->t);
    size_t maxel = b->o->maxb / es + (size_t)b->world;
    b->send = malloc(maxel * es);
    b->recv = b->o->inplace ? b->send : calloc(maxel, es);
    *times = malloc(sizeof(double) * (size_t)b->o->iters);
    if (b->send && b->recv && *times) return 0;
    fprintf(stderr, "ddpc-bench: out of memory for %zu-byte buffers\n", maxel * es);
    return 1;
}

/* ------------------------------------------------------------ bootstrap */

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* one clock for every rank of the machine */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This process's open descriptors, and how many of them are sockets. */
static void count_fds(double *fds, double *socks) {
    *fds = *socks = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    int self = dirfd(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
        char path[300], to[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, to, sizeof to - 1);
        to[n > 0 ? n : 0] = '\0';
        *fds += 1;
        *socks += strncmp(to, "socket:", 7) == 0;
    }
    closedir(d);
}

/* ddpc-bench bootstrap (see the top of the file). */
static int bench_bootstrap(int argc, char **argv) {
    if (argc > 2) bad_usage("bootstrap takes no options ('%s')%s", argv[2], "");
    double t_in = wall_s();
    ddpc_comm *c;
    ddpc_status s = ddpc_comm_create_env(&c);
    double t_out = wall_s();
    if (s != DDPC_OK) {
        fprintf(stderr, "ddpc-bench: %s: %s\n", ddpc_status_str(s), ddpc_last_error());
        return 1;
    }
    /* times relative to a base every rank shares: doubles keep microseconds */
    double base = floor(t_in / 1000) * 1000;
    enum { IN_FIRST, IN_LAST, OUT_LAST, T_AR, T_BC, T_BAR, FDS, SOCKS, NV };
    double v[NV], mx[NV], mn[NV], x = 1;
    v[IN_FIRST] = -(t_in - base);
    v[IN_LAST] = t_in - base;
    v[OUT_LAST] = t_out - base;
    double t0 = now_s();
    if (s == DDPC_OK) s = ddpc_allreduce(c, &x, &x, 1, DDPC_FLOAT64, DDPC_SUM);
    v[T_AR] = now_s() - t0;
    t0 = now_s();
    if (s == DDPC_OK) s = ddpc_broadcast(c, &x, &x, 1, DDPC_FLOAT64, 0);
    v[T_BC] = now_s() - t0;
    t0 = now_s();
    if (s == DDPC_OK) s = ddpc_barrier(c);
    v[T_BAR] = now_s() - t0;
    count_fds(&v[FDS], &v[SOCKS]);
    if (s == DDPC_OK) s = ddpc_allreduce(c, v, mx, NV, DDPC_FLOAT64, DDPC_MAX);
    if (s == DDPC_OK) s = ddpc_allreduce(c, v, mn, NV, DDPC_FLOAT64, DDPC_MIN);
    int n = ddpc_comm_size(c), wrong = s == DDPC_OK && x != n;
    if (s == DDPC_OK && ddpc_comm_rank(c) == 0) {
        printf("bootstrap: %d ranks ready in %.3f s (first entering to last leaving "
               "ddpc_comm_create_env; %.3f s after the last entered)\n",
               n, mx[OUT_LAST] + mx[IN_FIRST], mx[OUT_LAST] - mx[IN_LAST]);
        printf("first calls: allreduce %.3f ms, broadcast %.3f ms, barrier %.3f ms (slowest "
               "rank)\n",
               mx[T_AR] * 1e3, mx[T_BC] * 1e3, mx[T_BAR] * 1e3);
        printf("per rank after them: %.0f-%.0f descriptors open, %.0f-%.0f of them sockets\n",
               mn[FDS], mx[FDS], mn[SOCKS], mx[SOCKS]);
        if (wrong) printf("# allreduce gave %g, not %d: FAILED\n", x, n);
    }
    if (s != DDPC_OK)
        fprintf(stderr, "ddpc-bench: %s: %s\n", ddpc_status_str(s), ddpc_last_error());
    ddpc_status d = ddpc_comm_destroy(c);
    if (d != DDPC_OK) fprintf(stderr, "ddpc-bench: destroy: %s\n", ddpc_last_error());
    return s != DDPC_OK || d != DDPC_OK || wrong;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "bootstrap")) return bench_bootstrap(argc, argv);
    opts o;
    parse_args(argc, argv, &o);
    bench b = { .o = &o };
    double *times = NULL;
    ddpc_status s = ddpc_comm_create_env(&b.c);
    if (s != DDPC_OK) {
        fprintf(stderr, "ddpc-bench: %s: %s\n", ddpc_status_str(s), ddpc_last_error());
        return 1;
    }
    b.rank = ddpc_comm_rank(b.c);
    b.world = ddpc_comm_size(b.c);
    int rc = 0;
    if (o.root >= b.world) {
        if (b.rank == 0)
            fprintf(stderr, "ddpc-bench: -r %d is not a rank (world size %d)\n", o.root, b.world);
        rc = 2;
        goto done;
    }
    if ((rc = alloc_buffers(&b, &times)) != 0) goto done;
    if (b.rank == 0) print_header(&b);
    double bw_sum = 0;
    int nsizes = 0;
    long wrong_total = 0;
    uint64_t salt = 1;
    for (size_t bytes = o.minb;; salt += 2) {
        row r = run_size(&b, bytes, times, salt);
        double algbw = r.med > 0 ? (double)r.used / r.med / 1e9 : 0;
        double busbw = algbw * bus_factor(o.coll, b.world);
        bw_sum += busbw;
        nsizes++;
        wrong_total += r.wrong;
        if (b.rank == 0) print_row(&b, &r, algbw, busbw);
        size_t next = bytes ? bytes * (size_t)o.factor : 1;
        if (bytes >= o.maxb || next > o.maxb || o.factor < 2) break;
        bytes = next;
    }
    if (b.rank == 0) {
        if (o.check)
            printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth : %.4f\n", nsizes ? bw_sum / nsizes : 0.0);
    }
    rc = wrong_total ? 1 : 0;
done:
    s = ddpc_comm_destroy(b.c);
    free(b.send);
    if (b.recv != b.send) free(b.recv);
    free(times);
    if (s != DDPC_OK) {
        fprintf(stderr, "ddpc-bench: destroy: %s (%s)\n", ddpc_status_str(s), ddpc_last_error());
        return 1;
    }
    return rc;
}
