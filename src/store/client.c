/*
 * client.c — the store's client: one blocking TCP connection per handle,
 * one request and one reply at a time, every call bounded by a deadline.
 *
 * Prefixed views are client-side: a view holds its prefix and borrows the
 * connection of the client it was made from. Any I/O error or malformed
 * reply marks the connection broken (the stream can no longer be trusted);
 * later calls fail at once with DDPC_ERR_PEER_LOST naming host:port.
 *
 * Two protocols behind one API (DDPC_STORE_PROTOCOL): ddpc's own, and
 * PyTorch's c10d TCPStore, so that a ddpc program meets torchrun's agent
 * store. "auto" tries ddpc's handshake and falls back to TCPStore when the
 * server closes on it (torch 1.13's does) or stays silent for PROBE_S
 * (torch 2.x's libuv server ignores a first query that is not VALIDATE).
 *
 * TCPStore has two dialects (proto.h): torch 1.13's, and torch 2.x's, whose
 * server serves a connection only after its VALIDATE. "torch" (and auto's
 * fallback) finds which by sending 2.x's VALIDATE and GETNUMKEYS: a 2.x
 * server answers at once; a 1.13 server reads those 6 bytes as the start of
 * a SET whose 8-byte key length has not all come, so it waits (allocating
 * nothing) until PROBE_S has passed and the probe connection closes, and
 * the client reconnects in 1.13's dialect. The other order would be unsafe:
 * a 1.13 server given a whole VALIDATE + query reads a key length of over
 * 50 GB and tries to allocate it. "torch1" and "torch2" name the dialect
 * and skip the probe. A 1.13 TCPStore cannot cancel a wait: a wait that
 * times out drops the connection, and the next call reconnects; in 2.x it
 * is cancelled (CANCEL_WAIT) and the connection kept.
 *
 * This file holds what every protocol shares: connecting (and finding the
 * protocol), prefixed views, and each call's argument checks; then the call
 * goes to its protocol's table (ddpc__store_proto, client.h): ddpc's in
 * client_ddpc.c, TCPStore's in client_torch.c, a caller's functions in
 * ops.c. The wire formats are in proto.h; the server is server.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/base.h"
#include "base/env.h"
#include "base/sock.h"
#include "store/client.h"
#include "store/proto.h"

/* Validates a key (with the view's prefix) and returns its full length. */
static ddpc_status full_key_len(const ddpc_store *st, const char *what, const char *key,
                                size_t *len) {
    if (!key) return ddpc__err(DDPC_ERR_INVALID_ARG, "store %s: key is NULL", what);
    size_t n = st->prefix_len + strlen(key);
    if (n == 0) return ddpc__err(DDPC_ERR_INVALID_ARG, "store %s: key is empty", what);
    if (n > DDPC_STORE_MAX_KEY)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store %s: key '%.60s...' is %zu bytes with its prefix; the limit is %d "
                         "(DDPC_STORE_MAX_KEY)",
                         what, key, n, DDPC_STORE_MAX_KEY);
    *len = n;
    return DDPC_OK;
}

/* Opens st's connection (st->fd) before deadline; reports a failure
 * naming host:port and timeout_s. */
ddpc_status ddpc__store_open(ddpc_store *st, double deadline, double timeout_s) {
    ddpc_status s = ddpc__sock_connect(st->host, st->port, deadline, &st->fd);
    if (s == DDPC_ERR_TIMEOUT)
        return ddpc__err(DDPC_ERR_TIMEOUT, "no store answered at %s within %.3g s (%s)", st->addr,
                         timeout_s, ddpc_last_error());
    if (s != DDPC_OK) return ddpc__err_wrap(s, "connecting to the store at %s", st->addr);
    ddpc__sock_tune(st->fd, 0);
    return DDPC_OK;
}

/* With a job token (DDPC_JOB_TOKEN), proves it to the server on st->fd and
 * checks the server's proof (auth.h); nothing to do without one. A server
 * that closes on it may be PyTorch's TCPStore, which cannot authenticate:
 * DDPC_ERR_PEER_LOST lets "auto" fall back to its protocol, warned. */
