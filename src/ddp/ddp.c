/* ddp.c — the reducer: parameter broadcast, gradient buckets allreduced while
 * backward runs and waited for as it ends, averaging, no_sync accumulation,
 * fp16/bf16 compression; and the sampler that takes its shard from the
 * communicator. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "coll/reduce.h"
#include "ddp/ddp_test.h"
#include "ddpc/ddp.h"

typedef struct bucket {
    size_t first, count;     /* range of the gradient block */
    int nparams;             /* parameters in this bucket */
    int pending;             /* parameters whose gradient is not final yet */
    int ready;               /* every gradient is final */
    ddpc_work *work;         /* the allreduce in flight, or NULL */
    uint16_t *packed;        /* (count) compressed gradients, when compressing */
    double t_issued, t_done; /* this round's allreduce (ddpc__now()); 0 = not yet */
} bucket;

struct ddpc_ddp {
    ddpc_comm *comm;
    ddpc_model *model;
    ddpc_ddp_options opt;
    int world;
    float *grads; /* the model's gradient block */
    int nbuckets;
    bucket *buckets;       /* in the order they are issued: reverse parameters */
    int *param_bucket;     /* (nparams) bucket of each parameter */
    unsigned char *marked; /* (nparams) gradient final in this round */
    int next_issue;        /* buckets [0, next_issue) have been issued this round */
    int in_round;          /* a backward has started marking since the last sync */
    int averaged;          /* the gradients are averaged: no backward since the last sync */
    double sync_s;         /* seconds spent in sync */
    int sync;              /* 0 under no_sync */
    int overlap;           /* buckets go to the progress thread (else: reduced at once) */
    ddpc_status failed;    /* first error seen by the hook, reported by sync */
};

ddpc_ddp_options ddpc_ddp_options_default(void) {
    ddpc_ddp_options o = { .first_bucket_mb = 1.0,
                           .bucket_mb = 25.0,
                           .compress = DDPC_COMPRESS_NONE,
                           .overlap = DDPC_OVERLAP_AUTO,
                           .broadcast_params = 1 };
    return o;
}

ddpc_status ddpc_overlap_parse(const char *s, ddpc_overlap *out) {
    if (s && !strcasecmp(s, "auto"))
        *out = DDPC_OVERLAP_AUTO;
    else if (s && !strcasecmp(s, "on"))
        *out = DDPC_OVERLAP_ON;
    else if (s && !strcasecmp(s, "off"))
        *out = DDPC_OVERLAP_OFF;
    else
        return ddpc__err(DDPC_ERR_INVALID_ARG, "unknown overlap '%s' (auto, on, off)",
                         s ? s : "(null)");
    return DDPC_OK;
}

/* DDPC_OVERLAP_AUTO: off only where every rank is on this host (no wire time
 * to hide) and its ranks' BLAS threads take every CPU this process may use
 * (no CPU for a progress thread to run on). */
static int resolve_overlap(const ddpc_ddp *d) {
    if (d->opt.overlap != DDPC_OVERLAP_AUTO) return d->opt.overlap == DDPC_OVERLAP_ON;
    int local = ddpc_comm_local_size(d->comm);
    if (local < ddpc_comm_size(d->comm)) return 1;
    return (long)local * ddpc_nn_threads() < ddpc__cpu_count();
}

ddpc_status ddpc_compress_parse(const char *s, ddpc_compress *out) {
    if (s && !strcasecmp(s, "none"))
        *out = DDPC_COMPRESS_NONE;
    else if (s && (!strcasecmp(s, "fp16") || !strcasecmp(s, "float16")))
        *out = DDPC_COMPRESS_FP16;
    else if (s && (!strcasecmp(s, "bf16") || !strcasecmp(s, "bfloat16")))
        *out = DDPC_COMPRESS_BF16;
    else
        return ddpc__err(DDPC_ERR_INVALID_ARG, "unknown compression '%s' (none, fp16, bf16)",
                         s ? s : "(null)");
    return DDPC_OK;
}

