/*
 * safetensors.c — the safetensors format (safetensors.h): a strict parser
 * for the header's JSON and the checks of its layout against the file,
 * a small JSON writer and atomic saving of float32 tensors.
 */
#include "nn/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "base/strbuf.h"

#define MAX_HEADER (100u << 20) /* the reference implementation's limit */

/* ------------------------------------------------------ header parser */

typedef struct parser {
    const char *s, *end; /* next byte, end of the header text */
    const char *start;   /* the header's first byte (file offset 8) */
    const char *path;
} parser;

static ddpc_status perr_at(parser *p, const char *what) {
    return ddpc__err(DDPC_ERR_IO, "%s: malformed safetensors header at byte %zu: %s", p->path,
                     (size_t)(p->s - p->start) + 8, what);
}

static void skip_ws(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
        p->s++;
}

static int expect(parser *p, char c) {
    skip_ws(p);
    if (p->s < p->end && *p->s == c) {
        p->s++;
        return 1;
    }
    return 0;
}

static void put_utf8(ddpc__strbuf *b, unsigned cp) {
    char u[4];
    if (cp < 0x80) {
        u[0] = (char)cp;
        ddpc__sb_put(b, u, 1);
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        ddpc__sb_put(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        ddpc__sb_put(b, u, 3);
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        ddpc__sb_put(b, u, 4);
    }
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

/* The escape after a backslash (p->s is past the backslash) into b; NULL,
 * or what is wrong with it. */
static const char *parse_escape(parser *p, ddpc__strbuf *b) {
    if (p->s >= p->end) return "unterminated escape";
    char e = *p->s++;
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
        static const char repl[] = "\"\\/\b\f\n\r\t";
        ddpc__sb_put(b, &repl[simple - "\"\\/bfnrt"], 1);
        return NULL;
    }
    if (e != 'u') return "bad escape in a string";
    unsigned cp;
    if (p->end - p->s < 4 || !hex4(p->s, &cp)) return "bad \\u escape";
    p->s += 4;
    if (cp >= 0xd800 && cp < 0xdc00) { /* surrogate pair */
        unsigned lo;
        if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u' || !hex4(p->s + 2, &lo) ||
            lo < 0xdc00 || lo >= 0xe000)
            return "unpaired surrogate in \\u escape";
        p->s += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    } else if (cp >= 0xdc00 && cp < 0xe000) {
        return "unpaired surrogate in \\u escape";
    }
    if (cp == 0) return "\\u0000 in a string";
    put_utf8(b, cp);
    return NULL;
}

/* A JSON string into a new malloc'd C string (no embedded NULs allowed). */
static ddpc_status parse_string(parser *p, char **out) {
    *out = NULL;
    skip_ws(p);
    if (p->s >= p->end || *p->s != '"') return perr_at(p, "expected a string");
    p->s++;
    ddpc__strbuf b = DDPC_STRBUF_HEAP;
    ddpc__sb_put(&b, "", 0);
    const char *bad = NULL;
    while (!bad) {
        if (p->s >= p->end) {
            bad = "unterminated string";
            break;
        }
        unsigned char c = (unsigned char)*p->s++;
        if (c == '"') break;
        if (c < 0x20)
            bad = "control character in a string";
        else if (c != '\\')
            ddpc__sb_put(&b, &c, 1);
        else
            bad = parse_escape(p, &b);
    }
    ddpc_status s = DDPC_OK;
    if (bad)
        s = perr_at(p, bad);
    else if (b.oom)
        s = ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory parsing the header", p->path);
    if (s != DDPC_OK) {
        ddpc__sb_free(&b);
        return s;
    }
    *out = b.p;
    return DDPC_OK;
}

