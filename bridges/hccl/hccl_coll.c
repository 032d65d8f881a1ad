/*
 * hccl_coll.c — HCCL's collectives and point-to-point calls (hccl/hccl.h)
 * over ddpc's public API (libhccl).
 *
 * Each call: 1. checks what it can alone (pointers, types, reductions,
 * ranks), as HCCL does before launching; 2. packs its arguments into an op
 * (arrays copied, so the caller's may go); 3. queues the op on the stream.
 * The stream's thread runs it with ddpc's blocking call, which keeps the
 * stream's order (a copy queued before a collective has happened when the
 * collective reads). A failure becomes the communicator's async error and
 * the stream's error. The V variants are ddpc calls too: AllGatherV is an
 * all-to-all-v that sends the same block to everyone, ReduceScatterV one
 * reduce per rank; neither holds an algorithm of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl_internal.h"
#include "hccl_internal.h"

typedef enum op_kind {
    K_ALLREDUCE,
    K_BROADCAST,
    K_REDUCE,
    K_ALLGATHER,
    K_ALLGATHERV,
    K_REDUCE_SCATTER,
    K_REDUCE_SCATTERV,
    K_SCATTER,
    K_ALLTOALL,
    K_ALLTOALLV,
    K_BARRIER,
    K_SEND,
    K_RECV,
    K_BATCH,
} op_kind;

/* One queued operation; owns its arrays. */
typedef struct hccl_op {
    op_kind kind;
    const char *name; /* "HcclAllReduce", ... */
    hccl_comm *hc;
    void *send, *recv;
    size_t count; /* elements */
    ddpc_dtype t;
    ddpc_op op;
    int root;       /* or peer */
    size_t *counts; /* 4*size entries: send counts, send displs, recv counts, recv displs */
    HcclSendRecvItem *items; /* K_BATCH */
    uint32_t nitems;
    void *tmp;     /* K_ALLGATHERV in place: a copy of the send block */
    int timed_out; /* the config's exec timeout passed */
} hccl_op;

static void op_free(hccl_op *o) {
    free(o->counts);
    free(o->items);
    free(o->tmp);
    free(o);
}

/* Element i of one of the op's arrays. */
#define SCOUNTS(o) ((o)->counts)
#define SDISPLS(o) ((o)->counts + (o)->hc->size)
#define RCOUNTS(o) ((o)->counts + 2 * (size_t)(o)->hc->size)
#define RDISPLS(o) ((o)->counts + 3 * (size_t)(o)->hc->size)

/* The works an op may start: one, a reduce per rank, or an item each. */
static uint32_t max_works(const hccl_op *o) {
    uint32_t n = o->kind == K_BATCH ? o->nitems : o->kind == K_REDUCE_SCATTERV ? o->hc->size : 1;
    return n ? n : 1;
}

/* AllGatherV sends our block to every rank. In place (send inside recv)
 * goes through a copy (o->tmp), since ddpc's send and recv must not overlap. */
static ddpc_status allgatherv_send(hccl_op *o, const void **send) {
    size_t es = ddpc_dtype_size(o->t), nb = o->count * es, total = 0;
    const char *r = o->recv, *s = o->send;
    for (uint32_t i = 0; i < o->hc->size; i++)
        if ((RDISPLS(o)[i] + RCOUNTS(o)[i]) * es > total)
            total = (RDISPLS(o)[i] + RCOUNTS(o)[i]) * es;
    *send = s;
    if (!nb || !(s < r + total && r < s + nb)) return DDPC_OK;
    if (!(o->tmp = malloc(nb))) return DDPC_ERR_NOMEM;
    memcpy(o->tmp, s, nb);
    *send = o->tmp;
    return DDPC_OK;
}

