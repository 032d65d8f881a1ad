/*
 * nn.h — ddpc's training runtime, the model half: float32 tensors, layers with
 * explicit forward and backward passes, the cross-entropy loss, SGD and
 * Adam/AdamW with PyTorch's exact update rules, PyTorch's default
 * initialisers, a seeded RNG, and checkpoints in the safetensors format.
 *
 * A model is a Sequential stack of layers, given to ddpc_model_create as
 * an array of layer values (ddpc_linear, ddpc_relu, ...). All parameters
 * live in one contiguous float block and all gradients in another with the
 * same layout; each parameter (ddpc_param) is a named view into both, in
 * registration (forward) order, named like PyTorch's state_dict keys
 * ("0.weight", "0.bias", "2.weight", ...: the layer's index in the stack).
 *
 * One training step:
 *
 *     ddpc_optim_zero_grad(opt);                            optimizer.zero_grad()
 *     ddpc_model_forward(m, x, B, NULL);                    x (B, C*H*W)
 *     ddpc_model_loss(m, DDPC_CROSS_ENTROPY, y, &loss);     y (B)
 *     ddpc_model_backward(m);                               grads += d loss / d param
 *     ddpc_optim_step(opt);
 *
 * Gradients accumulate (+=) over backward calls until zero_grad, as in
 * PyTorch. Batch buffers are sized by the first forward (and grow with a
 * larger batch): a step at a batch size already seen allocates nothing.
 *
 * Nothing here is thread-safe on one model; distinct models are independent.
 * Every call returning ddpc_status reports the details of a failure in
 * ddpc_last_error().
 */
#ifndef DDPC_NN_H
#define DDPC_NN_H

#include <stddef.h>
#include <stdint.h>

#include "ddpc/ddpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ RNG */

/* xoshiro256** seeded through splitmix64: the same seed gives the same
 * stream on every platform. Plain struct: copy it to save its state. */
typedef struct ddpc_rng {
    uint64_t s[4];
} ddpc_rng;

DDPC_API void ddpc_rng_seed(ddpc_rng *r, uint64_t seed);
DDPC_API uint64_t ddpc_rng_next(ddpc_rng *r);
/* Uniform float in [0, 1), 24 random bits. */
DDPC_API float ddpc_rng_uniform(ddpc_rng *r);

/* ------------------------------------------------------------- threads */

/* Sets the number of threads OpenBLAS uses for matrix products in this
 * process (n >= 1). Without a call, the first model created chooses:
 * DDPC_THREADS when set, else ddpc_nn_default_threads(LOCAL_WORLD_SIZE). */
DDPC_API void ddpc_nn_set_threads(int n);
/* The number OpenBLAS uses (choosing it as above if nothing has yet). */
DDPC_API int ddpc_nn_threads(void);
/* The CPUs this process may run on divided by ranks_per_node, at least 1. */
DDPC_API int ddpc_nn_default_threads(int ranks_per_node);

/* -------------------------------------------------------------- layers */

typedef enum ddpc_layer_kind {
    DDPC_LAYER_INPUT = 1, /* not a layer: the input sample's shape (c, h, w) */
    DDPC_LAYER_LINEAR,
    DDPC_LAYER_CONV2D,
    DDPC_LAYER_RELU,
    DDPC_LAYER_MAXPOOL2D,
    DDPC_LAYER_FLATTEN,
    DDPC_LAYER_DROPOUT,
} ddpc_layer_kind;

/* A layer's description, a plain value: make one with the calls below
 * (which set PyTorch's defaults) and change a field where needed
 * (e.g. `ddpc_layer l = ddpc_linear(512, 10); l.bias = 0;`). */
typedef struct ddpc_layer {
    ddpc_layer_kind kind;
    int in, out;                 /* Linear: features; Conv2d: channels */
    int kernel, stride, padding; /* Conv2d; MaxPool2d (kernel, stride) */
    int bias;                    /* Linear, Conv2d: 1 (default) adds a bias */
    float p;                     /* Dropout: probability of zeroing */
    int c, h, w;                 /* Input: the sample's shape */
} ddpc_layer;

