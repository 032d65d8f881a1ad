/*
 * hccl_ranktable.c — HcclCommInitClusterInfo(+Config): a communicator from a
 * rank table file (what RANK_TABLE_FILE names), versions 1.0 and 1.2 as
 * HCCL documents them:
 *
 *   {"version": "1.0", "status": "completed", "server_count": "2",
 *    "server_list": [{"server_id": "10.0.0.1", "host_ip": "10.0.0.1",
 *                     "device": [{"device_id": "0", "device_ip": "192.168.1.1",
 *                                 "rank_id": "0"}, ...]}, ...]}
 *
 * Every value is a string; host_ip (1.2) and device_ip are optional here
 * (devices have no IP of their own on CPUs); the rank_ids are 0..n-1, each
 * once, contiguous on each server. Every malformed case is HCCL_E_PARA with
 * a text that starts as HCCL's EI0004 ("the rank table is invalid") and
 * names the file and the field.
 *
 * On CPUs the table gives the number of ranks and rank 0's server: rank 0
 * hosts the rendezvous store at that server's host_ip (else server_id), on
 * port DDPC_RANK_TABLE_PORT (default 60000), and ddpc's bootstrap does the
 * rest (ddpc_comm_create_url). Parsing is cJSON's (libcjson-dev); a build
 * without it returns HCCL_E_NOT_SUPPORT saying so.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hccl_internal.h"

#define DEFAULT_PORT 60000

#ifdef DDPC_HAVE_CJSON
#include <cJSON.h>

/* What init needs of a table. */
typedef struct rank_table {
    uint32_t nranks;
    char root_addr[256]; /* rank 0's server: host_ip, else server_id */
    hccl_addr *addrs;    /* each rank's server, the same way (owned; nranks) */
} rank_table;

/* Fails with EI0004 naming path and field. */
#define BAD(field, ...) bad(path, field, __VA_ARGS__)
__attribute__((format(printf, 3, 4))) static HcclResult bad(const char *path, const char *field,
                                                            const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return hccl__fail(HCCL_E_PARA, "EI0004: the rank table %s is invalid: %s: %s", path, field,
                      why);
}

/* obj's member name as a string (required or not); *out NULL when absent. */
static HcclResult str_field(const char *path, const cJSON *obj, const char *name, const char *field,
                            int required, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    *out = NULL;
    if (!v) return required ? BAD(field, "missing") : HCCL_SUCCESS;
    if (!cJSON_IsString(v) || !v->valuestring)
        return BAD(field, "must be a string (every value of a rank table is, e.g. \"0\")");
    *out = v->valuestring;
    return HCCL_SUCCESS;
}

/* A required string field holding a decimal integer in 0..max. */
static HcclResult uint_field(const char *path, const cJSON *obj, const char *name,
                             const char *field, long max, long *out) {
    const char *s;
    HcclResult r = str_field(path, obj, name, field, 1, &s);
    if (r != HCCL_SUCCESS) return r;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > max)
        return BAD(field, "\"%s\" is not a whole number in 0..%ld", s, max);
    *out = v;
    return HCCL_SUCCESS;
}