/* Starts the op as ddpc async calls, filling w[0..*n). */
static ddpc_status start_op(hccl_op *o, ddpc_work **w, uint32_t *n) {
    ddpc_comm *c = o->hc->c;
    size_t es = ddpc_dtype_size(o->t);
    ddpc_status s = DDPC_OK;
    const void *send;
    *n = 1;
    switch (o->kind) {
    case K_ALLREDUCE: return ddpc_allreduce_async(c, o->send, o->recv, o->count, o->t, o->op, w);
    case K_BROADCAST: return ddpc_broadcast_async(c, o->send, o->send, o->count, o->t, o->root, w);
    case K_REDUCE: return ddpc_reduce_async(c, o->send, o->recv, o->count, o->t, o->op, o->root, w);
    case K_ALLGATHER: return ddpc_allgather_async(c, o->send, o->recv, o->count, o->t, w);
    case K_REDUCE_SCATTER:
        return ddpc_reduce_scatter_async(c, o->send, o->recv, o->count, o->t, o->op, w);
    case K_SCATTER: return ddpc_scatter_async(c, o->send, o->recv, o->count, o->t, o->root, w);
    case K_ALLTOALL: return ddpc_alltoall_async(c, o->send, o->recv, o->count, o->t, w);
    case K_ALLTOALLV:
        return ddpc_alltoallv_async(c, o->send, SCOUNTS(o), SDISPLS(o), o->recv, RCOUNTS(o),
                                    RDISPLS(o), o->t, w);
    case K_ALLGATHERV:
        if ((s = allgatherv_send(o, &send)) != DDPC_OK) return s;
        return ddpc_alltoallv_async(c, send, SCOUNTS(o), SDISPLS(o), o->recv, RCOUNTS(o),
                                    RDISPLS(o), o->t, w);
    case K_REDUCE_SCATTERV: /* block i reduced onto rank i */
        for (*n = 0; *n < o->hc->size && s == DDPC_OK; ++*n)
            s = ddpc_reduce_async(c, (char *)o->send + SDISPLS(o)[*n] * es,
                                  *n == o->hc->rank ? o->recv : NULL, SCOUNTS(o)[*n], o->t, o->op,
                                  (int)*n, &w[*n]);
        return s;
    case K_BARRIER: return ddpc_barrier_async(c, w);
    case K_SEND: return ddpc_send_async(c, o->send, o->count, o->t, o->root, w);
    case K_RECV: return ddpc_recv_async(c, o->recv, o->count, o->t, o->root, w);
    case K_BATCH: /* queued one after another, they progress together */
        for (*n = 0; *n < o->nitems && s == DDPC_OK; ++*n) {
            HcclSendRecvItem *it = &o->items[*n];
            ddpc_dtype t;
            hccl__dtype(it->dataType, &t); /* checked when queued */
            s = it->sendRecvType == HCCL_SEND
                    ? ddpc_send_async(c, it->buf, it->count, t, (int)it->remoteRank, &w[*n])
                    : ddpc_recv_async(c, it->buf, it->count, t, (int)it->remoteRank, &w[*n]);
        }
        return s;
    }
    return DDPC_ERR_INTERNAL;
}

/* Runs the op: starts it, then waits for every work, at most the
 * communicator's exec timeout (its config's, else ddpc's). When that
 * passes, the communicator is aborted, so that nothing touches the
 * buffers after the stream has moved on (HCCL's communicator is unusable
 * after an exec timeout too). */
static ddpc_status run_op(hccl_op *o) {
    ddpc_work **w = calloc(max_works(o), sizeof *w);
    if (!w) return DDPC_ERR_NOMEM;
    uint32_t n = 0;
    ddpc_status s = start_op(o, w, &n);
    for (uint32_t i = 0; i < n; i++) {
        if (!w[i]) continue;
        ddpc_status si = ddpc_work_wait(w[i], o->hc->exec_timeout_s);
        if (si == DDPC_ERR_TIMEOUT && o->hc->exec_timeout_s >= 0) {
            ddpc_comm_abort(o->hc->c);
            o->timed_out = 1;
        }
        if (s == DDPC_OK) s = si;
        ddpc_work_destroy(w[i]);
    }
    free(w);
    return s;
}

/* The stream's aclError for a failed operation. */
static aclError acl_code(HcclResult r) {
    switch (r) {
    case HCCL_E_TIMEOUT: return ACL_ERROR_RT_TASK_TIMEOUT;
    case HCCL_E_TCP_TRANSFER:
    case HCCL_E_TCP_CONNECT:
    case HCCL_E_REMOTE: return ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
    case HCCL_E_UNAVAIL: return ACL_ERROR_RT_STREAM_ABORT;
    case HCCL_E_PARA: return ACL_ERROR_RT_PARAM_INVALID;
    case HCCL_E_OOM: return ACL_ERROR_RT_MEMORY_ALLOCATION;
    default: return ACL_ERROR_RT_COMM_OP_RETRY_FAIL;
    }
}

