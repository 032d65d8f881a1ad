/*
 * layers.c — forward and backward kernels of the layers: Linear and Conv2d
 * (im2col + sgemm through OpenBLAS), ReLU, MaxPool2d, Dropout.
 *
 * Shapes and buffers are set up by model.c; these functions only compute.
 * Row-major throughout; a batch is (B, features) with a sample's features in
 * PyTorch's (C, H, W) order.
 */
#include <cblas.h>
#include <string.h>

#include "nn/nn_impl.h"

/* ------------------------------------------------------------ Linear */

/*
 * y (B, out) = x (B, in) @ W^T + b, W (out, in), b (out). Few outputs
 * (the classifier) go through the skinny kernels, the rest through sgemm.
 */
void ddpc__nn_linear_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int in = L->in_f, out = L->out_f;
    int skinny = out <= NN_SKINNY_MAX && ddpc__nn_have_skinny();
    float beta = 0.0f;
    if (L->has_bias) {
        const float *b = m->params[L->p_bias].data;
        for (int r = 0; r < B; r++) memcpy(y + (size_t)r * out, b, (size_t)out * sizeof(float));
        beta = 1.0f;
    } else if (skinny) {
        memset(y, 0, (size_t)B * out * sizeof(float));
    }
    if (skinny)
        ddpc__nn_skinny_forward(x, W->data, y, B, in, out);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, x, in, W->data, in,
                    beta, y, out);
}

/*
 * dW (out, in) += g^T (out, B) @ x (B, in); db (out) += column sums of g;
 * then dx (B, in) = g (B, out) @ W (out, in) when dx is wanted.
 */
void ddpc__nn_linear_backward(ddpc_model *m, nn_layer *L, const float *x, const float *g, float *dx,
                              int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int in = L->in_f, out = L->out_f;
    if (out <= NN_SKINNY_MAX && ddpc__nn_have_skinny())
        ddpc__nn_skinny_backward_w(g, x, W->grad, B, in, out);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, g, out, x, in, 1.0f,
                    W->grad, in);
    if (L->has_bias) {
        float *db = m->params[L->p_bias].grad;
        for (int r = 0; r < B; r++) {
            const float *gr = g + (size_t)r * out;
            for (int j = 0; j < out; j++) db[j] += gr[j];
        }
        ddpc__nn_fire(m, L->p_bias);
    }
    ddpc__nn_fire(m, L->p_weight);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, g, out, W->data,
                    in, 0.0f, dx, in);
}

/* ------------------------------------------------------------ Conv2d */

/* Columns [0, OH*OW) of col, row stride ld, from one sample x (C, H, W);
 * out-of-image taps are 0. Row (c, ki, kj), column (oh, ow) holds
 * x[c, oh*s-p+ki, ow*s-p+kj]. */
static void im2col(const float *x, int C, int H, int W, int k, int s, int p, int OH, int OW,
                   float *col, size_t ld) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + (size_t)((c * k + ki) * k + kj) * ld;
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh * s - p + ki;
                    float *dst = row + (size_t)oh * OW;
                    if (ih < 0 || ih >= H) {
                        memset(dst, 0, (size_t)OW * sizeof(float));
                        continue;
                    }
                    const float *src = x + ((size_t)c * H + ih) * W;
                    if (s == 1) {                         /* a shifted copy with zero edges */
                        int lo = p - kj, hi = W + p - kj; /* ow range whose iw is inside */
                        if (lo < 0) lo = 0;
                        if (hi > OW) hi = OW;
                        for (int ow = 0; ow < lo && ow < OW; ow++) dst[ow] = 0.0f;
                        if (hi > lo)
                            memcpy(dst + lo, src + lo - p + kj, (size_t)(hi - lo) * sizeof(float));
                        for (int ow = hi > lo ? hi : lo; ow < OW; ow++) dst[ow] = 0.0f;
                        continue;
                    }
                    for (int ow = 0; ow < OW; ow++) {
                        int iw = ow * s - p + kj;
                        dst[ow] = (iw >= 0 && iw < W) ? src[iw] : 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: dx (C, H, W) += scatter of columns [0, OH*OW) of dcol. */
static void col2im(const float *dcol, size_t ld, int C, int H, int W, int k, int s, int p, int OH,
                   int OW, float *dx) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = dcol + (size_t)((c * k + ki) * k + kj) * ld;
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh * s - p + ki;
                    if (ih < 0 || ih >= H) continue;
                    const float *src = row + (size_t)oh * OW;
                    float *dst = dx + ((size_t)c * H + ih) * W;
                    for (int ow = 0; ow < OW; ow++) {
                        int iw = ow * s - p + kj;
                        if (iw >= 0 && iw < W) dst[iw] += src[ow];
                    }
                }
            }
}

/*
 * The whole batch as one product, so the sgemm is large:
 * 1. col (C*k*k, B*P), P = OH*OW: sample b's im2col in columns [b*P, (b+1)*P)
 * 2. tmp (OC, B*P) = W (OC, C*k*k) @ col
 * 3. y[b, o, :] = tmp[o, b*P : (b+1)*P] + bias[o]
 */
void ddpc__nn_conv2d_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int OC = L->out_c, P = L->out_h * L->out_w, ckk = L->in_c * L->k * L->k;
    size_t ld = (size_t)B * P;
    for (int b = 0; b < B; b++)
        im2col(x + (size_t)b * L->in_n, L->in_c, L->in_h, L->in_w, L->k, L->stride, L->pad,
               L->out_h, L->out_w, L->col + (size_t)b * P, ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, (int)ld, ckk, 1.0f, W->data, ckk,
                L->col, (int)ld, 0.0f, L->tmp, (int)ld);
    const float *bias = L->has_bias ? m->params[L->p_bias].data : NULL;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < OC; o++) {
            const float *src = L->tmp + (size_t)o * ld + (size_t)b * P;
            float *dst = y + (size_t)b * L->out_n + (size_t)o * P;
            float bo = bias ? bias[o] : 0.0f;
            for (int i = 0; i < P; i++) dst[i] = src[i] + bo;
        }
}

