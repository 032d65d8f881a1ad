/*
 * fuzz_idx.c — ddpc_idx_create on arbitrary bytes. The first byte picks the
 * form: odd, the rest is gzip-compressed first (so the fuzzer reaches the
 * IDX checks behind zlib); even, the rest is the file as it is.
 * Promises checked: a loaded file's element count is the product of its
 * dimensions and, for a raw file, header plus elements is exactly the file;
 * an error leaves *out NULL and names the file.
 */
#include <string.h>
#include <zlib.h>

#include "ddpc/data.h"
#include "fuzz/fuzz.h"

static size_t elem_size(int code) {
    switch (code) {
    case DDPC_IDX_UBYTE:
    case DDPC_IDX_SBYTE: return 1;
    case DDPC_IDX_SHORT: return 2;
    case DDPC_IDX_DOUBLE: return 8;
    default: return 4;
    }
}

int fuzz_idx(const uint8_t *data, size_t size) {
    if (size == 0 || size > (1u << 20)) return 0;
    int gz = data[0] & 1;
    const uint8_t *body = data + 1;
    size_t n = size - 1;
    unsigned char *z = NULL;
    const char *path;
    if (gz) {
        z_stream s;
        memset(&s, 0, sizeof s);
        if (deflateInit2(&s, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            fuzz_fail("deflateInit2");
        size_t cap = deflateBound(&s, (uLong)n) + 32;
        z = malloc(cap);
        if (!z) fuzz_fail("out of memory");
        s.next_in = (Bytef *)body;
        s.avail_in = (uInt)n;
        s.next_out = z;
        s.avail_out = (uInt)cap;
        if (deflate(&s, Z_FINISH) != Z_STREAM_END) fuzz_fail("deflate");
        path = fuzz_file("idx", z, cap - s.avail_out);
        deflateEnd(&s);
    } else {
        path = fuzz_file("idx", body, n);
    }
    ddpc_idx *x = (ddpc_idx *)(uintptr_t)1; /* must come back NULL on error */
    ddpc_status st = ddpc_idx_create(path, &x);
    if (st == DDPC_OK) {
        if (x->ndim < 1 || x->ndim > 8) fuzz_fail("loaded with rank %d", x->ndim);
        size_t want = 1;
        for (int d = 0; d < x->ndim; d++) want *= (size_t)x->dims[d];
        if (x->count != want) fuzz_fail("count %zu, dims give %zu", x->count, want);
        size_t whole = 4 + 4 * (size_t)x->ndim + x->count * elem_size(x->dtype_code);
        if (!gz && whole != n) fuzz_fail("loaded %zu bytes' worth from a %zu-byte file", whole, n);
        if (x->count && !x->data) fuzz_fail("no data for %zu elements", x->count);
        ddpc_idx_destroy(x);
    } else {
        if (x != NULL) fuzz_fail("error %s left *out set", ddpc_status_str(st));
        if (!strstr(ddpc_last_error(), path))
            fuzz_fail("error does not name the file: %s", ddpc_last_error());
    }
    free(z);
    return 0;
}

#ifdef DDPC_FUZZ_ENTRY_idx
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_idx(data, size); }
#endif
