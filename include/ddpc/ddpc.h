/*
 * ddpc.h — the whole public API of ddpc's collective communication library.
 *
 * Every call returns a ddpc_status. DDPC_OK is 0; anything else is an error
 * whose one-line meaning ddpc_status_str() gives, and whose details (which
 * rank, which peer, which variable to set) ddpc_comm_last_error() gives for
 * calls that took a communicator.
 *
 * Handles are opaque and caller-owned: each is made by a *_create call
 * (*_create_<how> where there are several ways) and let go by *_destroy, to
 * which NULL is harmless. Options are a plain struct filled by a *_default()
 * call, then changed field by field.
 */
#ifndef DDPC_DDPC_H
#define DDPC_DDPC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API: libddpc.so exports these names and no others (the
 * library is built with -fvisibility=hidden; its internal names are ddpc__*). */
#if defined(__GNUC__)
#define DDPC_API __attribute__((visibility("default")))
#else
#define DDPC_API
#endif

/* 0.2: the out-argument last and rank before size in every call
 * (ddpc_comm_create_url/_rank/_store/_rank_table, ddpc_get_unique_id);
 * getters named <object>_<thing> (ddpc_rank_table_server_at,
 * ddpc_model_hooks_of, ddpc_optim_options_of); ddpc_sampler_options lists
 * rank before num_replicas. */
#define DDPC_VERSION_MAJOR 0
#define DDPC_VERSION_MINOR 2
#define DDPC_VERSION_PATCH 0

/* ---------------------------------------------------------------- status */

typedef enum ddpc_status {
    DDPC_OK = 0,          /* success */
    DDPC_ERR_INVALID_ARG, /* an argument is out of range or inconsistent */
    DDPC_ERR_ENV,         /* an environment variable is missing or malformed */
    DDPC_ERR_SYSTEM,      /* a system call failed (errno is in the last error) */
    DDPC_ERR_NOMEM,       /* out of memory */
    DDPC_ERR_TIMEOUT,     /* a deadline passed before the peers answered */
    DDPC_ERR_PEER_LOST,   /* a peer closed its connection or died */
    DDPC_ERR_MISMATCH,    /* ranks issued different collectives at one sequence number */
    DDPC_ERR_ABORTED,     /* the communicator was aborted */
    DDPC_ERR_PROTOCOL,    /* a malformed, oversized or unexpected message */
    DDPC_ERR_NOT_FOUND,   /* a key, file, interface or address that does not exist */
    DDPC_ERR_IO,          /* a file could not be read or written, or is malformed */
    DDPC_ERR_INTERNAL,    /* a bug in ddpc: please report it */
    DDPC_ERR_DENIED,      /* a peer refused this process's job token (DDPC_JOB_TOKEN) */
    DDPC_STATUS_COUNT
} ddpc_status;

/* A static one-line description of a status; never NULL. */
DDPC_API const char *ddpc_status_str(ddpc_status s);

/* The detailed text of the last error raised on this thread by any ddpc
 * call (communicator or not); "" when none. Never NULL. */
DDPC_API const char *ddpc_last_error(void);

/* ------------------------------------------------------- dtypes and ops */

typedef enum ddpc_dtype {
    DDPC_INT8 = 0,
    DDPC_UINT8,
    DDPC_INT32,
    DDPC_UINT32,
    DDPC_INT64,
    DDPC_UINT64,
    DDPC_FLOAT16,  /* IEEE 754 binary16; reduced in float32, rounded once */
    DDPC_BFLOAT16, /* bfloat16; reduced in float32, rounded once */
    DDPC_FLOAT32,
    DDPC_FLOAT64,
    DDPC_INT16,
    DDPC_UINT16,
    DDPC_DTYPE_COUNT
} ddpc_dtype;

typedef enum ddpc_op {
    DDPC_SUM = 0,
    DDPC_PROD,
    DDPC_MAX,
    DDPC_MIN,
    DDPC_AVG,  /* sum divided by the world size (integer types: truncated) */
    DDPC_BAND, /* bitwise and, or, exclusive or: integer dtypes only */
    DDPC_BOR,
    DDPC_BXOR,
    DDPC_OP_COUNT
} ddpc_op;

