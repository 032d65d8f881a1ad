/*
 * coll.h — the algorithms behind ddpc.h's collectives, written against the
 * communicator's post/wait interface (comm/comm.h), never against a
 * transport. dispatch.c picks one per call; the files per family:
 *   ring.c          the chunked, pipelined ring (reduce-scatter, allgather)
 *   allreduce.c     allreduce (ring, recursive doubling, tree), reduce-scatter
 *   bcast_reduce.c  broadcast and reduce (binomial tree, pipelined chain)
 *   gather.c        allgather, gather, scatter
 *   alltoall.c      all-to-all
 *   p2p.c           send, recv, barrier
 *   hier.c          hierarchical allreduce, reduce-scatter, allgather and
 *                   broadcast across hosts (intra-host steps, inter-host steps with
 *                   every local rank carrying its own slice)
 * Reducing algorithms work in a "compute" dtype: float16 and bfloat16 are
 * staged to float32 by dispatch.c first, so that each element is rounded
 * once; AVG is summed here and divided by dispatch.c at the end.
 */
#ifndef DDPC_COLL_COLL_H
#define DDPC_COLL_COLL_H

#include "coll/reduce.h"
#include "comm/comm.h"

/* Runs one operation on the calling thread (dispatch.c): chooses the
 * algorithm (hierarchical or flat, then each family its own) and executes
 * it. The exec's fingerprint is filled in. api.c hands it to the
 * communicator's queue with every operation (ddpc__args.run). */
ddpc_status ddpc__run(ddpc__exec *e);

/* In-flight chunks per direction in the pipelined algorithms. */
#ifndef DDPC_WINDOW
#define DDPC_WINDOW 4
#endif

/* A group of the communicator's ranks that runs an algorithm among itself
 * (hier.c's hosts and cross-host groups): member i is rank ranks[i]
 * (borrowed); this rank is member me. */
typedef struct ddpc__group {
    int n, me;
    const int *ranks;
} ddpc__group;

/* Size of group g (NULL: the whole communicator), this rank's place in it,
 * and the rank of its member i. */
static inline int ddpc__gsize(const ddpc__exec *e, const ddpc__group *g) {
    return g ? g->n : e->c->size;
}
static inline int ddpc__gme(const ddpc__exec *e, const ddpc__group *g) {
    return g ? g->me : e->c->rank;
}
static inline int ddpc__grank(const ddpc__group *g, int i) { return g ? g->ranks[i] : i; }

/*
 * One ring: nsteps steps; at step s this rank sends block sblk[s] (from
 * ssrc[s]) to the next rank and receives block rblk[s] from the previous
 * one. Steps < nred are reducing: the received chunk is combined as
 * rdst[s][b] = rloc[s][b] op received; later steps receive straight into
 * rdst[s]. Blocks are element ranges [boff[b], boff[b] + bcnt[b]). The
 * blocks are cut into chunks of DDPC_CHUNK bytes that flow as a pipeline: a
 * chunk is forwarded as soon as it has arrived (and been reduced).
 */
typedef struct ddpc__ring {
    int nsteps, nred;
    int *sblk, *rblk;          /* [nsteps] */
    const char **ssrc;         /* [nsteps] base pointers, indexed by element offset */
    char **rdst;               /* [nsteps] */
    const char **rloc;         /* [nsteps] (reducing steps) */
    const size_t *boff, *bcnt; /* [size] */
    size_t esize;
    ddpc_dtype t;
    ddpc_op op;
    int direct;           /* from a peer over TCP, reducing steps receive straight into
                 * rdst and combine there (rdst must not alias rloc); else via
                 * scratch slots. From one over shared memory they combine
                 * straight from the ring into rdst either way. */
    int finish;           /* the last reducing step also applies ddpc__reduce_finish (AVG's
                 * division by the communicator's size) to each chunk it
                 * completes, while it is in cache */
    const ddpc__group *g; /* the ring's members, in ring order (borrowed); NULL: every
                          * rank of the communicator in rank order */
    char *slots;          /* the scratch slots of reducing steps that need them
                          * (ddpc__ring_slot_bytes; borrowed), or NULL: the
                          * communicator's scratch (then no other ring may run at once) */
    const char *own;      /* or NULL; else step 0 sends block sblk[0] from here (its
                          * start) and copies each chunk to rdst[0] as it posts it: an
                          * out-of-place allgather's own block, copied while the ring
                          * runs instead of before it */
} ddpc__ring;