/* The stream task: runs the op, records a failure, frees the op. */
static aclError op_task(void *arg, char *err, size_t errlen) {
    hccl_op *o = arg;
    hccl_comm *hc = o->hc;
    ddpc_status s = run_op(o);
    aclError e = ACL_SUCCESS;
    if (s != DDPC_OK) {
        HcclResult r = hccl__result(s);
        const char *detail = ddpc_comm_last_error(hc->c);
        char why[160];
        if (o->timed_out) {
            r = HCCL_E_TIMEOUT;
            snprintf(why, sizeof why,
                     "not done within the communicator's hcclExecTimeOut (%g s): it is aborted",
                     hc->exec_timeout_s);
            detail = why;
        }
        hccl__async_error(hc, r);
        snprintf(err, errlen, "%s on rank %u of %u (%s): %s [HcclResult %d: %s]%s%s", o->name,
                 hc->rank, hc->size, hc->name,
                 o->timed_out ? ddpc_status_str(DDPC_ERR_TIMEOUT) : ddpc_status_str(s), (int)r,
                 HcclGetErrorString(r), detail[0] ? ": " : "", detail);
        e = acl_code(r);
    }
    op_free(o);
    pthread_mutex_lock(&hc->mu);
    if (--hc->pending == 0) pthread_cond_broadcast(&hc->cv);
    pthread_mutex_unlock(&hc->mu);
    return e;
}

/* HCCL_ENTRY_LOG_ENABLE=1: a line per operation as it is queued. */
static void entry_log(const hccl_op *o, aclrtStream stream) {
    const char *v = getenv("HCCL_ENTRY_LOG_ENABLE");
    if (!v || strcmp(v, "1") != 0) return;
    fprintf(stderr,
            "[HCCL] entry: %s comm %s rank %u/%u count %zu type %s root/peer %d stream %p\n",
            o->name, o->hc->name, o->hc->rank, o->hc->size, o->count, ddpc_dtype_name(o->t),
            o->root, stream);
}

/* Queues o (owned from here) on stream. */
static HcclResult submit(hccl_op *o, aclrtStream stream) {
    hccl_comm *hc = o->hc;
    entry_log(o, stream);
    pthread_mutex_lock(&hc->mu);
    hc->pending++;
    pthread_mutex_unlock(&hc->mu);
    aclError e = ddpc__acl_enqueue(stream, op_task, o);
    if (e == ACL_SUCCESS) return HCCL_SUCCESS;
    pthread_mutex_lock(&hc->mu);
    if (--hc->pending == 0) pthread_cond_broadcast(&hc->cv);
    pthread_mutex_unlock(&hc->mu);
    op_free(o);
    return hccl__fail(HCCL_E_RUNTIME, "queuing on stream %p failed (aclError %d: %s)", stream, e,
                      aclGetRecentErrMsg());
}

/* Step 1 for every call: a new op for comm with dtype (and op when
 * with_op), or NULL with *r set. */
static hccl_op *op_new(const char *name, op_kind kind, HcclComm comm, HcclDataType dtype,
                       HcclReduceOp rop, int with_op, HcclResult *r) {
    hccl_comm *hc = hccl__comm(comm);
    if (!hc) {
        *r = hccl__fail(HCCL_E_PTR, "%s: comm is not a live communicator", name);
        return NULL;
    }
    hccl_op *o = calloc(1, sizeof *o);
    if (!o) {
        *r = hccl__fail(HCCL_E_OOM, "%s: out of memory", name);
        return NULL;
    }
    *o = (hccl_op){ .kind = kind, .name = name, .hc = hc, .t = DDPC_UINT8, .op = DDPC_SUM };
    if (kind != K_BARRIER && kind != K_BATCH && (*r = hccl__dtype(dtype, &o->t)) != HCCL_SUCCESS) {
        hccl__fail(*r, "%s: data type %d: %s", name, (int)dtype, HcclGetErrorString(*r));
        op_free(o);
        return NULL;
    }
    if (with_op && (*r = hccl__op(rop, &o->op)) != HCCL_SUCCESS) {
        hccl__fail(*r, "%s: reduction %d is not SUM, PROD, MAX or MIN", name, (int)rop);
        op_free(o);
        return NULL;
    }
    *r = HCCL_SUCCESS;
    return o;
}

/* HCCL_E_PTR when a buffer that will be read or written is NULL. */
static HcclResult need(hccl_op *o, const char *what, const void *p, uint64_t count) {
    return p || count == 0 ? HCCL_SUCCESS : hccl__fail(HCCL_E_PTR, "%s: %s is NULL", o->name, what);
}

