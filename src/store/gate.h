/*
 * gate.h — who the store's server lets in: its admission settings (the job
 * token, DDPC_AUTH_TIMEOUT, DDPC_STORE_TORCH, HCCL's whitelist) and the
 * connections still on their way in, whose bytes are the job token's
 * handshake (base/auth.h) until they have proved it. server.c keeps one
 * gate and, per connection not yet admitted, one ddpc__gate_pending; the
 * server thread alone touches them.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_STORE_GATE_H
#define DDPC_STORE_GATE_H

#include <stddef.h>

#include "base/auth.h"
#include "base/base.h"

/* The server's admission settings. */
typedef struct ddpc__store_gate {
    char *token;     /* DDPC_JOB_TOKEN (owned); NULL: connections are not authenticated */
    double auth_s;   /* DDPC_AUTH_TIMEOUT: how long a connection may take to prove it */
    int allow_torch; /* DDPC_STORE_TORCH=1: TCPStore clients served without proof */
} ddpc__store_gate;

/* Fills g from the environment (and loads HCCL's whitelist, which
 * ddpc__admit_addr then applies); says at INFO what a token means for
 * TCPStore clients. Release with ddpc__gate_free (g zeroed: harmless). */
ddpc_status ddpc__gate_load(ddpc__store_gate *g);
void ddpc__gate_free(ddpc__store_gate *g);

/* One connection that has not proved the job token yet (zeroed to start). */
typedef struct ddpc__gate_pending {
    int stage;           /* 0: nothing read; 1: in the token's handshake */
    ddpc__auth_srv auth; /* stage 1 */
} ddpc__gate_pending;

/* Bytes ddpc__gate_read may ask to send at once. */
#define DDPC_GATE_OUT 128

enum {
    DDPC_GATE_LOST = -2,    /* the client closed or failed: drop it at once */
    DDPC_GATE_REFUSED = -1, /* send out[0, *olen) if any, then close; why says why */
    DDPC_GATE_WAIT = 0,     /* nothing more to read now */
    DDPC_GATE_MORE = 1,     /* read on, after sending out[0, *olen) if any (the challenge) */
    DDPC_GATE_PROVED = 2,   /* proved: send out (the verdict); the store's handshake follows */
    DDPC_GATE_TORCH = 3,    /* a TCPStore client, admitted unproved (DDPC_STORE_TORCH=1) */
};

/* One step of pending connection p on fd (non-blocking; peer names it in
 * logs) under a gate with a token: a TCPStore client (first byte below
 * TQ_COUNT) is refused, or admitted unproved under DDPC_STORE_TORCH=1; a
 * ddpc client without the token is told so in an RS_ERROR frame; anything
 * else must be the job token's handshake. Returns a DDPC_GATE_* value; out
 * holds DDPC_GATE_OUT bytes. */
int ddpc__gate_read(const ddpc__store_gate *g, ddpc__gate_pending *p, int fd, const char *peer,
                    unsigned char *out, size_t *olen, char *why, size_t whylen);

#endif /* DDPC_STORE_GATE_H */