static ddpc_status prove_token(ddpc_store *st, double deadline) {
    const char *token = NULL;
    DDPC_CHECK(ddpc__auth_token(&token));
    if (!token) return DDPC_OK;
    char peer[320];
    snprintf(peer, sizeof peer, "the store at %s", st->addr);
    ddpc_status s = ddpc__auth_client(st->fd, token, DDPC_AUTH_STORE, deadline, -1, peer);
    if (s == DDPC_ERR_PEER_LOST)
        DDPC_WARN(STORE,
                  "%s; if it is PyTorch's TCPStore, it cannot check DDPC_JOB_TOKEN: this store "
                  "connection is not authenticated (connections between ranks still are)",
                  ddpc_last_error());
    return s;
}

ddpc_status ddpc_store_create_tcp(const char *host, int port, double timeout_s, ddpc_store **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_create_tcp: out is NULL");
    *out = NULL;
    if (!host || !*host) host = "127.0.0.1";
    if (port <= 0 || port > 65535)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store port %d is out of range [1, 65535]", port);
    if (strlen(host) > 255) return ddpc__err(DDPC_ERR_INVALID_ARG, "store host name is too long");
    if (!(timeout_s > 0)) DDPC_CHECK(ddpc__env_double(DDPC_ENV_CONNECT_TIMEOUT, &timeout_s));
    double op_timeout;
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_STORE_TIMEOUT, &op_timeout));
    const char *want = ddpc__env(DDPC_ENV_STORE_PROTOCOL, NULL);
    int torch_as = !strcmp(want, "torch1") ? TORCH_1 : !strcmp(want, "torch2") ? TORCH_2 : 0;
    if (strcmp(want, "auto") && strcmp(want, "ddpc") && strcmp(want, "torch") && !torch_as)
        return ddpc__err(DDPC_ERR_ENV,
                         "DDPC_STORE_PROTOCOL='%s' is not auto, ddpc, torch, torch1 or torch2",
                         want);
    ddpc_store *st = calloc(1, sizeof *st);
    if (!st || !(st->prefix = strdup(""))) {
        free(st);
        return ddpc__err(DDPC_ERR_NOMEM, "store client: out of memory");
    }
    st->root = st;
    st->fd = -1;
    st->op_timeout = op_timeout;
    snprintf(st->host, sizeof st->host, "%s", host);
    st->port = port;
    snprintf(st->addr, sizeof st->addr, "%s:%d", host, port);
    double deadline = ddpc__now() + timeout_s;
    ddpc_status s = ddpc__store_open(st, deadline, timeout_s);
    /* bounded by what is left of the connect timeout, at least 1 s, at most
     * DDPC_STORE_TIMEOUT */
    double left = deadline - ddpc__now();
    double hs_deadline = ddpc__now() + (left > 1 ? (left < op_timeout ? left : op_timeout) : 1);
    int is_auto = !strcmp(want, "auto");
    st->proto = strcmp(want, "ddpc") && !is_auto ? PROTO_TORCH : PROTO_DDPC;
    st->tdialect = torch_as;
    if (s == DDPC_OK && st->proto == PROTO_DDPC) {
        /* auto: a torch 2.x server says nothing to a handshake; wait PROBE_S for it */
        double hd =
            is_auto && ddpc__now() + PROBE_S < hs_deadline ? ddpc__now() + PROBE_S : hs_deadline;
        s = prove_token(st, hd);
        if (s == DDPC_OK) s = ddpc__store_ddpc_handshake(st, hd);
        if ((s == DDPC_ERR_PEER_LOST || s == DDPC_ERR_TIMEOUT) && is_auto) {
            /* closed on, or silent to, our handshake: perhaps a PyTorch TCPStore */
            DDPC_TRACE(STORE, "store at %s %s ddpc's handshake; trying TCPStore's protocol",
                       st->addr, s == DDPC_ERR_TIMEOUT ? "did not answer" : "closed on");
            close(st->fd);
            st->fd = -1;
            st->proto = PROTO_TORCH;
            s = ddpc__store_open(st, deadline, timeout_s);
        } else if (s == DDPC_ERR_PEER_LOST || s == DDPC_ERR_TIMEOUT) {
            s = ddpc__err(s, "store at %s: handshake failed (%s); is it a ddpc store?", st->addr,
                          ddpc_last_error());
        }
    }
    if (s == DDPC_OK && st->proto == PROTO_TORCH && !st->tdialect)
        s = ddpc__store_torch_probe(st, hs_deadline, timeout_s);
    else if (s == DDPC_OK && st->tdialect == TORCH_2)
        s = ddpc__store_torch_validate(st, hs_deadline);
    if (s == DDPC_OK && st->proto == PROTO_TORCH) {
        int64_t n;
        double keep = st->op_timeout;
        st->op_timeout = hs_deadline - ddpc__now() > 0.001 ? hs_deadline - ddpc__now() : 0.001;
        s = ddpc__store_proto_torch.num_keys(st, &n);
        st->op_timeout = keep;
        if (s != DDPC_OK)
            s = ddpc__err(
                s,
                "store at %s answers neither ddpc's store protocol nor PyTorch's TCPStore's (%s)",
                st->addr, ddpc_last_error());
    }
    if (s != DDPC_OK) {
        if (st->fd >= 0) close(st->fd);
        free(st->prefix);
        free(st);
        return s;
    }
    DDPC_TRACE(STORE, "connected to the store at %s (%s protocol)", st->addr,
               st->proto == PROTO_DDPC   ? "ddpc"
               : st->tdialect == TORCH_2 ? "torch 2.x's TCPStore"
                                         : "torch 1.13's TCPStore");
    *out = st;
    return DDPC_OK;
}

