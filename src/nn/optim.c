/*
 * optim.c — SGD (momentum, dampening, nesterov, weight decay) and Adam/AdamW
 * with torch.optim's update rules (PyTorch 1.13, the default for-loop
 * implementation, amsgrad off, maximize off), over the model's blocks.
 *
 * State lives in blocks of the parameter layout, so a checkpoint stores one
 * tensor per parameter and state kind.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"

struct ddpc_optim {
    ddpc_model *m; /* borrowed */
    ddpc_optim_options o;
    uint64_t steps; /* updates done; state is initialised when > 0 */
    int nstate;
    float *state[2]; /* (numel) each: momentum; or exp_avg, exp_avg_sq */
    const char *state_name[2];
};

ddpc_optim_options ddpc_optim_options_default(ddpc_optim_kind kind) {
    ddpc_optim_options o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.lr = kind == DDPC_OPTIM_SGD ? 0.01f : 1e-3f;
    o.weight_decay = kind == DDPC_OPTIM_ADAMW ? 0.01f : 0.0f;
    o.beta1 = 0.9f;
    o.beta2 = 0.999f;
    o.eps = 1e-8f;
    return o;
}

static const char *const kind_names[] = { "sgd", "adam", "adamw" };

ddpc_status ddpc_optim_kind_parse(const char *s, ddpc_optim_kind *out) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, kind_names[i])) {
            *out = (ddpc_optim_kind)i;
            return DDPC_OK;
        }
    return ddpc__err(DDPC_ERR_INVALID_ARG, "unknown optimizer '%s' (sgd, adam, adamw)",
                     s ? s : "(null)");
}

const char *ddpc_optim_kind_name(ddpc_optim_kind k) {
    return (unsigned)k < 3 ? kind_names[k] : "?";
}

ddpc_status ddpc_optim_create(ddpc_model *m, const ddpc_optim_options *o, ddpc_optim **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_optim_create: out is NULL");
    *out = NULL;
    if (!m || !m->built)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: model is NULL or not built");
    if (!o) return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: options are NULL");
    if ((unsigned)o->kind > DDPC_OPTIM_ADAMW)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: kind %d is unknown", (int)o->kind);
    if (!(o->lr >= 0.0f) || !isfinite(o->lr))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: lr=%g must be >= 0", (double)o->lr);
    if (!(o->weight_decay >= 0.0f))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: weight_decay=%g must be >= 0",
                         (double)o->weight_decay);
    if (o->kind == DDPC_OPTIM_SGD) {
        if (!(o->momentum >= 0.0f))
            return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: momentum=%g must be >= 0",
                             (double)o->momentum);
        if (!(o->dampening >= 0.0f && o->dampening <= 1.0f))
            return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: dampening=%g must be in [0, 1]",
                             (double)o->dampening);
        if (o->nesterov && (o->momentum <= 0.0f || o->dampening != 0.0f))
            return ddpc__err(DDPC_ERR_INVALID_ARG,
                             "optimizer: nesterov needs momentum > 0 and dampening 0");
    } else {
        if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f))
            return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: beta1=%g must be in [0, 1)",
                             (double)o->beta1);
        if (!(o->beta2 >= 0.0f && o->beta2 < 1.0f))
            return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: beta2=%g must be in [0, 1)",
                             (double)o->beta2);
        if (!(o->eps >= 0.0f))
            return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer: eps=%g must be >= 0",
                             (double)o->eps);
    }
    ddpc_optim *p = calloc(1, sizeof *p);
    if (!p) return ddpc__err(DDPC_ERR_NOMEM, "optimizer: out of memory");
    p->m = m;
    p->o = *o;
    if (o->kind == DDPC_OPTIM_SGD) {
        if (o->momentum != 0.0f) {
            p->nstate = 1;
            p->state_name[0] = "momentum";
        }
    } else {
        p->nstate = 2;
        p->state_name[0] = "exp_avg";
        p->state_name[1] = "exp_avg_sq";
    }
    for (int j = 0; j < p->nstate; j++) {
        p->state[j] = calloc(m->numel ? m->numel : 1, sizeof(float));
        if (!p->state[j]) {
            ddpc_optim_destroy(p);
            return ddpc__err(DDPC_ERR_NOMEM, "optimizer: out of memory for its state");
        }
    }
    *out = p;
    return DDPC_OK;
}

void ddpc_optim_destroy(ddpc_optim *o) {
    if (!o) return;
    for (int j = 0; j < 2; j++) free(o->state[j]);
    free(o);
}

void ddpc_optim_zero_grad(ddpc_optim *o) {
    if (o) ddpc_model_zero_grad(o->m);
}

static void sgd_step(ddpc_optim *p) {
    const ddpc_optim_options *o = &p->o;
    float *w = p->m->pblock;
    const float *g = p->m->gblock;
    size_t n = p->m->numel;
    float lr = o->lr, wd = o->weight_decay, mu = o->momentum, damp = 1.0f - o->dampening;
    if (mu == 0.0f) {
        ddpc__nn_sgd_plain(w, g, n, lr, wd);
        return;
    }
    float *buf = p->state[0];
    int first = p->steps == 0;
    for (size_t i = 0; i < n; i++) {
        float d = wd != 0.0f ? g[i] + wd * w[i] : g[i];
        float b = first ? d : mu * buf[i] + damp * d;
        buf[i] = b;
        d = o->nesterov ? d + mu * b : b;
        w[i] -= lr * d;
    }
}

static void adam_step(ddpc_optim *p) {
    const ddpc_optim_options *o = &p->o;
    float *w = p->m->pblock;
    const float *g = p->m->gblock;
    size_t n = p->m->numel;
    float *ma = p->state[0], *va = p->state[1];
    float lr = o->lr, wd = o->weight_decay, b1 = o->beta1, b2 = o->beta2, eps = o->eps;
    double t = (double)(p->steps + 1);
    /* torch computes the corrections in Python floats (double), then uses them on float tensors */
    double bc1 = 1.0 - pow((double)b1, t), bc2 = 1.0 - pow((double)b2, t);
    float step_size = (float)(lr / bc1);
    float bc2_sqrt = (float)sqrt(bc2);
    nn_adam_args a = {
        b1, b2, eps, wd, step_size, bc2_sqrt, o->kind == DDPC_OPTIM_ADAMW, 1.0f - lr * wd
    };
    ddpc__nn_adam(&a, w, g, ma, va, n);
}

ddpc_status ddpc_optim_step(ddpc_optim *o) {
    if (!o) return ddpc__err(DDPC_ERR_INVALID_ARG, "optimizer step: optimizer is NULL");
    if (o->o.kind == DDPC_OPTIM_SGD)
        sgd_step(o);
    else
        adam_step(o);
    o->steps++;
    return DDPC_OK;
}

void ddpc_optim_set_lr(ddpc_optim *o, float lr) {
    if (o) o->o.lr = lr;
}

const ddpc_optim_options *ddpc_optim_options_of(const ddpc_optim *o) { return o ? &o->o : NULL; }

uint64_t ddpc_optim_steps(const ddpc_optim *o) { return o ? o->steps : 0; }

int ddpc_optim_num_state(const ddpc_optim *o) { return o ? o->nstate : 0; }

float *ddpc_optim_state(ddpc_optim *o, int j, const char **name) {
    if (!o || j < 0 || j >= o->nstate) {
        if (name) *name = NULL;
        return NULL;
    }
    if (name) *name = o->state_name[j];
    return o->state[j];
}

void ddpc_optim_set_steps(ddpc_optim *o, uint64_t steps) {
    if (o) o->steps = steps;
}
