/* test_reduce.c — the reduction kernels (every dtype x op x form, counts 0, 1,
 * 7, 4097, aliasing, untouched tails), AVG finish, and the float16/bfloat16
 * conversions (F16C and portable) against the scalar ones in base. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/reduce.h"
#include "test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static int is_signed_int(ddpc_dtype t) {
    return t == DDPC_INT8 || t == DDPC_INT16 || t == DDPC_INT32 || t == DDPC_INT64;
}
static int is_int(ddpc_dtype t) { return t <= DDPC_UINT64 || t == DDPC_INT16 || t == DDPC_UINT16; }
static int is_bitwise(ddpc_op op) { return op == DDPC_BAND || op == DDPC_BOR || op == DDPC_BXOR; }

/* Element i of buffer p of type t, widened: integers as raw 64-bit values
 * (sign- or zero-extended), floats as double (half types decoded). */
static int64_t get_i(const void *p, size_t i, ddpc_dtype t) {
    switch (t) {
    case DDPC_INT8: return ((const int8_t *)p)[i];
    case DDPC_UINT8: return ((const uint8_t *)p)[i];
    case DDPC_INT16: return ((const int16_t *)p)[i];
    case DDPC_UINT16: return ((const uint16_t *)p)[i];
    case DDPC_INT32: return ((const int32_t *)p)[i];
    case DDPC_UINT32: return ((const uint32_t *)p)[i];
    case DDPC_INT64: return ((const int64_t *)p)[i];
    case DDPC_UINT64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
    }
}
static void set_i(void *p, size_t i, ddpc_dtype t, uint64_t v) {
    switch (t) {
    case DDPC_INT8:
    case DDPC_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case DDPC_INT16:
    case DDPC_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case DDPC_INT32:
    case DDPC_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case DDPC_INT64:
    case DDPC_UINT64: ((uint64_t *)p)[i] = v; break;
    default: break;
    }
}
static double get_f(const void *p, size_t i, ddpc_dtype t) {
    switch (t) {
    case DDPC_FLOAT16: return ddpc_half_to_float(((const uint16_t *)p)[i]);
    case DDPC_BFLOAT16: return ddpc_bf16_to_float(((const uint16_t *)p)[i]);
    case DDPC_FLOAT32: return ((const float *)p)[i];
    case DDPC_FLOAT64: return ((const double *)p)[i];
    default: return 0;
    }
}

/* Random test values: integers over their whole range (so sums and products
 * wrap); floats of either sign and moderate magnitude, with the occasional
 * NaN, infinity and signed zero. */
static void fill(void *p, size_t n, ddpc_dtype t) {
    size_t es = ddpc_dtype_size(t);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        if (is_int(t)) {
            memcpy((char *)p + i * es, &r, es);
            continue;
        }
        double v = ((double)(int64_t)(r >> 11) / (double)(1ull << 52)) * 8.0;
        switch (r & 63) {
        case 0: v = NAN; break;
        case 1: v = INFINITY; break;
        case 2: v = -INFINITY; break;
        case 3: v = -0.0; break;
        case 4: v = 0.0; break;
        default: break;
        }
        switch (t) {
        case DDPC_FLOAT16: ((uint16_t *)p)[i] = ddpc_float_to_half((float)v); break;
        case DDPC_BFLOAT16: ((uint16_t *)p)[i] = ddpc_float_to_bf16((float)v); break;
        case DDPC_FLOAT32: ((float *)p)[i] = (float)v; break;
        case DDPC_FLOAT64: ((double *)p)[i] = v; break;
        default: break;
        }
    }
}

static double fop(double x, double y, ddpc_op op) {
    switch (op) {
    case DDPC_SUM:
    case DDPC_AVG: return x + y;
    case DDPC_PROD: return x * y;
    case DDPC_MAX: return isnan(x) || isnan(y) ? NAN : (x > y ? x : y);
    case DDPC_MIN: return isnan(x) || isnan(y) ? NAN : (x < y ? x : y);
    default: return 0;
    }
}

/* The same in float arithmetic (no double rounding for float-based types). */
static float fopf(float x, float y, ddpc_op op) {
    switch (op) {
    case DDPC_SUM:
    case DDPC_AVG: return x + y;
    case DDPC_PROD: return x * y;
    case DDPC_MAX: return isnan(x) || isnan(y) ? NAN : (x > y ? x : y);
    case DDPC_MIN: return isnan(x) || isnan(y) ? NAN : (x < y ? x : y);
    default: return 0;
    }
}

