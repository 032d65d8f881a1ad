/*
 * client.h — the store handle's insides and the table of a protocol's
 * calls, shared by client.c (checks, connecting) and the protocols:
 * client_ddpc.c, client_torch.c, ops.c (a store of the caller's functions).
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

/* One protocol's calls (gloo's rendezvous/{file,prefix,...}_store.cc): client.c has
 * checked the arguments (st non-NULL, keys valid with st's prefix, values
 * within the limits, outputs cleared) before it calls them; keys are
 * without st's prefix. */
typedef struct ddpc__store_proto {
    const char *name; /* ddpc_store_protocol's answer */
    ddpc_status (*set)(ddpc_store *st, const char *key, const void *val, size_t len);
    ddpc_status (*get)(ddpc_store *st, const char *key, double timeout_s, void **val, size_t *len);
    ddpc_status (*add)(ddpc_store *st, const char *key, int64_t delta, int64_t *result);
    ddpc_status (*compare_set)(ddpc_store *st, const char *key, const void *expected,
                               size_t expected_len, const void *desired, size_t desired_len,
                               void **actual, size_t *actual_len);
    ddpc_status (*wait)(ddpc_store *st, const char *const *keys, int n, double timeout_s);
    ddpc_status (*check)(ddpc_store *st, const char *key, int *exists);
    ddpc_status (*del)(ddpc_store *st, const char *key, int *deleted);
    ddpc_status (*num_keys)(ddpc_store *st, int64_t *n);
    ddpc_status (*ping)(ddpc_store *st);
} ddpc__store_proto;

extern const ddpc__store_proto ddpc__store_proto_ddpc;  /* client_ddpc.c */
extern const ddpc__store_proto ddpc__store_proto_torch; /* client_torch.c */
extern const ddpc__store_proto ddpc__store_proto_ops;   /* ops.c */

/* How long a server may take to show which protocol it speaks: ddpc's
 * answers its handshake, torch 2.x's a VALIDATE + GETNUMKEYS, from their
 * poll loops, at once. */
#define PROBE_S 2.0

/* client.c: opens st's connection (st->fd) to st->host:st->port before
 * deadline; a failure names host:port and timeout_s. */
ddpc_status ddpc__store_open(ddpc_store *st, double deadline, double timeout_s);
/* client_ddpc.c: ddpc's handshake on st->fd (magic + version). */
ddpc_status ddpc__store_ddpc_handshake(ddpc_store *st, double deadline);
/* client_torch.c: torch 2.x's VALIDATE on st->fd; the dialect probe
 * (client.c's opening comment), which may reopen st->fd in 1.13's. */
ddpc_status ddpc__store_torch_validate(ddpc_store *st, double deadline);
ddpc_status ddpc__store_torch_probe(ddpc_store *st, double deadline, double timeout_s);

#endif /* DDPC_STORE_CLIENT_H */