static ddpc_dtype packed_dtype(const ddpc_ddp *d) {
    return d->opt.compress == DDPC_COMPRESS_FP16 ? DDPC_FLOAT16 : DDPC_BFLOAT16;
}

/* Starts bucket b's allreduce (compressing first when asked); with now set,
 * runs it on this thread and returns when it is done. */
static ddpc_status issue(ddpc_ddp *d, int b, int now) {
    bucket *bk = &d->buckets[b];
    float *g = d->grads + bk->first;
    void *buf = g;
    ddpc_dtype t = DDPC_FLOAT32;
    ddpc_op op = DDPC_AVG;
    if (d->opt.compress != DDPC_COMPRESS_NONE) {
        t = packed_dtype(d);
        op = DDPC_SUM;
        buf = bk->packed;
        ddpc__from_float32(bk->packed, g, bk->count, t);
    }
    bk->t_issued = ddpc__now();
    if (now) {
        ddpc_status s = ddpc_allreduce(d->comm, buf, buf, bk->count, t, op);
        bk->t_done = ddpc__now();
        return s;
    }
    return ddpc_allreduce_async(d->comm, buf, buf, bk->count, t, op, &bk->work);
}

/* After bucket b's allreduce: a compressed bucket is decompressed and
 * averaged back into the gradient block. */
static void finish(ddpc_ddp *d, int b) {
    if (d->opt.compress == DDPC_COMPRESS_NONE) return;
    bucket *bk = &d->buckets[b];
    float *g = d->grads + bk->first;
    ddpc__to_float32(g, bk->packed, bk->count, packed_dtype(d));
    ddpc__reduce_finish(g, bk->count, DDPC_FLOAT32, DDPC_AVG, d->world);
}

/* Issues, in bucket order, every ready bucket whose predecessors are issued:
 * all ranks then issue the same allreduces in the same order (without
 * overlap each is reduced here, on backward's thread). The last
 * bucket is left to sync_round, at the end of backward: it becomes ready then, so no
 * computation is left to overlap it with, and the calling thread reducing it
 * itself saves the hand-off to the progress thread and back (two thread
 * switches, and on a host whose cores are all busy, a preempted rank). */
static void issue_ready(ddpc_ddp *d) {
    while (d->next_issue < d->nbuckets - 1 && d->buckets[d->next_issue].ready) {
        int b = d->next_issue++;
        if (d->failed == DDPC_OK) {
            ddpc_status s = issue(d, b, !d->overlap);
            if (s == DDPC_OK && !d->overlap) finish(d, b);
            if (s != DDPC_OK) d->failed = s;
        }
    }
}

static void start_round(ddpc_ddp *d) {
    int np = ddpc_model_num_params(d->model);
    memset(d->marked, 0, (size_t)np);
    for (int b = 0; b < d->nbuckets; b++) {
        d->buckets[b].pending = d->buckets[b].nparams;
        d->buckets[b].ready = 0;
        d->buckets[b].t_issued = d->buckets[b].t_done = 0;
    }
    d->next_issue = 0;
    d->in_round = 1;
    d->averaged = 0;
}

static ddpc_status on_backward_end(void *ctx);

/* The model's grad_ready hook: parameter i's gradient is final. */
static void on_grad_ready(void *ctx, int i) {
    ddpc_ddp *d = ctx;
    if (!d->sync) return;
    if (!d->in_round) start_round(d);
    if (d->marked[i]) return; /* a parameter used twice: counted once */
    d->marked[i] = 1;
    bucket *bk = &d->buckets[d->param_bucket[i]];
    if (--bk->pending == 0) {
        bk->ready = 1;
        issue_ready(d);
    }
}

/* A parameter as six integers: ndim, four dims, a hash of its name. */
static void describe(const ddpc_param *p, int64_t e[6]) {
    uint64_t h = ddpc__fnv1a(p->name, strlen(p->name));
    e[0] = p->ndim;
    for (int k = 0; k < 4; k++) e[1 + k] = k < p->ndim ? p->shape[k] : 0;
    e[5] = (int64_t)(h >> 1);
}