/* ref[i] = a[i] op b[i], element by element, in the most direct way. */
static void reference(void *ref, const void *a, const void *b, size_t n, ddpc_dtype t, ddpc_op op) {
    for (size_t i = 0; i < n; i++) {
        if (is_int(t)) {
            int64_t x = get_i(a, i, t), y = get_i(b, i, t);
            uint64_t ux = (uint64_t)x, uy = (uint64_t)y, r;
            int sgn = is_signed_int(t);
            switch (op) {
            case DDPC_SUM:
            case DDPC_AVG: r = ux + uy; break;
            case DDPC_PROD: r = ux * uy; break;
            case DDPC_MAX: r = (sgn ? x > y : ux > uy) ? ux : uy; break;
            case DDPC_BAND: r = ux & uy; break;
            case DDPC_BOR: r = ux | uy; break;
            case DDPC_BXOR: r = ux ^ uy; break;
            default: r = (sgn ? x < y : ux < uy) ? ux : uy; break;
            }
            set_i(ref, i, t, r);
            continue;
        }
        switch (t) {
        case DDPC_FLOAT16:
            ((uint16_t *)ref)[i] =
                ddpc_float_to_half(fopf((float)get_f(a, i, t), (float)get_f(b, i, t), op));
            break;
        case DDPC_BFLOAT16:
            ((uint16_t *)ref)[i] =
                ddpc_float_to_bf16(fopf((float)get_f(a, i, t), (float)get_f(b, i, t), op));
            break;
        case DDPC_FLOAT32:
            ((float *)ref)[i] = fopf(((const float *)a)[i], ((const float *)b)[i], op);
            break;
        case DDPC_FLOAT64: ((double *)ref)[i] = fop(get_f(a, i, t), get_f(b, i, t), op); break;
        default: break;
        }
    }
}

/* Checks got[0..n) against want element by element (NaN matches any NaN). */
static void expect_equal(const void *got, const void *want, size_t n, ddpc_dtype t, ddpc_op op,
                         const char *form) {
    size_t es = ddpc_dtype_size(t);
    for (size_t i = 0; i < n; i++) {
        const char *g = (const char *)got + i * es, *w = (const char *)want + i * es;
        if (memcmp(g, w, es) == 0) continue;
        if (!is_int(t) && isnan(get_f(got, i, t)) && isnan(get_f(want, i, t))) continue;
        if (is_int(t))
            t_fail(__FILE__, __LINE__, "%s %s %s n=%zu: element %zu is %lld, want %lld", form,
                   ddpc_dtype_name(t), ddpc_op_name(op), n, i, (long long)get_i(got, i, t),
                   (long long)get_i(want, i, t));
        t_fail(__FILE__, __LINE__, "%s %s %s n=%zu: element %zu is %.9g, want %.9g", form,
               ddpc_dtype_name(t), ddpc_op_name(op), n, i, get_f(got, i, t), get_f(want, i, t));
    }
}

#define GUARD 16 /* elements past count that must stay untouched */

static void check_tail(const unsigned char *p, size_t n, size_t es, const char *form) {
    for (size_t i = n * es; i < (n + GUARD) * es; i++)
        CHECK_MSG(p[i] == 0xa5, "%s wrote past count %zu (byte %zu)", form, n, i);
}

