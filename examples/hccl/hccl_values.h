/*
 * hccl_values.h — what the HCCL programs here (examples/hccl/hccl_test.c,
 * tests/hccl/hccl_check.c) share: check macros that print HCCL's and ACL's
 * texts and exit, and element access by HcclDataType through doubles, exact
 * for the small integers these programs use (float16 and bfloat16 too),
 * and the root info through a file (tests/hccl's programs under ddpc-run).
 * Header-only, written against hccl/hccl.h alone.
 */
#ifndef HCCL_EXAMPLES_VALUES_H
#define HCCL_EXAMPLES_VALUES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hccl/hccl.h"

#define ACL_OK(x)                                                                 \
    do {                                                                          \
        aclError e__ = (x);                                                       \
        if (e__ != ACL_SUCCESS) {                                                 \
            fprintf(stderr, "%s:%d: %s = %d (%s)\n", __FILE__, __LINE__, #x, e__, \
                    aclGetRecentErrMsg());                                        \
            exit(1);                                                              \
        }                                                                         \
    } while (0)
#define HCCL_OK(x)                                                                         \
    do {                                                                                   \
        HcclResult r__ = (x);                                                              \
        if (r__ != HCCL_SUCCESS) {                                                         \
            fprintf(stderr, "%s:%d: %s = %d: %s (%s)\n", __FILE__, __LINE__, #x, (int)r__, \
                    HcclGetErrorString(r__), aclGetRecentErrMsg());                        \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static inline size_t tsize(HcclDataType t) {
    switch (t) {
    case HCCL_DATA_TYPE_INT8:
    case HCCL_DATA_TYPE_UINT8: return 1;
    case HCCL_DATA_TYPE_INT16:
    case HCCL_DATA_TYPE_UINT16:
    case HCCL_DATA_TYPE_FP16:
    case HCCL_DATA_TYPE_BFP16: return 2;
    case HCCL_DATA_TYPE_INT32:
    case HCCL_DATA_TYPE_UINT32:
    case HCCL_DATA_TYPE_FP32: return 4;
    default: return 8;
    }
}

/* float <-> binary16 for the small integers these checks use (exact). */
static inline uint16_t to_half(float f) {
    if (f == 0) return 0;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xff, man = u & 0x7fffffu;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}
static inline float from_half(uint16_t h) {
    if ((h & 0x7fff) == 0) return 0;
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    uint32_t u = sign | ((exp - 15 + 127) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void put(void *buf, HcclDataType t, uint64_t i, double v) {
    char *p = (char *)buf + i * tsize(t);
    switch (t) {
    case HCCL_DATA_TYPE_INT8: {
        int8_t x = (int8_t)v;
        memcpy(p, &x, 1);
        break;
    }
    case HCCL_DATA_TYPE_UINT8: {
        uint8_t x = (uint8_t)v;
        memcpy(p, &x, 1);
        break;
    }
    case HCCL_DATA_TYPE_INT16: {
        int16_t x = (int16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case HCCL_DATA_TYPE_UINT16: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case HCCL_DATA_TYPE_INT32: {
        int32_t x = (int32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case HCCL_DATA_TYPE_UINT32: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case HCCL_DATA_TYPE_INT64: {
        int64_t x = (int64_t)v;
        memcpy(p, &x, 8);
        break;
    }
    case HCCL_DATA_TYPE_UINT64: {
        uint64_t x = (uint64_t)v;
        memcpy(p, &x, 8);
        break;
    }
    case HCCL_DATA_TYPE_FP32: {
        float x = (float)v;
        memcpy(p, &x, 4);
        break;
    }
    case HCCL_DATA_TYPE_FP64: memcpy(p, &v, 8); break;
    case HCCL_DATA_TYPE_FP16: {
        uint16_t x = to_half((float)v);
        memcpy(p, &x, 2);
        break;
    }
    case HCCL_DATA_TYPE_BFP16: {
        float f = (float)v;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t x = (uint16_t)(u >> 16);
        memcpy(p, &x, 2);
        break;
    }
    default: break;
    }
}

static inline double get(const void *buf, HcclDataType t, uint64_t i) {
    const char *p = (const char *)buf + i * tsize(t);
    switch (t) {
    case HCCL_DATA_TYPE_INT8: {
        int8_t x;
        memcpy(&x, p, 1);
        return x;
    }
    case HCCL_DATA_TYPE_UINT8: {
        uint8_t x;
        memcpy(&x, p, 1);
        return x;
    }
    case HCCL_DATA_TYPE_INT16: {
        int16_t x;
        memcpy(&x, p, 2);
        return x;
    }
    case HCCL_DATA_TYPE_UINT16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return x;
    }
    case HCCL_DATA_TYPE_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    case HCCL_DATA_TYPE_UINT32: {
        uint32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    case HCCL_DATA_TYPE_INT64: {
        int64_t x;
        memcpy(&x, p, 8);
        return (double)x;
    }
    case HCCL_DATA_TYPE_UINT64: {
        uint64_t x;
        memcpy(&x, p, 8);
        return (double)x;
    }
    case HCCL_DATA_TYPE_FP32: {
        float x;
        memcpy(&x, p, 4);
        return x;
    }
    case HCCL_DATA_TYPE_FP64: {
        double x;
        memcpy(&x, p, 8);
        return x;
    }
    case HCCL_DATA_TYPE_FP16: {
        uint16_t x;
        memcpy(&x, p, 2);
        return from_half(x);
    }
    case HCCL_DATA_TYPE_BFP16: {
        uint16_t x;
        memcpy(&x, p, 2);
        uint32_t u = (uint32_t)x << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: return 0;
    }
}

/* Rank 0's root info to the others through path: written whole, then
 * renamed into place; the others read it within 60 s or exit. Needs
 * nanosleep (_POSIX_C_SOURCE 200809L before the includes, with -std=c11). */
static inline void hccl_share_root_info(uint32_t rank, const char *path, HcclRootInfo *id) {
    if (rank == 0) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
            perror(path), exit(1);
        return;
    }
    for (int tries = 0; tries < 6000; tries++) { /* 60 s */
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1) return;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "rank %u: no root info in %s after 60 s\n", rank, path);
    exit(1);
}

#endif