DDPC_API size_t ddpc_dtype_size(ddpc_dtype t);      /* 0 for an invalid dtype */
DDPC_API const char *ddpc_dtype_name(ddpc_dtype t); /* "float32", ...; "?" if invalid */
DDPC_API const char *ddpc_op_name(ddpc_op op);      /* "sum", ...; "?" if invalid */
/* Parse "float32"/"float"/"f32", "sum", ...; DDPC_ERR_INVALID_ARG if unknown. */
DDPC_API ddpc_status ddpc_dtype_parse(const char *s, ddpc_dtype *out);
DDPC_API ddpc_status ddpc_op_parse(const char *s, ddpc_op *out);

/* float16 / bfloat16 conversions (round to nearest even). */
DDPC_API float ddpc_half_to_float(uint16_t h);
DDPC_API uint16_t ddpc_float_to_half(float f);
DDPC_API float ddpc_bf16_to_float(uint16_t b);
DDPC_API uint16_t ddpc_float_to_bf16(float f);

/* ----------------------------------------------------------- communicator */

typedef struct ddpc_comm ddpc_comm;

/*
 * From the environment, torchrun's contract: RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT (LOCAL_RANK and LOCAL_WORLD_SIZE optional). When RANK is unset,
 * OpenMPI's (OMPI_COMM_WORLD_*) and Slurm's (SLURM_PROCID, SLURM_NTASKS, ...)
 * variables are read instead. When DDPC_STORE_ADDR/DDPC_STORE_PORT name a
 * store hosted by a launcher, it is used; otherwise rank 0 hosts the store at
 * MASTER_ADDR:MASTER_PORT. When RANK_TABLE_FILE names a rank table, the
 * size is the table's and the rank RANK_ID (else RANK, ...); rank 0 hosts
 * the store as ddpc_comm_create_rank_table says, unless a launcher hosts
 * one. A bad variable is DDPC_ERR_ENV naming it.
 */
DDPC_API ddpc_status ddpc_comm_create_env(ddpc_comm **out);

/* From "tcp://host:port" (rank 0 hosts the store there), a rank and a size. */
DDPC_API ddpc_status ddpc_comm_create_url(const char *url, int rank, int size, ddpc_comm **out);

/* Settings a caller may give a communicator instead of the environment's. */
typedef struct ddpc_comm_options {
    double connect_timeout_s; /* bootstrap deadline; <= 0: DDPC_CONNECT_TIMEOUT */
    double exec_timeout_s;    /* per operation; 0: no limit; < 0: DDPC_EXEC_TIMEOUT */
    /* Who runs queued (async) operations. 1, or < 0 for the default: a
     * progress thread of the communicator's own. 0: the threads that wait
     * for them (ddpc_work_wait with any timeout but 0 runs the queue up to
     * its operation; ddpc_work_test does not), for callers that have a
     * thread of their own to wait on every operation: one thread hand-off
     * less per call. Operations nobody waits for then do not progress. */
    int progress_thread;
    /* ddpc_get_unique_id: where the id's store listens when neither
     * HCCL_HOST_SOCKET_PORT_RANGE nor HCCL_IF_BASE_PORT is set. > 0: a free
     * port of the 32 from this base, local rank i trying base + i first
     * (libhccl gives HCCL's 60000); <= 0: any free port. */
    int id_port_base;
} ddpc_comm_options;
/* Options that take everything from the environment (each field -1). */
DDPC_API ddpc_comm_options ddpc_comm_options_default(void);

/* A unique id, as ncclGetUniqueId / HcclGetRootInfo: rank 0 creates it (and
 * starts hosting a store), hands the bytes to the other ranks by any means,
 * and every rank calls ddpc_comm_create_rank with it. opt may be NULL (the
 * defaults) in both. */
typedef struct ddpc_unique_id {
    char internal[128];
} ddpc_unique_id;
DDPC_API ddpc_status ddpc_get_unique_id(const ddpc_comm_options *opt, ddpc_unique_id *out);
DDPC_API ddpc_status ddpc_comm_create_rank(const ddpc_unique_id *id, int rank, int size,
                                           const ddpc_comm_options *opt, ddpc_comm **out);

/* From a key-value store the caller already has (store.h:
 * ddpc_store_create_ops wraps any store, e.g. PyTorch's c10d Store; a
 * ddpc_store_create_tcp client works too). Every rank passes a store whose
 * keys no other communicator uses (a fresh prefix per communicator). The
 * store carries only the rendezvous; data goes over ddpc's own connections.
 * st is borrowed for this call, and for the communicator's life when
 * ddpc_comm_split will be called on it. opt may be NULL (the defaults). */
