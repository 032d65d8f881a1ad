/*
 * store.h — the rendezvous key-value store: a TCP server and its client.
 *
 * Ranks and launchers meet here: a communicator's bootstrap publishes and
 * reads addresses through it, and ddpc-run hosts one for all nodes of a job.
 * Keys are strings (at most DDPC_STORE_MAX_KEY bytes), values are bytes (at
 * most DDPC_STORE_MAX_VALUE). Every blocking call takes a timeout in seconds.
 *
 * A client handle is not thread-safe: use one per thread.
 */
#ifndef DDPC_STORE_H
#define DDPC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ddpc/ddpc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DDPC_STORE_MAX_KEY   1024
#define DDPC_STORE_MAX_VALUE (64u << 20)

typedef struct ddpc_store_server ddpc_store_server;
typedef struct ddpc_store ddpc_store;

/* Starts a server thread listening on host:port (host NULL or "" = all
 * interfaces; port 0 = a free port). */
DDPC_API ddpc_status ddpc_store_server_create(const char *host, int port, ddpc_store_server **out);
DDPC_API int ddpc_store_server_port(const ddpc_store_server *s);
/* Stops the server and closes every connection. NULL is harmless. */
DDPC_API void ddpc_store_server_destroy(ddpc_store_server *s);

/* Connects, retrying until timeout_s (<= 0: DDPC_CONNECT_TIMEOUT), and does
 * the versioned handshake. A dead or absent server is DDPC_ERR_TIMEOUT or
 * DDPC_ERR_PEER_LOST naming host:port.
 * The server may be ddpc's or PyTorch's c10d TCPStore (torch 1.13's or
 * torch 2.x's wire protocol: torchrun's agent store, a PyTorch rank 0's):
 * DDPC_STORE_PROTOCOL = auto (default) tries ddpc's handshake and falls back
 * to TCPStore's protocol when the server closes on it or does not answer it
 * within 2 s; ddpc or torch forces one (torch finds the dialect: 2.x's
 * answers its VALIDATE at once, else 1.13's after 2 s); torch1 or torch2
 * names the dialect. Every call below works with either; against a
 * TCPStore, a get or wait that times out is cancelled (2.x) or drops the
 * connection (1.13 cannot cancel a wait; the next call reconnects). ddpc's
 * own server speaks all three. */
DDPC_API ddpc_status ddpc_store_create_tcp(const char *host, int port, double timeout_s,
                                           ddpc_store **out);
/* "ddpc" or "torch": the protocol st's connection speaks; "ops" for a store
 * made by ddpc_store_create_ops. */
DDPC_API const char *ddpc_store_protocol(const ddpc_store *st);
/* A view of st in which every key is prefixed by prefix (may be nested).
 * The view shares st's connection: close views before st. */
DDPC_API ddpc_status ddpc_store_prefixed(ddpc_store *st, const char *prefix, ddpc_store **out);
/* A store made of the caller's functions, so that a communicator can meet
 * its peers through any key-value store (PyTorch's c10d Store, a file, a
 * service). Each function returns DDPC_OK or an error status, and on error
 * writes a one-line reason into err (errlen bytes). ddpc calls them one at
 * a time per store, from the thread that called into ddpc.
 *   set: stores val (len bytes) at key, replacing any value;
 *   get: waits up to timeout_s (<= 0: looks once) for key to exist and
 *        returns a malloc'd copy of its value (ddpc frees it with free());
 *        DDPC_ERR_TIMEOUT when it is still absent;
 *   add: adds delta to the integer at key (absent = 0), *result = new value.
 * name (copied) names the store in messages. compare_set is offered only to
 * create a key that is absent (expected_len == 0), through add; delete and
 * num_keys are DDPC_ERR_INVALID_ARG. ctx stays the caller's. */
typedef struct ddpc_store_ops {
    ddpc_status (*set)(void *ctx, const char *key, const void *val, size_t len, char *err,
                       size_t errlen);
    ddpc_status (*get)(void *ctx, const char *key, double timeout_s, void **val, size_t *len,
                       char *err, size_t errlen);
    ddpc_status (*add)(void *ctx, const char *key, int64_t delta, int64_t *result, char *err,
                       size_t errlen);
} ddpc_store_ops;
DDPC_API ddpc_status ddpc_store_create_ops(const ddpc_store_ops *ops, void *ctx, const char *name,
                                           ddpc_store **out);

/* Closes a client or a view. NULL is harmless. */
DDPC_API void ddpc_store_destroy(ddpc_store *st);

DDPC_API ddpc_status ddpc_store_set(ddpc_store *st, const char *key, const void *val, size_t len);
/* Waits up to timeout_s for key to exist, then returns a malloc'd copy of its
 * value (*val, *len; the caller frees). DDPC_ERR_TIMEOUT if it never came.
 * timeout_s <= 0 looks once without waiting. The copy is followed by a NUL
 * byte not counted in *len, so text values can be used as C strings. */
DDPC_API ddpc_status ddpc_store_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                                    size_t *len);
/* Adds delta to the integer stored at key (absent = 0); *result = new value
 * (result may be NULL). The value is stored as decimal text, as torch does. */
DDPC_API ddpc_status ddpc_store_add(ddpc_store *st, const char *key, int64_t delta,
                                    int64_t *result);
/* If key's value equals expected (or key is absent and expected_len == 0),
 * sets it to desired. *actual (malloc'd, may be NULL if not wanted) receives
 * the value after the call; as torch's TCPStore, when key is absent and
 * expected is not empty, nothing is set and *actual is expected. */
DDPC_API ddpc_status ddpc_store_compare_set(ddpc_store *st, const char *key, const void *expected,
                                            size_t expected_len, const void *desired,
                                            size_t desired_len, void **actual, size_t *actual_len);
/* Waits up to timeout_s until all n keys exist. */
DDPC_API ddpc_status ddpc_store_wait(ddpc_store *st, const char *const *keys, int n,
                                     double timeout_s);
/* Tells whether key exists now (no wait). */
DDPC_API ddpc_status ddpc_store_check(ddpc_store *st, const char *key, int *exists);
/* Deletes key; *deleted = 1 if it existed (deleted may be NULL). */
DDPC_API ddpc_status ddpc_store_delete(ddpc_store *st, const char *key, int *deleted);
/* Number of keys in the whole store (prefixes ignored). */
DDPC_API ddpc_status ddpc_store_num_keys(ddpc_store *st, int64_t *n);

/* Additions. Seconds a request may take beyond its own wait before the
 * client gives up (default DDPC_STORE_TIMEOUT); applies to st's connection
 * and every view of it. */
DDPC_API ddpc_status ddpc_store_set_timeout(ddpc_store *st, double seconds);
/* A round trip that changes nothing: is the server there and answering? */
DDPC_API ddpc_status ddpc_store_ping(ddpc_store *st);
/* "host:port" of the server st talks to (for messages); never NULL. */
DDPC_API const char *ddpc_store_addr(const ddpc_store *st);

#ifdef __cplusplus
}
#endif
#endif /* DDPC_STORE_H */