/* A reducing receive's combine: dst = loc op arrived, where loc is the
 * element of the local operand at dst's offset; on the last reducing step
 * also AVG's division (finish_n ranks), while the chunk is in cache. */
typedef struct ddpc__ring_combine {
    char *dst_base;
    const char *loc_base;
    ddpc_dtype t;
    ddpc_op op;
    int finish_n; /* 0: no finish */
} ddpc__ring_combine;

/* One ring under way (ring.c): the plan, its neighbours, its chunking and
 * how far its sends and receives are posted (ns, nr) and done (nsd, nrd).
 * Lives where the ring is run until it is done: the posted requests point
 * into it. */
typedef struct ddpc__ring_exec {
    const ddpc__ring *rg;
    int next, prev, comb;
    size_t ce, m, T; /* elements per chunk, chunks per block, tasks */
    size_t ns, nsd, nr, nrd;
    char *slots;
    ddpc__ring_combine cctx[DDPC_WINDOW];
    ddpc__req sreq[DDPC_WINDOW], rreq[DDPC_WINDOW];
} ddpc__ring_exec;

/* Runs ring rg to the end. */
ddpc_status ddpc__ring_run(ddpc__exec *e, const ddpc__ring *rg);
/* The same in steps, so that rings over different peers can run at once
 * (hier.c's pipeline): start, then step (posts what can be posted, retires
 * what is done, never blocks; *done = 1 at the end) between calls of
 * ddpc__progress. rg must outlive x. */
ddpc_status ddpc__ring_start(ddpc__exec *e, ddpc__ring_exec *x, const ddpc__ring *rg);
ddpc_status ddpc__ring_step(ddpc__exec *e, ddpc__ring_exec *x, int *done);
/* Bytes of scratch slots a reducing ring of elements of esize bytes may
 * need (ddpc__ring.slots). */
size_t ddpc__ring_slot_bytes(const ddpc_comm *c, size_t esize);
/* Whether the na bytes at a and the nb bytes at b share no byte: then one
 * may be copied into the other piece by piece while it is being sent. */
static inline int ddpc__apart(const void *a, size_t na, const void *b, size_t nb) {
    const char *x = a, *y = b;
    return x + na <= y || y + nb <= x;
}
/* Block b of count elements over n ranks: count/n each, the first count%n
 * one more. */
void ddpc__blocks(size_t count, int n, size_t *boff, size_t *bcnt);
/* Zeroes rg and gives it, in one allocation, the plan arrays of a ring of
 * n ranks and nsteps steps, with blocks of `count` elements each when equal,
 * else count split as ddpc__blocks does. The caller fills the steps and the
 * element type; ddpc__ring_free releases the arrays. */
ddpc_status ddpc__ring_plan(ddpc__exec *e, ddpc__ring *rg, int n, int nsteps, size_t count,
                            int equal);
void ddpc__ring_free(ddpc__ring *rg);

/* Binomial trees over group g (NULL: every rank) rooted at its member
 * root. tree_bcast: root's buf is sent to every member's buf. tree_reduce:
 * acc starts as a copy of send (made here) and ends as the reduction on
 * root; tmp is nbytes of scratch distinct from acc. */
ddpc_status ddpc__tree_bcast(ddpc__exec *e, const ddpc__group *g, void *buf, size_t nbytes,
                             int root);
ddpc_status ddpc__tree_reduce(ddpc__exec *e, const ddpc__group *g, const void *send, void *acc,
                              void *tmp, size_t count, ddpc_dtype t, ddpc_op op, int root);
/* Pipelined chain over g from its member root: root -> root+1 -> ... */
ddpc_status ddpc__chain_bcast(ddpc__exec *e, const ddpc__group *g, void *buf, size_t nbytes,
                              int root);

/* Allreduce among the members of g only (NULL: every rank), AVG left as a
 * sum; algo is what the tuner asked for (DDPC_X_RING, DDPC_X_HD or
 * DDPC_X_RD, with DDPC_X_BY_SIZE: recursive doubling when latency-bound),
 * which ddpc__tune_group settles for this group's count. Every member ends
 * with the same bits. */
