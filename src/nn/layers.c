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
void nn_linear_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int in = L->in_f, out = L->out_f;
    int skinny = out <= NN_SKINNY_MAX && nn_have_skinny();
    float beta = 0.0f;
    if (L->has_bias) {
        const float *b = m->params[L->p_bias].data;
        for (int r = 0; r < B; r++) memcpy(y + (size_t)r * out, b, (size_t)out * sizeof(float));
        beta = 1.0f;
    } else if (skinny) {
        memset(y, 0, (size_t)B * out * sizeof(float));
    }
    if (skinny)
        nn_skinny_forward(x, W->data, y, B, in, out);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, out, in, 1.0f, x, in, W->data, in,
                    beta, y, out);
}

/*
 * dW (out, in) += g^T (out, B) @ x (B, in); db (out) += column sums of g;
 * then dx (B, in) = g (B, out) @ W (out, in) when dx is wanted.
 */
void nn_linear_backward(ddpc_model *m, nn_layer *L, const float *x, const float *g, float *dx,
                        int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int in = L->in_f, out = L->out_f;
    if (out <= NN_SKINNY_MAX && nn_have_skinny())
        nn_skinny_backward_w(g, x, W->grad, B, in, out);
    else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, B, 1.0f, g, out, x, in, 1.0f,
                    W->grad, in);
    if (L->has_bias) {
        float *db = m->params[L->p_bias].grad;
        for (int r = 0; r < B; r++) {
            const float *gr = g + (size_t)r * out;
            for (int j = 0; j < out; j++) db[j] += gr[j];
        }
        nn_fire(m, L->p_bias);
    }
    nn_fire(m, L->p_weight);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, in, out, 1.0f, g, out, W->data,
                    in, 0.0f, dx, in);
}

/* ------------------------------------------------------------ Conv2d */

/* col (C*k*k, OH*OW) from one sample x (C, H, W); out-of-image taps are 0.
 * Row (c, ki, kj) of col, column (oh, ow) holds x[c, oh*s-p+ki, ow*s-p+kj]. */
static void im2col(const float *x, int C, int H, int W, int k, int s, int p, int OH, int OW,
                   float *col) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((size_t)(c * k + ki) * k + kj) * OH * OW;
                for (int oh = 0; oh < OH; oh++) {
                    int ih = oh * s - p + ki;
                    float *dst = row + (size_t)oh * OW;
                    if (ih < 0 || ih >= H) {
                        memset(dst, 0, (size_t)OW * sizeof(float));
                        continue;
                    }
                    const float *src = x + ((size_t)c * H + ih) * W;
                    for (int ow = 0; ow < OW; ow++) {
                        int iw = ow * s - p + kj;
                        dst[ow] = (iw >= 0 && iw < W) ? src[iw] : 0.0f;
                    }
                }
            }
}

/* The adjoint of im2col: dx (C, H, W) += scatter of dcol. */
static void col2im(const float *dcol, int C, int H, int W, int k, int s, int p, int OH, int OW,
                   float *dx) {
    for (int c = 0; c < C; c++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *row = dcol + ((size_t)(c * k + ki) * k + kj) * OH * OW;
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
 * Per sample b: col_b = im2col(x_b) (C*k*k, OH*OW), kept for backward;
 * y_b (OC, OH*OW) = W (OC, C*k*k) @ col_b + b.
 */
void nn_conv2d_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int OC = L->out_c, ohw = L->out_h * L->out_w, ckk = L->in_c * L->k * L->k;
    for (int b = 0; b < B; b++) {
        float *col = L->col + (size_t)b * ckk * ohw;
        float *yb = y + (size_t)b * L->out_n;
        im2col(x + (size_t)b * L->in_n, L->in_c, L->in_h, L->in_w, L->k, L->stride, L->pad,
               L->out_h, L->out_w, col);
        float beta = 0.0f;
        if (L->has_bias) {
            const float *bias = m->params[L->p_bias].data;
            for (int o = 0; o < OC; o++) {
                float *r = yb + (size_t)o * ohw;
                for (int i = 0; i < ohw; i++) r[i] = bias[o];
            }
            beta = 1.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, ohw, ckk, 1.0f, W->data, ckk,
                    col, ohw, beta, yb, ohw);
    }
}

/*
 * dW (OC, C*k*k) += sum_b g_b (OC, OH*OW) @ col_b^T; db += sums of g over
 * batch and positions; then dx_b = col2im(W^T @ g_b) when dx is wanted.
 */
void nn_conv2d_backward(ddpc_model *m, nn_layer *L, const float *g, float *dx, int B) {
    const ddpc_param *W = &m->params[L->p_weight];
    int OC = L->out_c, ohw = L->out_h * L->out_w, ckk = L->in_c * L->k * L->k;
    for (int b = 0; b < B; b++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, OC, ckk, ohw, 1.0f,
                    g + (size_t)b * L->out_n, ohw, L->col + (size_t)b * ckk * ohw, ohw, 1.0f,
                    W->grad, ckk);
    if (L->has_bias) {
        float *db = m->params[L->p_bias].grad;
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OC; o++) {
                const float *r = g + (size_t)b * L->out_n + (size_t)o * ohw;
                float s = 0.0f;
                for (int i = 0; i < ohw; i++) s += r[i];
                db[o] += s;
            }
        nn_fire(m, L->p_bias);
    }
    nn_fire(m, L->p_weight);
    if (!dx) return;
    memset(dx, 0, (size_t)B * L->in_n * sizeof(float));
    for (int b = 0; b < B; b++) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, ohw, OC, 1.0f, W->data, ckk,
                    g + (size_t)b * L->out_n, ohw, 0.0f, L->dcol, ohw);
        col2im(L->dcol, L->in_c, L->in_h, L->in_w, L->k, L->stride, L->pad, L->out_h, L->out_w,
               dx + (size_t)b * L->in_n);
    }
}

/* -------------------------------------------------------------- ReLU */

void nn_relu_forward(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* dx = g where the output was positive, else 0 (PyTorch: gradient 0 at 0). */
void nn_relu_backward(const float *y, const float *g, float *dx, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? g[i] : 0.0f;
}

/* --------------------------------------------------------- MaxPool2d */

/* y[c, oh, ow] = max over the k x k window at (oh*s, ow*s); argmax keeps the
 * index (within the sample) of the first maximum, for backward. */
void nn_maxpool_forward(nn_layer *L, const float *x, float *y, int B) {
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
void nn_maxpool_backward(nn_layer *L, const float *g, float *dx, int B) {
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
void nn_dropout_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B) {
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

void nn_dropout_backward(nn_layer *L, const float *g, float *dx, int B) {
    size_t n = (size_t)B * L->out_n;
    for (size_t i = 0; i < n; i++) dx[i] = g[i] * L->mask[i];
}
