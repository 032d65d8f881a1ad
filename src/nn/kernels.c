/*
 * kernels.c — hand-vectorised (AVX2 + FMA) products for a Linear layer with
 * few outputs (N <= 16, e.g. the 10 classes of MNIST), where a general
 * sgemm spends most of its time in packing and edge handling: for
 * (B=32, K=784, N=10) OpenBLAS takes ~60 us, these ~6 us.
 *
 * Chosen at run time: when the CPU lacks AVX2 or FMA, or N > 16, the callers
 * in layers.c use cblas_sgemm. Summation order differs from sgemm's only in
 * rounding.
 */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

int ddpc__nn_have_skinny(void) {
    static int have = -1; /* computed once; racing threads store the same value */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h;
}

__attribute__((target("avx2,fma"))) static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

#define FMA(acc, a, b) acc = _mm256_fmadd_ps(a, b, acc)

/*
 * Rows x0, x1 against outputs o..o+G (G <= 5, a constant after inlining):
 * y0[j] += dot(x0, W[j]), y1[j] += dot(x1, W[j]). Ten independent
 * accumulators hide the FMA latency; each W load serves two rows.
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
fwd_2xG(const float *x0, const float *x1, const float *W, int K, float *y0, float *y1,
        const int G) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0;
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 u = _mm256_loadu_ps(x0 + k), v = _mm256_loadu_ps(x1 + k), w;
        w = _mm256_loadu_ps(W + k);
        FMA(a0, u, w);
        FMA(b0, v, w);
        if (G > 1) {
            w = _mm256_loadu_ps(W + (size_t)K + k);
            FMA(a1, u, w);
            FMA(b1, v, w);
        }
        if (G > 2) {
            w = _mm256_loadu_ps(W + 2 * (size_t)K + k);
            FMA(a2, u, w);
            FMA(b2, v, w);
        }
        if (G > 3) {
            w = _mm256_loadu_ps(W + 3 * (size_t)K + k);
            FMA(a3, u, w);
            FMA(b3, v, w);
        }
        if (G > 4) {
            w = _mm256_loadu_ps(W + 4 * (size_t)K + k);
            FMA(a4, u, w);
            FMA(b4, v, w);
        }
    }
    __m256 as[5] = { a0, a1, a2, a3, a4 }, bs[5] = { b0, b1, b2, b3, b4 };
    for (int j = 0; j < G; j++) {
        float s0 = hsum(as[j]), s1 = hsum(bs[j]);
        for (int kk = k; kk < K; kk++) {
            s0 += x0[kk] * W[(size_t)j * K + kk];
            s1 += x1[kk] * W[(size_t)j * K + kk];
        }
        y0[j] += s0;
        y1[j] += s1;
    }
}

__attribute__((target("avx2,fma"))) static void
fwd_group(const float *x0, const float *x1, const float *W, int K, float *y0, float *y1, int G) {
    switch (G) {
    case 1: fwd_2xG(x0, x1, W, K, y0, y1, 1); break;
    case 2: fwd_2xG(x0, x1, W, K, y0, y1, 2); break;
    case 3: fwd_2xG(x0, x1, W, K, y0, y1, 3); break;
    case 4: fwd_2xG(x0, x1, W, K, y0, y1, 4); break;
    default: fwd_2xG(x0, x1, W, K, y0, y1, 5); break;
    }
}

/* y (B, N) += x (B, K) @ W^T: rows in pairs, outputs in groups of <= 5. */
__attribute__((target("avx2,fma"))) static void fwd_n(const float *x, const float *W, float *y,
                                                      int B, int K, int N) {
    float junk[5] = { 0 }; /* the missing second row of an odd B: computed, not kept */
    for (int r = 0; r < B; r += 2) {
        const float *x0 = x + (size_t)r * K, *x1 = r + 1 < B ? x0 + K : x0;
        for (int o = 0; o < N; o += 5) {
            int G = N - o < 5 ? N - o : 5;
            float *y1 = r + 1 < B ? y + (size_t)(r + 1) * N + o : junk;
            fwd_group(x0, x1, W + (size_t)o * K, K, y + (size_t)r * N + o, y1, G);
        }
    }
}

/*
 * Columns k..k+16 of outputs o..o+G (G <= 5): dW[j, k..k+16) +=
 * sum_r g[r, j] * x[r, k..k+16). Ten accumulators; each broadcast of g
 * serves two column chunks.
 */