/* The input sample's shape, as the first entry; needed only when the first
 * layer does not say it (Linear(in, ...) means flat samples of in features). */
DDPC_API ddpc_layer ddpc_input(int c, int h, int w);
/* nn.Linear(in, out): weight (out, in), bias (out). */
DDPC_API ddpc_layer ddpc_linear(int in, int out);
/* nn.Conv2d(in, out, kernel, stride, padding): weight (out, in, k, k), bias (out). */
DDPC_API ddpc_layer ddpc_conv2d(int in, int out, int kernel, int stride, int padding);
DDPC_API ddpc_layer ddpc_relu(void);
/* nn.MaxPool2d(kernel, stride): kernel x kernel windows every stride. */
DDPC_API ddpc_layer ddpc_maxpool2d(int kernel, int stride);
DDPC_API ddpc_layer ddpc_flatten(void);
/* nn.Dropout(p): zeroes each element with probability p in train mode and
 * scales the rest by 1/(1-p); the identity in eval mode. 0 <= p < 1. */
DDPC_API ddpc_layer ddpc_dropout(float p);

/* An array literal of layers and its length, for ddpc_model_create (C only):
 * ddpc_model_create(DDPC_LAYERS(ddpc_linear(784, 10)), NULL, &m). */
#define DDPC_LAYERS(...)                 \
    (const ddpc_layer[]){ __VA_ARGS__ }, \
        (int)(sizeof((const ddpc_layer[]){ __VA_ARGS__ }) / sizeof(ddpc_layer))

/* --------------------------------------------------------------- model */

typedef struct ddpc_model ddpc_model;

/* One parameter: a named view into the model's parameter and gradient blocks. */
typedef struct ddpc_param {
    const char *name; /* "0.weight", like a PyTorch state_dict key */
    float *data;      /* (shape) into the parameter block */
    float *grad;      /* (shape) into the gradient block, same offset */
    size_t numel;     /* elements */
    int ndim;         /* 1..4 */
    int shape[4];     /* Linear weight (out, in); Conv2d weight (oc, ic, kh, kw); bias (out) */
    size_t offset;    /* elements from the start of the blocks */
} ddpc_param;

typedef struct ddpc_model_options {
    uint64_t seed; /* initial parameters and dropout masks; default 0 */
} ddpc_model_options;

DDPC_API ddpc_model_options ddpc_model_options_default(void);

/*
 * nn.Sequential(layers[0], ..., layers[n-1]): shapes are checked along the
 * stack and a mismatch is an error naming the layer. The parameters are
 * initialised as PyTorch does by default: Linear and Conv2d weights by
 * kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
 * biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), layer by layer from o->seed
 * (o NULL = defaults). layers is read only during the call.
 */
DDPC_API ddpc_status ddpc_model_create(const ddpc_layer *layers, int n, const ddpc_model_options *o,
                                       ddpc_model **out);

/* Frees everything. NULL is harmless. */
DDPC_API void ddpc_model_destroy(ddpc_model *m);

DDPC_API int ddpc_model_num_params(const ddpc_model *m);
/* Parameter i (0 <= i < num_params) in registration order; NULL if out of range. */
DDPC_API const ddpc_param *ddpc_model_param(const ddpc_model *m, int i);
/* The index of the parameter called name, or -1. */
DDPC_API int ddpc_model_find_param(const ddpc_model *m, const char *name);
/* All parameters, one contiguous block of *numel floats. */
DDPC_API float *ddpc_model_param_block(ddpc_model *m, size_t *numel);
/* All gradients, same layout. */
DDPC_API float *ddpc_model_grad_block(ddpc_model *m, size_t *numel);

