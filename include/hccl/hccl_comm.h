/*
 * hccl_comm.h — HCCL's communicator calls (creation, queries, errors,
 * barrier), with CANN's names and signatures (hicann/hcomm), executed on
 * CPUs by libhccl over ddpc communicators.
 *
 * A rank is a process (HcclCommInitRootInfo, HcclCommInitClusterInfo) or a
 * "device" of one process (HcclCommInitAll: one communicator per device, its
 * ranks meeting inside the process). Calls that take a stream queue their
 * work on it and return; the stream runs it in order (acl/acl_rt.h).
 */
#ifndef HCCL_COMM_H_
#define HCCL_COMM_H_

#include <stddef.h>
#include <string.h>

#include "acl/acl.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* From a rank table file (RANK_TABLE_FILE's format, version 1.0 or 1.2). */
extern HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);
extern HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                                HcclCommConfig *config, HcclComm *comm);

/* A communicator of rankNum ranks of *comm (their ranks there in rankIds),
 * this rank being subCommRankId in it. Only those ranks call it; subCommId
 * tells apart sub-communicators made at the same time. */
extern HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                          uint64_t subCommId, uint32_t subCommRankId,
                                          HcclCommConfig *config, HcclComm *subComm);

/* Rank 0 calls it once per communicator and hands the bytes to every rank. */
extern HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
extern HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                       HcclComm *comm);
extern HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo,
                                             uint32_t rank, const HcclCommConfig *config,
                                             HcclComm *comm);

/* Process-wide settings: HCCL_DETERMINISTIC (0, 1, 2) is accepted and kept;
 * ddpc's reductions are deterministic whatever it says. */
extern HcclResult HcclSetConfig(HcclConfig config, HcclConfigValue configValue);
extern HcclResult HcclGetConfig(HcclConfig config, HcclConfigValue *configValue);

/* The name a communicator was given (HcclCommConfig's hcclCommName) or made up. */
extern HcclResult HcclGetCommName(HcclComm comm, char *commName);
extern HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
extern HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
extern HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
/* Waits for the work queued with comm on any stream, then frees comm. */
extern HcclResult HcclCommDestroy(HcclComm comm);

/* ndev communicators of one process, comms[i] being rank i on devices[i]. */
extern HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);

/* The first failure of work queued with comm (HCCL_SUCCESS when none). */
extern HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);
/* A static one-line text for code; never NULL. */
extern const char *HcclGetErrorString(HcclResult code);
/* The HcclCommConfigCapability values below it are understood: on CPUs
 * hcclCommName and hcclExecTimeOut are honoured (an exec timeout aborts the
 * communicator, as its NPU counterpart leaves it unusable), results are
 * always deterministic, and the other fields have no effect. */
extern uint32_t HcclGetCommConfigCapability(void);

/* Memory for the collectives, as HCCL registers it with a communicator.
 * These are records, checked on every call: a range, an activation or a
 * window is refused (HCCL_E_PARA, aclGetRecentErrMsg naming why) when it
 * overlaps one already there, when its memory is not what it claims, or
 * when it is undone with an address or handle never given. On CPUs any host
 * memory serves the collectives, so nothing changes in how they run.
 *
 * A range is virtual memory aclrtReserveMemAddress reserved, known to comm
 * (alignment and flags 0). Activating part of a range says that physical
 * memory (handle, from offset) is mapped there: it must be (aclrtMapMem).
 * A range with active memory in it cannot be unset; HcclCommDestroy forgets
 * what is left. */
extern HcclResult HcclCommSetMemoryRange(HcclComm comm, void *baseVirPtr, size_t size,
                                         size_t alignment, uint64_t flags);
extern HcclResult HcclCommUnsetMemoryRange(HcclComm comm, void *baseVirPtr);
extern HcclResult HcclCommActivateCommMemory(HcclComm comm, void *virPtr, size_t size,
                                             size_t offset, aclrtDrvMemHandle handle,
                                             uint64_t flags);
extern HcclResult HcclCommDeactivateCommMemory(HcclComm comm, void *virPtr);

/* A window of size bytes at addr (any memory the collectives may use) for
 * comm, flag HCCL_WIN_COLL_SYMMETRIC (HCCL_WIN_DEFAULT is
 * HCCL_E_NOT_SUPPORT, as in CANN). size is at most the communicator's
 * hcclSymWinMaxMemSizePerRank GiB (16 unless its config said). */
extern HcclResult HcclCommSymWinRegister(HcclComm comm, void *addr, uint64_t size,
                                         HcclCommSymWindow *winHandle, uint32_t flag);
/* winHandle: a live window of a live communicator. */
extern HcclResult HcclCommSymWinDeregister(HcclCommSymWindow winHandle);

/* Fills config with "not set" everywhere: call it before setting fields. */
static inline void HcclCommConfigInit(HcclCommConfig *config) {
    if (config == NULL) return;
    /* the header CANN keeps in reserved[]: {size_t size; uint32_t magic,
     * version; uint64_t zero} */
    struct hccl_config_header {
        size_t size;
        uint32_t magic;
        uint32_t version;
        uint64_t zero;
    } h;
    h.size = sizeof(HcclCommConfig);
    h.magic = HCCL_COMM_CONFIG_MAGIC_WORD;
    h.version = HCCL_COMM_CONFIG_VERSION;
    h.zero = 0;
    memcpy(config->reserved, &h, sizeof h);
    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclCommName[0] = '\0';
    config->hcclUdi[0] = '\0';
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclAlgo[0] = '\0';
    config->hcclRetryEnable[0] = '\0';
    config->hcclRetryParams[0] = '\0';
    config->hcclBufferName[0] = '\0';
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
}

#ifdef __cplusplus
}
#endif
#endif /* HCCL_COMM_H_ */
