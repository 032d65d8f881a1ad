/*
 * allreduce.c — allreduce (ring; recursive doubling for small messages and
 * recursive halving + doubling for large ones; tree) and reduce-scatter
 * (ring; recursive halving for small messages on 2, 4, 8, ... ranks), as
 * the tuner (tuner.c) chooses; under DDPC_ALGO=auto on hosts of one rank
 * each its cost model picks among ring, halving-doubling and recursive
 * doubling.
 *
 * Every variant leaves bit-identical results on all ranks: the ring reduces
 * each block on one rank and copies it round; recursive doubling combines
 * (lower group, higher group) in that order on both partners; the tree
 * reduces on rank 0 and broadcasts.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

#define gn    ddpc__gsize
#define gme   ddpc__gme
#define grank ddpc__grank

ddpc_status ddpc__ring_allreduce_plan(ddpc__exec *e, ddpc__ring *out, const ddpc__group *g,
                                      const void *send, void *recv, size_t count, ddpc_dtype t,
                                      ddpc_op op, int finish) {
    int n = gn(e, g), r = gme(e, g);
    ddpc__ring rg;
    DDPC_CHECK(ddpc__ring_plan(e, &rg, n, 2 * (n - 1), count, 0));
    rg.nred = n - 1;
    rg.esize = ddpc_dtype_size(t);
    rg.t = t;
    rg.op = op;
    rg.direct = send != recv;
    rg.finish = finish;
    rg.g = g;
    for (int s = 0; s < n - 1; s++) {
        rg.sblk[s] = ((r - s) % n + n) % n;
        rg.rblk[s] = ((r - s - 1) % n + n) % n;
        rg.ssrc[s] = s == 0 ? send : recv;
        rg.rdst[s] = recv;
        rg.rloc[s] = send;
    }
    for (int s = 0; s < n - 1; s++) {
        int S = n - 1 + s;
        rg.sblk[S] = ((r + 1 - s) % n + n) % n;
        rg.rblk[S] = ((r - s) % n + n) % n;
        rg.ssrc[S] = recv;
        rg.rdst[S] = recv;
        rg.rloc[S] = NULL;
    }
    *out = rg;
    return DDPC_OK;
}

/* Ring over g: reduce-scatter (n-1 steps), then allgather (n-1 steps);
 * finish: AVG's division as blocks complete. */
static ddpc_status ring_allreduce(ddpc__exec *e, const ddpc__group *g, const void *send, void *recv,
                                  size_t count, ddpc_dtype t, ddpc_op op, int finish) {
    ddpc__ring rg;
    DDPC_CHECK(ddpc__ring_allreduce_plan(e, &rg, g, send, recv, count, t, op, finish));
    ddpc_status s = ddpc__ring_run(e, &rg);
    ddpc__ring_free(&rg);
    return s;
}

/*
 * Recursive doubling over the largest power of two p <= n. The first
 * 2*(n-p) ranks pair up first: each even one hands its vector to the odd
 * one above it and waits for the result at the end.
 */
static ddpc_status rhd_allreduce(ddpc__exec *e, const ddpc__group *g, const void *send, void *recv,
                                 size_t count, ddpc_dtype t, ddpc_op op) {
    ddpc_comm *c = e->c;
    int n = gn(e, g), r = gme(e, g);
    size_t nbytes = count * ddpc_dtype_size(t);
    if (recv != send) memcpy(recv, send, nbytes);
    char *tmp = ddpc__scratch(c, nbytes);
    if (!tmp) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory (%zu bytes)", nbytes);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    int rem = n - p, newr;
    ddpc__req q[2];
    /* 1. fold the extra ranks in */
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            ddpc__post_send(e, &q[0], grank(g, r + 1), recv, nbytes);
            DDPC_CHECK(ddpc__wait(e, &q[0]));
            newr = -1;
        } else {
            ddpc__post_recv(e, &q[0], grank(g, r - 1), tmp, nbytes);
            DDPC_CHECK(ddpc__wait(e, &q[0]));
            ddpc__reduce3(recv, tmp, recv, count, t, op);
            newr = r / 2;
        }
    } else {
        newr = r - rem;
    }
    /* 2. exchange whole vectors with partners at distance 1, 2, 4, ... */
    if (newr >= 0) {
        for (int mask = 1; mask < p; mask <<= 1) {
            int pn = newr ^ mask;
            int partner = grank(g, pn < rem ? pn * 2 + 1 : pn + rem);
            ddpc__post_send(e, &q[0], partner, recv, nbytes);
            ddpc__post_recv(e, &q[1], partner, tmp, nbytes);
            DDPC_CHECK(ddpc__wait_all(e, q, 2));
            if (newr < pn)
                ddpc__reduce3(recv, recv, tmp, count, t, op);
            else
                ddpc__reduce3(recv, tmp, recv, count, t, op);
        }
    }
    /* 3. hand the result back to the folded ranks */
    if (r < 2 * rem) {
        if (r % 2 == 1)
            ddpc__post_send(e, &q[0], grank(g, r - 1), recv, nbytes);
        else
            ddpc__post_recv(e, &q[0], grank(g, r + 1), recv, nbytes);
        DDPC_CHECK(ddpc__wait(e, &q[0]));
    }
    return DDPC_OK;
}

