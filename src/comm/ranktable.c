/*
 * ranktable.c — rank table files (HCCL's JSON description of a job: what
 * RANK_TABLE_FILE names and HcclCommInitClusterInfo reads), versions 1.0
 * and 1.2 as HCCL documents them:
 *
 *   {"version": "1.0", "status": "completed", "server_count": "2",
 *    "server_list": [{"server_id": "10.0.0.1", "host_ip": "10.0.0.1",
 *                     "device": [{"device_id": "0", "device_ip": "192.168.1.1",
 *                                 "rank_id": "0"}, ...]}, ...]}
 *
 * Every value is a string; server_count, host_ip and device_ip are optional
 * (devices have no IP of their own on CPUs); the rank_ids are 0..n-1, each
 * once, contiguous on each server. Every malformed case is DDPC_ERR_IO with
 * a text that starts as HCCL's EI0004 ("the rank table is invalid") and
 * names the file and the field. Parsing is cJSON's (libcjson-dev); a build
 * without it says so.
 *
 * On CPUs a table gives the number of ranks and where each one runs: rank
 * 0 hosts the rendezvous store at its server's host_ip (else server_id) on
 * DDPC_RANK_TABLE_PORT, and the bootstrap does the rest (comm.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "comm/comm.h"

typedef struct rt_server {
    char *server_id; /* owned */
    char *host;      /* host_ip, else server_id (owned) */
    int first, n;    /* its ranks: first .. first + n - 1 */
} rt_server;

struct ddpc_rank_table {
    char path[256];
    int nranks, nservers;
    rt_server *servers; /* [nservers], the file's order */
    int *server_of;     /* [nranks] */
    int *device;        /* [nranks] device_id */
};

void ddpc_rank_table_destroy(ddpc_rank_table *t) {
    if (!t) return;
    for (int s = 0; t->servers && s < t->nservers; s++) {
        free(t->servers[s].server_id);
        free(t->servers[s].host);
    }
    free(t->servers);
    free(t->server_of);
    free(t->device);
    free(t);
}

int ddpc_rank_table_size(const ddpc_rank_table *t) { return t ? t->nranks : 0; }
int ddpc_rank_table_servers(const ddpc_rank_table *t) { return t ? t->nservers : 0; }

ddpc_status ddpc_rank_table_server_at(const ddpc_rank_table *t, int s,
                                      ddpc_rank_table_server *out) {
    if (!t || !out)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_rank_table_server_at: t and out must be non-NULL");
    if (s < 0 || s >= t->nservers)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "server %d is not in the rank table %s (0..%d)", s,
                         t->path, t->nservers - 1);
    const rt_server *v = &t->servers[s];
    *out = (ddpc_rank_table_server){ v->server_id, v->host, v->first, v->n };
    return DDPC_OK;
}

int ddpc_rank_table_server_of(const ddpc_rank_table *t, int rank) {
    return t && rank >= 0 && rank < t->nranks ? t->server_of[rank] : -1;
}

int ddpc_rank_table_device(const ddpc_rank_table *t, int rank) {
    return t && rank >= 0 && rank < t->nranks ? t->device[rank] : -1;
}

const char *ddpc__rank_table_path(const ddpc_rank_table *t) { return t->path; }

/* Reads path whole into a NUL-terminated buffer (malloc'd). */
static ddpc_status read_file(const char *path, char **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ddpc__err_errno(errno == ENOENT ? DDPC_ERR_NOT_FOUND : DDPC_ERR_SYSTEM, errno,
                               "EI0004: the rank table %s cannot be opened", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (int i = 0; i < (1 << 14); i++) { /* at most 64 MiB */
        if (len + 4096 + 1 > cap) {
            char *t = realloc(text, cap = cap * 2 + 8192);
            if (!t) {
                free(text);
                fclose(f);
                return ddpc__err(DDPC_ERR_NOMEM, "reading the rank table %s: out of memory", path);
            }
            text = t;
        }
        size_t got = fread(text + len, 1, 4096, f);
        len += got;
        if (got < 4096) break;
    }
    int err = ferror(f), more = !feof(f);
    fclose(f);
    text[len] = '\0';
    if (err || more) {
        free(text);
        return ddpc__err(err ? DDPC_ERR_SYSTEM : DDPC_ERR_IO,
                         "EI0004: the rank table %s cannot be read%s", path,
                         err ? "" : ": it is larger than 64 MiB");
    }
    *out = text;
    return DDPC_OK;
}

#ifdef DDPC_HAVE_CJSON
#include <cJSON.h>

/* Fails with EI0004 naming path and field. */
__attribute__((format(printf, 3, 4))) static ddpc_status bad(const char *path, const char *field,
                                                             const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ddpc__err(DDPC_ERR_IO, "EI0004: the rank table %s is invalid: %s: %s", path, field, why);
}
#define BAD(field, ...) bad(t->path, field, __VA_ARGS__)

/* obj's member name as a string (required or not); *out NULL when absent. */
static ddpc_status str_field(const ddpc_rank_table *t, const cJSON *obj, const char *name,
                             const char *field, int required, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    *out = NULL;
    if (!v) return required ? BAD(field, "missing") : DDPC_OK;
    if (!cJSON_IsString(v) || !v->valuestring)
        return BAD(field, "must be a string (every value of a rank table is, e.g. \"0\")");
    *out = v->valuestring;
    return DDPC_OK;
}

/* A required string field holding a decimal integer in 0..max. */
static ddpc_status uint_field(const ddpc_rank_table *t, const cJSON *obj, const char *name,
                              const char *field, long max, long *out) {
    const char *s;
    DDPC_CHECK(str_field(t, obj, name, field, 1, &s));
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > max)
        return BAD(field, "\"%s\" is not a whole number in 0..%ld", s, max);
    *out = v;
    return DDPC_OK;
}