/* Sizes: input features per sample (c*h*w), output features per sample. */
DDPC_API size_t ddpc_model_in_features(const ddpc_model *m);
DDPC_API size_t ddpc_model_out_features(const ddpc_model *m);
/* A one-line description ("Flatten -> Linear(784, 10)"; 7850 params). */
DDPC_API const char *ddpc_model_describe(const ddpc_model *m);

/* train = 1: dropout active (the default); 0: eval mode. */
DDPC_API void ddpc_model_train(ddpc_model *m, int train);
DDPC_API int ddpc_model_is_training(const ddpc_model *m);

/* Sets every gradient to 0. */
DDPC_API void ddpc_model_zero_grad(ddpc_model *m);

/* Runs the stack on x (B, in_features), B >= 1, borrowed until the next
 * backward. The batch buffers are sized on the first forward and grow when
 * a larger batch comes. *out (may be NULL) (B, out_features) is owned by the
 * model and valid until the next forward. */
DDPC_API ddpc_status ddpc_model_forward(ddpc_model *m, const float *x, int B, const float **out);

typedef enum ddpc_loss {
    DDPC_CROSS_ENTROPY = 0, /* nn.CrossEntropyLoss(): targets are class indices */
} ddpc_loss;

/* criterion(output, targets) on the last forward's output (B rows):
 * *loss (may be NULL) gets the loss, and d loss / d output is kept for
 * ddpc_model_backward. targets (B) are in [0, out_features), else an error
 * naming the first bad one. */
DDPC_API ddpc_status ddpc_model_loss(ddpc_model *m, ddpc_loss criterion, const int32_t *targets,
                                     float *loss);
/* Rows of the last ddpc_model_loss whose output's argmax (first maximum)
 * equals the target. */
DDPC_API int ddpc_model_correct(const ddpc_model *m);

/* For a loss of the caller's own: the model-owned (B, out_features) buffer
 * of the last forward, to be filled with d loss / d output before
 * ddpc_model_backward. */
DDPC_API float *ddpc_model_output_grad(ddpc_model *m);

/* loss.backward(): back-propagates the gradient of the last loss (or of
 * ddpc_model_output_grad) through the last forward, adding each
 * parameter's gradient into the gradient block, then runs the hooks (under
 * DDP: backward returns with the gradients averaged over ranks). An error
 * without a loss since the last forward. */
DDPC_API ddpc_status ddpc_model_backward(ddpc_model *m);

/* Callbacks of backward (DDP installs its own; one set per model). */
typedef struct ddpc_model_hooks {
    /* parameter param_index's gradient is final: in reverse layer order
     * (within a layer: bias, then weight); may be NULL */
    void (*grad_ready)(void *ctx, int param_index);
    /* backward has ended (as autograd's final callback); its status is
     * backward's; may be NULL */
    ddpc_status (*backward_end)(void *ctx);
    void *ctx;
} ddpc_model_hooks;

/* Installs *h (NULL removes the hooks). */
DDPC_API void ddpc_model_set_hooks(ddpc_model *m, const ddpc_model_hooks *h);
/* The hooks installed now (all NULL when none), e.g. to wrap them. */
DDPC_API ddpc_model_hooks ddpc_model_hooks_of(const ddpc_model *m);

/* One layer's forward or backward as it ran, for a timeline (ddpc-train
 * --trace). Times are seconds on CLOCK_MONOTONIC. hook_t0..hook_t1 is the
 * span the layer's grad_ready hooks took within t0..t1 (both 0 when none
 * fired): DDP's work, not the layer's own. */
typedef struct ddpc_layer_event {
    int layer;        /* index in the stack, input layer excluded */
    const char *kind; /* "linear", "conv2d", "relu", "maxpool2d", "flatten", "dropout" */
    int backward;     /* 0: forward */
    double t0, t1;
    double hook_t0, hook_t1;
} ddpc_layer_event;
typedef void (*ddpc_layer_timer_fn)(void *ctx, const ddpc_layer_event *ev);
/* Calls fn after each layer's forward and backward (NULL: no more; the
 * default, which costs nothing). */
