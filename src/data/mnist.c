/*
 * mnist.c — MNIST-format datasets (MNIST, Fashion-MNIST) and the
 * ToTensor + Normalize transform.
 *
 * Finds a split's two files under their standard names, reads them with
 * idx.c, checks that they describe one dataset (3-D ubyte images, 1-D ubyte
 * labels, equal counts) and keeps the raw bytes: the transform to floats
 * happens per batch (loader.c), through a 256-entry lookup table or the
 * same arithmetic in AVX2.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "data/internal.h"

/* Picks the file of one split and kind under dir: the first of the names
 * that exists, raw before .gz. Writes the chosen path to buf (or, when none
 * exists, the first name, so that the error names what was looked for). */
static void find_file(const char *dir, const char *prefix, const char *kind, char *buf,
                      size_t len) {
    /* kind is "images-idx3" or "labels-idx1"; MNIST's mirrors also use a dot
     * ("train-images.idx3-ubyte"). */
    char dotted[32];
    snprintf(dotted, sizeof dotted, "%s", kind);
    char *dash = strchr(dotted, '-');
    if (dash) *dash = '.';
    const char *forms[4][2] = { { kind, "" }, { kind, ".gz" }, { dotted, "" }, { dotted, ".gz" } };
    for (int i = 0; i < 4; i++) {
        snprintf(buf, len, "%s/%s-%s-ubyte%s", dir, prefix, forms[i][0], forms[i][1]);
        if (access(buf, F_OK) == 0) return;
    }
    snprintf(buf, len, "%s/%s-%s-ubyte[.gz]", dir, prefix, kind);
}

/*
 * Loads split "train" or "test" of an MNIST-format dataset from dir (see
 * data.h). The images' buffer and the labels' buffer are taken over from
 * the IDX objects, so nothing is copied.
 */
ddpc_status ddpc_dataset_create_mnist(const char *dir, const char *split, ddpc_dataset **out) {
    if (!dir || !split || !out)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_dataset_create_mnist: NULL argument");
    *out = NULL;
    const char *prefix;
    if (strcmp(split, "train") == 0)
        prefix = "train";
    else if (strcmp(split, "test") == 0 || strcmp(split, "t10k") == 0)
        prefix = "t10k";
    else
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_dataset_create_mnist: split '%s' is not 'train' or 'test'", split);
    char ipath[PATH_MAX], lpath[PATH_MAX];
    find_file(dir, prefix, "images-idx3", ipath, sizeof ipath);
    find_file(dir, prefix, "labels-idx1", lpath, sizeof lpath);

    ddpc_idx *im = NULL, *lb = NULL;
    ddpc_dataset *ds = NULL;
    ddpc_status s = ddpc_idx_create(ipath, &im);
    if (s == DDPC_OK) s = ddpc_idx_create(lpath, &lb);
    if (s != DDPC_OK) goto done;
    if (im->dtype_code != DDPC_IDX_UBYTE || im->ndim != 3) {
        s = ddpc__err(DDPC_ERR_IO,
                      "%s: images must be a 3-D ubyte IDX (0x00000803), got dtype 0x%02x rank %d",
                      ipath, im->dtype_code, im->ndim);
        goto done;
    }
    if (lb->dtype_code != DDPC_IDX_UBYTE || lb->ndim != 1) {
        s = ddpc__err(DDPC_ERR_IO,
                      "%s: labels must be a 1-D ubyte IDX (0x00000801), got dtype 0x%02x rank %d",
                      lpath, lb->dtype_code, lb->ndim);
        goto done;
    }
    if (im->dims[0] != lb->dims[0]) {
        s = ddpc__err(DDPC_ERR_IO, "%s has %d images but %s has %d labels", ipath, im->dims[0],
                      lpath, lb->dims[0]);
        goto done;
    }
    if (im->dims[0] == 0 || im->dims[1] == 0 || im->dims[2] == 0) {
        s = ddpc__err(DDPC_ERR_IO, "%s: no samples (dimensions %d x %d x %d)", ipath, im->dims[0],
                      im->dims[1], im->dims[2]);
        goto done;
    }
    ds = calloc(1, sizeof *ds);
    if (!ds) {
        s = ddpc__err(DDPC_ERR_NOMEM, "ddpc_dataset_create_mnist: out of memory");
        goto done;
    }
    ds->n = im->dims[0];
    ds->rows = im->dims[1];
    ds->cols = im->dims[2];
    ds->images = im->data;
    ds->labels = lb->data;
    im->data = lb->data = NULL;
    int maxl = 0;
    for (int i = 0; i < ds->n; i++)
        if (ds->labels[i] > maxl) maxl = ds->labels[i];
    ds->num_classes = maxl + 1;
    DDPC_INFO(DATA, "%s: %d samples of %dx%d, %d classes (%s, %s)", dir, ds->n, ds->rows, ds->cols,
              ds->num_classes, ipath, lpath);
    *out = ds;
done:
    ddpc_idx_destroy(im);
    ddpc_idx_destroy(lb);
    return s;
}