__attribute__((target("avx2,fma"), always_inline)) static inline void
bwd_16xG(const float *g, const float *x, float *dW, int B, int K, int N, int k, const int G) {
    float *d0 = dW + k;
    __m256 a0 = _mm256_loadu_ps(d0), b0 = _mm256_loadu_ps(d0 + 8);
    __m256 a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0, a4 = a0, b4 = a0;
    if (G > 1) a1 = _mm256_loadu_ps(d0 + K), b1 = _mm256_loadu_ps(d0 + K + 8);
    if (G > 2) a2 = _mm256_loadu_ps(d0 + 2 * K), b2 = _mm256_loadu_ps(d0 + 2 * K + 8);
    if (G > 3) a3 = _mm256_loadu_ps(d0 + 3 * K), b3 = _mm256_loadu_ps(d0 + 3 * K + 8);
    if (G > 4) a4 = _mm256_loadu_ps(d0 + 4 * K), b4 = _mm256_loadu_ps(d0 + 4 * K + 8);
    for (int r = 0; r < B; r++) {
        const float *xr = x + (size_t)r * K + k, *gr = g + (size_t)r * N;
        __m256 u = _mm256_loadu_ps(xr), v = _mm256_loadu_ps(xr + 8), c;
        c = _mm256_broadcast_ss(gr);
        FMA(a0, c, u);
        FMA(b0, c, v);
        if (G > 1) {
            c = _mm256_broadcast_ss(gr + 1);
            FMA(a1, c, u);
            FMA(b1, c, v);
        }
        if (G > 2) {
            c = _mm256_broadcast_ss(gr + 2);
            FMA(a2, c, u);
            FMA(b2, c, v);
        }
        if (G > 3) {
            c = _mm256_broadcast_ss(gr + 3);
            FMA(a3, c, u);
            FMA(b3, c, v);
        }
        if (G > 4) {
            c = _mm256_broadcast_ss(gr + 4);
            FMA(a4, c, u);
            FMA(b4, c, v);
        }
    }
    _mm256_storeu_ps(d0, a0), _mm256_storeu_ps(d0 + 8, b0);
    if (G > 1) _mm256_storeu_ps(d0 + K, a1), _mm256_storeu_ps(d0 + K + 8, b1);
    if (G > 2) _mm256_storeu_ps(d0 + 2 * K, a2), _mm256_storeu_ps(d0 + 2 * K + 8, b2);
    if (G > 3) _mm256_storeu_ps(d0 + 3 * K, a3), _mm256_storeu_ps(d0 + 3 * K + 8, b3);
    if (G > 4) _mm256_storeu_ps(d0 + 4 * K, a4), _mm256_storeu_ps(d0 + 4 * K + 8, b4);
}

__attribute__((target("avx2,fma"))) static void bwd_group(const float *g, const float *x, float *dW,
                                                          int B, int K, int N, int k, int G) {
    switch (G) {
    case 1: bwd_16xG(g, x, dW, B, K, N, k, 1); break;
    case 2: bwd_16xG(g, x, dW, B, K, N, k, 2); break;
    case 3: bwd_16xG(g, x, dW, B, K, N, k, 3); break;
    case 4: bwd_16xG(g, x, dW, B, K, N, k, 4); break;
    default: bwd_16xG(g, x, dW, B, K, N, k, 5); break;
    }
}

/* dW (N, K) += g^T @ x: 16 columns at a time, outputs in groups of <= 5;
 * the last K % 16 columns in scalar code. */
__attribute__((target("avx2,fma"))) static void bwd_n(const float *g, const float *x, float *dW,
                                                      int B, int K, int N) {
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int o = 0; o < N; o += 5)
            bwd_group(g + o, x, dW + (size_t)o * K, B, K, N, k, N - o < 5 ? N - o : 5);
    for (; k < K; k++)
        for (int o = 0; o < N; o++) {
            float s = 0.0f;
            for (int r = 0; r < B; r++) s += g[(size_t)r * N + o] * x[(size_t)r * K + k];
            dW[(size_t)o * K + k] += s;
        }
}

/* SGD without momentum: w -= lr * (g + wd * w). */
__attribute__((target("avx2,fma"))) static void sgd_plain(float *w, const float *g, size_t n,
                                                          float lr, float wd) {
    __m256 vlr = _mm256_set1_ps(lr), vwd = _mm256_set1_ps(wd);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = _mm256_loadu_ps(w + i);
        __m256 d = _mm256_fmadd_ps(vwd, wv, _mm256_loadu_ps(g + i));
        _mm256_storeu_ps(w + i, _mm256_fnmadd_ps(vlr, d, wv));
    }
    for (; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
}

void ddpc__nn_sgd_plain(float *w, const float *g, size_t n, float lr, float wd) {
    if (ddpc__nn_have_skinny()) {
        sgd_plain(w, g, n, lr, wd);
        return;
    }
    for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
}

/* Adam/AdamW over n elements (see adam_step in optim.c); the same
 * operations in the same order as the scalar loop (no fused multiply-add),
 * so both give the same bits. */
static void adam_scalar(const nn_adam_args *a, float *w, const float *g, float *ma, float *va,
                        size_t i0, size_t n) {
    for (size_t i = i0; i < n; i++) {
        float gi = g[i];
        if (a->decoupled)
            w[i] *= a->decay;
        else if (a->wd != 0.0f)
            gi += a->wd * w[i];
        ma[i] = ma[i] * a->b1 + (1.0f - a->b1) * gi;
        va[i] = va[i] * a->b2 + (1.0f - a->b2) * gi * gi;
        float denom = sqrtf(va[i]) / a->bc2_sqrt + a->eps;
        w[i] -= a->step_size * (ma[i] / denom);
    }
}

