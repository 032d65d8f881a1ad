/*
 * hier.c — hierarchical allreduce, reduce-scatter, allgather and broadcast
 * for a communicator that spans several hosts (the host layout is
 * bootstrap.c's: c->host_of, c->local_of); dispatch.c calls them where
 * the tuner (tuner.c) says so. The intra-host steps run among the ranks of
 * one host (shared memory, where the pair has it), the inter-host steps
 * among one rank per host; every step is one of the building blocks of
 * coll.h run over a ddpc__group. Reduce-scatter, allgather and broadcast
 * are described above their functions, allreduce here.
 *
 * Allreduce, large messages (HCCL's and NCCL's shape):
 *   1. intra-host reduce-scatter (ring): host h cuts the vector into L_h
 *      blocks as ddpc__blocks does; local rank l ends with block l reduced
 *      over its host;
 *   2. inter-host allreduce of each block, every local rank carrying its
 *      own block at once, so all of a host's connections are busy (a ring,
 *      halving-doubling or recursive doubling: DDPC_ALGO=auto's cost model
 *      chooses, tuner.c; HCCL_ALGO's level1:ring or level1:H-D_R forces). Hosts
 *      with different rank counts cut the vector differently: the cuts of
 *      all hosts together split it into segments, and a segment is reduced
 *      among its owners (the rank holding it on each host) in increasing
 *      order, which every rank follows, so no group waits on another;
 *   3. AVG divides the rank's own block (now final) by the world size;
 *   4. intra-host allgather (ring) of the blocks.
 * Where every host has as many ranks and the model picks the ring, large
 * vectors go in pieces through a pipeline (hier_pipe): the link carries one
 * piece while the host's steps work on the next and the previous, since on
 * a link-bound allreduce steps 1 and 4 would otherwise add their time to
 * the link's (measured on 4 emulated hosts x 2: 70-250 ms beside the
 * link's 840 ms at 64 MiB).
 * Small messages (latency-bound): binomial reduce to each host's first
 * rank, recursive doubling among those, binomial broadcast inside the host
 * (where the model or HCCL_ALGO's 64 KiB threshold says so).
 *
 * Each element is reduced on one rank per step and copied from there, so
 * every rank ends with the same bits; the order differs from the flat
 * algorithms', so float results may differ from theirs in the last bits.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

/* The ranks of every host, host by host (ranks[hoff[h] .. hoff[h + 1])), in
 * one allocation that layout_free releases. */
typedef struct layout {
    int *ranks; /* [size] */
    int *hoff;  /* [nhosts + 1] */
    int *group; /* [nhosts]: a cross-host group being built */
} layout;

static ddpc_status layout_make(ddpc__exec *e, layout *hl) {
    ddpc_comm *c = e->c;
    int n = c->size, nh = c->nhosts;
    hl->ranks = malloc(sizeof(int) * ((size_t)n + 2 * (size_t)nh + 1));
    if (!hl->ranks) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for the host layout");
    hl->hoff = hl->ranks + n;
    hl->group = hl->hoff + nh + 1;
    memset(hl->hoff, 0, sizeof(int) * ((size_t)nh + 1));
    for (int r = 0; r < n; r++) hl->hoff[c->host_of[r] + 1]++;
    for (int h = 0; h < nh; h++) hl->hoff[h + 1] += hl->hoff[h];
    for (int r = 0; r < n; r++) hl->ranks[hl->hoff[c->host_of[r]] + c->local_of[r]] = r;
    return DDPC_OK;
}

static void layout_free(layout *hl) { free(hl->ranks); }

/* The group of this rank's host. */
static ddpc__group host_group(const ddpc_comm *c, const layout *hl) {
    int h = c->host;
    return (ddpc__group){ hl->hoff[h + 1] - hl->hoff[h], c->local_rank, hl->ranks + hl->hoff[h] };
}

/* Block of element x when count elements are cut into L blocks as
 * ddpc__blocks does (the first count % L one element longer), and where
 * that block ends. */
