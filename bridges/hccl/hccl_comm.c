/*
 * hccl_comm.c — HCCL's communicator calls over ddpc's public API (libhccl):
 * root info, creation (root info, all devices of a process, a
 * sub-communicator), queries, errors, destruction; and the translations of
 * types, reductions and statuses that hccl_coll.c uses.
 *
 * A root info carries a ddpc unique id; every rank's ddpc_comm_create_rank
 * with it makes the communicator. What this file leaves to others: the
 * collectives (hccl_coll.c), streams (acl_rt.c), and every algorithm and
 * byte on the wire (ddpc).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acl_internal.h"
#include "hccl_internal.h"

/* ------------------------------------------------------------ translations */

HcclResult hccl__fail(HcclResult r, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ddpc__acl_set_error(msg);
    return r;
}

HcclResult hccl__dtype(HcclDataType t, ddpc_dtype *out) {
    switch (t) {
    case HCCL_DATA_TYPE_INT8: *out = DDPC_INT8; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_INT16: *out = DDPC_INT16; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_INT32: *out = DDPC_INT32; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_FP16: *out = DDPC_FLOAT16; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_FP32: *out = DDPC_FLOAT32; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_INT64: *out = DDPC_INT64; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_UINT64: *out = DDPC_UINT64; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_UINT8: *out = DDPC_UINT8; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_UINT16: *out = DDPC_UINT16; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_UINT32: *out = DDPC_UINT32; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_FP64: *out = DDPC_FLOAT64; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_BFP16: *out = DDPC_BFLOAT16; return HCCL_SUCCESS;
    case HCCL_DATA_TYPE_INT128:
    case HCCL_DATA_TYPE_HIF8:
    case HCCL_DATA_TYPE_FP8E4M3:
    case HCCL_DATA_TYPE_FP8E5M2:
    case HCCL_DATA_TYPE_FP8E8M0:
        return hccl__fail(HCCL_E_NOT_SUPPORT, "data type %d is not supported on CPUs", (int)t);
    default: return hccl__fail(HCCL_E_PARA, "data type %d is not an HcclDataType", (int)t);
    }
}

HcclResult hccl__op(HcclReduceOp op, ddpc_op *out) {
    switch (op) {
    case HCCL_REDUCE_SUM: *out = DDPC_SUM; return HCCL_SUCCESS;
    case HCCL_REDUCE_PROD: *out = DDPC_PROD; return HCCL_SUCCESS;
    case HCCL_REDUCE_MAX: *out = DDPC_MAX; return HCCL_SUCCESS;
    case HCCL_REDUCE_MIN: *out = DDPC_MIN; return HCCL_SUCCESS;
    default: return hccl__fail(HCCL_E_PARA, "reduction %d is not an HcclReduceOp", (int)op);
    }
}

HcclResult hccl__result(ddpc_status s) {
    switch (s) {
    case DDPC_OK: return HCCL_SUCCESS;
    case DDPC_ERR_INVALID_ARG: return HCCL_E_PARA;
    case DDPC_ERR_ENV: return HCCL_E_PARA; /* HCCL checks its variables as parameters */
    case DDPC_ERR_SYSTEM: return HCCL_E_SYSCALL;
    case DDPC_ERR_NOMEM: return HCCL_E_OOM;
    case DDPC_ERR_TIMEOUT: return HCCL_E_TIMEOUT;
    case DDPC_ERR_PEER_LOST: return HCCL_E_TCP_TRANSFER;
    case DDPC_ERR_MISMATCH: return HCCL_E_PARA; /* HCCL's check of parameters across ranks */
    case DDPC_ERR_ABORTED: return HCCL_E_UNAVAIL;
    case DDPC_ERR_PROTOCOL: return HCCL_E_TCP_TRANSFER;
    case DDPC_ERR_DENIED: return HCCL_E_TCP_TRANSFER; /* a connection refused our job token */
    case DDPC_ERR_NOT_FOUND: return HCCL_E_NOT_FOUND;
    case DDPC_ERR_IO: return HCCL_E_OPEN_FILE_FAILURE;
    default: return HCCL_E_INTERNAL;
    }
}

