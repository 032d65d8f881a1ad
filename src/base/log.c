/* log.c — levelled, per-subsystem logging with host:pid:rank prefixes. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"

static const struct {
    const char *name;
    unsigned bit;
} subsystems[] = {
    { "INIT", DDPC_SUB_INIT }, { "STORE", DDPC_SUB_STORE }, { "NET", DDPC_SUB_NET },
    { "SHM", DDPC_SUB_SHM },   { "COLL", DDPC_SUB_COLL },   { "ENV", DDPC_SUB_ENV },
    { "DATA", DDPC_SUB_DATA }, { "NN", DDPC_SUB_NN },       { "DDP", DDPC_SUB_DDP },
    { "RUN", DDPC_SUB_RUN },   { "ALL", DDPC_SUB_ALL },
};

static int log_level = DDPC_LOG_WARN;
static unsigned log_subsys = DDPC_SUB_ALL;
static int log_rank = -1;
static char log_host[64] = "?";
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned parse_subsys(const char *s) {
    unsigned mask = 0;
    int exclude = (*s == '^');
    if (exclude) s++;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < sizeof subsystems / sizeof subsystems[0]; i++)
            if (strcasecmp(tok, subsystems[i].name) == 0) mask |= subsystems[i].bit;
    return exclude ? ~mask : mask;
}

static void log_init(void) {
    const char *lv = ddpc__env(DDPC_ENV_DEBUG, NULL);
    if (lv && *lv) {
        if (!strcasecmp(lv, "NONE") || !strcmp(lv, "0"))
            log_level = DDPC_LOG_NONE;
        else if (!strcasecmp(lv, "WARN"))
            log_level = DDPC_LOG_WARN;
        else if (!strcasecmp(lv, "INFO"))
            log_level = DDPC_LOG_INFO;
        else if (!strcasecmp(lv, "TRACE"))
            log_level = DDPC_LOG_TRACE;
        else
            fprintf(stderr,
                    "ddpc: DDPC_DEBUG=%s is not one of NONE, WARN, INFO, TRACE; using WARN\n", lv);
    }
    const char *ss = ddpc__env(DDPC_ENV_DEBUG_SUBSYS, NULL);
    if (ss && *ss) log_subsys = parse_subsys(ss);
    if (gethostname(log_host, sizeof log_host) != 0) snprintf(log_host, sizeof log_host, "?");
    log_host[sizeof log_host - 1] = '\0';
    char *dot = strchr(log_host, '.');
    if (dot) *dot = '\0';
}

int ddpc__log_enabled(int level, unsigned subsys) {
    pthread_once(&log_once, log_init);
    return level <= log_level && (subsys & log_subsys) != 0;
}

void ddpc__log_set_rank(int rank) { __atomic_store_n(&log_rank, rank, __ATOMIC_RELAXED); }

static const char *subsys_name(unsigned subsys) {
    for (size_t i = 0; i < sizeof subsystems / sizeof subsystems[0]; i++)
        if (subsys == subsystems[i].bit) return subsystems[i].name;
    return "ALL";
}

void ddpc__log(int level, unsigned subsys, const char *fmt, ...) {
    if (!ddpc__log_enabled(level, subsys)) return;
    int saved = errno;
    char msg[1536], rank[16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int r = __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
    if (r >= 0)
        snprintf(rank, sizeof rank, "%d", r);
    else
        snprintf(rank, sizeof rank, "-");
    static const char *const lv[] = { "NONE", "WARN", "INFO", "TRACE" };
    pthread_mutex_lock(&log_mu);
    fprintf(stderr, "%s:%d:%s [%s] %s %s\n", log_host, (int)getpid(), rank, subsys_name(subsys),
            lv[level], msg);
    pthread_mutex_unlock(&log_mu);
    errno = saved;
}

/* ------------------------------------------------------------ clocks */

double ddpc__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double ddpc__deadline_in(double seconds) { return seconds > 0 ? ddpc__now() + seconds : INFINITY; }

int ddpc__expired(double deadline) { return isfinite(deadline) && ddpc__now() >= deadline; }

int ddpc__deadline_ms(double deadline, int cap_ms) {
    if (!isfinite(deadline)) return cap_ms > 0 ? cap_ms : -1;
    double left = deadline - ddpc__now();
    if (left <= 0) return 0;
    double ms = ceil(left * 1000.0);
    if (cap_ms > 0 && ms > cap_ms) return cap_ms;
    return ms > 2e9 ? 2000000000 : (int)ms;
}

void ddpc__sleep(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ------------------------------------------------------------ this host */

long ddpc__cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}