static int block_of(size_t count, int L, size_t x, size_t *end) {
    size_t q = count / (size_t)L, rem = count % (size_t)L, big = rem * (q + 1);
    size_t b = x < big ? x / (q + 1) : rem + (x - big) / q;
    *end = b < rem ? (b + 1) * (q + 1) : big + (b + 1 - rem) * q;
    return (int)b;
}

/* A ring over g: reduce-scatter (reduce = 1; member m ends with block m of
 * recv reduced over g, reading send) or allgather (every block of recv
 * from its member). Blocks: count cut into g->n blocks as ddpc__blocks
 * does, or where blk is given, block m is elements [blk[m], blk[m] +
 * blk[n + m]) (n = g->n; blocks may be empty). */
static ddpc_status group_ring_plan(ddpc__exec *e, ddpc__ring *out, const ddpc__group *g,
                                   const void *send, void *recv, size_t count, ddpc_dtype t,
                                   ddpc_op op, int reduce, const size_t *blk) {
    int L = g->n, l = g->me, ns = L - 1;
    ddpc__ring rg;
    DDPC_CHECK(ddpc__ring_plan(e, &rg, L, ns, count, 0));
    if (blk) {
        rg.boff = blk;
        rg.bcnt = blk + L;
    }
    rg.nred = reduce ? ns : 0;
    rg.esize = ddpc_dtype_size(t);
    rg.t = t;
    rg.op = op;
    rg.direct = send != recv;
    rg.g = g;
    for (int s = 0; s < ns; s++) {
        int k = reduce ? s + 1 : s; /* reduce-scatter lags one block behind */
        rg.sblk[s] = ((l - k) % L + L) % L;
        rg.rblk[s] = ((l - k - 1) % L + L) % L;
        rg.ssrc[s] = reduce && s == 0 ? send : recv;
        rg.rdst[s] = recv;
        rg.rloc[s] = reduce ? send : NULL;
    }
    *out = rg;
    return DDPC_OK;
}

static ddpc_status group_ring(ddpc__exec *e, const ddpc__group *g, const void *send, void *recv,
                              size_t count, ddpc_dtype t, ddpc_op op, int reduce,
                              const size_t *blk) {
    ddpc__ring rg;
    if (g->n == 1) return DDPC_OK;
    DDPC_CHECK(group_ring_plan(e, &rg, g, send, recv, count, t, op, reduce, blk));
    ddpc_status s = ddpc__ring_run(e, &rg);
    ddpc__ring_free(&rg);
    return s;
}

/* Steps 1-4 of the top of the file, for large messages. */
static ddpc_status hier_large(ddpc__exec *e, const layout *hl, const void *send, void *recv,
                              size_t count, ddpc_dtype t, ddpc_op op, int inter) {
    ddpc_comm *c = e->c;
    size_t es = ddpc_dtype_size(t);
    ddpc__group hg = host_group(c, hl);
    double t0 = ddpc__now();
    /* 1. intra-host reduce-scatter */
    if (hg.n > 1)
        DDPC_CHECK(group_ring(e, &hg, send, recv, count, t, op, 1, NULL));
    else if (recv != send)
        memmove(recv, send, count * es);
    double t1 = ddpc__now();
    /* 2. inter-host allreduce of this rank's block, segment by segment */
    size_t q = count / (size_t)hg.n, rem = count % (size_t)hg.n, l = (size_t)hg.me;
    size_t lo = l * q + (l < rem ? l : rem), hi = lo + q + (l < rem);
    for (size_t a = lo; a < hi;) {
        size_t b = hi;
        for (int h = 0; h < c->nhosts; h++) {
            int Lh = hl->hoff[h + 1] - hl->hoff[h];
            size_t end;
            hl->group[h] = hl->ranks[hl->hoff[h] + block_of(count, Lh, a, &end)];
            if (end < b) b = end;
        }
        ddpc__group xg = { c->nhosts, c->host, hl->group };
        char *seg = (char *)recv + a * es;
        DDPC_CHECK(ddpc__group_allreduce(e, &xg, seg, seg, b - a, t, op, inter));
        a = b;
    }
    /* 3. this rank's block is final */
    ddpc__reduce_finish((char *)recv + lo * es, hi - lo, t, op, c->size);
    double t2 = ddpc__now();
    /* 4. intra-host allgather */
    DDPC_CHECK(group_ring(e, &hg, recv, recv, count, t, op, 0, NULL));
    DDPC_TRACE(COLL,
               "rank %d: hierarchical allreduce of %zu bytes: reduce-scatter in the host %.1f ms, "
               "allreduce across hosts %.1f ms, allgather in the host %.1f ms",
               c->rank, count * es, (t1 - t0) * 1e3, (t2 - t1) * 1e3, (ddpc__now() - t2) * 1e3);
    return DDPC_OK;
}

