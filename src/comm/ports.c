/*
 * ports.c — which ports a communicator's listening sockets take, from the
 * environment, with HCCL's meanings:
 *
 *   HCCL_HOST_SOCKET_PORT_RANGE  "60000-60050", "56000,56005-56010" (items
 *       may not overlap) or "auto" (any free port): every listener, the
 *       data listeners and a unique id's store; wins over the two below,
 *       as in HCCL;
 *   HCCL_IF_BASE_PORT  [1024, 65520]: a unique id's (root info's) store
 *       takes one of the 32 ports from it, local rank (device) i trying
 *       base + i first; unset, the caller's default base (libhccl: 60000),
 *       else any free port;
 *   DDPC_IF_BASE_PORT  the data listeners take the first free of the 1024
 *       ports from it (0: any free port).
 *
 * What it leaves to others: binding (base/sock.c), the listeners
 * themselves (bootstrap.c, comm.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "comm/comm.h"

#define ID_PORTS 32 /* HCCL_IF_BASE_PORT's range */

/* One item of an HCCL_HOST_SOCKET_PORT_RANGE list: "P" or "A-B". */
static int parse_item(const char *s, size_t n, int *lo, int *hi) {
    char buf[32], *end;
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    long a = strtol(buf, &end, 10), b = a;
    if (end == buf) return 0;
    if (*end == '-') {
        char *e2;
        b = strtol(end + 1, &e2, 10);
        if (e2 == end + 1) return 0;
        end = e2;
    }
    if (*end || a < 1 || b > 65535 || a > b) return 0;
    *lo = (int)a;
    *hi = (int)b;
    return 1;
}

ddpc_status ddpc__ports_parse(const char *name, const char *spec, ddpc__ports *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->why, sizeof p->why, "%s=%s", name, spec);
    if (strcmp(spec, "auto") == 0) return DDPC_OK;
    const char *s = spec;
    for (int k = 0; k <= DDPC_PORT_RANGES; k++) { /* one item a turn */
        size_t n = strcspn(s, ",");
        while (n && (*s == ' ' || *s == '\t')) s++, n--;
        size_t m = n;
        while (m && (s[m - 1] == ' ' || s[m - 1] == '\t')) m--;
        int lo, hi;
        if (!parse_item(s, m, &lo, &hi))
            return ddpc__err(DDPC_ERR_ENV,
                             "%s='%s': '%.*s' is not a port or a range A-B of ports in [1, 65535] "
                             "with A <= B (e.g. 60000-60050, or 56000,56005-56010, or auto)",
                             name, spec, (int)m, s);
        if (p->n == DDPC_PORT_RANGES)
            return ddpc__err(DDPC_ERR_ENV, "%s='%s': more than %d items", name, spec,
                             DDPC_PORT_RANGES);
        for (int i = 0; i < p->n; i++)
            if (lo <= p->hi[i] && p->lo[i] <= hi)
                return ddpc__err(DDPC_ERR_ENV, "%s='%s': %d-%d and %d-%d overlap", name, spec,
                                 p->lo[i], p->hi[i], lo, hi);
        p->lo[p->n] = lo;
        p->hi[p->n++] = hi;
        s += n;
        if (*s != ',') break;
        s++;
    }
    return DDPC_OK;
}

/* HCCL_HOST_SOCKET_PORT_RANGE into p when it is set; *set says whether. */
static ddpc_status host_range(ddpc__ports *p, int *set) {
    *set = ddpc__env_isset(DDPC_ENV_HCCL_HOST_SOCKET_PORT_RANGE);
    if (!*set) return DDPC_OK;
    return ddpc__ports_parse("HCCL_HOST_SOCKET_PORT_RANGE",
                             ddpc__env(DDPC_ENV_HCCL_HOST_SOCKET_PORT_RANGE, NULL), p);
}

ddpc_status ddpc__ports_data(ddpc__ports *p) {
    int set;
    long base;
    DDPC_CHECK(host_range(p, &set));
    if (set) return DDPC_OK;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_IF_BASE_PORT, &base));
    memset(p, 0, sizeof *p);
    if (base == 0) return DDPC_OK;
    p->n = 1;
    p->lo[0] = (int)base;
    p->hi[0] = base + 1023 > 65535 ? 65535 : (int)base + 1023;
    snprintf(p->why, sizeof p->why, "DDPC_IF_BASE_PORT=%ld", base);
    return DDPC_OK;
}

/* This process's rank on its node, as its launcher says (0 when none). */
static long local_rank(void) {
    static const ddpc__env_id ids[] = { DDPC_ENV_LOCAL_RANK, DDPC_ENV_OMPI_LOCAL_RANK,
                                        DDPC_ENV_SLURM_LOCALID };
    long r;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ddpc__env_isset(ids[i]) && ddpc__env_long(ids[i], &r) == DDPC_OK) return r;
    return 0;
}

ddpc_status ddpc__ports_id(int dflt_base, ddpc__ports *p) {
    int set;
    long base = dflt_base;
    DDPC_CHECK(host_range(p, &set));
    if (set) return DDPC_OK;
    memset(p, 0, sizeof *p);
    if (ddpc__env_isset(DDPC_ENV_HCCL_IF_BASE_PORT)) {
        DDPC_CHECK(ddpc__env_long(DDPC_ENV_HCCL_IF_BASE_PORT, &base));
        snprintf(p->why, sizeof p->why, "HCCL_IF_BASE_PORT=%ld: its %d ports", base, ID_PORTS);
    } else if (base > 0) {
        snprintf(p->why, sizeof p->why, "HCCL_IF_BASE_PORT unset: %ld and the %d ports from it",
                 base, ID_PORTS - 1);
    } else {
        return DDPC_OK;
    }
    if (base > 65535 - (ID_PORTS - 1))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "the id's port base %ld leaves no %d ports", base,
                         ID_PORTS);
    p->n = 1;
    p->lo[0] = (int)base;
    p->hi[0] = (int)base + ID_PORTS - 1;
    p->first = (int)(local_rank() % ID_PORTS);
    return DDPC_OK;
}
