/*
 * client.h — the store handle's insides, shared by the TCP client
 * (client.c) and the store made of a caller's functions (ops.c).
 */
#ifndef DDPC_STORE_CLIENT_H
#define DDPC_STORE_CLIENT_H

#include <stdint.h>

#include "ddpc/store.h"

/* What a root handle talks to (proto.h's PROTO_DDPC / PROTO_TORCH are the
 * two wire protocols; PROTO_OPS is no wire at all). */
enum { PROTO_OPS = 3 };

struct ddpc_store {
    ddpc_store *root; /* the handle that owns the connection (itself for a client) */
    char *prefix;     /* owned; "" for a client */
    size_t prefix_len;
    int fd;            /* root only */
    int broken;        /* root only: an earlier call left the stream unusable */
    double op_timeout; /* root only: seconds a reply may take beyond a request's own wait */
    char addr[300];    /* root only: "host:port", for messages */
    int proto;         /* root only: PROTO_DDPC, PROTO_TORCH or PROTO_OPS */
    int tdialect;      /* root only, PROTO_TORCH: TORCH_1 or TORCH_2 (proto.h) */
    char host[256];    /* root only: to reconnect (TCPStore, after a wait timed out) */
    int port;
    ddpc_store_ops ops; /* root only, PROTO_OPS: the caller's functions */
    void *ops_ctx;
};

/* ops.c: the calls of a PROTO_OPS store (st->root->proto == PROTO_OPS).
 * Arguments were validated by client.c; keys are without st's prefix. */
ddpc_status ddpc__ops_set(ddpc_store *st, const char *key, const void *val, size_t len);
ddpc_status ddpc__ops_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                          size_t *len);
ddpc_status ddpc__ops_add(ddpc_store *st, const char *key, int64_t delta, int64_t *result);
ddpc_status ddpc__ops_create(ddpc_store *st, const char *key, const void *val, size_t len,
                             void **actual, size_t *actual_len);
ddpc_status ddpc__ops_wait(ddpc_store *st, const char *const *keys, int n, double timeout_s);
ddpc_status ddpc__ops_check(ddpc_store *st, const char *key, int *exists);

#endif /* DDPC_STORE_CLIENT_H */