/* A non-negative JSON integer (no sign, fraction or exponent), < 2^63. */
static ddpc_status parse_uint(parser *p, uint64_t *out) {
    skip_ws(p);
    const char *s = p->s;
    if (s >= p->end || *s < '0' || *s > '9') return perr_at(p, "expected a non-negative integer");
    if (*s == '0' && s + 1 < p->end && s[1] >= '0' && s[1] <= '9')
        return perr_at(p, "leading zero in a number");
    uint64_t v = 0;
    while (s < p->end && *s >= '0' && *s <= '9') {
        if (v > (UINT64_C(1) << 62)) return perr_at(p, "integer too large");
        v = v * 10 + (uint64_t)(*s - '0');
        s++;
    }
    if (s < p->end && (*s == '.' || *s == 'e' || *s == 'E'))
        return perr_at(p, "expected an integer, got a fraction");
    p->s = s;
    *out = v;
    return DDPC_OK;
}

static ddpc_status parse_dtype(parser *p, ddpc__st_tensor *t) {
    char *v;
    DDPC_CHECK(parse_string(p, &v));
    size_t n = strlen(v);
    if (n < sizeof t->dtype) memcpy(t->dtype, v, n + 1);
    free(v);
    return n < sizeof t->dtype ? DDPC_OK : perr_at(p, "unknown dtype");
}

static ddpc_status parse_shape(parser *p, ddpc__st_tensor *t) {
    if (!expect(p, '[')) return perr_at(p, "expected '[' for shape");
    t->ndim = 0;
    if (expect(p, ']')) return DDPC_OK;
    do {
        uint64_t d;
        DDPC_CHECK(parse_uint(p, &d));
        if (t->ndim == DDPC__ST_MAX_DIMS) return perr_at(p, "more than 8 dimensions");
        if (d > (UINT64_C(1) << 40)) return perr_at(p, "dimension too large");
        t->shape[t->ndim++] = (int64_t)d;
    } while (expect(p, ','));
    return expect(p, ']') ? DDPC_OK : perr_at(p, "expected ']' after shape");
}

static ddpc_status parse_offsets(parser *p, ddpc__st_tensor *t) {
    if (!expect(p, '[')) return perr_at(p, "expected '[' for data_offsets");
    DDPC_CHECK(parse_uint(p, &t->begin));
    if (!expect(p, ',')) return perr_at(p, "data_offsets needs two integers");
    DDPC_CHECK(parse_uint(p, &t->end));
    return expect(p, ']') ? DDPC_OK : perr_at(p, "data_offsets needs exactly two integers");
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}: all three, nothing else. */
static ddpc_status parse_tensor(parser *p, ddpc__st_tensor *t) {
    if (!expect(p, '{')) return perr_at(p, "expected '{' for a tensor");
    int seen_dtype = 0, seen_shape = 0, seen_off = 0;
    if (expect(p, '}')) return perr_at(p, "empty tensor entry");
    do {
        char *key;
        DDPC_CHECK(parse_string(p, &key));
        ddpc_status s;
        if (!expect(p, ':'))
            s = perr_at(p, "expected ':'");
        else if (!strcmp(key, "dtype"))
            s = seen_dtype++ ? perr_at(p, "duplicate \"dtype\"") : parse_dtype(p, t);
        else if (!strcmp(key, "shape"))
            s = seen_shape++ ? perr_at(p, "duplicate \"shape\"") : parse_shape(p, t);
        else if (!strcmp(key, "data_offsets"))
            s = seen_off++ ? perr_at(p, "duplicate \"data_offsets\"") : parse_offsets(p, t);
        else
            s = ddpc__err(DDPC_ERR_IO,
                          "%s: malformed safetensors header: tensor '%s' has unknown field \"%s\"",
                          p->path, t->name, key);
        free(key);
        if (s != DDPC_OK) return s;
    } while (expect(p, ','));
    if (!expect(p, '}')) return perr_at(p, "expected '}' after a tensor");
    if (!seen_dtype || !seen_shape || !seen_off)
        return ddpc__err(DDPC_ERR_IO, "%s: malformed safetensors header: tensor '%s' lacks %s",
                         p->path, t->name,
                         !seen_dtype   ? "\"dtype\""
                         : !seen_shape ? "\"shape\""
                                       : "\"data_offsets\"");
    return DDPC_OK;
}

