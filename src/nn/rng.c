/*
 * rng.c — the seeded RNG (xoshiro256**, seeded by splitmix64) and the
 * OpenBLAS thread count (chosen by the first model unless the program sets it).
 */
#include <cblas.h>
#include <stdatomic.h>

#include "base/env.h"
#include "nn/nn_impl.h"

static atomic_int threads_chosen; /* by ddpc_nn_set_threads, or automatically */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void ddpc_rng_seed(ddpc_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ddpc_rng_next(ddpc_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float ddpc_rng_uniform(ddpc_rng *r) {
    return (float)(ddpc_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

void ddpc_nn_set_threads(int n) {
    if (n < 1) n = 1;
    atomic_store(&threads_chosen, 1);
    openblas_set_num_threads(n);
    DDPC_INFO(NN, "OpenBLAS threads: %d", n);
}

/* DDPC_THREADS, else the CPUs shared among LOCAL_WORLD_SIZE (or mpirun's
 * OMPI_COMM_WORLD_LOCAL_SIZE) ranks (a value out of range is logged and
 * the default taken: this cannot fail). */
static void choose_threads(void) {
    long n = 0, local = 1;
    if (ddpc__env_isset(DDPC_ENV_THREADS) && ddpc__env_long(DDPC_ENV_THREADS, &n) != DDPC_OK) {
        DDPC_WARN(NN, "%s; choosing the BLAS threads by CPUs", ddpc_last_error());
        n = 0;
    }
    /* the ranks on this node: torchrun's count, else mpirun's */
    ddpc__env_id id = ddpc__env_isset(DDPC_ENV_LOCAL_WORLD_SIZE) ? DDPC_ENV_LOCAL_WORLD_SIZE
                                                                 : DDPC_ENV_OMPI_LOCAL_SIZE;
    if (!n && ddpc__env_isset(id) && ddpc__env_long(id, &local) != DDPC_OK) local = 1;
    ddpc_nn_set_threads(n ? (int)n : ddpc_nn_default_threads((int)local));
}

int ddpc_nn_threads(void) {
    if (!atomic_load(&threads_chosen)) choose_threads();
    return openblas_get_num_threads();
}

int ddpc_nn_default_threads(int ranks_per_node) {
    long cpus = ddpc__cpu_count();
    if (ranks_per_node < 1) ranks_per_node = 1;
    long n = cpus / ranks_per_node;
    return n < 1 ? 1 : (int)n;
}
