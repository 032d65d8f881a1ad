/*
 * base.h — what every layer of ddpc uses: error raising with a thread-local
 * last-error text, levelled logging, clocks and deadlines.
 *
 * Internal header (not installed). Public names (include/ddpc/) are ddpc_*;
 * internal functions, types and tags shared between files are ddpc__*, so
 * the two never collide and a reader tells them apart at a glance.
 */
#ifndef DDPC_BASE_H
#define DDPC_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/export.h"
#include "ddpc/ddpc.h"

/* ------------------------------------------------------------ errors */

/* Formats the message into this thread's last-error text (see
 * ddpc_last_error), logs it at TRACE and returns s, so that a failing path
 * reads: return ddpc__err(DDPC_ERR_ENV, "RANK=%s is not an integer", v); */
DDPC_LAYER_API ddpc_status ddpc__err(ddpc_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Same, appending ": strerror(errno)" and using DDPC_ERR_SYSTEM-like s. */
DDPC_LAYER_API ddpc_status ddpc__err_errno(ddpc_status s, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "ctx: " to this thread's last-error text; returns s. */
DDPC_LAYER_API ddpc_status ddpc__err_wrap(ddpc_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Clears this thread's last-error text. */
void ddpc__err_clear(void);

/* Returns early from the calling function with the status of expr when it
 * is not DDPC_OK, leaving a breadcrumb at TRACE level. */
#define DDPC_CHECK(expr)                                                                         \
    do {                                                                                         \
        ddpc_status ddpc__s = (expr);                                                            \
        if (ddpc__s != DDPC_OK) {                                                                \
            ddpc__log(DDPC_LOG_TRACE, DDPC_SUB_ALL, "%s:%d %s -> %s", __FILE__, __LINE__, #expr, \
                      ddpc_status_str(ddpc__s));                                                 \
            return ddpc__s;                                                                      \
        }                                                                                        \
    } while (0)

/* As DDPC_CHECK, for a function with one cleanup label: keeps the status
 * of expr in s and jumps to label when it is not DDPC_OK. */
#define DDPC_CHECK_GOTO(expr, s, label)                                                          \
    do {                                                                                         \
        (s) = (expr);                                                                            \
        if ((s) != DDPC_OK) {                                                                    \
            ddpc__log(DDPC_LOG_TRACE, DDPC_SUB_ALL, "%s:%d %s -> %s", __FILE__, __LINE__, #expr, \
                      ddpc_status_str(s));                                                       \
            goto label;                                                                          \
        }                                                                                        \
    } while (0)

/* ------------------------------------------------------------ logging */

enum { DDPC_LOG_NONE = 0, DDPC_LOG_WARN = 1, DDPC_LOG_INFO = 2, DDPC_LOG_TRACE = 3 };

/* Subsystems, for DDPC_DEBUG_SUBSYS=INIT,STORE,... (or ALL, or ^NET to exclude). */
enum {
    DDPC_SUB_INIT = 1u << 0,
    DDPC_SUB_STORE = 1u << 1,
    DDPC_SUB_NET = 1u << 2,
    DDPC_SUB_SHM = 1u << 3,
    DDPC_SUB_COLL = 1u << 4,
    DDPC_SUB_ENV = 1u << 5,
    DDPC_SUB_DATA = 1u << 6,
    DDPC_SUB_NN = 1u << 7,
    DDPC_SUB_DDP = 1u << 8,
    DDPC_SUB_RUN = 1u << 9,
    DDPC_SUB_ALL = 0xffffffffu
};

/* Writes one line "host:pid:rank [SUBSYS] LEVEL message" to stderr when the
 * level and subsystem are enabled (DDPC_DEBUG, DDPC_DEBUG_SUBSYS). */
DDPC_LAYER_API void ddpc__log(int level, unsigned subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ddpc__log_enabled(int level, unsigned subsys);
/* The rank shown in log prefixes (-1 = unknown, shown as "-"). */
void ddpc__log_set_rank(int rank);

#define DDPC_WARN(sub, ...)  ddpc__log(DDPC_LOG_WARN, DDPC_SUB_##sub, __VA_ARGS__)
#define DDPC_INFO(sub, ...)  ddpc__log(DDPC_LOG_INFO, DDPC_SUB_##sub, __VA_ARGS__)
#define DDPC_TRACE(sub, ...) ddpc__log(DDPC_LOG_TRACE, DDPC_SUB_##sub, __VA_ARGS__)

/* ------------------------------------------------------ clocks, deadlines */

/* Monotonic seconds. */
DDPC_LAYER_API double ddpc__now(void);
/* An absolute deadline seconds from now; seconds <= 0 means none (+inf). */
DDPC_LAYER_API double ddpc__deadline_in(double seconds);
/* Milliseconds left before deadline, for poll(): -1 when there is none,
 * 0 when it has passed, at least 1 otherwise; capped at cap_ms when > 0. */
int ddpc__deadline_ms(double deadline, int cap_ms);
DDPC_LAYER_API int ddpc__expired(double deadline);
/* Sleeps for seconds (restarting on EINTR). */
DDPC_LAYER_API void ddpc__sleep(double seconds);

/* A hint to the core that this thread spins on memory another one writes. */
static inline void ddpc__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* ------------------------------------------------------ this host */

/* CPUs this process may run on (its affinity mask; else the online CPUs; at
 * least 1): what its ranks, BLAS threads and helper threads share. */
DDPC_LAYER_API long ddpc__cpu_count(void);

#endif /* DDPC_BASE_H */
