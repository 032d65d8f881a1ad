/*
 * data.h — ddpc's data layer: IDX files (MNIST, Fashion-MNIST; gzip or raw),
 * the ToTensor + Normalize transform, PyTorch's DistributedSampler (same
 * order, bit for bit, as PyTorch 1.13 for the same seed and epoch) and a
 * batch loader whose background thread keeps k batches ready.
 *
 * Ownership: every *_load / *_create* hands the caller an object it frees
 * with the matching *_destroy; passing NULL to those is harmless. Options
 * are plain structs filled by a *_options_default() call. Errors are a
 * ddpc_status; ddpc_last_error() names the file, argument and what is wrong.
 */
#ifndef DDPC_DATA_H
#define DDPC_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "ddpc/ddpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ IDX files */

/* IDX dtype codes (the third byte of the magic). */
enum {
    DDPC_IDX_UBYTE = 0x08, /* uint8 */
    DDPC_IDX_SBYTE = 0x09, /* int8 */
    DDPC_IDX_SHORT = 0x0B, /* int16, big-endian on disk */
    DDPC_IDX_INT = 0x0C,   /* int32, big-endian on disk */
    DDPC_IDX_FLOAT = 0x0D, /* float32, big-endian on disk */
    DDPC_IDX_DOUBLE = 0x0E /* float64, big-endian on disk */
};

/* A generic IDX file in memory. data holds count elements of the dtype,
 * converted to host byte order; count = dims[0] * ... * dims[ndim-1]. */
typedef struct ddpc_idx {
    int dtype_code; /* DDPC_IDX_* */
    int ndim;       /* 1..8 */
    int dims[8];    /* (dims[0], ..., dims[ndim-1]) */
    size_t count;   /* number of elements */
    void *data;     /* (count) elements, owned */
} ddpc_idx;

/*
 * Reads an IDX file: gzip-compressed (recognised by its content) or raw.
 * Checks the magic (two zero bytes, a known dtype code, a rank 1..8), the
 * dimensions, and the declared size against the real size: a truncated file
 * or one with trailing bytes is DDPC_ERR_IO; a path ending in ".gz" whose
 * content is not gzip is DDPC_ERR_IO ("not gzip"); a missing file is
 * DDPC_ERR_NOT_FOUND. Every error names the path.
 */
DDPC_API ddpc_status ddpc_idx_create(const char *path, ddpc_idx **out);
DDPC_API void ddpc_idx_destroy(ddpc_idx *x); /* NULL harmless */

/* -------------------------------------------------------------- datasets */

typedef struct ddpc_dataset {
    int n;           /* number of samples */
    int rows, cols;  /* 28, 28 for MNIST */
    int num_classes; /* 1 + max label */
    uint8_t *images; /* (n, rows*cols) raw pixels, owned */
    uint8_t *labels; /* (n) owned */
} ddpc_dataset;

/*
 * Loads one split of MNIST or Fashion-MNIST. dir holds
 * {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the names both datasets
 * use; "train-images.idx3-ubyte" with a dot is accepted too). split is
 * "train" or "test" ("t10k" also means test). Where both the raw file and
 * its .gz exist, the raw file is read (as torchvision does once it has extracted the archives).
 * Images must be a 3-D ubyte IDX, labels a 1-D ubyte IDX, with the same
 * number of samples, at least one. Errors name the file and what is wrong.
 */
DDPC_API ddpc_status ddpc_dataset_create_mnist(const char *dir, const char *split,
                                               ddpc_dataset **out);
DDPC_API void ddpc_dataset_destroy(ddpc_dataset *ds); /* NULL harmless */

/* ------------------------------------------------------------ transforms */

/*
 * ToTensor (uint8 / 255) then Normalize ((x - mean) / std), flattened:
 * dst is (n_idx, rows*cols) floats; row i is sample idx[i] of ds. Every
 * idx[i] must lie in [0, ds->n). The arithmetic is float32 in torchvision's
 * order, so the values are bit-identical to torchvision's transforms.
 */
DDPC_API void ddpc_transform_batch(const ddpc_dataset *ds, const int64_t *idx, int n_idx,
                                   float mean, float std, float *dst);

/* ------------------------------------------------------------- sampling */

/* torch.randperm(n, generator=torch.Generator().manual_seed(seed)) of
 * PyTorch 1.13 on CPU, bit for bit: out is (n). (Like torch, only the low
 * 32 bits of seed seed its mt19937.) */
DDPC_API void ddpc_randperm(size_t n, uint64_t seed, int64_t *out);

typedef struct ddpc_sampler ddpc_sampler;

typedef struct ddpc_sampler_options {
    int rank;         /* this one, in [0, num_replicas); default 0 */
    int num_replicas; /* ranks sharing the dataset; default 1 */
    int shuffle;      /* default 1 */
    uint64_t seed;    /* default 0 */
    int drop_last;    /* default 0 */
} ddpc_sampler_options;

DDPC_API ddpc_sampler_options ddpc_sampler_options_default(void);

