/*
 * internal.h — what the data layer's files share and nothing else needs:
 * the transform split into its lookup table and its row loop, so that the
 * loader builds the table once instead of once per batch.
 */
#ifndef DDPC_DATA_INTERNAL_H
#define DDPC_DATA_INTERNAL_H

#include "ddpc/data.h"

/* lut[v] = ((float)v / 255 - mean) / std, in float32 (torchvision's order). */
void ddpc__transform_lut(float mean, float std, float lut[256]);
/* dst row i (rows*cols floats) = lut applied to the pixels of sample idx[i]. */
void ddpc__transform_rows(const ddpc_dataset *ds, const int64_t *idx, int n_idx,
                          const float lut[256], float *dst);

#endif
