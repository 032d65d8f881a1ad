/*
 * model.c — the Sequential model: building the stack, the parameter and
 * gradient blocks with their named views, PyTorch's default initialisation,
 * and the forward and backward passes over a batch.
 *
 * The kernels are in layers.c; the loss in loss.c; optimizers in optim.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"

#define MAX_LAYERS 256

/* Ties the dropout stream to the seed without sharing the init stream. */
#define DROPOUT_SEED_MIX 0x6d2b79f5a1c3e5f7ull

ddpc_status ddpc_model_create(int c, int h, int w, int max_batch, uint64_t seed,
                              ddpc_model **out) {
    if (!out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_model_create: out is NULL");
    *out = NULL;
    if (c < 1 || h < 1 || w < 1)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "model input shape (%d, %d, %d) must be positive", c,
                        h, w);
    if ((double)c * h * w > 1e9)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "model input shape (%d, %d, %d) is too large", c, h, w);
    if (max_batch < 1 || max_batch > 1 << 20)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "max_batch=%d is out of range [1, %d]", max_batch,
                        1 << 20);
    ddpc_model *m = calloc(1, sizeof *m);
    if (!m) return ddpc_err(DDPC_ERR_NOMEM, "model: out of memory");
    m->in_c = m->cur_c = c;
    m->in_h = m->cur_h = h;
    m->in_w = m->cur_w = w;
    m->max_batch = max_batch;
    m->seed = seed;
    m->training = 1;
    ddpc_rng_seed(&m->rng, seed ^ DROPOUT_SEED_MIX);
    *out = m;
    return DDPC_OK;
}

/* Appends a layer with the running input shape; returns NULL (error raised) if full or built. */
static nn_layer *push_layer(ddpc_model *m, layer_kind kind, const char *what) {
    if (!m) {
        ddpc_err(DDPC_ERR_INVALID_ARG, "%s: model is NULL", what);
        return NULL;
    }
    if (m->built) {
        ddpc_err(DDPC_ERR_INVALID_ARG, "%s: the model is already built", what);
        return NULL;
    }
    if (m->nlayers == MAX_LAYERS) {
        ddpc_err(DDPC_ERR_INVALID_ARG, "%s: more than %d layers", what, MAX_LAYERS);
        return NULL;
    }
    if (m->nlayers == m->cap_layers) {
        int cap = m->cap_layers ? 2 * m->cap_layers : 8;
        nn_layer *l = realloc(m->layers, (size_t)cap * sizeof *l);
        if (!l) {
            ddpc_err(DDPC_ERR_NOMEM, "%s: out of memory", what);
            return NULL;
        }
        m->layers = l;
        m->cap_layers = cap;
    }
    nn_layer *L = &m->layers[m->nlayers];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->in_c = m->cur_c;
    L->in_h = m->cur_h;
    L->in_w = m->cur_w;
    L->in_n = (size_t)L->in_c * L->in_h * L->in_w;
    L->p_weight = L->p_bias = -1;
    return L;
}

/* Sets L's output shape, makes it the stack's running shape and commits L. */
static void commit_layer(ddpc_model *m, nn_layer *L, int c, int h, int w) {
    L->out_c = c;
    L->out_h = h;
    L->out_w = w;
    L->out_n = (size_t)c * h * w;
    m->cur_c = c;
    m->cur_h = h;
    m->cur_w = w;
    m->nlayers++;
}

static ddpc_status add_param(ddpc_model *m, int layer, const char *suffix, int ndim,
                             const int *shape, int *index) {
    if (m->nparams == m->cap_params) {
        int cap = m->cap_params ? 2 * m->cap_params : 8;
        ddpc_param *p = realloc(m->params, (size_t)cap * sizeof *p);
        if (!p) return ddpc_err(DDPC_ERR_NOMEM, "model: out of memory");
        m->params = p;
        m->cap_params = cap;
    }
    ddpc_param *p = &m->params[m->nparams];
    memset(p, 0, sizeof *p);
    char name[32];
    snprintf(name, sizeof name, "%d.%s", layer, suffix);
    p->name = strdup(name);
    if (!p->name) return ddpc_err(DDPC_ERR_NOMEM, "model: out of memory");
    p->ndim = ndim;
    p->numel = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= (size_t)shape[i];
    }
    p->offset = m->numel;
    m->numel += p->numel;
    *index = m->nparams++;
    return DDPC_OK;
}