void ddpc_dataset_destroy(ddpc_dataset *ds) {
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds);
}

/* Prefetches the rows of the sample `ahead` positions on, so that a
 * shuffled order does not wait on memory at every sample. */
static inline void prefetch_row(const ddpc_dataset *ds, const int64_t *idx, int i, int n,
                                size_t d) {
    if (i < n) {
        const char *p = (const char *)ds->images + (size_t)idx[i] * d;
        for (size_t c = 0; c < d; c += 64) __builtin_prefetch(p + c);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_PATH 1

/* Pixels [0, d8) of each row, eight at a time: u8 -> f32 (exact), / 255,
 * - mean, / std: the scalar order, so the same bits. The tail uses lut. */
__attribute__((target("avx2"), always_inline)) static inline void
rows_avx2_d(const ddpc__xform *t, const ddpc_dataset *ds, const int64_t *idx, int n, float *dst,
            const size_t d) {
    const size_t d8 = d & ~(size_t)7;
    const __m256 k255 = _mm256_set1_ps(255.0f), m = _mm256_set1_ps(t->mean),
                 sd = _mm256_set1_ps(t->std);
    for (int i = 0; i < n; i++) {
        prefetch_row(ds, idx, i + 2, n, d);
        const uint8_t *src = ds->images + (size_t)idx[i] * d;
        float *row = dst + (size_t)i * d;
        for (size_t j = 0; j < d8; j += 8) {
            __m128i b = _mm_loadl_epi64((const __m128i *)(src + j));
            __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
            x = _mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(x, k255), m), sd);
            _mm256_storeu_ps(row + j, x);
        }
        for (size_t j = d8; j < d; j++) row[j] = t->lut[src[j]];
    }
}

/* The AVX2 loop, with MNIST's 28x28 as a compile-time size. */
__attribute__((target("avx2"))) static void rows_avx2(const ddpc__xform *t, const ddpc_dataset *ds,
                                                      const int64_t *idx, int n, float *dst) {
    const size_t d = (size_t)ds->rows * (size_t)ds->cols;
    if (d == 784)
        rows_avx2_d(t, ds, idx, n, dst, 784);
    else
        rows_avx2_d(t, ds, idx, n, dst, d);
}
#endif

/* Builds the table and decides on the AVX2 loop by running it over all 256
 * pixel values and comparing its bits with the table's. */
void ddpc__xform_init(ddpc__xform *t, float mean, float std) {
    for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f;
        t->lut[v] = (x - mean) / std;
    }
    t->mean = mean;
    t->std = std;
    t->avx2 = 0;
#ifdef HAVE_AVX2_PATH
    if (__builtin_cpu_supports("avx2")) {
        uint8_t px[256];
        int64_t zero = 0;
        float got[256];
        for (int v = 0; v < 256; v++) px[v] = (uint8_t)v;
        ddpc_dataset probe = { .n = 1, .rows = 16, .cols = 16, .images = px };
        rows_avx2(t, &probe, &zero, 1, got);
        t->avx2 = memcmp(got, t->lut, sizeof got) == 0;
    }
#endif
}

/* Transforms n samples of ds (rows idx[0..n)) into dst, through the AVX2
 * loop when init chose it, else through the table. */
void ddpc__xform_rows(const ddpc__xform *t, const ddpc_dataset *ds, const int64_t *idx, int n,
                      float *dst) {
#ifdef HAVE_AVX2_PATH
    if (t->avx2) {
        rows_avx2(t, ds, idx, n, dst);
        return;
    }
#endif
    const size_t d = (size_t)ds->rows * (size_t)ds->cols;
    for (int i = 0; i < n; i++) {
        prefetch_row(ds, idx, i + 2, n, d);
        const uint8_t *restrict src = ds->images + (size_t)idx[i] * d;
        float *restrict row = dst + (size_t)i * d;
        for (size_t j = 0; j < d; j++) row[j] = t->lut[src[j]];
    }
}

void ddpc_transform_batch(const ddpc_dataset *ds, const int64_t *idx, int n_idx, float mean,
                          float std, float *dst) {
    ddpc__xform t;
    ddpc__xform_init(&t, mean, std);
    ddpc__xform_rows(&t, ds, idx, n_idx, dst);
}