ddpc_status ddpc_store_set_timeout(ddpc_store *st, double seconds) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_set_timeout: store is NULL");
    if (!(seconds > 0))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store request timeout %g s must be > 0", seconds);
    st->root->op_timeout = seconds;
    return DDPC_OK;
}

const char *ddpc_store_addr(const ddpc_store *st) { return st ? st->root->addr : ""; }

ddpc_status ddpc_store_prefixed(ddpc_store *st, const char *prefix, ddpc_store **out) {
    if (!st || !prefix || !out)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_store_prefixed: store, prefix and out must be non-NULL");
    *out = NULL;
    size_t pl = strlen(prefix);
    if (st->prefix_len + pl >= DDPC_STORE_MAX_KEY)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store prefix '%.60s' leaves no room for keys (DDPC_STORE_MAX_KEY %d)",
                         prefix, DDPC_STORE_MAX_KEY);
    ddpc_store *v = calloc(1, sizeof *v);
    char *p = malloc(st->prefix_len + pl + 1);
    if (!v || !p) {
        free(v);
        free(p);
        return ddpc__err(DDPC_ERR_NOMEM, "store view: out of memory");
    }
    memcpy(p, st->prefix, st->prefix_len);
    memcpy(p + st->prefix_len, prefix, pl + 1);
    v->root = st->root;
    v->prefix = p;
    v->prefix_len = st->prefix_len + pl;
    v->fd = -1;
    *out = v;
    return DDPC_OK;
}

void ddpc_store_destroy(ddpc_store *st) {
    if (!st) return;
    if (st->root == st && st->fd >= 0) close(st->fd);
    free(st->prefix);
    free(st);
}

/* ------------------------------------------------ the calls: checks, then
 * the protocol's table (client_ddpc.c, client_torch.c, ops.c) */

static const ddpc__store_proto *proto_of(const ddpc_store *st) {
    switch (st->root->proto) {
    case PROTO_TORCH: return &ddpc__store_proto_torch;
    case PROTO_OPS: return &ddpc__store_proto_ops;
    default: return &ddpc__store_proto_ddpc;
    }
}

