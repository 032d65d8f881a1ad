/*
 * api.c — the public collective entry points of ddpc.h: argument checks
 * (each bad argument is DDPC_ERR_INVALID_ARG naming the call and the
 * argument; no sequence number is used up), then ddpc__submit, which is
 * handed the executor (ddpc__run) with the arguments.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

static ddpc_status check(const char *what, ddpc_comm *c, size_t count, ddpc_dtype t, int need_op,
                         ddpc_op op, int root, size_t blocks) {
    if (!c) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: the communicator is NULL", what);
    if ((int)t < 0 || t >= DDPC_DTYPE_COUNT)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: dtype %d is not a ddpc_dtype", what, (int)t);
    if (need_op && ((int)op < 0 || op >= DDPC_OP_COUNT))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: op %d is not a ddpc_op", what, (int)op);
    if (need_op == 1 && op >= DDPC_BAND &&
        (t == DDPC_FLOAT16 || t == DDPC_BFLOAT16 || t == DDPC_FLOAT32 || t == DDPC_FLOAT64))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: op %s needs an integer dtype, got %s", what,
                         ddpc_op_name(op), ddpc_dtype_name(t));
    if (root != INT32_MIN && (root < 0 || root >= c->size))
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "%s: %s %d is not a rank of this communicator (size %d)", what,
                         need_op == 2 ? "peer" : "root", root, c->size);
    if (count > (SIZE_MAX / 4) / ddpc_dtype_size(t) / (blocks ? blocks : 1))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: count %zu is too large", what, count);
    return DDPC_OK;
}

static ddpc_status need(const char *what, const char *name, const void *p, size_t count) {
    if (count && !p)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: %s is NULL with count=%zu", what, name, count);
    return DDPC_OK;
}

static ddpc_status go(ddpc_comm *c, ddpc__kind k, const void *send, void *recv, size_t count,
                      ddpc_dtype t, ddpc_op op, int root, ddpc_work **w, int async,
                      const char *what) {
    if (async && !w) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: the work pointer is NULL", what);
    if (async) *w = NULL;
    ddpc__args a = { k, send, recv, count, t, op, root, NULL, ddpc__run, 0, 0 };
    return ddpc__submit(c, &a, async ? w : NULL);
}

#define NOROOT INT32_MIN

static ddpc_status allreduce(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                             ddpc_op op, ddpc_work **w, int async) {
    const char *what = "ddpc_allreduce";
    DDPC_CHECK(check(what, c, count, t, 1, op, NOROOT, 1));
    DDPC_CHECK(need(what, "send", send, count));
    DDPC_CHECK(need(what, "recv", recv, count));
    return go(c, DDPC_K_ALLREDUCE, send, recv, count, t, op, -1, w, async, what);
}
ddpc_status ddpc_allreduce(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                           ddpc_op op) {
    return allreduce(c, send, recv, count, t, op, NULL, 0);
}
ddpc_status ddpc_allreduce_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_op op, ddpc_work **w) {
    return allreduce(c, send, recv, count, t, op, w, 1);
}

static ddpc_status broadcast(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                             int root, ddpc_work **w, int async) {
    const char *what = "ddpc_broadcast";
    DDPC_CHECK(check(what, c, count, t, 0, DDPC_SUM, root, 1));
    if (c->rank == root) DDPC_CHECK(need(what, "send (on the root)", send, count));
    DDPC_CHECK(need(what, "recv", recv, count));
    return go(c, DDPC_K_BROADCAST, send, recv, count, t, DDPC_SUM, root, w, async, what);
}
ddpc_status ddpc_broadcast(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                           int root) {
    return broadcast(c, send, recv, count, t, root, NULL, 0);
}
ddpc_status ddpc_broadcast_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, int root, ddpc_work **w) {
    return broadcast(c, send, recv, count, t, root, w, 1);
}

static ddpc_status reduce(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                          ddpc_op op, int root, ddpc_work **w, int async) {
    const char *what = "ddpc_reduce";
    DDPC_CHECK(check(what, c, count, t, 1, op, root, 1));
    DDPC_CHECK(need(what, "send", send, count));
    if (c->rank == root) DDPC_CHECK(need(what, "recv (on the root)", recv, count));
    return go(c, DDPC_K_REDUCE, send, recv, count, t, op, root, w, async, what);
}
ddpc_status ddpc_reduce(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                        ddpc_op op, int root) {
    return reduce(c, send, recv, count, t, op, root, NULL, 0);
}
ddpc_status ddpc_reduce_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                              ddpc_dtype t, ddpc_op op, int root, ddpc_work **w) {
    return reduce(c, send, recv, count, t, op, root, w, 1);
}

static ddpc_status allgather(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                             ddpc_work **w, int async) {
    const char *what = "ddpc_allgather";
    DDPC_CHECK(check(what, c, count, t, 0, DDPC_SUM, NOROOT, c ? (size_t)c->size : 1));
    DDPC_CHECK(need(what, "send", send, count));
    DDPC_CHECK(need(what, "recv", recv, count));
    return go(c, DDPC_K_ALLGATHER, send, recv, count, t, DDPC_SUM, -1, w, async, what);
}
ddpc_status ddpc_allgather(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t) {
    return allgather(c, send, recv, count, t, NULL, 0);
}
ddpc_status ddpc_allgather_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_work **w) {
    return allgather(c, send, recv, count, t, w, 1);
}

static ddpc_status reduce_scatter(ddpc_comm *c, const void *send, void *recv, size_t count,
                                  ddpc_dtype t, ddpc_op op, ddpc_work **w, int async) {
    const char *what = "ddpc_reduce_scatter";
    DDPC_CHECK(check(what, c, count, t, 1, op, NOROOT, c ? (size_t)c->size : 1));
    DDPC_CHECK(need(what, "send", send, count));
    DDPC_CHECK(need(what, "recv", recv, count));
    return go(c, DDPC_K_REDUCE_SCATTER, send, recv, count, t, op, -1, w, async, what);
}
ddpc_status ddpc_reduce_scatter(ddpc_comm *c, const void *send, void *recv, size_t count,
                                ddpc_dtype t, ddpc_op op) {
    return reduce_scatter(c, send, recv, count, t, op, NULL, 0);
}
ddpc_status ddpc_reduce_scatter_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                      ddpc_dtype t, ddpc_op op, ddpc_work **w) {
    return reduce_scatter(c, send, recv, count, t, op, w, 1);
}

static ddpc_status gather(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                          int root, ddpc_work **w, int async) {
    const char *what = "ddpc_gather";
    DDPC_CHECK(check(what, c, count, t, 0, DDPC_SUM, root, c ? (size_t)c->size : 1));
    DDPC_CHECK(need(what, "send", send, count));
    if (c->rank == root) DDPC_CHECK(need(what, "recv (on the root)", recv, count));
    return go(c, DDPC_K_GATHER, send, recv, count, t, DDPC_SUM, root, w, async, what);
}
ddpc_status ddpc_gather(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                        int root) {
    return gather(c, send, recv, count, t, root, NULL, 0);
}
ddpc_status ddpc_gather_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                              ddpc_dtype t, int root, ddpc_work **w) {
    return gather(c, send, recv, count, t, root, w, 1);
}

static ddpc_status scatter(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                           int root, ddpc_work **w, int async) {
    const char *what = "ddpc_scatter";
    DDPC_CHECK(check(what, c, count, t, 0, DDPC_SUM, root, c ? (size_t)c->size : 1));
    if (c->rank == root) DDPC_CHECK(need(what, "send (on the root)", send, count));
    DDPC_CHECK(need(what, "recv", recv, count));
    return go(c, DDPC_K_SCATTER, send, recv, count, t, DDPC_SUM, root, w, async, what);
}
ddpc_status ddpc_scatter(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                         int root) {
    return scatter(c, send, recv, count, t, root, NULL, 0);
}
ddpc_status ddpc_scatter_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                               ddpc_dtype t, int root, ddpc_work **w) {
    return scatter(c, send, recv, count, t, root, w, 1);
}

static ddpc_status alltoall(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t,
                            ddpc_work **w, int async) {
    const char *what = "ddpc_alltoall";
    DDPC_CHECK(check(what, c, count, t, 0, DDPC_SUM, NOROOT, c ? (size_t)c->size : 1));
    DDPC_CHECK(need(what, "send", send, count));
    DDPC_CHECK(need(what, "recv", recv, count));
    if (count && send == recv && c->size > 1)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "%s: send and recv must differ (no in-place all-to-all)", what);
    return go(c, DDPC_K_ALLTOALL, send, recv, count, t, DDPC_SUM, -1, w, async, what);
}
ddpc_status ddpc_alltoall(ddpc_comm *c, const void *send, void *recv, size_t count, ddpc_dtype t) {
    return alltoall(c, send, recv, count, t, NULL, 0);
}
ddpc_status ddpc_alltoall_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                ddpc_dtype t, ddpc_work **w) {
    return alltoall(c, send, recv, count, t, w, 1);
}

/* Checks one side's counts and displacements: each block inside a buffer
 * of at most SIZE_MAX/4 bytes, and a buffer wherever a block is not empty. */