/* Real rank of group member g after the fold (see rhd_allreduce). */
static int unfold(int g, int rem) { return g < rem ? g * 2 + 1 : g + rem; }

/*
 * Recursive halving, then doubling (Rabenseifner), for large messages: the
 * same fold to p = 2^k ranks as below, then
 *   1. reduce-scatter by halving: at distance m = p/2, p/4, ..., 1 each rank
 *      keeps the half of its current range that contains its own block,
 *      sends the other half to its partner and combines the partner's copy
 *      of the kept half; afterwards member g owns block g;
 *   2. allgather by doubling: at distance 1, 2, ..., p/2 partners swap the
 *      ranges they own.
 * Each block is reduced on one rank only, so all ranks end bit-identical.
 */
static ddpc_status halving_doubling(ddpc__exec *e, const ddpc__group *g, const void *send,
                                    void *recv, size_t count, ddpc_dtype t, ddpc_op op,
                                    int finish) {
    ddpc_comm *c = e->c;
    int n = gn(e, g), r = gme(e, g);
    size_t es = ddpc_dtype_size(t), nbytes = count * es;
    if (recv != send) memcpy(recv, send, nbytes);
    char *buf = recv;
    char *tmp = ddpc__scratch(c, nbytes);
    if (!tmp) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory (%zu bytes)", nbytes);
    int p = 1;
    while (p * 2 <= n) p *= 2;
    int rem = n - p, m_g;
    size_t *boff = malloc(sizeof(size_t) * 2 * (size_t)p);
    if (!boff) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    size_t *bcnt = boff + p;
    ddpc__blocks(count, p, boff, bcnt);
    ddpc__req q[2];
    ddpc_status s = DDPC_OK;
#define RANGE_OFF(a)    (boff[(a)] * es)
#define RANGE_LEN(a, m) ((boff[(a) + (m)-1] + bcnt[(a) + (m)-1] - boff[(a)]) * es)
    /* 0. fold the extra ranks in */
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            ddpc__post_send(e, &q[0], grank(g, r + 1), buf, nbytes);
            if ((s = ddpc__wait(e, &q[0])) != DDPC_OK) goto out;
            m_g = -1;
        } else {
            ddpc__post_recv(e, &q[0], grank(g, r - 1), tmp, nbytes);
            if ((s = ddpc__wait(e, &q[0])) != DDPC_OK) goto out;
            ddpc__reduce3(buf, tmp, buf, count, t, op);
            m_g = r / 2;
        }
    } else {
        m_g = r - rem;
    }
    if (m_g >= 0) {
        /* 1. reduce-scatter by recursive halving */
        for (int m = p / 2; m >= 1; m /= 2) {
            int keep = m_g & ~(m - 1), give = (m_g ^ m) & ~(m - 1);
            int partner = grank(g, unfold(m_g ^ m, rem));
            ddpc__post_send(e, &q[0], partner, buf + RANGE_OFF(give), RANGE_LEN(give, m));
            ddpc__post_recv(e, &q[1], partner, tmp, RANGE_LEN(keep, m));
            if ((s = ddpc__wait_all(e, q, 2)) != DDPC_OK) goto out;
            ddpc__reduce_inplace(buf + RANGE_OFF(keep), tmp, RANGE_LEN(keep, m) / es, t, op);
            if (m == 1 && finish) /* block m_g is final: finish it while it is in cache */
                ddpc__reduce_finish(buf + RANGE_OFF(keep), RANGE_LEN(keep, m) / es, t, op, c->size);
        }
        /* 2. allgather by recursive doubling */
        for (int m = 1; m < p; m *= 2) {
            int mine = m_g & ~(m - 1), theirs = (m_g ^ m) & ~(m - 1);
            int partner = grank(g, unfold(m_g ^ m, rem));
            ddpc__post_send(e, &q[0], partner, buf + RANGE_OFF(mine), RANGE_LEN(mine, m));
            ddpc__post_recv(e, &q[1], partner, buf + RANGE_OFF(theirs), RANGE_LEN(theirs, m));
            if ((s = ddpc__wait_all(e, q, 2)) != DDPC_OK) goto out;
        }
    }
