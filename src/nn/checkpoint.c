/*
 * checkpoint.c — checkpoints in the safetensors format: a small JSON writer,
 * a strict parser for the header, atomic saving, validated loading.
 *
 * Format (https://github.com/huggingface/safetensors): u64 little-endian N;
 * N bytes of UTF-8 JSON {"__metadata__": {str: str}, name: {"dtype": "F32",
 * "shape": [..], "data_offsets": [begin, end]}, ...}; then the data, where
 * each tensor's bytes are [begin, end) counted from the end of the header.
 * The tensors must tile the data exactly (no gaps, no overlaps), as the
 * reference implementation demands. ddpc pads the header with spaces to a
 * multiple of 8 so the data is aligned.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/nn_impl.h"

#define MAX_HEADER (100u << 20) /* the reference implementation's limit */
#define MAX_DIMS 8

/* ------------------------------------------------------ growing buffer */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->oom = 1;
        return;
    }
    sb_put(b, tmp, (size_t)n);
}

/* A JSON string literal: quotes, backslash and control characters escaped. */
static void sb_json_str(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_put(b, e, 2);
        } else if (c < 0x20) {
            sb_printf(b, "\\u%04x", c);
        } else {
            sb_put(b, s, 1);
        }
    }
    sb_put(b, "\"", 1);
}

/* ------------------------------------------------------ header parser */

typedef struct st_tensor {
    char *name;
    char dtype[8];
    int ndim;
    int64_t shape[MAX_DIMS];
    uint64_t begin, end;
} st_tensor;

typedef struct st_header {
    st_tensor *t;
    int nt, cap_t;
    char **meta_k, **meta_v;
    int nmeta, cap_meta;
} st_header;

static void header_free(st_header *h) {
    for (int i = 0; i < h->nt; i++) free(h->t[i].name);
    for (int i = 0; i < h->nmeta; i++) {
        free(h->meta_k[i]);
        free(h->meta_v[i]);
    }
    free(h->t);
    free(h->meta_k);
    free(h->meta_v);
    memset(h, 0, sizeof *h);
}

static const char *meta_get(const st_header *h, const char *key) {
    for (int i = 0; i < h->nmeta; i++)
        if (!strcmp(h->meta_k[i], key)) return h->meta_v[i];
    return NULL;
}

typedef struct parser {
    const char *s, *end;  /* next byte, end of the header text */
    const char *start;    /* the header's first byte (file offset 8) */
    const char *path;
} parser;

static ddpc_status perr_at(parser *p, const char *what) {
    return ddpc_err(DDPC_ERR_IO, "%s: malformed safetensors header at byte %zu: %s", p->path,
                    (size_t)(p->s - p->start) + 8, what);
}

static void skip_ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')) p->s++;
}

static int expect(parser *p, char c) {
    skip_ws(p);
    if (p->s < p->end && *p->s == c) {
        p->s++;
        return 1;
    }
    return 0;
}

static void put_utf8(sbuf *b, unsigned cp) {
    char u[4];
    if (cp < 0x80) {
        u[0] = (char)cp;
        sb_put(b, u, 1);
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        sb_put(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        sb_put(b, u, 3);
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        sb_put(b, u, 4);
    }
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* A JSON string into a new malloc'd C string (no embedded NULs allowed). */
static ddpc_status parse_string(parser *p, char **out) {
    *out = NULL;
    skip_ws(p);
    if (p->s >= p->end || *p->s != '"') return perr_at(p, "expected a string");
    p->s++;
    sbuf b = {0};
    sb_put(&b, "", 0);
    while (1) {
        if (p->s >= p->end) {
            free(b.p);
            return perr_at(p, "unterminated string");
        }
        unsigned char c = (unsigned char)*p->s++;
        if (c == '"') break;
        if (c < 0x20) {
            free(b.p);
            return perr_at(p, "control character in a string");
        }
        if (c != '\\') {
            sb_put(&b, &c, 1);
            continue;
        }
        if (p->s >= p->end) {
            free(b.p);
            return perr_at(p, "unterminated escape");
        }
        char e = *p->s++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char repl[] = "\"\\/\b\f\n\r\t";
            sb_put(&b, &repl[simple - "\"\\/bfnrt"], 1);
        } else if (e == 'u') {
            unsigned cp;
            if (p->end - p->s < 4 || !hex4(p->s, &cp)) {
                free(b.p);
                return perr_at(p, "bad \\u escape");
            }
            p->s += 4;
            if (cp >= 0xd800 && cp < 0xdc00) { /* surrogate pair */
                unsigned lo;
                if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || !hex4(p->s + 2, &lo) ||
                    lo < 0xdc00 || lo >= 0xe000) {
                    free(b.p);
                    return perr_at(p, "unpaired surrogate in \\u escape");
                }
                p->s += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                free(b.p);
                return perr_at(p, "unpaired surrogate in \\u escape");
            }
            if (cp == 0) {
                free(b.p);
                return perr_at(p, "\\u0000 in a string");
            }
            put_utf8(&b, cp);
        } else {
            free(b.p);
            return perr_at(p, "bad escape in a string");
        }
    }
    if (b.oom) {
        free(b.p);
        return ddpc_err(DDPC_ERR_NOMEM, "%s: out of memory parsing the header", p->path);
    }
    *out = b.p;
    return DDPC_OK;
}

