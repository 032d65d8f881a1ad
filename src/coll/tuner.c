/*
 * tuner.c — the one place that picks how a collective runs (NCCL's
 * tuning.cc): hierarchical or flat, the algorithm, the step across hosts
 * and the pipeline's pieces. Its inputs: DDPC_ALGO or HCCL_ALGO (comm.c
 * parses them into c->tuner), the host layout (bootstrap.c), the size; for
 * DDPC_ALGO=auto across hosts, the cost model (tuner_cost.c). It owns the
 * small-message threshold (DDPC_SMALL_BYTES, coll.h). Every input is the
 * same on every rank, so every rank chooses alike without talking.
 *
 * The choices, in order:
 *   1. hierarchical (ddpc__tune_hier): allreduce, reduce-scatter, allgather
 *      and broadcast on a communicator spanning several hosts, under
 *      DDPC_ALGO=hier, or auto where some host has two ranks or more;
 *   2. a hierarchical allreduce: the cost model's way under auto (the small
 *      path, or reduce-scatter / a step across hosts / allgather, with the
 *      pipeline's pieces); under HCCL_ALGO's level1 its step across hosts,
 *      the small path up to DDPC_SMALL_BYTES;
 *   3. a flat allreduce: DDPC_ALGO=ring or tree as asked; auto on hosts of
 *      one rank each asks the cost model; otherwise recursive doubling
 *      where latency-bound, else halving-doubling (rhd) or the ring;
 *   4. flat broadcast and reduce: binomial trees up to DDPC_SMALL_BYTES
 *      (at 2 ranks up to CHAIN_MIN_PIECE), else the pipelined chain, in
 *      pieces (ddpc__tune_piece; DDPC_ALGO=tree or ring force one);
 *   5. a group's allreduce (a step of a hierarchical one): what was asked,
 *      recursive doubling where the group has fewer elements than members
 *      (or, asked by size, where latency-bound);
 *   6. flat allgather and reduce-scatter: on a power of two of ranks,
 *      recursive doubling (allgather) or halving (reduce-scatter), log2(n)
 *      rounds instead of the ring's n-1, where latency-bound under auto or
 *      always under DDPC_ALGO=rhd; else the ring.
 *
 * A change here should leave the choices as they were unless it means to
 * change them: bench/tuner_choices.sh lists every operation's algorithm
 * on several layouts and settings, to diff two builds' lists.
 */
#include "coll/coll.h"

int ddpc__tune_small(size_t nbytes) { return nbytes <= DDPC_SMALL_BYTES; }

int ddpc__tune_latency_bound(size_t nbytes, size_t count, int n) {
    return ddpc__tune_small(nbytes) || count < (size_t)n;
}

int ddpc__tune_hier(const ddpc_comm *c, ddpc__kind k, size_t count) {
    if (!c->host_of || c->nhosts < 2 || count == 0) return 0;
    if (k != DDPC_K_ALLREDUCE && k != DDPC_K_REDUCE_SCATTER && k != DDPC_K_ALLGATHER &&
        k != DDPC_K_BROADCAST)
        return 0;
    if (c->tuner.algo == DDPC_ALGO_HIER) return 1;
    return c->tuner.algo == DDPC_ALGO_AUTO && c->max_local >= 2;
}

/* 2. The hierarchical allreduce's way. */
static void tune_hier_allreduce(ddpc_comm *c, size_t nbytes, ddpc__tune *out) {
    if (c->tuner.algo_inter != DDPC_ALGO_AUTO) { /* HCCL_ALGO's level1 */
        out->algo = ddpc__tune_small(nbytes) ? DDPC_X_SMALL : DDPC_X_RING;
        out->inter =
            (c->tuner.algo_inter == DDPC_ALGO_RHD ? DDPC_X_HD : DDPC_X_RING) | DDPC_X_BY_SIZE;
        return;
    }
    ddpc__cost_model m;
    ddpc__cost_plan p;
    ddpc__cost_of(c, &m);
    ddpc__cost_best(&m, c->nhosts, c->max_local, c->nhosts * c->max_local == c->size, nbytes, &p);
    ddpc__cost_log(c, c->nhosts, c->max_local, nbytes, &p);
    out->algo = p.x;
    out->inter = p.x == DDPC_X_SMALL ? DDPC_X_RING : p.x;
    out->pieces = p.pieces;
}

