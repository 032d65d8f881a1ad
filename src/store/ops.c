/*
 * ops.c — a store made of the caller's functions (ddpc_store_create_ops):
 * set, get with a timeout, and add are all a communicator's bootstrap needs.
 *
 * The rest of the store's API is built on those three where it can be done
 * without losing atomicity: compare_set only as "create if absent" (the
 * first caller to add 1 to "<key>/claim" creates the key; everyone else
 * reads what it created), check as a get that does not wait, wait as a get
 * of each key in turn within one deadline. delete and num_keys cannot be,
 * and say so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "store/client.h"

ddpc_status ddpc_store_create_ops(const ddpc_store_ops *ops, void *ctx, const char *name,
                                  ddpc_store **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_create_ops: out is NULL");
    *out = NULL;
    if (!ops || !ops->set || !ops->get || !ops->add)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_store_create_ops: set, get and add must all be given");
    ddpc_store *st = calloc(1, sizeof *st);
    if (!st || !(st->prefix = strdup(""))) {
        free(st);
        return ddpc__err(DDPC_ERR_NOMEM, "store: out of memory");
    }
    st->root = st;
    st->fd = -1;
    st->proto = PROTO_OPS;
    st->ops = *ops;
    st->ops_ctx = ctx;
    snprintf(st->addr, sizeof st->addr, "%s", name && *name ? name : "the caller's store");
    *out = st;
    return DDPC_OK;
}

/* prefix + key, malloc'd (NULL when out of memory, the error raised). */
static char *full_key(const ddpc_store *st, const char *key) {
    size_t kl = strlen(key);
    char *k = malloc(st->prefix_len + kl + 1);
    if (!k) {
        ddpc__err(DDPC_ERR_NOMEM, "store: out of memory");
        return NULL;
    }
    memcpy(k, st->prefix, st->prefix_len);
    memcpy(k + st->prefix_len, key, kl + 1);
    return k;
}

/* The caller's status and reason as ddpc's error, naming the store and key. */
static ddpc_status failed(const ddpc_store *st, ddpc_status s, const char *what, const char *key,
                          const char *why) {
    if (s == DDPC_OK) s = DDPC_ERR_INTERNAL;
    return ddpc__err(s, "%s: %s '%s': %s", st->root->addr, what, key,
                     why[0] ? why : ddpc_status_str(s));
}

static ddpc_status ops_set(ddpc_store *st, const char *key, const void *val, size_t len) {
    char *k = full_key(st, key), why[512] = "";
    if (!k) return DDPC_ERR_NOMEM;
    ddpc_store *r = st->root;
    ddpc_status s = r->ops.set(r->ops_ctx, k, val, len, why, sizeof why);
    if (s != DDPC_OK) s = failed(st, s, "set", k, why);
    free(k);
    return s;
}

static ddpc_status ops_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                           size_t *len) {
    char *k = full_key(st, key), why[512] = "";
    if (!k) return DDPC_ERR_NOMEM;
    ddpc_store *r = st->root;
    void *v = NULL;
    size_t n = 0;
    ddpc_status s = r->ops.get(r->ops_ctx, k, timeout_s, &v, &n, why, sizeof why);
    if (s == DDPC_OK) {
        /* a NUL after the value, as every store's get promises */
        char *z = realloc(v, n + 1);
        if (!z) {
            free(v);
            s = ddpc__err(DDPC_ERR_NOMEM, "store get '%s': out of memory", k);
        } else {
            z[n] = 0;
            *val = z;
            if (len) *len = n;
        }
    } else if (s == DDPC_ERR_TIMEOUT) {
        free(v);
        s = ddpc__err(s, "%s: key '%s' was not set within %g s", r->addr, k,
                      timeout_s > 0 ? timeout_s : 0);
    } else {
        free(v);
        s = failed(st, s, "get", k, why);
    }
    free(k);
    return s;
}

