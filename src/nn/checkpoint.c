/*
 * checkpoint.c — a model's checkpoint: which tensors go under which names,
 * and loading them back into a model and its optimizer. The file format
 * (a safetensors file, written atomically, validated when read) is
 * safetensors.c's.
 *
 * A checkpoint holds each parameter under its state_dict name ("0.weight"),
 * then each optimizer state block per parameter ("optim.0.weight.momentum"),
 * all float32; its __metadata__ holds format, epoch, step, the dropout
 * RNG's state, the optimizer's kind, steps and learning rate, and the
 * trainer's metrics_bytes where it keeps a metrics log, and the trainer's
 * own "trainer" string (ddpc-train: where in the epoch a step checkpoint
 * was taken). A snapshot copies what a save writes, so that another thread
 * can write it while training goes on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "nn/nn_impl.h"
#include "nn/safetensors.h"

/* One tensor of a model's checkpoint. */
typedef struct ckpt_tensor {
    char name[128];
    const ddpc_param *p; /* its shape (and offset) */
    float *data;         /* (p->numel) the parameter, or its slice of a state block */
    int optim;           /* optimizer state (may be absent before the first step) */
} ckpt_tensor;

/* The tensors of m and, when o is not NULL, of o's state, in file order
 * (parameters, then each state block's parameters) into a new array. */
static ddpc_status list_tensors(const ddpc_model *m, ddpc_optim *o, ckpt_tensor **out, int *count) {
    int nstate = ddpc_optim_num_state(o);
    int nt = m->nparams * (1 + nstate);
    ckpt_tensor *ts = calloc((size_t)(nt ? nt : 1), sizeof *ts);
    if (!ts) return ddpc__err(DDPC_ERR_NOMEM, "checkpoint: out of memory");
    int k = 0;
    for (int j = -1; j < nstate; j++) {
        const char *sname = NULL;
        float *blk = j < 0 ? NULL : ddpc_optim_state(o, j, &sname);
        for (int i = 0; i < m->nparams; i++, k++) {
            const ddpc_param *p = &m->params[i];
            if (j < 0)
                snprintf(ts[k].name, sizeof ts[k].name, "%s", p->name);
            else
                snprintf(ts[k].name, sizeof ts[k].name, "optim.%s.%s", p->name, sname);
            ts[k].p = p;
            ts[k].data = j < 0 ? p->data : blk + p->offset;
            ts[k].optim = j >= 0;
        }
    }
    *out = ts;
    *count = nt;
    return DDPC_OK;
}

static void rng_hex(const ddpc_rng *r, char out[65]) {
    for (int i = 0; i < 4; i++) snprintf(out + 16 * i, 17, "%016" PRIx64, r->s[i]);
}

static int rng_unhex(const char *s, ddpc_rng *r) {
    if (strlen(s) != 64) return 0;
    for (int i = 0; i < 4; i++) {
        uint64_t v = 0;
        for (int j = 0; j < 16; j++) {
            char c = s[16 * i + j];
            v <<= 4;
            if (c >= '0' && c <= '9')
                v |= (uint64_t)(c - '0');
            else if (c >= 'a' && c <= 'f')
                v |= (uint64_t)(c - 'a' + 10);
            else
                return 0;
        }
        r->s[i] = v;
    }
    return 1;
}

/* ------------------------------------------------------------- saving */

/* What a save writes: views of the live model and optimizer, or of a
 * snapshot's copies of them. */
typedef struct ckpt_src {
    const ddpc_model *m;        /* names and shapes (borrowed) */
    const float *blocks[1 + 4]; /* parameters, then each optimizer state block (numel) */
    const char *snames[4];      /* the state blocks' names */
    int nstate, has_optim;
    ddpc_optim_options op; /* kind and lr, when has_optim */
    uint64_t osteps;       /* the optimizer's steps */
    ddpc_rng rng;          /* the dropout RNG */
    ddpc_ckpt_meta meta;
} ckpt_src;

/* The live state of m and optim (may be NULL) as a ckpt_src, nothing copied. */
static ddpc_status src_live(const ddpc_model *m, const ddpc_optim *optim,
                            const ddpc_ckpt_meta *meta, ckpt_src *c) {
    memset(c, 0, sizeof *c);
    ddpc_optim *o = (ddpc_optim *)optim; /* only read */
    c->m = m;
    c->blocks[0] = m->pblock;
    c->nstate = ddpc_optim_num_state(o);
    if (c->nstate > 4)
        return ddpc__err(DDPC_ERR_INTERNAL, "checkpoint: %d state blocks", c->nstate);
    for (int j = 0; j < c->nstate; j++) c->blocks[1 + j] = ddpc_optim_state(o, j, &c->snames[j]);
    if (o) {
        c->has_optim = 1;
        c->op = *ddpc_optim_options_of(o);
        c->osteps = ddpc_optim_steps(o);
    }
    c->rng = m->rng;
    if (meta) c->meta = *meta;
    return DDPC_OK;
}