ddpc_status ddpc_model_add_linear(ddpc_model *m, int in_features, int out_features, int bias) {
    nn_layer *L = push_layer(m, LAYER_LINEAR, "Linear");
    if (!L) return DDPC_ERR_INVALID_ARG;
    int idx = m->nlayers;
    if (in_features < 1 || out_features < 1 || out_features > 1 << 24)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "layer %d Linear(%d, %d): features must be positive",
                        idx, in_features, out_features);
    if (L->in_n != (size_t)in_features)
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "layer %d Linear(%d, %d): its input has %zu features (shape %d x %d x %d)%s",
                        idx, in_features, out_features, L->in_n, L->in_c, L->in_h, L->in_w,
                        L->in_h > 1 ? "; add a Flatten first?" : "");
    if (L->in_h != 1 || L->in_c != 1)
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "layer %d Linear(%d, %d): input shape %d x %d x %d is not flat; add a Flatten first",
                        idx, in_features, out_features, L->in_c, L->in_h, L->in_w);
    L->in_f = in_features;
    L->out_f = out_features;
    L->has_bias = bias != 0;
    L->has_params = 1;
    int wshape[2] = {out_features, in_features};
    DDPC_CHECK(add_param(m, idx, "weight", 2, wshape, &L->p_weight));
    if (L->has_bias) DDPC_CHECK(add_param(m, idx, "bias", 1, &out_features, &L->p_bias));
    commit_layer(m, L, 1, 1, out_features);
    return DDPC_OK;
}

ddpc_status ddpc_model_add_conv2d(ddpc_model *m, int in_channels, int out_channels, int kernel,
                                  int stride, int padding, int bias) {
    nn_layer *L = push_layer(m, LAYER_CONV2D, "Conv2d");
    if (!L) return DDPC_ERR_INVALID_ARG;
    int idx = m->nlayers;
    if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 || padding < 0 ||
        out_channels > 1 << 16 || kernel > 64 || padding > 64)
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "layer %d Conv2d(%d, %d, kernel %d, stride %d, padding %d): out of range",
                        idx, in_channels, out_channels, kernel, stride, padding);
    if (L->in_c != in_channels)
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "layer %d Conv2d(%d, %d): its input has %d channels (shape %d x %d x %d)",
                        idx, in_channels, out_channels, L->in_c, L->in_c, L->in_h, L->in_w);
    int oh = (L->in_h + 2 * padding - kernel) / stride + 1;
    int ow = (L->in_w + 2 * padding - kernel) / stride + 1;
    if (L->in_h + 2 * padding < kernel || L->in_w + 2 * padding < kernel || oh < 1 || ow < 1)
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "layer %d Conv2d: kernel %d does not fit input %d x %d with padding %d",
                        idx, kernel, L->in_h, L->in_w, padding);
    L->k = kernel;
    L->stride = stride;
    L->pad = padding;
    L->has_bias = bias != 0;
    L->has_params = 1;
    int wshape[4] = {out_channels, in_channels, kernel, kernel};
    DDPC_CHECK(add_param(m, idx, "weight", 4, wshape, &L->p_weight));
    if (L->has_bias) DDPC_CHECK(add_param(m, idx, "bias", 1, &out_channels, &L->p_bias));
    commit_layer(m, L, out_channels, oh, ow);
    return DDPC_OK;
}

ddpc_status ddpc_model_add_relu(ddpc_model *m) {
    nn_layer *L = push_layer(m, LAYER_RELU, "ReLU");
    if (!L) return DDPC_ERR_INVALID_ARG;
    commit_layer(m, L, L->in_c, L->in_h, L->in_w);
    return DDPC_OK;
}

ddpc_status ddpc_model_add_maxpool2d(ddpc_model *m, int kernel, int stride) {
    nn_layer *L = push_layer(m, LAYER_MAXPOOL2D, "MaxPool2d");
    if (!L) return DDPC_ERR_INVALID_ARG;
    int idx = m->nlayers;
    if (kernel < 1 || stride < 1 || kernel > L->in_h || kernel > L->in_w)
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "layer %d MaxPool2d(kernel %d, stride %d): out of range for input %d x %d",
                        idx, kernel, stride, L->in_h, L->in_w);
    L->k = kernel;
    L->stride = stride;
    commit_layer(m, L, L->in_c, (L->in_h - kernel) / stride + 1, (L->in_w - kernel) / stride + 1);
    return DDPC_OK;
}

ddpc_status ddpc_model_add_flatten(ddpc_model *m) {
    nn_layer *L = push_layer(m, LAYER_FLATTEN, "Flatten");
    if (!L) return DDPC_ERR_INVALID_ARG;
    commit_layer(m, L, 1, 1, (int)L->in_n);
    return DDPC_OK;
}