static ddpc_status check_blocks(const char *what, const char *side, const void *buf,
                                const size_t *counts, const size_t *displs, int n, ddpc_dtype t) {
    if (!counts || !displs)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "%s: the %s counts and displacements must be non-NULL", what, side);
    size_t most = (SIZE_MAX / 4) / ddpc_dtype_size(t);
    for (int i = 0; i < n; i++) {
        if (counts[i] > most || displs[i] > most - counts[i])
            return ddpc__err(DDPC_ERR_INVALID_ARG,
                             "%s: %s block %d (%zu elements at %zu) is too large", what, side, i,
                             counts[i], displs[i]);
        if (counts[i] && !buf)
            return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: %s is NULL with %zu elements for rank %d",
                             what, side, counts[i], i);
    }
    return DDPC_OK;
}

static ddpc_status alltoallv(ddpc_comm *c, const void *send, const size_t *sendcounts,
                             const size_t *sdispls, void *recv, const size_t *recvcounts,
                             const size_t *rdispls, ddpc_dtype t, ddpc_work **w, int async) {
    const char *what = "ddpc_alltoallv";
    DDPC_CHECK(check(what, c, 0, t, 0, DDPC_SUM, NOROOT, 1));
    int n = c->size;
    DDPC_CHECK(check_blocks(what, "send", send, sendcounts, sdispls, n, t));
    DDPC_CHECK(check_blocks(what, "recv", recv, recvcounts, rdispls, n, t));
    if (async && !w) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: the work pointer is NULL", what);
    size_t *vec = malloc(sizeof *vec * 4 * (size_t)n);
    if (!vec) return ddpc__err(DDPC_ERR_NOMEM, "%s: out of memory", what);
    memcpy(vec, sendcounts, sizeof *vec * (size_t)n);
    memcpy(vec + n, sdispls, sizeof *vec * (size_t)n);
    memcpy(vec + 2 * n, recvcounts, sizeof *vec * (size_t)n);
    memcpy(vec + 3 * n, rdispls, sizeof *vec * (size_t)n);
    if (async) *w = NULL;
    ddpc__args a = { DDPC_K_ALLTOALLV, send, recv, 0, t, DDPC_SUM, -1, vec, ddpc__run, 0, 0 };
    return ddpc__submit(c, &a, async ? w : NULL); /* owns vec from here */
}
ddpc_status ddpc_alltoallv(ddpc_comm *c, const void *send, const size_t *sendcounts,
                           const size_t *sdispls, void *recv, const size_t *recvcounts,
                           const size_t *rdispls, ddpc_dtype t) {
    return alltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, t, NULL, 0);
}
ddpc_status ddpc_alltoallv_async(ddpc_comm *c, const void *send, const size_t *sendcounts,
                                 const size_t *sdispls, void *recv, const size_t *recvcounts,
                                 const size_t *rdispls, ddpc_dtype t, ddpc_work **w) {
    return alltoallv(c, send, sendcounts, sdispls, recv, recvcounts, rdispls, t, w, 1);
}

