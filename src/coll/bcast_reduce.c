/*
 * bcast_reduce.c — broadcast and reduce: binomial trees for small messages
 * (log2(n) rounds), a pipelined chain for large ones (every rank forwards
 * chunk j while chunk j+1 arrives, so the root's link never idles).
 *
 * In both, some ranks only send; so each posts ddpc__check_ring_post's
 * fingerprint exchange with the ring neighbours first (except between root
 * and root+1: the data crosses that link in both algorithms, and its
 * header is checked) and parks its receiving half: a rank that only sends
 * returns once its data is sent, running ahead of its neighbours, and a
 * mismatch only it could see (a mismatched root) fails its next operation
 * on the communicator.
 */
#include <string.h>

#include "coll/coll.h"

/* rank of virtual rank v in a tree over g rooted at member root */
static int real(const ddpc__group *g, int v, int root, int n) {
    return ddpc__grank(g, (v + root) % n);
}

ddpc_status ddpc__tree_bcast(ddpc__exec *e, const ddpc__group *g, void *buf, size_t nbytes,
                             int root) {
    int n = ddpc__gsize(e, g), v = (ddpc__gme(e, g) - root + n) % n;
    ddpc__req q[33];
    int mask = 1;
    /* 1. receive from the parent: v with its lowest set bit cleared */
    while (mask < n) {
        if (v & mask) {
            ddpc__post_recv(e, &q[0], real(g, v - mask, root, n), buf, nbytes);
            DDPC_CHECK(ddpc__wait(e, &q[0]));
            break;
        }
        mask <<= 1;
    }
    /* 2. send to the children v + mask/2, v + mask/4, ..., all at once */
    int k = 0;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < n) ddpc__post_send(e, &q[k++], real(g, v + mask, root, n), buf, nbytes);
    return ddpc__wait_all(e, q, k);
}

ddpc_status ddpc__tree_reduce(ddpc__exec *e, const ddpc__group *g, const void *send, void *acc,
                              void *tmp, size_t count, ddpc_dtype t, ddpc_op op, int root) {
    int n = ddpc__gsize(e, g), v = (ddpc__gme(e, g) - root + n) % n;
    size_t nbytes = count * ddpc_dtype_size(t);
    if (acc != send) memcpy(acc, send, nbytes);
    ddpc__req q;
    for (int mask = 1; mask < n; mask <<= 1) {
        if (v & mask) { /* 2. hand the partial result to the parent; done */
            ddpc__post_send(e, &q, real(g, v & ~mask, root, n), acc, nbytes);
            return ddpc__wait(e, &q);
        }
        if ((v | mask) < n) { /* 1. combine a child's partial result */
            ddpc__post_recv(e, &q, real(g, v | mask, root, n), tmp, nbytes);
            DDPC_CHECK(ddpc__wait(e, &q));
            ddpc__reduce_inplace(acc, tmp, count, t, op);
        }
    }
    return DDPC_OK;
}

/* Chain root -> root+1 -> ... -> root-1 (members of g), in the tuner's
 * pieces. The root sends from src and, where src is not buf, copies each
 * piece into buf as it posts it: the ring's copy then reads the piece from
 * the cache, and the receivers copy out meanwhile (an out-of-place 32 MiB
 * broadcast copied all of src first: 13.3 ms against 4-5 ms in place). */
static ddpc_status chain_bcast(ddpc__exec *e, const ddpc__group *g, const void *src, void *buf,
                               size_t nbytes, int root) {
    ddpc_comm *c = e->c;
    int n = ddpc__gsize(e, g), me = ddpc__gme(e, g), v = (me - root + n) % n;
    int prev = ddpc__grank(g, (me + n - 1) % n), next = ddpc__grank(g, (me + 1) % n);
    int has_prev = v > 0, has_next = v < n - 1;
    size_t ch = ddpc__tune_piece(c, nbytes), m = (nbytes + ch - 1) / ch;
    ddpc__req sq[DDPC_WINDOW], rq[DDPC_WINDOW];
    size_t nr = 0, nrd = 0, ns = 0, nsd = 0;
    char *b = buf;
    while ((has_prev && nrd < m) || (has_next && nsd < m)) {
        while (has_prev && nr < m && nr - nrd < DDPC_WINDOW) {
            size_t off = nr * ch, len = nbytes - off < ch ? nbytes - off : ch;
            ddpc__post_recv(e, &rq[nr % DDPC_WINDOW], prev, b + off, len);
            nr++;
        }
        while (has_next && ns < m && ns - nsd < DDPC_WINDOW && (!has_prev || ns < nrd)) {
            size_t off = ns * ch, len = nbytes - off < ch ? nbytes - off : ch;
            if (src != buf) memcpy(b + off, (const char *)src + off, len);
            ddpc__post_send(e, &sq[ns % DDPC_WINDOW], next, (const char *)src + off, len);
            ns++;
        }
        DDPC_CHECK(ddpc__progress(e, 1));
        while (nrd < nr && rq[nrd % DDPC_WINDOW].done) nrd++;
        while (nsd < ns && sq[nsd % DDPC_WINDOW].done) nsd++;
    }
    return DDPC_OK;
}

ddpc_status ddpc__chain_bcast(ddpc__exec *e, const ddpc__group *g, void *buf, size_t nbytes,
                              int root) {
    return chain_bcast(e, g, buf, buf, nbytes, root);
}

/*
 * Chain towards the root: root-1 -> root-2 -> ... -> root. Each rank
 * combines an arriving chunk with its own and forwards it; the root
 * combines into recv.
 */
