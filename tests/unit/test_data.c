/* test_data.c — IDX files, MNIST datasets, the transform, the distributed
 * sampler (properties and against PyTorch) and the prefetching loader. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ftw.h>
#include <zlib.h>

#include "base/base.h"
#include "ddpc/data.h"
#include "test.h"

#define FMNIST "/usr/share/datasets/fashion-mnist"

/* ------------------------------------------------------------ helpers */

/* The sampler and loader of a test's parameter matrix, through their options. */
static ddpc_status mk_sampler(size_t n, int replicas, int rank, int shuffle, uint64_t seed,
                              int drop_last, ddpc_sampler **out) {
    ddpc_sampler_options o = ddpc_sampler_options_default();
    o.num_replicas = replicas;
    o.rank = rank;
    o.shuffle = shuffle;
    o.seed = seed;
    o.drop_last = drop_last;
    return ddpc_sampler_create(n, &o, out);
}

static ddpc_status mk_loader(const ddpc_dataset *ds, ddpc_sampler *s, int batch_size, int drop_last,
                             float mean, float std, int prefetch, ddpc_loader **out) {
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
static const char *tmpdir(void) {
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/ddpc_test_data.XXXXXX");
        CHECK(mkdtemp(g_dir) != NULL);
    }
    return g_dir;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(p);
}

/* Removes this test's temporary directory (left in place when a test fails,
 * for a look at the files). */
static void rm_tmpdir(void) {
    if (g_dir[0]) nftw(g_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    g_dir[0] = 0;
}

static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir(), name);
    return p;
}