/*
 * 1. tmp (OC, B*P) = g rearranged channel-major; db[o] += sum of row o
 * 2. dW (OC, C*k*k) += tmp @ col^T
 * 3. when dx is wanted: dcol = W^T @ tmp, then dx_b = col2im(dcol's block b)
 */
void ddpc__nn_conv2d_backward(ddpc_model *m, nn_layer *L, const float *g, float *dx, int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int OC = L->out_c, P = L->out_h * L->out_w, ckk = L->in_c * L->k * L->k;
    size_t ld = (size_t)B * P;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < OC; o++)
            memcpy(L->tmp + (size_t)o * ld + (size_t)b * P,
                   g + (size_t)b * L->out_n + (size_t)o * P, (size_t)P * sizeof(float));
    if (L->has_bias) {
        float *db = m->params[L->p_bias].grad;
        for (int o = 0; o < OC; o++) {
            const float *r = L->tmp + (size_t)o * ld;
            float s = 0.0f;
            for (size_t i = 0; i < ld; i++) s += r[i];
            db[o] += s;
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, OC, ckk, (int)ld, 1.0f, L->tmp, (int)ld,
                L->col, (int)ld, 1.0f, W->grad, ckk);
    if (L->has_bias) ddpc__nn_fire(m, L->p_bias);
    ddpc__nn_fire(m, L->p_weight);
    if (!dx) return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, (int)ld, OC, 1.0f, W->data, ckk,
                L->tmp, (int)ld, 0.0f, L->dcol, (int)ld);
    memset(dx, 0, (size_t)B * L->in_n * sizeof(float));
    for (int b = 0; b < B; b++)
        col2im(L->dcol + (size_t)b * P, ld, L->in_c, L->in_h, L->in_w, L->k, L->stride, L->pad,
               L->out_h, L->out_w, dx + (size_t)b * L->in_n);
}

/* -------------------------------------------------------------- ReLU */

void ddpc__nn_relu_forward(const float *x, float *y, size_t n) {
    if (ddpc__nn_relu_fast(x, y, n)) return;
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx = g where the output was positive, else 0 (PyTorch: gradient 0 at 0). */
void ddpc__nn_relu_backward(const float *y, const float *g, float *dx, size_t n) {
    if (ddpc__nn_relu_backward_fast(y, g, dx, n)) return;
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? g[i] : 0.0f;
}

/* --------------------------------------------------------- MaxPool2d */

/* y[c, oh, ow] = max over the k x k window at (oh*s, ow*s); argmax keeps the
 * index (within the sample) of the first maximum, for backward. */
void ddpc__nn_maxpool_forward(nn_layer *L, const float *x, float *y, int B) {
    int C = L->in_c, H = L->in_h, W = L->in_w, OH = L->out_h, OW = L->out_w, k = L->k,
        s = L->stride;
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * L->in_n;
        float *yb = y + (size_t)b * L->out_n;
        int32_t *ab = L->argmax + (size_t)b * L->out_n;
        for (int c = 0; c < C; c++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    int best = (c * H + oh * s) * W + ow * s;
                    float bv = xb[best];
                    for (int i = 0; i < k; i++)
                        for (int j = 0; j < k; j++) {
                            int idx = (c * H + oh * s + i) * W + ow * s + j;
                            if (xb[idx] > bv) {
                                bv = xb[idx];
                                best = idx;
                            }
                        }
                    size_t o = ((size_t)c * OH + oh) * OW + ow;
                    yb[o] = bv;
                    ab[o] = best;
                }
    }
}

/* dx = 0, then dx[argmax] += g. */
void ddpc__nn_maxpool_backward(nn_layer *L, const float *g, float *dx, int B) {
    memset(dx, 0, (size_t)B * L->in_n * sizeof(float));
    for (int b = 0; b < B; b++) {
        const float *gb = g + (size_t)b * L->out_n;
        const int32_t *ab = L->argmax + (size_t)b * L->out_n;
        float *db = dx + (size_t)b * L->in_n;
        for (size_t o = 0; o < L->out_n; o++) db[ab[o]] += gb[o];
    }
}

/* ----------------------------------------------------------- Dropout */

/* Train mode: mask = 0 with probability p, else 1/(1-p), from the model's
 * RNG; y = x * mask. Eval mode (or p = 0): y = x, mask = 1. */
void ddpc__nn_dropout_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B) {
    size_t n = (size_t)B * L->out_n;
    if (!m->training || L->p == 0.0f) {
        for (size_t i = 0; i < n; i++) L->mask[i] = 1.0f;
        memcpy(y, x, n * sizeof(float));
        return;
    }
    float scale = 1.0f / (1.0f - L->p);
    for (size_t i = 0; i < n; i++) {
        L->mask[i] = ddpc_rng_uniform(&m->rng) < L->p ? 0.0f : scale;
        y[i] = x[i] * L->mask[i];
    }
}

void ddpc__nn_dropout_backward(nn_layer *L, const float *g, float *dx, int B) {
    size_t n = (size_t)B * L->out_n;
    for (size_t i = 0; i < n; i++) dx[i] = g[i] * L->mask[i];
}
