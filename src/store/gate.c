/*
 * gate.c — who the store's server lets in (gate.h): the admission
 * settings, and each connection's first bytes until it has proved the job
 * token. The handshake itself is base/auth.c's; what the store adds is
 * telling its own clients apart (a TCPStore client, a ddpc client without
 * the token) and answering each in its protocol. server.c owns the
 * connections, their deadlines and their output.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/env.h"
#include "base/util.h"
#include "store/gate.h"
#include "store/proto.h"

ddpc_status ddpc__gate_load(ddpc__store_gate *g) {
    const char *token = NULL;
    long torch = 0;
    DDPC_CHECK(ddpc__whitelist_load());
    DDPC_CHECK(ddpc__auth_token(&token));
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_AUTH_TIMEOUT, &g->auth_s));
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_STORE_TORCH, &torch));
    if (token && !(g->token = strdup(token)))
        return ddpc__err(DDPC_ERR_NOMEM, "store server: out of memory");
    g->allow_torch = (int)torch;
    if (token)
        DDPC_INFO(STORE,
                  "store: clients must prove the job token (DDPC_JOB_TOKEN); PyTorch TCPStore "
                  "clients are %s",
                  torch ? "served without proof (DDPC_STORE_TORCH=1)"
                        : "refused (DDPC_STORE_TORCH=1 would serve them)");
    return DDPC_OK;
}

void ddpc__gate_free(ddpc__store_gate *g) {
    free(g->token);
    g->token = NULL;
}

/* An RS_ERROR frame carrying msg, into out (DDPC_GATE_OUT bytes). */
static size_t error_frame(unsigned char *out, const char *msg) {
    size_t n = strlen(msg);
    if (n > DDPC_GATE_OUT - 5) n = DDPC_GATE_OUT - 5;
    put_u32(out, (uint32_t)(1 + n));
    out[4] = RS_ERROR;
    memcpy(out + 5, msg, n);
    return 5 + n;
}

int ddpc__gate_read(const ddpc__store_gate *g, ddpc__gate_pending *p, int fd, const char *peer,
                    unsigned char *out, size_t *olen, char *why, size_t whylen) {
    ddpc__auth_srv *a = &p->auth;
    *olen = 0;
    if (p->stage == 0) { /* the first byte tells the client's protocol */
        unsigned char b;
        ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            return DDPC_GATE_WAIT;
        if (n <= 0) return DDPC_GATE_LOST;
        if (b < TQ_COUNT && g->allow_torch) return DDPC_GATE_TORCH; /* read on as one */
        if (b < TQ_COUNT) { /* no error reply in its protocol */
            snprintf(why, whylen,
                     "a PyTorch TCPStore client cannot prove the job token "
                     "(DDPC_JOB_TOKEN is set; DDPC_STORE_TORCH=1 admits such clients)");
            return DDPC_GATE_REFUSED;
        }
        ddpc__auth_srv_init(a, DDPC_AUTH_STORE);
        p->stage = 1;
    }
    ssize_t n = recv(fd, a->in + a->have, ddpc__auth_srv_need(a), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) return DDPC_GATE_MORE;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return DDPC_GATE_WAIT;
    if (n <= 0) {
        DDPC_WARN(STORE,
                  "store: refused the connection from %s: it closed during the job "
                  "token's handshake",
                  peer);
        return DDPC_GATE_LOST;
    }
    a->have += (size_t)n;
    if (a->stage == 0 && a->have >= 4 && get_u32(a->in) == STORE_MAGIC) {
        *olen = error_frame(out,
                            "this store requires the job's token: set DDPC_JOB_TOKEN to the job's");
        snprintf(why, whylen, "a ddpc client without the job token (DDPC_JOB_TOKEN unset there)");
        return DDPC_GATE_REFUSED;
    }
    int r = ddpc__auth_srv_step(a, g->token, out, olen, why, whylen);
    return r < 0 ? DDPC_GATE_REFUSED : r == 2 ? DDPC_GATE_PROVED : DDPC_GATE_MORE;
}
