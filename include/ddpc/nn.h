/*
 * nn.h — ddpc's training runtime, the model half: float32 tensors, layers with
 * explicit forward and backward passes, the cross-entropy loss, SGD and
 * Adam/AdamW with PyTorch's exact update rules, PyTorch's default
 * initialisers, a seeded RNG, and checkpoints in the safetensors format.
 *
 * A model is a Sequential stack of layers built with ddpc_model_create, the
 * ddpc_model_add_* calls and ddpc_model_build. After build, all parameters
 * live in one contiguous float block and all gradients in another with the
 * same layout; each parameter (ddpc_param) is a named view into both, in
 * registration (forward) order, named like PyTorch's state_dict keys
 * ("0.weight", "0.bias", "2.weight", ...: the layer's index in the stack).
 *
 * One training step:
 *
 *     ddpc_model_zero_grad(m);
 *     ddpc_model_forward(m, x, B, &logits);            x (B, C*H*W)   logits (B, K)
 *     ddpc_cross_entropy(logits, y, B, K, ddpc_model_output_grad(m), &loss, &correct);
 *     ddpc_model_backward(m, ddpc_model_output_grad(m));  grads += d loss / d param
 *     ...gradients may be synchronised across ranks here...
 *     ddpc_optim_step(opt);
 *
 * Gradients accumulate (+=) over backward calls until zero_grad, as in
 * PyTorch. Buffers are sized for max_batch at build time: no step allocates.
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
typedef struct ddpc_rng { uint64_t s[4]; } ddpc_rng;

void ddpc_rng_seed(ddpc_rng *r, uint64_t seed);
uint64_t ddpc_rng_next(ddpc_rng *r);
/* Uniform float in [0, 1), 24 random bits. */
float ddpc_rng_uniform(ddpc_rng *r);

/* ------------------------------------------------------------- threads */

/* Sets the number of threads OpenBLAS uses for matrix products in this
 * process (n >= 1): 1 per rank when several ranks share a node. */
void ddpc_nn_set_threads(int n);
/* The number OpenBLAS uses now. */
int ddpc_nn_threads(void);
/* The CPUs this process may run on divided by ranks_per_node, at least 1. */
int ddpc_nn_default_threads(int ranks_per_node);

/* --------------------------------------------------------------- model */

typedef struct ddpc_model ddpc_model;

/* One parameter: a named view into the model's parameter and gradient blocks. */
typedef struct ddpc_param {
    const char *name;  /* "0.weight", like a PyTorch state_dict key */
    float *data;       /* (shape) into the parameter block */
    float *grad;       /* (shape) into the gradient block, same offset */
    size_t numel;      /* elements */
    int ndim;          /* 1..4 */
    int shape[4];      /* Linear weight (out, in); Conv2d weight (oc, ic, kh, kw); bias (out) */
    size_t offset;     /* elements from the start of the blocks */
} ddpc_param;

/* Fired during backward as each parameter's gradient becomes final, in
 * reverse layer order (within a layer: bias, then weight). */
typedef void (*ddpc_grad_ready_fn)(void *ctx, int param_index);

/* A model whose input is one sample of shape (c, h, w) (use (1, 1, n) for
 * flat vectors), that takes batches of at most max_batch samples; seed fixes
 * the initial parameters and the dropout masks. */
ddpc_status ddpc_model_create(int c, int h, int w, int max_batch, uint64_t seed,
                              ddpc_model **out);

/* Layers, appended in forward order; shapes are checked against the running
 * output shape of the stack and a mismatch is an error naming the layer. */
ddpc_status ddpc_model_add_linear(ddpc_model *m, int in_features, int out_features, int bias);
ddpc_status ddpc_model_add_conv2d(ddpc_model *m, int in_channels, int out_channels,
                                  int kernel, int stride, int padding, int bias);
ddpc_status ddpc_model_add_relu(ddpc_model *m);
/* kernel x kernel windows every stride (PyTorch's default stride = kernel). */
ddpc_status ddpc_model_add_maxpool2d(ddpc_model *m, int kernel, int stride);
ddpc_status ddpc_model_add_flatten(ddpc_model *m);
/* Zeroes each element with probability p in train mode and scales the rest
 * by 1/(1-p); the identity in eval mode. 0 <= p < 1. */
ddpc_status ddpc_model_add_dropout(ddpc_model *m, float p);

