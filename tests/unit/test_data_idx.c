/* test_data_idx.c — real MNIST-format datasets, the IDX reader (every field and size checked,
 * gzip or raw) and the ToTensor + Normalize transform. */
#include "data_fixtures.h"

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
    const int trl[10] = { 9, 0, 0, 3, 0, 2, 7, 2, 5, 5 },
              tel[10] = { 9, 2, 1, 1, 6, 1, 4, 6, 5, 7 };
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
    int counts[10] = { 0 };
    for (int i = 0; i < tr->n; i++) counts[tr->labels[i]]++;
    for (int c = 0; c < 10; c++) CHECK_EQ(counts[c], 6000);
    ddpc_dataset_destroy(tr);
    ddpc_dataset_destroy(te);
    ddpc_dataset_destroy(NULL);
}

/* The same files decompressed (and under MNIST's dotted names) load the same. */
TEST(data_raw_files_same_as_gz) {
    if (!have_fmnist()) SKIP("%s not installed", FMNIST);
    const char *names[2][2] = { { "t10k-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte" },
                                { "t10k-labels-idx1-ubyte.gz", "t10k-labels.idx1-ubyte" } };
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
    int dims[2] = { 2, 3 };
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
        CHECK_OK(ddpc_idx_create(p, &x));
        CHECK_EQ(x->dtype_code, DDPC_IDX_INT);
        CHECK_EQ(x->ndim, 2);
        CHECK_EQ(x->dims[0], 2);
        CHECK_EQ(x->dims[1], 3);
        CHECK_EQ(x->count, 6);
        for (int i = 0; i < 6; i++) CHECK_EQ(((int32_t *)x->data)[i], (i - 2) * 1000003);
        ddpc_idx_destroy(x);
    }
    /* double: -1.5 and 2^-3 */
    int d1[1] = { 2 };
    k = make_idx(buf, DDPC_IDX_DOUBLE, 1, d1, 0);
    double vals[2] = { -1.5, 0.125 };
    for (int i = 0; i < 2; i++) {
        uint64_t u;
        memcpy(&u, &vals[i], 8);
        for (int b = 7; b >= 0; b--) buf[k++] = (unsigned char)(u >> (8 * b));
    }
    write_file(tpath("f64.idx"), buf, k, 0);
    ddpc_idx *x = NULL;
    CHECK_OK(ddpc_idx_create(tpath("f64.idx"), &x));
    CHECK_NEAR(((double *)x->data)[0], -1.5, 0);
    CHECK_NEAR(((double *)x->data)[1], 0.125, 0);
    ddpc_idx_destroy(x);
    /* int16 and a zero dimension (count 0) */
    int d0[2] = { 4, 0 };
    k = make_idx(buf, DDPC_IDX_SHORT, 2, d0, 0);
    write_file(tpath("empty.idx"), buf, k, 0);
    CHECK_OK(ddpc_idx_create(tpath("empty.idx"), &x));
    CHECK_EQ(x->count, 0);
    ddpc_idx_destroy(x);
    ddpc_idx_destroy(NULL);
    rm_tmpdir();
}

typedef struct bad_case {
    const char *name; /* file name (".gz" suffix: written compressed unless raw_gz) */
    int raw_gz;       /* write raw bytes even though the name ends in .gz */
    ddpc_status want;
    const char *msg; /* expected in the error text */
} bad_case;