DDPC_API void ddpc_model_set_layer_timer(ddpc_model *m, ddpc_layer_timer_fn fn, void *ctx);

/* The dropout RNG's state, for checkpoints. */
DDPC_API ddpc_rng *ddpc_model_rng(ddpc_model *m);

/* ---------------------------------------------------------------- loss */

/*
 * The kernel of DDPC_CROSS_ENTROPY, for callers holding logits of their own:
 * CrossEntropyLoss with mean reduction: log-softmax of logits (B, K)
 * (numerically stable: the row maximum is subtracted first), then the mean
 * over the batch of -log p[label]. labels (B) in [0, K), else an error naming
 * the first bad one. When dlogits (B, K) is not NULL it receives
 * d loss / d logits = (softmax - onehot) / B. *loss (may be NULL) gets the
 * mean loss; *correct (may be NULL) the number of rows whose argmax (first
 * maximum) equals the label.
 */
DDPC_API ddpc_status ddpc_cross_entropy(const float *logits, const int32_t *labels, int B, int K,
                                        float *dlogits, float *loss, int *correct);

/* ----------------------------------------------------------- optimizer */

typedef enum ddpc_optim_kind {
    DDPC_OPTIM_SGD = 0,
    DDPC_OPTIM_ADAM,
    DDPC_OPTIM_ADAMW,
} ddpc_optim_kind;

typedef struct ddpc_optim_options {
    ddpc_optim_kind kind;
    float lr;           /* SGD 0.01 (ddpc's default; torch requires one), Adam 1e-3 */
    float weight_decay; /* 0; AdamW 0.01 */
    /* SGD */
    float momentum;  /* 0 */
    float dampening; /* 0 */
    int nesterov;    /* 0; needs momentum > 0 and dampening 0 */
    /* Adam, AdamW */
    float beta1, beta2; /* 0.9, 0.999 */
    float eps;          /* 1e-8 */
} ddpc_optim_options;

/* PyTorch's defaults for kind. */
DDPC_API ddpc_optim_options ddpc_optim_options_default(ddpc_optim_kind kind);
/* "sgd", "adam", "adamw"; an unknown name is an error naming it. */
DDPC_API ddpc_status ddpc_optim_kind_parse(const char *s, ddpc_optim_kind *out);
DDPC_API const char *ddpc_optim_kind_name(ddpc_optim_kind k);

typedef struct ddpc_optim ddpc_optim;

/* An optimizer over all of m's parameters (m borrowed; it must outlive the
 * optimizer). Options out of range are an error naming the option. */
DDPC_API ddpc_status ddpc_optim_create(ddpc_model *m, const ddpc_optim_options *o,
                                       ddpc_optim **out);
/* NULL is harmless. */
DDPC_API void ddpc_optim_destroy(ddpc_optim *o);
/* optimizer.zero_grad(): sets the gradients of its model's parameters to 0. */
DDPC_API void ddpc_optim_zero_grad(ddpc_optim *o);

/*
 * One update of every parameter from its gradient, with torch.optim's rules:
 * SGD:   g = grad + wd*p; buf = g on the first step, else momentum*buf +
 *        (1-dampening)*g; g = nesterov ? g + momentum*buf : buf; p -= lr*g.
 * Adam:  g = grad + wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
 *        p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 * AdamW: p *= 1 - lr*wd, then Adam without the wd term.
 */
DDPC_API ddpc_status ddpc_optim_step(ddpc_optim *o);
DDPC_API void ddpc_optim_set_lr(ddpc_optim *o, float lr);
DDPC_API const ddpc_optim_options *ddpc_optim_options_of(const ddpc_optim *o);
/* Steps taken so far (restored by a checkpoint). */
DDPC_API uint64_t ddpc_optim_steps(const ddpc_optim *o);