ddpc_status ddpc_model_add_dropout(ddpc_model *m, float p) {
    nn_layer *L = push_layer(m, LAYER_DROPOUT, "Dropout");
    if (!L) return DDPC_ERR_INVALID_ARG;
    if (!(p >= 0.0f && p < 1.0f))
        return ddpc_err(DDPC_ERR_INVALID_ARG, "layer %d Dropout(p=%g): p must be in [0, 1)",
                        m->nlayers, (double)p);
    L->p = p;
    commit_layer(m, L, L->in_c, L->in_h, L->in_w);
    return DDPC_OK;
}

static void *alloc_floats(size_t n) {
    /* 64-byte aligned, for BLAS and vector loads */
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

static void describe(ddpc_model *m) {
    size_t len = 0, cap = sizeof m->desc;
    m->desc[0] = 0;
    for (int i = 0; i < m->nlayers && len + 1 < cap; i++) {
        nn_layer *L = &m->layers[i];
        const char *sep = i ? " -> " : "";
        int n = 0;
        switch (L->kind) {
        case LAYER_LINEAR: n = snprintf(m->desc + len, cap - len, "%sLinear(%d, %d)", sep, L->in_f, L->out_f); break;
        case LAYER_CONV2D:
            n = snprintf(m->desc + len, cap - len, "%sConv2d(%d, %d, %d, s%d, p%d)", sep, L->in_c,
                         L->out_c, L->k, L->stride, L->pad);
            break;
        case LAYER_RELU: n = snprintf(m->desc + len, cap - len, "%sReLU", sep); break;
        case LAYER_MAXPOOL2D: n = snprintf(m->desc + len, cap - len, "%sMaxPool2d(%d, %d)", sep, L->k, L->stride); break;
        case LAYER_FLATTEN: n = snprintf(m->desc + len, cap - len, "%sFlatten", sep); break;
        case LAYER_DROPOUT: n = snprintf(m->desc + len, cap - len, "%sDropout(%g)", sep, (double)L->p); break;
        }
        if (n < 0) break;
        len += (size_t)n;
    }
    if (len + 1 < cap) snprintf(m->desc + len, cap - len, "; %zu params", m->numel);
}

/* U(-bound, bound) from the init stream. */
static void fill_uniform(ddpc_rng *r, float *p, size_t n, float bound) {
    for (size_t i = 0; i < n; i++) p[i] = (2.0f * ddpc_rng_uniform(r) - 1.0f) * bound;
}

ddpc_status ddpc_model_build(ddpc_model *m) {
    if (!m) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_model_build: model is NULL");
    if (m->built) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_model_build: already built");
    if (m->nlayers == 0) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_model_build: no layers");
    size_t B = (size_t)m->max_batch;
    /* 1. blocks */
    m->pblock = alloc_floats(m->numel);
    m->gblock = alloc_floats(m->numel);
    if (!m->pblock || !m->gblock) return ddpc_err(DDPC_ERR_NOMEM, "model: out of memory for %zu params", m->numel);
    memset(m->gblock, 0, m->numel * sizeof(float));
    for (int i = 0; i < m->nparams; i++) {
        m->params[i].data = m->pblock + m->params[i].offset;
        m->params[i].grad = m->gblock + m->params[i].offset;
    }
    /* 2. batch buffers; an input gradient only where an earlier layer has parameters */
    int seen_params = 0;
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        L->need_dx = seen_params;
        if (L->has_params) seen_params = 1;
        if (L->kind != LAYER_FLATTEN) { /* Flatten aliases its input and passes gradients through */
            if (!(L->buf = alloc_floats(B * L->out_n))) goto nomem;
            if (L->need_dx && !(L->dbuf = alloc_floats(B * L->in_n))) goto nomem;
        }
        if (L->kind == LAYER_CONV2D) {
            if (B * L->out_h * L->out_w > (size_t)INT32_MAX ||
                B * L->in_c * L->k * L->k * L->out_h * L->out_w > ((size_t)1 << 40))
                return ddpc_err(DDPC_ERR_INVALID_ARG, "layer %d Conv2d: max_batch %d makes its im2col buffer too large",
                                i, m->max_batch);
            size_t colsz = (size_t)L->in_c * L->k * L->k * L->out_h * L->out_w;
            if (!(L->col = alloc_floats(B * colsz))) goto nomem;
            if (L->need_dx && !(L->dcol = alloc_floats(B * colsz))) goto nomem;
            if (!(L->tmp = alloc_floats(B * L->out_n))) goto nomem;
        }
        if (L->kind == LAYER_MAXPOOL2D && !(L->argmax = malloc(B * L->out_n * sizeof(int32_t))))
            goto nomem;
        if (L->kind == LAYER_DROPOUT && !(L->mask = alloc_floats(B * L->out_n))) goto nomem;
    }
    if (!(m->out_grad = alloc_floats(B * m->layers[m->nlayers - 1].out_n))) goto nomem;
    /* 3. PyTorch's default init, layer by layer in order: weight, then bias */
    ddpc_rng init;
    ddpc_rng_seed(&init, m->seed);
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        if (!L->has_params) continue;
        ddpc_param *W = &m->params[L->p_weight];
        size_t fan_in = W->numel / (size_t)W->shape[0];
        float bound = 1.0f / sqrtf((float)fan_in);
        fill_uniform(&init, W->data, W->numel, bound);
        if (L->p_bias >= 0) fill_uniform(&init, m->params[L->p_bias].data, m->params[L->p_bias].numel, bound);
    }
    m->built = 1;
    describe(m);
    DDPC_INFO(NN, "model: %s", m->desc);
    return DDPC_OK;