const char *HcclGetErrorString(HcclResult code) {
    switch (code) {
    case HCCL_SUCCESS: return "success";
    case HCCL_E_PARA: return "parameter error: an argument is invalid, or differs between ranks";
    case HCCL_E_PTR: return "empty pointer: a pointer argument is NULL";
    case HCCL_E_MEMORY: return "memory error";
    case HCCL_E_INTERNAL: return "internal error";
    case HCCL_E_NOT_SUPPORT: return "feature not supported";
    case HCCL_E_NOT_FOUND: return "specific resource not found";
    case HCCL_E_UNAVAIL: return "resource unavailable: the communicator was aborted";
    case HCCL_E_SYSCALL: return "a system call failed";
    case HCCL_E_TIMEOUT: return "timeout: peers did not answer in time";
    case HCCL_E_OPEN_FILE_FAILURE: return "a file could not be opened or read";
    case HCCL_E_TCP_CONNECT: return "TCP connection failed";
    case HCCL_E_ROCE_CONNECT: return "RoCE connection failed";
    case HCCL_E_TCP_TRANSFER:
        return "TCP transfer failed: a peer closed its connection or sent garbage";
    case HCCL_E_ROCE_TRANSFER: return "RoCE transfer failed";
    case HCCL_E_RUNTIME: return "a runtime (ACL) call failed";
    case HCCL_E_DRV: return "a driver call failed";
    case HCCL_E_PROFILING: return "a profiling call failed";
    case HCCL_E_CCE: return "a CCE call failed";
    case HCCL_E_NETWORK: return "a network call failed";
    case HCCL_E_AGAIN: return "try again";
    case HCCL_E_REMOTE: return "error reported by the remote side";
    case HCCL_E_SUSPENDING: return "the communicator is suspending";
    case HCCL_E_OPRETRY_FAIL: return "retrying the operation failed";
    case HCCL_E_OOM: return "out of memory";
    case HCCL_E_IN_STATUS: return "the error is in the status";
    default: return "unknown HcclResult";
    }
}

/* ------------------------------------------------------------ communicators */

hccl_comm *hccl__comm(HcclComm comm) {
    hccl_comm *hc = comm;
    return hc && hc->magic == HCCL_COMM_MAGIC ? hc : NULL;
}

void hccl__async_error(hccl_comm *hc, HcclResult r) {
    pthread_mutex_lock(&hc->mu);
    if (hc->async_err == HCCL_SUCCESS) hc->async_err = r;
    pthread_mutex_unlock(&hc->mu);
}

HcclResult hccl__wrap(ddpc_comm *c, const char *name, const HcclCommConfig *config, HcclComm *out) {
    hccl_comm *hc = calloc(1, sizeof *hc);
    if (!hc) {
        ddpc_comm_destroy(c);
        return hccl__fail(HCCL_E_OOM, "out of memory for a communicator");
    }
    hc->magic = HCCL_COMM_MAGIC;
    hc->c = c;
    hc->rank = (uint32_t)ddpc_comm_rank(c);
    hc->size = (uint32_t)ddpc_comm_size(c);
    snprintf(hc->name, sizeof hc->name, "%s", name);
    hc->exec_timeout_s = -1;
    uint64_t gib = config && config->hcclSymWinMaxMemSizePerRank
                       ? config->hcclSymWinMaxMemSizePerRank
                       : HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
    hc->symwin_max = gib > (UINT64_MAX >> 30) ? UINT64_MAX : gib << 30;
    if (config && config->hcclExecTimeOut != HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET &&
        config->hcclExecTimeOut >= 0)
        hc->exec_timeout_s =
            config->hcclExecTimeOut ? config->hcclExecTimeOut : 1e9; /* 0: no limit */
    pthread_mutex_init(&hc->mu, NULL);
    pthread_cond_init(&hc->cv, NULL);
    *out = hc;
    return HCCL_SUCCESS;
}