/* Every malformed file is an error that names the file and what is wrong. */
TEST(data_idx_bad_inputs) {
    unsigned char good[4096], buf[4200];
    int dims[3] = { 3, 4, 5 };
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
            { "magic", n, NULL, DDPC_ERR_IO, "bad magic" },
            { "dtype", n, NULL, DDPC_ERR_IO, "unknown dtype code 0x07" },
            { "rank0", n, NULL, DDPC_ERR_IO, "rank 0" },
            { "rank9", n, NULL, DDPC_ERR_IO, "rank 9" },
            { "hdr2", 2, NULL, DDPC_ERR_IO, "truncated header" },
            { "hdrdims", 10, NULL, DDPC_ERR_IO, "truncated header" },
            { "data", n - 1, NULL, DDPC_ERR_IO, "truncated data" },
            { "trail", n + 1, NULL, DDPC_ERR_IO, "trailing data" },
            { "huge", n, NULL, DDPC_ERR_IO, "truncated data" },
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
            ddpc_status s = ddpc_idx_create(p, &x);
            CHECK_MSG(s == cases[c].want, "%s: got %s (%s)", name, ddpc_status_str(s),
                      ddpc_last_error());
            CHECK(x == NULL);
            CHECK_CONTAINS(ddpc_last_error(), p);
            CHECK_CONTAINS(ddpc_last_error(), cases[c].msg);
        }
    }
    ddpc_idx *x = NULL;
    /* named .gz, but raw content */
    write_file(tpath("raw.idx.gz"), good, n, 0);
    CHECK_STATUS(ddpc_idx_create(tpath("raw.idx.gz"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "not gzip");
    CHECK_CONTAINS(ddpc_last_error(), "raw.idx.gz");
    /* empty, missing, a directory */
    write_file(tpath("empty"), good, 0, 0);
    CHECK_STATUS(ddpc_idx_create(tpath("empty"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "empty");
    write_file(tpath("empty.gz"), good, 0, 1); /* a valid gzip stream of nothing */
    CHECK_STATUS(ddpc_idx_create(tpath("empty.gz"), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "truncated header (0 of 4");
    CHECK_STATUS(ddpc_idx_create(tpath("missing.idx"), &x), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "missing.idx");
    CHECK_STATUS(ddpc_idx_create(tmpdir(), &x), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "not a regular file");
    /* a gzip stream cut short */
    write_file(tpath("cut.gz"), good, n, 1);
    size_t zn;
    FILE *f = fopen(tpath("cut.gz"), "rb");
    unsigned char z[8192];
    zn = fread(z, 1, sizeof z, f);
    fclose(f);
    write_file(tpath("cut.gz"), z, zn - 12, 0);
    CHECK_STATUS(ddpc_idx_create(tpath("cut.gz"), &x), DDPC_ERR_IO);
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
    int di[3] = { 5, 4, 4 }, dl[1] = { 4 };
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
    int d2[2] = { 5, 16 };
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 2, d2, 80), 1);
    CHECK_STATUS(ddpc_dataset_create_mnist(dir, "train", &ds), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "images must be a 3-D ubyte");
    /* zero samples */
    int dz[3] = { 0, 4, 4 }, dlz[1] = { 0 };
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 3, dz, 0), 1);
    write_file(lp, lb, make_idx(lb, DDPC_IDX_UBYTE, 1, dlz, 0), 1);
    CHECK_STATUS(ddpc_dataset_create_mnist(dir, "train", &ds), DDPC_ERR_IO);
    CHECK_CONTAINS(ddpc_last_error(), "no samples");
    /* and a good one: labels 0..6 give 7 classes */
    write_file(ip, im, make_idx(im, DDPC_IDX_UBYTE, 3, di, 80), 1);
    unsigned char l5[13] = { 0, 0, 8, 1, 0, 0, 0, 5, 3, 6, 0, 1, 2 };
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
    unsigned char good[2048], buf[2100] = { 0 }; /* "append" writes bytes past the image */
    int dims[3] = { 4, 5, 6 };
    size_t n = make_idx(good, DDPC_IDX_UBYTE, 3, dims, 120);
    int ndims[2] = { 10, 7 };
    unsigned char good2[2048];
    size_t n2 = make_idx(good2, DDPC_IDX_INT, 2, ndims, 280);
    srand(12345);
    int ok = 0, bad = 0;
    for (int it = 0; it < 600; it++) {
        const unsigned char *src = (it & 1) ? good2 : good;
        size_t len = (it & 1) ? n2 : n;
        memcpy(buf, src, len);
        int kind = rand() % 4;
        if (kind == 0)
            len = (size_t)rand() % (len + 1); /* truncate */
        else if (kind == 1)
            for (int j = rand() % 4 + 1; j > 0; j--)
                buf[rand() % 20] ^= (unsigned char)(1 + rand() % 255); /* header */
        else if (kind == 2)
            buf[rand() % len] = (unsigned char)rand(); /* anywhere */
        else
            len += (size_t)(rand() % 8); /* append */
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
        ddpc_status s = ddpc_idx_create(p, &x);
        if (s == DDPC_OK) {
            ok++;
            size_t esz = x->dtype_code == DDPC_IDX_UBYTE || x->dtype_code == DDPC_IDX_SBYTE ? 1
                         : x->dtype_code == DDPC_IDX_SHORT                                  ? 2
                         : x->dtype_code == DDPC_IDX_DOUBLE                                 ? 8
                                                                                            : 4;
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
    int di[3] = { 3, 2, 2 }, dl[1] = { 3 };
    char dir[300], ip[400], lp[400];
    snprintf(dir, sizeof dir, "%s/tf", tmpdir());
    mkdir(dir, 0700);
    snprintf(ip, sizeof ip, "%s/t10k-images-idx3-ubyte", dir);
    snprintf(lp, sizeof lp, "%s/t10k-labels-idx1-ubyte", dir);
    size_t k = make_idx(im, DDPC_IDX_UBYTE, 3, di, 0);
    const unsigned char px[12] = { 0, 255, 128, 1, 2, 3, 4, 5, 200, 100, 50, 25 };
    memcpy(im + k, px, 12);
    write_file(ip, im, k + 12, 0);
    unsigned char lb[16];
    write_file(lp, lb, make_idx(lb, DDPC_IDX_UBYTE, 1, dl, 3), 0);
    ddpc_dataset *ds = NULL;
    CHECK_OK(ddpc_dataset_create_mnist(dir, "test", &ds));
    int64_t idx[3] = { 2, 0, 2 };
    float out[12];
    ddpc_transform_batch(ds, idx, 3, 0.5f, 0.5f, out);
    const int order[12] = { 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11 };
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