/* Appends key = val to h's metadata, taking both. */
static ddpc_status add_meta(ddpc__st_file *h, const char *path, char *k, char *v) {
    if (h->nmeta == h->cap_meta) {
        int cap = h->cap_meta ? 2 * h->cap_meta : 16;
        char **nk = realloc(h->meta_k, (size_t)cap * sizeof *nk);
        if (nk) h->meta_k = nk;
        char **nv = nk ? realloc(h->meta_v, (size_t)cap * sizeof *nv) : NULL;
        if (nv) h->meta_v = nv;
        if (!nk || !nv) {
            free(k);
            free(v);
            return ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory", path);
        }
        h->cap_meta = cap;
    }
    h->meta_k[h->nmeta] = k;
    h->meta_v[h->nmeta++] = v;
    return DDPC_OK;
}

/* {"key": "value", ...}: strings only, keys unique. */
static ddpc_status parse_metadata(parser *p, ddpc__st_file *h) {
    if (!expect(p, '{')) return perr_at(p, "expected '{' for __metadata__");
    if (expect(p, '}')) return DDPC_OK;
    do {
        char *k, *v = NULL;
        DDPC_CHECK(parse_string(p, &k));
        ddpc_status s = DDPC_OK;
        if (!expect(p, ':'))
            s = perr_at(p, "expected ':'");
        else if ((s = parse_string(p, &v)) != DDPC_OK)
            s = ddpc__err_wrap(s, "__metadata__ values must be strings");
        else if (ddpc__st_meta(h, k))
            s = perr_at(p, "duplicate key in __metadata__");
        if (s != DDPC_OK) {
            free(k);
            free(v);
            return s;
        }
        DDPC_CHECK(add_meta(h, p->path, k, v));
    } while (expect(p, ','));
    if (!expect(p, '}')) return perr_at(p, "expected '}' after __metadata__");
    return DDPC_OK;
}

/* A new tensor entry called name (taken) at the end of h's list. */
static ddpc_status add_tensor(ddpc__st_file *h, const char *path, char *name,
                              ddpc__st_tensor **out) {
    if (ddpc__st_find(h, name)) {
        ddpc_status s = ddpc__err(
            DDPC_ERR_IO, "%s: malformed safetensors header: tensor '%s' appears twice", path, name);
        free(name);
        return s;
    }
    if (h->nt == h->cap_t) {
        int cap = h->cap_t ? 2 * h->cap_t : 16;
        ddpc__st_tensor *t = realloc(h->t, (size_t)cap * sizeof *t);
        if (!t) {
            free(name);
            return ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory", path);
        }
        h->t = t;
        h->cap_t = cap;
    }
    ddpc__st_tensor *t = &h->t[h->nt++];
    memset(t, 0, sizeof *t);
    t->name = name;
    *out = t;
    return DDPC_OK;
}

/* The header's JSON object: __metadata__ at most once, tensors with unique
 * names, nothing after it. */
static ddpc_status parse_json(parser *p, ddpc__st_file *h) {
    if (!expect(p, '{')) return perr_at(p, "expected '{'");
    int seen_meta = 0;
    if (!expect(p, '}')) {
        do {
            char *key;
            DDPC_CHECK(parse_string(p, &key));
            if (!expect(p, ':')) {
                free(key);
                return perr_at(p, "expected ':'");
            }
            if (!strcmp(key, "__metadata__")) {
                free(key);
                if (seen_meta++) return perr_at(p, "duplicate __metadata__");
                DDPC_CHECK(parse_metadata(p, h));
                continue;
            }
            ddpc__st_tensor *t = NULL;
            DDPC_CHECK(add_tensor(h, p->path, key, &t));
            DDPC_CHECK(parse_tensor(p, t));
        } while (expect(p, ','));
        if (!expect(p, '}')) return perr_at(p, "expected '}' or ','");
    }
    skip_ws(p);
    if (p->s != p->end) return perr_at(p, "trailing bytes after the header's JSON");
    return DDPC_OK;
}