#undef RANGE_OFF
#undef RANGE_LEN
    /* 3. hand the result back to the folded ranks */
    if (r < 2 * rem) {
        if (r % 2 == 1)
            ddpc__post_send(e, &q[0], grank(g, r - 1), buf, nbytes);
        else
            ddpc__post_recv(e, &q[0], grank(g, r + 1), buf, nbytes);
        s = ddpc__wait(e, &q[0]);
    }
out:
    free(boff);
    return s;
}

/* Tree: binomial reduce to rank 0, then binomial broadcast. */
static ddpc_status tree_allreduce(ddpc__exec *e, const void *send, void *recv, size_t count,
                                  ddpc_dtype t, ddpc_op op) {
    void *tmp = ddpc__scratch(e->c, count * ddpc_dtype_size(t));
    if (!tmp) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    DDPC_CHECK(ddpc__tree_reduce(e, NULL, send, recv, tmp, count, t, op, 0));
    return ddpc__tree_bcast(e, NULL, recv, count * ddpc_dtype_size(t), 0);
}

ddpc_status ddpc__group_allreduce(ddpc__exec *e, const ddpc__group *g, const void *send, void *recv,
                                  size_t count, ddpc_dtype t, ddpc_op op, int algo) {
    int n = gn(e, g);
    size_t nbytes = count * ddpc_dtype_size(t);
    if (n == 1 || count == 0) {
        if (recv != send) memmove(recv, send, nbytes);
        return DDPC_OK;
    }
    int x = ddpc__tune_group(algo, count, nbytes, n);
    if (x == DDPC_X_RD) return rhd_allreduce(e, g, send, recv, count, t, op);
    if (x == DDPC_X_HD) return halving_doubling(e, g, send, recv, count, t, op, 0);
    return ring_allreduce(e, g, send, recv, count, t, op, 0);
}

/*
 * The flat ring's order: rank order, unless the communicator spans hosts
 * whose ranks are not numbered host by host (e.g. a cyclic placement);
 * then the ranks sorted by host (and local rank) into *g, with ord[size]
 * for its members, so that the ring crosses each host boundary once each
 * way instead of at every hop. Returns g, or NULL for rank order (also
 * when ord cannot be had: the ring is right either way).
 */
static const ddpc__group *host_ordered(const ddpc_comm *c, ddpc__group *g, int **ord) {
    *ord = NULL;
    if (!c->host_of || c->nhosts < 2) return NULL;
    int breaks = 0;
    for (int r = 0; r < c->size; r++) breaks += c->host_of[r] != c->host_of[(r + 1) % c->size];
    if (breaks <= c->nhosts) return NULL; /* every host's ranks are together already */
    int *o = malloc(sizeof(int) * ((size_t)c->size + (size_t)c->nhosts + 1));
    if (!o) return NULL;
    int *start = o + c->size;
    memset(start, 0, sizeof(int) * ((size_t)c->nhosts + 1));
    for (int r = 0; r < c->size; r++) start[c->host_of[r] + 1]++;
    for (int h = 0; h < c->nhosts; h++) start[h + 1] += start[h];
    for (int r = 0; r < c->size; r++) {
        int at = start[c->host_of[r]] + c->local_of[r];
        o[at] = r;
        if (r == c->rank) g->me = at;
    }
    g->n = c->size;
    g->ranks = o;
    *ord = o;
    return g;
}