const char *ddpc_store_protocol(const ddpc_store *st) { return st ? proto_of(st)->name : ""; }

ddpc_status ddpc_store_set(ddpc_store *st, const char *key, const void *val, size_t len) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_set: store is NULL");
    size_t kl;
    DDPC_CHECK(full_key_len(st, "set", key, &kl));
    if (len > DDPC_STORE_MAX_VALUE)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store set '%.60s': value of %zu bytes exceeds "
                         "DDPC_STORE_MAX_VALUE (%u)",
                         key, len, DDPC_STORE_MAX_VALUE);
    if (len && !val)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store set '%.60s': value is NULL", key);
    return proto_of(st)->set(st, key, val, len);
}

ddpc_status ddpc_store_get(ddpc_store *st, const char *key, double timeout_s, void **val,
                           size_t *len) {
    if (!st || !val)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_get: store and val must be non-NULL");
    *val = NULL;
    if (len) *len = 0;
    size_t kl;
    DDPC_CHECK(full_key_len(st, "get", key, &kl));
    return proto_of(st)->get(st, key, timeout_s, val, len);
}

ddpc_status ddpc_store_add(ddpc_store *st, const char *key, int64_t delta, int64_t *result) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_add: store is NULL");
    size_t kl;
    DDPC_CHECK(full_key_len(st, "add", key, &kl));
    return proto_of(st)->add(st, key, delta, result);
}

ddpc_status ddpc_store_compare_set(ddpc_store *st, const char *key, const void *expected,
                                   size_t expected_len, const void *desired, size_t desired_len,
                                   void **actual, size_t *actual_len) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_compare_set: store is NULL");
    if (actual) *actual = NULL;
    if (actual_len) *actual_len = 0;
    size_t kl;
    DDPC_CHECK(full_key_len(st, "compare_set", key, &kl));
    if (expected_len > DDPC_STORE_MAX_VALUE || desired_len > DDPC_STORE_MAX_VALUE)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "store compare_set '%.60s': a value exceeds "
                         "DDPC_STORE_MAX_VALUE (%u)",
                         key, DDPC_STORE_MAX_VALUE);
    if ((expected_len && !expected) || (desired_len && !desired))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store compare_set '%.60s': a value is NULL", key);
    return proto_of(st)->compare_set(st, key, expected, expected_len, desired, desired_len, actual,
                                     actual_len);
}

ddpc_status ddpc_store_wait(ddpc_store *st, const char *const *keys, int n, double timeout_s) {
    if (!st || !keys)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_wait: store and keys must be non-NULL");
    if (n < 0 || n > STORE_MAX_WAIT_KEYS)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "store wait: %d keys is outside [0, %d]", n,
                         STORE_MAX_WAIT_KEYS);
    if (n == 0) return DDPC_OK;
    size_t kl;
    for (int i = 0; i < n; i++) DDPC_CHECK(full_key_len(st, "wait", keys[i], &kl));
    return proto_of(st)->wait(st, keys, n, timeout_s);
}

ddpc_status ddpc_store_check(ddpc_store *st, const char *key, int *exists) {
    if (!exists) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_check: exists is NULL");
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "store check: store is NULL");
    size_t kl;
    DDPC_CHECK(full_key_len(st, "check", key, &kl));
    return proto_of(st)->check(st, key, exists);
}

ddpc_status ddpc_store_delete(ddpc_store *st, const char *key, int *deleted) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "store delete: store is NULL");
    size_t kl;
    DDPC_CHECK(full_key_len(st, "delete", key, &kl));
    return proto_of(st)->del(st, key, deleted);
}

ddpc_status ddpc_store_num_keys(ddpc_store *st, int64_t *n) {
    if (!st || !n)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_num_keys: store and n must be non-NULL");
    return proto_of(st)->num_keys(st, n);
}

ddpc_status ddpc_store_ping(ddpc_store *st) {
    if (!st) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_store_ping: store is NULL");
    return proto_of(st)->ping(st);
}