static void run_matrix(void) {
    static const size_t counts[] = { 0, 1, 7, 4097 };
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++) {
        size_t es = ddpc_dtype_size((ddpc_dtype)t);
        for (int op = 0; op < DDPC_OP_COUNT; op++) {
            if (is_bitwise((ddpc_op)op) && !is_int((ddpc_dtype)t))
                continue; /* see reduce_bitwise_floats */
            for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                size_t n = counts[ci], bytes = (n + GUARD) * es;
                unsigned char *a = malloc(bytes), *b = malloc(bytes), *ref = malloc(bytes),
                              *d = malloc(bytes);
                CHECK(a && b && ref && d);
                fill(a, n, (ddpc_dtype)t);
                fill(b, n, (ddpc_dtype)t);
                reference(ref, a, b, n, (ddpc_dtype)t, (ddpc_op)op);

                /* three operands, separate destination */
                memset(d, 0xa5, bytes);
                ddpc__reduce3(d, a, b, n, (ddpc_dtype)t, (ddpc_op)op);
                expect_equal(d, ref, n, (ddpc_dtype)t, (ddpc_op)op, "reduce3");
                check_tail(d, n, es, "reduce3");

                /* in place: d = a; d op= b */
                memset(d, 0xa5, bytes);
                memcpy(d, a, n * es);
                ddpc__reduce_inplace(d, b, n, (ddpc_dtype)t, (ddpc_op)op);
                expect_equal(d, ref, n, (ddpc_dtype)t, (ddpc_op)op, "inplace");
                check_tail(d, n, es, "inplace");

                /* three operands with dst == a, then with dst == b */
                memcpy(d, a, n * es);
                ddpc__reduce3(d, d, b, n, (ddpc_dtype)t, (ddpc_op)op);
                expect_equal(d, ref, n, (ddpc_dtype)t, (ddpc_op)op, "reduce3(dst==a)");
                check_tail(d, n, es, "reduce3(dst==a)");
                memcpy(d, b, n * es);
                ddpc__reduce3(d, a, d, n, (ddpc_dtype)t, (ddpc_op)op);
                expect_equal(d, ref, n, (ddpc_dtype)t, (ddpc_op)op, "reduce3(dst==b)");
                check_tail(d, n, es, "reduce3(dst==b)");

                /* dst == src: d = a op a */
                reference(ref, a, a, n, (ddpc_dtype)t, (ddpc_op)op);
                memcpy(d, a, n * es);
                ddpc__reduce_inplace(d, d, n, (ddpc_dtype)t, (ddpc_op)op);
                expect_equal(d, ref, n, (ddpc_dtype)t, (ddpc_op)op, "inplace(dst==src)");
                check_tail(d, n, es, "inplace(dst==src)");
                free(a), free(b), free(ref), free(d);
            }
        }
    }
}

TEST(reduce_every_dtype_op_count) { run_matrix(); }

TEST(reduce_every_dtype_op_count_portable_half) {
    ddpc__reduce_use_simd(0);
    run_matrix();
    ddpc__reduce_use_simd(1);
}

/* Every float16 / bfloat16 value as the first operand, against random bit
 * patterns (large, tiny, subnormal, inf, NaN: every rounding and overflow
 * case of the narrowing) as the second, for every op. */
static void every_half_value(void) {
    enum { N = 65536 };
    uint16_t *a = malloc(N * 2), *b = malloc(N * 2), *d = malloc(N * 2), *ref = malloc(N * 2);
    CHECK(a && b && d && ref);
    for (int t = DDPC_FLOAT16; t <= DDPC_BFLOAT16; t++)
        for (int op = 0; op < DDPC_OP_COUNT; op++) {
            if (is_bitwise((ddpc_op)op)) continue;
            for (uint32_t i = 0; i < N; i++) {
                a[i] = (uint16_t)i;
                b[i] = (uint16_t)rnd();
            }
            reference(ref, a, b, N, (ddpc_dtype)t, (ddpc_op)op);
            ddpc__reduce3(d, a, b, N, (ddpc_dtype)t, (ddpc_op)op);
            expect_equal(d, ref, N, (ddpc_dtype)t, (ddpc_op)op, "reduce3(every half value)");
            ddpc__reduce_inplace(a, b, N, (ddpc_dtype)t, (ddpc_op)op);
            expect_equal(a, ref, N, (ddpc_dtype)t, (ddpc_op)op, "inplace(every half value)");
        }
    free(a), free(b), free(d), free(ref);
}

TEST(reduce_half_every_value) { every_half_value(); }

TEST(reduce_half_every_value_portable) {
    ddpc__reduce_use_simd(0);
    every_half_value();
    ddpc__reduce_use_simd(1);
}

