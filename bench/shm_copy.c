/*
 * bench/shm_copy.c — what a write into a shared-memory ring costs on this
 * host, cached against streamed (non-temporal) stores: the measurement behind
 * DDPC_SHM_COPY=auto (src/transport/shm.c).
 *
 * Two processes share one region per direction, as two ranks share a pair of
 * rings. Each iteration, both write BYTES of their own buffer into their
 * outgoing region at once, meet, then both read the other's region into a
 * local buffer, and meet again: the writer's lines were last read by the
 * other core a lap before, as in a ring. Cached and streamed iterations
 * alternate. Each round prints rank 0's medians (us) of the write and of the
 * read after it, for both kinds; rounds are SECS seconds apart, because a
 * hypervisor moves vCPUs (sharing a cache or not) on that time scale.
 *
 *   cc -O2 bench/shm_copy.c -o /tmp/shm_copy && /tmp/shm_copy [BYTES [ROUNDS [SECS]]]
 *   (defaults: 819200 bytes, the half of a 1.6 MB gradient bucket; 5 rounds; 4 s)
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
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define ITERS 301

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

/* As src/transport/shm.c's copy_in with stream set: non-temporal stores, then a fence. */
static void copy_stream(char *dst, const char *src, size_t n) {
#if defined(__x86_64__)
    size_t lead = (16 - ((uintptr_t)dst & 15)) & 15;
    if (lead > n) lead = n;
    memcpy(dst, src, lead);
    dst += lead, src += lead, n -= lead;
    size_t body = n & ~(size_t)15;
    for (size_t i = 0; i < body; i += 16)
        _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
    _mm_sfence();
    dst += body, src += body, n -= body;
#endif
    memcpy(dst, src, n);
}

typedef struct shared {
    _Alignas(64) volatile int gen[2]; /* each side's count of meetings */
} shared;

/* Both sides meet; bounded: a side gone for 10 s ends the run. */
static void meet(shared *s, int me, int *gen) {
    ++*gen;
    __atomic_store_n(&s->gen[me], *gen, __ATOMIC_SEQ_CST);
    double until = now() + 10;
    while (__atomic_load_n(&s->gen[!me], __ATOMIC_SEQ_CST) < *gen) {
        sched_yield();
        if (now() > until) {
            fprintf(stderr, "shm_copy: the other process stopped\n");
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? (size_t)atol(argv[1]) : 819200;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int secs = argc > 3 ? atoi(argv[3]) : 4;
    if (bytes == 0 || rounds <= 0 || secs < 0) {
        fprintf(stderr, "usage: shm_copy [BYTES [ROUNDS [SECS]]]\n");
        return 2;
    }
    size_t region = (bytes + 4095) & ~(size_t)4095;
    char *m =
        mmap(NULL, 4096 + 2 * region, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("shm_copy: mmap");
        return 1;
    }
    shared *s = (shared *)m;
    pid_t child = fork();
    if (child < 0) {
        perror("shm_copy: fork");
        return 1;
    }
    int me = child == 0, gen = 0;
    char *out = m + 4096 + (size_t)me * region, *in = m + 4096 + (size_t)!me * region;
    char *src = aligned_alloc(64, region), *dst = aligned_alloc(64, region);
    if (!src || !dst) return 1;
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    if (!me) printf("# %zu bytes each way, medians of %d iterations per kind (us)\n", bytes, ITERS);
    for (int r = 0; r < rounds; r++) {
        double w[2][ITERS], rd[2][ITERS];
        for (int it = 0; it < 2 * ITERS; it++) {
            int stream = it & 1;
            memset(src, it, bytes); /* fresh data in this core's cache, as a gradient */
            meet(s, me, &gen);
            double t0 = now();
            if (stream)
                copy_stream(out, src, bytes);
            else
                memcpy(out, src, bytes);
            double t1 = now();
            meet(s, me, &gen);
            double t2 = now();
            memcpy(dst, in, bytes);
            double t3 = now();
            meet(s, me, &gen);
            w[stream][it / 2] = (t1 - t0) * 1e6;
            rd[stream][it / 2] = (t3 - t2) * 1e6;
        }
        if (!me) {
            printf("round %d: cached: write %7.1f read %6.1f | streamed: write %7.1f read %6.1f\n",
                   r + 1, median(w[0], ITERS), median(rd[0], ITERS), median(w[1], ITERS),
                   median(rd[1], ITERS));
            fflush(stdout);
        }
        if (r + 1 < rounds) sleep((unsigned)secs);
    }
    if (!me) waitpid(child, NULL, 0);
    return 0;
}
