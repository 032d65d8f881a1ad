/*
 * tuner_cost.c — the tuner's cost model for an allreduce across hosts
 * under DDPC_ALGO=auto (docs/COSTMODEL.md): Hockney's alpha + n beta per
 * message and gamma per byte reduced, with each host's link shared by its
 * ranks. It times every way ddpc can run the allreduce and hands the
 * fastest to the tuner (tuner.c), for hier.c (a host with several ranks) or
 * allreduce.c (one rank per host); it moves no bytes. Its inputs are the layout, the size and the settings every rank
 * reads alike (DDPC_NET_US, DDPC_NET_GBIT, DDPC_CHUNK), so every rank
 * makes the same choice.
 *
 * The candidates (S bytes, H hosts of L ranks; S' = S/L, each of a host's
 * L ranks carrying its S' across the link at once, so beta counts L times):
 *   small  trees in the host (binomial reduce and broadcast, whole vectors)
 *          around recursive doubling among the hosts' first ranks;
 *   ring   reduce-scatter in the host, a ring across hosts, allgather in
 *          the host; where every host has L >= 2 ranks, cut into P pieces
 *          whose steps overlap (hier.c's pipeline: the host's steps of one
 *          piece run while the link carries another);
 *   hd     the same with recursive halving-doubling across hosts (HCCL's
 *          H-D_R; hosts not a power of two fold into the largest one);
 *   rd     the same with recursive doubling of whole vectors across hosts.
 * The intra-host parameters (shared memory) are this project's fit; the
 * link's are DDPC_NET_US and DDPC_NET_GBIT.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll.h"

/* Shared memory and reduction, fitted on this project's machine
 * (docs/COSTMODEL.md): per message, per byte moved, per byte reduced. */
#define ALPHA_L 32e-6
#define BETA_L  0.825e-9
#define GAMMA   0.307e-9

/* The most pieces the pipeline cuts a vector into. */
#define MAX_PIECES 16

static const char *const names[DDPC_X_MODELED] = { "small", "ring", "halving-doubling",
                                                   "recursive doubling" };

const char *ddpc__cost_name(int x) { return x >= 0 && x < DDPC_X_MODELED ? names[x] : "?"; }

/* floor(log2 n) for n >= 1. */
static int log2_floor(int n) {
    int k = 0;
    while ((2 << k) <= n) k++;
    return k;
}

/* An allreduce of s bytes a member among h members, f of a host's ranks
 * sharing its link at once. The ring reduces each chunk while the next is
 * on the wire (ring.c), so of its reduction only a chunk a step shows;
 * the others reduce whole messages once they have arrived. */
static double t_ring(const ddpc__cost_model *m, int h, double s, int f) {
    if (h < 2) return 0;
    double q = (double)(h - 1) / h, blk = s / h, c = (double)m->chunk;
    return 2 * (h - 1) * m->alpha + 2 * q * s * f * m->beta + (h - 1) * (blk < c ? blk : c) * GAMMA;
}

static double t_fold(const ddpc__cost_model *m, int h, double s, int f) {
    return h == 1 << log2_floor(h) ? 0 : 2 * m->alpha + 2 * s * f * m->beta + s * GAMMA;
}

static double t_hd(const ddpc__cost_model *m, int h, double s, int f) {
    if (h < 2) return 0;
    int k = log2_floor(h), p = 1 << k;
    double q = (double)(p - 1) / p;
    return 2 * k * m->alpha + 2 * q * s * f * m->beta + q * s * GAMMA + t_fold(m, h, s, f);
}

static double t_rd(const ddpc__cost_model *m, int h, double s, int f) {
    if (h < 2) return 0;
    int k = log2_floor(h);
    return k * (m->alpha + s * f * m->beta + s * GAMMA) + t_fold(m, h, s, f);
}

/* The ring reduce-scatter (reduce = 1) or allgather of s bytes in a host
 * of l ranks. */
static double t_host_ring(int l, double s, int reduce) {
    if (l < 2) return 0;
    double q = (double)(l - 1) / l;
    return (l - 1) * ALPHA_L + q * s * BETA_L + (reduce ? q * s * GAMMA : 0);
}

/* Binomial reduce then broadcast of s bytes in a host of l ranks. */
static double t_host_trees(int l, double s) {
    int k = l < 2 ? 0 : log2_floor(l - 1) + 1; /* ceil(log2 l) */
    return k * (2 * ALPHA_L + 2 * s * BETA_L + s * GAMMA);
}

