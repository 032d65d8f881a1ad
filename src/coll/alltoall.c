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

/* Block j of a buffer: its offset and length in bytes. Equal blocks of
 * nbytes when counts is NULL, else counts[j] elements at displs[j]. */
static size_t off(const size_t *displs, size_t esize, size_t nbytes, int j) {
    return displs ? displs[j] * esize : (size_t)j * nbytes;
}
static size_t len(const size_t *counts, size_t esize, size_t nbytes, int j) {
    return counts ? counts[j] * esize : nbytes;
}

/* The exchange both forms share; vec as ddpc__args.vec, or NULL for equal
 * blocks of nbytes. */
static ddpc_status exchange(ddpc__exec *e, const char *send, char *recv, const size_t *vec,
                            size_t esize, size_t nbytes) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    const size_t *sc = vec, *sd = NULL, *rc = NULL, *rd = NULL;
    if (vec) sd = vec + n, rc = vec + 2 * n, rd = vec + 3 * n;
    if (len(sc, esize, nbytes, r) != len(rc, esize, nbytes, r))
        return ddpc__fail(e, DDPC_ERR_INVALID_ARG,
                          "alltoallv: rank %d sends itself %zu elements but expects %zu", r, sc[r],
                          rc[r]);
    if (len(sc, esize, nbytes, r))
        memmove(recv + off(rd, esize, nbytes, r), send + off(sd, esize, nbytes, r),
                len(sc, esize, nbytes, r));
    if (n == 1) return DDPC_OK;
    ddpc__req *q = malloc(sizeof *q * (size_t)(2 * n));
    if (!q) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 1; i < n; i++) {
        int to = (r + i) % n, from = (r + n - i) % n;
        ddpc__post_recv(e, &q[k++], from, recv + off(rd, esize, nbytes, from),
                        len(rc, esize, nbytes, from));
        ddpc__post_send(e, &q[k++], to, send + off(sd, esize, nbytes, to),
                        len(sc, esize, nbytes, to));
    }
    ddpc_status s = ddpc__wait_all(e, q, k);
    free(q);
    return s;
}

ddpc_status ddpc__alltoall(ddpc__exec *e, const void *send, void *recv, size_t nbytes) {
    return exchange(e, send, recv, NULL, 1, nbytes);
}

ddpc_status ddpc__alltoallv(ddpc__exec *e, const void *send, void *recv, const size_t *vec,
                            size_t esize) {
    return exchange(e, send, recv, vec, esize, 0);
}