/*
 * 1. List the tensors: parameters, then optimizer state blocks.
 * 2. The metadata: format, epoch, step, RNG, and the optimizer's.
 * 3. Write them as one safetensors file, atomically.
 */
static ddpc_status save_src(const char *path, const ckpt_src *c) {
    const ddpc_model *m = c->m;
    int nt = m->nparams * (1 + c->nstate);
    char(*names)[128] = calloc((size_t)(nt ? nt : 1), sizeof *names);
    ddpc__st_out *out = calloc((size_t)(nt ? nt : 1), sizeof *out);
    ddpc_status s = DDPC_OK;
    if (!out || !names) {
        s = ddpc__err(DDPC_ERR_NOMEM, "checkpoint save: out of memory");
        goto done;
    }
    /* 1. */
    for (int j = -1, k = 0; j < c->nstate; j++)
        for (int i = 0; i < m->nparams; i++, k++) {
            const ddpc_param *p = &m->params[i];
            if (j < 0)
                snprintf(names[k], sizeof names[k], "%s", p->name);
            else
                snprintf(names[k], sizeof names[k], "optim.%s.%s", p->name, c->snames[j]);
            out[k].name = names[k];
            out[k].ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++) out[k].shape[d] = p->shape[d];
            out[k].data = c->blocks[1 + j] + p->offset;
            out[k].numel = p->numel;
        }
    /* 2. */
    const ddpc_ckpt_meta *meta = &c->meta;
    char epoch[24], step[24], rng[65], steps[24], lr[32];
    snprintf(epoch, sizeof epoch, "%" PRIu64, meta->epoch);
    snprintf(step, sizeof step, "%" PRIu64, meta->step);
    rng_hex(&c->rng, rng);
    /* key, value pairs: 4 always, metrics_bytes, trainer, then the optimizer's 3 */
    enum { MAX_META = 9 };
    const char *kv[2 * MAX_META] = { "format", "ddpc", "epoch", epoch, "step", step, "rng", rng };
    int nmeta = 4;
    char mbytes[24];
    snprintf(mbytes, sizeof mbytes, "%" PRIu64, meta->metrics_bytes);
    if (meta->metrics_kept) {
        kv[2 * nmeta] = "metrics_bytes";
        kv[2 * nmeta + 1] = mbytes;
        nmeta++;
    }
    if (meta->trainer[0]) {
        kv[2 * nmeta] = "trainer";
        kv[2 * nmeta + 1] = meta->trainer;
        nmeta++;
    }
    if (c->has_optim) {
        snprintf(steps, sizeof steps, "%" PRIu64, c->osteps);
        snprintf(lr, sizeof lr, "%.9g", (double)c->op.lr);
        const char *more[6] = { "optim",       ddpc_optim_kind_name(c->op.kind),
                                "optim.steps", steps,
                                "optim.lr",    lr };
        memcpy(kv + 2 * nmeta, more, sizeof more);
        nmeta += 3;
    }
    _Static_assert(4 + 2 + 3 <= MAX_META, "kv holds every metadata pair");
    /* 3. */
    s = ddpc__st_write(path, kv, nmeta, out, nt);
done:
    free(out);
    free(names);
    return s;
}

ddpc_status ddpc_checkpoint_save(const char *path, const ddpc_model *m, const ddpc_optim *optim,
                                 const ddpc_ckpt_meta *meta) {
    if (!path || !*path) return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint save: path is empty");
    if (!m || !m->built)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint save: model is NULL or not built");
    ckpt_src c;
    DDPC_CHECK(src_live(m, optim, meta, &c));
    return save_src(path, &c);
}

/* ---------------------------------------------------------- snapshots */

struct ddpc_ckpt_snapshot {
    ckpt_src src;
    float *copy; /* (numel * (1 + nstate)) owned: the blocks src points into */
};

/* Copies the parameter block and each state block (one memcpy each) and
 * the scalars; the model is kept only for its names and shapes. */
ddpc_status ddpc_checkpoint_snapshot(const ddpc_model *m, const ddpc_optim *optim,
                                     const ddpc_ckpt_meta *meta, ddpc_ckpt_snapshot **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint snapshot: out is NULL");
    *out = NULL;
    if (!m || !m->built)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint snapshot: model is NULL or not built");
    ddpc_ckpt_snapshot *sn = calloc(1, sizeof *sn);
    if (!sn) return ddpc__err(DDPC_ERR_NOMEM, "checkpoint snapshot: out of memory");
    ddpc_status s = src_live(m, optim, meta, &sn->src);
    size_t n = m->numel, nb = 1 + (size_t)sn->src.nstate;
    if (s == DDPC_OK && !(sn->copy = malloc((n ? n : 1) * nb * sizeof(float))))
        s = ddpc__err(DDPC_ERR_NOMEM, "checkpoint snapshot: cannot copy %zu floats", n * nb);
    if (s != DDPC_OK) {
        ddpc_checkpoint_snapshot_destroy(sn);
        return s;
    }
    for (size_t j = 0; j < nb; j++) {
        memcpy(sn->copy + j * n, sn->src.blocks[j], n * sizeof(float));
        sn->src.blocks[j] = sn->copy + j * n;
    }
    *out = sn;
    return DDPC_OK;
}