TEST(reduce_wraps_and_nan) {
    int8_t a8[3] = { 127, -128, 100 }, b8[3] = { 1, -1, 3 };
    ddpc__reduce_inplace(a8, b8, 3, DDPC_INT8, DDPC_SUM);
    CHECK_EQ(a8[0], -128);
    CHECK_EQ(a8[1], 127);
    CHECK_EQ(a8[2], 103);
    int64_t a64 = INT64_MAX, b64 = 2;
    ddpc__reduce_inplace(&a64, &b64, 1, DDPC_INT64, DDPC_PROD);
    CHECK_EQ(a64, -2);
    uint32_t au = 5, bu = 0xffffffffu;
    ddpc__reduce_inplace(&au, &bu, 1, DDPC_UINT32, DDPC_MAX);
    CHECK_EQ(au, 0xffffffffu);
    float fa[2] = { NAN, 1.0f }, fb[2] = { 1.0f, NAN }, fd[2];
    ddpc__reduce3(fd, fa, fb, 2, DDPC_FLOAT32, DDPC_MAX);
    CHECK(isnan(fd[0]) && isnan(fd[1]));
    ddpc__reduce3(fd, fa, fb, 2, DDPC_FLOAT32, DDPC_MIN);
    CHECK(isnan(fd[0]) && isnan(fd[1]));
    /* invalid dtype or op: nothing written */
    float keep = 3.0f, other = 4.0f;
    ddpc__reduce_inplace(&keep, &other, 1, (ddpc_dtype)99, DDPC_SUM);
    ddpc__reduce_inplace(&keep, &other, 1, DDPC_FLOAT32, (ddpc_op)99);
    CHECK_EQ(keep, 3);
}

/* Floats have no bitwise ops: the kernels leave the data alone (the API
 * refuses the call before it gets here; test_coll_matrix checks that). */
TEST(reduce_bitwise_floats) {
    for (int t = DDPC_FLOAT16; t <= DDPC_FLOAT64; t++)
        for (int op = DDPC_BAND; op <= DDPC_BXOR; op++) {
            double a[4] = { 1, 2, 3, 4 }, b[4] = { 5, 6, 7, 8 }, d[4] = { 9, 9, 9, 9 };
            ddpc__reduce_inplace(a, b, 2, (ddpc_dtype)t, (ddpc_op)op);
            ddpc__reduce3(d, a, b, 2, (ddpc_dtype)t, (ddpc_op)op);
            CHECK(a[0] == 1 && a[1] == 2 && d[0] == 9 && d[1] == 9);
        }
    uint16_t x[3] = { 0xff00, 0x0f0f, 1 }, y[3] = { 0x0ff0, 0x00ff, 3 };
    ddpc__reduce_inplace(x, y, 3, DDPC_UINT16, DDPC_BXOR);
    CHECK(x[0] == 0xf0f0 && x[1] == 0x0ff0 && x[2] == 2);
    int16_t s[2] = { -2, 30000 }, u[2] = { 1, 10000 };
    ddpc__reduce_inplace(s, u, 2, DDPC_INT16, DDPC_SUM); /* wraps */
    CHECK(s[0] == -1 && s[1] == (int16_t)(40000 - 65536));
}