/* Runs at once the rings of host[0 .. nh) one after the other and the ring
 * across (NULL: none): they talk to disjoint peers (ranks of this host,
 * ranks of other hosts), so no connection carries both. */
static ddpc_status run_rings(ddpc__exec *e, const ddpc__ring *host, int nh,
                             const ddpc__ring *across) {
    ddpc__ring_exec hx, ax;
    int hi = 0, hdone = nh == 0, adone = across == NULL, d;
    if (!hdone) DDPC_CHECK(ddpc__ring_start(e, &hx, &host[0]));
    if (!adone) DDPC_CHECK(ddpc__ring_start(e, &ax, across));
    for (;;) {
        if (!adone) DDPC_CHECK(ddpc__ring_step(e, &ax, &adone));
        while (!hdone) {
            DDPC_CHECK(ddpc__ring_step(e, &hx, &d));
            if (!d) break;
            if (++hi == nh)
                hdone = 1;
            else
                DDPC_CHECK(ddpc__ring_start(e, &hx, &host[hi]));
        }
        if (adone && hdone) return DDPC_OK;
        DDPC_CHECK(ddpc__progress(e, 1)); /* sleeps only if nothing can move */
    }
}

/* The pipeline (every host has L >= 2 ranks; a ring across hosts): steps
 * 1-4 on each of `pieces` pieces of the vector (cut as ddpc__blocks does),
 * overlapped. Slot j runs across hosts the ring of piece j - 1 while in the
 * host it runs piece j's reduce-scatter, then piece j - 2's allgather: the
 * link carries one piece while shared memory and the CPU work on the
 * others, and only the first piece's reduce-scatter and the last one's
 * allgather are not hidden. Every rank runs the same slots in the same
 * order. The two rings at once take their scratch slots from one block of
 * the communicator's scratch. */
static ddpc_status hier_pipe(ddpc__exec *e, const layout *hl, const void *send, void *recv,
                             size_t count, ddpc_dtype t, ddpc_op op, int pieces) {
    ddpc_comm *c = e->c;
    size_t es = ddpc_dtype_size(t), sb = ddpc__ring_slot_bytes(c, es);
    ddpc__group hg = host_group(c, hl);
    for (int h = 0; h < c->nhosts; h++) hl->group[h] = hl->ranks[hl->hoff[h] + hg.me];
    ddpc__group xg = { c->nhosts, c->host, hl->group }; /* this rank's column */
    char *slots = ddpc__scratch(c, 2 * sb);
    size_t *poff = malloc(sizeof(size_t) * 2 * ((size_t)pieces + (size_t)hg.n));
    if (!slots || !poff) {
        free(poff);
        return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for the pipeline");
    }
    size_t *pcnt = poff + pieces, *boff = pcnt + pieces, *bcnt = boff + hg.n;
    ddpc__blocks(count, pieces, poff, pcnt);
    const char *in = send;
    char *out = recv;
    ddpc_status s = DDPC_OK;
    double t0 = ddpc__now();
    for (int j = 0; s == DDPC_OK && j <= pieces + 1; j++) {
        ddpc__ring host[2], across;
        int nh = 0, a = j - 1, has = 0;
        if (j < pieces) { /* 1. piece j: reduce-scatter in the host */
            s = group_ring_plan(e, &host[nh], &hg, in + poff[j] * es, out + poff[j] * es, pcnt[j],
                                t, op, 1, NULL);
            if (s == DDPC_OK) host[nh++].slots = slots + sb;
        }
        if (s == DDPC_OK && j >= 2) { /* 4. piece j - 2: allgather in the host */
            s = group_ring_plan(e, &host[nh], &hg, out + poff[j - 2] * es, out + poff[j - 2] * es,
                                pcnt[j - 2], t, op, 0, NULL);
            if (s == DDPC_OK) nh++;
        }
        if (s == DDPC_OK && a >= 0 && a < pieces) { /* 2. piece j - 1's block across hosts */
            ddpc__blocks(pcnt[a], hg.n, boff, bcnt);
            char *blk = out + (poff[a] + boff[hg.me]) * es;
            s = ddpc__ring_allreduce_plan(e, &across, &xg, blk, blk, bcnt[hg.me], t, op, 0);
            has = s == DDPC_OK;
            across.slots = slots;
        }
        if (s == DDPC_OK) s = run_rings(e, host, nh, has ? &across : NULL);
        for (int i = 0; i < nh; i++) ddpc__ring_free(&host[i]);
        if (has) {
            ddpc__ring_free(&across);
            /* 3. its block is final */
            if (s == DDPC_OK)
                ddpc__reduce_finish(out + (poff[a] + boff[hg.me]) * es, bcnt[hg.me], t, op,
                                    c->size);
        }
    }
    free(poff);
    DDPC_TRACE(COLL, "rank %d: hierarchical allreduce of %zu bytes in %d pipelined pieces: %.1f ms",
               c->rank, count * es, pieces, (ddpc__now() - t0) * 1e3);
    return s;
}