/* A non-negative JSON integer (no sign, fraction or exponent), < 2^63. */
static ddpc_status parse_uint(parser *p, uint64_t *out) {
    skip_ws(p);
    const char *s = p->s;
    if (s >= p->end || *s < '0' || *s > '9') return perr_at(p, "expected a non-negative integer");
    if (*s == '0' && s + 1 < p->end && s[1] >= '0' && s[1] <= '9') return perr_at(p, "leading zero in a number");
    uint64_t v = 0;
    while (s < p->end && *s >= '0' && *s <= '9') {
        if (v > (UINT64_C(1) << 62)) return perr_at(p, "integer too large");
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s < p->end && (*s == '.' || *s == 'e' || *s == 'E')) return perr_at(p, "expected an integer, got a fraction");
    p->s = s;
    *out = v;
    return DDPC_OK;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}: all three, nothing else. */
static ddpc_status parse_tensor(parser *p, st_tensor *t) {
    if (!expect(p, '{')) return perr_at(p, "expected '{' for a tensor");
    int seen_dtype = 0, seen_shape = 0, seen_off = 0;
    if (expect(p, '}')) return perr_at(p, "empty tensor entry");
    do {
        char *key;
        DDPC_CHECK(parse_string(p, &key));
        if (!expect(p, ':')) {
            free(key);
            return perr_at(p, "expected ':'");
        }
        if (!strcmp(key, "dtype")) {
            free(key);
            if (seen_dtype++) return perr_at(p, "duplicate \"dtype\"");
            char *v;
            DDPC_CHECK(parse_string(p, &v));
            if (strlen(v) >= sizeof t->dtype) {
                free(v);
                return perr_at(p, "unknown dtype");
            }
            strcpy(t->dtype, v);
            free(v);
        } else if (!strcmp(key, "shape")) {
            free(key);
            if (seen_shape++) return perr_at(p, "duplicate \"shape\"");
            if (!expect(p, '[')) return perr_at(p, "expected '[' for shape");
            t->ndim = 0;
            if (!expect(p, ']')) {
                do {
                    uint64_t d;
                    DDPC_CHECK(parse_uint(p, &d));
                    if (t->ndim == MAX_DIMS) return perr_at(p, "more than 8 dimensions");
                    if (d > (UINT64_C(1) << 40)) return perr_at(p, "dimension too large");
                    t->shape[t->ndim++] = (int64_t)d;
                } while (expect(p, ','));
                if (!expect(p, ']')) return perr_at(p, "expected ']' after shape");
            }
        } else if (!strcmp(key, "data_offsets")) {
            free(key);
            if (seen_off++) return perr_at(p, "duplicate \"data_offsets\"");
            if (!expect(p, '[')) return perr_at(p, "expected '[' for data_offsets");
            DDPC_CHECK(parse_uint(p, &t->begin));
            if (!expect(p, ',')) return perr_at(p, "data_offsets needs two integers");
            DDPC_CHECK(parse_uint(p, &t->end));
            if (!expect(p, ']')) return perr_at(p, "data_offsets needs exactly two integers");
        } else {
            ddpc_status s = ddpc_err(DDPC_ERR_IO, "%s: malformed safetensors header: tensor '%s' has unknown field \"%s\"",
                                     p->path, t->name, key);
            free(key);
            return s;
        }
    } while (expect(p, ','));
    if (!expect(p, '}')) return perr_at(p, "expected '}' after a tensor");
    if (!seen_dtype || !seen_shape || !seen_off)
        return ddpc_err(DDPC_ERR_IO, "%s: malformed safetensors header: tensor '%s' lacks %s", p->path, t->name,
                        !seen_dtype ? "\"dtype\"" : !seen_shape ? "\"shape\"" : "\"data_offsets\"");
    return DDPC_OK;
}

