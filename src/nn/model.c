/*
 * model.c — the Sequential model: the layer values and building the stack
 * from them, the parameter and gradient blocks with their
 * named views, PyTorch's default initialisation, batch buffers sized by the
 * forward passes, the model-bound loss, and the forward and backward passes
 * over a batch with backward's hooks.
 *
 * The kernels are in layers.c; the loss in loss.c; optimizers in optim.c.
 * ddpc-train's named models are its own (tools/train/presets.c).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"

#define MAX_LAYERS 256
#define MAX_BATCH  (1 << 20)

/* Ties the dropout stream to the seed without sharing the init stream. */
#define DROPOUT_SEED_MIX 0x6d2b79f5a1c3e5f7ull

/* An empty stack whose samples have shape (c, h, w). */
static ddpc_status model_new(int c, int h, int w, uint64_t seed, ddpc_model **out) {
    if (c < 1 || h < 1 || w < 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "model input shape (%d, %d, %d) must be positive", c,
                         h, w);
    if ((double)c * h * w > 1e9)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "model input shape (%d, %d, %d) is too large", c, h,
                         w);
    ddpc_model *m = calloc(1, sizeof *m);
    if (!m) return ddpc__err(DDPC_ERR_NOMEM, "model: out of memory");
    m->in_c = m->cur_c = c;
    m->in_h = m->cur_h = h;
    m->in_w = m->cur_w = w;
    m->seed = seed;
    m->training = 1;
    ddpc_rng_seed(&m->rng, seed ^ DROPOUT_SEED_MIX);
    *out = m;
    return DDPC_OK;
}

/* Appends a layer with the running input shape; returns NULL (error raised) if full. */
static nn_layer *push_layer(ddpc_model *m, layer_kind kind, const char *what) {
    if (m->nlayers == MAX_LAYERS) {
        ddpc__err(DDPC_ERR_INVALID_ARG, "%s: more than %d layers", what, MAX_LAYERS);
        return NULL;
    }
    if (m->nlayers == m->cap_layers) {
        int cap = m->cap_layers ? 2 * m->cap_layers : 8;
        nn_layer *l = realloc(m->layers, (size_t)cap * sizeof *l);
        if (!l) {
            ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory", what);
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
        if (!p) return ddpc__err(DDPC_ERR_NOMEM, "model: out of memory");
        m->params = p;
        m->cap_params = cap;
    }
    ddpc_param *p = &m->params[m->nparams];
    memset(p, 0, sizeof *p);
    char name[32];
    snprintf(name, sizeof name, "%d.%s", layer, suffix);
    p->name = strdup(name);
    if (!p->name) return ddpc__err(DDPC_ERR_NOMEM, "model: out of memory");
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

static ddpc_status add_linear(ddpc_model *m, int in_features, int out_features, int bias) {
    nn_layer *L = push_layer(m, LAYER_LINEAR, "Linear");
    if (!L) return DDPC_ERR_INVALID_ARG;
    int idx = m->nlayers;
    if (in_features < 1 || out_features < 1 || out_features > 1 << 24)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "layer %d Linear(%d, %d): features must be positive",
                         idx, in_features, out_features);
    if (L->in_n != (size_t)in_features)
        return ddpc__err(
            DDPC_ERR_INVALID_ARG,
            "layer %d Linear(%d, %d): its input has %zu features (shape %d x %d x %d)%s", idx,
            in_features, out_features, L->in_n, L->in_c, L->in_h, L->in_w,
            L->in_h > 1 ? "; add a Flatten first?" : "");
    if (L->in_h != 1 || L->in_c != 1)
        return ddpc__err(
            DDPC_ERR_INVALID_ARG,
            "layer %d Linear(%d, %d): input shape %d x %d x %d is not flat; add a Flatten first",
            idx, in_features, out_features, L->in_c, L->in_h, L->in_w);
    L->in_f = in_features;
    L->out_f = out_features;
    L->has_bias = bias != 0;
    L->has_params = 1;
    int wshape[2] = { out_features, in_features };
    DDPC_CHECK(add_param(m, idx, "weight", 2, wshape, &L->p_weight));
    if (L->has_bias) DDPC_CHECK(add_param(m, idx, "bias", 1, &out_features, &L->p_bias));
    commit_layer(m, L, 1, 1, out_features);
    return DDPC_OK;
}

static ddpc_status add_conv2d(ddpc_model *m, int in_channels, int out_channels, int kernel,
                              int stride, int padding, int bias) {
    nn_layer *L = push_layer(m, LAYER_CONV2D, "Conv2d");
    if (!L) return DDPC_ERR_INVALID_ARG;
    int idx = m->nlayers;
    if (in_channels < 1 || out_channels < 1 || kernel < 1 || stride < 1 || padding < 0 ||
        out_channels > 1 << 16 || kernel > 64 || padding > 64)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "layer %d Conv2d(%d, %d, kernel %d, stride %d, padding %d): out of range",
                         idx, in_channels, out_channels, kernel, stride, padding);
    if (L->in_c != in_channels)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "layer %d Conv2d(%d, %d): its input has %d channels (shape %d x %d x %d)",
                         idx, in_channels, out_channels, L->in_c, L->in_c, L->in_h, L->in_w);
    int oh = (L->in_h + 2 * padding - kernel) / stride + 1;
    int ow = (L->in_w + 2 * padding - kernel) / stride + 1;
    if (L->in_h + 2 * padding < kernel || L->in_w + 2 * padding < kernel || oh < 1 || ow < 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "layer %d Conv2d: kernel %d does not fit input %d x %d with padding %d",
                         idx, kernel, L->in_h, L->in_w, padding);
    L->k = kernel;
    L->stride = stride;
    L->pad = padding;
    L->has_bias = bias != 0;
    L->has_params = 1;
    int wshape[4] = { out_channels, in_channels, kernel, kernel };
    DDPC_CHECK(add_param(m, idx, "weight", 4, wshape, &L->p_weight));
    if (L->has_bias) DDPC_CHECK(add_param(m, idx, "bias", 1, &out_channels, &L->p_bias));
    commit_layer(m, L, out_channels, oh, ow);
    return DDPC_OK;
}