TEST(reduce_finish_avg) {
    static const int ranks[] = { 1, 2, 3, 8, 300 };
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++) {
        size_t n = 4097, es = ddpc_dtype_size((ddpc_dtype)t);
        for (size_t ri = 0; ri < sizeof ranks / sizeof ranks[0]; ri++) {
            int nr = ranks[ri];
            unsigned char *buf = malloc(n * es), *orig = malloc(n * es);
            CHECK(buf && orig);
            fill(orig, n, (ddpc_dtype)t);
            memcpy(buf, orig, n * es);
            ddpc__reduce_finish(buf, n, (ddpc_dtype)t, DDPC_SUM, nr); /* not AVG: untouched */
            CHECK(memcmp(buf, orig, n * es) == 0);
            ddpc__reduce_finish(buf, n, (ddpc_dtype)t, DDPC_AVG, nr);
            for (size_t i = 0; i < n; i++) {
                if (is_int(t)) {
                    int64_t x = get_i(orig, i, (ddpc_dtype)t);
                    uint64_t want = is_signed_int((ddpc_dtype)t) ? (uint64_t)(x / nr)
                                                                 : (uint64_t)x / (uint64_t)nr;
                    uint64_t got = (uint64_t)get_i(buf, i, (ddpc_dtype)t);
                    uint64_t mask = es == 8 ? ~0ull : (1ull << (8 * es)) - 1;
                    CHECK_MSG((got & mask) == (want & mask),
                              "%s avg /%d: element %zu: %lld / %d gave %lld",
                              ddpc_dtype_name((ddpc_dtype)t), nr, i, (long long)x, nr,
                              (long long)got);
                    continue;
                }
                double x = get_f(orig, i, (ddpc_dtype)t), got = get_f(buf, i, (ddpc_dtype)t), want;
                /* float32 and float64 multiply by 1/nr (as NCCL does): that
                 * product exactly, and within one ulp of the quotient */
                if (t == DDPC_FLOAT64) {
                    want = x * (1.0 / nr);
                    double q = x / nr;
                    CHECK(isnan(q) || got == q || got == nextafter(q, INFINITY) ||
                          got == nextafter(q, -INFINITY));
                } else if (t == DDPC_FLOAT32) {
                    want = (float)x * (1.0f / (float)nr);
                    float q = (float)x / (float)nr, g = (float)got;
                    CHECK(isnan(q) || g == q || g == nextafterf(q, INFINITY) ||
                          g == nextafterf(q, -INFINITY));
                } else if (t == DDPC_FLOAT16)
                    want = ddpc_half_to_float(ddpc_float_to_half((float)x / (float)nr));
                else
                    want = ddpc_bf16_to_float(ddpc_float_to_bf16((float)x / (float)nr));
                if (isnan(want))
                    CHECK(isnan(got));
                else
                    CHECK_MSG(got == want, "%s avg /%d: element %zu: %.9g gave %.9g, want %.9g",
                              ddpc_dtype_name((ddpc_dtype)t), nr, i, x, got, want);
            }
            free(buf), free(orig);
        }
    }
    int32_t neg[2] = { -7, 7 };
    ddpc__reduce_finish(neg, 2, DDPC_INT32, DDPC_AVG, 2);
    CHECK_EQ(neg[0], -3); /* toward zero, like torch */
    CHECK_EQ(neg[1], 3);
}

/* Every half and bfloat16 value widens exactly; narrowing matches the scalar
 * round-to-nearest-even conversion on a spread of floats that includes every
 * half boundary, its neighbours and the ties. */
static void check_conversions(void) {
    enum { N = 65536 };
    uint16_t *h = malloc(N * 2), *h2 = malloc(N * 2);
    float *f = malloc(N * 3 * sizeof(float));
    CHECK(h && h2 && f);
    for (uint32_t i = 0; i < N; i++) h[i] = (uint16_t)i;
    ddpc__to_float32(f, h, N, DDPC_FLOAT16);
    for (uint32_t i = 0; i < N; i++) {
        float want = ddpc_half_to_float((uint16_t)i);
        if (isnan(want))
            CHECK_MSG(isnan(f[i]), "half 0x%04x widened to %g, want nan", i, f[i]);
        else
            CHECK_MSG(memcmp(&f[i], &want, 4) == 0, "half 0x%04x widened to %.9g, want %.9g", i,
                      f[i], want);
    }
    ddpc__to_float32(f, h, N, DDPC_BFLOAT16);
    for (uint32_t i = 0; i < N; i++) {
        float want = ddpc_bf16_to_float((uint16_t)i);
        CHECK(memcmp(&f[i], &want, 4) == 0);
    }
    /* Narrowing: floats at, just below, just above and halfway between
     * consecutive half values, plus random bit patterns. */
    for (int pass = 0; pass < 4; pass++) {
        size_t m = 0;
        for (uint32_t i = 0; i < N && m + 3 <= (size_t)N * 3; i++) {
            float v = ddpc_half_to_float((uint16_t)i);
            uint32_t u;
            memcpy(&u, &v, 4);
            uint32_t d = pass == 0 ? 0 : pass == 1 ? 1 : pass == 2 ? 0x1000 : (uint32_t)rnd();
            uint32_t c[3] = { u, u + d, u - d };
            if (pass == 3) c[0] = c[1] = c[2] = (uint32_t)rnd();
            for (int k = 0; k < 3; k++) memcpy(&f[m++], &c[k], 4);
        }
        uint16_t *out = malloc(m * 2);
        CHECK(out);
        ddpc__from_float32(out, f, m, DDPC_FLOAT16);
        for (size_t i = 0; i < m; i++) {
            uint16_t want = ddpc_float_to_half(f[i]);
            if (isnan(f[i]))
                CHECK(isnan(ddpc_half_to_float(out[i])));
            else
                CHECK_MSG(out[i] == want,
                          "float %.9g (0x%08x) narrowed to half 0x%04x, want 0x%04x", f[i],
                          *(uint32_t *)&f[i], out[i], want);
        }
        ddpc__from_float32(out, f, m, DDPC_BFLOAT16);
        for (size_t i = 0; i < m; i++) {
            uint16_t want = ddpc_float_to_bf16(f[i]);
            if (isnan(f[i]))
                CHECK(isnan(ddpc_bf16_to_float(out[i])));
            else
                CHECK_MSG(out[i] == want, "float %.9g narrowed to bf16 0x%04x, want 0x%04x", f[i],
                          out[i], want);
        }
        free(out);
    }
    /* round trip through float32 is the identity on every non-NaN half */
    ddpc__to_float32(f, h, N, DDPC_FLOAT16);
    ddpc__from_float32(h2, f, N, DDPC_FLOAT16);
    for (uint32_t i = 0; i < N; i++)
        if (!isnan(f[i])) CHECK_EQ(h2[i], h[i]);
    free(h), free(h2), free(f);
}

