/*
 * table.h — the store server's keys: a chained hash table of byte-string
 * keys to byte-string values (server.c's only data; not thread-safe, the
 * server thread alone touches it).
 *
 * Internal header (not installed).
 */
#ifndef DDPC_STORE_TABLE_H
#define DDPC_STORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ddpc__entry {
    struct ddpc__entry *next;
    uint64_t hash;
    char *key; /* owned, klen bytes (not NUL-terminated on the wire) */
    uint32_t klen;
    unsigned char *val; /* owned, vlen bytes (+1 NUL so integers parse) */
    size_t vlen;
    uint64_t wake; /* the server's: when a change of the key last woke its waiters (kept by set) */
} ddpc__entry;

typedef struct ddpc__table {
    ddpc__entry **b; /* nb buckets */
    size_t nb;
    size_t n; /* number of keys */
} ddpc__table;

/* The entry of key k[0, kn), or NULL. */
ddpc__entry *ddpc__tab_find(const ddpc__table *t, const char *k, uint32_t kn);
/* Sets key to a copy of val; 0 on success, -1 when out of memory (the old
 * value, if any, is kept). */
int ddpc__tab_set(ddpc__table *t, const char *k, uint32_t kn, const void *val, size_t vn);
/* Appends val to key's value (creating the key when absent); 0 on
 * success, -1 when out of memory (the value is then unchanged). */
int ddpc__tab_append(ddpc__table *t, const char *k, uint32_t kn, const void *val, size_t vn);
/* Removes the key; 1 if it was there. */
int ddpc__tab_del(ddpc__table *t, const char *k, uint32_t kn);
/* Frees every entry and empties t. */
void ddpc__tab_free(ddpc__table *t);

#endif /* DDPC_STORE_TABLE_H */