ddpc_status ddpc_checkpoint_snapshot_write(const ddpc_ckpt_snapshot *sn, const char *path) {
    if (!sn || !path || !*path)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint write: snapshot or path is NULL");
    return save_src(path, &sn->src);
}

void ddpc_checkpoint_snapshot_destroy(ddpc_ckpt_snapshot *sn) {
    if (!sn) return;
    free(sn->copy);
    free(sn);
}

/* ------------------------------------------------------------ loading */

/* "[a, b, c]" into out[cap], cut short when it does not fit. */
static void shape_str(char *out, size_t cap, int ndim, const int64_t *shape) {
    ddpc__strbuf b;
    ddpc__sb_fixed(&b, out, cap);
    ddpc__sb_put(&b, "[", 1);
    for (int d = 0; d < ndim; d++)
        ddpc__sb_printf(&b, "%s%lld", d ? ", " : "", (long long)shape[d]);
    ddpc__sb_put(&b, "]", 1);
}

/* t must be F32 with p's shape; otherwise a mismatch naming it. */
static ddpc_status check_tensor(const char *path, const ddpc__st_tensor *t, const char *name,
                                const ddpc_param *p) {
    if (!t)
        return ddpc__err(DDPC_ERR_MISMATCH, "checkpoint %s has no tensor '%s' that the model needs",
                         path, name);
    if (strcmp(t->dtype, "F32"))
        return ddpc__err(DDPC_ERR_MISMATCH, "checkpoint %s: tensor '%s' is %s, the model's is F32",
                         path, name, t->dtype);
    int64_t ms[4];
    for (int d = 0; d < p->ndim; d++) ms[d] = p->shape[d];
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == ms[d];
    if (!same) {
        char a[128], b[128];
        shape_str(a, sizeof a, t->ndim, t->shape);
        shape_str(b, sizeof b, p->ndim, ms);
        return ddpc__err(DDPC_ERR_MISMATCH,
                         "checkpoint %s: tensor '%s' has shape %s, the model's has %s", path, name,
                         a, b);
    }
    return DDPC_OK;
}

static ddpc_status parse_u64_meta(const char *path, const ddpc__st_file *f, const char *key,
                                  uint64_t *out) {
    const char *v = ddpc__st_meta(f, key);
    *out = 0;
    if (!v) return DDPC_OK;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-')
        return ddpc__err(DDPC_ERR_IO,
                         "checkpoint %s: __metadata__ \"%s\" = \"%s\" is not an integer", path, key,
                         v);
    *out = x;
    return DDPC_OK;
}

/* Checks the tensors ts[i] with ts[i].optim == optim against the file,
 * marking the ones found in used (indexed like f->t). Optimizer state may
 * be absent when it was saved before the first step (osteps 0). */
static ddpc_status match_tensors(const char *path, const ddpc__st_file *f, const ckpt_tensor *ts,
                                 int nt, int optim, uint64_t osteps, int *used) {
    for (int i = 0; i < nt; i++) {
        if (ts[i].optim != optim) continue;
        const ddpc__st_tensor *t = ddpc__st_find(f, ts[i].name);
        if (!t && optim && osteps == 0) continue; /* never stepped: no state to restore */
        DDPC_CHECK(check_tensor(path, t, ts[i].name, ts[i].p));
        used[t - f->t] = 1;
    }
    return DDPC_OK;
}

/* The file's optimizer kind must be the optimizer's. */
static ddpc_status match_optim_kind(const char *path, const char *okind, ddpc_optim *optim) {
    const char *want = ddpc_optim_kind_name(ddpc_optim_options_of(optim)->kind);
    if (!okind)
        return ddpc__err(DDPC_ERR_MISMATCH,
                         "checkpoint %s has no optimizer state (saved without one); the trainer's "
                         "optimizer is %s",
                         path, want);
    if (strcmp(okind, want))
        return ddpc__err(DDPC_ERR_MISMATCH,
                         "checkpoint %s holds %s optimizer state, the optimizer is %s", path, okind,
                         want);
    return DDPC_OK;
}

/* Every tensor of the file is one the model (or, when loading it, the
 * optimizer) takes; a weights-only load skips optimizer state. */