/*
 * PyTorch's DistributedSampler over dataset_len samples (o NULL = the
 * defaults): with shuffle the order is randperm(dataset_len) seeded with
 * seed + epoch, else 0..len-1. Without drop_last the list is padded by
 * wrapping round to a multiple of num_replicas; with drop_last its tail is
 * dropped so that it divides. Rank r takes every num_replicas-th index from
 * r. num_replicas < 1 or rank outside [0, num_replicas) is
 * DDPC_ERR_INVALID_ARG. The epoch starts at 0. Under DDP,
 * ddpc_sampler_create_dist takes num_replicas and rank from the
 * communicator.
 */
DDPC_API ddpc_status ddpc_sampler_create(size_t dataset_len, const ddpc_sampler_options *o,
                                         ddpc_sampler **out);
/* DistributedSampler(dataset): ddpc_sampler_create with num_replicas and
 * rank taken from c (o NULL = the other defaults; its num_replicas and rank
 * are ignored). */
DDPC_API ddpc_status ddpc_sampler_create_dist(ddpc_comm *c, size_t dataset_len,
                                              const ddpc_sampler_options *o, ddpc_sampler **out);
/* Sets the epoch (and its start back to 0). */
DDPC_API void ddpc_sampler_set_epoch(ddpc_sampler *s, uint64_t epoch);
/* Continues the current epoch after its first `start` positions (samples
 * consumed by all ranks together, at any earlier world size): rank r then
 * takes positions start + r + i * num_replicas of the epoch's order, so the
 * ranks split exactly what is left (padded as torch pads). Same world size,
 * start = steps * batch * num_replicas: the indices a run never stopped
 * takes from there. Cleared by set_epoch. */
DDPC_API void ddpc_sampler_set_start(ddpc_sampler *s, size_t start);
DDPC_API size_t ddpc_sampler_len(const ddpc_sampler *s); /* this rank's number of samples */
DDPC_API size_t
ddpc_sampler_dataset_len(const ddpc_sampler *s); /* the dataset_len it was made for */
/* This rank's ddpc_sampler_len() indices for the current epoch; borrowed,
 * valid until the next set_epoch or free. */
DDPC_API const int64_t *ddpc_sampler_indices(ddpc_sampler *s);
DDPC_API void ddpc_sampler_destroy(ddpc_sampler *s); /* NULL harmless */

/* --------------------------------------------------------------- loading */

typedef struct ddpc_batch {
    size_t index;     /* this batch's number in the epoch, from 0 (enumerate's) */
    int size;         /* samples in this batch (the last may be smaller) */
    const float *x;   /* (size, rows*cols) transformed pixels */
    const int32_t *y; /* (size) labels */
} ddpc_batch;

typedef struct ddpc_loader ddpc_loader;

typedef struct ddpc_loader_options {
    int batch_size;  /* samples a batch; default 1 (as DataLoader's) */
    int drop_last;   /* drop a last partial batch; default 0 */
    float mean, std; /* Normalize((mean,), (std,)) after ToTensor; default 0, 1 */
    int prefetch;    /* batches a background thread keeps ready; default 0
                         * (decoded inline in ddpc_loader_next) */
} ddpc_loader_options;

DDPC_API ddpc_loader_options ddpc_loader_options_default(void);

/*
 * Batches of ds in the sampler's order (sampler NULL = all samples in
 * order; the sampler is borrowed and must outlive the loader, and its
 * dataset_len must not exceed ds->n); o NULL = the defaults. With prefetch
 * the thread, and a caller waiting for it, poll for up to 100 us before
 * they sleep, so give it a CPU of its own. ds is borrowed too. While the
 * loader lives, set the sampler's epoch only through ddpc_loader_start_epoch
 * (the thread reads the sampler's indices). One thread calls the loader's
 * functions.
 */
DDPC_API ddpc_status ddpc_loader_create(const ddpc_dataset *ds, ddpc_sampler *sampler,
                                        const ddpc_loader_options *o, ddpc_loader **out);
/* Starts (or restarts, also mid-epoch) an epoch: stops the thread's current
 * work, calls ddpc_sampler_set_epoch(epoch) and begins again at batch 0. */
DDPC_API ddpc_status ddpc_loader_start_epoch(ddpc_loader *l, uint64_t epoch);
/* ddpc_loader_start_epoch, then ddpc_sampler_set_start(start): the epoch
 * continues after the `start` samples all ranks consumed before (a resume
 * mid-epoch); num_batches counts the batches left. Needs a sampler when
 * start > 0. */
DDPC_API ddpc_status ddpc_loader_start_epoch_at(ddpc_loader *l, uint64_t epoch, size_t start);
/* *b = the next batch (valid until the next call), NULL at the end of the
 * epoch. Waits for the prefetch thread at most DDPC_DATA_TIMEOUT seconds
 * (then DDPC_ERR_TIMEOUT). Before any start_epoch: DDPC_ERR_INVALID_ARG. */
DDPC_API ddpc_status ddpc_loader_next(ddpc_loader *l, const ddpc_batch **b);
DDPC_API size_t ddpc_loader_num_batches(const ddpc_loader *l);
DDPC_API void ddpc_loader_destroy(ddpc_loader *l); /* joins the thread; NULL harmless */

#ifdef __cplusplus
}
#endif
#endif /* DDPC_DATA_H */
