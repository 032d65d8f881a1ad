/*
 * reduce.h — element-wise reduction kernels and float conversions, for every
 * dtype and op of ddpc.h. Used by the collective algorithms (coll) and the
 * DDP reducer; knows nothing about communicators.
 *
 * Semantics (the same as PyTorch's CPU collectives):
 *   - integer sum and prod wrap modulo 2^bits (computed in the unsigned type);
 *   - band, bor and bxor act on the bits of every integer dtype; float
 *     dtypes have none (such a pair is invalid here, and refused by api.c);
 *   - float max/min propagate NaN: if either operand is NaN the result is NaN;
 *   - AVG acts as SUM in the combining kernels; ddpc__reduce_finish divides
 *     by the number of ranks at the end (integers truncate toward zero);
 *   - float16 and bfloat16 are converted to float32, combined, and rounded
 *     back (round to nearest even) once per call. An algorithm that combines
 *     many ranks and wants a single rounding accumulates in float32 with
 *     ddpc__to_float32 / the DDPC_FLOAT32 kernels / ddpc__from_float32.
 *
 * count is in elements. Invalid dtypes or ops do nothing (callers validate
 * arguments before calling; these are hot loops with no status to return).
 */
#ifndef DDPC_COLL_REDUCE_H
#define DDPC_COLL_REDUCE_H

#include <stddef.h>

#include "base/export.h"
#include "ddpc/ddpc.h"

/* dst[i] = dst[i] op src[i]; AVG acts as SUM. dst and src must not partially
 * overlap (dst == src is allowed). */
void ddpc__reduce_inplace(void *dst, const void *src, size_t count, ddpc_dtype t, ddpc_op op);

/* dst[i] = a[i] op b[i]; AVG acts as SUM. dst may be a or b (or neither, and
 * then must not overlap them). */
void ddpc__reduce3(void *dst, const void *a, const void *b, size_t count, ddpc_dtype t, ddpc_op op);

/* AVG: buf[i] /= nranks (integers truncate toward zero, like torch; float32
 * and float64 multiply by 1/nranks, as NCCL does, within one ulp of the
 * quotient; float16 and bfloat16 divide in float32 and round once). Other
 * ops, or nranks <= 1: nothing. */
DDPC_LAYER_API void ddpc__reduce_finish(void *buf, size_t count, ddpc_dtype t, ddpc_op op,
                                        int nranks);

/* float16 / bfloat16 / float32 (also float64 and the integer types, by C
 * conversion) to float32. dst and src must not overlap unless t is float32
 * and dst == src. */
DDPC_LAYER_API void ddpc__to_float32(float *dst, const void *src, size_t count, ddpc_dtype t);

/* float32 to float16 / bfloat16 (round to nearest even; overflow to inf; NaN
 * stays NaN) or float32 / float64; integer types: NaN becomes 0, values
 * saturate to the type's range, then truncate toward zero. dst and src must
 * not overlap unless t is float32 and dst == src. */
DDPC_LAYER_API void ddpc__from_float32(void *dst, const float *src, size_t count, ddpc_dtype t);

/* For tests: 0 forces the portable (non-F16C) half conversions, 1 (the
 * default) uses the CPU's F16C instructions where it has them. */
void ddpc__reduce_use_simd(int enable);

#endif /* DDPC_COLL_REDUCE_H */