static ddpc_status ops_add(ddpc_store *st, const char *key, int64_t delta, int64_t *result) {
    char *k = full_key(st, key), why[512] = "";
    if (!k) return DDPC_ERR_NOMEM;
    ddpc_store *r = st->root;
    int64_t v = 0;
    ddpc_status s = r->ops.add(r->ops_ctx, k, delta, &v, why, sizeof why);
    if (s != DDPC_OK)
        s = failed(st, s, "add", k, why);
    else if (result)
        *result = v;
    free(k);
    return s;
}

static ddpc_status ops_create(ddpc_store *st, const char *key, const void *val, size_t len,
                              void **actual, size_t *actual_len) {
    size_t kl = strlen(key);
    char *claim = malloc(kl + 7);
    if (!claim) return ddpc__err(DDPC_ERR_NOMEM, "store: out of memory");
    memcpy(claim, key, kl);
    memcpy(claim + kl, "/claim", 7);
    int64_t n = 0;
    ddpc_status s = ops_add(st, claim, 1, &n);
    free(claim);
    if (s != DDPC_OK) return s;
    if (n == 1) { /* ours: create it */
        DDPC_CHECK(ops_set(st, key, val, len));
        if (!actual) return DDPC_OK;
        void *copy = malloc(len + 1);
        if (!copy) return ddpc__err(DDPC_ERR_NOMEM, "store: out of memory");
        if (len) memcpy(copy, val, len);
        ((char *)copy)[len] = 0;
        *actual = copy;
        if (actual_len) *actual_len = len;
        return DDPC_OK;
    }
    /* someone else's: its value arrives as soon as its set does */
    void *v = NULL;
    size_t vl = 0;
    DDPC_CHECK(ops_get(st, key, 30.0, &v, &vl));
    if (actual) {
        *actual = v;
        if (actual_len) *actual_len = vl;
    } else {
        free(v);
    }
    return DDPC_OK;
}

static ddpc_status ops_wait(ddpc_store *st, const char *const *keys, int n, double timeout_s) {
    double deadline = ddpc__now() + (timeout_s > 0 ? timeout_s : 0);
    for (int i = 0; i < n; i++) {
        double left = deadline - ddpc__now();
        void *v = NULL;
        ddpc_status s = ops_get(st, keys[i], left > 0 ? left : 0, &v, NULL);
        free(v);
        if (s == DDPC_ERR_TIMEOUT)
            return ddpc__err(s, "%s: wait: %d keys ('%s%s'%s) were not all set within %g s",
                             st->root->addr, n, st->prefix, keys[i], n > 1 ? ", ..." : "",
                             timeout_s > 0 ? timeout_s : 0);
        if (s != DDPC_OK) return s;
    }
    return DDPC_OK;
}

static ddpc_status ops_check(ddpc_store *st, const char *key, int *exists) {
    void *v = NULL;
    ddpc_status s = ops_get(st, key, 0, &v, NULL);
    free(v);
    *exists = s == DDPC_OK;
    return s == DDPC_ERR_TIMEOUT ? DDPC_OK : s;
}

static ddpc_status ops_compare_set(ddpc_store *st, const char *key, const void *expected,
                                   size_t expected_len, const void *desired, size_t desired_len,
                                   void **actual, size_t *actual_len) {
    if (expected_len)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "%s: compare_set '%.60s': a store made of set, get and "
                         "add can only create an absent key (expected must be empty)",
                         st->root->addr, key);
    return ops_create(st, key, desired, desired_len, actual, actual_len);
}

static ddpc_status ops_delete(ddpc_store *st, const char *key, int *deleted) {
    return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: a store made of set, get and add cannot delete",
                     st->root->addr);
}

static ddpc_status ops_num_keys(ddpc_store *st, int64_t *n) {
    return ddpc__err(DDPC_ERR_INVALID_ARG,
                     "%s: a store made of set, get and add cannot count its keys", st->root->addr);
}

static ddpc_status ops_ping(ddpc_store *st) { return DDPC_OK; }

const ddpc__store_proto ddpc__store_proto_ops = {
    .name = "ops",
    .set = ops_set,
    .get = ops_get,
    .add = ops_add,
    .compare_set = ops_compare_set,
    .wait = ops_wait,
    .check = ops_check,
    .del = ops_delete,
    .num_keys = ops_num_keys,
    .ping = ops_ping,
};
