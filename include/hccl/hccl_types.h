/*
 * hccl_types.h — HCCL's types and constants, for HCCL programs that run on
 * CPUs over ddpc (libhccl, built from bridges/hccl/).
 *
 * Every name and numeric value is the one CANN's hccl_types.h (hicann/hcomm)
 * defines, so a program written for Ascend NPUs compiles unchanged and a
 * value it prints or stores means the same thing. One difference in form,
 * not in value: CANN declares the sizes below as `const uint32_t` objects,
 * which C cannot use as array bounds (and which would be defined once per
 * translation unit); here they are macros, usable from C and C++ alike.
 */
#ifndef HCCL_TYPES_H_
#define HCCL_TYPES_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What every HCCL call returns. HcclGetErrorString() gives the text. */
typedef enum {
    HCCL_SUCCESS = 0,              /* done */
    HCCL_E_PARA = 1,               /* an argument is invalid, or differs between ranks */
    HCCL_E_PTR = 2,                /* a pointer argument is NULL */
    HCCL_E_MEMORY = 3,             /* memory could not be used */
    HCCL_E_INTERNAL = 4,           /* a bug in the library */
    HCCL_E_NOT_SUPPORT = 5,        /* the feature is not supported (here: on CPUs) */
    HCCL_E_NOT_FOUND = 6,          /* a resource (file, address, key) does not exist */
    HCCL_E_UNAVAIL = 7,            /* a resource is unavailable (the communicator was aborted) */
    HCCL_E_SYSCALL = 8,            /* a system call failed */
    HCCL_E_TIMEOUT = 9,            /* peers did not answer in time */
    HCCL_E_OPEN_FILE_FAILURE = 10, /* a file could not be opened or read */
    HCCL_E_TCP_CONNECT = 11,       /* a TCP connection could not be set up */
    HCCL_E_ROCE_CONNECT = 12,      /* a RoCE connection could not be set up (not on CPUs) */
    HCCL_E_TCP_TRANSFER = 13,      /* a TCP transfer failed: a peer closed or sent garbage */
    HCCL_E_ROCE_TRANSFER = 14,     /* a RoCE transfer failed (not on CPUs) */
    HCCL_E_RUNTIME = 15,           /* a runtime (ACL) call failed */
    HCCL_E_DRV = 16,               /* a driver call failed (not on CPUs) */
    HCCL_E_PROFILING = 17,         /* a profiling call failed */
    HCCL_E_CCE = 18,               /* a CCE call failed (not on CPUs) */
    HCCL_E_NETWORK = 19,           /* a network call failed */
    HCCL_E_AGAIN = 20,             /* try again */
    HCCL_E_REMOTE = 21,            /* the remote side reported an error */
    HCCL_E_SUSPENDING = 22,        /* the communicator is suspending */
    HCCL_E_OPRETRY_FAIL = 23,      /* retrying the operation failed */
    HCCL_E_OOM = 24,               /* out of memory */
    HCCL_E_IN_STATUS = 1041,       /* the error is in the status */
    HCCL_E_RESERVED                /* reserved */
} HcclResult;

/* A communicator: opaque, made by an HcclCommInit* call, freed by HcclCommDestroy. */
typedef void *HcclComm;
typedef void *HcclConn;
typedef void *HcclCommSymWindow; /* a registered window (HcclCommSymWinRegister) */

/* HcclCommSymWinRegister's flag */
typedef enum {
    HCCL_WIN_DEFAULT = 0,        /* not supported, as in CANN */
    HCCL_WIN_COLL_SYMMETRIC = 1, /* a window for the collectives */
} symmetricMemoryFlag;

typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3, /* IEEE 754 binary16 */
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,  /* bfloat16 */
    HCCL_DATA_TYPE_INT128 = 12, /* the types from here on: HCCL_E_NOT_SUPPORT on CPUs */
    HCCL_DATA_TYPE_HIF8 = 14,
    HCCL_DATA_TYPE_FP8E4M3 = 15,
    HCCL_DATA_TYPE_FP8E5M2 = 16,
    HCCL_DATA_TYPE_FP8E8M0 = 17,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

typedef enum {
    HCCL_DETERMINISTIC = 0, /* 0: not deterministic, 1: deterministic, 2: strict */
    HCCL_CONFIG_RESERVED
} HcclConfig;

typedef union HcclConfigValue {
    int32_t value;
} HcclConfigValue;

#define HCCL_ROOT_INFO_BYTES              4108u /* size of HcclRootInfo */
#define COMM_NAME_MAX_LENGTH              128u  /* a communicator's name, with its NUL */
#define BUFFER_NAME_MAX_LENGTH            128u
#define UDI_MAX_LENGTH                    128u
#define HCCL_COMM_ALGO_MAX_LENGTH         1600u
#define HCCL_COMM_RETRY_ENABLE_MAX_LENGTH 50u
#define HCCL_COMM_RETRY_PARAMS_MAX_LENGTH 128u