ddpc_status ddpc_barrier(ddpc_comm *c) {
    DDPC_CHECK(check("ddpc_barrier", c, 0, DDPC_UINT8, 0, DDPC_SUM, NOROOT, 1));
    return go(c, DDPC_K_BARRIER, NULL, NULL, 0, DDPC_UINT8, DDPC_SUM, -1, NULL, 0, "ddpc_barrier");
}
ddpc_status ddpc_barrier_async(ddpc_comm *c, ddpc_work **w) {
    DDPC_CHECK(check("ddpc_barrier_async", c, 0, DDPC_UINT8, 0, DDPC_SUM, NOROOT, 1));
    return go(c, DDPC_K_BARRIER, NULL, NULL, 0, DDPC_UINT8, DDPC_SUM, -1, w, 1,
              "ddpc_barrier_async");
}

static ddpc_status p2p(ddpc_comm *c, int is_send, void *buf, size_t count, ddpc_dtype t, int peer,
                       int tag, ddpc_work **w, int async, const char *what) {
    int any = !is_send && peer == DDPC_ANY_SOURCE;
    DDPC_CHECK(check(what, c, count, t, 2, DDPC_SUM, any ? NOROOT : peer, 1));
    DDPC_CHECK(need(what, "buf", buf, count));
    if (peer == c->rank)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: peer %d is this rank (no self send/recv)", what,
                         peer);
    if (async && !w) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s: the work pointer is NULL", what);
    if (async) *w = NULL;
    ddpc__args a = { is_send ? DDPC_K_SEND : DDPC_K_RECV,
                     is_send ? buf : NULL,
                     is_send ? NULL : buf,
                     count,
                     t,
                     DDPC_SUM,
                     peer,
                     NULL,
                     ddpc__run,
                     0,
                     tag };
    if (any && !async) { /* through the queue, where a source is chosen (comm.c: run_p2p) */
        ddpc_work *aw = NULL;
        DDPC_CHECK(ddpc__submit(c, &a, &aw));
        ddpc_status s = ddpc_work_wait(aw, INFINITY);
        ddpc_work_destroy(aw);
        return s;
    }
    return ddpc__submit(c, &a, async ? w : NULL);
}
ddpc_status ddpc_send(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t, int peer) {
    return p2p(c, 1, (void *)buf, count, t, peer, 0, NULL, 0, "ddpc_send");
}
ddpc_status ddpc_send_async(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t, int peer,
                            ddpc_work **w) {
    return p2p(c, 1, (void *)buf, count, t, peer, 0, w, 1, "ddpc_send_async");
}
ddpc_status ddpc_recv(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer) {
    return p2p(c, 0, buf, count, t, peer, 0, NULL, 0, "ddpc_recv");
}
ddpc_status ddpc_recv_async(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer,
                            ddpc_work **w) {
    return p2p(c, 0, buf, count, t, peer, 0, w, 1, "ddpc_recv_async");
}
ddpc_status ddpc_send_tagged(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t, int peer,
                             int tag) {
    return p2p(c, 1, (void *)buf, count, t, peer, tag, NULL, 0, "ddpc_send_tagged");
}
ddpc_status ddpc_send_tagged_async(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t,
                                   int peer, int tag, ddpc_work **w) {
    return p2p(c, 1, (void *)buf, count, t, peer, tag, w, 1, "ddpc_send_tagged_async");
}
ddpc_status ddpc_recv_tagged(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer,
                             int tag) {
    return p2p(c, 0, buf, count, t, peer, tag, NULL, 0, "ddpc_recv_tagged");
}
ddpc_status ddpc_recv_tagged_async(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer,
                                   int tag, ddpc_work **w) {
    return p2p(c, 0, buf, count, t, peer, tag, w, 1, "ddpc_recv_tagged_async");
}