/* Optimizer state, for checkpoints: nstate blocks of the model's parameter
 * layout (SGD with momentum: 1 "momentum"; Adam/AdamW: "exp_avg",
 * "exp_avg_sq"; SGD without momentum: 0). Block j is ddpc_optim_state(o, j,
 * &name); it is meaningful only once steps > 0. */
DDPC_API int ddpc_optim_num_state(const ddpc_optim *o);
DDPC_API float *ddpc_optim_state(ddpc_optim *o, int j, const char **name);
/* Used by checkpoint loading: sets the step count (the state is taken as
 * initialised when steps > 0). */
DDPC_API void ddpc_optim_set_steps(ddpc_optim *o, uint64_t steps);

/* --------------------------------------------------------- checkpoints */

/*
 * Checkpoints are safetensors files: an 8-byte little-endian header length
 * N, N bytes of JSON header (padded with spaces to a multiple of 8)
 * {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
 *  "__metadata__": {"key": "value", ...}}, then the raw little-endian data.
 * Tensors: the model's parameters under their names; the optimizer's state
 * as "optim.<param>.<state>" (e.g. "optim.0.weight.momentum"). Metadata:
 * "format" "ddpc", "epoch", "step", "optim" (kind), "optim.steps",
 * "rng" (the dropout RNG), "metrics_bytes" (when metrics_kept).
 * PyTorch reads the weights with safetensors.torch.load_file, or with json,
 * struct and torch.frombuffer where safetensors is not installed.
 */
typedef struct ddpc_ckpt_meta {
    uint64_t epoch; /* epochs completed */
    uint64_t step;  /* optimizer steps completed (trainer's count) */
    /* metrics_kept: the trainer keeps a metrics log, whose first
     * metrics_bytes bytes hold this checkpoint's epochs (ddpc-train cuts the
     * log back to them when a restart resumes here, so each epoch is
     * logged once) */
    uint64_t metrics_bytes;
    int metrics_kept;
    /* the trainer's own state, a string saved under __metadata__ "trainer"
     * and read back ("" when none; ddpc-train keeps the position within an
     * epoch there) */
    char trainer[256];
} ddpc_ckpt_meta;

/* Writes path atomically (a temporary file in the same directory, fsync,
 * rename). optim may be NULL (weights only). */
DDPC_API ddpc_status ddpc_checkpoint_save(const char *path, const ddpc_model *m,
                                          const ddpc_optim *optim, const ddpc_ckpt_meta *meta);

/* A copy of what ddpc_checkpoint_save(m, optim, meta) would write, taken
 * in one memcpy per block, so that another thread can write it while
 * training changes the model (m must outlive it: its names and shapes are
 * read). _write writes it atomically as ddpc_checkpoint_save does. */
typedef struct ddpc_ckpt_snapshot ddpc_ckpt_snapshot;
DDPC_API ddpc_status ddpc_checkpoint_snapshot(const ddpc_model *m, const ddpc_optim *optim,
                                              const ddpc_ckpt_meta *meta, ddpc_ckpt_snapshot **out);
DDPC_API ddpc_status ddpc_checkpoint_snapshot_write(const ddpc_ckpt_snapshot *sn, const char *path);
DDPC_API void ddpc_checkpoint_snapshot_destroy(ddpc_ckpt_snapshot *sn); /* NULL harmless */

/* Reads path into m (and optim's state, when optim is not NULL) and *meta
 * (may be NULL). Validates everything before changing anything: a malformed
 * file is DDPC_ERR_IO naming what is wrong; a file whose tensors do not match
 * the model (missing, extra, other dtype or shape, another optimizer kind) is
 * DDPC_ERR_MISMATCH naming the first mismatch. */
DDPC_API ddpc_status ddpc_checkpoint_load(const char *path, ddpc_model *m, ddpc_optim *optim,
                                          ddpc_ckpt_meta *meta);

#ifdef __cplusplus
}
#endif
#endif /* DDPC_NN_H */
