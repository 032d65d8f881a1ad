/*
 * data_fixtures.h — what the data tests share (test_data_*.c): the sampler
 * and loader of a test's parameter matrix through their options, a
 * temporary directory per test process, IDX files made and written (raw or
 * gzip), and whether Debian's Fashion-MNIST is installed.
 *
 * Functions are static inline: each test file is its own program and uses
 * a part of them.
 */
#ifndef DDPC_TEST_DATA_FIXTURES_H
#define DDPC_TEST_DATA_FIXTURES_H

#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "ddpc/data.h"
#include "test.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

/* ------------------------------------------------------------ helpers */

/* The sampler and loader of a test's parameter matrix, through their options. */
static inline ddpc_status mk_sampler(size_t n, int replicas, int rank, int shuffle, uint64_t seed,
                                     int drop_last, ddpc_sampler **out) {
    ddpc_sampler_options o = ddpc_sampler_options_default();
    o.rank = rank;
    o.num_replicas = replicas;
    o.shuffle = shuffle;
    o.seed = seed;
    o.drop_last = drop_last;
    return ddpc_sampler_create(n, &o, out);
}

static inline ddpc_status mk_loader(const ddpc_dataset *ds, ddpc_sampler *s, int batch_size,
                                    int drop_last, float mean, float std, int prefetch,
                                    ddpc_loader **out) {
    ddpc_loader_options o = ddpc_loader_options_default();
    o.batch_size = batch_size;
    o.drop_last = drop_last;
    o.mean = mean;
    o.std = std;
    o.prefetch = prefetch;
    return ddpc_loader_create(ds, s, &o, out);
}

static char g_dir[256];

/* A fresh temporary directory for this test process. */
static inline const char *tmpdir(void) {
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/ddpc_test_data.XXXXXX");
        CHECK(mkdtemp(g_dir) != NULL);
    }
    return g_dir;
}

static inline int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(p);
}

/* Removes this test's temporary directory (left in place when a test fails,
 * for a look at the files). */
static inline void rm_tmpdir(void) {
    if (g_dir[0]) nftw(g_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    g_dir[0] = 0;
}

static inline const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir(), name);
    return p;
}

/* Writes n bytes to path, gzip-compressed when gz. */
static inline void write_file(const char *path, const void *data, size_t n, int gz) {
    if (gz) {
        gzFile g = gzopen(path, "wb");
        CHECK(g != NULL);
        if (n) CHECK_EQ(gzwrite(g, data, (unsigned)n), (long long)n);
        CHECK_EQ(gzclose(g), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (n) CHECK_EQ(fwrite(data, 1, n, f), n);
        CHECK_EQ(fclose(f), 0);
    }
}

/* Builds an IDX image in buf: magic(dtype, ndim), dims, then nbytes of
 * payload bytes (i * 7 + 3). Returns the total size. */
static inline size_t make_idx(unsigned char *buf, int dtype, int ndim, const int *dims,
                              size_t nbytes) {
    size_t k = 0;
    buf[k++] = 0;
    buf[k++] = 0;
    buf[k++] = (unsigned char)dtype;
    buf[k++] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = (uint32_t)dims[i];
        buf[k++] = (unsigned char)(d >> 24);
        buf[k++] = (unsigned char)(d >> 16);
        buf[k++] = (unsigned char)(d >> 8);
        buf[k++] = (unsigned char)d;
    }
    for (size_t i = 0; i < nbytes; i++) buf[k++] = (unsigned char)(i * 7 + 3);
    return k;
}

/* Reads a whole gzip or raw file with zlib (independently of ddpc). */
static inline unsigned char *slurp_gz(const char *path, size_t *n) {
    gzFile g = gzopen(path, "rb");
    CHECK(g != NULL);
    size_t cap = 1 << 20, have = 0;
    unsigned char *p = malloc(cap);
    for (;;) {
        if (have == cap) p = realloc(p, cap *= 2);
        int k = gzread(g, p + have, (unsigned)(cap - have));
        CHECK(k >= 0);
        if (k == 0) break;
        have += (size_t)k;
    }
    gzclose(g);
    *n = have;
    return p;
}

static inline int have_fmnist(void) {
    return access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) == 0;
}

#endif /* DDPC_TEST_DATA_FIXTURES_H */