/* Server i of list: its fields, and its devices' ranks into t. seen counts
 * each rank's appearances. */
static ddpc_status read_server(ddpc_rank_table *t, const cJSON *list, int i, int *seen) {
    const cJSON *srv = cJSON_GetArrayItem(list, i);
    const char *server_id, *host_ip;
    char field[128];
    snprintf(field, sizeof field, "server_list[%d]", i);
    if (!cJSON_IsObject(srv)) return BAD(field, "must be an object");
    snprintf(field, sizeof field, "server_list[%d].server_id", i);
    DDPC_CHECK(str_field(t, srv, "server_id", field, 1, &server_id));
    if (!*server_id) return BAD(field, "is empty");
    snprintf(field, sizeof field, "server_list[%d].host_ip", i);
    DDPC_CHECK(str_field(t, srv, "host_ip", field, 0, &host_ip));
    if (host_ip && !*host_ip) return BAD(field, "is empty");
    rt_server *v = &t->servers[i];
    v->server_id = strdup(server_id);
    v->host = strdup(host_ip ? host_ip : server_id);
    if (!v->server_id || !v->host) return ddpc__err(DDPC_ERR_NOMEM, "out of memory");
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(srv, "device");
    snprintf(field, sizeof field, "server_list[%d].device", i);
    if (!cJSON_IsArray(devs) || cJSON_GetArraySize(devs) == 0)
        return BAD(field, devs ? "must be a non-empty array" : "missing");
    long lo = t->nranks, hi = -1;
    int ndev = cJSON_GetArraySize(devs);
    for (int j = 0; j < ndev; j++) {
        const cJSON *d = cJSON_GetArrayItem(devs, j);
        const char *ip;
        long id, rank;
        snprintf(field, sizeof field, "server_list[%d].device[%d]", i, j);
        if (!cJSON_IsObject(d)) return BAD(field, "must be an object");
        snprintf(field, sizeof field, "server_list[%d].device[%d].device_id", i, j);
        DDPC_CHECK(uint_field(t, d, "device_id", field, 1L << 20, &id));
        snprintf(field, sizeof field, "server_list[%d].device[%d].device_ip", i, j);
        DDPC_CHECK(str_field(t, d, "device_ip", field, 0, &ip));
        snprintf(field, sizeof field, "server_list[%d].device[%d].rank_id", i, j);
        DDPC_CHECK(uint_field(t, d, "rank_id", field, t->nranks - 1, &rank));
        if (seen[rank]++) return BAD(field, "rank %ld is listed twice", rank);
        if (rank < lo) lo = rank;
        if (rank > hi) hi = rank;
        t->server_of[rank] = i;
        t->device[rank] = (int)id;
    }
    if (hi - lo + 1 != ndev) {
        snprintf(field, sizeof field, "server_list[%d].device[].rank_id", i);
        return BAD(field,
                   "the ranks of one server must be contiguous (here %ld..%ld for %d devices)", lo,
                   hi, ndev);
    }
    v->first = (int)lo;
    v->n = ndev;
    return DDPC_OK;
}

/* Checks the servers and their devices and fills t from them. */
static ddpc_status read_servers(ddpc_rank_table *t, const cJSON *list) {
    int nserv = cJSON_GetArraySize(list);
    long total = 0;
    for (int i = 0; i < nserv; i++) {
        const cJSON *dev = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, i), "device");
        total += cJSON_IsArray(dev) ? cJSON_GetArraySize(dev) : 0;
    }
    if (total > (1 << 20)) return BAD("server_list", "%ld devices: more than 2^20 ranks", total);
    t->nranks = (int)total;
    t->nservers = nserv;
    size_t nr = total ? (size_t)total : 1;
    int *seen = calloc(nr, sizeof *seen);
    t->servers = calloc((size_t)nserv, sizeof *t->servers);
    t->server_of = calloc(nr, sizeof *t->server_of);
    t->device = calloc(nr, sizeof *t->device);
    ddpc_status s = DDPC_OK;
    if (!seen || !t->servers || !t->server_of || !t->device)
        s = ddpc__err(DDPC_ERR_NOMEM, "reading the rank table %s: out of memory", t->path);
    for (int i = 0; i < nserv && s == DDPC_OK; i++) s = read_server(t, list, i, seen);
    free(seen);
    return s;
}