/* The root info's layout inside HcclRootInfo.internal. */
typedef struct root_body {
    char magic[8];    /* ROOT_MAGIC */
    uint32_t version; /* ROOT_VERSION */
    uint32_t reserved;
    ddpc_unique_id id; /* ddpc_get_unique_id's */
} root_body;
#define ROOT_MAGIC          "ddpcHCCL"
#define HCCL_ROOT_PORT_BASE 60000 /* HCCL_IF_BASE_PORT's default */
#define ROOT_VERSION        1u
_Static_assert(sizeof(root_body) <= HCCL_ROOT_INFO_BYTES, "root info too small");

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
    if (!rootInfo) return hccl__fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is NULL");
    root_body b;
    memset(&b, 0, sizeof b);
    memcpy(b.magic, ROOT_MAGIC, sizeof b.magic);
    b.version = ROOT_VERSION;
    /* the root's store listens as HCCL's does: on one of the 32 ports from
     * HCCL_IF_BASE_PORT, else from 60000 (HCCL_HOST_SOCKET_PORT_RANGE wins) */
    ddpc_comm_options opt = ddpc_comm_options_default();
    opt.id_port_base = HCCL_ROOT_PORT_BASE;
    ddpc_status s = ddpc_get_unique_id(&opt, &b.id);
    if (s != DDPC_OK)
        return hccl__fail(hccl__result(s), "HcclGetRootInfo: %s (%s)", ddpc_status_str(s),
                          ddpc_last_error());
    memset(rootInfo, 0, sizeof *rootInfo);
    memcpy(rootInfo->internal, &b, sizeof b);
    return HCCL_SUCCESS;
}

/* A name for a communicator made from id: its bytes' FNV-1a hash. */
static void id_name(const ddpc_unique_id *id, char name[COMM_NAME_MAX_LENGTH]) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof id->internal; i++)
        h = (h ^ (unsigned char)id->internal[i]) * 1099511628211ull;
    snprintf(name, COMM_NAME_MAX_LENGTH, "hccl_%016llx", (unsigned long long)h);
}

/* config's name when it has one; checks config was initialised. */
static HcclResult config_name(const HcclCommConfig *config, const char *what,
                              char name[COMM_NAME_MAX_LENGTH]) {
    if (!config) return HCCL_SUCCESS;
    uint32_t magic;
    memcpy(&magic, config->reserved + sizeof(size_t), sizeof magic);
    if (magic != HCCL_COMM_CONFIG_MAGIC_WORD)
        return hccl__fail(HCCL_E_PARA, "%s: config was not set up by HcclCommConfigInit", what);
    if (config->hcclCommName[0])
        snprintf(name, COMM_NAME_MAX_LENGTH, "%.*s", (int)COMM_NAME_MAX_LENGTH - 1,
                 config->hcclCommName);
    return HCCL_SUCCESS;
}

/* Creates rank's communicator of n ranks from id. */
static HcclResult init_from_id(uint32_t n, const ddpc_unique_id *id, uint32_t rank,
                               const char *name, const HcclCommConfig *config, const char *what,
                               HcclComm *comm) {
    ddpc_comm *c = NULL;
    ddpc_status s = ddpc_comm_create_rank(id, (int)rank, (int)n, NULL, &c);
    if (s != DDPC_OK)
        return hccl__fail(hccl__result(s), "%s: rank %u of %u: %s (%s)", what, rank, n,
                          ddpc_status_str(s), ddpc_last_error());
    return hccl__wrap(c, name, config, comm);
}

HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                      const HcclCommConfig *config, HcclComm *comm) {
    const char *what = config ? "HcclCommInitRootInfoConfig" : "HcclCommInitRootInfo";
    if (!rootInfo || !comm)
        return hccl__fail(HCCL_E_PTR, "%s: rootInfo and comm must be non-NULL", what);
    if (nRanks == 0 || rank >= nRanks || nRanks > (1u << 20))
        return hccl__fail(HCCL_E_PARA, "%s: rank %u of nRanks %u is out of range", what, rank,
                          nRanks);
    *comm = NULL;
    root_body b;
    memcpy(&b, rootInfo->internal, sizeof b);
    if (memcmp(b.magic, ROOT_MAGIC, sizeof b.magic) != 0 || b.version != ROOT_VERSION)
        return hccl__fail(HCCL_E_PARA,
                          "%s: the root info was not made by HcclGetRootInfo (of ddpc's libhccl)",
                          what);
    char name[COMM_NAME_MAX_LENGTH];
    id_name(&b.id, name);
    HcclResult r = config_name(config, what, name);
    return r != HCCL_SUCCESS ? r : init_from_id(nRanks, &b.id, rank, name, config, what, comm);
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                HcclComm *comm) {
    return HcclCommInitRootInfoConfig(nRanks, rootInfo, rank, NULL, comm);
}