static size_t dtype_bytes(const char *d) {
    static const struct {
        const char *n;
        size_t b;
    } t[] = { { "F64", 8 }, { "F32", 4 }, { "F16", 2 }, { "BF16", 2 }, { "I64", 8 },
              { "I32", 4 }, { "I16", 2 }, { "I8", 1 },  { "U64", 8 },  { "U32", 4 },
              { "U16", 2 }, { "U8", 1 },  { "BOOL", 1 } };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].n, d)) return t[i].b;
    return 0;
}

/* A known dtype, and data_offsets that hold exactly the shape's values. */
static ddpc_status check_size(const char *path, const ddpc__st_tensor *t) {
    size_t eb = dtype_bytes(t->dtype);
    if (!eb)
        return ddpc__err(DDPC_ERR_IO, "%s: tensor '%s' has unknown dtype \"%s\"", path, t->name,
                         t->dtype);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] && numel > (UINT64_C(1) << 62) / (uint64_t)t->shape[d])
            return ddpc__err(DDPC_ERR_IO, "%s: tensor '%s' is too large", path, t->name);
        numel *= (uint64_t)t->shape[d];
    }
    if (t->end < t->begin || t->end - t->begin != numel * eb)
        return ddpc__err(DDPC_ERR_IO,
                         "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                         "] do not hold %" PRIu64 " %s values",
                         path, t->name, t->begin, t->end, numel, t->dtype);
    return DDPC_OK;
}

static int cmp_begin(const void *a, const void *b) {
    const ddpc__st_tensor *x = *(const ddpc__st_tensor *const *)a,
                          *y = *(const ddpc__st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The tensors, in the order of their offsets, tile [0, data_len) exactly. */
static ddpc_status check_tiling(const char *path, const ddpc__st_file *h, uint64_t data_len) {
    const ddpc__st_tensor **order = malloc((size_t)(h->nt ? h->nt : 1) * sizeof *order);
    if (!order) return ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < h->nt; i++) order[i] = &h->t[i];
    qsort(order, (size_t)h->nt, sizeof *order, cmp_begin);
    ddpc_status s = DDPC_OK;
    uint64_t at = 0;
    for (int i = 0; i < h->nt; i++) {
        if (order[i]->begin != at) {
            s = ddpc__err(DDPC_ERR_IO,
                          "%s: tensor '%s' starts at byte %" PRIu64
                          " of the data, expected %" PRIu64
                          " (tensors must tile the data without gaps or overlaps)",
                          path, order[i]->name, order[i]->begin, at);
            goto done;
        }
        at = order[i]->end;
    }
    if (at != data_len)
        s = ddpc__err(DDPC_ERR_IO,
                      "%s: the header describes %" PRIu64
                      " bytes of data but the file holds %" PRIu64 "%s",
                      path, at, data_len, at > data_len ? " (truncated?)" : "");
done:
    free(order);
    return s;
}

/*
 * Parses the header text [hdr, hdr+n) into h and checks it against the
 * data's size: known dtypes, offsets that match the shapes, tensors that
 * tile [0, data_len) exactly, unique names.
 */
static ddpc_status parse_header(const char *path, const char *hdr, size_t n, uint64_t data_len,
                                ddpc__st_file *h) {
    parser p = { hdr, hdr + n, hdr, path };
    DDPC_CHECK(parse_json(&p, h));
    for (int i = 0; i < h->nt; i++) DDPC_CHECK(check_size(path, &h->t[i]));
    return check_tiling(path, h, data_len);
}

/* ------------------------------------------------------------ reading */

/* The whole of path into a new buffer. */
static ddpc_status read_file(const char *path, unsigned char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ddpc__err_errno(errno == ENOENT ? DDPC_ERR_NOT_FOUND : DDPC_ERR_IO, errno,
                               "checkpoint: cannot open %s", path);
    ddpc_status s = DDPC_OK;
    unsigned char *b = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        s = ddpc__err(DDPC_ERR_IO, "checkpoint: %s is not a regular file", path);
        goto done;
    }
    size_t n = (size_t)st.st_size;
    if (!(b = malloc(n ? n : 1))) {
        s = ddpc__err(DDPC_ERR_NOMEM, "checkpoint: out of memory for %s (%zu bytes)", path, n);
        goto done;
    }
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            s = r < 0 ? ddpc__err_errno(DDPC_ERR_IO, errno, "checkpoint: read %s", path)
                      : ddpc__err(DDPC_ERR_IO, "checkpoint: %s shrank while being read", path);
            goto done;
        }
        got += (size_t)r;
    }
    *buf = b;
    *len = n;
    b = NULL;
