/*
 * hccl_ranktable.c — HcclCommInitClusterInfo(+Config): communicators from a
 * rank table file (RANK_TABLE_FILE). Not yet on CPUs: both calls return
 * HCCL_E_NOT_SUPPORT, saying so; use HcclGetRootInfo + HcclCommInitRootInfo.
 */
#include "hccl_internal.h"

HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank, HcclCommConfig *config,
                                         HcclComm *comm) {
    (void)config;
    if (!clusterInfo || !comm) return hccl__fail(HCCL_E_PTR, "HcclCommInitClusterInfo: clusterInfo and comm must be non-NULL");
    *comm = NULL;
    return hccl__fail(HCCL_E_NOT_SUPPORT,
                      "HcclCommInitClusterInfo(%s, rank %u): rank tables are not supported on CPUs yet; "
                      "use HcclGetRootInfo and HcclCommInitRootInfo", clusterInfo, rank);
}

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
    return HcclCommInitClusterInfoConfig(clusterInfo, rank, NULL, comm);
}
