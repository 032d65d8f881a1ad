/*
 * strbuf.c — appending to a fixed or growing string buffer (strbuf.h), and
 * rank lists as runs.
 */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ddpc__sb_fixed(ddpc__strbuf *b, char *arr, size_t cap) {
    memset(b, 0, sizeof *b);
    b->p = arr;
    b->cap = cap;
    b->fixed = 1;
    if (cap) arr[0] = 0;
}

/* Makes room for n more bytes and the NUL; 0 when there is none (the
 * piece is then dropped). */
static int reserve(ddpc__strbuf *b, size_t n) {
    if (b->oom || b->cut) return 0;
    if (b->len + n + 1 <= b->cap) return 1;
    if (b->fixed) {
        b->cut = 1;
        return 0;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void ddpc__sb_put(ddpc__strbuf *b, const void *s, size_t n) {
    if (!reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void ddpc__sb_puts(ddpc__strbuf *b, const char *s) { ddpc__sb_put(b, s, strlen(s)); }

void ddpc__sb_printf(ddpc__strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        ddpc__sb_put(b, tmp, (size_t)n);
        return;
    }
    if (!reserve(b, (size_t)n)) return; /* too long for tmp: format in place */
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void ddpc__sb_free(ddpc__strbuf *b) {
    if (b->fixed) {
        ddpc__sb_fixed(b, b->p, b->cap);
        return;
    }
    free(b->p);
    memset(b, 0, sizeof *b);
}

void ddpc__sb_ranks(ddpc__strbuf *b, const int *ranks, int n) {
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1) j++;
        const char *sep = i ? "," : "";
        if (j == i)
            ddpc__sb_printf(b, "%s%d", sep, ranks[i]);
        else
            ddpc__sb_printf(b, "%s%d-%d", sep, ranks[i], ranks[j]);
        i = j + 1;
    }
}