static ddpc_status check_all_used(const char *path, const ddpc__st_file *f, const int *used,
                                  const ddpc_model *m, ddpc_optim *optim, const char *okind) {
    for (int i = 0; i < f->nt; i++) {
        if (used[i]) continue;
        if (strncmp(f->t[i].name, "optim.", 6))
            return ddpc__err(DDPC_ERR_MISMATCH,
                             "checkpoint %s: tensor '%s' matches nothing in the model (%s)", path,
                             f->t[i].name, m->desc);
        if (optim)
            return ddpc__err(DDPC_ERR_MISMATCH,
                             "checkpoint %s: tensor '%s' is optimizer state that this %s optimizer "
                             "does not keep%s",
                             path, f->t[i].name, okind,
                             ddpc_optim_num_state(optim) == 0 ? " (it has no momentum)" : "");
    }
    return DDPC_OK;
}

/*
 * 1. Read the file and validate it as safetensors (ddpc__st_open).
 * 2. Match every model parameter and optimizer state block to a tensor, and
 *    every tensor to something in the model; the first mismatch is named.
 * 3. Read the metadata.
 * 4. Only then copy the data in and set the metadata.
 */
ddpc_status ddpc_checkpoint_load(const char *path, ddpc_model *m, ddpc_optim *optim,
                                 ddpc_ckpt_meta *meta) {
    if (!path || !*path) return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint load: path is empty");
    if (!m || !m->built)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "checkpoint load: model is NULL or not built");
    ddpc__st_file f;
    DDPC_CHECK(ddpc__st_open(path, &f));
    ckpt_tensor *ts = NULL;
    int nt = 0, *used = NULL;
    ddpc_status s;
    if ((s = list_tensors(m, optim, &ts, &nt)) != DDPC_OK) goto done;
    if (!(used = calloc((size_t)(f.nt ? f.nt : 1), sizeof *used))) {
        s = ddpc__err(DDPC_ERR_NOMEM, "checkpoint: out of memory");
        goto done;
    }
    /* 2. */
    uint64_t osteps = 0;
    const char *okind = ddpc__st_meta(&f, "optim");
    if ((s = match_tensors(path, &f, ts, nt, 0, 0, used)) != DDPC_OK) goto done;
    if ((s = parse_u64_meta(path, &f, "optim.steps", &osteps)) != DDPC_OK) goto done;
    if (optim && (s = match_optim_kind(path, okind, optim)) != DDPC_OK) goto done;
    if ((s = match_tensors(path, &f, ts, nt, 1, osteps, used)) != DDPC_OK) goto done;
    if ((s = check_all_used(path, &f, used, m, optim, okind)) != DDPC_OK) goto done;
    /* 3. */
    ddpc_ckpt_meta mt;
    memset(&mt, 0, sizeof mt);
    if ((s = parse_u64_meta(path, &f, "epoch", &mt.epoch)) != DDPC_OK) goto done;
    if ((s = parse_u64_meta(path, &f, "metrics_bytes", &mt.metrics_bytes)) != DDPC_OK) goto done;
    mt.metrics_kept = ddpc__st_meta(&f, "metrics_bytes") != NULL;
    const char *tr = ddpc__st_meta(&f, "trainer");
    if (tr && strlen(tr) >= sizeof mt.trainer) {
        s = ddpc__err(DDPC_ERR_IO, "checkpoint %s: __metadata__ \"trainer\" is over %zu bytes",
                      path, sizeof mt.trainer - 1);
        goto done;
    }
    if (tr) memcpy(mt.trainer, tr, strlen(tr) + 1);
    if ((s = parse_u64_meta(path, &f, "step", &mt.step)) != DDPC_OK) goto done;
    ddpc_rng rng = m->rng;
    const char *rh = ddpc__st_meta(&f, "rng");
    if (rh && !rng_unhex(rh, &rng)) {
        s = ddpc__err(DDPC_ERR_IO, "checkpoint %s: __metadata__ \"rng\" is not 64 hex digits",
                      path);
        goto done;
    }
    /* 4. */
    for (int i = 0; i < nt; i++) {
        const ddpc__st_tensor *t = ddpc__st_find(&f, ts[i].name);
        if (t)
            ddpc__st_get_f32(&f, t, ts[i].data, ts[i].p->numel);
        else
            memset(ts[i].data, 0, ts[i].p->numel * sizeof(float)); /* state never stepped */
    }
    if (optim) ddpc_optim_set_steps(optim, osteps);
    m->rng = rng;
    if (meta) *meta = mt;
    DDPC_INFO(NN, "checkpoint: loaded %s (epoch %" PRIu64 ", step %" PRIu64 ")", path, mt.epoch,
              mt.step);
done:
    free(used);
    free(ts);
    ddpc__st_close(&f);
    return s;
}
