/*
 * sampler.c — PyTorch's DistributedSampler, with torch.randperm's order.
 *
 * The permutation must be bit-identical to PyTorch 1.13's CPU randperm for
 * the same seed, so this file carries its own copy of the two pieces that
 * fix it: at::mt19937 (the standard 32-bit Mersenne Twister, seeded from
 * the low 32 bits of the seed) and randperm_cpu's shuffle (a forward
 * Fisher-Yates that swaps slot i with slot i + random() % (n - i)). Sharding
 * (padding, drop_last, rank striding) follows torch/utils/data/distributed.py.
 * As torch's sampler asks torch.distributed, ddpc_sampler_create_dist asks a
 * communicator for the rank and size through the public API (ddpc.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ddpc/data.h"

/* ----------------------------------------------------------- mt19937 */

enum { MT_N = 624, MT_M = 397 };

typedef struct mt19937 {
    uint32_t state[MT_N];
    int left; /* outputs left before the next twist */
    int next; /* index of the next output */
} mt19937;

/* at::mt19937(seed): init_genrand with the seed's low 32 bits. */
static void mt_seed(mt19937 *m, uint64_t seed) {
    m->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (int j = 1; j < MT_N; j++)
        m->state[j] = 1812433253u * (m->state[j - 1] ^ (m->state[j - 1] >> 30)) + (uint32_t)j;
    m->left = 1;
    m->next = 0;
}

