/* env.c — the table of environment variables, their readers and printer. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"

/* One row per variable. Keep grouped: logging, network, timeouts, algorithms,
 * job contract (read, set by launchers), launcher, trainer. */
const ddpc_env_var ddpc_env_table[] = {
    {"DDPC_DEBUG", NULL, "WARN", "log level: NONE, WARN, INFO (every effective setting), TRACE"},
    {"DDPC_DEBUG_SUBSYS", NULL, "ALL",
     "subsystems to log: INIT,STORE,NET,SHM,COLL,ENV,DATA,NN,DDP,RUN or ALL; ^X,Y excludes"},
    {"DDPC_IF_IP", "HCCL_IF_IP", NULL, "IP address (v4 or v6) this rank listens and advertises on"},
    {"DDPC_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", NULL,
     "interfaces by name: eth,enp prefixes; ^eth excludes a prefix; =eth0 exact; ^=eth0 excludes exact"},
    {"DDPC_IF_BASE_PORT", "HCCL_IF_BASE_PORT", "0", "first port data sockets listen on (0 = any free port)"},
    {"DDPC_CONNECT_TIMEOUT", "HCCL_CONNECT_TIMEOUT", "120",
     "seconds allowed for rendezvous and connection set-up"},
    {"DDPC_TIMEOUT", "HCCL_EXEC_TIMEOUT", "1836", "seconds one collective may wait on its peers (0 = no limit)"},
    {"DDPC_BUFFSIZE", "HCCL_BUFFSIZE", "200", "accepted for HCCL compatibility; no effect: the TCP path sends from and receives into the user buffers, with no staging buffer"},
    {"DDPC_SOCKBUF", NULL, "4194304", "bytes of TCP send and receive buffer per socket (0 = OS default)"},
    {"DDPC_SHM", NULL, "1", "1: ranks on the same host talk through shared memory (/dev/shm), falling back to TCP with a warning where it cannot be had; 0: TCP between all ranks"},
    {"DDPC_SHM_COPY", NULL, "auto", "how a rank writes large messages into a shared-memory ring: cached (through its cache: fastest where the two cores share one), stream (non-temporal stores: fastest where they do not, e.g. vCPUs on different chiplets or sockets), or auto (times both as it goes and uses the cheaper)"},
    {"DDPC_SHM_BYTES", NULL, "1048576", "bytes of each shared-memory ring, one per direction per pair of ranks on a host (8 ranks: 28 pairs, 56 rings); every rank must set the same"},
    {"DDPC_ALGO", NULL, "auto", "collective algorithm: auto, ring, rhd (recursive halving/doubling), tree"},
    {"DDPC_CHUNK", NULL, "262144", "bytes per pipelined chunk of ring algorithms"},
    {"DDPC_SPIN_US", NULL, NULL, "microseconds a waiting collective retries its connections before sleeping in poll (0: sleep at once); default 1000 while this host's ranks do not outnumber its CPUs, and then up to 256 retries first only pause the core (fewer after waits they did not end), the rest yield it; else 50, each retry yielding"},
    {"DDPC_STORE_TIMEOUT", NULL, "300", "seconds a store request may take beyond its own wait before the client gives up"},
    {"DDPC_STORE_PROTOCOL", NULL, "auto", "the store client's protocol: auto (ddpc's, else PyTorch's c10d TCPStore when the server closes on ddpc's handshake), ddpc, or torch"},
    {"RANK", NULL, NULL, "global rank of this process (torchrun contract)"},
    {"WORLD_SIZE", NULL, NULL, "number of processes in the job"},
    {"LOCAL_RANK", NULL, NULL, "rank of this process on its node"},
    {"LOCAL_WORLD_SIZE", NULL, NULL, "number of processes on this node"},
    {"GROUP_RANK", NULL, NULL, "rank of this node (set by ddpc-run)"},
    {"MASTER_ADDR", NULL, "127.0.0.1", "host of the store (rank 0's, or the launcher's)"},
    {"MASTER_PORT", NULL, "29500", "port of the store (rank 0's, or the launcher's)"},
    {"TORCHELASTIC_USE_AGENT_STORE", NULL, NULL, "True: the launcher (torchrun's agent, or ddpc-run) hosts the store at MASTER_ADDR:MASTER_PORT and every rank connects to it; else rank 0 hosts it there"},
    {"TORCHELASTIC_RESTART_COUNT", NULL, "0", "how many times the launcher restarted the workers (torchrun, ddpc-run); each attempt rendezvouses under its own keys"},
    {"DDPC_HEARTBEAT_TIMEOUT", NULL, "10", "seconds without a heartbeat before ddpc-run presumes another node's launcher dead"},
    {"DDPC_KILL_GRACE", NULL, "5", "seconds ddpc-run waits between SIGTERM and SIGKILL when stopping workers"},
    {"DDPC_PYTHON", NULL, "python3", "interpreter ddpc-run uses for a PROGRAM ending in .py (or -m)"},
    {"OMPI_COMM_WORLD_RANK", NULL, NULL, "read when RANK is unset (mpirun); also _SIZE, _LOCAL_RANK, _LOCAL_SIZE"},
    {"SLURM_PROCID", NULL, NULL, "read when RANK and OMPI_* are unset (srun); also SLURM_NTASKS, SLURM_LOCALID"},
    {"DDPC_DATA_TIMEOUT", NULL, "60", "seconds ddpc_loader_next waits for its prefetch thread before DDPC_ERR_TIMEOUT"},
    {"DDPC_THREADS", NULL, NULL, "OpenBLAS threads per process for ddpc-train (default: the CPUs this process may run on / LOCAL_WORLD_SIZE)"},
};
const int ddpc_env_table_len = (int)(sizeof ddpc_env_table / sizeof ddpc_env_table[0]);

