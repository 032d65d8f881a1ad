/*
 * ring.c — the chunked, pipelined ring that moves the large messages of
 * allreduce, reduce-scatter and allgather (see ddpc__ring in coll.h).
 *
 * Every (step, chunk) pair is a task t = step * m + chunk, m chunks per
 * block. Receives are posted in task order, at most DDPC_WINDOW ahead;
 * sends likewise, and the send of task t (step >= 1) waits for the receive
 * of task t - m, which brought (and, when reducing, combined) the same
 * chunk one step earlier. So every link carries chunks in both directions
 * at once, and reduction of one chunk overlaps the arrival of the next.
 * Reducing steps from a peer over shared memory combine each chunk as it
 * arrives, straight from the ring into the destination (ring_combine);
 * over TCP, out of place they receive straight into the destination and
 * combine there, in place they go through DDPC_WINDOW scratch slots.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

void ddpc__blocks(size_t count, int n, size_t *boff, size_t *bcnt) {
    size_t q = count / (size_t)n, rem = count % (size_t)n;
    for (int b = 0; b < n; b++) {
        bcnt[b] = q + ((size_t)b < rem);
        boff[b] = (size_t)b * q + ((size_t)b < rem ? (size_t)b : rem);
    }
}

ddpc_status ddpc__ring_plan(ddpc__exec *e, ddpc__ring *rg, int n, int nsteps, size_t count,
                            int equal) {
    memset(rg, 0, sizeof *rg);
    size_t ns = (size_t)nsteps;
    /* pointers first, then sizes, then ints: each part stays aligned */
    char *mem =
        malloc(3 * ns * sizeof(char *) + 2 * (size_t)n * sizeof(size_t) + 2 * ns * sizeof(int) + 1);
    if (!mem) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for the ring plan");
    const char **ptr = (const char **)mem;
    size_t *boff = (size_t *)(ptr + 3 * ns), *bcnt = boff + n;
    int *blk = (int *)(bcnt + n);
    if (equal)
        for (int b = 0; b < n; b++) {
            boff[b] = (size_t)b * count;
            bcnt[b] = count;
        }
    else
        ddpc__blocks(count, n, boff, bcnt);
    rg->nsteps = nsteps;
    rg->ssrc = ptr;
    rg->rdst = (char **)(ptr + ns);
    rg->rloc = ptr + 2 * ns;
    rg->boff = boff;
    rg->bcnt = bcnt;
    rg->sblk = blk;
    rg->rblk = blk + ns;
    return DDPC_OK;
}

void ddpc__ring_free(ddpc__ring *rg) { free((void *)rg->ssrc); }

/* Element range of chunk j of block b. */
static void chunk_of(const ddpc__ring *rg, int b, size_t j, size_t ce, size_t *off, size_t *cnt) {
    size_t lo = j * ce;
    size_t n = rg->bcnt[b];
    *off = rg->boff[b] + (lo < n ? lo : n);
    *cnt = lo < n ? (n - lo < ce ? n - lo : ce) : 0;
}

static void combine_arrived(void *dst, const void *src, size_t n, void *ctx) {
    const ddpc__ring_combine *k = ctx;
    size_t cnt = n / ddpc_dtype_size(k->t);
    const char *loc = k->loc_base + ((char *)dst - k->dst_base);
    ddpc__reduce3(dst, loc, src, cnt, k->t, k->op);
    if (k->finish_n) ddpc__reduce_finish(dst, cnt, k->t, k->op, k->finish_n);
}

ddpc_status ddpc__ring_start(ddpc__exec *e, ddpc__ring_exec *x, const ddpc__ring *rg) {
    ddpc_comm *c = e->c;
    memset(x, 0, sizeof *x);
    x->rg = rg;
    int n = rg->g ? rg->g->n : c->size, me = rg->g ? rg->g->me : c->rank;
    x->next = (me + 1) % n;
    x->prev = (me + n - 1) % n;
    if (rg->g) {
        x->next = rg->g->ranks[x->next];
        x->prev = rg->g->ranks[x->prev];
    }
    size_t es = rg->esize;
    x->ce = c->chunk / es;
    if (x->ce == 0) x->ce = 1;
    size_t maxb = 0;
    for (int b = 0; b < n; b++)
        if (rg->bcnt[b] > maxb) maxb = rg->bcnt[b];
    x->m = maxb ? (maxb + x->ce - 1) / x->ce : 1;
    x->T = (size_t)rg->nsteps * x->m;
    x->comb = rg->nred > 0 && es <= 16 && ddpc__peer_combines(e, x->prev);
    if (rg->nred > 0 && !rg->direct && !x->comb) {
        x->slots = rg->slots ? rg->slots : ddpc__scratch(c, ddpc__ring_slot_bytes(c, es));
        if (!x->slots) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for ring buffers");
    }
    return DDPC_OK;
}