/* Small messages: reduce to each host's first rank, allreduce among those,
 * broadcast inside each host. */
static ddpc_status hier_small(ddpc__exec *e, const layout *hl, const void *send, void *recv,
                              size_t count, ddpc_dtype t, ddpc_op op) {
    ddpc_comm *c = e->c;
    size_t nbytes = count * ddpc_dtype_size(t), al = (nbytes + 63) & ~(size_t)63;
    ddpc__group hg = host_group(c, hl);
    char *scr = ddpc__scratch(c, 2 * al);
    if (!scr) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory (%zu bytes)", 2 * al);
    void *acc = hg.me == 0 ? recv : scr;
    DDPC_CHECK(ddpc__tree_reduce(e, &hg, send, acc, scr + al, count, t, op, 0));
    if (hg.me == 0) {
        for (int h = 0; h < c->nhosts; h++) hl->group[h] = hl->ranks[hl->hoff[h]];
        ddpc__group lead = { c->nhosts, c->host, hl->group };
        DDPC_CHECK(
            ddpc__group_allreduce(e, &lead, recv, recv, count, t, op, DDPC_X_HD | DDPC_X_BY_SIZE));
        ddpc__reduce_finish(recv, count, t, op, c->size);
    }
    return ddpc__tree_bcast(e, &hg, recv, nbytes, 0);
}

ddpc_status ddpc__hier_allreduce(ddpc__exec *e, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_op op, const ddpc__tune *tu) {
    ddpc_comm *c = e->c;
    int small = tu->algo == DDPC_X_SMALL, inter = tu->inter, pieces = tu->pieces;
    layout hl = { 0 };
    DDPC_CHECK(layout_make(e, &hl));
    DDPC_TRACE(COLL, "rank %d: hierarchical allreduce of %zu elements over %d hosts", c->rank,
               count, c->nhosts);
    ddpc_status s = small        ? hier_small(e, &hl, send, recv, count, t, op)
                    : pieces > 1 ? hier_pipe(e, &hl, send, recv, count, t, op, pieces)
                                 : hier_large(e, &hl, send, recv, count, t, op, inter);
    layout_free(&hl);
    return s;
}