static ddpc_status add_relu(ddpc_model *m) {
    nn_layer *L = push_layer(m, LAYER_RELU, "ReLU");
    if (!L) return DDPC_ERR_INVALID_ARG;
    commit_layer(m, L, L->in_c, L->in_h, L->in_w);
    return DDPC_OK;
}

static ddpc_status add_maxpool2d(ddpc_model *m, int kernel, int stride) {
    nn_layer *L = push_layer(m, LAYER_MAXPOOL2D, "MaxPool2d");
    if (!L) return DDPC_ERR_INVALID_ARG;
    int idx = m->nlayers;
    if (kernel < 1 || stride < 1 || kernel > L->in_h || kernel > L->in_w)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "layer %d MaxPool2d(kernel %d, stride %d): out of range for input %d x %d",
                         idx, kernel, stride, L->in_h, L->in_w);
    L->k = kernel;
    L->stride = stride;
    commit_layer(m, L, L->in_c, (L->in_h - kernel) / stride + 1, (L->in_w - kernel) / stride + 1);
    return DDPC_OK;
}

static ddpc_status add_flatten(ddpc_model *m) {
    nn_layer *L = push_layer(m, LAYER_FLATTEN, "Flatten");
    if (!L) return DDPC_ERR_INVALID_ARG;
    commit_layer(m, L, 1, 1, (int)L->in_n);
    return DDPC_OK;
}