void ddpc__cost_best(const ddpc__cost_model *m, int hosts, int local, int equal, size_t nbytes,
                     ddpc__cost_plan *out) {
    double s = (double)nbytes, sl = s / local;
    double host = t_host_ring(local, s, 1) + t_host_ring(local, s, 0);
    memset(out, 0, sizeof *out);
    out->pieces = 1;
    out->t[DDPC_X_SMALL] = local > 1 ? t_host_trees(local, s) + t_rd(m, hosts, s, 1) : INFINITY;
    out->t[DDPC_X_RING] = host + t_ring(m, hosts, sl, local);
    out->t[DDPC_X_HD] = host + t_hd(m, hosts, sl, local);
    out->t[DDPC_X_RD] = host + t_rd(m, hosts, sl, local);
    /* The pipeline: P pieces; the host's steps of the first and last piece
     * are exposed, the rest overlap the link's rings (one per piece), and
     * between pieces the link idles for about a message and a chunk. P is
     * the most pieces (up to MAX_PIECES) whose ring blocks keep 2 chunks:
     * on 4 emulated hosts x 2, 64 MiB, 2, 4, 8, 16 and 32 pieces took
     * 969-978, 926-945, 885-926, 866-876 and 898-925 ms (docs/BENCHMARKS.md),
     * better than this model's fill term predicts; the model says whether
     * to cut at all. */
    if (equal && local > 1) {
        int p = 1;
        while (p < MAX_PIECES && sl / (2 * p) / hosts >= 2.0 * (double)m->chunk) p *= 2;
        double inter =
            p * t_ring(m, hosts, sl / p, local) + (p - 1) * (m->alpha + (double)m->chunk * m->beta);
        double hidden = host * (p - 1) / p;
        double t = host / p + (inter > hidden ? inter : hidden);
        if (p > 1 && t < out->t[DDPC_X_RING]) {
            out->t[DDPC_X_RING] = t;
            out->pieces = p;
        }
    }
    /* the least; a tie (within rounding) goes to the earlier in this order:
     * the ring (pipelined, measured most), the small path (whole vectors,
     * no empty blocks), halving-doubling, recursive doubling */
    static const int order[] = { DDPC_X_RING, DDPC_X_SMALL, DDPC_X_HD, DDPC_X_RD };
    out->x = DDPC_X_RING;
    for (int i = 1; i < DDPC_X_MODELED; i++)
        if (out->t[order[i]] < out->t[out->x] * (1 - 1e-9)) out->x = order[i];
    if (out->x != DDPC_X_RING) out->pieces = 1;
}

void ddpc__cost_of(const ddpc_comm *c, ddpc__cost_model *m) {
    m->alpha = c->tuner.net_alpha;
    m->beta = c->tuner.net_beta;
    m->chunk = c->chunk;
}

void ddpc__cost_log(ddpc_comm *c, int hosts, int local, size_t nbytes, const ddpc__cost_plan *p) {
    unsigned key = 1u << (p->x * 4 + (p->pieces > 1));
    int first = !(c->tuner.plans_logged & key);
    c->tuner.plans_logged |= key;
    int level = first && c->rank == 0 ? DDPC_LOG_INFO : DDPC_LOG_TRACE;
    if (!ddpc__log_enabled(level, DDPC_SUB_COLL)) return;
    char pieces[48] = "";
    if (p->pieces > 1) snprintf(pieces, sizeof pieces, " in %d pipelined pieces", p->pieces);
    ddpc__log(level, DDPC_SUB_COLL,
              "rank %d: allreduce of %zu bytes on %d hosts x %d: %s%s (DDPC_ALGO=auto's cost "
              "model, ms: small %.3g, ring %.3g, halving-doubling %.3g, recursive doubling %.3g; "
              "DDPC_NET_US=%g, DDPC_NET_GBIT=%g)",
              c->rank, nbytes, hosts, local,
              p->x == DDPC_X_SMALL ? "trees in the host" : names[p->x], pieces,
              p->t[DDPC_X_SMALL] * 1e3, p->t[DDPC_X_RING] * 1e3, p->t[DDPC_X_HD] * 1e3,
              p->t[DDPC_X_RD] * 1e3, c->tuner.net_alpha * 1e6, 8e-9 / c->tuner.net_beta);
}