done:
    free(b);
    close(fd);
    return s;
}

ddpc_status ddpc__st_open(const char *path, ddpc__st_file *f) {
    memset(f, 0, sizeof *f);
    DDPC_CHECK(read_file(path, &f->buf, &f->len));
    ddpc_status s;
    if (f->len < 8) {
        s = ddpc__err(DDPC_ERR_IO, "checkpoint %s: %zu bytes is too short for a safetensors file",
                      path, f->len);
        goto fail;
    }
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)f->buf[i] << (8 * i);
    if (hl < 2 || hl > MAX_HEADER || hl > f->len - 8) {
        s = ddpc__err(DDPC_ERR_IO,
                      "checkpoint %s: header length %" PRIu64
                      " is impossible for a file of %zu bytes (not a safetensors file?)",
                      path, hl, f->len);
        goto fail;
    }
    f->data = f->buf + 8 + hl;
    if ((s = parse_header(path, (const char *)f->buf + 8, (size_t)hl, f->len - 8 - hl, f)) !=
        DDPC_OK)
        goto fail;
    return DDPC_OK;
fail:
    ddpc__st_close(f);
    return s;
}

void ddpc__st_close(ddpc__st_file *f) {
    for (int i = 0; i < f->nt; i++) free(f->t[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_k[i]);
        free(f->meta_v[i]);
    }
    free(f->t);
    free(f->meta_k);
    free(f->meta_v);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

const ddpc__st_tensor *ddpc__st_find(const ddpc__st_file *f, const char *name) {
    for (int i = 0; i < f->nt; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

const char *ddpc__st_meta(const ddpc__st_file *f, const char *key) {
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta_k[i], key)) return f->meta_v[i];
    return NULL;
}

void ddpc__st_get_f32(const ddpc__st_file *f, const ddpc__st_tensor *t, float *dst, size_t numel) {
    const unsigned char *src = f->data + t->begin;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < numel; i++) {
        uint32_t u = 0;
        for (int j = 0; j < 4; j++) u |= (uint32_t)src[4 * i + j] << (8 * j);
        memcpy(&dst[i], &u, 4);
    }
#else
    memcpy(dst, src, numel * sizeof(float));
#endif
}

/* ------------------------------------------------------------ writing */

/* A JSON string literal: quotes, backslash and control characters escaped. */
static void sb_json_str(ddpc__strbuf *b, const char *s) {
    ddpc__sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            ddpc__sb_put(b, e, 2);
        } else if (c < 0x20) {
            ddpc__sb_printf(b, "\\u%04x", c);
        } else {
            ddpc__sb_put(b, s, 1);
        }
    }
    ddpc__sb_put(b, "\"", 1);
}

/* The header's JSON, padded with spaces to a multiple of 8; *data_len is
 * the bytes of data it describes. */
static ddpc_status build_header(ddpc__strbuf *h, const char *const *meta, int nmeta,
                                const ddpc__st_out *ts, int nt, uint64_t *data_len) {
    ddpc__sb_puts(h, "{\"__metadata__\":{");
    for (int i = 0; i < nmeta; i++) {
        if (i) ddpc__sb_put(h, ",", 1);
        sb_json_str(h, meta[2 * i]);
        ddpc__sb_put(h, ":", 1);
        sb_json_str(h, meta[2 * i + 1]);
    }
    ddpc__sb_put(h, "}", 1);
    uint64_t off = 0;
    for (int i = 0; i < nt; i++) {
        ddpc__sb_put(h, ",", 1);
        sb_json_str(h, ts[i].name);
        ddpc__sb_puts(h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < ts[i].ndim; d++)
            ddpc__sb_printf(h, "%s%" PRId64, d ? "," : "", ts[i].shape[d]);
        uint64_t nb = (uint64_t)ts[i].numel * 4;
        ddpc__sb_printf(h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + nb);
        off += nb;
    }
    ddpc__sb_put(h, "}", 1);
    while (!h->oom && h->len % 8) ddpc__sb_put(h, " ", 1);
    *data_len = off;
    return h->oom ? ddpc__err(DDPC_ERR_NOMEM, "checkpoint save: out of memory for the header")
                  : DDPC_OK;
}

