/*
 * internal.h — what the data layer's files share and nothing else needs:
 * the transform prepared once (table, SIMD check), so that the loader does
 * that once instead of once per batch.
 */
#ifndef DDPC_DATA_INTERNAL_H
#define DDPC_DATA_INTERNAL_H

#include "ddpc/data.h"

/* The transform, prepared once: a lookup table lut[v] = ((float)v / 255 -
 * mean) / std in float32 (torchvision's order), and, where the CPU has AVX2,
 * the same arithmetic eight pixels at a time, used only when it gives the
 * table's bits for all 256 values (IEEE division and subtraction are
 * correctly rounded, so it does). */
typedef struct ddpc__xform {
    float lut[256];
    float mean, std;
    int avx2; /* 1: ddpc__xform_rows uses the AVX2 loop */
} ddpc__xform;

void ddpc__xform_init(ddpc__xform *t, float mean, float std);
/* dst row i (rows*cols floats) = the transform of the pixels of sample idx[i]. */
void ddpc__xform_rows(const ddpc__xform *t, const ddpc_dataset *ds, const int64_t *idx, int n_idx,
                      float *dst);

#endif