static ddpc_status parse_metadata(parser *p, st_header *h) {
    if (!expect(p, '{')) return perr_at(p, "expected '{' for __metadata__");
    if (expect(p, '}')) return DDPC_OK;
    do {
        char *k, *v;
        DDPC_CHECK(parse_string(p, &k));
        if (!expect(p, ':')) {
            free(k);
            return perr_at(p, "expected ':'");
        }
        ddpc_status s = parse_string(p, &v);
        if (s != DDPC_OK) {
            free(k);
            return ddpc_err_wrap(s, "__metadata__ values must be strings");
        }
        if (meta_get(h, k)) {
            free(k);
            free(v);
            return perr_at(p, "duplicate key in __metadata__");
        }
        if (h->nmeta == h->cap_meta) {
            int cap = h->cap_meta ? 2 * h->cap_meta : 16;
            char **nk = realloc(h->meta_k, (size_t)cap * sizeof *nk);
            if (nk) h->meta_k = nk;
            char **nv = nk ? realloc(h->meta_v, (size_t)cap * sizeof *nv) : NULL;
            if (nv) h->meta_v = nv;
            if (!nk || !nv) {
                free(k);
                free(v);
                return ddpc_err(DDPC_ERR_NOMEM, "%s: out of memory", p->path);
            }
            h->cap_meta = cap;
        }
        h->meta_k[h->nmeta] = k;
        h->meta_v[h->nmeta++] = v;
    } while (expect(p, ','));
    if (!expect(p, '}')) return perr_at(p, "expected '}' after __metadata__");
    return DDPC_OK;
}

static size_t dtype_bytes(const char *d) {
    static const struct { const char *n; size_t b; } t[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
        {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1}, {"BOOL", 1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].n, d)) return t[i].b;
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/*
 * Parses the header text [hdr, hdr+n) into h and checks it against the
 * data's size: known dtypes, offsets that match the shapes, tensors that
 * tile [0, data_len) exactly, unique names.
 */
