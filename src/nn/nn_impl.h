/*
 * nn_impl.h — the model's insides, shared by the files of src/nn: the layer
 * record, the model struct, and the layer kernels (layers.c).
 *
 * Internal header (not installed).
 */
#ifndef DDPC_NN_IMPL_H
#define DDPC_NN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "ddpc/nn.h"

typedef enum layer_kind {
    LAYER_LINEAR = 0,
    LAYER_CONV2D,
    LAYER_RELU,
    LAYER_MAXPOOL2D,
    LAYER_FLATTEN,
    LAYER_DROPOUT,
} layer_kind;

/* One layer of the stack. Shapes are per sample; buffers hold the model's cap_batch samples. */
typedef struct nn_layer {
    layer_kind kind;
    int in_c, in_h, in_w;    /* input sample shape (C, H, W); flat inputs are (1, 1, n) */
    int out_c, out_h, out_w; /* output sample shape */
    size_t in_n, out_n;      /* features per sample: in_c*in_h*in_w, out_c*out_h*out_w */

    /* Linear: in_f -> out_f. Conv2d: in_c -> out_c, k x k, stride, pad. Pool: k, stride. */
    int in_f, out_f;
    int k, stride, pad;
    int has_bias;
    int p_weight, p_bias; /* parameter indices, -1 when absent */
    float p;              /* dropout probability */
    int has_params;
    int need_dx; /* 1 when an earlier layer has parameters */

    float *buf;      /* (cap_batch, out_n) owned output buffer; NULL for Flatten */
    float *dbuf;     /* (cap_batch, in_n) owned d loss / d input, when need_dx */
    float *col;      /* Conv2d: (in_c*k*k, B*out_h*out_w) im2col of the whole batch */
    float *dcol;     /* Conv2d: (in_c*k*k, B*out_h*out_w) its gradient, when need_dx */
    float *tmp;      /* Conv2d: (out_c, B*out_h*out_w) output or gradient, channel-major */
    int32_t *argmax; /* MaxPool2d: (cap_batch, out_n) index of the max within the sample */
    float *mask;     /* Dropout: (cap_batch, out_n) 0 or 1/(1-p) */

    const float *in;  /* (B, in_n) input of the last forward (borrowed) */
    const float *out; /* (B, out_n) output of the last forward (buf, or in for Flatten) */
} nn_layer;

struct ddpc_model {
    int in_c, in_h, in_w;    /* input sample shape */
    int cur_c, cur_h, cur_w; /* output shape of the stack so far (while adding layers) */
    int cap_batch;           /* samples the batch buffers hold: 0 until the first forward */
    uint64_t seed;
    ddpc_rng rng; /* dropout masks */

    nn_layer *layers;
    int nlayers, cap_layers;

    ddpc_param *params; /* nparams, registration order */
    int nparams, cap_params;
    float *pblock; /* (numel) all parameters */
    float *gblock; /* (numel) all gradients */
    size_t numel;

    float *out_grad; /* (cap_batch, out_n of the last layer) d loss / d output */
    int built;
    int training;
    int B;         /* batch of the last forward, 0 before any */
    int have_grad; /* out_grad holds a loss's gradient for the last forward */
    int correct;   /* rows the last loss found right */
    ddpc_model_hooks hooks;
    char desc[1024];
    ddpc_layer_timer_fn timer; /* ddpc_model_set_layer_timer, or NULL */
    void *timer_ctx;
    double hook_t0, hook_t1; /* with a timer: the span of this layer's hooks */
};

/* Kernels (layers.c). x (B, in_n), y (B, out_n); g = d loss / d y (B, out_n);
 * dx (B, in_n) or NULL when the input's gradient is not needed. Parameter
 * gradients are added into the model's gradient block; grad_ready fires after
 * them and before dx is computed. */
void ddpc__nn_linear_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B);
void ddpc__nn_linear_backward(ddpc_model *m, nn_layer *L, const float *x, const float *g, float *dx,
                              int B);
void ddpc__nn_conv2d_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B);
void ddpc__nn_conv2d_backward(ddpc_model *m, nn_layer *L, const float *g, float *dx, int B);
void ddpc__nn_relu_forward(const float *x, float *y, size_t n);
void ddpc__nn_relu_backward(const float *y, const float *g, float *dx, size_t n);
void ddpc__nn_maxpool_forward(nn_layer *L, const float *x, float *y, int B);
void ddpc__nn_maxpool_backward(nn_layer *L, const float *g, float *dx, int B);
void ddpc__nn_dropout_forward(ddpc_model *m, nn_layer *L, const float *x, float *y, int B);
void ddpc__nn_dropout_backward(nn_layer *L, const float *g, float *dx, int B);

/* Skinny products (kernels.c), for N <= NN_SKINNY_MAX outputs when
 * ddpc__nn_have_skinny(): y (B, N) += x (B, K) @ W^T with W (N, K); and
 * dW (N, K) += g^T (N, B) @ x (B, K). */
#define NN_SKINNY_MAX 16
int ddpc__nn_have_skinny(void);
void ddpc__nn_skinny_forward(const float *x, const float *W, float *y, int B, int K, int N);
void ddpc__nn_skinny_backward_w(const float *g, const float *x, float *dW, int B, int K, int N);
/* One Adam/AdamW update of n elements (kernels.c), vectorised where the CPU
 * allows, bit-identical to the scalar loop. */
typedef struct nn_adam_args {
    float b1, b2, eps, wd;
    float step_size; /* lr / (1 - b1^t) */
    float bc2_sqrt;  /* sqrt(1 - b2^t) */
    int decoupled;   /* AdamW: w *= decay first, no wd in the gradient */
    float decay;     /* 1 - lr*wd */
} nn_adam_args;
void ddpc__nn_adam(const nn_adam_args *a, float *w, const float *g, float *ma, float *va, size_t n);
/* Vectorised ReLU passes; return 0 (doing nothing) where the CPU lacks AVX2. */
int ddpc__nn_relu_fast(const float *x, float *y, size_t n);
int ddpc__nn_relu_backward_fast(const float *y, const float *g, float *dx, size_t n);
/* w (n) -= lr * (g + wd * w), vectorised where the CPU allows. */
void ddpc__nn_sgd_plain(float *w, const float *g, size_t n, float lr, float wd);

/* Fires the grad_ready hook for parameter index i (i < 0: nothing). */
static inline void ddpc__nn_fire(ddpc_model *m, int i) {
    if (i < 0 || !m->hooks.grad_ready) return;
    if (m->timer && m->hook_t0 == 0) m->hook_t0 = ddpc__now();
    m->hooks.grad_ready(m->hooks.ctx, i);
    if (m->timer) m->hook_t1 = ddpc__now();
}

#endif /* DDPC_NN_IMPL_H */
