/*
 * mpi_allreduce.c — the OpenMPI peer of `ddpc-bench COLLECTIVE`: float32
 * MPI_Allreduce (sum), MPI_Bcast (root 0), MPI_Reduce_scatter_block (sum) or
 * MPI_Allgather, timed and printed exactly as ddpc-bench does (nccl-tests'
 * table and sizes: the whole send buffer of reduce-scatter, the whole
 * receive buffer of allgather; time = median over iterations of the
 * maximum over ranks; busbw = algbw * 2(n-1)/n for allreduce, (n-1)/n for
 * reduce-scatter and allgather, 1 for broadcast; every size checked once on
 * rank/index-dependent inputs).
 *
 *   mpicc -O2 -o build/bench/mpi_allreduce bench/mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca pml ob1 \
 *       --mca btl tcp,self build/bench/mpi_allreduce [COLLECTIVE] [-b 8] [-e 64M] \
 *       [-f 2] [-n 20] [-w 5] [-c 1] [-F 0]
 *   COLLECTIVE: allreduce (the default), broadcast, reduce-scatter, allgather
 *   -F 1: a store to every cache line of the input before each timed call,
 *   untimed (ddpc-bench's -F: data a step just wrote)
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char *opt, const char *s) {
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024.0 * 1024 * 1024, end++;
    if (*end || end == s || v < 0) {
        fprintf(stderr, "mpi_allreduce: %s '%s' is not a size (like 8, 4K, 1M)\n", opt, s);
        exit(2);
    }
    return (size_t)(v * mul);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Small integers in [-14, 14] that depend on rank and index: every sum over
 * the ranks is exact, whatever the order. */
static float input(int rank, size_t i, unsigned salt) {
    uint64_t x = (uint64_t)rank * 0x9e3779b97f4a7c15ull ^ (i + salt) * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 29;
    return (float)((int)(x % 29) - 14);
}

enum { C_ALLREDUCE, C_BROADCAST, C_REDUCE_SCATTER, C_ALLGATHER, C_N };
static const char *const coll_names[C_N] = { "allreduce", "broadcast", "reduce-scatter",
                                             "allgather" };

/* The call itself: n is the count per rank (of each block for
 * reduce-scatter and allgather). */
/* -F 1: the input's lines made dirty in this core's cache, values kept */
static void touch(void *buf, size_t bytes) {
    volatile char *p = buf;
    for (size_t i = 0; i < bytes; i += 64) p[i] = p[i];
}