static ddpc_status parse_header(const char *path, const char *hdr, size_t n, uint64_t data_len,
                                st_header *h) {
    parser p = {hdr, hdr + n, hdr, path};
    memset(h, 0, sizeof *h);
    if (!expect(&p, '{')) return perr_at(&p, "expected '{'");
    int seen_meta = 0;
    if (!expect(&p, '}')) {
        do {
            char *key;
            DDPC_CHECK(parse_string(&p, &key));
            if (!expect(&p, ':')) {
                free(key);
                return perr_at(&p, "expected ':'");
            }
            if (!strcmp(key, "__metadata__")) {
                free(key);
                if (seen_meta++) return perr_at(&p, "duplicate __metadata__");
                DDPC_CHECK(parse_metadata(&p, h));
                continue;
            }
            for (int i = 0; i < h->nt; i++)
                if (!strcmp(h->t[i].name, key)) {
                    ddpc_status s = ddpc_err(DDPC_ERR_IO, "%s: malformed safetensors header: tensor '%s' appears twice", path, key);
                    free(key);
                    return s;
                }
            if (h->nt == h->cap_t) {
                int cap = h->cap_t ? 2 * h->cap_t : 16;
                st_tensor *t = realloc(h->t, (size_t)cap * sizeof *t);
                if (!t) {
                    free(key);
                    return ddpc_err(DDPC_ERR_NOMEM, "%s: out of memory", path);
                }
                h->t = t;
                h->cap_t = cap;
            }
            st_tensor *t = &h->t[h->nt++];
            memset(t, 0, sizeof *t);
            t->name = key;
            DDPC_CHECK(parse_tensor(&p, t));
        } while (expect(&p, ','));
        if (!expect(&p, '}')) return perr_at(&p, "expected '}' or ','");
    }
    skip_ws(&p);
    if (p.s != p.end) return perr_at(&p, "trailing bytes after the header's JSON");
    /* sizes */
    st_tensor **order = malloc((size_t)(h->nt ? h->nt : 1) * sizeof *order);
    if (!order) return ddpc_err(DDPC_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < h->nt; i++) {
        st_tensor *t = &h->t[i];
        order[i] = t;
        size_t eb = dtype_bytes(t->dtype);
        if (!eb) {
            free(order);
            return ddpc_err(DDPC_ERR_IO, "%s: tensor '%s' has unknown dtype \"%s\"", path, t->name, t->dtype);
        }
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] && numel > (UINT64_C(1) << 62) / (uint64_t)t->shape[d]) {
                free(order);
                return ddpc_err(DDPC_ERR_IO, "%s: tensor '%s' is too large", path, t->name);
            }
            numel *= (uint64_t)t->shape[d];
        }
        if (t->end < t->begin || t->end - t->begin != numel * eb) {
            free(order);
            return ddpc_err(DDPC_ERR_IO, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] do not hold %" PRIu64 " %s values",
                            path, t->name, t->begin, t->end, numel, t->dtype);
        }
    }
    qsort(order, (size_t)h->nt, sizeof *order, cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < h->nt; i++) {
        if (order[i]->begin != at) {
            ddpc_status s = ddpc_err(DDPC_ERR_IO, "%s: tensor '%s' starts at byte %" PRIu64 " of the data, expected %" PRIu64 " (tensors must tile the data without gaps or overlaps)",
                                     path, order[i]->name, order[i]->begin, at);
            free(order);
            return s;
        }
        at = order[i]->end;
    }
    free(order);
    if (at != data_len)
        return ddpc_err(DDPC_ERR_IO, "%s: the header describes %" PRIu64 " bytes of data but the file holds %" PRIu64 "%s",
                        path, at, data_len, at > data_len ? " (truncated?)" : "");
    return DDPC_OK;
}

/* ------------------------------------------------------------- saving */

typedef struct out_tensor {
    char name[96];
    const ddpc_param *p; /* shape */
    const float *data;   /* (p->numel) */
} out_tensor;

static void put_le_u64(unsigned char *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

static ddpc_status write_all(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return ddpc_err_errno(DDPC_ERR_IO, errno, "%s: write", path);
        }
        p += w;
        n -= (size_t)w;
    }
    return DDPC_OK;
}

/* Writes floats as little-endian bytes (a copy on big-endian hosts only). */
static ddpc_status write_floats(int fd, const float *x, size_t n, const char *path) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    unsigned char tmp[4096];
    while (n) {
        size_t k = n < 1024 ? n : 1024;
        for (size_t i = 0; i < k; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            for (int j = 0; j < 4; j++) tmp[4 * i + j] = (unsigned char)(u >> (8 * j));
        }
        DDPC_CHECK(write_all(fd, tmp, 4 * k, path));
        x += k;
        n -= k;
    }
    return DDPC_OK;
#else
    return write_all(fd, x, n * sizeof(float), path);
#endif
}

static void read_floats(float *dst, const unsigned char *src, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u = 0;
        for (int j = 0; j < 4; j++) u |= (uint32_t)src[4 * i + j] << (8 * j);
        memcpy(&dst[i], &u, 4);
    }
#else
    memcpy(dst, src, n * sizeof(float));
#endif
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
            if (c >= '0' && c <= '9') v |= (uint64_t)(c - '0');
            else if (c >= 'a' && c <= 'f') v |= (uint64_t)(c - 'a' + 10);
            else return 0;
        }
        r->s[i] = v;
    }
    return 1;
}

/*
 * 1. List the tensors: parameters, then optimizer state blocks.
 * 2. Build the header JSON, padded with spaces to a multiple of 8.
 * 3. Write length, header, data into path.tmp.PID; fsync; rename over path;
 *    fsync the directory.
 */
