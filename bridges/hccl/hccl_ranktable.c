/*
 * hccl_ranktable.c — HcclCommInitClusterInfo(+Config): a communicator from a
 * rank table file (what RANK_TABLE_FILE names). ddpc reads the table and
 * makes the communicator (ddpc_rank_table_load, ddpc_comm_create_rank_table:
 * versions 1.0 and 1.2, every malformed case an EI0004 text naming the
 * field); this file gives its answers HCCL's codes: a malformed table is
 * HCCL_E_PARA, a file that cannot be opened HCCL_E_OPEN_FILE_FAILURE. Each
 * rank's server address is kept for the communicator's sub-communicators.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hccl_internal.h"

/* A failed rank table call's HcclResult, with ddpc's text. */
static HcclResult table_fail(ddpc_status s, const char *what) {
    HcclResult r = s == DDPC_ERR_IO                                  ? HCCL_E_PARA
                   : s == DDPC_ERR_NOT_FOUND || s == DDPC_ERR_SYSTEM ? HCCL_E_OPEN_FILE_FAILURE
                                                                     : hccl__result(s);
    return hccl__fail(r, "%s: %s", what, ddpc_last_error());
}

HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                         HcclCommConfig *config, HcclComm *comm) {
    const char *what = config ? "HcclCommInitClusterInfoConfig" : "HcclCommInitClusterInfo";
    if (!clusterInfo || !comm)
        return hccl__fail(HCCL_E_PTR, "%s: clusterInfo and comm must be non-NULL", what);
    *comm = NULL;
    ddpc_rank_table *t = NULL;
    ddpc_status s = ddpc_rank_table_load(clusterInfo, &t);
    if (s != DDPC_OK) return table_fail(s, what);
    uint32_t n = (uint32_t)ddpc_rank_table_size(t);
    hccl_addr *addrs = calloc(n, sizeof *addrs);
    if (!addrs) {
        ddpc_rank_table_destroy(t);
        return hccl__fail(HCCL_E_OOM, "%s: out of memory", what);
    }
    for (uint32_t r = 0; r < n; r++) {
        ddpc_rank_table_server srv;
        ddpc_rank_table_server_at(t, ddpc_rank_table_server_of(t, (int)r), &srv);
        snprintf(addrs[r].host, sizeof addrs[r].host, "%s", srv.host);
    }
    char name[COMM_NAME_MAX_LENGTH] = "hccl_world_group"; /* HCCL's name for it */
    if (config && config->hcclCommName[0])
        snprintf(name, sizeof name, "%.*s", (int)COMM_NAME_MAX_LENGTH - 1, config->hcclCommName);
    ddpc_comm *c = NULL;
    HcclResult r = HCCL_SUCCESS;
    if (rank >= n)
        r = hccl__fail(HCCL_E_PARA, "%s: rank %u is not in the rank table %s (ranks 0..%u)", what,
                       rank, clusterInfo, n - 1);
    else if ((s = ddpc_comm_create_rank_table(t, (int)rank, NULL, &c)) != DDPC_OK)
        r = hccl__fail(hccl__result(s), "%s: rank %u of %u: %s (%s)", what, rank, n,
                       ddpc_status_str(s), ddpc_last_error());
    ddpc_rank_table_destroy(t);
    if (r == HCCL_SUCCESS) r = hccl__wrap(c, name, config, comm);
    if (r == HCCL_SUCCESS)
        ((hccl_comm *)*comm)->addrs = addrs; /* for its sub-communicators */
    else
        free(addrs);
    return r;
}

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
    return HcclCommInitClusterInfoConfig(clusterInfo, rank, NULL, comm);
}