ddpc_status ddpc__allreduce(ddpc__exec *e, const void *send, void *recv, size_t count, ddpc_dtype t,
                            ddpc_op op, const ddpc__tune *tu) {
    ddpc_comm *c = e->c;
    ddpc_status s;
    if (c->size == 1) {
        if (recv != send) memmove(recv, send, count * ddpc_dtype_size(t));
        return DDPC_OK;
    }
    if (!e->algo) e->algo = tu->name; /* for the flight recorder (hier.c names its own) */
    /* the ring and halving-doubling finish (AVG: divide) each block as it
     * completes; the others finish the whole vector at the end */
    switch (tu->algo) {
    case DDPC_X_RING: {
        ddpc__group hg;
        int *ord;
        const ddpc__group *g = host_ordered(c, &hg, &ord);
        if (g) DDPC_TRACE(COLL, "rank %d: flat ring in host order (member %d)", c->rank, g->me);
        s = ring_allreduce(e, g, send, recv, count, t, op, 1);
        free(ord);
        return s;
    }
    case DDPC_X_TREE: s = tree_allreduce(e, send, recv, count, t, op); break;
    case DDPC_X_HD: return halving_doubling(e, NULL, send, recv, count, t, op, 1);
    default: s = rhd_allreduce(e, NULL, send, recv, count, t, op); break;
    }
    if (s == DDPC_OK) ddpc__reduce_finish(recv, count, t, op, c->size);
    return s;
}

/*
 * Recursive halving, n a power of two (the first half of halving_doubling
 * without the fold): at distance m = n/2, ..., 1 each rank keeps the half
 * of its current run of blocks that holds its own, sends the other half to
 * its partner and combines the partner's copy of the kept half: log2(n)
 * rounds, after which rank r holds block r reduced, straight into recv.
 * The first round reads send, later ones acc (scratch), so recv may alias
 * send.
 */
static ddpc_status halving_reduce_scatter(ddpc__exec *e, const void *send, void *recv, size_t count,
                                          ddpc_dtype t, ddpc_op op) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    size_t bb = count * ddpc_dtype_size(t); /* bytes of one block */
    char *acc = ddpc__scratch(c, bb * (size_t)n + bb * (size_t)(n / 2));
    if (!acc) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for reduce_scatter");
    char *tmp = acc + bb * (size_t)n; /* the partner's half, n/2 blocks at most */
    const char *src = send;
    for (int m = n / 2; m >= 1; m /= 2) {
        int keep = r & ~(m - 1), give = (r ^ m) & ~(m - 1);
        ddpc__req q[2];
        ddpc__post_send(e, &q[0], r ^ m, src + (size_t)give * bb, (size_t)m * bb);
        ddpc__post_recv(e, &q[1], r ^ m, tmp, (size_t)m * bb);
        DDPC_CHECK(ddpc__wait_all(e, q, 2));
        char *dst = m == 1 ? (char *)recv : acc + (size_t)keep * bb;
        ddpc__reduce3(dst, src + (size_t)keep * bb, tmp, (size_t)m * count, t, op);
        src = acc;
    }
    return DDPC_OK;
}

/*
 * Ring reduce-scatter: step s sends block r-s-1 and receives block r-s-2,
 * so after n-1 steps rank r holds the reduction of block r. Partial sums
 * travel through acc (n blocks); the last one is copied to recv.
 */
ddpc_status ddpc__reduce_scatter(ddpc__exec *e, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_op op) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    size_t es = ddpc_dtype_size(t);
    if (n == 1) {
        if (recv != send) memmove(recv, send, count * es);
        return DDPC_OK;
    }
    if (ddpc__tune_blocks(c, count * es * (size_t)n) == DDPC_X_RD) {
        if (!e->algo) e->algo = "halving";
        return halving_reduce_scatter(e, send, recv, count, t, op);
    }
    int ns = n - 1;
    /* the communicator's scratch, kept between calls: a fresh buffer each
     * call page-faults on every page (10x the time of 64 MiB under a
     * hypervisor); the ring takes no scratch of its own here (direct) */
    char *acc = ddpc__scratch(c, count * es * (size_t)n);
    if (!acc) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for reduce_scatter");
    ddpc__ring rg;
    ddpc_status ps = ddpc__ring_plan(e, &rg, n, ns, count, 1);
    if (ps != DDPC_OK) return ps;
    rg.nred = ns;
    rg.esize = es;
    rg.t = t;
    rg.op = op;
    rg.direct = 1;
    for (int s = 0; s < ns; s++) {
        rg.sblk[s] = ((r - s - 1) % n + n) % n;
        rg.rblk[s] = ((r - s - 2) % n + n) % n;
        rg.ssrc[s] = s == 0 ? send : acc;
        rg.rdst[s] = acc;
        rg.rloc[s] = send;
    }
    ddpc_status s = ddpc__ring_run(e, &rg);
    if (s == DDPC_OK) memmove(recv, acc + (size_t)r * count * es, count * es);
    ddpc__ring_free(&rg);
    return s;
}