typedef struct ddpc_store ddpc_store;
DDPC_API ddpc_status ddpc_comm_create_store(ddpc_store *st, int rank, int size,
                                            const ddpc_comm_options *opt, ddpc_comm **out);

/*
 * A rank table file: HCCL's JSON description of a job (what RANK_TABLE_FILE
 * names and HcclCommInitClusterInfo reads), version "1.0" or "1.2":
 *
 *   {"version": "1.0", "status": "completed", "server_count": "2",
 *    "server_list": [{"server_id": "node0", "host_ip": "10.0.0.1",
 *                     "device": [{"device_id": "0", "rank_id": "0"}, ...]}, ...]}
 *
 * Every value is a string; server_count, host_ip and device_ip are
 * optional; rank_ids are 0..n-1, each once, contiguous on each server. A
 * table that breaks any of this is DDPC_ERR_IO with a text that starts as
 * HCCL's EI0004 and names the field ("EI0004: the rank table t.json is
 * invalid: server_list[0].device[1].rank_id: rank 0 is listed twice"); a
 * file that is not there is DDPC_ERR_NOT_FOUND, one that cannot be read
 * DDPC_ERR_SYSTEM. A ddpc built without libcjson reads none
 * (DDPC_ERR_INVALID_ARG, saying so).
 */
typedef struct ddpc_rank_table ddpc_rank_table;
DDPC_API ddpc_status ddpc_rank_table_load(const char *path, ddpc_rank_table **out);
DDPC_API void ddpc_rank_table_destroy(ddpc_rank_table *t);      /* NULL is harmless */
DDPC_API int ddpc_rank_table_size(const ddpc_rank_table *t);    /* ranks */
DDPC_API int ddpc_rank_table_servers(const ddpc_rank_table *t); /* servers */
/* One server of a table, as the file lists them (strings borrowed from t). */
typedef struct ddpc_rank_table_server {
    const char *server_id;
    const char *host;       /* its address: host_ip, else server_id */
    int first_rank, nranks; /* its ranks: first_rank .. first_rank + nranks - 1 */
} ddpc_rank_table_server;
/* Server s (0 .. servers-1) of t; DDPC_ERR_INVALID_ARG when there is none. */
DDPC_API ddpc_status ddpc_rank_table_server_at(const ddpc_rank_table *t, int s,
                                               ddpc_rank_table_server *out);
/* The server and the device_id of rank r; -1 when t has no rank r. */
DDPC_API int ddpc_rank_table_server_of(const ddpc_rank_table *t, int rank);
DDPC_API int ddpc_rank_table_device(const ddpc_rank_table *t, int rank);

/* Rank `rank` of t's communicator (t is borrowed for the call): rank 0
 * hosts the store at its server's address on DDPC_RANK_TABLE_PORT (60000),
 * every rank meets the others there. ddpc_comm_create_env does this when
 * RANK_TABLE_FILE is set. opt may be NULL. */
DDPC_API ddpc_status ddpc_comm_create_rank_table(const ddpc_rank_table *t, int rank,
                                                 const ddpc_comm_options *opt, ddpc_comm **out);

DDPC_API int ddpc_comm_rank(const ddpc_comm *c);
DDPC_API int ddpc_comm_size(const ddpc_comm *c);
DDPC_API int ddpc_comm_local_rank(const ddpc_comm *c); /* rank among the ranks on this host */
DDPC_API int ddpc_comm_local_size(const ddpc_comm *c); /* number of ranks on this host */

/* Collective over c: ranks with the same color form a new communicator,
 * ordered by (key, old rank). color < 0 gives *out = NULL. */
DDPC_API ddpc_status ddpc_comm_split(ddpc_comm *c, int color, int key, ddpc_comm **out);

/* Wakes every waiting call on every thread; pending and later operations on c
 * fail with DDPC_ERR_ABORTED, and peers see this rank as lost. Thread-safe. */
DDPC_API ddpc_status ddpc_comm_abort(ddpc_comm *c);

/* Waits for queued operations, and for the neighbours' checks of the
 * last rooted collectives (a broadcast's root returns before them), both
 * bounded by the exec timeout; closes connections, frees everything and
 * returns what those checks found (DDPC_ERR_MISMATCH where a neighbour's
 * call differed). NULL is harmless. */
