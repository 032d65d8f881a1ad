/*
 * ddp.h — DistributedDataParallel for ddpc models.
 *
 * Wrap a model after creating it on every rank:
 *
 *     ddpc_ddp *ddp;
 *     ddpc_ddp_create(comm, model, NULL, &ddp);   // rank 0's parameters everywhere
 *     for each batch:
 *         ddpc_optim_zero_grad(opt);
 *         forward, loss
 *         ddpc_model_backward(model);              // buckets allreduce while backward runs;
 *                                                  // returns with grads = mean over ranks
 *         ddpc_optim_step(opt);
 *
 * Buckets are ranges of the model's gradient block, formed as PyTorch does:
 * parameters in reverse registration order, each joining the open bucket,
 * which closes once it holds at least first_bucket_mb (the first) or
 * bucket_mb (the others). A bucket's allreduce is
 * issued (async) as soon as backward has made its last gradient final, so
 * communication overlaps the rest of backward; the last bucket, which backward
 * completes as it ends, is reduced on the calling thread by the hook DDP
 * installs at the end of backward (as PyTorch's reducer uses autograd's
 * final callback), which then waits for every bucket.
 * Every rank issues the buckets in the same order.
 *
 * Overlap needs a CPU for the progress thread to run on, or time on a wire
 * to hide. Where all ranks share one host and its CPUs are all taken by the
 * ranks' compute, the progress thread could only take turns with backward,
 * at the cost of thread switches and of ranks waiting on each other's
 * preempted threads; there (DDPC_OVERLAP_AUTO) each bucket is reduced by
 * backward's own thread as soon as it is full, in the same order.
 */
#ifndef DDPC_DDP_H
#define DDPC_DDP_H

#include "ddpc/data.h"
#include "ddpc/ddpc.h"
#include "ddpc/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ddpc_compress {
    DDPC_COMPRESS_NONE = 0, /* allreduce float32 gradients */
    DDPC_COMPRESS_FP16,     /* compress to float16 before, decompress after */
    DDPC_COMPRESS_BF16,     /* compress to bfloat16 before, decompress after */
} ddpc_compress;

/* Who reduces a bucket that backward fills before its end. */
typedef enum ddpc_overlap {
    DDPC_OVERLAP_AUTO = 0, /* ON, but OFF where every rank is on this host and the
                             * host's ranks x BLAS threads take all of its CPUs */
    DDPC_OVERLAP_ON,       /* the progress thread, while backward goes on */
    DDPC_OVERLAP_OFF,      /* backward's own thread, at once, then backward goes on */
} ddpc_overlap;

typedef struct ddpc_ddp_options {
    double first_bucket_mb; /* size of the first bucket; default 1 */
    double bucket_mb;       /* size of the other buckets; default 25 */
    ddpc_compress compress; /* default DDPC_COMPRESS_NONE */
    ddpc_overlap overlap;   /* default DDPC_OVERLAP_AUTO */
    int broadcast_params;   /* 1 (default): copy rank 0's parameters to all ranks at create */
} ddpc_ddp_options;

typedef struct ddpc_ddp ddpc_ddp;

/* The defaults above. */
DDPC_API ddpc_ddp_options ddpc_ddp_options_default(void);
/* "none", "fp16"/"float16", "bf16"/"bfloat16". */
DDPC_API ddpc_status ddpc_compress_parse(const char *s, ddpc_compress *out);
/* "auto", "on", "off". */
DDPC_API ddpc_status ddpc_overlap_parse(const char *s, ddpc_overlap *out);

/* Collective over c. Checks that every rank's model has the same parameters
 * (names and shapes; a mismatch is DDPC_ERR_MISMATCH naming the first
 * differing parameter and the ranks), broadcasts rank 0's parameters, forms
 * the buckets and installs the model's hooks (ddpc_model_set_hooks), so that
 * ddpc_model_backward returns with averaged gradients. opts NULL = defaults. */
DDPC_API ddpc_status ddpc_ddp_create(ddpc_comm *c, ddpc_model *m, const ddpc_ddp_options *opts,
                                     ddpc_ddp **out);

/* no_sync: while off (0), backward only accumulates gradients locally; the
 * next backward with sync on (1, the default) allreduces the accumulated sum. */
DDPC_API void ddpc_ddp_set_sync(ddpc_ddp *d, int sync);

/* What the end of backward does: waits for every bucket of the last
 * backward (issuing any that backward did not complete, e.g. for parameters
 * that got no gradient), then leaves the average over ranks in the gradient
 * block. Backward does this itself; calling it after is harmless: it returns
 * at once when no backward has run since the gradients were averaged, and
 * when sync is off. */
DDPC_API ddpc_status ddpc_ddp_sync(ddpc_ddp *d);
/* Seconds spent so far waiting for the buckets at the end of backward
 * (the communication that backward did not hide), for timing. */
DDPC_API double ddpc_ddp_sync_seconds(const ddpc_ddp *d);

/* Sums vals[0..n) over all ranks in place (metric sums: loss, correct, count). */
DDPC_API ddpc_status ddpc_ddp_allreduce_sum(ddpc_ddp *d, double *vals, int n);

DDPC_API int ddpc_ddp_num_buckets(const ddpc_ddp *d);
/* 1 when buckets overlap backward (the options' overlap, resolved). */
DDPC_API int ddpc_ddp_overlaps(const ddpc_ddp *d);
/* Bucket b as a range [*first, *first + *count) of the gradient block. */
DDPC_API void ddpc_ddp_bucket_range(const ddpc_ddp *d, int b, size_t *first, size_t *count);
/* When bucket b's allreduce of the last round was issued and completed
 * (seconds on CLOCK_MONOTONIC; 0 when it was not, e.g. under no_sync), for a
 * timeline: with overlap, completed is when the progress thread finished
 * it, not when backward's end waited for it. */
DDPC_API void ddpc_ddp_bucket_times(const ddpc_ddp *d, int b, double *issued, double *done);

/* Removes the hooks from the model and frees everything. NULL is harmless. */
DDPC_API void ddpc_ddp_destroy(ddpc_ddp *d);

#ifdef __cplusplus
}
#endif
#endif /* DDPC_DDP_H */