/* Allocates the blocks and the batch buffers and initialises the parameters
 * as PyTorch does by default: Linear and Conv2d weights by
 * kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and
 * biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)). No layer may be added after. */
ddpc_status ddpc_model_build(ddpc_model *m);

/* The models of ddpc-train, built: "linear" Flatten+Linear(784, 10);
 * "mlp" Flatten, 784-512-512-10 with ReLU; "cnn" Conv(1,16,3,pad 1), ReLU,
 * MaxPool 2, Conv(16,32,3,pad 1), ReLU, MaxPool 2, Flatten, Linear(1568,128),
 * ReLU, Linear(128,10).
 * Input (1, 28, 28), classes 10. An unknown name is an error naming it. */
ddpc_status ddpc_model_preset(const char *name, int max_batch, uint64_t seed, ddpc_model **out);

/* Frees everything. NULL is harmless. */
void ddpc_model_free(ddpc_model *m);

int ddpc_model_num_params(const ddpc_model *m);
/* Parameter i (0 <= i < num_params) in registration order; NULL if out of range. */
const ddpc_param *ddpc_model_param(const ddpc_model *m, int i);
/* The index of the parameter called name, or -1. */
int ddpc_model_find_param(const ddpc_model *m, const char *name);
/* All parameters, one contiguous block of *numel floats. */
float *ddpc_model_param_block(ddpc_model *m, size_t *numel);
/* All gradients, same layout. */
float *ddpc_model_grad_block(ddpc_model *m, size_t *numel);
void ddpc_model_set_grad_hook(ddpc_model *m, ddpc_grad_ready_fn fn, void *ctx);

/* Sizes: input features per sample (c*h*w), output features per sample. */
size_t ddpc_model_in_features(const ddpc_model *m);
size_t ddpc_model_out_features(const ddpc_model *m);
int ddpc_model_max_batch(const ddpc_model *m);
/* A one-line description ("Flatten -> Linear(784, 10)"; 7850 params). */
const char *ddpc_model_describe(const ddpc_model *m);

/* train = 1: dropout active (the default); 0: eval mode. */
void ddpc_model_train(ddpc_model *m, int train);
int ddpc_model_is_training(const ddpc_model *m);

/* Sets every gradient to 0. */
void ddpc_model_zero_grad(ddpc_model *m);

/* Runs the stack on x (B, in_features), 1 <= B <= max_batch, borrowed until
 * the next backward. *out (B, out_features) is owned by the model and valid
 * until the next forward. */
ddpc_status ddpc_model_forward(ddpc_model *m, const float *x, int B, const float **out);

/* A model-owned buffer (max_batch, out_features) for the loss's gradient. */
float *ddpc_model_output_grad(ddpc_model *m);

/* Back-propagates dout (B, out_features) = d loss / d output of the last
 * forward (B as there), adding each parameter's gradient into the gradient
 * block and firing the grad hook as each becomes final. dout may be
 * ddpc_model_output_grad(m). */
ddpc_status ddpc_model_backward(ddpc_model *m, const float *dout);

/* The dropout RNG's state, for checkpoints. */
ddpc_rng *ddpc_model_rng(ddpc_model *m);

/* ---------------------------------------------------------------- loss */

/*
 * CrossEntropyLoss with mean reduction: log-softmax of logits (B, K)
 * (numerically stable: the row maximum is subtracted first), then the mean
 * over the batch of -log p[label]. labels (B) in [0, K), else an error naming
 * the first bad one. When dlogits (B, K) is not NULL it receives
 * d loss / d logits = (softmax - onehot) / B. *loss (may be NULL) gets the
 * mean loss; *correct (may be NULL) the number of rows whose argmax (first
 * maximum) equals the label.
 */
ddpc_status ddpc_cross_entropy(const float *logits, const int32_t *labels, int B, int K,
                               float *dlogits, float *loss, int *correct);

/* ----------------------------------------------------------- optimizer */

typedef enum ddpc_optim_kind {
    DDPC_OPTIM_SGD = 0,
    DDPC_OPTIM_ADAM,
    DDPC_OPTIM_ADAMW,
} ddpc_optim_kind;