/* Checks the servers' devices and fills rt. */
static HcclResult read_servers(const char *path, const cJSON *list, rank_table *rt) {
    int nserv = cJSON_GetArraySize(list);
    long total = 0;
    for (int i = 0; i < nserv; i++) {
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, i), "device");
        total += cJSON_IsArray(dev) ? cJSON_GetArraySize(dev) : 0;
    }
    int *seen = calloc(total ? (size_t)total : 1, sizeof *seen);
    rt->addrs = calloc(total ? (size_t)total : 1, sizeof *rt->addrs);
    if (!seen || !rt->addrs) {
        free(seen);
        return hccl__fail(HCCL_E_OOM, "reading the rank table %s: out of memory", path);
    }
    HcclResult r = HCCL_SUCCESS;
    char field[128];
    for (int i = 0; i < nserv && r == HCCL_SUCCESS; i++) {
        const cJSON *srv = cJSON_GetArrayItem(list, i);
        const char *server_id, *host_ip;
        snprintf(field, sizeof field, "server_list[%d]", i);
        if (!cJSON_IsObject(srv)) {
            r = BAD(field, "must be an object");
            break;
        }
        snprintf(field, sizeof field, "server_list[%d].server_id", i);
        if ((r = str_field(path, srv, "server_id", field, 1, &server_id)) != HCCL_SUCCESS) break;
        snprintf(field, sizeof field, "server_list[%d].host_ip", i);
        if ((r = str_field(path, srv, "host_ip", field, 0, &host_ip)) != HCCL_SUCCESS) break;
        const cJSON *devs = cJSON_GetObjectItemCaseSensitive(srv, "device");
        snprintf(field, sizeof field, "server_list[%d].device", i);
        if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) == 0) {
            r = BAD(field, devs ? "must be a non-empty array" : "missing");
            break;
        }
        long lo = total, hi = -1;
        int ndev = cJSON_GetArraySize(devs);
        for (int j = 0; j < ndev && r == HCCL_SUCCESS; j++) {
            const cJSON *d = cJSON_GetArrayItem(devs, j);
            const char *ip;
            long id, rank;
            snprintf(field, sizeof field, "server_list[%d].device[%d]", i, j);
            if (!cJSON_IsObject(d)) {
                r = BAD(field, "must be an object");
                break;
            }
            snprintf(field, sizeof field, "server_list[%d].device[%d].device_id", i, j);
            if ((r = uint_field(path, d, "device_id", field, 1L << 20, &id)) != HCCL_SUCCESS) break;
            snprintf(field, sizeof field, "server_list[%d].device[%d].device_ip", i, j);
            if ((r = str_field(path, d, "device_ip", field, 0, &ip)) != HCCL_SUCCESS) break;
            snprintf(field, sizeof field, "server_list[%d].device[%d].rank_id", i, j);
            if ((r = uint_field(path, d, "rank_id", field, total - 1, &rank)) != HCCL_SUCCESS)
                break;
            if (seen[rank]++) {
                r = BAD(field, "rank %ld is listed twice", rank);
                break;
            }
            if (rank < lo) lo = rank;
            if (rank > hi) hi = rank;
            snprintf(rt->addrs[rank].host, sizeof rt->addrs[rank].host, "%s",
                     host_ip ? host_ip : server_id);
            if (rank == 0) snprintf(rt->root_addr, sizeof rt->root_addr, "%s", rt->addrs[0].host);
        }
        if (r == HCCL_SUCCESS && hi - lo + 1 != ndev) {
            snprintf(field, sizeof field, "server_list[%d].device[].rank_id", i);
            r = BAD(field,
                    "the ranks of one server must be contiguous (here %ld..%ld for %d devices)", lo,
                    hi, ndev);
        }
    }
    free(seen);
    rt->nranks = (uint32_t)total;
    return r;
}

/* Reads and checks path. */
static HcclResult read_table(const char *path, rank_table *rt) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return hccl__fail(HCCL_E_OPEN_FILE_FAILURE,
                          "EI0004: the rank table %s cannot be opened: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            char *t = realloc(text, cap = cap * 2 + 8192);
            if (!t) {
                free(text);
                fclose(f);
                return hccl__fail(HCCL_E_OOM, "reading the rank table %s: out of memory", path);
            }
            text = t;
        }
        size_t got = fread(text + len, 1, 4096, f);
        len += got;
        if (got < 4096) break;
    }
    int err = ferror(f);
    fclose(f);
    text[len] = '\0';
    if (err) {
        free(text);
        return hccl__fail(HCCL_E_OPEN_FILE_FAILURE, "EI0004: the rank table %s cannot be read",
                          path);
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    HcclResult r = HCCL_SUCCESS;
    const char *version, *status, *count;
    if (!root) {
        r = BAD("(the whole file)", "not valid JSON near byte %ld", end ? (long)(end - text) : 0L);
    } else if (!cJSON_IsObject(root)) {
        r = BAD("(the whole file)", "must be a JSON object");
    } else if ((r = str_field(path, root, "version", "version", 1, &version)) != HCCL_SUCCESS) {
    } else if (strcmp(version, "1.0") != 0 && strcmp(version, "1.2") != 0) {
        r = BAD("version", "\"%s\" is not \"1.0\" or \"1.2\"", version);
    } else if ((r = str_field(path, root, "status", "status", 1, &status)) != HCCL_SUCCESS) {
    } else if (strcmp(status, "completed") != 0) {
        r = BAD("status", "\"%s\": the table is not \"completed\"", status);
    } else {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "server_list");
        if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
            r = BAD("server_list", list ? "must be a non-empty array" : "missing");
        else if ((r = str_field(path, root, "server_count", "server_count", 0, &count)) ==
                     HCCL_SUCCESS &&
                 count && strtol(count, NULL, 10) != cJSON_GetArraySize(list))
            r = BAD("server_count", "\"%s\" but server_list has %d servers", count,
                    cJSON_GetArraySize(list));
        else if (r == HCCL_SUCCESS)
            r = read_servers(path, list, rt);
    }
    cJSON_Delete(root);
    free(text);
    return r;
}

HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                         HcclCommConfig *config, HcclComm *comm) {
    const char *what = config ? "HcclCommInitClusterInfoConfig" : "HcclCommInitClusterInfo";
    if (!clusterInfo || !comm)
        return hccl__fail(HCCL_E_PTR, "%s: clusterInfo and comm must be non-NULL", what);
    rank_table rt = { 0 };
    HcclResult r = read_table(clusterInfo, &rt);
    if (r == HCCL_SUCCESS && rank >= rt.nranks)
        r = hccl__fail(HCCL_E_PARA, "%s: rank %u is not in the rank table %s (ranks 0..%u)", what,
                       rank, clusterInfo, rt.nranks - 1);
    if (r != HCCL_SUCCESS) {
        free(rt.addrs);
        return r;
    }
    const char *p = getenv("DDPC_RANK_TABLE_PORT");
    long port = p && *p ? strtol(p, NULL, 10) : DEFAULT_PORT;
    if (port <= 0 || port > 65535) {
        free(rt.addrs);
        return hccl__fail(HCCL_E_PARA, "%s: DDPC_RANK_TABLE_PORT=%s is not a port", what, p);
    }
    char url[320], name[COMM_NAME_MAX_LENGTH] = "hccl_world_group"; /* HCCL's name for it */
    if (config && config->hcclCommName[0])
        snprintf(name, sizeof name, "%.*s", (int)COMM_NAME_MAX_LENGTH - 1, config->hcclCommName);
    snprintf(url, sizeof url, "tcp://%s:%ld", rt.root_addr, port);
    *comm = NULL;
    ddpc_comm *c = NULL;
    ddpc_status s = ddpc_comm_create_url(&c, url, (int)rank, (int)rt.nranks);
    if (s != DDPC_OK) {
        free(rt.addrs);
        return hccl__fail(hccl__result(s), "%s: rank %u of %u, store %s: %s (%s)", what, rank,
                          rt.nranks, url, ddpc_status_str(s), ddpc_last_error());
    }
    r = hccl__wrap(c, name, config, comm);
    if (r == HCCL_SUCCESS)
        ((hccl_comm *)*comm)->addrs = rt.addrs; /* for its sub-communicators */
    else
        free(rt.addrs);
    return r;
}

#else /* no cJSON */

HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank,
                                         HcclCommConfig *config, HcclComm *comm) {
    (void)config, (void)rank;
    return hccl__fail(
        HCCL_E_NOT_SUPPORT,
        "HcclCommInitClusterInfo(%s): this libhccl was built without libcjson-dev, so it reads no "
        "rank tables (apt-get install libcjson-dev, or bash scripts/setup.sh, and rebuild); "
        "HcclGetRootInfo + HcclCommInitRootInfo work without",
        clusterInfo ? clusterInfo : "NULL");
}

#endif

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
    return HcclCommInitClusterInfoConfig(clusterInfo, rank, NULL, comm);
}