TEST(reduce_half_conversions) { check_conversions(); }

TEST(reduce_half_conversions_portable) {
    ddpc__reduce_use_simd(0);
    check_conversions();
    ddpc__reduce_use_simd(1);
}

TEST(reduce_other_conversions) {
    float src[6] = { 1.5f, -2.75f, 300.0f, -1e30f, NAN, 1e30f }, f[6];
    int8_t i8[6];
    ddpc__from_float32(i8, src, 6, DDPC_INT8);
    CHECK_EQ(i8[0], 1);
    CHECK_EQ(i8[1], -2);
    CHECK_EQ(i8[2], 127);
    CHECK_EQ(i8[3], -128);
    CHECK_EQ(i8[4], 0);
    CHECK_EQ(i8[5], 127);
    uint64_t u64[6];
    ddpc__from_float32(u64, src, 6, DDPC_UINT64);
    CHECK_EQ(u64[1], 0);
    CHECK(u64[5] == UINT64_MAX);
    ddpc__to_float32(f, i8, 6, DDPC_INT8);
    CHECK_EQ(f[2], 127);
    CHECK_EQ(f[3], -128);
    float s16[6] = { 1.5f, -2.75f, 40000.0f, -40000.0f, NAN, 32767.9f };
    int16_t i16[6];
    ddpc__from_float32(i16, s16, 6, DDPC_INT16); /* truncate, saturate, NaN -> 0 */
    CHECK(i16[0] == 1 && i16[1] == -2 && i16[2] == INT16_MAX && i16[3] == INT16_MIN &&
          i16[4] == 0 && i16[5] == INT16_MAX);
    ddpc__to_float32(f, i16, 6, DDPC_INT16);
    CHECK(f[0] == 1 && f[1] == -2 && f[2] == 32767 && f[3] == -32768 && f[4] == 0);
    uint16_t u16[6];
    ddpc__from_float32(u16, s16, 6, DDPC_UINT16);
    CHECK(u16[0] == 1 && u16[1] == 0 && u16[2] == 40000 && u16[3] == 0 && u16[4] == 0 &&
          u16[5] == 32767);
    s16[2] = 70000.0f;
    ddpc__from_float32(u16, s16, 6, DDPC_UINT16);
    CHECK_EQ(u16[2], UINT16_MAX);
    ddpc__to_float32(f, u16, 6, DDPC_UINT16);
    CHECK(f[0] == 1 && f[2] == 65535 && f[5] == 32767);
    double d[6];
    ddpc__from_float32(d, src, 6, DDPC_FLOAT64);
    CHECK(d[1] == -2.75);
    ddpc__to_float32(f, d, 6, DDPC_FLOAT64);
    CHECK(f[0] == 1.5f && isnan(f[4]));
    ddpc__to_float32(f, src, 6, DDPC_FLOAT32);
    CHECK(memcmp(f, src, sizeof f) == 0);
    ddpc__to_float32(f, f, 6, DDPC_FLOAT32); /* same buffer: unchanged */
    CHECK(memcmp(f, src, sizeof f) == 0);
}
