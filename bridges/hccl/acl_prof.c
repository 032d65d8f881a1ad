/*
 * acl_prof.c — Ascend's profiling calls (acl/acl_prof.h) on CPUs:
 * libmsprofiler, CANN's library name for them.
 *
 * CPUs have no AI Core or task counters to read, so nothing is measured:
 * a session (aclprofStart .. aclprofStop) is recorded as one line of text
 * in PATH/ddpc_prof_HOST_PID.txt, PATH being aclprofInit's folder. The line
 * says what was asked for and when, and that no device data exists here:
 *
 *   ddpc profiling session: devices=0,1 aicore_metrics=1 data_types=0x1af
 *   start=2025-01-01T10:00:00.123Z stop=... seconds=1.234 (CPU host: no
 *   device counters recorded)
 *
 * Errors are ACL's codes with aclGetRecentErrMsg's text, kept through
 * libascendcl. What this file leaves to others: everything else.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl_prof.h"
#include "acl_internal.h"

#define fail          ddpc__acl_fail
#define CONFIG_MAGIC  0x50524f46u /* "PROF" */
#define MAX_PROF_DEVS 64

struct aclprofConfig {
    uint32_t magic; /* CONFIG_MAGIC while alive */
    uint32_t ndev;
    uint32_t devs[MAX_PROF_DEVS];
    aclprofAicoreMetrics metrics;
    uint64_t types;
};

static pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_path[PATH_MAX];          /* aclprofInit's folder; "" when not initialized */
static const aclprofConfig *g_running; /* the session's config (borrowed) */
static struct timespec g_start;        /* CLOCK_REALTIME */
static struct timespec g_start_mono;

/* mkdir -p path (a bounded walk over its components). */
static int make_dirs(const char *path) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) && access(buf, W_OK) == 0 ? 0 : -1;
}

aclError aclprofInit(const char *profilerResultPath, size_t length) {
    if (!profilerResultPath || length == 0 || length >= PATH_MAX ||
        strnlen(profilerResultPath, length + 1) != length)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclprofInit: profilerResultPath must be a path of length characters "
                    "(1..%d)",
                    PATH_MAX - 1);
    pthread_mutex_lock(&prof_mu);
    int again = g_path[0] != '\0';
    pthread_mutex_unlock(&prof_mu);
    if (again)
        return fail(ACL_ERROR_REPEAT_INITIALIZE,
                    "aclprofInit: already initialized (aclprofFinalize first)");
    if (make_dirs(profilerResultPath) != 0)
        return fail(ACL_ERROR_INVALID_FILE,
                    "aclprofInit: %s cannot be made a writable folder for the records: %s",
                    profilerResultPath, strerror(errno ? errno : EACCES));
    pthread_mutex_lock(&prof_mu);
    snprintf(g_path, sizeof g_path, "%s", profilerResultPath);
    pthread_mutex_unlock(&prof_mu);
    return ACL_SUCCESS;
}

aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums,
                                   aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents,
                                   uint64_t dataTypeConfig) {
    const char *what = "aclprofCreateConfig";
    if (!deviceIdList || deviceNums == 0 || deviceNums > MAX_PROF_DEVS) {
        fail(ACL_ERROR_INVALID_PARAM, "%s: deviceIdList must hold 1..%d devices", what,
             MAX_PROF_DEVS);
        return NULL;
    }
    for (uint32_t i = 0; i < deviceNums; i++)
        if (deviceIdList[i] >= ddpc__acl_device_count()) {
            fail(ACL_ERROR_INVALID_PARAM, "%s: deviceIdList[%u] = %u is not a device (0..%u)", what,
                 i, deviceIdList[i], ddpc__acl_device_count() - 1);
            return NULL;
        }
    if ((aicoreMetrics < ACL_AICORE_ARITHMETIC_UTILIZATION ||
         aicoreMetrics > ACL_AICORE_MEMORY_ACCESS) &&
        aicoreMetrics != ACL_AICORE_NONE) {
        fail(ACL_ERROR_INVALID_PARAM, "%s: aicoreMetrics %d is not an aclprofAicoreMetrics", what,
             (int)aicoreMetrics);
        return NULL;
    }
    (void)aicoreEvents; /* reserved in CANN too */
    aclprofConfig *c = calloc(1, sizeof *c);
    if (!c) {
        fail(ACL_ERROR_BAD_ALLOC, "%s: out of memory", what);
        return NULL;
    }
    c->magic = CONFIG_MAGIC;
    c->ndev = deviceNums;
    memcpy(c->devs, deviceIdList, deviceNums * sizeof *deviceIdList);
    c->metrics = aicoreMetrics;
    c->types = dataTypeConfig;
    return c;
}