ddpc_status ddpc__group_allreduce(ddpc__exec *e, const ddpc__group *g, const void *send, void *recv,
                                  size_t count, ddpc_dtype t, ddpc_op op, int algo);
/* The plan of the ring allreduce over g (n >= 2 members; finish: AVG's
 * division as blocks complete), for ddpc__ring_run or ddpc__ring_start;
 * ddpc__ring_free releases it. */
ddpc_status ddpc__ring_allreduce_plan(ddpc__exec *e, ddpc__ring *rg, const ddpc__group *g,
                                      const void *send, void *recv, size_t count, ddpc_dtype t,
                                      ddpc_op op, int finish);

/* ------------------------------------------------------------ the tuner
 *
 * tuner.c is the one place that picks how a collective runs (NCCL's
 * tuning.cc): hierarchical or flat, the algorithm, the step across hosts
 * and the pipeline's pieces, from DDPC_ALGO / HCCL_ALGO (comm.c reads them
 * into c->tuner), the host layout and the size; it owns the small-message
 * threshold and, for DDPC_ALGO=auto across hosts, asks the cost model
 * (tuner_cost.c). Every input is the same on every rank, so every rank
 * chooses alike without talking. */

/* Every way a step runs, in one enum. The first DDPC_X_MODELED are the
 * cost model's candidates for an allreduce across hosts: SMALL (trees in
 * the host around recursive doubling across), then reduce-scatter in the
 * host, a RING, HD (halving-doubling) or RD (recursive doubling) across
 * hosts, allgather in the host. Flat, RING is the pipelined ring (for
 * broadcast and reduce, the pipelined chain), HD and RD the same steps
 * among all ranks, TREE binomial trees. */
enum {
    DDPC_X_SMALL,
    DDPC_X_RING,
    DDPC_X_HD,
    DDPC_X_RD,
    DDPC_X_MODELED,
    DDPC_X_TREE = DDPC_X_MODELED,
    DDPC_X_BY_SIZE = 16 /* or'd in: recursive doubling where latency-bound */
};

/* Up to this many bytes a message is latency-bound under DDPC_ALGO=auto:
 * recursive doubling, binomial trees, the small hierarchical path; larger
 * ones take the ring or the pipelined chain. */
#define DDPC_SMALL_BYTES (64u << 10)

/* The tuner's choice for one operation. */
typedef struct ddpc__tune {
    int hier;         /* in the hosts, then across them (else flat) */
    int algo;         /* DDPC_X_*: flat, the algorithm; hierarchical allreduce,
                       * DDPC_X_SMALL or the step across hosts below */
    int inter;        /* hierarchical allreduce: the step across hosts, as
                       * ddpc__group_allreduce takes it */
    int pieces;       /* the hierarchical ring's pipelined pieces (1: none) */
    const char *name; /* flat: the algorithm's name for the flight recorder */
} ddpc__tune;

/* Whether nbytes is latency-bound (DDPC_SMALL_BYTES); count elements on n
 * ranks always are where count < n (some would get empty blocks). */
int ddpc__tune_small(size_t nbytes);
int ddpc__tune_latency_bound(size_t nbytes, size_t count, int n);
/* Whether collective k of count elements runs hierarchically on c. */
int ddpc__tune_hier(const ddpc_comm *c, ddpc__kind k, size_t count);
/* Allreduce of count elements of esize bytes: hier, and then either the
 * flat algo (RING, TREE, RD, HD) and name, or the hierarchical path (algo
 * SMALL, else inter and pieces). Logs the cost model's choices. */
void ddpc__tune_allreduce(ddpc_comm *c, size_t count, size_t esize, ddpc__tune *out);
/* Flat broadcast and reduce of nbytes: DDPC_X_TREE or DDPC_X_RING (the
 * chain), and name. */
void ddpc__tune_rooted(const ddpc_comm *c, size_t nbytes, ddpc__tune *out);
/* The bytes of one piece of the pipelined chain (broadcast, reduce). */
size_t ddpc__tune_piece(const ddpc_comm *c, size_t nbytes);
/* What a group allreduce of count elements (nbytes) among n members runs
 * (DDPC_X_RING, DDPC_X_HD or DDPC_X_RD), asked for want. */