/* HcclCommInitAll's ranks: one thread each, since every rank's
 * ddpc_comm_create_rank waits for all the others. */
typedef struct init_all_arg {
    uint32_t n, rank;
    const ddpc_unique_id *id;
    const char *name;
    HcclComm comm;
    HcclResult r;
} init_all_arg;

static void *init_all_main(void *p) {
    init_all_arg *a = p;
    a->r = init_from_id(a->n, a->id, a->rank, a->name, NULL, "HcclCommInitAll", &a->comm);
    return NULL;
}

HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms) {
    if (!devices || !comms)
        return hccl__fail(HCCL_E_PTR, "HcclCommInitAll: devices and comms must be non-NULL");
    uint32_t count = 0;
    aclrtGetDeviceCount(&count);
    if (ndev == 0 || ndev > count)
        return hccl__fail(HCCL_E_PARA,
                          "HcclCommInitAll: ndev %u is not in 1..%u (aclrtGetDeviceCount)", ndev,
                          count);
    for (uint32_t i = 0; i < ndev; i++) {
        comms[i] = NULL;
        if (devices[i] < 0 || (uint32_t)devices[i] >= count)
            return hccl__fail(HCCL_E_PARA, "HcclCommInitAll: devices[%u] = %d is not in 0..%u", i,
                              devices[i], count - 1);
        for (uint32_t j = 0; j < i; j++)
            if (devices[j] == devices[i])
                return hccl__fail(HCCL_E_PARA, "HcclCommInitAll: device %d is listed twice",
                                  devices[i]);
    }
    ddpc_unique_id id;
    ddpc_status s = ddpc_get_unique_id(NULL, &id);
    if (s != DDPC_OK)
        return hccl__fail(hccl__result(s), "HcclCommInitAll: %s (%s)", ddpc_status_str(s),
                          ddpc_last_error());
    char name[COMM_NAME_MAX_LENGTH];
    id_name(&id, name);
    init_all_arg *args = calloc(ndev, sizeof *args);
    pthread_t *th = calloc(ndev, sizeof *th);
    uint32_t started = 0;
    HcclResult r =
        args && th ? HCCL_SUCCESS : hccl__fail(HCCL_E_OOM, "HcclCommInitAll: out of memory");
    for (uint32_t i = 0; r == HCCL_SUCCESS && i < ndev; i++) {
        args[i] = (init_all_arg){ ndev, i, &id, name, NULL, HCCL_SUCCESS };
        if (pthread_create(&th[i], NULL, init_all_main, &args[i]) != 0)
            r = hccl__fail(HCCL_E_SYSCALL, "HcclCommInitAll: pthread_create failed");
        else
            started++;
    }
    /* A thread that could not start leaves the others to time out
     * (HCCL_CONNECT_TIMEOUT) rather than wait forever. */
    for (uint32_t i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (r == HCCL_SUCCESS) r = args[i].r;
    }
    for (uint32_t i = 0; i < started; i++) {
        if (r == HCCL_SUCCESS)
            comms[i] = args[i].comm;
        else
            HcclCommDestroy(args[i].comm);
    }
    free(args);
    free(th);
    return r;
}

/* How the members of a sub-communicator meet: a url when the parent came
 * from a rank table (the first member hosts the store on its server's
 * address, which routes from every member's host), else a unique id
 * (ddpc_get_unique_id: its address follows HCCL_IF_IP, HCCL_SOCKET_IFNAME
 * or MASTER_ADDR). */