nomem:
    return ddpc_err(DDPC_ERR_NOMEM, "model: out of memory for batch buffers (max_batch %d)", m->max_batch);
}

ddpc_status ddpc_model_preset(const char *name, int max_batch, uint64_t seed, ddpc_model **out) {
    if (!out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_model_preset: out is NULL");
    *out = NULL;
    if (!name) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_model_preset: name is NULL");
    int kind = !strcmp(name, "linear") ? 0 : !strcmp(name, "mlp") ? 1 : !strcmp(name, "cnn") ? 2 : -1;
    if (kind < 0)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "unknown model '%s' (linear, mlp, cnn)", name);
    ddpc_model *m;
    DDPC_CHECK(ddpc_model_create(1, 28, 28, max_batch, seed, &m));
    ddpc_status s = DDPC_OK;
#define ADD(call) do { if (s == DDPC_OK) s = (call); } while (0)
    if (kind == 0) {
        ADD(ddpc_model_add_flatten(m));
        ADD(ddpc_model_add_linear(m, 784, 10, 1));
    } else if (kind == 1) {
        ADD(ddpc_model_add_flatten(m));
        ADD(ddpc_model_add_linear(m, 784, 512, 1));
        ADD(ddpc_model_add_relu(m));
        ADD(ddpc_model_add_linear(m, 512, 512, 1));
        ADD(ddpc_model_add_relu(m));
        ADD(ddpc_model_add_linear(m, 512, 10, 1));
    } else {
        ADD(ddpc_model_add_conv2d(m, 1, 16, 3, 1, 1, 1));
        ADD(ddpc_model_add_relu(m));
        ADD(ddpc_model_add_maxpool2d(m, 2, 2));
        ADD(ddpc_model_add_conv2d(m, 16, 32, 3, 1, 1, 1));
        ADD(ddpc_model_add_relu(m));
        ADD(ddpc_model_add_maxpool2d(m, 2, 2));
        ADD(ddpc_model_add_flatten(m));
        ADD(ddpc_model_add_linear(m, 32 * 7 * 7, 128, 1));
        ADD(ddpc_model_add_relu(m));
        ADD(ddpc_model_add_linear(m, 128, 10, 1));
    }
    ADD(ddpc_model_build(m));
#undef ADD
    if (s != DDPC_OK) {
        ddpc_model_free(m);
        return s;
    }
    *out = m;
    return DDPC_OK;
}

void ddpc_model_free(ddpc_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        free(L->buf);
        free(L->dbuf);
        free(L->col);
        free(L->dcol);
        free(L->tmp);
        free(L->argmax);
        free(L->mask);
    }
    for (int i = 0; i < m->nparams; i++) free((char *)m->params[i].name);
    free(m->layers);
    free(m->params);
    free(m->pblock);
    free(m->gblock);
    free(m->out_grad);
    free(m);
}

int ddpc_model_num_params(const ddpc_model *m) { return m ? m->nparams : 0; }

const ddpc_param *ddpc_model_param(const ddpc_model *m, int i) {
    if (!m || !m->built || i < 0 || i >= m->nparams) return NULL;
    return &m->params[i];
}

int ddpc_model_find_param(const ddpc_model *m, const char *name) {
    if (!m || !name) return -1;
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params[i].name, name)) return i;
    return -1;
}

float *ddpc_model_param_block(ddpc_model *m, size_t *numel) {
    if (numel) *numel = m ? m->numel : 0;
    return m ? m->pblock : NULL;
}

