/*
 * idx.c — the IDX file reader (the format of MNIST and Fashion-MNIST).
 *
 * An IDX file is: two zero bytes, a dtype code, a rank r; then r big-endian
 * uint32 dimensions; then the elements, big-endian, row-major. This file
 * reads one, gzip-compressed (zlib, recognised by the content's first two
 * bytes) or raw, and checks every field and the declared size against the
 * real size. What the arrays mean (images, labels) is left to mnist.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "ddpc/data.h"

/* Bytes per element of an IDX dtype code; 0 for an unknown code. */
static size_t idx_esize(int code) {
    switch (code) {
    case DDPC_IDX_UBYTE:
    case DDPC_IDX_SBYTE: return 1;
    case DDPC_IDX_SHORT: return 2;
    case DDPC_IDX_INT:
    case DDPC_IDX_FLOAT: return 4;
    case DDPC_IDX_DOUBLE: return 8;
    default: return 0;
    }
}

/* One open file, read through zlib (gz != NULL) or plain read(2). */
typedef struct reader {
    const char *path;
    int fd;
    gzFile gz;
} reader;

/* Reads up to n bytes into buf, retrying short reads, until n bytes or the
 * end of the data. Returns the number read in *got; DDPC_ERR_IO (naming the
 * path and zlib's or the system's reason) when the read itself failed. A
 * truncated gzip stream is reported here too ("unexpected end of file"). */
static ddpc_status rd(reader *r, void *buf, size_t n, size_t *got) {
    size_t have = 0;
    while (have < n) {
        size_t want = n - have;
        if (want > (1u << 30)) want = 1u << 30;
        if (r->gz) {
            int k = gzread(r->gz, (char *)buf + have, (unsigned)want);
            if (k < 0) {
                int zerr;
                const char *m = gzerror(r->gz, &zerr);
                return ddpc__err(DDPC_ERR_IO, "%s: corrupt gzip data (%s)", r->path, m);
            }
            if (k == 0) {
                int zerr;
                const char *m = gzerror(r->gz, &zerr);
                if (zerr != Z_OK)
                    return ddpc__err(DDPC_ERR_IO, "%s: truncated gzip stream (%s) after %zu bytes",
                                     r->path, m, have);
                break;
            }
            have += (size_t)k;
        } else {
            ssize_t k = read(r->fd, (char *)buf + have, want);
            if (k < 0) {
                if (errno == EINTR) continue;
                return ddpc__err_errno(DDPC_ERR_IO, errno, "%s: read failed", r->path);
            }
            if (k == 0) break;
            have += (size_t)k;
        }
    }
    *got = have;
    return DDPC_OK;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Converts count big-endian elements of esize bytes to host order in place. */
static void to_host_order(void *data, size_t count, size_t esize) {
    unsigned char *p = data;
    const uint16_t one = 1;
    if (esize == 1 || *(const unsigned char *)&one == 0) return; /* big-endian host */
    for (size_t i = 0; i < count; i++, p += esize)
        for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/*
 * Opens path: a missing file is DDPC_ERR_NOT_FOUND, an unreadable or empty
 * one DDPC_ERR_IO; gzip content (1f 8b) is read through zlib, anything else
 * directly, except that a name ending in ".gz" must hold gzip. *raw_size
 * gets the file's size for raw files (used to check the declared size
 * before allocating). On success r owns the descriptor.
 */
static ddpc_status open_reader(const char *path, reader *r, off_t *raw_size) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        int e = errno;
        if (e == ENOENT) return ddpc__err(DDPC_ERR_NOT_FOUND, "%s: no such file", path);
        return ddpc__err_errno(DDPC_ERR_IO, e, "%s: cannot open", path);
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(r->fd);
        return ddpc__err(DDPC_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(r->fd);
        return ddpc__err(DDPC_ERR_IO, "%s: empty file", path);
    }
    unsigned char m[2] = { 0, 0 };
    size_t got = 0;
    ddpc_status s = rd(r, m, 2, &got);
    if (s != DDPC_OK) {
        close(r->fd);
        return s;
    }
    int is_gz = got == 2 && m[0] == 0x1f && m[1] == 0x8b;
    if (!is_gz && ends_with(path, ".gz")) {
        close(r->fd);
        return ddpc__err(DDPC_ERR_IO, "%s: not gzip (starts with 0x%02x 0x%02x, want 0x1f 0x8b)",
                         path, m[0], got > 1 ? m[1] : 0);
    }
    if (lseek(r->fd, 0, SEEK_SET) != 0) {
        int e = errno;
        close(r->fd);
        return ddpc__err_errno(DDPC_ERR_IO, e, "%s: cannot seek", path);
    }
    *raw_size = st.st_size;
    if (is_gz) {
        r->gz = gzdopen(r->fd, "rb");
        if (!r->gz) {
            close(r->fd);
            return ddpc__err(DDPC_ERR_NOMEM, "%s: gzdopen failed", path);
        }
        gzbuffer(r->gz, 1u << 17);
        *raw_size = -1;
    }
    return DDPC_OK;
}

static void close_reader(reader *r) {
    if (r->gz)
        gzclose(r->gz); /* closes fd too */
    else if (r->fd >= 0)
        close(r->fd);
}

/* Reads and checks the header; fills x's dtype, ndim, dims, count and the
 * data size in *nbytes and the header size in *hbytes. */
static ddpc_status read_header(reader *r, ddpc_idx *x, size_t *nbytes, size_t *hbytes) {
    unsigned char h[4 + 4 * 8];
    size_t got;
    DDPC_CHECK(rd(r, h, 4, &got));
    if (got < 4)
        return ddpc__err(DDPC_ERR_IO, "%s: truncated header (%zu of 4 magic bytes)", r->path, got);
    if (h[0] != 0 || h[1] != 0)
        return ddpc__err(
            DDPC_ERR_IO,
            "%s: bad magic 0x%08x (an IDX file starts with 0x0000, a dtype code, a rank)", r->path,
            be32(h));
    size_t esize = idx_esize(h[2]);
    if (esize == 0)
        return ddpc__err(
            DDPC_ERR_IO,
            "%s: unknown dtype code 0x%02x (want 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)", r->path,
            h[2]);
    int ndim = h[3];
    if (ndim < 1 || ndim > 8)
        return ddpc__err(DDPC_ERR_IO, "%s: rank %d is out of range [1, 8]", r->path, ndim);
    DDPC_CHECK(rd(r, h + 4, 4 * (size_t)ndim, &got));
    if (got < 4 * (size_t)ndim)
        return ddpc__err(DDPC_ERR_IO, "%s: truncated header (%zu of %d dimension bytes)", r->path,
                         got, 4 * ndim);
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        uint32_t d = be32(h + 4 + 4 * i);
        if (d > INT_MAX)
            return ddpc__err(DDPC_ERR_IO, "%s: dimension %d is %u, too large", r->path, i, d);
        x->dims[i] = (int)d;
        if (__builtin_mul_overflow(count, (size_t)d, &count))
            return ddpc__err(DDPC_ERR_IO, "%s: dimensions overflow", r->path);
    }
    size_t nb;
    if (__builtin_mul_overflow(count, esize, &nb) || nb > ((size_t)1 << 40))
        return ddpc__err(DDPC_ERR_IO, "%s: declared data size is too large", r->path);
    x->dtype_code = h[2];
    x->ndim = ndim;
    x->count = count;
    *nbytes = nb;
    *hbytes = 4 + 4 * (size_t)ndim;
    return DDPC_OK;
}