__attribute__((target("avx2"))) static void
adam_avx2(const nn_adam_args *a, float *w, const float *g, float *ma, float *va, size_t n) {
    __m256 b1 = _mm256_set1_ps(a->b1), c1 = _mm256_set1_ps(1.0f - a->b1);
    __m256 b2 = _mm256_set1_ps(a->b2), c2 = _mm256_set1_ps(1.0f - a->b2);
    __m256 wd = _mm256_set1_ps(a->wd), decay = _mm256_set1_ps(a->decay),
           eps = _mm256_set1_ps(a->eps);
    __m256 bc2 = _mm256_set1_ps(a->bc2_sqrt), step = _mm256_set1_ps(a->step_size);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 wv = _mm256_loadu_ps(w + i), gv = _mm256_loadu_ps(g + i);
        if (a->decoupled)
            wv = _mm256_mul_ps(wv, decay);
        else if (a->wd != 0.0f)
            gv = _mm256_add_ps(gv, _mm256_mul_ps(wd, wv));
        __m256 m = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(ma + i), b1), _mm256_mul_ps(c1, gv));
        __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(va + i), b2),
                                 _mm256_mul_ps(_mm256_mul_ps(c2, gv), gv));
        __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), bc2), eps);
        wv = _mm256_sub_ps(wv, _mm256_mul_ps(step, _mm256_div_ps(m, denom)));
        _mm256_storeu_ps(ma + i, m);
        _mm256_storeu_ps(va + i, v);
        _mm256_storeu_ps(w + i, wv);
    }
    adam_scalar(a, w, g, ma, va, i, n);
}

void ddpc__nn_adam(const nn_adam_args *a, float *w, const float *g, float *ma, float *va,
                   size_t n) {
    if (ddpc__nn_have_skinny())
        adam_avx2(a, w, g, ma, va, n);
    else
        adam_scalar(a, w, g, ma, va, 0, n);
}

/* y = max(x, 0); dx = g where y > 0, else 0. */
__attribute__((target("avx2"))) static void relu_fwd_avx2(const float *x, float *y, size_t n) {
    __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_max_ps(_mm256_loadu_ps(x + i), z));
    for (; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__attribute__((target("avx2"))) static void relu_bwd_avx2(const float *y, const float *g, float *dx,
                                                          size_t n) {
    __m256 z = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 pos = _mm256_cmp_ps(_mm256_loadu_ps(y + i), z, _CMP_GT_OQ);
        _mm256_storeu_ps(dx + i, _mm256_and_ps(pos, _mm256_loadu_ps(g + i)));
    }
    for (; i < n; i++) dx[i] = y[i] > 0.0f ? g[i] : 0.0f;
}

int ddpc__nn_relu_fast(const float *x, float *y, size_t n) {
    if (!ddpc__nn_have_skinny()) return 0;
    relu_fwd_avx2(x, y, n);
    return 1;
}

int ddpc__nn_relu_backward_fast(const float *y, const float *g, float *dx, size_t n) {
    if (!ddpc__nn_have_skinny()) return 0;
    relu_bwd_avx2(y, g, dx, n);
    return 1;
}

void ddpc__nn_skinny_forward(const float *x, const float *W, float *y, int B, int K, int N) {
    fwd_n(x, W, y, B, K, N);
}

void ddpc__nn_skinny_backward_w(const float *g, const float *x, float *dW, int B, int K, int N) {
    bwd_n(g, x, dW, B, K, N);
}

#else /* not x86: always sgemm */

int ddpc__nn_have_skinny(void) { return 0; }
int ddpc__nn_relu_fast(const float *x, float *y, size_t n) { return 0; }
int ddpc__nn_relu_backward_fast(const float *y, const float *g, float *dx, size_t n) { return 0; }
void ddpc__nn_adam(const nn_adam_args *a, float *w, const float *g, float *ma, float *va,
                   size_t n) {
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        if (a->decoupled)
            w[i] *= a->decay;
        else if (a->wd != 0.0f)
            gi += a->wd * w[i];
        ma[i] = ma[i] * a->b1 + (1.0f - a->b1) * gi;
        va[i] = va[i] * a->b2 + (1.0f - a->b2) * gi * gi;
        float denom = sqrtf(va[i]) / a->bc2_sqrt + a->eps;
        w[i] -= a->step_size * (ma[i] / denom);
    }
}
void ddpc__nn_sgd_plain(float *w, const float *g, size_t n, float lr, float wd) {
    for (size_t i = 0; i < n; i++) w[i] -= lr * (g[i] + wd * w[i]);
}
void ddpc__nn_skinny_forward(const float *x, const float *W, float *y, int B, int K, int N) {}
void ddpc__nn_skinny_backward_w(const float *g, const float *x, float *dW, int B, int K, int N) {}

#endif