static ddpc_status add_dropout(ddpc_model *m, float p) {
    nn_layer *L = push_layer(m, LAYER_DROPOUT, "Dropout");
    if (!L) return DDPC_ERR_INVALID_ARG;
    if (!(p >= 0.0f && p < 1.0f))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "layer %d Dropout(p=%g): p must be in [0, 1)",
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
        case LAYER_LINEAR:
            n = snprintf(m->desc + len, cap - len, "%sLinear(%d, %d)", sep, L->in_f, L->out_f);
            break;
        case LAYER_CONV2D:
            n = snprintf(m->desc + len, cap - len, "%sConv2d(%d, %d, %d, s%d, p%d)", sep, L->in_c,
                         L->out_c, L->k, L->stride, L->pad);
            break;
        case LAYER_RELU: n = snprintf(m->desc + len, cap - len, "%sReLU", sep); break;
        case LAYER_MAXPOOL2D:
            n = snprintf(m->desc + len, cap - len, "%sMaxPool2d(%d, %d)", sep, L->k, L->stride);
            break;
        case LAYER_FLATTEN: n = snprintf(m->desc + len, cap - len, "%sFlatten", sep); break;
        case LAYER_DROPOUT:
            n = snprintf(m->desc + len, cap - len, "%sDropout(%g)", sep, (double)L->p);
            break;
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

/* Allocates the blocks, marks which layers need an input gradient and
 * initialises the parameters: PyTorch's default init, layer by layer in
 * order, weight then bias. */
static ddpc_status build(ddpc_model *m) {
    if (m->nlayers == 0) return ddpc__err(DDPC_ERR_INVALID_ARG, "model: no layers");
    m->pblock = alloc_floats(m->numel);
    m->gblock = alloc_floats(m->numel);
    if (!m->pblock || !m->gblock)
        return ddpc__err(DDPC_ERR_NOMEM, "model: out of memory for %zu params", m->numel);
    memset(m->gblock, 0, m->numel * sizeof(float));
    for (int i = 0; i < m->nparams; i++) {
        m->params[i].data = m->pblock + m->params[i].offset;
        m->params[i].grad = m->gblock + m->params[i].offset;
    }
    int seen_params = 0; /* an input gradient only where an earlier layer has parameters */
    for (int i = 0; i < m->nlayers; i++) {
        m->layers[i].need_dx = seen_params;
        if (m->layers[i].has_params) seen_params = 1;
    }
    ddpc_rng init;
    ddpc_rng_seed(&init, m->seed);
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        if (!L->has_params) continue;
        ddpc_param *W = &m->params[L->p_weight];
        size_t fan_in = W->numel / (size_t)W->shape[0];
        float bound = 1.0f / sqrtf((float)fan_in);
        fill_uniform(&init, W->data, W->numel, bound);
        if (L->p_bias >= 0)
            fill_uniform(&init, m->params[L->p_bias].data, m->params[L->p_bias].numel, bound);
    }
    m->built = 1;
    describe(m);
    DDPC_INFO(NN, "model: %s", m->desc);
    return DDPC_OK;
}

static void free_batch_buffers(ddpc_model *m) {
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        free(L->buf);
        free(L->dbuf);
        free(L->col);
        free(L->dcol);
        free(L->tmp);
        free(L->argmax);
        free(L->mask);
        L->buf = L->dbuf = L->col = L->dcol = L->tmp = L->mask = NULL;
        L->argmax = NULL;
    }
    free(m->out_grad);
    m->out_grad = NULL;
    m->cap_batch = 0;
}

/* Sizes the batch buffers for B samples: done by the first forward, and
 * again (growing) by one with a larger batch. */
static ddpc_status ensure_batch(ddpc_model *m, int B) {
    if (B <= m->cap_batch) return DDPC_OK;
    if (B > MAX_BATCH)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "forward: batch %d is larger than %d", B, MAX_BATCH);
    free_batch_buffers(m);
    size_t n = (size_t)B;
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        if (L->kind != LAYER_FLATTEN) { /* Flatten aliases its input and passes gradients through */
            if (!(L->buf = alloc_floats(n * L->out_n))) goto nomem;
            if (L->need_dx && !(L->dbuf = alloc_floats(n * L->in_n))) goto nomem;
        }
        if (L->kind == LAYER_CONV2D) {
            size_t colsz = (size_t)L->in_c * L->k * L->k * L->out_h * L->out_w;
            if (n * L->out_h * L->out_w > (size_t)INT32_MAX || n * colsz > ((size_t)1 << 40))
                return ddpc__err(DDPC_ERR_INVALID_ARG,
                                 "layer %d Conv2d: batch %d makes its im2col buffer too large", i,
                                 B);
            if (!(L->col = alloc_floats(n * colsz))) goto nomem;
            if (L->need_dx && !(L->dcol = alloc_floats(n * colsz))) goto nomem;
            if (!(L->tmp = alloc_floats(n * L->out_n))) goto nomem;
        }
        if (L->kind == LAYER_MAXPOOL2D && !(L->argmax = malloc(n * L->out_n * sizeof(int32_t))))
            goto nomem;
        if (L->kind == LAYER_DROPOUT && !(L->mask = alloc_floats(n * L->out_n))) goto nomem;
    }
    if (!(m->out_grad = alloc_floats(n * m->layers[m->nlayers - 1].out_n))) goto nomem;
    m->cap_batch = B;
    return DDPC_OK;
