/*
 * bench/shm_line.c — the floor under a 2-rank small allreduce on this host:
 * two processes, each on a CPU of its own, exchange one cache line per
 * round, the line's last word a sequence number the other side spins on
 * (NCCL's LL and OpenMPI's fast box flag their data the same way). A round
 * is one line each way, which any allreduce of up to 56 bytes needs at
 * least; nothing else is done.
 *
 * Prints, like ddpc-bench, one row of nccl-tests' table for 8 bytes: the
 * time is the median over ITERS rounds (timed in blocks of 100, after
 * WARMUP), so bench/allreduce_peers.sh reads it beside the collectives.
 *
 *   cc -O2 bench/shm_line.c -o /tmp/shm_line && /tmp/shm_line [-n ITERS] [-w WARMUP]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct line {
    _Alignas(64) uint64_t data[7];
    uint64_t seq; /* written last (release): the data before it is there */
} line;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One round: publish this side's line for round i, wait for the other's
 * (spinning: each process has its own CPU; a peer silent for 5 s ends it). */
static void round_trip(line *mine, const line *theirs, uint64_t i) {
    mine->data[0] = i;
    __atomic_store_n(&mine->seq, i, __ATOMIC_RELEASE);
    double give_up = 0;
    for (unsigned n = 1; __atomic_load_n(&theirs->seq, __ATOMIC_ACQUIRE) < i; n++) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        if (n % (1u << 20) == 0) {
            if (give_up == 0) give_up = now_s() + 5;
            if (now_s() > give_up) {
                fprintf(stderr, "shm_line: the other process is silent\n");
                exit(1);
            }
        }
    }
}

int main(int argc, char **argv) {
    long iters = 20000, warmup = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n"))
            iters = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-w"))
            warmup = atol(argv[i + 1]);
    }
    if (iters < 100) iters = 100;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2) {
        fprintf(stderr, "shm_line: needs 2 CPUs (each side spins on one of its own)\n");
        return 1;
    }
    line *l =
        mmap(NULL, 2 * sizeof(line), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED) return 1;
    memset(l, 0, 2 * sizeof(line));
    pid_t pid = fork();
    int me = pid == 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(me, &set);
    sched_setaffinity(0, sizeof set, &set);
    uint64_t i = 0;
    for (long k = 0; k < warmup; k++) round_trip(&l[me], &l[!me], ++i);
    long blocks = iters / 100;
    double *t = malloc(sizeof(double) * (size_t)blocks);
    for (long b = 0; b < blocks; b++) {
        double t0 = now_s();
        for (int k = 0; k < 100; k++) round_trip(&l[me], &l[!me], ++i);
        t[b] = (now_s() - t0) / 100;
    }
    if (me) return 0;
    waitpid(pid, NULL, 0);
    qsort(t, (size_t)blocks, sizeof(double), cmp_double);
    double med = t[blocks / 2];
    printf("# shm_line: one cache line each way per round, 2 processes on CPUs 0 and 1\n");
    printf("# time: median over blocks of 100 rounds of the time per round\n");
    printf("  %10d %12d %8s %6s %6d %10.2f %8.3f %8.3f %6d\n", 8, 2, "float32", "sum", -1,
           med * 1e6, 8 / med / 1e9, 8 / med / 1e9, 0);
    free(t);
    return 0;
}