static ddpc_status chain_reduce(ddpc__exec *e, const void *send, void *recv, size_t count,
                                ddpc_dtype t, ddpc_op op, int root) {
    ddpc_comm *c = e->c;
    int n = c->size, v = (c->rank - root + n) % n;
    int from = (c->rank + 1) % n, to = (c->rank + n - 1) % n;
    int has_from = v<n - 1, has_to = v> 0;
    size_t es = ddpc_dtype_size(t);
    size_t ce = ddpc__tune_piece(c, count * es) / es, m;
    if (ce == 0) ce = 1;
    m = (count + ce - 1) / ce;
    char *slots = ddpc__scratch(c, DDPC_WINDOW * ce * es);
    if (!slots) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for chain buffers");
    const char *mine = send;
    ddpc__req sq[DDPC_WINDOW], rq[DDPC_WINDOW];
    size_t nr = 0, nrd = 0, ns = 0, nsd = 0;
    while ((has_from && nrd < m) || (has_to && nsd < m)) {
        /* a slot is free once its previous chunk was combined and sent on */
        while (has_from && nr < m && nr - nrd < DDPC_WINDOW &&
               (!has_to || nr - nsd < DDPC_WINDOW)) {
            size_t off = nr * ce, cnt = count - off < ce ? count - off : ce;
            ddpc__post_recv(e, &rq[nr % DDPC_WINDOW], from, slots + (nr % DDPC_WINDOW) * ce * es,
                            cnt * es);
            nr++;
        }
        while (has_to && ns < m && ns - nsd < DDPC_WINDOW && (!has_from || ns < nrd)) {
            size_t off = ns * ce, cnt = count - off < ce ? count - off : ce;
            const char *src = has_from ? slots + (ns % DDPC_WINDOW) * ce * es : mine + off * es;
            ddpc__post_send(e, &sq[ns % DDPC_WINDOW], to, src, cnt * es);
            ns++;
        }
        DDPC_CHECK(ddpc__progress(e, 1));
        while (nrd < nr && rq[nrd % DDPC_WINDOW].done) {
            size_t off = nrd * ce, cnt = count - off < ce ? count - off : ce;
            char *slot = slots + (nrd % DDPC_WINDOW) * ce * es;
            if (has_to)
                ddpc__reduce_inplace(slot, mine + off * es, cnt, t, op);
            else
                ddpc__reduce3((char *)recv + off * es, mine + off * es, slot, cnt, t, op);
            nrd++;
        }
        while (nsd < ns && sq[nsd % DDPC_WINDOW].done) nsd++;
    }
    return DDPC_OK;
}

/* The binomial tree: the root accumulates in recv, the others in scratch. */
static ddpc_status tree_reduce(ddpc__exec *e, const void *send, void *recv, size_t count,
                               ddpc_dtype t, ddpc_op op, int root) {
    ddpc_comm *c = e->c;
    size_t al = (count * ddpc_dtype_size(t) + 63) & ~(size_t)63;
    char *scr = ddpc__scratch(c, 2 * al);
    if (!scr) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory (%zu bytes)", 2 * al);
    void *acc = c->rank == root ? recv : scr;
    return ddpc__tree_reduce(e, NULL, send, acc, scr + al, count, t, op, root);
}

ddpc_status ddpc__broadcast(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root) {
    ddpc_comm *c = e->c;
    ddpc__tune tu;
    ddpc__tune_rooted(c, nbytes, &tu);
    const void *src = recv;
    if (c->rank == root && recv != send) {
        /* the chain's root copies as it sends */
        if (c->size > 1 && tu.algo != DDPC_X_TREE && ddpc__apart(send, nbytes, recv, nbytes))
            src = send;
        else
            memmove(recv, send, nbytes);
    }
    if (c->size == 1) return DDPC_OK;
    ddpc__req ck[2];
    int nck, from = -1, to = -1;
    if (nbytes > 0) { /* both algorithms send root -> root+1 first */
        from = root;
        to = (root + 1) % c->size;
    }
    DDPC_CHECK(ddpc__check_ring_post(e, ck, &nck, from, to));
    if (!e->algo) e->algo = tu.name;
    return ddpc__check_ring_wait(e, ck, nck,
                                 tu.algo == DDPC_X_TREE
                                     ? ddpc__tree_bcast(e, NULL, recv, nbytes, root)
                                     : chain_bcast(e, NULL, src, recv, nbytes, root));
}

ddpc_status ddpc__reduce(ddpc__exec *e, const void *send, void *recv, size_t count, ddpc_dtype t,
                         ddpc_op op, int root) {
    ddpc_comm *c = e->c;
    size_t nbytes = count * ddpc_dtype_size(t);
    if (c->size == 1) {
        if (recv != send) memmove(recv, send, nbytes);
        return DDPC_OK;
    }
    ddpc__req ck[2];
    int nck, from = -1, to = -1;
    if (nbytes > 0) { /* both algorithms end root+1 -> root */
        from = (root + 1) % c->size;
        to = root;
    }
    DDPC_CHECK(ddpc__check_ring_post(e, ck, &nck, from, to));
    ddpc__tune tu;
    ddpc__tune_rooted(c, nbytes, &tu);
    if (!e->algo) e->algo = tu.name;
    return ddpc__check_ring_wait(e, ck, nck,
                                 tu.algo == DDPC_X_RING
                                     ? chain_reduce(e, send, recv, count, t, op, root)
                                     : tree_reduce(e, send, recv, count, t, op, root));
}