typedef struct sub_invite {
    char url[288]; /* "" when id is the way */
    ddpc_unique_id id;
} sub_invite;

/* A free TCP port on this host right now (0 when none): the first member's
 * store takes it a moment later. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t len = sizeof a;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static ddpc_status invite(hccl_comm *hc, sub_invite *inv) {
    memset(inv, 0, sizeof *inv);
    if (!hc->addrs) return ddpc_get_unique_id(NULL, &inv->id);
    int port = free_port();
    if (!port) return DDPC_ERR_SYSTEM;
    snprintf(inv->url, sizeof inv->url, "tcp://%s:%d", hc->addrs[hc->rank].host, port);
    return DDPC_OK;
}

HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                   uint64_t subCommId, uint32_t subCommRankId,
                                   HcclCommConfig *config, HcclComm *subComm) {
    const char *what = "HcclCreateSubCommConfig";
    if (!comm || !rankIds || !subComm)
        return hccl__fail(HCCL_E_PTR, "%s: comm, rankIds and subComm must be non-NULL", what);
    hccl_comm *hc = hccl__comm(*comm);
    if (!hc) return hccl__fail(HCCL_E_PTR, "%s: *comm is not a live communicator", what);
    *subComm = NULL;
    if (rankNum == 0 || rankNum > hc->size || subCommRankId >= rankNum)
        return hccl__fail(HCCL_E_PARA,
                          "%s: subCommRankId %u of rankNum %u (the communicator has %u ranks)",
                          what, subCommRankId, rankNum, hc->size);
    for (uint32_t i = 0; i < rankNum; i++)
        if (rankIds[i] >= hc->size)
            return hccl__fail(HCCL_E_PARA, "%s: rankIds[%u] = %u is not a rank of the communicator",
                              what, i, rankIds[i]);
    if (rankIds[subCommRankId] != hc->rank)
        return hccl__fail(HCCL_E_PARA, "%s: rankIds[subCommRankId %u] is %u, not this rank (%u)",
                          what, subCommRankId, rankIds[subCommRankId], hc->rank);
    char name[COMM_NAME_MAX_LENGTH];
    snprintf(name, sizeof name, "%.100s_sub%llu", hc->name, (unsigned long long)subCommId);
    HcclResult r = config_name(config, what, name);
    if (r != HCCL_SUCCESS) return r;
    /* Only the members call: the first makes an invitation and sends it to
     * the others over the parent's point-to-point channels, which leave the
     * parent's collective order alone. */
    sub_invite inv;
    ddpc_status s = DDPC_OK;
    if (subCommRankId == 0) {
        s = invite(hc, &inv);
        for (uint32_t i = 1; s == DDPC_OK && i < rankNum; i++)
            s = ddpc_send(hc->c, &inv, sizeof inv, DDPC_UINT8, (int)rankIds[i]);
    } else {
        s = ddpc_recv(hc->c, &inv, sizeof inv, DDPC_UINT8, (int)rankIds[0]);
    }
    if (s != DDPC_OK)
        return hccl__fail(hccl__result(s), "%s: handing out the sub-communicator's id: %s (%s)",
                          what, ddpc_status_str(s), ddpc_comm_last_error(hc->c));
    inv.url[sizeof inv.url - 1] = '\0';
    if (!inv.url[0])
        return init_from_id(rankNum, &inv.id, subCommRankId, name, config, what, subComm);
    ddpc_comm *c = NULL;
    s = ddpc_comm_create_url(inv.url, (int)subCommRankId, (int)rankNum, &c);
    if (s != DDPC_OK)
        return hccl__fail(hccl__result(s), "%s: rank %u of %u, store %s: %s (%s)", what,
                          subCommRankId, rankNum, inv.url, ddpc_status_str(s), ddpc_last_error());
    r = hccl__wrap(c, name, config, subComm);
    hccl_comm *sub = r == HCCL_SUCCESS ? *subComm : NULL;
    if (sub && (sub->addrs = calloc(rankNum, sizeof *sub->addrs)))
        for (uint32_t i = 0; i < rankNum; i++) sub->addrs[i] = hc->addrs[rankIds[i]];
    return r;
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize) {
    hccl_comm *hc = hccl__comm(comm);
    if (!hc || !rankSize)
        return hccl__fail(HCCL_E_PTR, "HcclGetRankSize: comm or rankSize is NULL");
    *rankSize = hc->size;
    return HCCL_SUCCESS;
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank) {
    hccl_comm *hc = hccl__comm(comm);
    if (!hc || !rank) return hccl__fail(HCCL_E_PTR, "HcclGetRankId: comm or rank is NULL");
    *rank = hc->rank;
    return HCCL_SUCCESS;
}