typedef struct ddpc_optim_options {
    ddpc_optim_kind kind;
    float lr;            /* SGD 0.01 (ddpc's default; torch requires one), Adam 1e-3 */
    float weight_decay;  /* 0; AdamW 0.01 */
    /* SGD */
    float momentum;      /* 0 */
    float dampening;     /* 0 */
    int nesterov;        /* 0; needs momentum > 0 and dampening 0 */
    /* Adam, AdamW */
    float beta1, beta2;  /* 0.9, 0.999 */
    float eps;           /* 1e-8 */
} ddpc_optim_options;

/* PyTorch's defaults for kind. */
ddpc_optim_options ddpc_optim_options_default(ddpc_optim_kind kind);
/* "sgd", "adam", "adamw"; an unknown name is an error naming it. */
ddpc_status ddpc_optim_kind_parse(const char *s, ddpc_optim_kind *out);
const char *ddpc_optim_kind_name(ddpc_optim_kind k);

typedef struct ddpc_optim ddpc_optim;

/* An optimizer over all of m's parameters (m borrowed; it must outlive the
 * optimizer). Options out of range are an error naming the option. */
ddpc_status ddpc_optim_create(ddpc_model *m, const ddpc_optim_options *o, ddpc_optim **out);
void ddpc_optim_free(ddpc_optim *o);

/*
 * One update of every parameter from its gradient, with torch.optim's rules:
 * SGD:   g = grad + wd*p; buf = g on the first step, else momentum*buf +
 *        (1-dampening)*g; g = nesterov ? g + momentum*buf : buf; p -= lr*g.
 * Adam:  g = grad + wd*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
 *        p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
 * AdamW: p *= 1 - lr*wd, then Adam without the wd term.
 */
ddpc_status ddpc_optim_step(ddpc_optim *o);
void ddpc_optim_set_lr(ddpc_optim *o, float lr);
const ddpc_optim_options *ddpc_optim_get_options(const ddpc_optim *o);
/* Steps taken so far (restored by a checkpoint). */
uint64_t ddpc_optim_steps(const ddpc_optim *o);

/* Optimizer state, for checkpoints: nstate blocks of the model's parameter
 * layout (SGD with momentum: 1 "momentum"; Adam/AdamW: "exp_avg",
 * "exp_avg_sq"; SGD without momentum: 0). Block j is ddpc_optim_state(o, j,
 * &name); it is meaningful only once steps > 0. */
int ddpc_optim_num_state(const ddpc_optim *o);
float *ddpc_optim_state(ddpc_optim *o, int j, const char **name);
/* Used by checkpoint loading: sets the step count (the state is taken as
 * initialised when steps > 0). */
void ddpc_optim_set_steps(ddpc_optim *o, uint64_t steps);

/* --------------------------------------------------------- checkpoints */

/*
 * Checkpoints are safetensors files: an 8-byte little-endian header length
 * N, N bytes of JSON header (padded with spaces to a multiple of 8)
 * {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]},
 *  "__metadata__": {"key": "value", ...}}, then the raw little-endian data.
 * Tensors: the model's parameters under their names; the optimizer's state
 * as "optim.<param>.<state>" (e.g. "optim.0.weight.momentum"). Metadata:
 * "format" "ddpc", "epoch", "step", "optim" (kind), "optim.steps",
 * "rng" (the dropout RNG), plus the caller's extra pairs.
 * PyTorch reads the weights with safetensors.torch.load_file, or with json,
 * struct and torch.frombuffer where safetensors is not installed.
 */
typedef struct ddpc_ckpt_meta {
    uint64_t epoch;  /* epochs completed */
    uint64_t step;   /* optimizer steps completed (trainer's count) */
} ddpc_ckpt_meta;

/* Writes path atomically (a temporary file in the same directory, fsync,
 * rename). optim may be NULL (weights only). */
ddpc_status ddpc_checkpoint_save(const char *path, const ddpc_model *m, const ddpc_optim *optim,
                                 const ddpc_ckpt_meta *meta);

/* Reads path into m (and optim's state, when optim is not NULL) and *meta
 * (may be NULL). Validates everything before changing anything: a malformed
 * file is DDPC_ERR_IO naming what is wrong; a file whose tensors do not match
 * the model (missing, extra, other dtype or shape, another optimizer kind) is
 * DDPC_ERR_MISMATCH naming the first mismatch. */
ddpc_status ddpc_checkpoint_load(const char *path, ddpc_model *m, ddpc_optim *optim,
                                 ddpc_ckpt_meta *meta);

#ifdef __cplusplus
}
#endif
#endif /* DDPC_NN_H */
