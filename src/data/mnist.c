/*
 * mnist.c — MNIST-format datasets (MNIST, Fashion-MNIST) and the
 * ToTensor + Normalize transform.
 *
 * Finds a split's two files under their standard names, reads them with
 * idx.c, checks that they describe one dataset (3-D ubyte images, 1-D ubyte
 * labels, equal counts) and keeps the raw bytes: the transform to floats
 * happens per batch (loader.c), through a 256-entry lookup table.
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
    const char *forms[4][2] = {{kind, ""}, {kind, ".gz"}, {dotted, ""}, {dotted, ".gz"}};
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
ddpc_status ddpc_mnist_load(const char *dir, const char *split, ddpc_dataset **out) {
    if (!dir || !split || !out)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_mnist_load: NULL argument");
    *out = NULL;
    const char *prefix;
    if (strcmp(split, "train") == 0) prefix = "train";
    else if (strcmp(split, "test") == 0 || strcmp(split, "t10k") == 0) prefix = "t10k";
    else
        return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_mnist_load: split '%s' is not 'train' or 'test'",
                        split);
    char ipath[PATH_MAX], lpath[PATH_MAX];
    find_file(dir, prefix, "images-idx3", ipath, sizeof ipath);
    find_file(dir, prefix, "labels-idx1", lpath, sizeof lpath);

    ddpc_idx *im = NULL, *lb = NULL;
    ddpc_dataset *ds = NULL;
    ddpc_status s = ddpc_idx_load(ipath, &im);
    if (s == DDPC_OK) s = ddpc_idx_load(lpath, &lb);
    if (s != DDPC_OK) goto done;
    if (im->dtype_code != DDPC_IDX_UBYTE || im->ndim != 3) {
        s = ddpc_err(DDPC_ERR_IO, "%s: images must be a 3-D ubyte IDX (0x00000803), got dtype 0x%02x rank %d",
                     ipath, im->dtype_code, im->ndim);
        goto done;
    }
    if (lb->dtype_code != DDPC_IDX_UBYTE || lb->ndim != 1) {
        s = ddpc_err(DDPC_ERR_IO, "%s: labels must be a 1-D ubyte IDX (0x00000801), got dtype 0x%02x rank %d",
                     lpath, lb->dtype_code, lb->ndim);
        goto done;
    }
    if (im->dims[0] != lb->dims[0]) {
        s = ddpc_err(DDPC_ERR_IO, "%s has %d images but %s has %d labels", ipath, im->dims[0], lpath,
                     lb->dims[0]);
        goto done;
    }
    if (im->dims[0] == 0 || im->dims[1] == 0 || im->dims[2] == 0) {
        s = ddpc_err(DDPC_ERR_IO, "%s: no samples (dimensions %d x %d x %d)", ipath, im->dims[0],
                     im->dims[1], im->dims[2]);
        goto done;
    }
    ds = calloc(1, sizeof *ds);
    if (!ds) {
        s = ddpc_err(DDPC_ERR_NOMEM, "ddpc_mnist_load: out of memory");
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
    ddpc_idx_free(im);
    ddpc_idx_free(lb);
    return s;
}

void ddpc_dataset_free(ddpc_dataset *ds) {
    if (!ds) return;
    free(ds->images);
    free(ds->labels);
    free(ds);
}

/* The 256 values a pixel can take after ToTensor and Normalize, computed in
 * float32 in torchvision's order: (v / 255) then (x - mean) / std. */
void ddpc__transform_lut(float mean, float std, float lut[256]) {
    for (int v = 0; v < 256; v++) {
        float x = (float)v / 255.0f;
        lut[v] = (x - mean) / std;
    }
}

/* Applies lut to n_idx samples of ds: dst row i = lut[pixels of idx[i]]. */
void ddpc__transform_rows(const ddpc_dataset *ds, const int64_t *idx, int n_idx,
                          const float lut[256], float *dst) {
    const size_t d = (size_t)ds->rows * (size_t)ds->cols;
    for (int i = 0; i < n_idx; i++) {
        const uint8_t *restrict src = ds->images + (size_t)idx[i] * d;
        float *restrict row = dst + (size_t)i * d;
        for (size_t j = 0; j < d; j++) row[j] = lut[src[j]];
    }
}

void ddpc_transform_batch(const ddpc_dataset *ds, const int64_t *idx, int n_idx, float mean,
                          float std, float *dst) {
    float lut[256];
    ddpc__transform_lut(mean, std, lut);
    ddpc__transform_rows(ds, idx, n_idx, lut, dst);
}
