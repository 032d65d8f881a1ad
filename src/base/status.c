/* status.c — status messages, dtype/op names, and the thread-local last error. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

static const char *const status_msgs[DDPC_STATUS_COUNT] = {
    [DDPC_OK] = "success",
    [DDPC_ERR_INVALID_ARG] = "invalid argument",
    [DDPC_ERR_ENV] = "bad environment variable",
    [DDPC_ERR_SYSTEM] = "system call failed",
    [DDPC_ERR_NOMEM] = "out of memory",
    [DDPC_ERR_TIMEOUT] = "timed out waiting for peers",
    [DDPC_ERR_PEER_LOST] = "lost a peer",
    [DDPC_ERR_MISMATCH] = "ranks issued mismatched operations",
    [DDPC_ERR_ABORTED] = "communicator aborted",
    [DDPC_ERR_PROTOCOL] = "malformed or unexpected message",
    [DDPC_ERR_NOT_FOUND] = "not found",
    [DDPC_ERR_IO] = "file input/output error",
    [DDPC_ERR_INTERNAL] = "internal error (a bug in ddpc)",
    [DDPC_ERR_DENIED] = "refused: not a member of the job",
};

const char *ddpc_status_str(ddpc_status s) {
    if ((int)s < 0 || s >= DDPC_STATUS_COUNT) return "unknown status";
    return status_msgs[s];
}

static _Thread_local char last_error[1024];

const char *ddpc_last_error(void) { return last_error; }
void ddpc__err_clear(void) { last_error[0] = '\0'; }

static ddpc_status set_error(ddpc_status s, int errnum, const char *fmt, va_list ap) {
    char tmp[sizeof last_error];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (errnum && n >= 0 && (size_t)n < sizeof tmp)
        snprintf(tmp + n, sizeof tmp - (size_t)n, ": %s", strerror(errnum));
    memcpy(last_error, tmp, sizeof tmp);
    ddpc__log(DDPC_LOG_TRACE, DDPC_SUB_ALL, "error %s: %s", ddpc_status_str(s), last_error);
    return s;
}

ddpc_status ddpc__err(ddpc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(s, 0, fmt, ap);
    va_end(ap);
    return s;
}

ddpc_status ddpc__err_errno(ddpc_status s, int errnum, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(s, errnum, fmt, ap);
    va_end(ap);
    return s;
}

ddpc_status ddpc__err_wrap(ddpc_status s, const char *fmt, ...) {
    char ctx[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    snprintf(last_error, sizeof last_error, "%s: %s", ctx, old[0] ? old : ddpc_status_str(s));
    return s;
}

/* ---------------------------------------------------------- dtypes, ops */

static const struct {
    const char *name;
    size_t size;
    const char *aliases[3];
} dtypes[DDPC_DTYPE_COUNT] = {
    [DDPC_INT8] = { "int8", 1, { "i8", "char", NULL } },
    [DDPC_UINT8] = { "uint8", 1, { "u8", "byte", NULL } },
    [DDPC_INT32] = { "int32", 4, { "i32", "int", NULL } },
    [DDPC_UINT32] = { "uint32", 4, { "u32", "uint", NULL } },
    [DDPC_INT64] = { "int64", 8, { "i64", "long", NULL } },
    [DDPC_UINT64] = { "uint64", 8, { "u64", "ulong", NULL } },
    [DDPC_FLOAT16] = { "float16", 2, { "f16", "half", NULL } },
    [DDPC_BFLOAT16] = { "bfloat16", 2, { "bf16", NULL, NULL } },
    [DDPC_FLOAT32] = { "float32", 4, { "f32", "float", NULL } },
    [DDPC_FLOAT64] = { "float64", 8, { "f64", "double", NULL } },
    [DDPC_INT16] = { "int16", 2, { "i16", "short", NULL } },
    [DDPC_UINT16] = { "uint16", 2, { "u16", "ushort", NULL } },
};

static const char *const op_names[DDPC_OP_COUNT] = { "sum", "prod", "max", "min",
                                                     "avg", "band", "bor", "bxor" };

size_t ddpc_dtype_size(ddpc_dtype t) {
    return ((int)t >= 0 && t < DDPC_DTYPE_COUNT) ? dtypes[t].size : 0;
}

const char *ddpc_dtype_name(ddpc_dtype t) {
    return ((int)t >= 0 && t < DDPC_DTYPE_COUNT) ? dtypes[t].name : "?";
}

const char *ddpc_op_name(ddpc_op op) {
    return ((int)op >= 0 && op < DDPC_OP_COUNT) ? op_names[op] : "?";
}

ddpc_status ddpc_dtype_parse(const char *s, ddpc_dtype *out) {
    for (int t = 0; s && t < DDPC_DTYPE_COUNT; t++) {
        if (strcasecmp(s, dtypes[t].name) == 0) goto found;
        for (int a = 0; a < 3 && dtypes[t].aliases[a]; a++)
            if (strcasecmp(s, dtypes[t].aliases[a]) == 0) goto found;
        continue;
    found:
        *out = (ddpc_dtype)t;
        return DDPC_OK;
    }
    return ddpc__err(DDPC_ERR_INVALID_ARG,
                     "unknown dtype '%s' (int8, uint8, int16, uint16, int32, uint32, int64, "
                     "uint64, float16, bfloat16, float32, float64)",
                     s ? s : "(null)");
}

ddpc_status ddpc_op_parse(const char *s, ddpc_op *out) {
    for (int o = 0; s && o < DDPC_OP_COUNT; o++)
        if (strcasecmp(s, op_names[o]) == 0) {
            *out = (ddpc_op)o;
            return DDPC_OK;
        }
    return ddpc__err(DDPC_ERR_INVALID_ARG,
                     "unknown op '%s' (sum, prod, max, min, avg, band, bor, bxor)",
                     s ? s : "(null)");
}

/* ------------------------------------------------ float16 and bfloat16 */

float ddpc_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ddpc_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
    if (ax < 0x38800000u) {                                   /* result is subnormal or zero */
        if (ax < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal */
        /* value * 2^24 = m * 2^(e - 126), with m the 24-bit significand */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        int shift = (int)(126 - e); /* 14 .. 24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ax - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t h = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float ddpc_bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ddpc_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
