/*
 * bench/cma_read.c — what reading a peer process's buffer in place costs
 * (cross-memory attach, process_vm_readv: the single copy OpenMPI's shared
 * memory takes above its eager size), on lines the owner has just written
 * or on clean ones. The measurement behind docs/BENCHMARKS.md's "Single
 * copy, measured": ddpc copies through a shared ring instead.
 *
 *   cc -O2 bench/cma_read.c -o /tmp/cma_read && /tmp/cma_read BYTES [ITERS [DIRTY]]
 *   (defaults: 50 iterations, DIRTY 1: the owner writes its buffer before
 *   every read)
 *
 * A child owns BYTES; each iteration it (DIRTY) writes them, then the
 * parent reads them with one process_vm_readv into its own buffer. Prints
 * the median read time and, beside it, the parent's memcpy of as many bytes.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int ready, go, done; /* the child's buffer is there; iteration k asked, answered */
    char *addr;
} shared;

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cma_read BYTES [ITERS [DIRTY]]\n");
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 0);
    int iters = argc > 2 ? atoi(argv[2]) : 50, dirty = argc > 3 ? atoi(argv[3]) : 1;
    if (n == 0 || iters < 3) {
        fprintf(stderr, "cma_read: need BYTES > 0 and ITERS >= 3\n");
        return 2;
    }
    shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return perror("mmap"), 1;
    pid_t child = fork();
    if (child == 0) {
        char *b = malloc(n);
        memset(b, 1, n);
        sh->addr = b;
        __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
        for (int k = 1; k <= iters; k++) {
            while (__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE) != k) sched_yield();
            if (dirty) memset(b, k, n);
            __atomic_store_n(&sh->done, k, __ATOMIC_RELEASE);
        }
        pause(); /* the parent still reads the last one; it kills this */
        _exit(0);
    }
    while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) sched_yield();
    char *dst = malloc(n), *loc = malloc(n);
    memset(dst, 0, n);
    memset(loc, 3, n);
    double *tc = malloc(sizeof(double) * (size_t)iters),
           *tm = malloc(sizeof(double) * (size_t)iters);
    int rc = 0;
    for (int k = 1; k <= iters; k++) {
        __atomic_store_n(&sh->go, k, __ATOMIC_RELEASE);
        while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) != k) sched_yield();
        double t0 = now();
        struct iovec l = { dst, n }, r = { sh->addr, n };
        ssize_t got = process_vm_readv(child, &l, 1, &r, 1, 0);
        double t1 = now();
        memcpy(dst, loc, n);
        double t2 = now();
        if (got != (ssize_t)n) {
            perror("process_vm_readv");
            rc = 1;
            break;
        }
        tc[k - 1] = t1 - t0;
        tm[k - 1] = t2 - t1;
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    if (rc) return rc;
    qsort(tc, (size_t)iters, sizeof(double), cmp);
    qsort(tm, (size_t)iters, sizeof(double), cmp);
    double c = tc[iters / 2], m = tm[iters / 2];
    printf("%zu B, %s lines: process_vm_readv %.2f us (%.1f GB/s); memcpy here %.2f us\n", n,
           dirty ? "just written" : "clean", c * 1e6, (double)n / c / 1e9, m * 1e6);
    return 0;
}