static HcclResult need_rank(hccl_op *o, const char *what, uint32_t rank) {
    return rank < o->hc->size ? HCCL_SUCCESS
                              : hccl__fail(HCCL_E_PARA, "%s: %s %u is not a rank of %u", o->name,
                                           what, rank, o->hc->size);
}

/* Frees o on failure; submits it otherwise. */
static HcclResult finish(hccl_op *o, HcclResult r, aclrtStream stream) {
    if (r != HCCL_SUCCESS) {
        op_free(o);
        return r;
    }
    return submit(o, stream);
}

#define BEGIN(name, kind, comm, dtype, rop, with_op)                \
    HcclResult r;                                                   \
    hccl_op *o = op_new(name, kind, comm, dtype, rop, with_op, &r); \
    if (!o) return r

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, aclrtStream stream) {
    BEGIN("HcclAllReduce", K_ALLREDUCE, comm, dataType, op, 1);
    o->send = sendBuf, o->recv = recvBuf, o->count = count;
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, count);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, count);
    return finish(o, r, stream);
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, aclrtStream stream) {
    BEGIN("HcclBroadcast", K_BROADCAST, comm, dataType, HCCL_REDUCE_SUM, 0);
    o->send = buf, o->count = count, o->root = (int)root;
    if (r == HCCL_SUCCESS) r = need(o, "buf", buf, count);
    if (r == HCCL_SUCCESS) r = need_rank(o, "root", root);
    return finish(o, r, stream);
}

HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream) {
    BEGIN("HcclReduce", K_REDUCE, comm, dataType, op, 1);
    o->send = sendBuf, o->recv = recvBuf, o->count = count, o->root = (int)root;
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, count);
    if (r == HCCL_SUCCESS) r = need_rank(o, "root", root);
    if (r == HCCL_SUCCESS && root == o->hc->rank)
        r = need(o, "recvBuf (on the root)", recvBuf, count);
    return finish(o, r, stream);
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, aclrtStream stream) {
    BEGIN("HcclAllGather", K_ALLGATHER, comm, dataType, HCCL_REDUCE_SUM, 0);
    o->send = sendBuf, o->recv = recvBuf, o->count = sendCount;
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, sendCount);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, sendCount);
    return finish(o, r, stream);
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             aclrtStream stream) {
    BEGIN("HcclReduceScatter", K_REDUCE_SCATTER, comm, dataType, op, 1);
    o->send = sendBuf, o->recv = recvBuf, o->count = recvCount;
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, recvCount);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, recvCount);
    return finish(o, r, stream);
}

HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                       uint32_t root, HcclComm comm, aclrtStream stream) {
    BEGIN("HcclScatter", K_SCATTER, comm, dataType, HCCL_REDUCE_SUM, 0);
    o->send = sendBuf, o->recv = recvBuf, o->count = recvCount, o->root = (int)root;
    if (r == HCCL_SUCCESS) r = need_rank(o, "root", root);
    if (r == HCCL_SUCCESS && root == o->hc->rank)
        r = need(o, "sendBuf (on the root)", sendBuf, recvCount);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, recvCount);
    return finish(o, r, stream);
}

HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                        const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                        HcclComm comm, aclrtStream stream) {
    BEGIN("HcclAlltoAll", K_ALLTOALL, comm, sendType, HCCL_REDUCE_SUM, 0);
    o->send = (void *)sendBuf, o->recv = (void *)recvBuf, o->count = sendCount;
    if (r == HCCL_SUCCESS && (sendType != recvType || sendCount != recvCount))
        r = hccl__fail(
            HCCL_E_PARA,
            "HcclAlltoAll: sendCount %llu / sendType %d differ from recvCount %llu / recvType %d",
            (unsigned long long)sendCount, (int)sendType, (unsigned long long)recvCount,
            (int)recvType);
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, sendCount);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, recvCount);
    return finish(o, r, stream);
}