/* The whole file's checks, in the order a reader meets its fields. */
static ddpc_status parse(ddpc_rank_table *t, const char *text) {
    const char *end = NULL, *version, *status, *count;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    ddpc_status s = DDPC_OK;
    const cJSON *list = root ? cJSON_GetObjectItemCaseSensitive(root, "server_list") : NULL;
    if (!root)
        s = BAD("(the whole file)", "not valid JSON near byte %ld", end ? (long)(end - text) : 0L);
    else if (!cJSON_IsObject(root))
        s = BAD("(the whole file)", "must be a JSON object");
    else if ((s = str_field(t, root, "version", "version", 1, &version)) != DDPC_OK)
        ;
    else if (strcmp(version, "1.0") != 0 && strcmp(version, "1.2") != 0)
        s = BAD("version", "\"%s\" is not \"1.0\" or \"1.2\"", version);
    else if ((s = str_field(t, root, "status", "status", 1, &status)) != DDPC_OK)
        ;
    else if (strcmp(status, "completed") != 0)
        s = BAD("status", "\"%s\": the table is not \"completed\"", status);
    else if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        s = BAD("server_list", list ? "must be a non-empty array" : "missing");
    else if ((s = str_field(t, root, "server_count", "server_count", 0, &count)) != DDPC_OK)
        ;
    else if (count && strtol(count, NULL, 10) != cJSON_GetArraySize(list))
        s = BAD("server_count", "\"%s\" but server_list has %d servers", count,
                cJSON_GetArraySize(list));
    else
        s = read_servers(t, list);
    cJSON_Delete(root);
    return s;
}

#else /* no cJSON */

static ddpc_status parse(ddpc_rank_table *t, const char *text) {
    (void)text;
    return ddpc__err(DDPC_ERR_INVALID_ARG,
                     "the rank table %s: this ddpc was built without libcjson-dev, so it reads no "
                     "rank tables (apt-get install libcjson-dev, or bash scripts/setup.sh, and "
                     "rebuild)",
                     t->path);
}

#endif

ddpc_status ddpc_rank_table_load(const char *path, ddpc_rank_table **out) {
    if (!path || !out)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_rank_table_load: path and out must be non-NULL");
    *out = NULL;
    ddpc_rank_table *t = calloc(1, sizeof *t);
    if (!t) return ddpc__err(DDPC_ERR_NOMEM, "out of memory");
    snprintf(t->path, sizeof t->path, "%s", path);
    char *text = NULL;
    ddpc_status s = read_file(path, &text);
    if (s == DDPC_OK) s = parse(t, text);
    free(text);
    if (s != DDPC_OK) {
        ddpc_rank_table_destroy(t);
        return s;
    }
    DDPC_INFO(INIT, "rank table %s: %d ranks on %d servers", path, t->nranks, t->nservers);
    *out = t;
    return DDPC_OK;
}

ddpc_status ddpc__rank_table_env(ddpc_rank_table **t, long *rank) {
    static const ddpc__env_id ids[] = { DDPC_ENV_RANK_ID, DDPC_ENV_RANK, DDPC_ENV_OMPI_RANK,
                                        DDPC_ENV_SLURM_PROCID };
    const char *path = ddpc__env(DDPC_ENV_RANK_TABLE_FILE, NULL);
    *t = NULL;
    size_t i = 0;
    while (i < sizeof ids / sizeof ids[0] && !ddpc__env_isset(ids[i])) i++;
    if (i == sizeof ids / sizeof ids[0])
        return ddpc__err(DDPC_ERR_ENV,
                         "RANK_TABLE_FILE=%s is set but RANK_ID is not (nor RANK, "
                         "OMPI_COMM_WORLD_RANK or SLURM_PROCID): set this process's rank_id",
                         path);
    DDPC_CHECK(ddpc__env_long(ids[i], rank));
    DDPC_CHECK(ddpc_rank_table_load(path, t));
    long n = ddpc_rank_table_size(*t), ws;
    ddpc_status s = DDPC_OK;
    if (*rank >= n)
        s = ddpc__err(DDPC_ERR_ENV, "%s=%ld is not a rank of RANK_TABLE_FILE=%s (ranks 0..%ld)",
                      ddpc__env_name(ids[i]), *rank, path, n - 1);
    for (int k = 0; k < 2 && s == DDPC_OK; k++) { /* the sizes a launcher may have set */
        ddpc__env_id id = k ? DDPC_ENV_RANK_SIZE : DDPC_ENV_WORLD_SIZE;
        if (!ddpc__env_isset(id)) continue;
        s = ddpc__env_long(id, &ws);
        if (s == DDPC_OK && ws != n)
            s = ddpc__err(DDPC_ERR_ENV, "%s=%ld but RANK_TABLE_FILE=%s has %ld ranks",
                          ddpc__env_name(id), ws, path, n);
    }
    if (s != DDPC_OK) {
        ddpc_rank_table_destroy(*t);
        *t = NULL;
        return s;
    }
    ddpc__log_set_rank((int)*rank);
    DDPC_INFO(INIT, "rank %ld of %ld (from %s and RANK_TABLE_FILE=%s)", *rank, n,
              ddpc__env_name(ids[i]), path);
    return DDPC_OK;
}