/* Writes n bytes to path, gzip-compressed when gz. */
static void write_file(const char *path, const void *data, size_t n, int gz) {
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
static size_t make_idx(unsigned char *buf, int dtype, int ndim, const int *dims, size_t nbytes) {
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
static unsigned char *slurp_gz(const char *path, size_t *n) {
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

static int have_fmnist(void) {
    return access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) == 0;
}

/* -------------------------------------------------------- real datasets */

TEST(data_fashion_mnist_real) {
    if (!have_fmnist()) SKIP("%s not installed (Debian package dataset-fashion-mnist)", FMNIST);
    ddpc_dataset *tr = NULL, *te = NULL;
    CHECK_OK(ddpc_dataset_create_mnist(FMNIST, "train", &tr));
    CHECK_OK(ddpc_dataset_create_mnist(FMNIST, "test", &te));
    CHECK_EQ(tr->n, 60000);
    CHECK_EQ(te->n, 10000);
    CHECK_EQ(tr->rows, 28);
    CHECK_EQ(tr->cols, 28);
    CHECK_EQ(te->rows, 28);
    CHECK_EQ(tr->num_classes, 10);
    CHECK_EQ(te->num_classes, 10);
    /* values read with python3's gzip module */
    const int trl[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, tel[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(tr->labels[i], trl[i]);
        CHECK_EQ(te->labels[i], tel[i]);
    }
    CHECK_EQ(tr->labels[59999], 5);
    CHECK_EQ(te->labels[9999], 5);
    CHECK_EQ(tr->images[96], 1);
    CHECK_EQ(tr->images[99], 13);
    CHECK_EQ(tr->images[100], 73);
    CHECK_EQ(te->images[215], 3);
    CHECK_EQ(te->images[221], 37);
    long s0 = 0, slast = 0, t0 = 0, tlast = 0;
    for (int j = 0; j < 784; j++) {
        s0 += tr->images[j];
        slast += tr->images[59999 * 784 + j];
        t0 += te->images[j];
        tlast += te->images[9999 * 784 + j];
    }
    CHECK_EQ(s0, 76247);
    CHECK_EQ(slast, 16684);
    CHECK_EQ(t0, 33456);
    CHECK_EQ(tlast, 24390);
    int counts[10] = {0};
    for (int i = 0; i < tr->n; i++) counts[tr->labels[i]]++;
    for (int c = 0; c < 10; c++) CHECK_EQ(counts[c], 6000);
    ddpc_dataset_destroy(tr);
    ddpc_dataset_destroy(te);
    ddpc_dataset_destroy(NULL);
}

/* The same files decompressed (and under MNIST's dotted names) load the same. */
TEST(data_raw_files_same_as_gz) {
    if (!have_fmnist()) SKIP("%s not installed", FMNIST);
    const char *names[2][2] = {{"t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte"},
                               {"t10k-labels-idx1-ubyte.gz", "t10k-labels.idx1-ubyte"}};
    for (int i = 0; i < 2; i++) {
        char src[512];
        snprintf(src, sizeof src, FMNIST "/%s", names[i][0]);
        size_t n;
        unsigned char *p = slurp_gz(src, &n);
        write_file(tpath(names[i][1]), p, n, 0);
        free(p);
    }
    ddpc_dataset *a = NULL, *b = NULL;
    CHECK_OK(ddpc_dataset_create_mnist(FMNIST, "test", &a));
    CHECK_OK(ddpc_dataset_create_mnist(tmpdir(), "test", &b));
    CHECK_EQ(a->n, b->n);
    CHECK_EQ(a->num_classes, b->num_classes);
    CHECK(memcmp(a->images, b->images, (size_t)a->n * 784) == 0);
    CHECK(memcmp(a->labels, b->labels, (size_t)a->n) == 0);
    /* no train split in the temp dir: an error naming the file looked for */
    ddpc_dataset *c = NULL;
    CHECK_STATUS(ddpc_dataset_create_mnist(tmpdir(), "train", &c), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "train-images-idx3-ubyte");
    CHECK(c == NULL);
    CHECK_STATUS(ddpc_dataset_create_mnist(tmpdir(), "validation", &c), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "validation");
    ddpc_dataset_destroy(a);
    ddpc_dataset_destroy(b);
    rm_tmpdir();
}

/* -------------------------------------------------------------- IDX files */

TEST(data_idx_dtypes_and_byte_order) {
    unsigned char buf[256];
    int dims[2] = {2, 3};
    /* int32 big-endian: 0x01020304 ... */
    size_t k = make_idx(buf, DDPC_IDX_INT, 2, dims, 0);
    for (int i = 0; i < 6; i++) {
        int32_t v = (i - 2) * 1000003;
        uint32_t u = (uint32_t)v;
        buf[k++] = (unsigned char)(u >> 24);
        buf[k++] = (unsigned char)(u >> 16);
        buf[k++] = (unsigned char)(u >> 8);
        buf[k++] = (unsigned char)u;
    }
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tpath(gz ? "i32.idx.gz" : "i32.idx");
        write_file(p, buf, k, gz);
        ddpc_idx *x = NULL;
        CHECK_OK(ddpc_idx_load(p, &x));
        CHECK_EQ(x->dtype_code, DDPC_IDX_INT);
        CHECK_EQ(x->ndim, 2);
        CHECK_EQ(x->dims[0], 2);
        CHECK_EQ(x->dims[1], 3);
        CHECK_EQ(x->count, 6);
        for (int i = 0; i < 6; i++) CHECK_EQ(((int32_t *)x->data)[i], (i - 2) * 1000003);
        ddpc_idx_destroy(x);
    }
    /* double: -1.5 and 2^-3 */
    int d1[1] = {2};
    k = make_idx(buf, DDPC_IDX_DOUBLE, 1, d1, 0);
    double vals[2] = {-1.5, 0.125};
    for (int i = 0; i < 2; i++) {
        uint64_t u;
        memcpy(&u, &vals[i], 8);
        for (int b = 7; b >= 0; b--) buf[k++] = (unsigned char)(u >> (8 * b));
    }
    write_file(tpath("f64.idx"), buf, k, 0);
    ddpc_idx *x = NULL;
    CHECK_OK(ddpc_idx_load(tpath("f64.idx"), &x));
    CHECK_NEAR(((double *)x->data)[0], -1.5, 0);
    CHECK_NEAR(((double *)x->data)[1], 0.125, 0);
    ddpc_idx_destroy(x);
    /* int16 and a zero dimension (count 0) */
    int d0[2] = {4, 0};
    k = make_idx(buf, DDPC_IDX_SHORT, 2, d0, 0);
    write_file(tpath("empty.idx"), buf, k, 0);
    CHECK_OK(ddpc_idx_load(tpath("empty.idx"), &x));
    CHECK_EQ(x->count, 0);
    ddpc_idx_destroy(x);
    ddpc_idx_destroy(NULL);
    rm_tmpdir();
}

typedef struct bad_case {
    const char *name;   /* file name (".gz" suffix: written compressed unless raw_gz) */
    int raw_gz;         /* write raw bytes even though the name ends in .gz */
    ddpc_status want;
    const char *msg;    /* expected in the error text */
} bad_case;

/* Every malformed file is an error that names the file and what is wrong. */
TEST(data_idx_bad_inputs) {
    unsigned char good[4096], buf[4200];
    int dims[3] = {3, 4, 5};
    size_t n = make_idx(good, DDPC_IDX_UBYTE, 3, dims, 60);
    for (int gz = 0; gz < 2; gz++) {
        const char *sfx = gz ? ".gz" : "";
        char name[64];
        struct {
            const char *what;
            size_t len;
            void (*mut)(unsigned char *);
            ddpc_status want;
            const char *msg;
        } cases[] = {
            {"magic", n, NULL, DDPC_ERR_IO, "bad magic"},
            {"dtype", n, NULL, DDPC_ERR_IO, "unknown dtype code 0x07"},
            {"rank0", n, NULL, DDPC_ERR_IO, "rank 0"},
            {"rank9", n, NULL, DDPC_ERR_IO, "rank 9"},
            {"hdr2", 2, NULL, DDPC_ERR_IO, "truncated header"},
            {"hdrdims", 10, NULL, DDPC_ERR_IO, "truncated header"},
            {"data", n - 1, NULL, DDPC_ERR_IO, "truncated data"},
            {"trail", n + 1, NULL, DDPC_ERR_IO, "trailing data"},
            {"huge", n, NULL, DDPC_ERR_IO, "truncated data"},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            memcpy(buf, good, n);
            buf[n] = 9;
            if (c == 0) buf[1] = 1;
            if (c == 1) buf[2] = 0x07;
            if (c == 2) buf[3] = 0;
            if (c == 3) buf[3] = 9;
            if (c == 8) buf[4] = 0x7f; /* dims[0] = 2^31 - ..: declares far more than there is */
            snprintf(name, sizeof name, "bad_%s.idx%s", cases[c].what, sfx);
            const char *p = tpath(name);
            write_file(p, buf, cases[c].len, gz);
            ddpc_idx *x = (ddpc_idx *)1;
            ddpc_status s = ddpc_idx_load(p, &x);
            CHECK_MSG(s == cases[c].want, "%s: got %s (%s)", name, ddpc_status_str(s), ddpc_last_error());
            CHECK(x == NULL);
            CHECK_CONTAINS(ddpc_last_error(), p);
            CHECK_CONTAINS(ddpc_last_error(), cases[c].msg);
        }
    }
    ddpc_idx *x = NULL;
    /* named .gz, but raw content */
    write_file(tpath("raw.idx.gz"), good, n, 0);
    CHECK_STATUS(ddpc_idx_load(tpath("raw.idx.gz"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "not gzip");
    CHECK_CONTAINS(ddpc_last_error(), "raw.idx.gz");
    /* empty, missing, a directory */
    write_file(tpath("empty"), good, 0, 0);
    CHECK_STATUS(ddpc_idx_load(tpath("empty"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "empty");
    write_file(tpath("empty.gz"), good, 0, 1); /* a valid gzip stream of nothing */
    CHECK_STATUS(ddpc_idx_load(tpath("empty.gz"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "truncated header (0 of 4");
    CHECK_STATUS(ddpc_idx_load(tpath("missing.idx"), &x), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "missing.idx");
    CHECK_STATUS(ddpc_idx_load(tmpdir(), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "not a regular file");
    /* a gzip stream cut short */
    write_file(tpath("cut.gz"), good, n, 1);
    size_t zn;
    FILE *f = fopen(tpath("cut.gz"), "rb");
    unsigned char z[8192];
    zn = fread(z, 1, sizeof z, f);
    fclose(f);
    write_file(tpath("cut.gz"), z, zn - 12, 0);
    CHECK_STATUS(ddpc_idx_load(tpath("cut.gz"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "cut.gz");
    CHECK(x == NULL);
    rm_tmpdir();
}

/* Whole datasets: count mismatch, wrong kinds of arrays, no samples. */
TEST(data_mnist_bad_datasets) {
    unsigned char im[4096], lb[64];
    char dir[300];
    snprintf(dir, sizeof dir, "%s/mnist_bad", tmpdir());
    mkdir(dir, 0700);
    char ip[400], lp[400];
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte.gz", dir);
    int di[3] = {5, 4, 4}, dl[1] = {4};
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 3, di, 80), 1);
    write_file(lp, lb, make_idx(lb, DDPC_IDX_UBYTE, 1, dl, 4), 1);
    ddpc_dataset *ds = NULL;
    CHECK_STATUS(ddpc_dataset_create_mnist(dir, "train", &ds), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "5 images");
    CHECK_CONTAINS(ddpc_last_error(), "4 labels");
    CHECK_CONTAINS(ddpc_last_error(), lp);
    /* labels as int32 */
    dl[0] = 5;
    write_file(lp, lb, make_idx(lb, DDPC_IDX_INT, 1, dl, 20), 1);
    CHECK_STATUS(ddpc_dataset_create_mnist(dir, "train", &ds), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "labels must be a 1-D ubyte");
    /* images of rank 2 */
    write_file(lp, lb, make_idx(lb, DDPC_IDX_UBYTE, 1, dl, 5), 1);
    int d2[2] = {5, 16};
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 2, d2, 80), 1);
    CHECK_STATUS(ddpc_dataset_create_mnist(dir, "train", &ds), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "images must be a 3-D ubyte");
    /* zero samples */
    int dz[3] = {0, 4, 4}, dlz[1] = {0};
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 3, dz, 0), 1);
    write_file(lp, lb, make_idx(lb, DDPC_IDX_UBYTE, 1, dlz, 0), 1);
    CHECK_STATUS(ddpc_dataset_create_mnist(dir, "train", &ds), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "no samples");
    /* and a good one: labels 0..6 give 7 classes */
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 3, di, 80), 1);
    unsigned char l5[13] = {0, 0, 8, 1, 0, 0, 0, 5, 3, 6, 0, 1, 2};
    write_file(lp, l5, sizeof l5, 1);
    CHECK_OK(ddpc_dataset_create_mnist(dir, "train", &ds));
    CHECK_EQ(ds->n, 5);
    CHECK_EQ(ds->rows, 4);
    CHECK_EQ(ds->num_classes, 7);
    CHECK_EQ(ds->images[79], (79 * 7 + 3) & 255);
    ddpc_dataset_destroy(ds);
    rm_tmpdir();
}

/* Random corruptions never crash: each load either fails with a message
 * naming the file, or succeeds with a size that matches the file. */
TEST_T(data_idx_fuzz, 120) {
    unsigned char good[2048], buf[2100] = {0}; /* "append" writes bytes past the image */
    int dims[3] = {4, 5, 6};
    size_t n = make_idx(good, DDPC_IDX_UBYTE, 3, dims, 120);
    int ndims[2] = {10, 7};
    unsigned char good2[2048];
    size_t n2 = make_idx(good2, DDPC_IDX_INT, 2, ndims, 280);
    srand(12345);
    int ok = 0, bad = 0;
    for (int it = 0; it < 600; it++) {
        const unsigned char *src = (it & 1) ? good2 : good;
        size_t len = (it & 1) ? n2 : n;
        memcpy(buf, src, len);
        int kind = rand() % 4;
        if (kind == 0) len = (size_t)rand() % (len + 1);                     /* truncate */
        else if (kind == 1) for (int j = rand() % 4 + 1; j > 0; j--) buf[rand() % 20] ^= (unsigned char)(1 + rand() % 255); /* header */
        else if (kind == 2) buf[rand() % len] = (unsigned char)rand();        /* anywhere */
        else len += (size_t)(rand() % 8);                                     /* append */
        int gz = (it / 2) % 2;
        const char *p = tpath(gz ? "fuzz.gz" : "fuzz.idx");
        write_file(p, buf, len, gz);
        if (gz && (rand() % 3 == 0)) {
            /* corrupt the compressed bytes too */
            FILE *f = fopen(p, "r+b");
            fseek(f, 0, SEEK_END);
            long zl = ftell(f);
            fseek(f, 10 + rand() % (zl - 10), SEEK_SET);
            fputc(rand() & 255, f);
            fclose(f);
        }
        ddpc_idx *x = NULL;
        ddpc_status s = ddpc_idx_load(p, &x);
        if (s == DDPC_OK) {
            ok++;
            size_t esz = x->dtype_code == DDPC_IDX_UBYTE || x->dtype_code == DDPC_IDX_SBYTE ? 1
                         : x->dtype_code == DDPC_IDX_SHORT ? 2 : x->dtype_code == DDPC_IDX_DOUBLE ? 8 : 4;
            size_t want = 1;
            for (int d = 0; d < x->ndim; d++) want *= (size_t)x->dims[d];
            CHECK_EQ(x->count, want);
            if (!gz) CHECK_EQ(4 + 4 * (size_t)x->ndim + x->count * esz, len);
            ddpc_idx_destroy(x);
        } else {
            bad++;
            CHECK(x == NULL);
            CHECK_CONTAINS(ddpc_last_error(), p);
        }
    }
    CHECK(ok > 0);
    CHECK(bad > 100);
    rm_tmpdir();
}

/* ------------------------------------------------------------ transform */

TEST(data_transform_values) {
    unsigned char im[64];
    int di[3] = {3, 2, 2}, dl[1] = {3};
    char dir[300], ip[400], lp[400];
    snprintf(dir, sizeof dir, "%s/tf", tmpdir());
    mkdir(dir, 0700);
    snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte", dir);
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte", dir);
    size_t k = make_idx(im, DDPC_IDX_UBYTE, 3, di, 0);
    const unsigned char px[12] = {0, 255, 128, 1, 2, 3, 4, 5, 200, 100, 50, 25};
    memcpy(im + k, px, 12);
    write_file(ip, im, k + 12, 0);
    unsigned char lb[16];
    write_file(lp, lb, make_idx(lb, DDPC_IDX_UBYTE, 1, dl, 3), 0);
    ddpc_dataset *ds = NULL;
    CHECK_OK(ddpc_dataset_create_mnist(dir, "test", &ds));
    int64_t idx[3] = {2, 0, 2};
    float out[12];
    ddpc_transform_batch(ds, idx, 3, 0.5f, 0.5f, out);
    const int order[12] = {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11};
    for (int i = 0; i < 12; i++) {
        float want = ((float)px[order[i]] / 255.0f - 0.5f) / 0.5f;
        CHECK_MSG(out[i] == want, "out[%d] = %.9g, want %.9g", i, out[i], want);
    }
    CHECK(out[4] == -1.0f);
    CHECK(out[5] == 1.0f);
    ddpc_transform_batch(ds, idx, 1, 0.1307f, 0.3081f, out);
    CHECK_NEAR(out[0], (200 / 255.0 - 0.1307) / 0.3081, 1e-5);
    ddpc_dataset_destroy(ds);
    rm_tmpdir();
}

/* -------------------------------------------------------------- sampler */

/* Checks the sampler's contract for one (len, R, drop_last, shuffle, seed,
 * epoch): equal shares of the right size; the ranks' indices, interleaved,
 * form torch's padded list (a permutation of 0..len-1 followed by its head
 * repeated) or, with drop_last, a duplicate-free prefix of a permutation. */
static void check_shards(size_t len, int R, int drop_last, int shuffle, uint64_t seed, uint64_t epoch) {
    size_t want = (drop_last && len % (size_t)R) ? len / (size_t)R : (len + (size_t)R - 1) / (size_t)R;
    size_t total = want * (size_t)R;
    int64_t *padded = malloc((total + 1) * sizeof *padded);
    for (int r = 0; r < R; r++) {
        ddpc_sampler *s = NULL;
        CHECK_OK(mk_sampler(len, R, r, shuffle, seed, drop_last, &s));
        ddpc_sampler_set_epoch(s, epoch);
        CHECK_EQ(ddpc_sampler_len(s), want);
        const int64_t *ix = ddpc_sampler_indices(s);
        for (size_t i = 0; i < want; i++) padded[(size_t)r + i * (size_t)R] = ix[i];
        ddpc_sampler_destroy(s);
    }
    size_t head = total < len ? total : len;
    char *seen = calloc(len + 1, 1);
    for (size_t j = 0; j < head; j++) {
        CHECK_MSG(padded[j] >= 0 && (size_t)padded[j] < len, "len %zu R %d: index %lld out of range",
                  len, R, (long long)padded[j]);
        CHECK_MSG(!seen[padded[j]], "len %zu R %d drop_last %d: index %lld twice", len, R, drop_last,
                  (long long)padded[j]);
        seen[padded[j]] = 1;
        if (!shuffle) CHECK_EQ(padded[j], (int64_t)j);
    }
    if (!drop_last) {
        for (size_t i = 0; i < len; i++) CHECK_MSG(seen[i], "len %zu R %d: index %zu not covered", len, R, i);
        for (size_t j = len; j < total; j++) CHECK_EQ(padded[j], padded[j % len]);
    } else {
        CHECK(total <= len);
        CHECK(len - total < (size_t)R);
    }
    free(seen);
    free(padded);
}

TEST(data_sampler_properties) {
    const size_t lens[] = {0, 1, 2, 3, 5, 7, 10, 16, 17, 31, 100, 101, 1000, 4097};
    const int reps[] = {1, 2, 3, 4, 7, 8, 16};
    for (size_t a = 0; a < sizeof lens / sizeof lens[0]; a++)
        for (size_t b = 0; b < sizeof reps / sizeof reps[0]; b++)
            for (int dl = 0; dl < 2; dl++)
                for (int sh = 0; sh < 2; sh++) check_shards(lens[a], reps[b], dl, sh, 7 * a + b, (uint64_t)dl);
}

TEST(data_sampler_epochs_and_args) {
    ddpc_sampler *s = NULL;
    CHECK_STATUS(mk_sampler(10, 4, 4, 1, 0, 0, &s), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "rank 4");
    CHECK_STATUS(mk_sampler(10, 4, -1, 1, 0, 0, &s), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "rank -1");
    CHECK_STATUS(mk_sampler(10, 0, 0, 1, 0, 0, &s), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "num_replicas=0");
    CHECK(s == NULL);
    /* reshuffle per epoch, same order again for the same epoch, ranks agree */
    const size_t n = 1000;
    CHECK_OK(mk_sampler(n, 1, 0, 1, 0, 0, &s));
    int64_t *e0 = malloc(n * sizeof *e0);
    memcpy(e0, ddpc_sampler_indices(s), n * sizeof *e0);
    ddpc_sampler_set_epoch(s, 1);
    const int64_t *e1 = ddpc_sampler_indices(s);
    size_t same = 0;
    long long sum0 = 0, sum1 = 0;
    for (size_t i = 0; i < n; i++) {
        same += e0[i] == e1[i];
        sum0 += e0[i];
        sum1 += e1[i];
    }
    CHECK(same < 20);
    CHECK_EQ(sum0, sum1);
    ddpc_sampler_set_epoch(s, 0);
    CHECK(memcmp(ddpc_sampler_indices(s), e0, n * sizeof *e0) == 0);
    /* the order depends on seed + epoch only, as torch's */
    ddpc_sampler *t = NULL;
    CHECK_OK(mk_sampler(n, 1, 0, 1, 1, 0, &t));
    ddpc_sampler_set_epoch(s, 1);
    CHECK(memcmp(ddpc_sampler_indices(s), ddpc_sampler_indices(t), n * sizeof *e0) == 0);
    ddpc_sampler_destroy(t);
    /* shuffle off: epoch does not matter */
    CHECK_OK(mk_sampler(n, 3, 2, 0, 0, 0, &t));
    ddpc_sampler_set_epoch(t, 5);
    CHECK_EQ(ddpc_sampler_len(t), 334);
    CHECK_EQ(ddpc_sampler_indices(t)[0], 2);
    CHECK_EQ(ddpc_sampler_indices(t)[333], 1); /* 2 + 333*3 = 1001 wraps to 1 */
    ddpc_sampler_destroy(t);
    ddpc_sampler_destroy(s);
    ddpc_sampler_destroy(NULL);
    free(e0);
}

/* torch.randperm(10, generator=manual_seed(0)) as printed by PyTorch 1.13. */
TEST(data_randperm_known_values) {
    int64_t p[10];
    ddpc_randperm(10, 0, p);
    const int64_t want[10] = {4, 1, 7, 5, 3, 9, 0, 8, 6, 2};
    for (int i = 0; i < 10; i++) CHECK_EQ(p[i], want[i]);
}

/* The sampler against PyTorch's DistributedSampler (python3-torch). */
static const char *torch_script =
    "import sys\n"
    "try:\n"
    "    import torch\n"
    "    from torch.utils.data.distributed import DistributedSampler\n"
    "except Exception as e:\n"
    "    print('no torch:', e); sys.exit(77)\n"
    "print('torch', torch.__version__)\n"
    "out = open(sys.argv[2], 'w')\n"
    "for line in open(sys.argv[1]):\n"
    "    n, seed, epoch, R, dl, sh = map(int, line.split())\n"
    "    for r in range(R):\n"
    "        s = DistributedSampler(range(n), num_replicas=R, rank=r, shuffle=bool(sh), seed=seed, drop_last=bool(dl))\n"
    "        s.set_epoch(epoch)\n"
    "        out.write(' '.join(map(str, list(s))) + '\\n')\n";

TEST_T(data_sampler_vs_torch, 180) {
    static const uint64_t cases[][6] = {
        /* n, seed, epoch, replicas, drop_last, shuffle */
        {1, 0, 0, 1, 0, 1},       {1, 0, 0, 3, 0, 1},        {2, 7, 1, 5, 0, 1},
        {10, 0, 0, 1, 0, 1},      {10, 0, 0, 3, 0, 1},       {10, 0, 0, 3, 1, 1},
        {17, 42, 3, 4, 0, 1},     {17, 42, 3, 4, 1, 1},      {100, 0, 0, 8, 0, 0},
        {5, 0, 0, 8, 1, 1},       {1000, 123, 5, 7, 0, 1},   {624, 3, 0, 1, 0, 1},
        {625, 3, 0, 2, 0, 1},     {1249, 11, 2, 3, 0, 1},    {60000, 0, 0, 1, 0, 1},
        {60000, 0, 1, 4, 0, 1},   {60000, 4294967301ull, 0, 2, 0, 1},
        {70000, 1, 2, 3, 1, 1},   {65537, 9, 0, 6, 0, 1},    {10000, 2024, 9, 8, 0, 1},
    };
    const int nc = (int)(sizeof cases / sizeof cases[0]);
    const char *py = tpath("sampler_ref.py"), *in = tpath("cases.txt"), *res = tpath("torch_out.txt");
    write_file(py, torch_script, strlen(torch_script), 0);
    FILE *f = fopen(in, "w");
    for (int c = 0; c < nc; c++)
        fprintf(f, "%llu %llu %llu %llu %llu %llu\n", (unsigned long long)cases[c][0],
                (unsigned long long)cases[c][1], (unsigned long long)cases[c][2],
                (unsigned long long)cases[c][3], (unsigned long long)cases[c][4],
                (unsigned long long)cases[c][5]);
    fclose(f);
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s %s", py, in, res);
    int rc = t_run_cmd(cmd, 150, out, sizeof out);
    if (rc == 77 || rc == 127) {
        rm_tmpdir();
        SKIP("PyTorch not available for /usr/bin/python3 (install python3-torch): %s", out);
    }
    CHECK_MSG(rc == 0, "%s exited %d: %s", cmd, rc, out);
    f = fopen(res, "r");
    CHECK(f != NULL);
    size_t cap = 1 << 20;
    char *line = malloc(cap);
    int lines = 0;
    for (int c = 0; c < nc; c++) {
        for (int r = 0; r < (int)cases[c][3]; r++) {
            CHECK_MSG(fgets(line, (int)cap, f) != NULL, "torch output ends early at case %d", c);
            lines++;
            ddpc_sampler *s = NULL;
            CHECK_OK(mk_sampler(cases[c][0], (int)cases[c][3], r, (int)cases[c][5], cases[c][1],
                                         (int)cases[c][4], &s));
            ddpc_sampler_set_epoch(s, cases[c][2]);
            const int64_t *ix = ddpc_sampler_indices(s);
            size_t k = 0;
            char *p = line, *end;
            for (;;) {
                long long v = strtoll(p, &end, 10);
                if (end == p) break;
                CHECK_MSG(k < ddpc_sampler_len(s), "case %d rank %d: torch has more than %zu indices", c, r,
                          ddpc_sampler_len(s));
                CHECK_MSG(ix[k] == v, "case %d (n %llu seed %llu epoch %llu R %llu) rank %d: index %zu is %lld, torch %lld",
                          c, (unsigned long long)cases[c][0], (unsigned long long)cases[c][1],
                          (unsigned long long)cases[c][2], (unsigned long long)cases[c][3], r, k,
                          (long long)ix[k], v);
                k++;
                p = end;
            }
            CHECK_EQ(k, ddpc_sampler_len(s));
            ddpc_sampler_destroy(s);
        }
    }
    CHECK(lines > 60);
    free(line);
    fclose(f);
    rm_tmpdir();
}

/* --------------------------------------------------------------- loader */

/* A synthetic dataset of n <= 256 samples of 3x5 pixels: label i, pixel j
 * of sample i = (i * 31 + j * 7) & 255, so a batch shows which samples it holds. */
static ddpc_dataset *synth(int n) {
    ddpc_dataset *ds = calloc(1, sizeof *ds);
    ds->n = n;
    ds->rows = 3;
    ds->cols = 5;
    ds->images = malloc((size_t)n * 15);
    ds->labels = malloc((size_t)n);
    for (int i = 0; i < n; i++) {
        ds->labels[i] = (uint8_t)i;
        for (int j = 0; j < 15; j++) ds->images[i * 15 + j] = (uint8_t)((i * 31 + j * 7) & 255);
    }
    ds->num_classes = n;
    return ds;
}

/* Runs one epoch and checks that the batches are the order's samples in
 * order, transformed, with the right sizes and count. */
static void check_epoch(ddpc_loader *l, const ddpc_dataset *ds, const int64_t *order, size_t len, int bs,
                        int drop_last, float mean, float std) {
    size_t want_nb = drop_last ? len / (size_t)bs : (len + (size_t)bs - 1) / (size_t)bs;
    CHECK_EQ(ddpc_loader_num_batches(l), want_nb);
    size_t pos = 0, nb = 0;
    for (;;) {
        const ddpc_batch *b = (const ddpc_batch *)1;
        CHECK_OK(ddpc_loader_next(l, &b));
        if (!b) break;
        nb++;
        CHECK(nb <= want_nb);
        size_t want = len - pos < (size_t)bs ? len - pos : (size_t)bs;
        CHECK_EQ(b->size, want);
        CHECK_EQ(b->index, nb - 1); /* enumerate(loader)'s count */
        for (int i = 0; i < b->size; i++, pos++) {
            int64_t s = order[pos];
            CHECK_EQ(b->y[i], ds->labels[s]);
            for (int j = 0; j < 15; j += 7) {
                float w = ((float)ds->images[s * 15 + j] / 255.0f - mean) / std;
                CHECK_MSG(b->x[i * 15 + j] == w, "batch %zu row %d px %d: %g, want %g", nb, i, j,
                          (double)b->x[i * 15 + j], (double)w);
            }
        }
    }
    CHECK_EQ(nb, want_nb);
    CHECK_EQ(pos, drop_last ? want_nb * (size_t)bs : len);
    const ddpc_batch *b = (const ddpc_batch *)1;
    CHECK_OK(ddpc_loader_next(l, &b)); /* still the end */
    CHECK(b == NULL);
}

TEST(data_loader_order_sizes_drop_last) {
    ddpc_dataset *ds = synth(250);
    int64_t ident[250];
    for (int i = 0; i < 250; i++) ident[i] = i;
    const int bss[] = {1, 7, 32, 250, 300};
    for (size_t a = 0; a < sizeof bss / sizeof bss[0]; a++)
        for (int dl = 0; dl < 2; dl++)
            for (int pf = 0; pf <= 3; pf += 1 + (pf == 1)) {
                /* all samples in order */
                ddpc_loader *l = NULL;
                CHECK_OK(mk_loader(ds, NULL, bss[a], dl, 0.5f, 0.5f, pf, &l));
                CHECK_OK(ddpc_loader_start_epoch(l, 0));
                check_epoch(l, ds, ident, 250, bss[a], dl, 0.5f, 0.5f);
                ddpc_loader_destroy(l);
                /* a shard of a shuffled sampler, two epochs */
                ddpc_sampler *s = NULL;
                CHECK_OK(mk_sampler(250, 3, 1, 1, 5, 0, &s));
                CHECK_OK(mk_loader(ds, s, bss[a], dl, 0.1307f, 0.3081f, pf, &l));
                for (uint64_t e = 0; e < 2; e++) {
                    CHECK_OK(ddpc_loader_start_epoch(l, e));
                    check_epoch(l, ds, ddpc_sampler_indices(s), ddpc_sampler_len(s), bss[a], dl,
                                0.1307f, 0.3081f);
                }
                ddpc_loader_destroy(l);
                ddpc_sampler_destroy(s);
            }
    ddpc_dataset_destroy(ds);
}

TEST(data_loader_args) {
    ddpc_dataset *ds = synth(10);
    ddpc_loader *l = NULL;
    CHECK_STATUS(mk_loader(ds, NULL, 0, 0, 0.5f, 0.5f, 1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "batch_size=0");
    CHECK_STATUS(mk_loader(ds, NULL, 4, 0, 0.5f, 0.5f, -1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "prefetch=-1");
    CHECK_STATUS(mk_loader(ds, NULL, 4, 0, 0.5f, 0.0f, 1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "std=0");
    CHECK_STATUS(mk_loader(NULL, NULL, 4, 0, 0.5f, 0.5f, 1, &l), DDPC_ERR_INVALID_ARG);
    ddpc_sampler *s = NULL;
    CHECK_OK(mk_sampler(11, 1, 0, 1, 0, 0, &s));
    CHECK_STATUS(mk_loader(ds, s, 4, 0, 0.5f, 0.5f, 1, &l), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "11 samples");
    CHECK(l == NULL);
    CHECK_OK(mk_loader(ds, NULL, 4, 0, 0.5f, 0.5f, 2, &l));
    const ddpc_batch *b;
    CHECK_STATUS(ddpc_loader_next(l, &b), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "ddpc_loader_start_epoch");
    ddpc_loader_destroy(l);
    /* a bad DDPC_DATA_TIMEOUT is named */
    setenv("DDPC_DATA_TIMEOUT", "soon", 1);
    CHECK_STATUS(mk_loader(ds, NULL, 4, 0, 0.5f, 0.5f, 2, &l), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_DATA_TIMEOUT");
    unsetenv("DDPC_DATA_TIMEOUT");
    ddpc_loader_destroy(NULL);
    ddpc_sampler_destroy(s);
    /* an empty shard (drop_last with more replicas than samples): no batches */
    CHECK_OK(mk_sampler(5, 8, 7, 1, 0, 1, &s));
    CHECK_EQ(ddpc_sampler_len(s), 0);
    for (int pf = 0; pf < 3; pf += 2) {
        CHECK_OK(mk_loader(ds, s, 4, 0, 0.5f, 0.5f, pf, &l));
        CHECK_EQ(ddpc_loader_num_batches(l), 0);
        CHECK_OK(ddpc_loader_start_epoch(l, 3));
        b = (const ddpc_batch *)1;
        CHECK_OK(ddpc_loader_next(l, &b));
        CHECK(b == NULL);
        ddpc_loader_destroy(l);
    }
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(ds);
}

/* Copies a whole epoch's batches (x and y) into one buffer. */
static size_t epoch_bytes(ddpc_loader *l, uint64_t epoch, size_t d, float *x, int32_t *y) {
    CHECK_OK(ddpc_loader_start_epoch(l, epoch));
    size_t pos = 0;
    const ddpc_batch *b;
    for (;;) {
        CHECK_OK(ddpc_loader_next(l, &b));
        if (!b) break;
        memcpy(x + pos * d, b->x, (size_t)b->size * d * sizeof(float));
        memcpy(y + pos, b->y, (size_t)b->size * sizeof(int32_t));
        pos += (size_t)b->size;
    }
    return pos;
}

/* On the real training set: prefetch 0 and 4 give the same bytes; two
 * epochs differ; the shard's labels are those the sampler names. */
TEST_T(data_loader_prefetch_identical_real, 120) {
    if (!have_fmnist()) SKIP("%s not installed", FMNIST);
    ddpc_dataset *ds = NULL;
    CHECK_OK(ddpc_dataset_create_mnist(FMNIST, "train", &ds));
    const size_t d = 784, n = 30000;
    float *x0 = malloc(n * d * sizeof(float)), *x1 = malloc(n * d * sizeof(float));
    int32_t *y0 = malloc(n * sizeof(int32_t)), *y1 = malloc(n * sizeof(int32_t));
    int32_t *ylab0 = malloc(n * sizeof(int32_t));
    ddpc_sampler *s0 = NULL, *s1 = NULL;
    CHECK_OK(mk_sampler(60000, 2, 1, 1, 0, 0, &s0));
    CHECK_OK(mk_sampler(60000, 2, 1, 1, 0, 0, &s1));
    ddpc_loader *inl = NULL, *pre = NULL;
    CHECK_OK(mk_loader(ds, s0, 64, 0, 0.5f, 0.5f, 0, &inl));
    CHECK_OK(mk_loader(ds, s1, 64, 0, 0.5f, 0.5f, 4, &pre));
    CHECK_EQ(ddpc_loader_num_batches(pre), 469); /* ceil(30000 / 64) */
    for (uint64_t e = 0; e < 2; e++) {
        CHECK_EQ(epoch_bytes(inl, e, d, x0, y0), n);
        CHECK_EQ(epoch_bytes(pre, e, d, x1, y1), n);
        CHECK(memcmp(x0, x1, n * d * sizeof(float)) == 0);
        CHECK(memcmp(y0, y1, n * sizeof(int32_t)) == 0);
        const int64_t *ix = ddpc_sampler_indices(s1);
        for (size_t i = 0; i < n; i += 997) {
            CHECK_EQ(y1[i], ds->labels[ix[i]]);
            CHECK(x1[i * d + 400] == ((float)ds->images[ix[i] * d + 400] / 255.0f - 0.5f) / 0.5f);
        }
        if (e == 0) memcpy(ylab0, y1, n * sizeof(int32_t)); /* keep epoch 0's labels */
    }
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += ylab0[i] == y1[i];
    CHECK(same < n / 5); /* labels agree by chance about 1 in 10 */
    ddpc_loader_destroy(inl);
    ddpc_loader_destroy(pre);
    ddpc_sampler_destroy(s0);
    ddpc_sampler_destroy(s1);
    ddpc_dataset_destroy(ds);
    free(x0);
    free(x1);
    free(y0);
    free(y1);
    free(ylab0);
}

/* A caller that sometimes takes its next batch at once and sometimes only
 * after 1 ms, longer than the thread watches for it before sleeping: every
 * hand-over path (the batch ready, the caller's watch, the caller's sleep;
 * the thread's watch and its sleep until the caller drains the ring) runs,
 * and the batches are those of the inline loader, in order. A lost wake-up
 * costs 0.5 s (the thread's timed wait), so the deadline catches a few. */
TEST_T(data_loader_prefetch_slow_and_fast_caller, 60) {
    ddpc_dataset *ds = synth(300);
    const size_t d = 15;
    for (int prefetch = 1; prefetch <= 3; prefetch++) {
        ddpc_sampler *s0 = NULL, *s1 = NULL;
        CHECK_OK(mk_sampler(300, 1, 0, 1, 5, 0, &s0));
        CHECK_OK(mk_sampler(300, 1, 0, 1, 5, 0, &s1));
        ddpc_loader *inl = NULL, *pre = NULL;
        CHECK_OK(mk_loader(ds, s0, 7, 0, 0.5f, 0.5f, 0, &inl));
        CHECK_OK(mk_loader(ds, s1, 7, 0, 0.5f, 0.5f, prefetch, &pre));
        double t0 = ddpc_now();
        for (uint64_t e = 0; e < 2; e++) {
            CHECK_OK(ddpc_loader_start_epoch(inl, e));
            CHECK_OK(ddpc_loader_start_epoch(pre, e));
            size_t nb = 0;
            for (;;) {
                const ddpc_batch *a, *b;
                if (nb % 3 != 0) ddpc_sleep(0.001); /* slow twice, fast once */
                CHECK_OK(ddpc_loader_next(inl, &a));
                CHECK_OK(ddpc_loader_next(pre, &b));
                CHECK((a == NULL) == (b == NULL));
                if (!a) break;
                CHECK_EQ(a->size, b->size);
                CHECK(memcmp(a->x, b->x, (size_t)a->size * d * sizeof(float)) == 0);
                CHECK(memcmp(a->y, b->y, (size_t)a->size * sizeof(int32_t)) == 0);
                nb++;
            }
            CHECK_EQ(nb, 43); /* ceil(300 / 7) */
        }
        double secs = ddpc_now() - t0;
        CHECK_MSG(secs < 4.0 * t_slow(), "prefetch %d: 2 epochs of 43 batches took %.2f s (lost wake-ups?)", prefetch, secs);
        ddpc_loader_destroy(inl);
        ddpc_loader_destroy(pre);
        ddpc_sampler_destroy(s0);
        ddpc_sampler_destroy(s1);
    }
    ddpc_dataset_destroy(ds);
}

/* start_epoch mid-way (while the thread is decoding ahead) starts cleanly at
 * batch 0 of the new epoch; free mid-epoch joins the thread. */
TEST_T(data_loader_restart_mid_epoch, 120) {
    ddpc_dataset *ds = synth(256);
    ddpc_sampler *s = NULL;
    CHECK_OK(mk_sampler(256, 2, 0, 1, 3, 0, &s));
    ddpc_loader *l = NULL;
    CHECK_OK(mk_loader(ds, s, 5, 0, 0.5f, 0.5f, 3, &l));
    srand(7);
    for (int it = 0; it < 300; it++) {
        uint64_t e = (uint64_t)(rand() % 4);
        CHECK_OK(ddpc_loader_start_epoch(l, e));
        int take = rand() % 30;
        const int64_t *ix = ddpc_sampler_indices(s);
        for (int k = 0; k < take; k++) {
            const ddpc_batch *b;
            CHECK_OK(ddpc_loader_next(l, &b));
            if (!b) {
                CHECK_EQ(k, 26); /* ceil(128 / 5) */
                break;
            }
            for (int i = 0; i < b->size; i++) CHECK_EQ(b->y[i], ix[k * 5 + i]);
        }
        if (it % 50 == 0) { /* and one full epoch now and then */
            CHECK_OK(ddpc_loader_start_epoch(l, e));
            check_epoch(l, ds, ix, 128, 5, 0, 0.5f, 0.5f);
        }
    }
    /* free while the thread is mid-epoch */
    for (int it = 0; it < 50; it++) {
        ddpc_loader *m = NULL;
        CHECK_OK(mk_loader(ds, NULL, 1, 0, 0.5f, 0.5f, 1 + it % 8, &m));
        CHECK_OK(ddpc_loader_start_epoch(m, 0));
        const ddpc_batch *b;
        for (int k = 0; k < it % 5; k++) CHECK_OK(ddpc_loader_next(m, &b));
        ddpc_loader_destroy(m);
    }
    ddpc_loader_destroy(l);
    ddpc_sampler_destroy(s);
    ddpc_dataset_destroy(ds);
}

/* The wide (AVX2) path and the table agree with plain float32 arithmetic
 * for every pixel value, at 28x28 (784 = 98 x 8) and at an odd width. */
TEST(data_transform_all_values_paths) {
    const int dims[2][2] = {{28, 28}, {7, 5}};
    const float ms[][2] = {{0.5f, 0.5f}, {0.1307f, 0.3081f}, {0.2860f, 0.3530f}, {-1.0f, 3.0f}, {0.0f, 1e-3f}};
    for (int g = 0; g < 2; g++) {
        ddpc_dataset ds = {.rows = dims[g][0], .cols = dims[g][1]};
        int d = ds.rows * ds.cols;
        ds.n = (256 + d - 1) / d + 1;
        ds.images = malloc((size_t)ds.n * (size_t)d);
        for (int i = 0; i < ds.n * d; i++) ds.images[i] = (uint8_t)((i * 13 + i / 256) & 255);
        int64_t *idx = malloc((size_t)ds.n * sizeof *idx);
        for (int i = 0; i < ds.n; i++) idx[i] = ds.n - 1 - i;
        float *out = malloc((size_t)ds.n * (size_t)d * sizeof(float));
        for (size_t m = 0; m < sizeof ms / sizeof ms[0]; m++) {
            ddpc_transform_batch(&ds, idx, ds.n, ms[m][0], ms[m][1], out);
            for (int i = 0; i < ds.n; i++)
                for (int j = 0; j < d; j++) {
                    float x = (float)ds.images[idx[i] * d + j] / 255.0f;
                    float w = (x - ms[m][0]) / ms[m][1];
                    CHECK_MSG(memcmp(&out[i * d + j], &w, 4) == 0, "%dx%d mean %g std %g px %d: %a, want %a",
                              ds.rows, ds.cols, (double)ms[m][0], (double)ms[m][1], ds.images[idx[i] * d + j],
                              (double)out[i * d + j], (double)w);
                }
        }
        free(out);
        free(idx);
        free(ds.images);
    }
}

/* Bit-identical to torchvision's ToTensor + Normalize, done in torch. */
TEST_T(data_transform_vs_torch, 120) {
    const char *py =
        "import sys, struct\n"
        "try:\n"
        "    import torch\n"
        "except Exception as e:\n"
        "    print('no torch:', e); sys.exit(77)\n"
        "x = torch.arange(256, dtype=torch.uint8)\n"
        "for mean, std in ((0.5, 0.5), (0.1307, 0.3081), (0.2860, 0.3530)):\n"
        "    y = x.to(torch.float32).div(255)\n"
        "    y = y.sub_(torch.as_tensor(mean, dtype=torch.float32)).div_(torch.as_tensor(std, dtype=torch.float32))\n"
        "    print(' '.join('%08x' % struct.unpack('<I', struct.pack('<f', v))[0] for v in y.tolist()))\n";
    write_file(tpath("tf.py"), py, strlen(py), 0);
    char cmd[600];
    static char out[65536];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s", tpath("tf.py"));
    int rc = t_run_cmd(cmd, 100, out, sizeof out);
    if (rc == 77 || rc == 127) {
        rm_tmpdir();
        SKIP("PyTorch not available for /usr/bin/python3: %s", out);
    }
    CHECK_MSG(rc == 0, "%s: exit %d: %s", cmd, rc, out);
    const float ms[3][2] = {{0.5f, 0.5f}, {0.1307f, 0.3081f}, {0.2860f, 0.3530f}};
    ddpc_dataset ds = {.n = 1, .rows = 16, .cols = 16};
    uint8_t px[256];
    for (int v = 0; v < 256; v++) px[v] = (uint8_t)v;
    ds.images = px;
    int64_t zero = 0;
    char *p = out;
    for (int m = 0; m < 3; m++) {
        float got[256];
        ddpc_transform_batch(&ds, &zero, 1, ms[m][0], ms[m][1], got);
        for (int v = 0; v < 256; v++) {
            char *end;
            unsigned long bits = strtoul(p, &end, 16);
            CHECK_MSG(end != p, "torch output too short: %s", out);
            p = end;
            uint32_t mine;
            memcpy(&mine, &got[v], 4);
            CHECK_MSG(mine == bits, "mean %g std %g v %d: %08x, torch %08lx", (double)ms[m][0], (double)ms[m][1], v,
                      mine, bits);
        }
    }
    rm_tmpdir();
}