static int config_ok(const aclprofConfig *c) { return c && c->magic == CONFIG_MAGIC; }

aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig) {
    if (!config_ok(profilerConfig))
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclprofDestroyConfig: not a config aclprofCreateConfig made");
    pthread_mutex_lock(&prof_mu);
    int busy = g_running == profilerConfig;
    pthread_mutex_unlock(&prof_mu);
    if (busy)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclprofDestroyConfig: its session is running (aclprofStop first)");
    aclprofConfig *c = (aclprofConfig *)profilerConfig;
    c->magic = 0;
    free(c);
    return ACL_SUCCESS;
}

aclError aclprofStart(const aclprofConfig *profilerConfig) {
    if (!config_ok(profilerConfig))
        return fail(ACL_ERROR_INVALID_PARAM, "aclprofStart: not a config aclprofCreateConfig made");
    aclError e = ACL_SUCCESS;
    pthread_mutex_lock(&prof_mu);
    if (!g_path[0])
        e = fail(ACL_ERROR_UNINITIALIZE, "aclprofStart: aclprofInit was not called");
    else if (g_running)
        e = fail(ACL_ERROR_INVALID_PARAM, "aclprofStart: a session is running (aclprofStop it)");
    else {
        g_running = profilerConfig;
        clock_gettime(CLOCK_REALTIME, &g_start);
        clock_gettime(CLOCK_MONOTONIC, &g_start_mono);
    }
    pthread_mutex_unlock(&prof_mu);
    return e;
}

static void iso_time(const struct timespec *t, char *buf, size_t len) {
    struct tm tm;
    gmtime_r(&t->tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", t->tv_nsec / 1000000);
}

/* Appends the running session's line (prof_mu held) and ends the session. */
static aclError session_end(const char *what) {
    const aclprofConfig *c = g_running;
    g_running = NULL;
    struct timespec stop, stop_mono;
    clock_gettime(CLOCK_REALTIME, &stop);
    clock_gettime(CLOCK_MONOTONIC, &stop_mono);
    double secs = (double)(stop_mono.tv_sec - g_start_mono.tv_sec) +
                  (double)(stop_mono.tv_nsec - g_start_mono.tv_nsec) / 1e9;
    char host[64] = "host", file[PATH_MAX + 128], devs[MAX_PROF_DEVS * 11] = "", t0[48], t1[48];
    gethostname(host, sizeof host - 1);
    snprintf(file, sizeof file, "%s/ddpc_prof_%s_%ld.txt", g_path, host, (long)getpid());
    for (uint32_t i = 0, n = 0; i < c->ndev && n < sizeof devs; i++)
        n += (uint32_t)snprintf(devs + n, sizeof devs - n, "%s%u", i ? "," : "", c->devs[i]);
    iso_time(&g_start, t0, sizeof t0);
    iso_time(&stop, t1, sizeof t1);
    FILE *f = fopen(file, "a");
    if (!f) return fail(ACL_ERROR_WRITE_FILE, "%s: %s: %s", what, file, strerror(errno));
    fprintf(f,
            "ddpc profiling session: devices=%s aicore_metrics=%d data_types=0x%llx start=%s "
            "stop=%s seconds=%.6f (CPU host: no device counters recorded)\n",
            devs, (int)c->metrics, (unsigned long long)c->types, t0, t1, secs);
    return fclose(f) == 0 ? ACL_SUCCESS
                          : fail(ACL_ERROR_WRITE_FILE, "%s: %s: %s", what, file, strerror(errno));
}

aclError aclprofStop(const aclprofConfig *profilerConfig) {
    if (!config_ok(profilerConfig))
        return fail(ACL_ERROR_INVALID_PARAM, "aclprofStop: not a config aclprofCreateConfig made");
    pthread_mutex_lock(&prof_mu);
    aclError e = g_running == profilerConfig
                     ? session_end("aclprofStop")
                     : fail(ACL_ERROR_INVALID_PARAM,
                            "aclprofStop: no session of this config is running (aclprofStart)");
    pthread_mutex_unlock(&prof_mu);
    return e;
}

aclError aclprofFinalize(void) {
    pthread_mutex_lock(&prof_mu);
    aclError e = ACL_SUCCESS;
    if (!g_path[0])
        e = fail(ACL_ERROR_REPEAT_FINALIZE, "aclprofFinalize: not initialized (aclprofInit)");
    else if (g_running)
        e = session_end("aclprofFinalize");
    g_path[0] = '\0';
    pthread_mutex_unlock(&prof_mu);
    return e;
}
