/*
 * sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the job
 * token's challenge-response (auth.c). Small and portable, not fast: it
 * hashes a few hundred bytes per connection.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_BASE_SHA256_H
#define DDPC_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define DDPC_SHA256_BYTES 32

typedef struct ddpc__sha256_ctx {
    uint32_t h[8];
    uint64_t nbytes;       /* bytes hashed so far */
    unsigned char buf[64]; /* the block being filled */
    size_t have;           /* bytes of it filled */
} ddpc__sha256_ctx;

void ddpc__sha256_init(ddpc__sha256_ctx *s);
void ddpc__sha256_update(ddpc__sha256_ctx *s, const void *p, size_t n);
void ddpc__sha256_final(ddpc__sha256_ctx *s, unsigned char out[DDPC_SHA256_BYTES]);
/* The digest of p[0, n) in one call. */
void ddpc__sha256(const void *p, size_t n, unsigned char out[DDPC_SHA256_BYTES]);

/* HMAC-SHA256 of the concatenation of the nparts parts[i][0, lens[i]) under
 * key[0, klen) (any length: keys over 64 bytes are hashed first). */
void ddpc__hmac_sha256(const void *key, size_t klen, const void *const *parts, const size_t *lens,
                       int nparts, unsigned char out[DDPC_SHA256_BYTES]);

/* 1 when a[0, n) == b[0, n), in time independent of where they differ. */
int ddpc__equal_ct(const void *a, const void *b, size_t n);

#endif /* DDPC_BASE_SHA256_H */
