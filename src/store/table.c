/* table.c — the store server's hash table of keys (table.h). */
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/table.h"

ddpc__entry *ddpc__tab_find(const ddpc__table *t, const char *k, uint32_t kn) {
    if (!t->nb) return NULL;
    uint64_t h = ddpc__fnv1a(k, kn);
    for (ddpc__entry *e = t->b[h % t->nb]; e; e = e->next)
        if (e->hash == h && e->klen == kn && memcmp(e->key, k, kn) == 0) return e;
    return NULL;
}

/* Grows the bucket array when the load passes 1; keeps the old one when
 * memory is short (chains just get longer). */
static void tab_grow(ddpc__table *t) {
    size_t nb = t->nb ? t->nb * 2 : 64;
    ddpc__entry **b = calloc(nb, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < t->nb; i++)
        for (ddpc__entry *e = t->b[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->hash % nb];
            b[e->hash % nb] = e;
        }
    free(t->b);
    t->b = b;
    t->nb = nb;
}

/* Sets key to a copy of val; 0 on success, -1 when out of memory (the old
 * value, if any, is kept). */
int ddpc__tab_set(ddpc__table *t, const char *k, uint32_t kn, const void *val, size_t vn) {
    unsigned char *v = malloc(vn + 1);
    if (!v) return -1;
    if (vn) memcpy(v, val, vn);
    v[vn] = 0;
    ddpc__entry *e = ddpc__tab_find(t, k, kn);
    if (e) {
        free(e->val);
        e->val = v;
        e->vlen = vn;
        return 0;
    }
    if (t->n >= t->nb) tab_grow(t);
    if (!t->nb || !(e = calloc(1, sizeof *e)) || !(e->key = malloc(kn ? kn : 1))) {
        free(e);
        free(v);
        return -1;
    }
    memcpy(e->key, k, kn);
    e->klen = kn;
    e->hash = ddpc__fnv1a(k, kn);
    e->val = v;
    e->vlen = vn;
    e->next = t->b[e->hash % t->nb];
    t->b[e->hash % t->nb] = e;
    t->n++;
    return 0;
}

int ddpc__tab_append(ddpc__table *t, const char *k, uint32_t kn, const void *val, size_t vn) {
    ddpc__entry *e = ddpc__tab_find(t, k, kn);
    if (!e) return ddpc__tab_set(t, k, kn, val, vn);
    unsigned char *v = realloc(e->val, e->vlen + vn + 1);
    if (!v) return -1;
    if (vn) memcpy(v + e->vlen, val, vn);
    e->val = v;
    e->vlen += vn;
    v[e->vlen] = 0;
    return 0;
}

int ddpc__tab_del(ddpc__table *t, const char *k, uint32_t kn) {
    if (!t->nb) return 0;
    uint64_t h = ddpc__fnv1a(k, kn);
    for (ddpc__entry **pp = &t->b[h % t->nb]; *pp; pp = &(*pp)->next) {
        ddpc__entry *e = *pp;
        if (e->hash == h && e->klen == kn && memcmp(e->key, k, kn) == 0) {
            *pp = e->next;
            free(e->key);
            free(e->val);
            free(e);
            t->n--;
            return 1;
        }
    }
    return 0;
}

void ddpc__tab_free(ddpc__table *t) {
    for (size_t i = 0; i < t->nb; i++)
        for (ddpc__entry *e = t->b[i], *nx; e; e = nx) {
            nx = e->next;
            free(e->key);
            free(e->val);
            free(e);
        }
    free(t->b);
    memset(t, 0, sizeof *t);
}