/* 3. The flat allreduce's algorithm. */
static void tune_flat_allreduce(ddpc_comm *c, size_t count, size_t nbytes, ddpc__tune *out) {
    int algo = c->tuner.algo;
    if (algo == DDPC_ALGO_AUTO && c->nhosts >= 2 && c->max_local == 1 && count >= (size_t)c->size) {
        /* one rank per host: the cost model's choice across hosts */
        ddpc__cost_model m;
        ddpc__cost_plan p;
        ddpc__cost_of(c, &m);
        ddpc__cost_best(&m, c->nhosts, 1, 1, nbytes, &p);
        ddpc__cost_log(c, c->nhosts, 1, nbytes, &p);
        if (p.x == DDPC_X_HD || p.x == DDPC_X_RD) {
            out->algo = p.x;
            out->name = p.x == DDPC_X_HD ? "halving-doubling" : "rhd";
            return;
        }
        algo = DDPC_ALGO_RING;
    }
    int small = ddpc__tune_latency_bound(nbytes, count, c->size);
    if (algo == DDPC_ALGO_RING) {
        out->algo = DDPC_X_RING;
        out->name = "ring";
    } else if (algo == DDPC_ALGO_TREE) {
        out->algo = DDPC_X_TREE;
        out->name = "tree";
    } else if (algo == DDPC_ALGO_RHD || small) { /* rhd; auto, flat, hier when latency-bound */
        out->algo = small ? DDPC_X_RD : DDPC_X_HD;
        out->name = small ? "rhd" : "halving-doubling";
    } else {
        out->algo = DDPC_X_RING;
        out->name = "ring";
    }
}

void ddpc__tune_allreduce(ddpc_comm *c, size_t count, size_t esize, ddpc__tune *out) {
    size_t nbytes = count * esize;
    *out = (ddpc__tune){ .pieces = 1 };
    out->hier = ddpc__tune_hier(c, DDPC_K_ALLREDUCE, count);
    if (out->hier)
        tune_hier_allreduce(c, nbytes, out);
    else if (c->size > 1)
        tune_flat_allreduce(c, count, nbytes, out);
}

/* The chain cuts a message into at least CHAIN_PIECES pieces where each
 * keeps CHAIN_MIN_PIECE bytes, and into pieces of DDPC_CHUNK at most: the
 * next rank copies a piece out while the root writes the next one. At 2
 * ranks the tree is the chain in one piece, so the chain takes over from
 * CHAIN_MIN_PIECE up. Broadcast, 2 ranks: 32 KiB-512 KiB 1.2-1.7x faster than
 * in one piece (docs/BENCHMARKS.md). */
#define CHAIN_MIN_PIECE (16u << 10)
#define CHAIN_PIECES    8

void ddpc__tune_rooted(const ddpc_comm *c, size_t nbytes, ddpc__tune *out) {
    int algo = c->tuner.algo;
    *out = (ddpc__tune){ .pieces = 1 };
    if (algo != DDPC_ALGO_TREE && algo != DDPC_ALGO_RING) /* auto, rhd, flat, hier */
        algo = ddpc__tune_small(nbytes) && !(c->size == 2 && nbytes > CHAIN_MIN_PIECE)
                   ? DDPC_ALGO_TREE
                   : DDPC_ALGO_RING;
    out->algo = algo == DDPC_ALGO_TREE ? DDPC_X_TREE : DDPC_X_RING;
    out->name = algo == DDPC_ALGO_TREE ? "tree" : "chain";
}

int ddpc__tune_group(int want, size_t count, size_t nbytes, int n) {
    int by_size = want & DDPC_X_BY_SIZE;
    want &= ~DDPC_X_BY_SIZE;
    if (want == DDPC_X_RD || count < (size_t)n || (by_size && ddpc__tune_small(nbytes)))
        return DDPC_X_RD;
    return want == DDPC_X_HD ? DDPC_X_HD : DDPC_X_RING;
}

int ddpc__tune_blocks(const ddpc_comm *c, size_t nbytes) {
    int n = c->size, algo = c->tuner.algo;
    /* at 2 ranks both are one exchange, but RD's costs less to set up */
    if (n < 2 || (n & (n - 1)) || algo == DDPC_ALGO_RING || algo == DDPC_ALGO_TREE)
        return DDPC_X_RING;
    if (algo == DDPC_ALGO_RHD) return DDPC_X_RD;
    return ddpc__tune_small(nbytes) ? DDPC_X_RD : DDPC_X_RING;
}

size_t ddpc__tune_piece(const ddpc_comm *c, size_t nbytes) {
    size_t piece = (nbytes + CHAIN_PIECES - 1) / CHAIN_PIECES;
    piece = (piece + 63) & ~(size_t)63;
    if (piece < CHAIN_MIN_PIECE) piece = CHAIN_MIN_PIECE;
    return piece < c->chunk ? piece : c->chunk;
}