/*
 * Reduce-scatter and allgather on any host layout (H hosts, host h with
 * L_h ranks, M = the most on one host). Column l is every host's rank of
 * local index l mod L_h, one per host in host order: on a host with as
 * many ranks as the most that is its rank l; a host with fewer lends one
 * rank to several columns. Column l carries the blocks of the ranks of
 * local index l (one per host that has one). Each host stages the blocks
 * in its own order: part j (what its local rank j handles) holds the
 * columns l = j, j + L_h, ... (its "sub-parts"), each sub-part the blocks
 * of its column's ranks in host order. Then
 *   reduce-scatter: 1. intra-host ring reduce-scatter of the parts: local
 *   rank j gets part j reduced over its host; 2. for each column l it
 *   serves, in increasing l, a ring reduce-scatter over the column (a
 *   member without a rank of index l takes an empty block): every rank
 *   gets its own block reduced over all hosts;
 *   allgather: 1. for each column l served, a ring allgather over the
 *   column; 2. intra-host ring allgather of the parts; 3. each block to its
 *   rank's place.
 * Every rank takes its columns in increasing order, so the lowest column
 * not yet done always has all its members at it: no wait cycle. Where
 * every host has M ranks this is one ring per step, as HCCL does.
 */
typedef struct columns {
    layout hl;
    ddpc__group hg, cg; /* this rank's host; the column being run */
    int m;              /* the most ranks on one host */
    size_t *soff;       /* [m] where sub-part l starts on this host, in blocks */
    size_t *pblk;       /* [2 L_h] the parts (offset, count) in elements */
    size_t *cblk;       /* [2 H] the column's blocks (offset, count) in elements */
    char *st;           /* [nbufs x size blocks] staging: the communicator's scratch,
                        * kept between calls (no page faults on every call) */
} columns;

static void columns_free(columns *cl) {
    free(cl->soff);
    layout_free(&cl->hl);
}

/* count: elements per block. */
static ddpc_status columns_make(ddpc__exec *e, columns *cl, size_t count, size_t block_bytes,
                                int nbufs) {
    ddpc_comm *c = e->c;
    int nh = c->nhosts, L = c->local_size;
    memset(cl, 0, sizeof *cl);
    size_t n = block_bytes * (size_t)c->size * (size_t)nbufs;
    cl->st = ddpc__scratch(c, n);
    if (!cl->st) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for %zu bytes of staging", n);
    DDPC_CHECK(layout_make(e, &cl->hl));
    cl->m = c->max_local;
    cl->soff = malloc(sizeof(size_t) * ((size_t)cl->m + 2 * (size_t)L + 2 * (size_t)nh));
    if (!cl->soff) {
        layout_free(&cl->hl);
        return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for the column plan");
    }
    cl->pblk = cl->soff + cl->m;
    cl->cblk = cl->pblk + 2 * L;
    cl->hg = host_group(c, &cl->hl);
    /* parts in order; in part j its columns j, j + L, ... */
    size_t at = 0;
    for (int j = 0; j < L; j++) {
        cl->pblk[j] = at * count;
        for (int l = j; l < cl->m; l += L) {
            cl->soff[l] = at;
            for (int h = 0; h < nh; h++) at += cl->hl.hoff[h + 1] - cl->hl.hoff[h] > l;
        }
        cl->pblk[L + j] = at * count - cl->pblk[j];
    }
    return DDPC_OK;
}

/* Makes cl->cg column l (this rank must serve it) and cl->cblk its blocks:
 * member h's is its host's rank of index l, at its place among the
 * column's ranks, or empty. */
static void column(const ddpc_comm *c, columns *cl, int l, size_t count) {
    int nh = c->nhosts;
    size_t pos = 0;
    for (int h = 0; h < nh; h++) {
        int Lh = cl->hl.hoff[h + 1] - cl->hl.hoff[h];
        cl->hl.group[h] = cl->hl.ranks[cl->hl.hoff[h] + l % Lh];
        cl->cblk[h] = pos * count;
        cl->cblk[nh + h] = Lh > l ? count : 0;
        pos += Lh > l;
    }
    cl->cg = (ddpc__group){ nh, c->host, cl->hl.group };
}

/* Calls fn(r, slot, ctx) for every rank r with the staging slot (in blocks)
 * of its block on this host. */
static void for_slots(const ddpc_comm *c, const columns *cl, void (*fn)(int, size_t, void *),
                      void *ctx) {
    for (int l = 0; l < cl->m; l++) {
        size_t pos = 0;
        for (int h = 0; h < c->nhosts; h++)
            if (cl->hl.hoff[h + 1] - cl->hl.hoff[h] > l)
                fn(cl->hl.ranks[cl->hl.hoff[h] + l], cl->soff[l] + pos++, ctx);
    }
}