/* Every rank must hold the same parameters: rank 0 broadcasts its count and
 * description; each rank finds its first difference, and an allgather tells
 * every rank which ranks differ, and where first. */
static ddpc_status check_params(ddpc_ddp *d) {
    int np = ddpc_model_num_params(d->model), rank = ddpc_comm_rank(d->comm);
    int64_t n0 = np;
    DDPC_CHECK(ddpc_broadcast(d->comm, &n0, &n0, 1, DDPC_INT64, 0));
    int64_t *desc = calloc((size_t)n0 * 6 + 1, sizeof *desc);
    int64_t *firsts = calloc((size_t)d->world, sizeof *firsts);
    ddpc_status s = DDPC_OK;
    if (!desc || !firsts) s = ddpc__err(DDPC_ERR_NOMEM, "DDP: no memory for the parameter check");
    for (int i = 0; s == DDPC_OK && rank == 0 && i < np; i++)
        describe(ddpc_model_param(d->model, i), desc + (size_t)i * 6);
    if (s == DDPC_OK) s = ddpc_broadcast(d->comm, desc, desc, (size_t)n0 * 6, DDPC_INT64, 0);
    int64_t first = INT64_MAX; /* no difference */
    for (int i = 0; s == DDPC_OK && i < n0 && i < np; i++) {
        int64_t e[6];
        describe(ddpc_model_param(d->model, i), e);
        if (memcmp(e, desc + (size_t)i * 6, sizeof e) != 0) {
            first = i;
            break;
        }
    }
    if (first == INT64_MAX && n0 != np) first = n0 < np ? n0 : np;
    if (s == DDPC_OK) s = ddpc_allgather(d->comm, &first, firsts, 1, DDPC_INT64);
    if (s == DDPC_OK) {
        int64_t lo = INT64_MAX;
        for (int r = 0; r < d->world; r++) lo = firsts[r] < lo ? firsts[r] : lo;
        if (lo != INT64_MAX) {
            char ranks[256] = "";
            ddpc__strbuf sb;
            ddpc__sb_fixed(&sb, ranks, sizeof ranks);
            int nw = 0, *who = malloc((size_t)d->world * sizeof *who); /* as "0-3,5" */
            for (int r = 0; who && r < d->world; r++)
                if (firsts[r] == lo) who[nw++] = r;
            if (who)
                ddpc__sb_ranks(&sb, who, nw);
            else
                ddpc__sb_puts(&sb, "(no memory to list them)");
            free(who);
            const char *name = lo < np ? ddpc_model_param(d->model, (int)lo)->name : "(none)";
            s = ddpc__err(DDPC_ERR_MISMATCH,
                          "DDP: models differ across ranks: parameter %lld (here '%s') differs "
                          "between rank 0 and rank(s) %s in name or shape (rank 0 has %lld "
                          "parameters, this rank %d has %d)",
                          (long long)lo, name, ranks, (long long)n0, rank, np);
        }
    }
    free(desc);
    free(firsts);
    return s;
}

/* Buckets over parameters in reverse order, as PyTorch's reducer forms them
 * (compute_bucket_assignment_by_size): a parameter joins the open bucket,
 * and the bucket closes once it holds at least its limit, first_bucket_mb for
 * the first and bucket_mb for the rest. The bucket that holds the last
 * layers' gradients thus starts its allreduce while earlier layers' backward
 * runs; a parameter larger than the limit closes a bucket on its own. */