static ddpc_status write_all(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return ddpc__err_errno(DDPC_ERR_IO, errno, "%s: write", path);
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

/* Length, header and data into tmp, fsync'd. */
static ddpc_status write_file(const char *tmp, const ddpc__strbuf *h, const ddpc__st_out *ts,
                              int nt) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ddpc__err_errno(DDPC_ERR_IO, errno, "checkpoint save: cannot create %s", tmp);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h->len >> (8 * i));
    ddpc_status s = write_all(fd, len8, 8, tmp);
    if (s == DDPC_OK) s = write_all(fd, h->p, h->len, tmp);
    long delay_ms = 0; /* a test hook: a pause halfway, for a kill to land inside the write */
    if (ddpc__env_isset(DDPC_ENV_CKPT_DELAY_MS) &&
        ddpc__env_long(DDPC_ENV_CKPT_DELAY_MS, &delay_ms) != DDPC_OK)
        s = ddpc__err_wrap(DDPC_ERR_ENV, "checkpoint save");
    for (int i = 0; i < nt && s == DDPC_OK; i++) {
        if (i == nt / 2 && delay_ms > 0) ddpc__sleep((double)delay_ms / 1000);
        s = write_floats(fd, ts[i].data, ts[i].numel, tmp);
    }
    if (s == DDPC_OK && fsync(fd) != 0)
        s = ddpc__err_errno(DDPC_ERR_IO, errno, "checkpoint save: fsync %s", tmp);
    if (close(fd) != 0 && s == DDPC_OK)
        s = ddpc__err_errno(DDPC_ERR_IO, errno, "checkpoint save: close %s", tmp);
    return s;
}

/* Makes a rename in path's directory durable (best effort). */
static void sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : NULL;
    int dfd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
}

/*
 * 1. Build the header JSON, padded with spaces to a multiple of 8.
 * 2. Write length, header, data into path.tmp.PID; fsync.
 * 3. Rename over path; fsync the directory.
 */
ddpc_status ddpc__st_write(const char *path, const char *const *meta, int nmeta,
                           const ddpc__st_out *ts, int nt) {
    ddpc__strbuf h = DDPC_STRBUF_HEAP;
    ddpc__strbuf tmp = DDPC_STRBUF_HEAP;
    uint64_t data_len = 0;
    ddpc_status s = build_header(&h, meta, nmeta, ts, nt, &data_len);
    if (s != DDPC_OK) goto done;
    ddpc__sb_printf(&tmp, "%s.tmp.%ld", path, (long)getpid());
    if (tmp.oom) {
        s = ddpc__err(DDPC_ERR_NOMEM, "checkpoint save: out of memory");
        goto done;
    }
    s = write_file(tmp.p, &h, ts, nt);
    if (s == DDPC_OK && rename(tmp.p, path) != 0)
        s = ddpc__err_errno(DDPC_ERR_IO, errno, "checkpoint save: rename %s to %s", tmp.p, path);
    if (s != DDPC_OK) {
        unlink(tmp.p);
        s = ddpc__err_wrap(s, "checkpoint %s not written (the file there, if any, is unchanged)",
                           path);
        goto done;
    }
    sync_dir(path);
    DDPC_INFO(NN, "checkpoint: wrote %s (%d tensors, %" PRIu64 " bytes of data)", path, nt,
              data_len);
done:
    ddpc__sb_free(&tmp);
    ddpc__sb_free(&h);
    return s;
}