static uint32_t mix_bits(uint32_t u, uint32_t v) { return (u & 0x80000000u) | (v & 0x7fffffffu); }
static uint32_t twist(uint32_t u, uint32_t v) {
    return (mix_bits(u, v) >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

static void mt_next_state(mt19937 *m) {
    uint32_t *p = m->state;
    m->left = MT_N;
    m->next = 0;
    for (int j = MT_N - MT_M + 1; --j; p++) *p = p[MT_M] ^ twist(p[0], p[1]);
    for (int j = MT_M; --j; p++) *p = p[MT_M - MT_N] ^ twist(p[0], p[1]);
    *p = p[MT_M - MT_N] ^ twist(p[0], m->state[0]);
}

/* One 32-bit output, tempered: CPUGeneratorImpl::random(). */
static uint32_t mt_random(mt19937 *m) {
    if (--m->left <= 0) mt_next_state(m);
    uint32_t y = m->state[m->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/*
 * torch.randperm(n, generator=Generator().manual_seed(seed)) on CPU, as
 * PyTorch 1.13's randperm_cpu computes it: fill 0..n-1, then for i < n - 1
 * swap slot i with slot i + random() % (n - i). (Later PyTorch releases
 * switch to an inside-out shuffle on random64() for very large n; 1.13 does
 * not: checked against it at n = 214748364 = UINT32_MAX / 20.)
 */
void ddpc_randperm(size_t n, uint64_t seed, int64_t *out) {
    mt19937 m;
    mt_seed(&m, seed);
    const int64_t nn = (int64_t)n;
    for (int64_t i = 0; i < nn; i++) out[i] = i;
    for (int64_t i = 0; i < nn - 1; i++) {
        int64_t z = (int64_t)(mt_random(&m) % (uint64_t)(nn - i));
        int64_t t = out[i];
        out[i] = out[z + i];
        out[z + i] = t;
    }
}

/* ----------------------------------------------------------- sampler */

struct ddpc_sampler {
    size_t len; /* dataset length */
    int replicas, rank, shuffle, drop_last;
    uint64_t seed, epoch;
    size_t start;       /* positions of the epoch's order done before (set_start) */
    size_t num_samples; /* this rank's share (of what is left after start) */
    size_t total_size;  /* num_samples * replicas */
    int64_t *perm;      /* (len) the epoch's order before padding */
    int64_t *indices;   /* (num_samples) this rank's indices */
    int valid;          /* indices are those of (seed, epoch) */
};

/*
 * Creates a sampler (see data.h). The share is torch's: with drop_last and
 * len % replicas != 0, ceil((len - replicas) / replicas) = floor(len /
 * replicas); else ceil(len / replicas). Memory: (len + num_samples) int64.
 */
ddpc_sampler_options ddpc_sampler_options_default(void) {
    ddpc_sampler_options o = {
        .rank = 0, .num_replicas = 1, .shuffle = 1, .seed = 0, .drop_last = 0
    };
    return o;
}

ddpc_status ddpc_sampler_create(size_t dataset_len, const ddpc_sampler_options *o,
                                ddpc_sampler **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_sampler_create: out is NULL");
    *out = NULL;
    ddpc_sampler_options def = ddpc_sampler_options_default();
    if (!o) o = &def;
    int rank = o->rank, num_replicas = o->num_replicas, shuffle = o->shuffle,
        drop_last = o->drop_last;
    uint64_t seed = o->seed;
    if (num_replicas < 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_sampler_create: num_replicas=%d, must be >= 1",
                         num_replicas);
    if (rank < 0 || rank >= num_replicas)
        return ddpc__err(
            DDPC_ERR_INVALID_ARG,
            "ddpc_sampler_create: invalid rank %d, rank should be in the interval [0, %d]", rank,
            num_replicas - 1);
    if (dataset_len > ((size_t)1 << 40))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_sampler_create: dataset_len=%zu is too large",
                         dataset_len);
    ddpc_sampler *s = calloc(1, sizeof *s);
    if (!s) return ddpc__err(DDPC_ERR_NOMEM, "ddpc_sampler_create: out of memory");
    size_t R = (size_t)num_replicas;
    s->len = dataset_len;
    s->replicas = num_replicas;
    s->rank = rank;
    s->shuffle = shuffle != 0;
    s->drop_last = drop_last != 0;
    s->seed = seed;
    s->num_samples =
        (drop_last && dataset_len % R != 0) ? dataset_len / R : (dataset_len + R - 1) / R;
    s->total_size = s->num_samples * R;
    s->perm = malloc((dataset_len ? dataset_len : 1) * sizeof *s->perm);
    s->indices = malloc((s->num_samples ? s->num_samples : 1) * sizeof *s->indices);
    if (!s->perm || !s->indices) {
        ddpc_sampler_destroy(s);
        return ddpc__err(DDPC_ERR_NOMEM, "ddpc_sampler_create: cannot allocate %zu indices",
                         dataset_len + s->num_samples);
    }
    DDPC_TRACE(DATA,
               "sampler: len %zu, rank %d of %d, shuffle %d, seed %llu, drop_last %d: %zu samples",
               dataset_len, rank, num_replicas, s->shuffle, (unsigned long long)seed, s->drop_last,
               s->num_samples);
    *out = s;
    return DDPC_OK;
}

ddpc_status ddpc_sampler_create_dist(ddpc_comm *c, size_t dataset_len,
                                     const ddpc_sampler_options *o, ddpc_sampler **out) {
    if (!c)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_sampler_create_dist: communicator is NULL");
    ddpc_sampler_options so = o ? *o : ddpc_sampler_options_default();
    so.rank = ddpc_comm_rank(c);
    so.num_replicas = ddpc_comm_size(c);
    return ddpc_sampler_create(dataset_len, &so, out);
}

/* The share of the m positions left: torch's rule over m in place of len. */
static size_t share(const ddpc_sampler *s, size_t m) {
    size_t R = (size_t)s->replicas;
    return (s->drop_last && m % R != 0) ? m / R : (m + R - 1) / R;
}

void ddpc_sampler_set_epoch(ddpc_sampler *s, uint64_t epoch) {
    if (!s) return;
    if (epoch != s->epoch || s->start) s->valid = 0;
    s->epoch = epoch;
    s->start = 0;
    s->num_samples = share(s, s->len);
}

/*
 * The first `start` positions of the epoch's global order are done (by
 * this job at whatever world size): this rank's share becomes positions
 * start + rank + i * replicas of the order (wrapping round to its head as
 * torch's padding does), so the ranks of any world size split what is left
 * with no position taken twice or skipped. start 0 is torch's sampler;
 * start >= len leaves nothing.
 */
void ddpc_sampler_set_start(ddpc_sampler *s, size_t start) {
    if (!s) return;
    if (start > s->len) start = s->len;
    if (start != s->start) s->valid = 0;
    s->start = start;
    s->num_samples = share(s, s->len - start);
}

size_t ddpc_sampler_len(const ddpc_sampler *s) { return s ? s->num_samples : 0; }
size_t ddpc_sampler_dataset_len(const ddpc_sampler *s) { return s ? s->len : 0; }

/*
 * This rank's indices for the current epoch, computed on first use after a
 * set_epoch: 1. the order (randperm from seed + epoch, or 0..len-1);
 * 2. padded by wrapping round (padded[j] = order[j % len], which is what
 * torch's head-repeating does even when the padding exceeds len) or cut to
 * total_size; 3. rank r takes padded[start + r + i * replicas].
 */
const int64_t *ddpc_sampler_indices(ddpc_sampler *s) {
    if (!s) return NULL;
    if (s->valid) return s->indices;
    if (s->shuffle)
        ddpc_randperm(s->len, s->seed + s->epoch, s->perm);
    else
        for (size_t i = 0; i < s->len; i++) s->perm[i] = (int64_t)i;
    for (size_t i = 0; i < s->num_samples; i++) {
        size_t j = s->start + (size_t)s->rank + i * (size_t)s->replicas;
        s->indices[i] = s->perm[j % s->len];
    }
    s->valid = 1;
    return s->indices;
}

void ddpc_sampler_destroy(ddpc_sampler *s) {
    if (!s) return;
    free(s->perm);
    free(s->indices);
    free(s);
}
