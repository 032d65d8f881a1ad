/*
 * alltoall.c — all-to-all with equal blocks: every pair exchanges directly,
 * all sends and receives posted at once (rank r sends first to r+1, then
 * r+2, ... so that no rank is everyone's first target).
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
