/*
 * hccl_check.c — an HCCL program, written against hccl/hccl.h and acl/acl.h
 * only (as for Ascend NPUs), that runs every HCCL call ddpc's libhccl
 * offers, with every data type at sizes 0, 1, odd and large, and checks
 * each result element by element. Prints one line per rank and exits 0
 * when everything matched.
 *
 *   ddpc-run --nproc-per-node=3 hccl_check ROOT_INFO_FILE
 *       ranks from RANK / WORLD_SIZE; rank 0's root info reaches the
 *       others through the file (written whole, then renamed into place)
 *   mpirun -np 3 hccl_check_mpi        (built with -DHCCL_CHECK_MPI)
 *       the root info broadcast with MPI_Bcast, as HCCL's examples do
 *   hccl_check --init-all N
 *       one process, N "devices" (HcclCommInitAll), a thread per device
 *   hccl_check --errors
 *       the argument checks, on one rank
 *   ddpc-run --nproc-per-node=4 hccl_check --rank-table FILE
 *       the communicator of a rank table file (HcclCommInitClusterInfo)
 *   ddpc-run --nproc-per-node=2 hccl_check ROOT_INFO_FILE --mismatch
 *       ranks that disagree on a count: the failure on every rank's stream
 *   ddpc-run --nproc-per-node=2 hccl_check ROOT_INFO_FILE --silent-peer[-config]
 *       the last rank never joins: HCCL_EXEC_TIMEOUT (or, -config, the
 *       communicator's hcclExecTimeOut of 1 s) fails the others' streams;
 *       --lost-peer: it exits at once, which fails them at once
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, with -std=c11 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../examples/hccl/hccl_values.h"
#include "hccl/hccl.h"
#ifdef HCCL_CHECK_MPI
#include <mpi.h>
#endif

/* ------------------------------------------------------------ helpers */

typedef struct rank_ctx {
    HcclComm comm;
    aclrtStream stream;
    uint32_t rank, size;
    int checks, failures;
} rank_ctx;

static const HcclDataType TYPES[] = {
    HCCL_DATA_TYPE_INT8,   HCCL_DATA_TYPE_INT16,  HCCL_DATA_TYPE_INT32,  HCCL_DATA_TYPE_FP16,
    HCCL_DATA_TYPE_FP32,   HCCL_DATA_TYPE_INT64,  HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_UINT8,
    HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_UINT32, HCCL_DATA_TYPE_FP64,   HCCL_DATA_TYPE_BFP16,
};
static const char *const TYPE_NAMES[] = { "int8",   "int16", "int32",  "fp16",   "fp32", "int64",
                                          "uint64", "uint8", "uint16", "uint32", "fp64", "bfp16" };
#define NTYPES (int)(sizeof TYPES / sizeof TYPES[0])
static const uint64_t SIZES[] = { 0, 1, 7, 4099, 100003 };
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* Device memory of n elements of t (at least one byte: aclrtMalloc refuses 0). */
static void *dev_alloc(uint64_t n, HcclDataType t) {
    void *p = NULL;
    size_t nb = n * tsize(t);
    ACL_OK(aclrtMalloc(&p, nb ? nb : 1, ACL_MEM_MALLOC_HUGE_FIRST));
    ACL_OK(aclrtMemset(p, nb ? nb : 1, 0, nb ? nb : 1));
    return p;
}

/* A value of rank r at element i, exact in every type (int8 and bfloat16
 * included), reduced values too: 1..3 for reductions, 0..99 for moves. */
static double rv(uint32_t r, uint64_t i) { return (double)(1 + (r + i) % 3); }
static double mv(uint32_t r, uint64_t i) { return (double)((r * 31 + i * 3) % 100); }

/* Synchronizes the stream, then compares n elements of buf with want(i). */
static void sync_ok(rank_ctx *x, const char *what) {
    aclError e = aclrtSynchronizeStream(x->stream);
    if (e != ACL_SUCCESS) {
        fprintf(stderr, "rank %u: %s: aclrtSynchronizeStream = %d (%s)\n", x->rank, what, e,
                aclGetRecentErrMsg());
        exit(1);
    }
}