static void call(int coll, float *send, float *recv, int n) {
    switch (coll) {
    case C_ALLREDUCE: MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case C_BROADCAST: MPI_Bcast(send, n, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case C_REDUCE_SCATTER:
        MPI_Reduce_scatter_block(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    default: MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD); break;
    }
}

int main(int argc, char **argv) {
    size_t minb = 8, maxb = 64u << 20;
    long factor = 2, iters = 20, warmup = 5;
    int check = 1, fresh = 0, coll = C_ALLREDUCE, first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        coll = -1;
        for (int c = 0; c < C_N; c++)
            if (!strcmp(argv[1], coll_names[c])) coll = c;
        if (coll < 0) {
            fprintf(stderr,
                    "mpi_allreduce: unknown collective '%s' (allreduce, broadcast, "
                    "reduce-scatter, allgather)\n",
                    argv[1]);
            return 2;
        }
        first = 2;
    }
    for (int i = first; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-b"))
            minb = parse_size("-b", argv[i + 1]);
        else if (!strcmp(argv[i], "-e"))
            maxb = parse_size("-e", argv[i + 1]);
        else if (!strcmp(argv[i], "-f"))
            factor = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-n"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-w"))
            warmup = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-c"))
            check = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-F"))
            fresh = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "mpi_allreduce: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (iters < 1 || factor < 2 || minb < 4 || minb > maxb) {
        fprintf(stderr, "mpi_allreduce: need -n >= 1, -f >= 2, 4 <= -b <= -e\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    size_t maxn = maxb / 4;
    float *send = malloc(maxn * 4), *recv = malloc(maxn * 4);
    double *times = malloc(sizeof(double) * (size_t)iters);
    if (!send || !recv || !times) MPI_Abort(MPI_COMM_WORLD, 1);
    if (rank == 0) {
        printf("# mpi_allreduce %s: %d ranks, float32, sum, iters %ld, warmup %ld, check %d\n",
               coll_names[coll], world, iters, warmup, check);
        printf("# time: median over iterations of the maximum over ranks\n#\n");
        printf("# %10s %12s %8s %6s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop",
               "root", "time", "algbw", "busbw", "#wrong");
        printf("# %10s %12s %8s %6s %6s %10s %8s %8s %6s\n", "(B)", "(elements)", "", "", "",
               "(us)", "(GB/s)", "(GB/s)", "");
    }
    double bw_sum = 0;
    int nsizes = 0;
    long wrong_total = 0;
    for (size_t bytes = minb; bytes <= maxb; bytes *= (size_t)factor) {
        /* n: count per rank (per block); sn, rn: elements in send and receive */
        int total = (int)(bytes / 4), w = world;
        int n = coll == C_REDUCE_SCATTER || coll == C_ALLGATHER ? total / w : total;
        int sn = coll == C_REDUCE_SCATTER ? n * w : n;
        int rn = coll == C_ALLGATHER ? n * w : n;
        size_t used = (size_t)(coll == C_REDUCE_SCATTER ? sn : rn) * 4;
        /* broadcast's buffer is send on every rank: the root's input, the others' output */
        for (int i = 0; i < sn; i++) send[i] = input(coll == C_BROADCAST ? 0 : rank, (size_t)i, 0);
        for (long i = 0; i < warmup; i++) call(coll, send, recv, n);
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters; i++) {
            if (fresh) touch(send, (size_t)sn * 4);
            double t0 = MPI_Wtime();
            call(coll, send, recv, n);
            times[i] = MPI_Wtime() - t0;
        }
        MPI_Allreduce(MPI_IN_PLACE, times, (int)iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(times, (size_t)iters, sizeof(double), cmp_double);
        double med = iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
        long wrong = 0;
        if (check) {
            for (int i = 0; i < sn; i++)
                send[i] = coll == C_BROADCAST && rank != 0 ? -99.0f : input(rank, (size_t)i, 7);
            memset(recv, 0xa5, (size_t)rn * 4);
            call(coll, send, recv, n);
            const float *got = coll == C_BROADCAST ? send : recv;
            for (int i = 0; i < rn; i++) {
                float want = 0;
                if (coll == C_BROADCAST)
                    want = input(0, (size_t)i, 7);
                else if (coll == C_ALLGATHER)
                    want = input(i / n, (size_t)(i % n), 7);
                else
                    for (int r = 0; r < world; r++)
                        want += input(r, (size_t)(coll == C_REDUCE_SCATTER ? rank * n + i : i), 7);
                wrong += got[i] != want;
            }
            MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
            wrong_total += wrong;
        }
        double fac = coll == C_ALLREDUCE   ? 2.0 * (world - 1) / world
                     : coll == C_BROADCAST ? 1.0
                                           : (double)(world - 1) / world;
        double algbw = med > 0 ? (double)used / med / 1e9 : 0, busbw = algbw * fac;
        bw_sum += busbw;
        nsizes++;
        if (rank == 0) {
            printf("  %10zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %6ld\n", used, used / 4, "float32",
                   coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER ? "sum" : "none",
                   coll == C_BROADCAST ? 0 : -1, med * 1e6, algbw, busbw, wrong);
            fflush(stdout);
        }
        if (bytes > maxb / (size_t)factor) break;
    }
    if (rank == 0) {
        printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth : %.4f\n", nsizes ? bw_sum / nsizes : 0.0);
    }
    free(send);
    free(recv);
    free(times);
    MPI_Finalize();
    return wrong_total ? 1 : 0;
}
