/*
 * safetensors.h — the safetensors file format: reading a file into a
 * validated header and its data, writing float32 tensors atomically.
 * It knows nothing of models: which tensors a checkpoint holds, and under
 * which names, is checkpoint.c's.
 *
 * Format (https://github.com/huggingface/safetensors): u64 little-endian N;
 * N bytes of UTF-8 JSON {"__metadata__": {str: str}, name: {"dtype": "F32",
 * "shape": [..], "data_offsets": [begin, end]}, ...}; then the data, where
 * each tensor's bytes are [begin, end) counted from the end of the header.
 * The tensors must tile the data exactly (no gaps, no overlaps), as the
 * reference implementation demands. ddpc pads the header with spaces to a
 * multiple of 8 so the data is aligned.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_NN_SAFETENSORS_H
#define DDPC_NN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ddpc/ddpc.h"

#define DDPC__ST_MAX_DIMS 8

/* One tensor of a file's header. */
typedef struct ddpc__st_tensor {
    char *name;    /* owned by the file */
    char dtype[8]; /* "F32", "BF16", ... (a known one) */
    int ndim;
    int64_t shape[DDPC__ST_MAX_DIMS]; /* (ndim) */
    uint64_t begin, end;              /* bytes of the data section */
} ddpc__st_tensor;

/* A file read whole, its header parsed and checked against its size. */
typedef struct ddpc__st_file {
    unsigned char *buf;        /* owned: the whole file */
    size_t len;                /* bytes of buf */
    const unsigned char *data; /* into buf: the data section */
    ddpc__st_tensor *t;        /* (nt) in the header's order */
    int nt, cap_t;
    char **meta_k, **meta_v; /* (nmeta) __metadata__, owned */
    int nmeta, cap_meta;
} ddpc__st_file;

/* Reads path and validates it: length prefix against the file's size, the
 * header's JSON strictly (duplicate keys, unknown fields, dtypes, numbers),
 * offsets that match the shapes and tile the data exactly. DDPC_ERR_NOT_FOUND
 * when path does not exist, DDPC_ERR_IO naming the first problem otherwise.
 * On error f is left empty; either way ddpc__st_close(f) is safe. */
ddpc_status ddpc__st_open(const char *path, ddpc__st_file *f);
/* Frees what ddpc__st_open read; f is left empty (closing twice is harmless). */
void ddpc__st_close(ddpc__st_file *f);
/* The tensor called name, or NULL. */
const ddpc__st_tensor *ddpc__st_find(const ddpc__st_file *f, const char *name);
/* The __metadata__ value of key, or NULL. */
const char *ddpc__st_meta(const ddpc__st_file *f, const char *key);
/* Copies numel float32 values of tensor t (an F32 one of that many
 * elements: the caller checks) into dst, in host byte order. */
void ddpc__st_get_f32(const ddpc__st_file *f, const ddpc__st_tensor *t, float *dst, size_t numel);

/* One float32 tensor to write (all borrowed). */
typedef struct ddpc__st_out {
    const char *name;
    int ndim;
    int64_t shape[DDPC__ST_MAX_DIMS]; /* (ndim) */
    const float *data;                /* (numel) */
    size_t numel;
} ddpc__st_out;

/* Writes ts[0..nt) and the __metadata__ pairs meta[2i] = meta[2i+1]
 * (i < nmeta) to path atomically: into path.tmp.PID, fsync'd, renamed over
 * path, the directory fsync'd. On error path is untouched and the
 * temporary file removed. */
ddpc_status ddpc__st_write(const char *path, const char *const *meta, int nmeta,
                           const ddpc__st_out *ts, int nt);

#endif /* DDPC_NN_SAFETENSORS_H */
