/*
 * hccl_internal.h — what hccl_comm.c and hccl_coll.c share: the communicator
 * behind an HcclComm and the translations between HCCL's and ddpc's values.
 */
#ifndef DDPC_BRIDGES_HCCL_INTERNAL_H
#define DDPC_BRIDGES_HCCL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "ddpc/ddpc.h"
/* HCCL's API is what libhccl exports (ddpc builds with -fvisibility=hidden) */
#pragma GCC visibility push(default)
#include "hccl/hccl.h"
#pragma GCC visibility pop

#define HCCL_COMM_MAGIC 0x4843434du /* "HCCM" */

/* A rank's host, as a rank table names it. */
typedef struct hccl_addr {
    char host[64];
} hccl_addr;

/* What an HcclComm points to. */
typedef struct hccl_comm {
    uint32_t magic; /* HCCL_COMM_MAGIC while alive */
    ddpc_comm *c;   /* owned */
    uint32_t rank, size;
    char name[COMM_NAME_MAX_LENGTH];
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* pending reached 0 */
    int pending;           /* operations queued on streams and not yet run (mu) */
    HcclResult async_err;  /* the first failure of a queued operation (mu) */
    double exec_timeout_s; /* HcclCommConfig's hcclExecTimeOut; < 0: ddpc's (HCCL_EXEC_TIMEOUT) */
    hccl_addr *addrs;      /* each rank's host when a rank table made it, else NULL (owned) */
    uint64_t
        symwin_max; /* the most bytes a symmetric window may have (hcclSymWinMaxMemSizePerRank) */
    struct hccl_range *ranges; /* HcclCommSetMemoryRange's, with their active memory (owned; mu) */
} hccl_comm;

/* comm as a live communicator of ours; NULL when it is not (the caller
 * returns HCCL_E_PTR). */
hccl_comm *hccl__comm(HcclComm comm);

/* Wraps c (owned from here on, destroyed on failure) as an HcclComm named
 * name, with config's settings (config may be NULL). */
HcclResult hccl__wrap(ddpc_comm *c, const char *name, const HcclCommConfig *config, HcclComm *out);

/* HcclDataType to ddpc's: HCCL_SUCCESS, HCCL_E_NOT_SUPPORT for a type CPUs
 * lack (INT128, the FP8s), HCCL_E_PARA for a value that is no type. */
HcclResult hccl__dtype(HcclDataType t, ddpc_dtype *out);
HcclResult hccl__op(HcclReduceOp op, ddpc_op *out);
/* A ddpc status as the HcclResult with HCCL's meaning. */
HcclResult hccl__result(ddpc_status s);
/* Records r as comm's asynchronous error unless one is there already. */
void hccl__async_error(hccl_comm *hc, HcclResult r);

/* Forgets the memory ranges and windows comm still has (HcclCommDestroy). */
void hccl__mem_forget(hccl_comm *hc);

/* Keeps "HcclXxx: ..." as this thread's last error text (aclGetRecentErrMsg
 * gives it, as on NPUs) and returns r. */
HcclResult hccl__fail(HcclResult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