DDPC_API ddpc_status ddpc_comm_destroy(ddpc_comm *c);

/* What failed last on c, on which rank, against which peer, and which
 * variable to set for more detail. "" when nothing failed. Never NULL. */
DDPC_API const char *ddpc_comm_last_error(const ddpc_comm *c);

/* ------------------------------------------------------------ collectives */

/*
 * All ranks of a communicator issue the same collectives in the same order.
 * Each carries a sequence number and a fingerprint (op, count, dtype, root);
 * a rank whose call differs from its peers' gets DDPC_ERR_MISMATCH.
 *
 * Each collective has a blocking form and an async form that returns a work
 * handle. Operations on one communicator run in the order issued; several
 * may be outstanding. Buffers must stay valid until the work completes.
 * In place: send == recv is allowed for allreduce, broadcast, reduce; for
 * allgather when send == recv + rank*count; for reduce-scatter when
 * recv == send + rank*recvcount.
 */
typedef struct ddpc_work ddpc_work;

/* Waits until w completes or timeout_s passes (timeout_s < 0: the
 * communicator's exec timeout, plus DDPC_STALL_SETTLE and a second, so that
 * a stalled operation's own error, naming the silent rank, is the one
 * returned). Returns the operation's status. */
DDPC_API ddpc_status ddpc_work_wait(ddpc_work *w, double timeout_s);
/* *done = 1 when w has completed (then returns its status), 0 otherwise. */
DDPC_API ddpc_status ddpc_work_test(ddpc_work *w, int *done);
/* Frees w; waits for it first if it is still running. NULL is harmless. */
DDPC_API void ddpc_work_destroy(ddpc_work *w);
/* When w was queued, began executing and completed (seconds on
 * CLOCK_MONOTONIC), e.g. for a timeline; started and completed are 0 until
 * it has completed. Any pointer may be NULL. */
DDPC_API ddpc_status ddpc_work_times(ddpc_work *w, double *queued, double *started,
                                     double *completed);

DDPC_API ddpc_status ddpc_allreduce(ddpc_comm *c, const void *send, void *recv, size_t count,
                                    ddpc_dtype t, ddpc_op op);
DDPC_API ddpc_status ddpc_allreduce_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                          ddpc_dtype t, ddpc_op op, ddpc_work **w);

/* root's send is copied to every rank's recv (recv may equal send). */
DDPC_API ddpc_status ddpc_broadcast(ddpc_comm *c, const void *send, void *recv, size_t count,
                                    ddpc_dtype t, int root);
DDPC_API ddpc_status ddpc_broadcast_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                          ddpc_dtype t, int root, ddpc_work **w);

/* The reduction lands in root's recv; other ranks' recv is untouched. */
DDPC_API ddpc_status ddpc_reduce(ddpc_comm *c, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, ddpc_op op, int root);
DDPC_API ddpc_status ddpc_reduce_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                       ddpc_dtype t, ddpc_op op, int root, ddpc_work **w);

/* recv holds size*count elements: rank i's send at i*count. */
DDPC_API ddpc_status ddpc_allgather(ddpc_comm *c, const void *send, void *recv, size_t count,
                                    ddpc_dtype t);
DDPC_API ddpc_status ddpc_allgather_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                          ddpc_dtype t, ddpc_work **w);

/* send holds size*count elements; rank i gets the reduction of block i. */
DDPC_API ddpc_status ddpc_reduce_scatter(ddpc_comm *c, const void *send, void *recv, size_t count,
                                         ddpc_dtype t, ddpc_op op);
DDPC_API ddpc_status ddpc_reduce_scatter_async(ddpc_comm *c, const void *send, void *recv,
                                               size_t count, ddpc_dtype t, ddpc_op op,
                                               ddpc_work **w);

/* root's recv holds size*count elements: rank i's send at i*count. */
DDPC_API ddpc_status ddpc_gather(ddpc_comm *c, const void *send, void *recv, size_t count,
                                 ddpc_dtype t, int root);
DDPC_API ddpc_status ddpc_gather_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                       ddpc_dtype t, int root, ddpc_work **w);

/* root's send holds size*count elements; rank i gets block i. */
DDPC_API ddpc_status ddpc_scatter(ddpc_comm *c, const void *send, void *recv, size_t count,
                                  ddpc_dtype t, int root);
