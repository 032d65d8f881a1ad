/*
 * alltoall.c — all-to-all with equal blocks and with uneven ones (alltoallv):
 * every pair exchanges directly, all sends and receives posted at once (rank
 * r sends first to r+1, then r+2, ... so that no rank is everyone's first
 * target). alltoallv sends every pair a message even when it is empty, so
 * that each pair's header check still compares the two calls.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

ddpc_status ddpc__alltoall(ddpc_exec *e, const void *send, void *recv, size_t nbytes) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    memmove((char *)recv + (size_t)r * nbytes, (const char *)send + (size_t)r * nbytes, nbytes);
    if (n == 1) return DDPC_OK;
    ddpc_req *q = malloc(sizeof *q * (size_t)(2 * n));
    if (!q) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r + n - i) % n;
        ddpc__post_recv(e, &q[k++], from, (char *)recv + (size_t)from * nbytes, nbytes);
        ddpc__post_send(e, &q[k++], to, (const char *)send + (size_t)to * nbytes, nbytes);
    }
    ddpc_status s = ddpc__wait_all(e, q, k);
    free(q);
    return s;
}

ddpc_status ddpc__alltoallv(ddpc_exec *e, const void *send, void *recv, const size_t *vec, size_t esize) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    const size_t *sc = vec, *sd = vec + n, *rc = vec + 2 * n, *rd = vec + 3 * n;
    if (sc[r] != rc[r])
        return ddpc__fail(e, DDPC_ERR_INVALID_ARG, "alltoallv: rank %d sends itself %zu elements but expects %zu",
                          r, sc[r], rc[r]);
    if (sc[r]) memmove((char *)recv + rd[r] * esize, (const char *)send + sd[r] * esize, sc[r] * esize);
    if (n == 1) return DDPC_OK;
    ddpc_req *q = malloc(sizeof *q * (size_t)(2 * n));
    if (!q) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r + n - i) % n;
        ddpc__post_recv(e, &q[k++], from, (char *)recv + rd[from] * esize, rc[from] * esize);
        ddpc__post_send(e, &q[k++], to, (const char *)send + sd[to] * esize, sc[to] * esize);
    }
    ddpc_status s = ddpc__wait_all(e, q, k);
    free(q);
    return s;
}