static ddpc_status form_buckets(ddpc_ddp *d) {
    int np = ddpc_model_num_params(d->model);
    d->buckets = calloc((size_t)(np > 0 ? np : 1), sizeof *d->buckets);
    d->param_bucket = calloc((size_t)(np > 0 ? np : 1), sizeof *d->param_bucket);
    d->marked = calloc((size_t)(np > 0 ? np : 1), 1);
    if (!d->buckets || !d->param_bucket || !d->marked)
        return ddpc__err(DDPC_ERR_NOMEM, "DDP: no memory for buckets");
    double limit = d->opt.first_bucket_mb * 1048576.0; /* bytes */
    bucket *cur = NULL;
    for (int i = np - 1; i >= 0; i--) {
        const ddpc_param *p = ddpc_model_param(d->model, i);
        if (!cur) {
            cur = &d->buckets[d->nbuckets++];
            cur->first = p->offset + p->numel; /* lowered as parameters join */
        }
        /* reverse order over a forward-ordered block: each bucket is contiguous */
        if (p->offset + p->numel != cur->first)
            return ddpc__err(DDPC_ERR_INTERNAL,
                             "DDP: parameter '%s' is not contiguous in the "
                             "gradient block",
                             p->name);
        cur->first = p->offset;
        cur->count += p->numel;
        cur->nparams++;
        d->param_bucket[i] = (int)(cur - d->buckets);
        if ((double)cur->count * sizeof(float) >= limit) {
            cur = NULL;
            limit = d->opt.bucket_mb * 1048576.0;
        }
    }
    if (d->opt.compress != DDPC_COMPRESS_NONE)
        for (int b = 0; b < d->nbuckets; b++) {
            d->buckets[b].packed = malloc(d->buckets[b].count * sizeof(uint16_t) + 1);
            if (!d->buckets[b].packed)
                return ddpc__err(DDPC_ERR_NOMEM, "DDP: no memory for buckets");
        }
    for (int b = 0; b < d->nbuckets; b++)
        DDPC_TRACE(DDP, "bucket %d: gradients [%zu, %zu), %d parameters", b, d->buckets[b].first,
                   d->buckets[b].first + d->buckets[b].count, d->buckets[b].nparams);
    return DDPC_OK;
}

ddpc_status ddpc_ddp_create(ddpc_comm *c, ddpc_model *m, const ddpc_ddp_options *opts,
                            ddpc_ddp **out) {
    *out = NULL;
    if (!c || !m)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "DDP: communicator and model are required");
    ddpc_ddp *d = calloc(1, sizeof *d);
    if (!d) return ddpc__err(DDPC_ERR_NOMEM, "DDP: no memory");
    d->comm = c;
    d->model = m;
    d->world = ddpc_comm_size(c);
    d->sync = 1;
    d->opt = opts ? *opts : ddpc_ddp_options_default();
    if (d->opt.overlap != DDPC_OVERLAP_AUTO && d->opt.overlap != DDPC_OVERLAP_ON &&
        d->opt.overlap != DDPC_OVERLAP_OFF) {
        ddpc_status s =
            ddpc__err(DDPC_ERR_INVALID_ARG, "DDP: overlap must be auto, on or off (got %d)",
                      (int)d->opt.overlap);
        free(d);
        return s;
    }
    d->overlap = resolve_overlap(d);
    if (!(d->opt.first_bucket_mb > 0) || !(d->opt.bucket_mb > 0)) {
        ddpc_status s =
            ddpc__err(DDPC_ERR_INVALID_ARG, "DDP: bucket sizes must be > 0 MB (got %g and %g)",
                      d->opt.first_bucket_mb, d->opt.bucket_mb);
        free(d);
        return s;
    }
    size_t n;
    d->grads = ddpc_model_grad_block(m, &n);
    ddpc_status s = check_params(d);
    if (s == DDPC_OK && d->opt.broadcast_params) {
        float *params = ddpc_model_param_block(m, &n);
        s = ddpc_broadcast(c, params, params, n, DDPC_FLOAT32, 0);
    }
    if (s == DDPC_OK) s = form_buckets(d);
    if (s != DDPC_OK) {
        ddpc_ddp_destroy(d);
        return s;
    }
    ddpc_model_hooks h = { on_grad_ready, on_backward_end, d };
    ddpc_model_set_hooks(m, &h);
    DDPC_INFO(DDP,
              "DDP over %d ranks: %zu gradients in %d buckets (%.2f MB first, %.2f MB rest); "
              "buckets %s",
              d->world, n, d->nbuckets, d->opt.first_bucket_mb, d->opt.bucket_mb,
              d->overlap ? "overlap backward (progress thread)" : "reduced by backward's thread");
    *out = d;
    return DDPC_OK;
}