ddpc_status ddpc_checkpoint_save(const char *path, const ddpc_model *m, const ddpc_optim *optim,
                                 const ddpc_ckpt_meta *meta) {
    if (!path || !*path) return ddpc_err(DDPC_ERR_INVALID_ARG, "checkpoint save: path is empty");
    if (!m || !m->built) return ddpc_err(DDPC_ERR_INVALID_ARG, "checkpoint save: model is NULL or not built");
    ddpc_optim *o = (ddpc_optim *)optim; /* only read */
    int nstate = ddpc_optim_num_state(o);
    int nt = m->nparams * (1 + nstate);
    out_tensor *ts = calloc((size_t)(nt ? nt : 1), sizeof *ts);
    if (!ts) return ddpc_err(DDPC_ERR_NOMEM, "checkpoint save: out of memory");
    int k = 0;
    for (int i = 0; i < m->nparams; i++) {
        snprintf(ts[k].name, sizeof ts[k].name, "%s", m->params[i].name);
        ts[k].p = &m->params[i];
        ts[k++].data = m->params[i].data;
    }
    for (int j = 0; j < nstate; j++) {
        const char *sname;
        float *blk = ddpc_optim_state(o, j, &sname);
        for (int i = 0; i < m->nparams; i++) {
            snprintf(ts[k].name, sizeof ts[k].name, "optim.%s.%s", m->params[i].name, sname);
            ts[k].p = &m->params[i];
            ts[k++].data = blk + m->params[i].offset;
        }
    }
    /* header */
    sbuf h = {0};
    char rhex[65];
    rng_hex(&m->rng, rhex);
    sb_put(&h, "{\"__metadata__\":{\"format\":\"ddpc\"", 32);
    sb_printf(&h, ",\"epoch\":\"%" PRIu64 "\",\"step\":\"%" PRIu64 "\"", meta ? meta->epoch : 0, meta ? meta->step : 0);
    sb_printf(&h, ",\"rng\":\"%s\"", rhex);
    if (o) {
        const ddpc_optim_options *op = ddpc_optim_get_options(o);
        sb_printf(&h, ",\"optim\":\"%s\",\"optim.steps\":\"%" PRIu64 "\",\"optim.lr\":\"%.9g\"",
                  ddpc_optim_kind_name(op->kind), ddpc_optim_steps(o), (double)op->lr);
    }
    sb_put(&h, "}", 1);
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        sb_put(&h, ",", 1);
        sb_json_str(&h, ts[i].name);
        sb_put(&h, ":{\"dtype\":\"F32\",\"shape\":[", 25);
        for (int d = 0; d < ts[i].p->ndim; d++) sb_printf(&h, "%s%d", d ? "," : "", ts[i].p->shape[d]);
        uint64_t nb = (uint64_t)ts[i].p->numel * 4;
        sb_printf(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + nb);
        off += nb;
    }
    sb_put(&h, "}", 1);
    while (!h.oom && h.len % 8) sb_put(&h, " ", 1);
    if (h.oom) {
        free(h.p);
        free(ts);
        return ddpc_err(DDPC_ERR_NOMEM, "checkpoint save: out of memory for the header");
    }
    /* file */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(h.p);
        free(ts);
        return ddpc_err(DDPC_ERR_NOMEM, "checkpoint save: out of memory");
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    ddpc_status s = DDPC_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        s = ddpc_err_errno(DDPC_ERR_IO, errno, "checkpoint save: cannot create %s", tmp);
        goto done;
    }
    unsigned char len8[8];
    put_le_u64(len8, h.len);
    s = write_all(fd, len8, 8, tmp);
    if (s == DDPC_OK) s = write_all(fd, h.p, h.len, tmp);
    for (int i = 0; i < nt && s == DDPC_OK; i++) s = write_floats(fd, ts[i].data, ts[i].p->numel, tmp);
    if (s == DDPC_OK && fsync(fd) != 0) s = ddpc_err_errno(DDPC_ERR_IO, errno, "checkpoint save: fsync %s", tmp);
    if (close(fd) != 0 && s == DDPC_OK) s = ddpc_err_errno(DDPC_ERR_IO, errno, "checkpoint save: close %s", tmp);
    if (s == DDPC_OK && rename(tmp, path) != 0)
        s = ddpc_err_errno(DDPC_ERR_IO, errno, "checkpoint save: rename %s to %s", tmp, path);
    if (s != DDPC_OK) {
        unlink(tmp);
    } else {
        /* make the rename itself durable: fsync the directory (best effort) */
        char *slash = strrchr(tmp, '/');
        if (slash) *slash = 0;
        int dfd = open(slash ? (slash == tmp ? "/" : tmp) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        DDPC_INFO(NN, "checkpoint: wrote %s (%d tensors, %" PRIu64 " bytes of data)", path, nt, off);
    }
done:
    free(tmp);
    free(h.p);
    free(ts);
    return s;
}