/* Copies the uint64_t arrays given (NULL: left zero) into o->counts. */
static HcclResult copy_counts(hccl_op *o, const void *sc, const void *sd, const void *rc,
                              const void *rd) {
    size_t n = o->hc->size;
    o->counts = calloc(4 * n, sizeof *o->counts);
    if (!o->counts) return hccl__fail(HCCL_E_OOM, "%s: out of memory", o->name);
    const void *src[4] = { sc, sd, rc, rd };
    for (int a = 0; a < 4; a++)
        for (size_t i = 0; src[a] && i < n; i++) {
            uint64_t v;
            memcpy(&v, (const char *)src[a] + i * sizeof v, sizeof v);
            o->counts[a * n + i] = (size_t)v;
        }
    return HCCL_SUCCESS;
}

HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                         HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                         const void *rdispls, HcclDataType recvType, HcclComm comm,
                         aclrtStream stream) {
    BEGIN("HcclAlltoAllV", K_ALLTOALLV, comm, sendType, HCCL_REDUCE_SUM, 0);
    o->send = (void *)sendBuf, o->recv = (void *)recvBuf;
    if (r == HCCL_SUCCESS && sendType != recvType)
        r = hccl__fail(HCCL_E_PARA, "HcclAlltoAllV: sendType %d differs from recvType %d",
                       (int)sendType, (int)recvType);
    if (r == HCCL_SUCCESS && (!sendCounts || !sdispls || !recvCounts || !rdispls))
        r = hccl__fail(
            HCCL_E_PTR,
            "HcclAlltoAllV: sendCounts, sdispls, recvCounts and rdispls must be non-NULL");
    if (r == HCCL_SUCCESS) r = copy_counts(o, sendCounts, sdispls, recvCounts, rdispls);
    uint64_t ns = 0, nr = 0;
    for (uint32_t i = 0; r == HCCL_SUCCESS && i < o->hc->size; i++)
        ns += SCOUNTS(o)[i], nr += RCOUNTS(o)[i];
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, ns);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, nr);
    return finish(o, r, stream);
}

HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                          const void *recvBuf, HcclDataType recvType, HcclComm comm,
                          aclrtStream stream) {
    BEGIN("HcclAlltoAllVC", K_ALLTOALLV, comm, sendType, HCCL_REDUCE_SUM, 0);
    o->send = (void *)sendBuf, o->recv = (void *)recvBuf;
    if (r == HCCL_SUCCESS && sendType != recvType)
        r = hccl__fail(HCCL_E_PARA, "HcclAlltoAllVC: sendType %d differs from recvType %d",
                       (int)sendType, (int)recvType);
    if (r == HCCL_SUCCESS && !sendCountMatrix)
        r = hccl__fail(HCCL_E_PTR, "HcclAlltoAllVC: sendCountMatrix is NULL");
    if (r == HCCL_SUCCESS) r = copy_counts(o, NULL, NULL, NULL, NULL);
    /* my row gives what I send, my column what I receive; both packed */
    uint32_t n = r == HCCL_SUCCESS ? o->hc->size : 0, me = o->hc->rank;
    uint64_t ns = 0, nr = 0;
    for (uint32_t j = 0; j < n; j++) {
        uint64_t out, in;
        memcpy(&out, (const char *)sendCountMatrix + ((size_t)me * n + j) * 8, 8);
        memcpy(&in, (const char *)sendCountMatrix + ((size_t)j * n + me) * 8, 8);
        SCOUNTS(o)[j] = out, SDISPLS(o)[j] = ns, ns += out;
        RCOUNTS(o)[j] = in, RDISPLS(o)[j] = nr, nr += in;
    }
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, ns);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, nr);
    return finish(o, r, stream);
}

HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                          const void *recvDispls, HcclDataType dataType, HcclComm comm,
                          aclrtStream stream) {
    BEGIN("HcclAllGatherV", K_ALLGATHERV, comm, dataType, HCCL_REDUCE_SUM, 0);
    o->send = sendBuf, o->recv = recvBuf, o->count = sendCount;
    if (r == HCCL_SUCCESS && (!recvCounts || !recvDispls))
        r = hccl__fail(HCCL_E_PTR, "HcclAllGatherV: recvCounts and recvDispls must be non-NULL");
    if (r == HCCL_SUCCESS) r = copy_counts(o, NULL, NULL, recvCounts, recvDispls);
    uint64_t nr = 0;
    for (uint32_t i = 0; r == HCCL_SUCCESS && i < o->hc->size; i++) {
        SCOUNTS(o)[i] = sendCount; /* the same block to every rank */
        nr += RCOUNTS(o)[i];
    }
    if (r == HCCL_SUCCESS && RCOUNTS(o)[o->hc->rank] != sendCount)
        r = hccl__fail(HCCL_E_PARA,
                       "HcclAllGatherV: recvCounts[%u] = %llu differs from sendCount %llu",
                       o->hc->rank, (unsigned long long)RCOUNTS(o)[o->hc->rank],
                       (unsigned long long)sendCount);
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, sendCount);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, nr);
    return finish(o, r, stream);
}

HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls,
                              void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                              HcclReduceOp op, HcclComm comm, aclrtStream stream) {
    BEGIN("HcclReduceScatterV", K_REDUCE_SCATTERV, comm, dataType, op, 1);
    o->send = sendBuf, o->recv = recvBuf, o->count = recvCount;
    if (r == HCCL_SUCCESS && (!sendCounts || !sendDispls))
        r = hccl__fail(HCCL_E_PTR,
                       "HcclReduceScatterV: sendCounts and sendDispls must be non-NULL");
    if (r == HCCL_SUCCESS) r = copy_counts(o, sendCounts, sendDispls, NULL, NULL);
    uint64_t ns = 0;
    for (uint32_t i = 0; r == HCCL_SUCCESS && i < o->hc->size; i++) ns += SCOUNTS(o)[i];
    if (r == HCCL_SUCCESS && SCOUNTS(o)[o->hc->rank] != recvCount)
        r = hccl__fail(HCCL_E_PARA,
                       "HcclReduceScatterV: sendCounts[%u] = %llu differs from recvCount %llu",
                       o->hc->rank, (unsigned long long)SCOUNTS(o)[o->hc->rank],
                       (unsigned long long)recvCount);
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, ns);
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, recvCount);
    return finish(o, r, stream);
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
    BEGIN("HcclBarrier", K_BARRIER, comm, HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_SUM, 0);
    return finish(o, r, stream);
}

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                    HcclComm comm, aclrtStream stream) {
    BEGIN("HcclSend", K_SEND, comm, dataType, HCCL_REDUCE_SUM, 0);
    o->send = sendBuf, o->count = count, o->root = (int)destRank;
    if (r == HCCL_SUCCESS) r = need(o, "sendBuf", sendBuf, count);
    if (r == HCCL_SUCCESS) r = need_rank(o, "destRank", destRank);
    return finish(o, r, stream);
}

HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                    HcclComm comm, aclrtStream stream) {
    BEGIN("HcclRecv", K_RECV, comm, dataType, HCCL_REDUCE_SUM, 0);
    o->recv = recvBuf, o->count = count, o->root = (int)srcRank;
    if (r == HCCL_SUCCESS) r = need(o, "recvBuf", recvBuf, count);
    if (r == HCCL_SUCCESS) r = need_rank(o, "srcRank", srcRank);
    return finish(o, r, stream);
}

HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                             aclrtStream stream) {
    BEGIN("HcclBatchSendRecv", K_BATCH, comm, HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_SUM, 0);
    if (itemNum && !sendRecvInfo)
        r = hccl__fail(HCCL_E_PTR, "HcclBatchSendRecv: sendRecvInfo is NULL");
    for (uint32_t i = 0; r == HCCL_SUCCESS && i < itemNum; i++) {
        HcclSendRecvItem *it = &sendRecvInfo[i];
        ddpc_dtype t;
        char what[48];
        snprintf(what, sizeof what, "sendRecvInfo[%u].buf", i);
        if (it->sendRecvType != HCCL_SEND && it->sendRecvType != HCCL_RECV)
            r = hccl__fail(
                HCCL_E_PARA,
                "HcclBatchSendRecv: sendRecvInfo[%u].sendRecvType %d is neither HCCL_SEND "
                "nor HCCL_RECV",
                i, (int)it->sendRecvType);
        if (r == HCCL_SUCCESS) r = hccl__dtype(it->dataType, &t);
        if (r == HCCL_SUCCESS) r = need(o, what, it->buf, it->count);
        if (r == HCCL_SUCCESS) r = need_rank(o, "remoteRank", it->remoteRank);
    }
    if (r == HCCL_SUCCESS && itemNum) {
        o->items = malloc(itemNum * sizeof *o->items);
        if (!o->items)
            r = hccl__fail(HCCL_E_OOM, "HcclBatchSendRecv: out of memory");
        else
            memcpy(o->items, sendRecvInfo, itemNum * sizeof *o->items);
        o->nitems = itemNum;
    }
    return finish(o, r, stream);
}