DDPC_API ddpc_status ddpc_scatter_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                        ddpc_dtype t, int root, ddpc_work **w);

/* send and recv hold size*count elements; block j of send goes to rank j,
 * and lands in block i of rank j's recv. */
DDPC_API ddpc_status ddpc_alltoall(ddpc_comm *c, const void *send, void *recv, size_t count,
                                   ddpc_dtype t);
DDPC_API ddpc_status ddpc_alltoall_async(ddpc_comm *c, const void *send, void *recv, size_t count,
                                         ddpc_dtype t, ddpc_work **w);

/* Uneven all-to-all, as MPI_Alltoallv: sendcounts[j] elements from
 * send + sdispls[j] go to rank j, which receives them at recv + rdispls[i]
 * (i = this rank), where recvcounts[i] must equal them. Counts and
 * displacements are in elements, size entries each; the arrays are copied,
 * so they need not outlive the call. send and recv must not overlap. */
DDPC_API ddpc_status ddpc_alltoallv(ddpc_comm *c, const void *send, const size_t *sendcounts,
                                    const size_t *sdispls, void *recv, const size_t *recvcounts,
                                    const size_t *rdispls, ddpc_dtype t);
DDPC_API ddpc_status ddpc_alltoallv_async(ddpc_comm *c, const void *send, const size_t *sendcounts,
                                          const size_t *sdispls, void *recv,
                                          const size_t *recvcounts, const size_t *rdispls,
                                          ddpc_dtype t, ddpc_work **w);

DDPC_API ddpc_status ddpc_barrier(ddpc_comm *c);
DDPC_API ddpc_status ddpc_barrier_async(ddpc_comm *c, ddpc_work **w);

/* Point to point. Every message carries a tag (any int; 0 for ddpc_send
 * and ddpc_recv) and matches as MPI's and gloo's do: a receive from peer P
 * with tag T takes the earliest message P sent this rank with tag T that no
 * receive took yet. Per (sender, receiver, tag) messages match in the order
 * sent; messages of different tags may be received in any order. A message
 * that arrives before a receive of its tag is posted is held aside by the
 * receiver (all such held at most DDPC_P2P_UNEXPECTED_BYTES, default 256
 * MiB; one more fails the receive with DDPC_ERR_NOMEM naming it), so two
 * ranks never wait on each other's tags. The counts and dtypes of a matched
 * pair must agree (else DDPC_ERR_MISMATCH); a receive whose message never
 * comes fails after DDPC_TIMEOUT (DDPC_ERR_TIMEOUT, naming peer and tag).
 * Empty messages (count 0) complete at once and do not travel. Sends and
 * receives queued one after another progress together, so two ranks may
 * each send before they receive. A receive from DDPC_ANY_SOURCE takes the
 * earliest message of its tag any rank sends this one (receives queued
 * after it wait until it has chosen); ddpc_work_source then names the
 * sender. */
#define DDPC_ANY_SOURCE (-1)
/* The rank a completed receive took its message from; -1 while not done. */
DDPC_API int ddpc_work_source(ddpc_work *w);
DDPC_API ddpc_status ddpc_send(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t, int peer);
DDPC_API ddpc_status ddpc_send_async(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t,
                                     int peer, ddpc_work **w);
DDPC_API ddpc_status ddpc_recv(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer);
DDPC_API ddpc_status ddpc_recv_async(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer,
                                     ddpc_work **w);
/* The same with a tag (ddpc_send == ddpc_send_tagged with tag 0). */
DDPC_API ddpc_status ddpc_send_tagged(ddpc_comm *c, const void *buf, size_t count, ddpc_dtype t,
                                      int peer, int tag);
DDPC_API ddpc_status ddpc_send_tagged_async(ddpc_comm *c, const void *buf, size_t count,
                                            ddpc_dtype t, int peer, int tag, ddpc_work **w);
DDPC_API ddpc_status ddpc_recv_tagged(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t, int peer,
                                      int tag);
DDPC_API ddpc_status ddpc_recv_tagged_async(ddpc_comm *c, void *buf, size_t count, ddpc_dtype t,
                                            int peer, int tag, ddpc_work **w);

#ifdef __cplusplus
}
#endif
#endif /* DDPC_DDPC_H */