float *ddpc_model_grad_block(ddpc_model *m, size_t *numel) {
    if (numel) *numel = m ? m->numel : 0;
    return m ? m->gblock : NULL;
}

void ddpc_model_set_grad_hook(ddpc_model *m, ddpc_grad_ready_fn fn, void *ctx) {
    if (!m) return;
    m->hook = fn;
    m->hook_ctx = ctx;
}

size_t ddpc_model_in_features(const ddpc_model *m) {
    return m ? (size_t)m->in_c * m->in_h * m->in_w : 0;
}

size_t ddpc_model_out_features(const ddpc_model *m) {
    return m && m->nlayers ? m->layers[m->nlayers - 1].out_n : 0;
}

int ddpc_model_max_batch(const ddpc_model *m) { return m ? m->max_batch : 0; }

const char *ddpc_model_describe(const ddpc_model *m) { return m ? m->desc : ""; }

void ddpc_model_train(ddpc_model *m, int train) {
    if (m) m->training = train != 0;
}

int ddpc_model_is_training(const ddpc_model *m) { return m ? m->training : 0; }

void ddpc_model_zero_grad(ddpc_model *m) {
    if (m && m->gblock) memset(m->gblock, 0, m->numel * sizeof(float));
}

float *ddpc_model_output_grad(ddpc_model *m) { return m ? m->out_grad : NULL; }

ddpc_rng *ddpc_model_rng(ddpc_model *m) { return m ? &m->rng : NULL; }

/*
 * Runs each layer on the previous one's output; remembers each layer's
 * input and output for backward.
 */
ddpc_status ddpc_model_forward(ddpc_model *m, const float *x, int B, const float **out) {
    if (!m || !m->built) return ddpc_err(DDPC_ERR_INVALID_ARG, "forward: model is NULL or not built");
    if (!x || !out) return ddpc_err(DDPC_ERR_INVALID_ARG, "forward: x or out is NULL");
    if (B < 1 || B > m->max_batch)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "forward: batch %d is out of range [1, max_batch %d]", B,
                        m->max_batch);
    const float *cur = x;
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        L->in = cur;
        switch (L->kind) {
        case LAYER_LINEAR: nn_linear_forward(m, L, cur, L->buf, B); break;
        case LAYER_CONV2D: nn_conv2d_forward(m, L, cur, L->buf, B); break;
        case LAYER_RELU: nn_relu_forward(cur, L->buf, (size_t)B * L->out_n); break;
        case LAYER_MAXPOOL2D: nn_maxpool_forward(L, cur, L->buf, B); break;
        case LAYER_DROPOUT: nn_dropout_forward(m, L, cur, L->buf, B); break;
        case LAYER_FLATTEN: break;
        }
        L->out = L->kind == LAYER_FLATTEN ? cur : L->buf;
        cur = L->out;
    }
    m->B = B;
    *out = cur;
    return DDPC_OK;
}

/*
 * From the last layer to the first: parameter gradients are added into the
 * gradient block (the hook fires for each), and the input gradient is
 * computed only where an earlier layer has parameters to receive it.
 */
ddpc_status ddpc_model_backward(ddpc_model *m, const float *dout) {
    if (!m || !m->built) return ddpc_err(DDPC_ERR_INVALID_ARG, "backward: model is NULL or not built");
    if (!dout) return ddpc_err(DDPC_ERR_INVALID_ARG, "backward: dout is NULL");
    if (m->B == 0) return ddpc_err(DDPC_ERR_INVALID_ARG, "backward: no forward pass to go back through");
    int B = m->B;
    const float *g = dout;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        nn_layer *L = &m->layers[i];
        if (!L->need_dx && !L->has_params) break; /* nothing below needs a gradient */
        float *dx = L->need_dx ? L->dbuf : NULL;
        switch (L->kind) {
        case LAYER_LINEAR: nn_linear_backward(m, L, L->in, g, dx, B); break;
        case LAYER_CONV2D: nn_conv2d_backward(m, L, g, dx, B); break;
        case LAYER_RELU: nn_relu_backward(L->out, g, dx, (size_t)B * L->out_n); break;
        case LAYER_MAXPOOL2D: nn_maxpool_backward(L, g, dx, B); break;
        case LAYER_DROPOUT: nn_dropout_backward(L, g, dx, B); break;
        case LAYER_FLATTEN: dx = (float *)g; break; /* same memory, another shape */
        }
        if (!dx) break;
        g = dx;
    }
    return DDPC_OK;
}