static int expect(rank_ctx *x, const char *what, int ti, uint64_t n, const void *buf, uint64_t off,
                  double (*want)(rank_ctx *, uint64_t, void *), void *arg) {
    x->checks++;
    for (uint64_t i = 0; i < n; i++) {
        double got = get(buf, TYPES[ti], off + i), w = want(x, i, arg);
        if (got != w) {
            fprintf(stderr, "rank %u: %s %s count %llu: element %llu is %g, want %g\n", x->rank,
                    what, TYPE_NAMES[ti], (unsigned long long)n, (unsigned long long)i, got, w);
            x->failures++;
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------ the checks */

static _Thread_local HcclReduceOp g_op; /* want_reduced's operation */

static double want_reduced(rank_ctx *x, uint64_t i, void *arg) {
    double acc = rv(0, i);
    for (uint32_t r = 1; r < x->size; r++) {
        double v = rv(r, i);
        switch (g_op) {
        case HCCL_REDUCE_SUM: acc += v; break;
        case HCCL_REDUCE_PROD: acc *= v; break;
        case HCCL_REDUCE_MAX: acc = v > acc ? v : acc; break;
        default: acc = v < acc ? v : acc; break;
        }
    }
    return acc;
}

/* arg: a uint64_t offset into the reduced vector */
static double want_reduced_at(rank_ctx *x, uint64_t i, void *arg) {
    return want_reduced(x, i + *(uint64_t *)arg, NULL);
}
/* arg: the source rank, as a uint32_t */
static double want_moved(rank_ctx *x, uint64_t i, void *arg) { return mv(*(uint32_t *)arg, i); }
/* arg: {rank, offset} as two uint64_t */
static double want_moved_at(rank_ctx *x, uint64_t i, void *arg) {
    uint64_t *a = arg;
    return mv((uint32_t)a[0], i + a[1]);
}

static void check_allreduce(rank_ctx *x, int ti, uint64_t n) {
    static const HcclReduceOp ops[] = { HCCL_REDUCE_SUM, HCCL_REDUCE_PROD, HCCL_REDUCE_MAX,
                                        HCCL_REDUCE_MIN };
    static const char *const names[] = { "HcclAllReduce sum", "HcclAllReduce prod",
                                         "HcclAllReduce max", "HcclAllReduce min" };
    HcclDataType t = TYPES[ti];
    void *send = dev_alloc(n, t), *recv = dev_alloc(n, t);
    for (int k = 0; k < 4; k++) {
        for (uint64_t i = 0; i < n; i++) put(send, t, i, rv(x->rank, i));
        HCCL_OK(HcclAllReduce(send, recv, n, t, ops[k], x->comm, x->stream));
        sync_ok(x, names[k]);
        g_op = ops[k];
        expect(x, names[k], ti, n, recv, 0, want_reduced, NULL);
    }
    /* in place */
    HCCL_OK(HcclAllReduce(send, send, n, t, HCCL_REDUCE_SUM, x->comm, x->stream));
    sync_ok(x, "HcclAllReduce in place");
    g_op = HCCL_REDUCE_SUM;
    expect(x, "HcclAllReduce in place", ti, n, send, 0, want_reduced, NULL);
    aclrtFree(send);
    aclrtFree(recv);
}

static void check_rooted(rank_ctx *x, int ti, uint64_t n) {
    HcclDataType t = TYPES[ti];
    uint32_t root = x->size - 1, rroot = 1 % x->size;
    void *buf = dev_alloc(n, t), *send = dev_alloc(n, t), *recv = dev_alloc(n, t);
    /* broadcast */
    for (uint64_t i = 0; i < n; i++) put(buf, t, i, x->rank == root ? mv(root, i) : 0);
    HCCL_OK(HcclBroadcast(buf, n, t, root, x->comm, x->stream));
    sync_ok(x, "HcclBroadcast");
    expect(x, "HcclBroadcast", ti, n, buf, 0, want_moved, &root);
    /* reduce */
    for (uint64_t i = 0; i < n; i++) put(send, t, i, rv(x->rank, i));
    HCCL_OK(HcclReduce(send, recv, n, t, HCCL_REDUCE_MAX, rroot, x->comm, x->stream));
    sync_ok(x, "HcclReduce");
    g_op = HCCL_REDUCE_MAX;
    if (x->rank == rroot) expect(x, "HcclReduce max", ti, n, recv, 0, want_reduced, NULL);
    aclrtFree(buf);
    aclrtFree(send);
    aclrtFree(recv);
    /* scatter from rank 0: block i of root's send to rank i */
    uint32_t zero = 0;
    void *ssend = dev_alloc(n * x->size, t), *srecv = dev_alloc(n, t);
    for (uint64_t i = 0; x->rank == 0 && i < n * x->size; i++) put(ssend, t, i, mv(0, i));
    HCCL_OK(HcclScatter(ssend, srecv, n, t, zero, x->comm, x->stream));
    sync_ok(x, "HcclScatter");
    uint64_t at[2] = { 0, x->rank * n };
    expect(x, "HcclScatter", ti, n, srecv, 0, want_moved_at, at);
    aclrtFree(ssend);
    aclrtFree(srecv);
}

static void check_gathers(rank_ctx *x, int ti, uint64_t n) {
    HcclDataType t = TYPES[ti];
    uint32_t s = x->size;
    /* allgather */
    void *send = dev_alloc(n, t), *recv = dev_alloc(n * s, t);
    for (uint64_t i = 0; i < n; i++) put(send, t, i, mv(x->rank, i));
    HCCL_OK(HcclAllGather(send, recv, n, t, x->comm, x->stream));
    sync_ok(x, "HcclAllGather");
    for (uint32_t r = 0; r < s; r++) expect(x, "HcclAllGather", ti, n, recv, r * n, want_moved, &r);
    /* reduce-scatter: block r of the sum to rank r */
    void *big = dev_alloc(n * s, t);
    for (uint64_t i = 0; i < n * s; i++) put(big, t, i, rv(x->rank, i));
    HCCL_OK(HcclReduceScatter(big, send, n, t, HCCL_REDUCE_SUM, x->comm, x->stream));
    sync_ok(x, "HcclReduceScatter");
    g_op = HCCL_REDUCE_SUM;
    uint64_t off = x->rank * n;
    expect(x, "HcclReduceScatter sum", ti, n, send, 0, want_reduced_at, &off);
    /* all-to-all: my block j is mv(me, j*n + i); I get rank j's block me */
    for (uint64_t i = 0; i < n * s; i++) put(big, t, i, mv(x->rank, i));
    HCCL_OK(HcclAlltoAll(big, n, t, recv, n, t, x->comm, x->stream));
    sync_ok(x, "HcclAlltoAll");
    for (uint32_t j = 0; j < s; j++) {
        uint64_t at[2] = { j, x->rank * n };
        expect(x, "HcclAlltoAll", ti, n, recv, j * n, want_moved_at, at);
    }
    aclrtFree(send);
    aclrtFree(recv);
    aclrtFree(big);
}

/* The V variants: rank i's share is n + i elements. */
static void check_v(rank_ctx *x, int ti, uint64_t n) {
    HcclDataType t = TYPES[ti];
    uint32_t s = x->size, me = x->rank;
    uint64_t *cnt = calloc(s, 8), *dsp = calloc(s, 8), total = 0;
    for (uint32_t i = 0; i < s; i++) cnt[i] = n + i, dsp[i] = total, total += cnt[i];
    /* allgatherv */
    void *send = dev_alloc(cnt[me], t), *recv = dev_alloc(total, t);
    for (uint64_t i = 0; i < cnt[me]; i++) put(send, t, i, mv(me, i));
    HCCL_OK(HcclAllGatherV(send, cnt[me], recv, cnt, dsp, t, x->comm, x->stream));
    sync_ok(x, "HcclAllGatherV");
    for (uint32_t r = 0; r < s; r++)
        expect(x, "HcclAllGatherV", ti, cnt[r], recv, dsp[r], want_moved, &r);
    /* reducescatterv: a vector of total elements, share r to rank r */
    void *big = dev_alloc(total, t);
    for (uint64_t i = 0; i < total; i++) put(big, t, i, rv(me, i));
    HCCL_OK(
        HcclReduceScatterV(big, cnt, dsp, send, cnt[me], t, HCCL_REDUCE_MIN, x->comm, x->stream));
    sync_ok(x, "HcclReduceScatterV");
    g_op = HCCL_REDUCE_MIN;
    expect(x, "HcclReduceScatterV min", ti, cnt[me], send, 0, want_reduced_at, &dsp[me]);
    aclrtFree(send);
    aclrtFree(recv);
    aclrtFree(big);
    /* alltoallv: rank a sends n + (a + 2b) % 3 elements to rank b */
    uint64_t *sc = calloc(s, 8), *sd = calloc(s, 8), *rc = calloc(s, 8), *rd = calloc(s, 8), st = 0,
             rt = 0;
    for (uint32_t j = 0; j < s; j++) {
        sc[j] = n + (me + 2 * j) % 3, sd[j] = st, st += sc[j];
        rc[j] = n + (j + 2 * me) % 3, rd[j] = rt, rt += rc[j];
    }
    void *as = dev_alloc(st, t), *ar = dev_alloc(rt, t);
    for (uint64_t i = 0; i < st; i++) put(as, t, i, mv(me, i));
    HCCL_OK(HcclAlltoAllV(as, sc, sd, t, ar, rc, rd, t, x->comm, x->stream));
    sync_ok(x, "HcclAlltoAllV");
    for (uint32_t j = 0; j < s; j++) {
        /* rank j's block for me starts at its own sdispls[me] */
        uint64_t jd = 0;
        for (uint32_t k = 0; k < me; k++) jd += n + (j + 2 * k) % 3;
        uint64_t at[2] = { j, jd };
        expect(x, "HcclAlltoAllV", ti, rc[j], ar, rd[j], want_moved_at, at);
    }
    /* the same exchange from the whole matrix (AlltoAllVC) */
    uint64_t *m = calloc((size_t)s * s, 8);
    for (uint32_t a = 0; a < s; a++)
        for (uint32_t b = 0; b < s; b++) m[a * s + b] = n + (a + 2 * b) % 3;
    ACL_OK(aclrtMemset(ar, rt ? rt * tsize(t) : 1, 0, rt ? rt * tsize(t) : 1));
    HCCL_OK(HcclAlltoAllVC(as, m, t, ar, t, x->comm, x->stream));
    sync_ok(x, "HcclAlltoAllVC");
    for (uint32_t j = 0; j < s; j++) {
        uint64_t jd = 0;
        for (uint32_t k = 0; k < me; k++) jd += m[j * s + k];
        uint64_t at[2] = { j, jd };
        expect(x, "HcclAlltoAllVC", ti, rc[j], ar, rd[j], want_moved_at, at);
    }
    free(m);
    aclrtFree(as);
    aclrtFree(ar);
    free(sc), free(sd), free(rc), free(rd), free(cnt), free(dsp);
}

/* Send/Recv around the ring (rank 0 sends first, the others receive
 * first, so the blocking pairs line up), then a batch with every peer. */
static void check_p2p(rank_ctx *x, int ti, uint64_t n) {
    HcclDataType t = TYPES[ti];
    uint32_t s = x->size, me = x->rank, next = (me + 1) % s, prev = (me + s - 1) % s;
    if (s < 2) return;
    void *send = dev_alloc(n, t), *recv = dev_alloc(n, t);
    for (uint64_t i = 0; i < n; i++) put(send, t, i, mv(me, i));
    if (me == 0) {
        HCCL_OK(HcclSend(send, n, t, next, x->comm, x->stream));
        HCCL_OK(HcclRecv(recv, n, t, prev, x->comm, x->stream));
    } else {
        HCCL_OK(HcclRecv(recv, n, t, prev, x->comm, x->stream));
        HCCL_OK(HcclSend(send, n, t, next, x->comm, x->stream));
    }
    sync_ok(x, "HcclSend/HcclRecv");
    expect(x, "HcclSend/HcclRecv", ti, n, recv, 0, want_moved, &prev);
    /* batch: my block to everyone, everyone's into recv blocks */
    void *all = dev_alloc(n * s, t);
    HcclSendRecvItem *items = calloc(2 * s, sizeof *items);
    uint32_t k = 0;
    for (uint32_t j = 0; j < s; j++) {
        if (j == me) continue;
        items[k++] = (HcclSendRecvItem){ HCCL_SEND, send, n, t, j };
        items[k++] = (HcclSendRecvItem){ HCCL_RECV, (char *)all + j * n * tsize(t), n, t, j };
    }
    HCCL_OK(HcclBatchSendRecv(items, k, x->comm, x->stream));
    sync_ok(x, "HcclBatchSendRecv");
    for (uint32_t j = 0; j < s; j++)
        if (j != me) expect(x, "HcclBatchSendRecv", ti, n, all, j * n, want_moved, &j);
    free(items);
    aclrtFree(all);
    aclrtFree(send);
    aclrtFree(recv);
}

/* A second stream waits on an event of the first (aclrtStreamWaitEvent)
 * before it reads the collective's result; the device's default stream
 * (NULL) runs collectives too; the device calls. */
static void check_streams_and_events(rank_ctx *x) {
    int32_t dev = -1;
    uint32_t ndev = 0;
    ACL_OK(aclrtGetDevice(&dev));
    ACL_OK(aclrtGetDeviceCount(&ndev));
    x->checks++;
    if (dev < 0 || (uint32_t)dev >= ndev)
        fprintf(stderr, "rank %u: device %d of %u\n", x->rank, dev, ndev), x->failures++;
    aclrtStream other;
    aclrtEvent done;
    ACL_OK(aclrtCreateStream(&other));
    ACL_OK(aclrtCreateEvent(&done));
    int64_t *v = NULL, *copy = NULL;
    ACL_OK(aclrtMalloc((void **)&v, 64 * 8, ACL_MEM_MALLOC_NORMAL_ONLY));
    ACL_OK(aclrtMallocHost((void **)&copy, 64 * 8));
    ACL_OK(aclrtMemsetAsync(v, 64 * 8, 0, 64 * 8, x->stream));
    for (int i = 0; i < 64; i++) copy[i] = x->rank + 1;
    ACL_OK(aclrtMemcpyAsync(v, 64 * 8, copy, 64 * 8, ACL_MEMCPY_HOST_TO_DEVICE, x->stream));
    HCCL_OK(HcclAllReduce(v, v, 64, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, x->comm, x->stream));
    ACL_OK(aclrtRecordEvent(done, x->stream));
    ACL_OK(aclrtStreamWaitEvent(other, done));
    ACL_OK(aclrtMemcpyAsync(copy, 64 * 8, v, 64 * 8, ACL_MEMCPY_DEVICE_TO_HOST, other));
    ACL_OK(aclrtSynchronizeStream(other));
    aclrtEventRecordedStatus st = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    ACL_OK(aclrtQueryEventStatus(done, &st));
    int64_t want = (int64_t)x->size * (x->size + 1) / 2;
    x->checks++;
    if (copy[63] != want || st != ACL_EVENT_RECORDED_STATUS_COMPLETE)
        fprintf(stderr, "rank %u: across streams: %lld, want %lld (event %d)\n", x->rank,
                (long long)copy[63], (long long)want, (int)st),
            x->failures++;
    /* the default stream */
    HCCL_OK(HcclAllReduce(v, v, 64, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_MAX, x->comm, NULL));
    ACL_OK(aclrtSynchronizeStream(NULL));
    ACL_OK(aclrtSynchronizeDevice());
    x->checks++;
    if (v[0] != want)
        fprintf(stderr, "rank %u: default stream: %lld\n", x->rank, (long long)v[0]), x->failures++;
    ACL_OK(aclrtDestroyEvent(done));
    ACL_OK(aclrtDestroyStream(other));
    ACL_OK(aclrtFree(v));
    ACL_OK(aclrtFreeHost(copy));
}

/* Stream order and events: a copy queued before a collective happens
 * before it; events around it give a time. */
static void check_stream(rank_ctx *x) {
    HcclDataType t = HCCL_DATA_TYPE_FP32;
    uint64_t n = 1000;
    float *host = NULL;
    ACL_OK(aclrtMallocHost((void **)&host, n * 4));
    void *dev = dev_alloc(n, t);
    for (uint64_t i = 0; i < n; i++) host[i] = (float)rv(x->rank, i);
    aclrtEvent start, end;
    ACL_OK(aclrtCreateEvent(&start));
    ACL_OK(aclrtCreateEvent(&end));
    ACL_OK(aclrtRecordEvent(start, x->stream));
    ACL_OK(aclrtMemcpyAsync(dev, n * 4, host, n * 4, ACL_MEMCPY_HOST_TO_DEVICE, x->stream));
    HCCL_OK(HcclAllReduce(dev, dev, n, t, HCCL_REDUCE_SUM, x->comm, x->stream));
    ACL_OK(aclrtMemcpyAsync(host, n * 4, dev, n * 4, ACL_MEMCPY_DEVICE_TO_HOST, x->stream));
    ACL_OK(aclrtRecordEvent(end, x->stream));
    ACL_OK(aclrtSynchronizeEvent(end));
    float ms = -1;
    ACL_OK(aclrtEventElapsedTime(&ms, start, end));
    x->checks++;
    if (!(ms >= 0)) fprintf(stderr, "rank %u: elapsed time %g ms\n", x->rank, ms), x->failures++;
    g_op = HCCL_REDUCE_SUM;
    for (uint64_t i = 0; i < n; i++)
        if (host[i] != (float)want_reduced(x, i, NULL)) {
            fprintf(stderr, "rank %u: stream order: element %llu is %g, want %g\n", x->rank,
                    (unsigned long long)i, host[i], want_reduced(x, i, NULL));
            x->failures++;
            break;
        }
    HCCL_OK(HcclBarrier(x->comm, x->stream));
    sync_ok(x, "HcclBarrier");
    check_streams_and_events(x);
    HcclResult async = HCCL_E_INTERNAL;
    HCCL_OK(HcclGetCommAsyncError(x->comm, &async));
    x->checks++;
    if (async != HCCL_SUCCESS)
        fprintf(stderr, "rank %u: async error %d\n", x->rank, (int)async), x->failures++;
    ACL_OK(aclrtDestroyEvent(start));
    ACL_OK(aclrtDestroyEvent(end));
    ACL_OK(aclrtFreeHost(host));
    aclrtFree(dev);
}

/* A sub-communicator of the first and the last rank. */
static void check_subcomm(rank_ctx *x) {
    if (x->size < 2 || (x->rank != 0 && x->rank != x->size - 1)) return;
    uint32_t ids[2] = { 0, x->size - 1 }, me = x->rank == 0 ? 0 : 1, n = 0, sub_rank = 9;
    HcclCommConfig cfg;
    HcclCommConfigInit(&cfg);
    snprintf(cfg.hcclCommName, sizeof cfg.hcclCommName, "ends");
    HcclComm sub = NULL;
    HCCL_OK(HcclCreateSubCommConfig(&x->comm, 2, ids, 7, me, &cfg, &sub));
    HCCL_OK(HcclGetRankSize(sub, &n));
    HCCL_OK(HcclGetRankId(sub, &sub_rank));
    char name[COMM_NAME_MAX_LENGTH];
    HCCL_OK(HcclGetCommName(sub, name));
    int32_t v = (int32_t)x->rank + 1;
    HCCL_OK(HcclAllReduce(&v, &v, 1, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, sub, x->stream));
    sync_ok(x, "HcclAllReduce on a sub-communicator");
    x->checks++;
    if (n != 2 || sub_rank != me || v != (int32_t)x->size + 1 || strcmp(name, "ends") != 0) {
        fprintf(stderr, "rank %u: sub-communicator: size %u rank %u sum %d name %s\n", x->rank, n,
                sub_rank, v, name);
        x->failures++;
    }
    HCCL_OK(HcclCommDestroy(sub));
}

static void run_checks(rank_ctx *x) {
    uint32_t n = 0, r = 0;
    HCCL_OK(HcclGetRankSize(x->comm, &n));
    HCCL_OK(HcclGetRankId(x->comm, &r));
    if (n != x->size || r != x->rank) {
        fprintf(stderr, "rank %u of %u: HcclGetRankId/Size say %u of %u\n", x->rank, x->size, r, n);
        exit(1);
    }
    for (int ti = 0; ti < NTYPES; ti++)
        for (int si = 0; si < NSIZES; si++) {
            uint64_t n = SIZES[si];
            if (n > 5000 && TYPES[ti] != HCCL_DATA_TYPE_FP32 && TYPES[ti] != HCCL_DATA_TYPE_BFP16 &&
                TYPES[ti] != HCCL_DATA_TYPE_INT8)
                continue; /* the largest size for three types only: more adds time, not coverage */
            check_allreduce(x, ti, n);
            check_rooted(x, ti, n);
            check_gathers(x, ti, n);
            check_v(x, ti, n);
            check_p2p(x, ti, n);
        }
    check_stream(x);
    check_subcomm(x);
}

/* ------------------------------------------------------------ errors */

/* The checks HCCL makes before queuing anything; one rank suffices. */
static int check_errors(void) {
    int bad = 0;
#define WANT(expr, want)                                                             \
    do {                                                                             \
        HcclResult r__ = (expr);                                                     \
        if (r__ != (want)) {                                                         \
            fprintf(stderr, "%s = %d, want %d (%s)\n", #expr, (int)r__, (int)(want), \
                    aclGetRecentErrMsg());                                           \
            bad++;                                                                   \
        }                                                                            \
    } while (0)
    HcclRootInfo id;
    HcclComm comm = NULL;
    aclrtStream s = NULL;
    ACL_OK(aclrtCreateStream(&s));
    HCCL_OK(HcclGetRootInfo(&id));
    HCCL_OK(HcclCommInitRootInfo(1, &id, 0, &comm));
    float f[4] = { 1, 2, 3, 4 };
    WANT(HcclAllReduce(f, f, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, s), HCCL_E_PTR);
    WANT(HcclAllReduce(NULL, f, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_E_PTR);
    WANT(HcclAllReduce(f, f, 4, (HcclDataType)99, HCCL_REDUCE_SUM, comm, s), HCCL_E_PARA);
    WANT(HcclAllReduce(f, f, 4, HCCL_DATA_TYPE_FP8E4M3, HCCL_REDUCE_SUM, comm, s),
         HCCL_E_NOT_SUPPORT);
    WANT(HcclAllReduce(f, f, 4, HCCL_DATA_TYPE_FP32, (HcclReduceOp)7, comm, s), HCCL_E_PARA);
    WANT(HcclBroadcast(f, 4, HCCL_DATA_TYPE_FP32, 1, comm, s), HCCL_E_PARA);
    WANT(HcclSend(f, 4, HCCL_DATA_TYPE_FP32, 3, comm, s), HCCL_E_PARA);
    WANT(HcclAlltoAll(f, 1, HCCL_DATA_TYPE_FP32, f, 2, HCCL_DATA_TYPE_FP32, comm, s), HCCL_E_PARA);
    HcclRootInfo junk;
    memset(&junk, 7, sizeof junk);
    HcclComm c2 = NULL;
    WANT(HcclCommInitRootInfo(2, &id, 2, &c2), HCCL_E_PARA);
    WANT(HcclCommInitRootInfo(1, &junk, 0, &c2), HCCL_E_PARA);
    WANT(HcclCommInitClusterInfo("/nonexistent/rank_table.json", 0, &c2), HCCL_E_OPEN_FILE_FAILURE);
    WANT(HcclGetRankSize(NULL, NULL), HCCL_E_PTR);
    HcclConfigValue det = { 1 };
    WANT(HcclSetConfig(HCCL_DETERMINISTIC, det), HCCL_SUCCESS);
    det.value = 0;
    WANT(HcclGetConfig(HCCL_DETERMINISTIC, &det), HCCL_SUCCESS);
    if (det.value != 1) fprintf(stderr, "HcclGetConfig: %d\n", det.value), bad++;
    det.value = 5;
    WANT(HcclSetConfig(HCCL_DETERMINISTIC, det), HCCL_E_PARA);
    if (strcmp(HcclGetErrorString(HCCL_E_TIMEOUT), HcclGetErrorString(HCCL_E_PARA)) == 0 ||
        !HcclGetErrorString((HcclResult)12345))
        fprintf(stderr, "HcclGetErrorString\n"), bad++;
    /* a good call after all that */
    WANT(HcclAllReduce(f, f, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_PROD, comm, s), HCCL_SUCCESS);
    ACL_OK(aclrtSynchronizeStream(s));
    if (f[3] != 4) fprintf(stderr, "1-rank allreduce changed %g\n", f[3]), bad++;
    /* ACL's own checks */
    void *p = NULL;
    if (aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_ERROR_INVALID_PARAM)
        bad++, fprintf(stderr, "malloc 0\n");
    if (aclrtMemcpy(f, 4, f + 1, 8, ACL_MEMCPY_HOST_TO_HOST) != ACL_ERROR_INVALID_PARAM)
        bad++, fprintf(stderr, "memcpy over destMax\n");
    if (aclrtSynchronizeStream((aclrtStream)f) != ACL_ERROR_RT_INVALID_HANDLE)
        bad++, fprintf(stderr, "bad stream\n");
    HCCL_OK(HcclCommDestroy(comm));
    ACL_OK(aclrtDestroyStream(s));
    printf("hccl_check errors: %s\n", bad ? "FAILED" : "OK");
    return bad != 0;
}

/* ------------------------------------------------------------ start-ups */

static int finish(rank_ctx *x, const char *how) {
    printf("hccl_check rank %u/%u (%s): %s (%d checks, %d failed)\n", x->rank, x->size, how,
           x->failures ? "FAILED" : "OK", x->checks, x->failures);
    fflush(stdout);
    return x->failures != 0;
}

/* --init-all: one thread per device, each running the checks. */
static void *device_main(void *p) {
    rank_ctx *x = p;
    ACL_OK(aclrtSetDevice((int32_t)x->rank));
    ACL_OK(aclrtCreateStream(&x->stream));
    run_checks(x);
    ACL_OK(aclrtDestroyStream(x->stream));
    return NULL;
}

static int init_all(uint32_t n) {
    HcclComm comms[64];
    int32_t devs[64];
    rank_ctx xs[64];
    pthread_t th[64];
    if (n < 1 || n > 64) return fprintf(stderr, "--init-all: 1..64 devices\n"), 2;
    for (uint32_t i = 0; i < n; i++) devs[i] = (int32_t)i;
    HCCL_OK(HcclCommInitAll(n, devs, comms));
    for (uint32_t i = 0; i < n; i++) {
        xs[i] = (rank_ctx){ comms[i], NULL, i, n, 0, 0 };
        pthread_create(&th[i], NULL, device_main, &xs[i]);
    }
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        bad |= finish(&xs[i], "HcclCommInitAll");
        HCCL_OK(HcclCommDestroy(comms[i]));
    }
    return bad;
}

/* --mismatch: rank 0 reduces 4 elements, the others 5; every rank's
 * stream reports the failure, and HcclGetCommAsyncError names it. */
static int check_mismatch(rank_ctx *x) {
    float v[5] = { 1, 2, 3, 4, 5 };
    HCCL_OK(HcclAllReduce(v, v, x->rank == 0 ? 4 : 5, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, x->comm,
                          x->stream));
    aclError e = aclrtSynchronizeStream(x->stream);
    HcclResult async = HCCL_SUCCESS;
    HCCL_OK(HcclGetCommAsyncError(x->comm, &async));
    printf("rank %u: mismatch: aclrtSynchronizeStream = %d, async error %d (%s): %s\n", x->rank, e,
           (int)async, HcclGetErrorString(async), aclGetRecentErrMsg());
    x->checks++;
    if (e == ACL_SUCCESS || async != HCCL_E_PARA || !aclGetRecentErrMsg()[0]) x->failures++;
    return 0;
}

/* --rank-table FILE: this rank (RANK, else 0) of the table's communicator;
 * a refused table is exit code 3 with HCCL's text. */
static int rank_table(const char *path) {
    rank_ctx x = { 0 };
    const char *rk = getenv("RANK");
    x.rank = rk ? (uint32_t)atoi(rk) : 0;
    const char *lr = getenv("LOCAL_RANK");
    ACL_OK(aclrtSetDevice(lr ? atoi(lr) : 0));
    HcclResult r = HcclCommInitClusterInfo(path, x.rank, &x.comm);
    if (r != HCCL_SUCCESS) {
        printf("HcclCommInitClusterInfo = %d (%s): %s\n", (int)r, HcclGetErrorString(r),
               aclGetRecentErrMsg());
        return 3;
    }
    HCCL_OK(HcclGetRankSize(x.comm, &x.size));
    ACL_OK(aclrtCreateStream(&x.stream));
    run_checks(&x);
    HCCL_OK(HcclCommDestroy(x.comm));
    ACL_OK(aclrtDestroyStream(x.stream));
    return finish(&x, "rank table");
}

/* --silent-peer: the last rank never joins rank 0's allreduce (it waits
 * 3 s, then ends); the others' streams report the failure and name it. */
static int check_silent_peer(rank_ctx *x, int lost) {
    if (x->rank == x->size - 1) {
        if (lost) _exit(0); /* --lost-peer: it goes away at once, without a word */
        sleep(3);
        return 0;
    }
    float v[4] = { 1, 2, 3, 4 };
    HCCL_OK(HcclAllReduce(v, v, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, x->comm, x->stream));
    aclError e = aclrtSynchronizeStream(x->stream);
    HcclResult async = HCCL_SUCCESS;
    HCCL_OK(HcclGetCommAsyncError(x->comm, &async));
    printf("rank %u: silent peer: aclrtSynchronizeStream = %d, async error %d (%s): %s\n", x->rank,
           e, (int)async, HcclGetErrorString(async), aclGetRecentErrMsg());
    x->checks++;
    if (e == ACL_SUCCESS || async == HCCL_SUCCESS) x->failures++;
    return 0;
}

int main(int argc, char **argv) {
    ACL_OK(aclInit(NULL));
    int rc;
    if (argc > 1 && strcmp(argv[1], "--errors") == 0) {
        rc = check_errors();
    } else if (argc > 2 && strcmp(argv[1], "--init-all") == 0) {
        rc = init_all((uint32_t)atoi(argv[2]));
    } else if (argc > 2 && strcmp(argv[1], "--rank-table") == 0) {
        rc = rank_table(argv[2]);
    } else {
        rank_ctx x = { 0 };
        HcclRootInfo id;
#ifdef HCCL_CHECK_MPI
        int r, s;
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_size(MPI_COMM_WORLD, &s);
        x.rank = (uint32_t)r, x.size = (uint32_t)s;
        if (x.rank == 0) HCCL_OK(HcclGetRootInfo(&id));
        MPI_Bcast(&id, HCCL_ROOT_INFO_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
        const char *how = "mpirun, MPI_Bcast";
#else
        const char *rk = getenv("RANK"), *ws = getenv("WORLD_SIZE");
        if (argc < 2 || !rk || !ws) {
            fprintf(stderr,
                    "usage: ddpc-run --nproc-per-node=N %s ROOT_INFO_FILE | %s --init-all N | %s "
                    "--errors\n",
                    argv[0], argv[0], argv[0]);
            return 2;
        }
        x.rank = (uint32_t)atoi(rk), x.size = (uint32_t)atoi(ws);
        if (x.rank == 0) HCCL_OK(HcclGetRootInfo(&id));
        hccl_share_root_info(x.rank, argv[1], &id);
        const char *how = "root info through a file";
#endif
        ACL_OK(aclrtSetDevice(0));
        ACL_OK(aclrtCreateStream(&x.stream));
        const char *mode = argc > 2 ? argv[2] : "";
        HcclCommConfig cfg;
        HcclCommConfigInit(&cfg);
        cfg.hcclExecTimeOut = 1; /* --silent-peer-config: the communicator's own exec timeout */
        HCCL_OK(HcclCommInitRootInfoConfig(
            x.size, &id, x.rank, strcmp(mode, "--silent-peer-config") ? NULL : &cfg, &x.comm));
        if (strcmp(mode, "--mismatch") == 0)
            check_mismatch(&x);
        else if (strncmp(mode, "--silent-peer", 13) == 0)
            check_silent_peer(&x, 0);
        else if (strcmp(mode, "--lost-peer") == 0)
            check_silent_peer(&x, 1);
        else
            run_checks(&x);
        HCCL_OK(HcclCommDestroy(x.comm));
        ACL_OK(aclrtDestroyStream(x.stream));
        rc = finish(&x, how);
#ifdef HCCL_CHECK_MPI
        MPI_Finalize();
#endif
    }
    ACL_OK(aclFinalize());
    return rc;
}