nomem:
    free_batch_buffers(m);
    return ddpc__err(DDPC_ERR_NOMEM, "model: out of memory for the buffers of a batch of %d", B);
}

ddpc_model_options ddpc_model_options_default(void) {
    ddpc_model_options o;
    memset(&o, 0, sizeof o);
    return o;
}

ddpc_layer ddpc_input(int c, int h, int w) {
    ddpc_layer l = { .kind = DDPC_LAYER_INPUT, .c = c, .h = h, .w = w };
    return l;
}

ddpc_layer ddpc_linear(int in, int out) {
    ddpc_layer l = { .kind = DDPC_LAYER_LINEAR, .in = in, .out = out, .bias = 1 };
    return l;
}

ddpc_layer ddpc_conv2d(int in, int out, int kernel, int stride, int padding) {
    ddpc_layer l = { .kind = DDPC_LAYER_CONV2D,
                     .in = in,
                     .out = out,
                     .kernel = kernel,
                     .stride = stride,
                     .padding = padding,
                     .bias = 1 };
    return l;
}

ddpc_layer ddpc_relu(void) {
    ddpc_layer l = { .kind = DDPC_LAYER_RELU };
    return l;
}

ddpc_layer ddpc_maxpool2d(int kernel, int stride) {
    ddpc_layer l = { .kind = DDPC_LAYER_MAXPOOL2D, .kernel = kernel, .stride = stride };
    return l;
}

ddpc_layer ddpc_flatten(void) {
    ddpc_layer l = { .kind = DDPC_LAYER_FLATTEN };
    return l;
}

ddpc_layer ddpc_dropout(float p) {
    ddpc_layer l = { .kind = DDPC_LAYER_DROPOUT, .p = p };
    return l;
}

/* Appends one layer value to the stack. */
static ddpc_status add_layer(ddpc_model *m, const ddpc_layer *l, int i) {
    switch (l->kind) {
    case DDPC_LAYER_LINEAR: return add_linear(m, l->in, l->out, l->bias);
    case DDPC_LAYER_CONV2D:
        return add_conv2d(m, l->in, l->out, l->kernel, l->stride, l->padding, l->bias);
    case DDPC_LAYER_RELU: return add_relu(m);
    case DDPC_LAYER_MAXPOOL2D: return add_maxpool2d(m, l->kernel, l->stride);
    case DDPC_LAYER_FLATTEN: return add_flatten(m);
    case DDPC_LAYER_DROPOUT: return add_dropout(m, l->p);
    case DDPC_LAYER_INPUT:
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "model: layers[%d] is an input shape; only layers[0] may be", i);
    }
    return ddpc__err(DDPC_ERR_INVALID_ARG, "model: layers[%d] has unknown kind %d", i,
                     (int)l->kind);
}

/*
 * 1. the input shape: layers[0] when it is ddpc_input, else flat samples of
 *    the first Linear's in features
 * 2. the layers, each checked against the running shape
 * 3. blocks and initial parameters (build)
 */