/* What rank 0's HcclGetRootInfo gives, to be handed to every rank's
 * HcclCommInitRootInfo by any means (MPI_Bcast, a file). */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

#define HCCL_COMM_CONFIG_INFO_BYTES            24u
#define HCCL_COMM_CONFIG_MAGIC_WORD            0xf0f0f0f0u
#define HCCL_COMM_CONFIG_VERSION               10u
#define HCCL_COMM_DEFAULT_BUFFSIZE             200u
#define HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET      0xffffffffu
#define HCCL_COMM_DEFAULT_DETERMINISTIC        0u
#define HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_DEFAULT_OP_EXPANSION_MODE    0u
#define HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET 0xffffffffu
#define HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET   ((int32_t)-1)
#define HCCL_COMM_QOS_CONFIG_NOT_SET           0xffffffffu
#define HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE   16ull

/* Settings of one communicator, filled by HcclCommConfigInit() first. The
 * layout is CANN's; on CPUs hcclBufferSize, hcclDeterministic,
 * hcclCommName and hcclExecTimeOut are read, the rest is accepted. */
typedef struct HcclCommConfigDef {
    char
        reserved[HCCL_COMM_CONFIG_INFO_BYTES]; /* {size, magic, version, 0}: HcclCommConfigInit's */
    uint32_t hcclBufferSize; /* MB; HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET: HCCL_BUFFSIZE */
    uint32_t hcclDeterministic;
    char hcclCommName[COMM_NAME_MAX_LENGTH];
    char hcclUdi[UDI_MAX_LENGTH];
    uint32_t hcclOpExpansionMode;
    uint32_t hcclRdmaTrafficClass;
    uint32_t hcclRdmaServiceLevel;
    uint32_t hcclWorldRankID;
    uint64_t hcclJobID;
    uint8_t aclGraphZeroCopyEnable;
    int32_t hcclExecTimeOut; /* seconds; HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET: env */
    char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];
    char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH];
    char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH];
    char hcclBufferName[BUFFER_NAME_MAX_LENGTH];
    uint32_t hcclQos;
    uint64_t hcclSymWinMaxMemSizePerRank;
} HcclCommConfig;

typedef enum {
    HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
    HCCL_COMM_CONFIG_DETERMINISTIC = 1,
    HCCL_COMM_CONFIG_COMM_NAME = 2,
    HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
    HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
    HCCL_COMM_CONFIG_WORLD_RANKID = 5,
    HCCL_COMM_CONFIG_JOBID = 6,
    HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
    HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
    HCCL_COMM_CONFIG_ALGO = 9,
    HCCL_COMM_CONFIG_RETRY = 10,
    HCCL_COMM_CONFIG_BUFFER_NAME = 11,
    HCCL_COMM_CONFIG_RESERVED
} HcclCommConfigCapability;

typedef enum { HCCL_SEND = 0, HCCL_RECV = 1, HCCL_SEND_RECV_RESERVED } HcclSendRecvType;

/* One send or receive of HcclBatchSendRecv. */
typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType;
    void *buf;
    uint64_t count; /* elements */
    HcclDataType dataType;
    uint32_t remoteRank;
} HcclSendRecvItem;

typedef enum {
    HCCL_CMD_INVALID = 0,
    HCCL_CMD_BROADCAST = 1,
    HCCL_CMD_ALLREDUCE,
    HCCL_CMD_REDUCE,
    HCCL_CMD_SEND,
    HCCL_CMD_RECEIVE,
    HCCL_CMD_ALLGATHER,
    HCCL_CMD_REDUCE_SCATTER,
    HCCL_CMD_ALLTOALLV,
    HCCL_CMD_ALLTOALLVC,
    HCCL_CMD_ALLTOALL,
    HCCL_CMD_GATHER,
    HCCL_CMD_SCATTER,
    HCCL_CMD_BATCH_SEND_RECV,
    HCCL_CMD_BATCH_PUT,
    HCCL_CMD_BATCH_GET,
    HCCL_CMD_ALLGATHER_V,
    HCCL_CMD_REDUCE_SCATTER_V,
    HCCL_CMD_BATCH_WRITE,
    HCCL_CMD_HALF_ALLTOALLV = 20,
    HCCL_CMD_ALL,
    HCCL_CMD_FINALIZE = 100,
    HCCL_CMD_INTER_GROUP_SYNC,
    HCCL_CMD_INIT,
    HCCL_CMD_BARRIER,
    HCCL_CMD_MAX
} HcclCMDType;

typedef enum {
    HCCL_COMM_STATUS_READY = 0,
    HCCL_COMM_STATUS_SUSPENDING = 1,
    HCCL_COMM_STATUS_INVALID = 254,
    HCCL_COMM_STATUS_RESERVED = 255
} HcclCommStatus;

#ifdef __cplusplus
}
#endif
#endif /* HCCL_TYPES_H_ */