size_t ddpc__ring_slot_bytes(const ddpc_comm *c, size_t esize) {
    size_t ce = c->chunk / esize;
    return DDPC_WINDOW * (ce ? ce : 1) * esize;
}

ddpc_status ddpc__ring_step(ddpc__exec *e, ddpc__ring_exec *x, int *done) {
    ddpc_comm *c = e->c;
    const ddpc__ring *rg = x->rg;
    size_t es = rg->esize, ce = x->ce, m = x->m, T = x->T;
    /* 1. retire finished receives in order (reducing ones now) */
    while (x->nrd < x->nr && x->rreq[x->nrd % DDPC_WINDOW].done) {
        int s = (int)(x->nrd / m);
        if (s < rg->nred && !x->comb) { /* (combined as it arrived) */
            size_t off, cnt;
            chunk_of(rg, rg->rblk[s], x->nrd % m, ce, &off, &cnt);
            if (rg->direct)
                ddpc__reduce_inplace(rg->rdst[s] + off * es, rg->rloc[s] + off * es, cnt, rg->t,
                                     rg->op);
            else
                ddpc__reduce3(rg->rdst[s] + off * es, rg->rloc[s] + off * es,
                              x->slots + (x->nrd % DDPC_WINDOW) * ce * es, cnt, rg->t, rg->op);
            if (rg->finish && s == rg->nred - 1)
                ddpc__reduce_finish(rg->rdst[s] + off * es, cnt, rg->t, rg->op, c->size);
        }
        x->nrd++;
    }
    while (x->nsd < x->ns && x->sreq[x->nsd % DDPC_WINDOW].done) x->nsd++;
    /* 2. post receives, up to the window */
    while (x->nr < T && x->nr - x->nrd < DDPC_WINDOW) {
        int s = (int)(x->nr / m);
        size_t off, cnt;
        chunk_of(rg, rg->rblk[s], x->nr % m, ce, &off, &cnt);
        if (s < rg->nred && x->comb) {
            ddpc__ring_combine *k = &x->cctx[x->nr % DDPC_WINDOW];
            *k = (ddpc__ring_combine){ rg->rdst[s], rg->rloc[s], rg->t, rg->op,
                                       rg->finish && s == rg->nred - 1 ? c->size : 0 };
            ddpc__post_recv_combine(e, &x->rreq[x->nr % DDPC_WINDOW], x->prev,
                                    rg->rdst[s] + off * es, cnt * es, combine_arrived, k, es);
        } else {
            char *dst = s < rg->nred && !rg->direct ? x->slots + (x->nr % DDPC_WINDOW) * ce * es
                                                    : rg->rdst[s] + off * es;
            ddpc__post_recv(e, &x->rreq[x->nr % DDPC_WINDOW], x->prev, dst, cnt * es);
        }
        x->nr++;
    }
    /* 3. post sends whose chunk is ready */
    while (x->ns < T && x->ns - x->nsd < DDPC_WINDOW && (x->ns < m || x->ns - m < x->nrd)) {
        int s = (int)(x->ns / m);
        size_t off, cnt;
        chunk_of(rg, rg->sblk[s], x->ns % m, ce, &off, &cnt);
        const char *src = rg->ssrc[s] + off * es;
        if (s == 0 && rg->own) { /* the ring's copy then reads it from the cache */
            src = rg->own + (off - rg->boff[rg->sblk[0]]) * es;
            memcpy(rg->rdst[0] + off * es, src, cnt * es);
        }
        ddpc__post_send(e, &x->sreq[x->ns % DDPC_WINDOW], x->next, src, cnt * es);
        x->ns++;
    }
    *done = x->nrd == T && x->nsd == T;
    return DDPC_OK;
}

ddpc_status ddpc__ring_run(ddpc__exec *e, const ddpc__ring *rg) {
    ddpc__ring_exec x;
    int done = 0;
    DDPC_CHECK(ddpc__ring_start(e, &x, rg));
    for (;;) {
        DDPC_CHECK(ddpc__ring_step(e, &x, &done));
        if (done) return DDPC_OK;
        /* move bytes; sleep only if nothing can move */
        DDPC_CHECK(ddpc__progress(e, 1));
    }
}