ddpc_status ddpc_model_create(const ddpc_layer *layers, int n, const ddpc_model_options *o,
                              ddpc_model **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_model_create: out is NULL");
    *out = NULL;
    if (!layers || n < 1) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_model_create: no layers");
    ddpc_model_options def = ddpc_model_options_default();
    if (!o) o = &def;
    int first = 0, c, h, w;
    if (layers[0].kind == DDPC_LAYER_INPUT) {
        c = layers[0].c, h = layers[0].h, w = layers[0].w;
        first = 1;
    } else if (layers[0].kind == DDPC_LAYER_LINEAR) {
        c = 1, h = 1, w = layers[0].in;
    } else {
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_model_create: the first layer does not give "
                                               "the input's shape; put ddpc_input(c, h, w) first");
    }
    ddpc_nn_threads(); /* chooses the BLAS threads if the program has not */
    ddpc_model *m = NULL;
    DDPC_CHECK(model_new(c, h, w, o->seed, &m));
    ddpc_status s = DDPC_OK;
    for (int i = first; s == DDPC_OK && i < n; i++) s = add_layer(m, &layers[i], i);
    if (s == DDPC_OK) s = build(m);
    if (s != DDPC_OK) {
        ddpc_model_destroy(m);
        return s;
    }
    *out = m;
    return DDPC_OK;
}

void ddpc_model_destroy(ddpc_model *m) {
    if (!m) return;
    free_batch_buffers(m);
    for (int i = 0; i < m->nparams; i++) free((char *)m->params[i].name);
    free(m->layers);
    free(m->params);
    free(m->pblock);
    free(m->gblock);
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

void ddpc_model_set_hooks(ddpc_model *m, const ddpc_model_hooks *h) {
    if (!m) return;
    if (h)
        m->hooks = *h;
    else
        memset(&m->hooks, 0, sizeof m->hooks);
}

ddpc_model_hooks ddpc_model_hooks_of(const ddpc_model *m) {
    ddpc_model_hooks h;
    if (m)
        h = m->hooks;
    else
        memset(&h, 0, sizeof h);
    return h;
}

size_t ddpc_model_in_features(const ddpc_model *m) {
    return m ? (size_t)m->in_c * m->in_h * m->in_w : 0;
}

size_t ddpc_model_out_features(const ddpc_model *m) {
    return m && m->nlayers ? m->layers[m->nlayers - 1].out_n : 0;
}

const char *ddpc_model_describe(const ddpc_model *m) { return m ? m->desc : ""; }

void ddpc_model_train(ddpc_model *m, int train) {
    if (m) m->training = train != 0;
}

int ddpc_model_is_training(const ddpc_model *m) { return m ? m->training : 0; }

void ddpc_model_zero_grad(ddpc_model *m) {
    if (m && m->gblock) memset(m->gblock, 0, m->numel * sizeof(float));
}

float *ddpc_model_output_grad(ddpc_model *m) {
    if (!m || !m->B) return NULL;
    m->have_grad = 1; /* the caller fills it */
    return m->out_grad;
}

ddpc_status ddpc_model_loss(ddpc_model *m, ddpc_loss criterion, const int32_t *targets,
                            float *loss) {
    if (!m || !m->B)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "loss: no forward pass to take the loss of");
    if (criterion != DDPC_CROSS_ENTROPY)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "loss: unknown criterion %d", (int)criterion);
    size_t K = m->layers[m->nlayers - 1].out_n;
    if (K > INT32_MAX) return ddpc__err(DDPC_ERR_INVALID_ARG, "loss: %zu classes are too many", K);
    m->have_grad = 0;
    DDPC_CHECK(ddpc_cross_entropy(m->layers[m->nlayers - 1].out, targets, m->B, (int)K, m->out_grad,
                                  loss, &m->correct));
    m->have_grad = 1;
    return DDPC_OK;
}

int ddpc_model_correct(const ddpc_model *m) { return m ? m->correct : 0; }

ddpc_rng *ddpc_model_rng(ddpc_model *m) { return m ? &m->rng : NULL; }

void ddpc_model_set_layer_timer(ddpc_model *m, ddpc_layer_timer_fn fn, void *ctx) {
    if (!m) return;
    m->timer = fn;
    m->timer_ctx = ctx;
}

static const char *layer_kind_name(layer_kind k) {
    switch (k) {
    case LAYER_LINEAR: return "linear";
    case LAYER_CONV2D: return "conv2d";
    case LAYER_RELU: return "relu";
    case LAYER_MAXPOOL2D: return "maxpool2d";
    case LAYER_FLATTEN: return "flatten";
    case LAYER_DROPOUT: return "dropout";
    }
    return "?";
}