HcclResult HcclGetCommName(HcclComm comm, char *commName) {
    hccl_comm *hc = hccl__comm(comm);
    if (!hc || !commName)
        return hccl__fail(HCCL_E_PTR, "HcclGetCommName: comm or commName is NULL");
    memcpy(commName, hc->name, COMM_NAME_MAX_LENGTH);
    return HCCL_SUCCESS;
}

HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError) {
    hccl_comm *hc = hccl__comm(comm);
    if (!hc || !asyncError)
        return hccl__fail(HCCL_E_PTR, "HcclGetCommAsyncError: comm or asyncError is NULL");
    pthread_mutex_lock(&hc->mu);
    *asyncError = hc->async_err;
    pthread_mutex_unlock(&hc->mu);
    return HCCL_SUCCESS;
}

static int32_t g_deterministic; /* HcclSetConfig's HCCL_DETERMINISTIC (atomic) */

HcclResult HcclSetConfig(HcclConfig config, HcclConfigValue configValue) {
    if (config != HCCL_DETERMINISTIC)
        return hccl__fail(HCCL_E_PARA, "HcclSetConfig: config %d is not HCCL_DETERMINISTIC",
                          (int)config);
    if (configValue.value < 0 || configValue.value > 2)
        return hccl__fail(HCCL_E_PARA, "HcclSetConfig: HCCL_DETERMINISTIC %d is not 0, 1 or 2",
                          configValue.value);
    __atomic_store_n(&g_deterministic, configValue.value, __ATOMIC_RELAXED);
    return HCCL_SUCCESS;
}

HcclResult HcclGetConfig(HcclConfig config, HcclConfigValue *configValue) {
    if (!configValue) return hccl__fail(HCCL_E_PTR, "HcclGetConfig: configValue is NULL");
    if (config != HCCL_DETERMINISTIC)
        return hccl__fail(HCCL_E_PARA, "HcclGetConfig: config %d is not HCCL_DETERMINISTIC",
                          (int)config);
    configValue->value = __atomic_load_n(&g_deterministic, __ATOMIC_RELAXED);
    return HCCL_SUCCESS;
}

uint32_t HcclGetCommConfigCapability(void) { return HCCL_COMM_CONFIG_EXEC_TIMEOUT + 1; }

HcclResult HcclCommDestroy(HcclComm comm) {
    if (!comm) return HCCL_SUCCESS; /* as a NULL free */
    hccl_comm *hc = hccl__comm(comm);
    if (!hc) return hccl__fail(HCCL_E_PTR, "HcclCommDestroy: comm is not a live communicator");
    /* The streams' tasks still hold hc: let them run first (each is bounded
     * by the exec timeout). */
    pthread_mutex_lock(&hc->mu);
    while (hc->pending > 0) pthread_cond_wait(&hc->cv, &hc->mu);
    pthread_mutex_unlock(&hc->mu);
    hc->magic = 0;
    hccl__mem_forget(hc);
    ddpc_status s = ddpc_comm_destroy(hc->c);
    pthread_cond_destroy(&hc->cv);
    pthread_mutex_destroy(&hc->mu);
    free(hc->addrs);
    free(hc);
    return s == DDPC_OK ? HCCL_SUCCESS
                        : hccl__fail(hccl__result(s), "HcclCommDestroy: %s (%s)",
                                     ddpc_status_str(s), ddpc_last_error());
}
