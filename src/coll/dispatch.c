/*
 * dispatch.c — runs one validated operation: asks the tuner (tuner.c)
 * whether hierarchical or flat and, for allreduce, which algorithm; stages float16 and bfloat16
 * through float32 for the reducing collectives (one rounding per element),
 * calls the family's algorithm, and finishes AVG (division by the world
 * size, once, at the end).
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"

static int is_half(ddpc_dtype t) { return t == DDPC_FLOAT16 || t == DDPC_BFLOAT16; }

/* The families with a hierarchical variant: that one where the
 * communicator spans hosts and DDPC_ALGO allows (ddpc__tune_hier), else
 * the flat one. */
static ddpc_status allreduce(ddpc__exec *e, const void *send, void *recv, size_t count,
                             ddpc_dtype t, ddpc_op op) {
    ddpc__tune tu;
    ddpc__tune_allreduce(e->c, count, ddpc_dtype_size(t), &tu);
    if (tu.hier && (e->algo = "hier"))
        return ddpc__hier_allreduce(e, send, recv, count, t, op, &tu);
    return ddpc__allreduce(e, send, recv, count, t, op, &tu);
}
static ddpc_status reduce_scatter(ddpc__exec *e, const void *send, void *recv, size_t count,
                                  ddpc_dtype t, ddpc_op op) {
    if (ddpc__tune_hier(e->c, DDPC_K_REDUCE_SCATTER, count) && (e->algo = "hier"))
        return ddpc__hier_reduce_scatter(e, send, recv, count, t, op);
    return ddpc__reduce_scatter(e, send, recv, count, t, op);
}
static ddpc_status allgather(ddpc__exec *e, const void *send, void *recv, size_t nbytes) {
    if (ddpc__tune_hier(e->c, DDPC_K_ALLGATHER, nbytes) && (e->algo = "hier"))
        return ddpc__hier_allgather(e, send, recv, nbytes);
    return ddpc__allgather(e, send, recv, nbytes);
}
static ddpc_status broadcast(ddpc__exec *e, const void *send, void *recv, size_t nbytes, int root) {
    if (ddpc__tune_hier(e->c, DDPC_K_BROADCAST, nbytes) && (e->algo = "hier"))
        return ddpc__hier_broadcast(e, send, recv, nbytes, root);
    return ddpc__broadcast(e, send, recv, nbytes, root);
}

/* Allreduce, reduce or reduce-scatter of a half type in float32. */
static ddpc_status run_half(ddpc__exec *e) {
    const ddpc__args *a = &e->a;
    ddpc_comm *c = e->c;
    int n = c->size;
    size_t in_count = a->kind == DDPC_K_REDUCE_SCATTER ? a->count * (size_t)n : a->count;
    size_t out_count = a->count;
    float *in = malloc(sizeof(float) * (in_count + out_count));
    if (!in)
        return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for float32 staging of %zu elements",
                          in_count);
    float *out = a->kind == DDPC_K_REDUCE_SCATTER ? in + in_count : in;
    ddpc__to_float32(in, a->send, in_count, a->dtype);
    ddpc_status s;
    int lands = 1;
    if (a->kind == DDPC_K_ALLREDUCE) {
        s = allreduce(e, in, out, a->count, DDPC_FLOAT32, a->op);
    } else if (a->kind == DDPC_K_REDUCE) {
        s = ddpc__reduce(e, in, out, a->count, DDPC_FLOAT32, a->op, a->root);
        lands = c->rank == a->root;
    } else {
        s = reduce_scatter(e, in, out, a->count, DDPC_FLOAT32, a->op);
    }
    if (s == DDPC_OK && lands) {
        if (a->kind != DDPC_K_ALLREDUCE) /* ddpc__allreduce finishes its own */
            ddpc__reduce_finish(out, out_count, DDPC_FLOAT32, a->op, n);
        ddpc__from_float32(a->recv, out, out_count, a->dtype);
    }
    free(in);
    return s;
}

ddpc_status ddpc__run(ddpc__exec *e) {
    const ddpc__args *a = &e->a;
    ddpc_comm *c = e->c;
    size_t nb = a->count * ddpc_dtype_size(a->dtype);
    if (a->count == 0 && a->kind != DDPC_K_BARRIER && a->kind != DDPC_K_ALLTOALLV) return DDPC_OK;
    ddpc_status s;
    switch (a->kind) {
    case DDPC_K_ALLREDUCE:
    case DDPC_K_REDUCE:
    case DDPC_K_REDUCE_SCATTER:
        if (is_half(a->dtype)) return run_half(e);
        if (a->kind == DDPC_K_ALLREDUCE)
            s = allreduce(e, a->send, a->recv, a->count, a->dtype, a->op);
        else if (a->kind == DDPC_K_REDUCE)
            s = ddpc__reduce(e, a->send, a->recv, a->count, a->dtype, a->op, a->root);
        else
            s = reduce_scatter(e, a->send, a->recv, a->count, a->dtype, a->op);
        if (s == DDPC_OK &&
            (a->kind == DDPC_K_REDUCE_SCATTER || (a->kind == DDPC_K_REDUCE && c->rank == a->root)))
            ddpc__reduce_finish(a->recv, a->count, a->dtype, a->op, c->size);
        return s;
    case DDPC_K_BROADCAST: return broadcast(e, a->send, a->recv, nb, a->root);
    case DDPC_K_ALLGATHER: return allgather(e, a->send, a->recv, nb);
    case DDPC_K_GATHER: return ddpc__gather(e, a->send, a->recv, nb, a->root);
    case DDPC_K_SCATTER: return ddpc__scatter(e, a->send, a->recv, nb, a->root);
    case DDPC_K_ALLTOALL: return ddpc__alltoall(e, a->send, a->recv, nb);
    case DDPC_K_ALLTOALLV:
        return ddpc__alltoallv(e, a->send, a->recv, a->vec, ddpc_dtype_size(a->dtype));
    case DDPC_K_BARRIER: return ddpc__barrier(e);
    case DDPC_K_SEND: return ddpc__send(e, a->send, nb, a->root);
    case DDPC_K_RECV: return ddpc__recv(e, a->recv, nb, a->root);
    default: return ddpc__err(DDPC_ERR_INTERNAL, "unknown operation kind %d", (int)a->kind);
    }
}