/* A copy between rank r's place in a user buffer and its staging slot. */
typedef struct slot_copy {
    char *user, *st;
    size_t bb;
    int in; /* 1: user -> staging; 0: staging -> user */
} slot_copy;

static void copy_slot(int r, size_t slot, void *ctx) {
    const slot_copy *k = ctx;
    char *u = k->user + (size_t)r * k->bb, *s = k->st + slot * k->bb;
    if (k->in)
        memcpy(s, u, k->bb);
    else
        memcpy(u, s, k->bb);
}

/* (Both steps' rings run out of place, so that neither takes the scratch
 * the staging lives in.) */
ddpc_status ddpc__hier_reduce_scatter(ddpc__exec *e, const void *send, void *recv, size_t count,
                                      ddpc_dtype t, ddpc_op op) {
    ddpc_comm *c = e->c;
    size_t es = ddpc_dtype_size(t), bb = count * es;
    columns cl;
    DDPC_CHECK(columns_make(e, &cl, count, bb, 2));
    DDPC_TRACE(COLL, "rank %d: hierarchical reduce-scatter of %zu elements over %d hosts", c->rank,
               count, c->nhosts);
    char *in = cl.st, *host = cl.st + (size_t)c->size * bb; /* staged input; host partials */
    slot_copy k = { (char *)send, in, bb, 1 };
    for_slots(c, &cl, copy_slot, &k);
    ddpc_status s = DDPC_OK;
    /* 1. the parts over the host */
    if (cl.hg.n > 1)
        s = group_ring(e, &cl.hg, in, host, 0, t, op, 1, cl.pblk);
    else
        memcpy(host, in, (size_t)c->size * bb);
    /* 2. the columns this rank serves; in is free again: their results land there */
    for (int l = c->local_rank; s == DDPC_OK && l < cl.m; l += cl.hg.n) {
        column(c, &cl, l, count);
        size_t off = cl.soff[l] * bb;
        s = group_ring(e, &cl.cg, host + off, in + off, 0, t, op, 1, cl.cblk);
    }
    if (s == DDPC_OK) {
        column(c, &cl, c->local_rank, count); /* this rank's place in its own column */
        memmove(recv, in + cl.soff[c->local_rank] * bb + cl.cblk[c->host] * es, bb);
    }
    columns_free(&cl);
    return s;
}

ddpc_status ddpc__hier_allgather(ddpc__exec *e, const void *send, void *recv, size_t nbytes) {
    ddpc_comm *c = e->c;
    columns cl;
    DDPC_CHECK(columns_make(e, &cl, nbytes, nbytes, 1));
    DDPC_TRACE(COLL, "rank %d: hierarchical allgather of %zu bytes over %d hosts", c->rank, nbytes,
               c->nhosts);
    column(c, &cl, c->local_rank, nbytes);
    memcpy(cl.st + cl.soff[c->local_rank] * nbytes + cl.cblk[c->host], send, nbytes);
    ddpc_status s = DDPC_OK;
    /* 1. the columns this rank serves */
    for (int l = c->local_rank; s == DDPC_OK && l < cl.m; l += cl.hg.n) {
        column(c, &cl, l, nbytes);
        char *sub = cl.st + cl.soff[l] * nbytes;
        s = group_ring(e, &cl.cg, sub, sub, 0, DDPC_UINT8, DDPC_SUM, 0, cl.cblk);
    }
    /* 2. the parts over the host; 3. every block to its place */
    if (s == DDPC_OK) s = group_ring(e, &cl.hg, cl.st, cl.st, 0, DDPC_UINT8, DDPC_SUM, 0, cl.pblk);
    if (s == DDPC_OK) {
        slot_copy k = { recv, cl.st, nbytes, 0 };
        for_slots(c, &cl, copy_slot, &k);
    }
    columns_free(&cl);
    return s;
}
/*
 * Broadcast from root (local rank l0 of host h0). Small messages, or hosts
 * with different rank counts: from host h0 to a leader on every host (its
 * local rank l0 where it has one, else 0), then inside every host from its
 * leader, as binomial trees (small) or pipelined chains (large). Large
 * messages on hosts of L ranks each (HCCL's shape):
 *   1. root scatters the vector over its host, cut as ddpc__blocks does
 *      (local rank l gets slice l);
 *   2. each slice goes along its column from host h0 as a pipelined chain,
 *      every local rank carrying its own slice at once;
 *   3. intra-host allgather (ring) of the slices.
 * A fingerprint exchange with the ring neighbours comes first (as in
 * ddpc__broadcast), so a mismatched root is caught before data moves.
 */