int ddpc__tune_group(int want, size_t count, size_t nbytes, int n);
/* Flat allgather and reduce-scatter whose larger buffer (all the blocks)
 * is nbytes: DDPC_X_RD (recursive doubling or halving, on a power of two
 * of ranks) or DDPC_X_RING. */
int ddpc__tune_blocks(const ddpc_comm *c, size_t nbytes);

/* tuner_cost.c: the tuner's cost model (docs/COSTMODEL.md) for an
 * allreduce across hosts: the link's parameters (seconds per message,
 * seconds per byte) and the ring's chunk in bytes. */
typedef struct ddpc__cost_model {
    double alpha, beta;
    size_t chunk;
} ddpc__cost_model;

/* A choice: x (DDPC_X_SMALL .. DDPC_X_RD), the pieces of the pipelined ring
 * (1: none), and the model's time (s) of each way, for the log. */
typedef struct ddpc__cost_plan {
    int x, pieces;
    double t[DDPC_X_MODELED];
} ddpc__cost_plan;

/* The fastest way to allreduce nbytes over hosts of local ranks each (the
 * most on one host; equal: every host has as many); local = 1 for one rank
 * per host (no host steps, no small path). */
void ddpc__cost_best(const ddpc__cost_model *m, int hosts, int local, int equal, size_t nbytes,
                     ddpc__cost_plan *out);
/* c's link parameters (DDPC_NET_US, DDPC_NET_GBIT, DDPC_CHUNK). */
void ddpc__cost_of(const ddpc_comm *c, ddpc__cost_model *m);
/* Logs the choice: INFO on rank 0 the first time c makes it, else TRACE. */
void ddpc__cost_log(ddpc_comm *c, int hosts, int local, size_t nbytes, const ddpc__cost_plan *p);
/* A way's name ("ring", "halving-doubling", ...). */
const char *ddpc__cost_name(int x);

/* The hierarchical algorithms (hier.c), where ddpc__tune_hier says so,
 * with the contracts of ddpc__allreduce, ddpc__reduce_scatter,
 * ddpc__allgather and ddpc__broadcast; the allreduce takes the tuner's
 * choice. */
ddpc_status ddpc__hier_allreduce(ddpc__exec *e, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_op op, const ddpc__tune *tu);
ddpc_status ddpc__hier_reduce_scatter(ddpc__exec *e, const void *send, void *recv, size_t count,
                                      ddpc_dtype t, ddpc_op op);
ddpc_status ddpc__hier_allgather(ddpc__exec *e, const void *send, void *recv, size_t nbytes);
ddpc_status ddpc__hier_broadcast(ddpc__exec *e, const void *send, void *recv, size_t nbytes,
                                 int root);

/* The reductions. ddpc__allreduce leaves recv finished (AVG divided by the
 * world size); reduce-scatter and reduce leave AVG as a sum, which the
 * caller finishes with ddpc__reduce_finish. */
ddpc_status ddpc__allreduce(ddpc__exec *e, const void *send, void *recv, size_t count, ddpc_dtype t,
                            ddpc_op op, const ddpc__tune *tu);
ddpc_status ddpc__reduce_scatter(ddpc__exec *e, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_op op);
ddpc_status ddpc__reduce(ddpc__exec *e, const void *send, void *recv, size_t count, ddpc_dtype t,
                         ddpc_op op, int root);
ddpc_status ddpc__broadcast(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root);
ddpc_status ddpc__allgather(ddpc__exec *e, const void *send, void *recv, size_t nbytes);
ddpc_status ddpc__gather(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root);
ddpc_status ddpc__scatter(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root);
ddpc_status ddpc__alltoall(ddpc__exec *e, const void *send, void *recv, size_t nbytes);
/* vec as ddpc__args.vec, in elements of esize bytes. */
ddpc_status ddpc__alltoallv(ddpc__exec *e, const void *send, void *recv, const size_t *vec,
                            size_t esize);
ddpc_status ddpc__barrier(ddpc__exec *e);
ddpc_status ddpc__send(ddpc__exec *e, const void *buf, size_t nbytes, int peer);
ddpc_status ddpc__recv(ddpc__exec *e, void *buf, size_t nbytes, int peer);

#endif /* DDPC_COLL_COLL_H */