void ddpc_ddp_set_sync(ddpc_ddp *d, int sync) {
    if (sync && !d->sync) d->averaged = 0; /* what no_sync accumulated is not averaged */
    d->sync = sync != 0;
}

/* Waits for every bucket of the round (see ddp.h). */
static ddpc_status sync_round(ddpc_ddp *d) {
    if (!d->in_round) start_round(d); /* backward marked nothing: reduce all buckets */
    for (int b = 0; b < d->nbuckets; b++) d->buckets[b].ready = 1;
    issue_ready(d);
    ddpc_status s = d->failed;
    for (int b = 0; b < d->nbuckets; b++) {
        bucket *bk = &d->buckets[b];
        if (!bk->work) continue;
        ddpc_status w = ddpc_work_wait(bk->work, -1);
        ddpc_work_times(bk->work, NULL, NULL, &bk->t_done);
        ddpc_work_destroy(bk->work);
        bk->work = NULL;
        if (s == DDPC_OK) s = w;
        if (w == DDPC_OK) finish(d, b);
    }
    int last = d->nbuckets - 1; /* issue_ready leaves it to here */
    if (s == DDPC_OK && last >= 0 && d->next_issue == last) {
        d->next_issue++;
        s = issue(d, last, 1);
        if (s == DDPC_OK) finish(d, last);
    }
    d->in_round = 0;
    d->failed = DDPC_OK;
    if (s != DDPC_OK) return ddpc__err_wrap(s, "DDP: gradient allreduce failed");
    d->averaged = 1;
    return DDPC_OK;
}

/* The model's backward_end hook: backward returns with averaged gradients. */
static ddpc_status on_backward_end(void *ctx) {
    ddpc_ddp *d = ctx;
    if (!d->sync) return DDPC_OK;
    double t0 = ddpc__now();
    ddpc_status s = sync_round(d);
    d->sync_s += ddpc__now() - t0;
    return s;
}

ddpc_status ddpc_ddp_sync(ddpc_ddp *d) {
    if (!d->sync || d->averaged) return DDPC_OK;
    return on_backward_end(d);
}

double ddpc_ddp_sync_seconds(const ddpc_ddp *d) { return d->sync_s; }

ddpc_status ddpc_ddp_allreduce_sum(ddpc_ddp *d, double *vals, int n) {
    return ddpc_allreduce(d->comm, vals, vals, (size_t)n, DDPC_FLOAT64, DDPC_SUM);
}

int ddpc_ddp_num_buckets(const ddpc_ddp *d) { return d->nbuckets; }

int ddpc_ddp_overlaps(const ddpc_ddp *d) { return d->overlap; }

int ddpc__ddp_buckets_in_flight(const ddpc_ddp *d) {
    int n = 0;
    for (int b = 0; b < d->nbuckets; b++) n += d->buckets[b].work != NULL;
    return n;
}

void ddpc_ddp_bucket_times(const ddpc_ddp *d, int b, double *issued, double *done) {
    *issued = d->buckets[b].t_issued;
    *done = d->buckets[b].t_done;
}

void ddpc_ddp_bucket_range(const ddpc_ddp *d, int b, size_t *first, size_t *count) {
    *first = d->buckets[b].first;
    *count = d->buckets[b].count;
}

void ddpc_ddp_destroy(ddpc_ddp *d) {
    if (!d) return;
    for (int b = 0; d->buckets && b < d->nbuckets; b++) {
        if (d->buckets[b].work) ddpc_work_destroy(d->buckets[b].work);
        free(d->buckets[b].packed);
    }
    if (d->model && d->buckets) ddpc_model_set_hooks(d->model, NULL);
    free(d->buckets);
    free(d->param_bucket);
    free(d->marked);
    free(d);
}
