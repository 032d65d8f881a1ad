/*
 * strbuf.h — a string buffer that appends: either over the caller's fixed
 * array (a message that is cut rather than grown) or on the heap (a
 * header, a request: grown as needed). Also the rank lists of messages,
 * "0-3,5", built on it.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_BASE_STRBUF_H
#define DDPC_BASE_STRBUF_H

#include <stddef.h>

#include "base/export.h"

/* The text so far is p[0, len), always NUL-terminated once anything was
 * appended (p may be NULL before that on the heap). Binary bytes are fine:
 * the NUL after them is for text only. */
typedef struct ddpc__strbuf {
    char *p;    /* fixed: borrowed from the caller; heap: owned (ddpc__sb_free) */
    size_t len; /* bytes appended, not counting the NUL */
    size_t cap; /* bytes of p */
    int fixed;  /* p is the caller's array: never grown */
    int cut;    /* fixed: a piece did not fit and was dropped, and so is every later one */
    int oom;    /* heap: a growth failed; later appends do nothing */
} ddpc__strbuf;

/* A heap buffer: ddpc__strbuf b = DDPC_STRBUF_HEAP; ... ddpc__sb_free(&b). */
#define DDPC_STRBUF_HEAP \
    { 0 }

/* A buffer over arr[cap] (cap >= 1), emptied. A piece that does not fit
 * whole is dropped (no half numbers), and b->cut set. */
DDPC_LAYER_API void ddpc__sb_fixed(ddpc__strbuf *b, char *arr, size_t cap);
/* Appends n bytes of s. */
DDPC_LAYER_API void ddpc__sb_put(ddpc__strbuf *b, const void *s, size_t n);
/* Appends the C string s. */
DDPC_LAYER_API void ddpc__sb_puts(ddpc__strbuf *b, const char *s);
/* Appends printf-formatted text (any length on the heap). */
DDPC_LAYER_API void ddpc__sb_printf(ddpc__strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees a heap buffer's text and empties it; a fixed one is only emptied. */
DDPC_LAYER_API void ddpc__sb_free(ddpc__strbuf *b);

/* Appends the ascending ranks[0..n) as runs, "0-3,5,7-8" (a run of two is
 * "7-8"); nothing when n is 0. */
DDPC_LAYER_API void ddpc__sb_ranks(ddpc__strbuf *b, const int *ranks, int n);

#endif /* DDPC_BASE_STRBUF_H */