ddpc_status ddpc__hier_broadcast(ddpc__exec *e, const void *send, void *recv, size_t nbytes,
                                 int root) {
    ddpc_comm *c = e->c;
    if (c->rank == root && recv != send) memmove(recv, send, nbytes);
    DDPC_CHECK(ddpc__check_ring(e));
    layout hl = { 0 };
    DDPC_CHECK(layout_make(e, &hl));
    DDPC_TRACE(COLL, "rank %d: hierarchical broadcast of %zu bytes over %d hosts", c->rank, nbytes,
               c->nhosts);
    int h0 = c->host_of[root], l0 = c->local_of[root];
    ddpc__group hg = host_group(c, &hl);
    ddpc_status s = DDPC_OK;
    ddpc__req *q = NULL;
    if (ddpc__tune_small(nbytes) || c->nhosts * c->max_local != c->size) {
        /* each host's leader: local rank l0 where the host has one, else 0 */
        int lead = l0 < hg.n ? l0 : 0;
        for (int h = 0; h < c->nhosts; h++) {
            int Lh = hl.hoff[h + 1] - hl.hoff[h];
            hl.group[h] = hl.ranks[hl.hoff[h] + (l0 < Lh ? l0 : 0)];
        }
        ddpc__group leaders = { c->nhosts, c->host, hl.group };
        int small = ddpc__tune_small(nbytes);
        if (c->local_rank == lead)
            s = small ? ddpc__tree_bcast(e, &leaders, recv, nbytes, h0)
                      : ddpc__chain_bcast(e, &leaders, recv, nbytes, h0);
        if (s == DDPC_OK)
            s = small ? ddpc__tree_bcast(e, &hg, recv, nbytes, lead)
                      : ddpc__chain_bcast(e, &hg, recv, nbytes, lead);
        goto out;
    }
    int L = hg.n;
    size_t *boff = malloc(sizeof(size_t) * 2 * (size_t)L);
    q = malloc(sizeof *q * (size_t)L);
    if (!boff || !q) {
        free(boff);
        s = ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t *bcnt = boff + L;
    ddpc__blocks(nbytes, L, boff, bcnt);
    char *b = recv;
    /* 1. scatter on the root's host */
    if (c->rank == root) {
        int k = 0;
        for (int l = 0; l < L; l++)
            if (l != l0 && bcnt[l]) ddpc__post_send(e, &q[k++], hg.ranks[l], b + boff[l], bcnt[l]);
        s = ddpc__wait_all(e, q, k);
    } else if (c->host == h0 && bcnt[hg.me]) {
        ddpc__post_recv(e, &q[0], root, b + boff[hg.me], bcnt[hg.me]);
        s = ddpc__wait(e, &q[0]);
    }
    /* 2. each slice along its column */
    for (int h = 0; h < c->nhosts; h++) hl.group[h] = hl.ranks[hl.hoff[h] + hg.me];
    ddpc__group col = { c->nhosts, c->host, hl.group };
    if (s == DDPC_OK && bcnt[hg.me])
        s = ddpc__chain_bcast(e, &col, b + boff[hg.me], bcnt[hg.me], h0);
    free(boff);
    /* 3. the slices inside every host */
    if (s == DDPC_OK) s = group_ring(e, &hg, recv, recv, nbytes, DDPC_UINT8, DDPC_SUM, 0, NULL);
out:
    free(q);
    layout_free(&hl);
    return s;
}