static const ddpc_env_var *find(const char *name) {
    for (int i = 0; i < ddpc_env_table_len; i++)
        if (strcmp(ddpc_env_table[i].name, name) == 0) return &ddpc_env_table[i];
    return NULL;
}

const char *ddpc_env_str(const char *name, const char **source) {
    const ddpc_env_var *v = find(name);
    const char *s = getenv(name);
    if (s && *s) {
        if (source) *source = name;
        return s;
    }
    if (v && v->alias && (s = getenv(v->alias)) && *s) {
        if (source) *source = v->alias;
        return s;
    }
    if (source) *source = "default";
    return v ? v->deflt : NULL;
}

int ddpc_env_isset(const char *name) {
    const char *src;
    return ddpc_env_str(name, &src) != NULL && strcmp(src, "default") != 0;
}

ddpc_status ddpc_parse_long(const char *what, const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return ddpc_err(DDPC_ERR_INVALID_ARG, "%s is empty", what);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || *end || end == s)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "%s='%s' is not an integer", what, s);
    if (v < lo || v > hi)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "%s=%ld is out of range [%ld, %ld]", what, v, lo, hi);
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_parse_double(const char *what, const char *s, double lo, double hi,
                              double *out) {
    if (!s || !*s) return ddpc_err(DDPC_ERR_INVALID_ARG, "%s is empty", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || *end || end == s || isnan(v))
        return ddpc_err(DDPC_ERR_INVALID_ARG, "%s='%s' is not a number", what, s);
    if (v < lo || v > hi)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "%s=%g is out of range [%g, %g]", what, v, lo, hi);
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc_parse_size(const char *what, const char *s, size_t *out) {
    if (!s || !*s) return ddpc_err(DDPC_ERR_INVALID_ARG, "%s is empty", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (errno || *end || end == s || !(v >= 0) || v * mul > 1e18)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "%s='%s' is not a size (like 8, 4K, 1M, 2G)", what, s);
    *out = (size_t)(v * mul);
    return DDPC_OK;
}

static ddpc_status env_value(const char *name, const char **val, const char **src) {
    *val = ddpc_env_str(name, src);
    if (!*val) return ddpc_err(DDPC_ERR_ENV, "%s is not set", name);
    return DDPC_OK;
}

ddpc_status ddpc_env_long(const char *name, long lo, long hi, long *out) {
    const char *val, *src;
    DDPC_CHECK(env_value(name, &val, &src));
    if (ddpc_parse_long(src, val, lo, hi, out) != DDPC_OK)
        return ddpc_err(DDPC_ERR_ENV, "%s='%s' is not an integer in [%ld, %ld]", src, val, lo, hi);
    return DDPC_OK;
}

ddpc_status ddpc_env_double(const char *name, double lo, double hi, double *out) {
    const char *val, *src;
    DDPC_CHECK(env_value(name, &val, &src));
    if (ddpc_parse_double(src, val, lo, hi, out) != DDPC_OK)
        return ddpc_err(DDPC_ERR_ENV, "%s='%s' is not a number in [%g, %g]", src, val, lo, hi);
    return DDPC_OK;
}

void ddpc_env_print(FILE *f, int markdown) {
    if (markdown) fprintf(f, "| variable | HCCL alias | default | meaning |\n|---|---|---|---|\n");
    for (int i = 0; i < ddpc_env_table_len; i++) {
        const ddpc_env_var *v = &ddpc_env_table[i];
        if (markdown)
            fprintf(f, "| `%s` | %s%s%s | %s%s%s | %s |\n", v->name, v->alias ? "`" : "",
                    v->alias ? v->alias : "", v->alias ? "`" : "", v->deflt ? "`" : "",
                    v->deflt ? v->deflt : "", v->deflt ? "`" : "", v->meaning);
        else
            fprintf(f, "  %-22s %-22s %-10s %s\n", v->name, v->alias ? v->alias : "",
                    v->deflt ? v->deflt : "-", v->meaning);
    }
}

void ddpc_env_log_effective(unsigned subsys) {
    if (!ddpc_log_enabled(DDPC_LOG_INFO, subsys)) return;
    for (int i = 0; i < ddpc_env_table_len; i++) {
        const char *src;
        const char *val = ddpc_env_str(ddpc_env_table[i].name, &src);
        if (strncmp(ddpc_env_table[i].name, "DDPC_", 5) != 0) continue;
        ddpc_log(DDPC_LOG_INFO, subsys, "%s=%s (%s)", ddpc_env_table[i].name, val ? val : "(unset)", src);
    }
}