/* Reads exactly nbytes of data into x->data, then checks nothing follows.
 * For gzip the buffer grows as data arrives, so a header that declares far
 * more than the stream holds costs no more memory than the stream. */
static ddpc_status read_data(reader *r, ddpc_idx *x, size_t nbytes) {
    size_t cap = nbytes, have = 0;
    if (r->gz && cap > (64u << 20)) cap = 64u << 20;
    x->data = malloc(cap ? cap : 1);
    if (!x->data) return ddpc__err(DDPC_ERR_NOMEM, "%s: cannot allocate %zu bytes", r->path, cap);
    while (have < nbytes) {
        if (have == cap) {
            size_t ncap = cap * 2 < nbytes ? cap * 2 : nbytes;
            void *p = realloc(x->data, ncap);
            if (!p)
                return ddpc__err(DDPC_ERR_NOMEM, "%s: cannot allocate %zu bytes", r->path, ncap);
            x->data = p;
            cap = ncap;
        }
        size_t got;
        DDPC_CHECK(rd(r, (char *)x->data + have, cap - have, &got));
        have += got;
        if (got == 0) break;
    }
    if (have < nbytes)
        return ddpc__err(DDPC_ERR_IO,
                         "%s: truncated data: the header declares %zu bytes, the file has %zu",
                         r->path, nbytes, have);
    unsigned char extra[64];
    size_t got;
    DDPC_CHECK(rd(r, extra, sizeof extra, &got));
    if (got > 0)
        return ddpc__err(DDPC_ERR_IO, "%s: trailing data after the %zu bytes the header declares",
                         r->path, nbytes);
    return DDPC_OK;
}

/*
 * Loads an IDX file (see data.h). Steps: 1. open, detect gzip; 2. read and
 * check the header; 3. for a raw file, check the declared size against the
 * file's size before allocating; 4. read the data and check nothing
 * follows; 5. convert to host byte order.
 */
ddpc_status ddpc_idx_create(const char *path, ddpc_idx **out) {
    if (!path || !out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_idx_create: NULL argument");
    *out = NULL;
    reader r;
    off_t raw_size = -1;
    DDPC_CHECK(open_reader(path, &r, &raw_size));
    ddpc_idx *x = calloc(1, sizeof *x);
    ddpc_status s = x ? DDPC_OK : ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory", path);
    size_t nbytes = 0, hbytes = 0;
    if (s == DDPC_OK) s = read_header(&r, x, &nbytes, &hbytes);
    if (s == DDPC_OK && raw_size >= 0) {
        size_t real = (size_t)raw_size - hbytes;
        if (real < nbytes)
            s = ddpc__err(DDPC_ERR_IO,
                          "%s: truncated data: the header declares %zu bytes, the file has %zu",
                          path, nbytes, real);
        else if (real > nbytes)
            s = ddpc__err(DDPC_ERR_IO,
                          "%s: trailing data: %zu bytes after the %zu bytes the header declares",
                          path, real - nbytes, nbytes);
    }
    if (s == DDPC_OK) s = read_data(&r, x, nbytes);
    close_reader(&r);
    if (s != DDPC_OK) {
        ddpc_idx_destroy(x);
        return s;
    }
    to_host_order(x->data, x->count, idx_esize(x->dtype_code));
    DDPC_TRACE(DATA, "%s: dtype 0x%02x, %d dims, %zu elements", path, x->dtype_code, x->ndim,
               x->count);
    *out = x;
    return DDPC_OK;
}

void ddpc_idx_destroy(ddpc_idx *x) {
    if (!x) return;
    free(x->data);
    free(x);
}