/* Tells the layer timer that layer i ran from t0 until now. */
static void timed(ddpc_model *m, int i, int backward, double t0) {
    ddpc_layer_event ev = {
        i, layer_kind_name(m->layers[i].kind), backward, t0, ddpc__now(), m->hook_t0, m->hook_t1
    };
    m->hook_t0 = m->hook_t1 = 0;
    m->timer(m->timer_ctx, &ev);
}

/*
 * Runs each layer on the previous one's output; remembers each layer's
 * input and output for backward.
 */
ddpc_status ddpc_model_forward(ddpc_model *m, const float *x, int B, const float **out) {
    if (!m || !m->built) return ddpc__err(DDPC_ERR_INVALID_ARG, "forward: model is NULL");
    if (!x) return ddpc__err(DDPC_ERR_INVALID_ARG, "forward: x is NULL");
    if (B < 1) return ddpc__err(DDPC_ERR_INVALID_ARG, "forward: batch %d must be at least 1", B);
    m->B = 0;
    m->have_grad = 0;
    DDPC_CHECK(ensure_batch(m, B));
    const float *cur = x;
    for (int i = 0; i < m->nlayers; i++) {
        nn_layer *L = &m->layers[i];
        double t0 = m->timer ? ddpc__now() : 0;
        L->in = cur;
        switch (L->kind) {
        case LAYER_LINEAR: ddpc__nn_linear_forward(m, L, cur, L->buf, B); break;
        case LAYER_CONV2D: ddpc__nn_conv2d_forward(m, L, cur, L->buf, B); break;
        case LAYER_RELU: ddpc__nn_relu_forward(cur, L->buf, (size_t)B * L->out_n); break;
        case LAYER_MAXPOOL2D: ddpc__nn_maxpool_forward(L, cur, L->buf, B); break;
        case LAYER_DROPOUT: ddpc__nn_dropout_forward(m, L, cur, L->buf, B); break;
        case LAYER_FLATTEN: break;
        }
        L->out = L->kind == LAYER_FLATTEN ? cur : L->buf;
        cur = L->out;
        if (m->timer) timed(m, i, 0, t0);
    }
    m->B = B;
    if (out) *out = cur;
    return DDPC_OK;
}

/*
 * From the last layer to the first: parameter gradients are added into the
 * gradient block (grad_ready fires for each), and the input gradient is
 * computed only where an earlier layer has parameters to receive it; then
 * backward_end runs.
 */
ddpc_status ddpc_model_backward(ddpc_model *m) {
    if (!m || !m->built) return ddpc__err(DDPC_ERR_INVALID_ARG, "backward: model is NULL");
    if (m->B == 0)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "backward: no forward pass to go back through");
    if (!m->have_grad)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "backward: no loss since the last forward (ddpc_model_loss)");
    m->have_grad = 0;
    int B = m->B;
    const float *g = m->out_grad;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        nn_layer *L = &m->layers[i];
        if (!L->need_dx && !L->has_params) break; /* nothing below needs a gradient */
        float *dx = L->need_dx ? L->dbuf : NULL;
        double t0 = m->timer ? ddpc__now() : 0;
        switch (L->kind) {
        case LAYER_LINEAR: ddpc__nn_linear_backward(m, L, L->in, g, dx, B); break;
        case LAYER_CONV2D: ddpc__nn_conv2d_backward(m, L, g, dx, B); break;
        case LAYER_RELU: ddpc__nn_relu_backward(L->out, g, dx, (size_t)B * L->out_n); break;
        case LAYER_MAXPOOL2D: ddpc__nn_maxpool_backward(L, g, dx, B); break;
        case LAYER_DROPOUT: ddpc__nn_dropout_backward(L, g, dx, B); break;
        case LAYER_FLATTEN: dx = (float *)g; break; /* same memory, another shape */
        }
        if (m->timer) timed(m, i, 1, t0);
        if (!dx) break;
        g = dx;
    }
    return m->hooks.backward_end ? m->hooks.backward_end(m->hooks.ctx) : DDPC_OK;
}
