/*
 * gather.c — allgather (the ring, each block forwarded chunk by chunk as it
 * arrives; recursive doubling where the tuner says so), gather and scatter
 * (the root talks to every rank at once; the progress loop interleaves the
 * connections).
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

/* Recursive doubling, n a power of two: at distance m = 1, 2, 4, ...
 * partners swap the m blocks each holds (the run of m blocks that starts
 * at its rank with the low bits cleared): log2(n) rounds. */
static ddpc_status rd_allgather(ddpc__exec *e, char *recv, size_t nbytes) {
    int n = e->c->size, r = e->c->rank;
    for (int m = 1; m < n; m <<= 1) {
        int partner = r ^ m;
        ddpc__req q[2];
        ddpc__post_send(e, &q[0], partner, recv + (size_t)(r & ~(m - 1)) * nbytes,
                        (size_t)m * nbytes);
        ddpc__post_recv(e, &q[1], partner, recv + (size_t)(partner & ~(m - 1)) * nbytes,
                        (size_t)m * nbytes);
        DDPC_CHECK(ddpc__wait_all(e, q, 2));
    }
    return DDPC_OK;
}

ddpc_status ddpc__allgather(ddpc__exec *e, const void *send, void *recv, size_t nbytes) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    char *own = (char *)recv + (size_t)r * nbytes;
    int ring = n > 1 && ddpc__tune_blocks(c, nbytes * (size_t)n) != DDPC_X_RD;
    /* the ring copies an input lying apart from recv as it sends it */
    int copy_in_ring = ring && ddpc__apart(send, nbytes, recv, (size_t)n * nbytes);
    if ((const void *)own != send && !copy_in_ring) memmove(own, send, nbytes);
    if (n == 1) return DDPC_OK;
    if (!ring) {
        if (!e->algo) e->algo = "rhd";
        return rd_allgather(e, recv, nbytes);
    }
    int ns = n - 1;
    ddpc__ring rg;
    DDPC_CHECK(ddpc__ring_plan(e, &rg, n, ns, nbytes, 1));
    rg.esize = 1;
    rg.t = DDPC_UINT8;
    rg.op = DDPC_SUM;
    for (int s = 0; s < ns; s++) {
        rg.sblk[s] = ((r - s) % n + n) % n;
        rg.rblk[s] = ((r - s - 1) % n + n) % n;
        rg.ssrc[s] = recv;
        rg.rdst[s] = recv;
        rg.rloc[s] = NULL;
    }
    if (copy_in_ring) rg.own = send;
    ddpc_status s = ddpc__ring_run(e, &rg);
    ddpc__ring_free(&rg);
    return s;
}

/* Posts one message per rank other than this one and waits for all. */
static ddpc_status fan(ddpc__exec *e, int is_send, char *base, size_t nbytes, int root) {
    ddpc_comm *c = e->c;
    int n = c->size;
    if (c->rank != root) {
        ddpc__req q;
        if (is_send)
            ddpc__post_recv(e, &q, root, base, nbytes);
        else
            ddpc__post_send(e, &q, root, base, nbytes);
        return ddpc__wait(e, &q);
    }
    ddpc__req *q = malloc(sizeof *q * (size_t)n);
    if (!q) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 1; i < n; i++) {
        int p = (root + i) % n;
        if (is_send)
            ddpc__post_send(e, &q[k++], p, base + (size_t)p * nbytes, nbytes);
        else
            ddpc__post_recv(e, &q[k++], p, base + (size_t)p * nbytes, nbytes);
    }
    ddpc_status s = ddpc__wait_all(e, q, k);
    free(q);
    return s;
}

ddpc_status ddpc__gather(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root) {
    ddpc_comm *c = e->c;
    if (c->rank == root) {
        char *own = (char *)recv + (size_t)root * nbytes;
        if ((const void *)own != send) memmove(own, send, nbytes);
    }
    if (c->size == 1) return DDPC_OK;
    ddpc__req ck[2];
    int nck;
    /* every rank sends the root its block, root+1 too: no check there */
    DDPC_CHECK(ddpc__check_ring_post(e, ck, &nck, (root + 1) % c->size, root));
    return ddpc__check_ring_wait(e, ck, nck,
                                 fan(e, 0, c->rank == root ? recv : (void *)send, nbytes, root));
}

ddpc_status ddpc__scatter(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root) {
    ddpc_comm *c = e->c;
    if (c->rank == root) {
        const char *own = (const char *)send + (size_t)root * nbytes;
        if ((void *)own != recv) memmove(recv, own, nbytes);
    }
    if (c->size == 1) return DDPC_OK;
    ddpc__req ck[2];
    int nck;
    /* the root sends every rank its block, root+1 too: no check there */
    DDPC_CHECK(ddpc__check_ring_post(e, ck, &nck, root, (root + 1) % c->size));
    return ddpc__check_ring_wait(e, ck, nck,
                                 fan(e, 1, c->rank == root ? (char *)send : recv, nbytes, root));
}