/* ------------------------------------------------------------ loading */

static ddpc_status read_file(const char *path, unsigned char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ddpc_err_errno(errno == ENOENT ? DDPC_ERR_NOT_FOUND : DDPC_ERR_IO, errno, "checkpoint: cannot open %s", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ddpc_err(DDPC_ERR_IO, "checkpoint: %s is not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return ddpc_err(DDPC_ERR_NOMEM, "checkpoint: out of memory for %s (%zu bytes)", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            free(b);
            return r < 0 ? ddpc_err_errno(DDPC_ERR_IO, e, "checkpoint: read %s", path)
                         : ddpc_err(DDPC_ERR_IO, "checkpoint: %s shrank while being read", path);
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return DDPC_OK;
}

static const st_tensor *find_tensor(const st_header *h, const char *name) {
    for (int i = 0; i < h->nt; i++)
        if (!strcmp(h->t[i].name, name)) return &h->t[i];
    return NULL;
}

static void shape_str(char *out, size_t cap, int ndim, const int64_t *shape) {
    size_t len = 0;
    len += (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < ndim && len < cap; d++)
        len += (size_t)snprintf(out + len, cap - len, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (len < cap) snprintf(out + len, cap - len, "]");
}

/* t must be F32 with p's shape; otherwise a mismatch naming it. */
static ddpc_status check_tensor(const char *path, const st_tensor *t, const char *name, const ddpc_param *p) {
    if (!t) return ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s has no tensor '%s' that the model needs", path, name);
    if (strcmp(t->dtype, "F32"))
        return ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s: tensor '%s' is %s, the model's is F32", path, name, t->dtype);
    int64_t ms[4];
    for (int d = 0; d < p->ndim; d++) ms[d] = p->shape[d];
    int same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == ms[d];
    if (!same) {
        char a[128], b[128];
        shape_str(a, sizeof a, t->ndim, t->shape);
        shape_str(b, sizeof b, p->ndim, ms);
        return ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s: tensor '%s' has shape %s, the model's has %s", path, name, a, b);
    }
    return DDPC_OK;
}

static ddpc_status parse_u64_meta(const char *path, const st_header *h, const char *key, uint64_t *out) {
    const char *v = meta_get(h, key);
    *out = 0;
    if (!v) return DDPC_OK;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-')
        return ddpc_err(DDPC_ERR_IO, "checkpoint %s: __metadata__ \"%s\" = \"%s\" is not an integer", path, key, v);
    *out = x;
    return DDPC_OK;
}

/*
 * 1. Read the file; check the length prefix against the file's size.
 * 2. Parse and validate the header (parse_header).
 * 3. Match every model parameter and optimizer state block to a tensor, and
 *    every tensor to something in the model; the first mismatch is named.
 * 4. Only then copy the data in and set the metadata.
 */
ddpc_status ddpc_checkpoint_load(const char *path, ddpc_model *m, ddpc_optim *optim,
                                 ddpc_ckpt_meta *meta) {
    if (!path || !*path) return ddpc_err(DDPC_ERR_INVALID_ARG, "checkpoint load: path is empty");
    if (!m || !m->built) return ddpc_err(DDPC_ERR_INVALID_ARG, "checkpoint load: model is NULL or not built");
    unsigned char *buf;
    size_t len;
    DDPC_CHECK(read_file(path, &buf, &len));
    ddpc_status s = DDPC_OK;
    st_header h = {0};
    int *used = NULL;
    if (len < 8) {
        s = ddpc_err(DDPC_ERR_IO, "checkpoint %s: %zu bytes is too short for a safetensors file", path, len);
        goto done;
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    if (hl < 2 || hl > MAX_HEADER || hl > len - 8) {
        s = ddpc_err(DDPC_ERR_IO, "checkpoint %s: header length %" PRIu64 " is impossible for a file of %zu bytes (not a safetensors file?)",
                     path, hl, len);
        goto done;
    }
    const unsigned char *data = buf + 8 + hl;
    if ((s = parse_header(path, (const char *)buf + 8, (size_t)hl, len - 8 - hl, &h)) != DDPC_OK) goto done;
    used = calloc((size_t)(h.nt ? h.nt : 1), sizeof *used);
    if (!used) {
        s = ddpc_err(DDPC_ERR_NOMEM, "checkpoint: out of memory");
        goto done;
    }
    /* 3. parameters */
    for (int i = 0; i < m->nparams; i++) {
        const st_tensor *t = find_tensor(&h, m->params[i].name);
        if ((s = check_tensor(path, t, m->params[i].name, &m->params[i])) != DDPC_OK) goto done;
        used[t - h.t] = 1;
    }
    /* 3. optimizer */
    uint64_t osteps = 0;
    const char *okind = meta_get(&h, "optim");
    if ((s = parse_u64_meta(path, &h, "optim.steps", &osteps)) != DDPC_OK) goto done;
    if (optim) {
        const char *want = ddpc_optim_kind_name(ddpc_optim_get_options(optim)->kind);
        if (!okind) {
            s = ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s has no optimizer state (saved without one); the trainer's optimizer is %s", path, want);
            goto done;
        }
        if (strcmp(okind, want)) {
            s = ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s holds %s optimizer state, the optimizer is %s", path, okind, want);
            goto done;
        }
        for (int j = 0; j < ddpc_optim_num_state(optim); j++) {
            const char *sname;
            ddpc_optim_state(optim, j, &sname);
            for (int i = 0; i < m->nparams; i++) {
                char name[128];
                snprintf(name, sizeof name, "optim.%s.%s", m->params[i].name, sname);
                const st_tensor *t = find_tensor(&h, name);
                if (!t && osteps == 0) continue; /* never stepped: no state to restore */
                if ((s = check_tensor(path, t, name, &m->params[i])) != DDPC_OK) goto done;
                used[t - h.t] = 1;
            }
        }
    }
    for (int i = 0; i < h.nt; i++) {
        if (used[i]) continue;
        if (!strncmp(h.t[i].name, "optim.", 6)) {
            if (!optim) continue; /* weights only */
            s = ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s: tensor '%s' is optimizer state that this %s optimizer does not keep%s",
                         path, h.t[i].name, okind, ddpc_optim_num_state(optim) == 0 ? " (it has no momentum)" : "");
            goto done;
        }
        s = ddpc_err(DDPC_ERR_MISMATCH, "checkpoint %s: tensor '%s' matches nothing in the model (%s)", path,
                     h.t[i].name, m->desc);
        goto done;
    }
    ddpc_ckpt_meta mt = {0, 0};
    if ((s = parse_u64_meta(path, &h, "epoch", &mt.epoch)) != DDPC_OK) goto done;
    if ((s = parse_u64_meta(path, &h, "step", &mt.step)) != DDPC_OK) goto done;
    ddpc_rng rng = m->rng;
    const char *rh = meta_get(&h, "rng");
    if (rh && !rng_unhex(rh, &rng)) {
        s = ddpc_err(DDPC_ERR_IO, "checkpoint %s: __metadata__ \"rng\" is not 64 hex digits", path);
        goto done;
    }
    /* 4. commit */
    for (int i = 0; i < m->nparams; i++) {
        const st_tensor *t = find_tensor(&h, m->params[i].name);
        read_floats(m->params[i].data, data + t->begin, m->params[i].numel);
    }
    if (optim) {
        for (int j = 0; j < ddpc_optim_num_state(optim); j++) {
            const char *sname;
            float *blk = ddpc_optim_state(optim, j, &sname);
            for (int i = 0; i < m->nparams; i++) {
                char name[128];
                snprintf(name, sizeof name, "optim.%s.%s", m->params[i].name, sname);
                const st_tensor *t = find_tensor(&h, name);
                if (t) read_floats(blk + m->params[i].offset, data + t->begin, m->params[i].numel);
                else memset(blk + m->params[i].offset, 0, m->params[i].numel * sizeof(float));
            }
        }
        ddpc_optim_set_steps(optim, osteps);
    }
    m->rng = rng;
    if (meta) *meta = mt;
    DDPC_INFO(NN, "checkpoint: loaded %s (epoch %" PRIu64 ", step %" PRIu64 ")", path, mt.epoch, mt.step);
done:
    free(used);
    header_free(&h);
    free(buf);
    return s;
}
