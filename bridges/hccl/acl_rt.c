/*
 * acl_rt.c — the host-side subset of Ascend's runtime (acl/acl_rt.h) on
 * CPUs: libascendcl.
 *
 * A device is a number; device memory is host memory; a stream is a FIFO of
 * tasks run by a thread of its own, so work queued on one stream runs in
 * order while the caller goes on (as on an NPU). libhccl queues its
 * collectives here through ddpc__acl_enqueue (acl_internal.h), and so do
 * events (acl_event.c). What this file leaves to others: events
 * (acl_event.c), virtual memory (acl_mem.c), everything about communication
 * (hccl_*.c).
 *
 * Handles are checked against registries (a freed or foreign pointer is
 * ACL_ERROR_RT_INVALID_HANDLE, not a crash), which cost a short list walk.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "acl/acl.h"
#include "acl_internal.h"

#define MAX_DEVICES 1024
#define MSG_LEN     512

/* ------------------------------------------------------------ errors */

static _Thread_local char last_msg[MSG_LEN];

void ddpc__acl_set_error(const char *msg) {
    snprintf(last_msg, sizeof last_msg, "%s", msg ? msg : "");
}

#define fail ddpc__acl_fail

aclError ddpc__acl_fail(aclError code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *aclGetRecentErrMsg(void) { return last_msg; }

/* ------------------------------------------------------------ process */

static pthread_mutex_t g_mu =
    PTHREAD_MUTEX_INITIALIZER; /* registries, init flag, default streams */
static int g_inited;

aclError aclInit(const char *configPath) {
    (void)configPath; /* an ACL json config: nothing in it applies on CPUs */
    pthread_mutex_lock(&g_mu);
    int again = g_inited;
    g_inited = 1;
    pthread_mutex_unlock(&g_mu);
    return again ? fail(ACL_ERROR_REPEAT_INITIALIZE, "aclInit: already initialized") : ACL_SUCCESS;
}

aclError aclFinalize(void) {
    pthread_mutex_lock(&g_mu);
    int was = g_inited;
    g_inited = 0;
    pthread_mutex_unlock(&g_mu);
    if (!was)
        return fail(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize: not initialized (or finalized twice)");
    return aclrtSynchronizeDevice();
}

/* ------------------------------------------------------------ devices */

static _Thread_local int cur_dev = -1;

uint32_t ddpc__acl_device_count(void) {
    /* CANN's ASCEND_RT_VISIBLE_DEVICES ("0,1,3") names the devices a
     * process sees; without it, as many as an 8-device server, or as the
     * launcher's ranks on this host when more. */
    const char *vis = getenv("ASCEND_RT_VISIBLE_DEVICES");
    if (vis && *vis) {
        uint32_t n = 1;
        for (const char *p = vis; *p; p++) n += *p == ',';
        return n < MAX_DEVICES ? n : MAX_DEVICES;
    }
    const char *lws = getenv("LOCAL_WORLD_SIZE"); /* ddpc-run's, torchrun's; else mpirun's */
    if (!lws) lws = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    long n = lws ? strtol(lws, NULL, 10) : 0;
    if (n < 8) n = 8;
    return n < MAX_DEVICES ? (uint32_t)n : MAX_DEVICES;
}

aclError aclrtGetDeviceCount(uint32_t *count) {
    if (!count) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
    *count = ddpc__acl_device_count();
    return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
    if (deviceId < 0 || (uint32_t)deviceId >= ddpc__acl_device_count())
        return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice: device %d is not in 0..%u",
                    deviceId, ddpc__acl_device_count() - 1);
    cur_dev = deviceId;
    return ACL_SUCCESS;
}

aclError aclrtGetDevice(int32_t *deviceId) {
    if (!deviceId) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
    if (cur_dev < 0)
        return fail(ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetDevice: no aclrtSetDevice on this thread");
    *deviceId = cur_dev;
    return ACL_SUCCESS;
}

aclError aclrtGetRunMode(aclrtRunMode *runMode) {
    if (!runMode) return fail(ACL_ERROR_INVALID_PARAM, "aclrtGetRunMode: runMode is NULL");
    *runMode = ACL_HOST;
    return ACL_SUCCESS;
}

static char soc_name[128];
static pthread_once_t soc_once = PTHREAD_ONCE_INIT;

static void soc_init(void) {
    struct utsname u;
    snprintf(soc_name, sizeof soc_name, "CPU host (%s, ddpc)",
             uname(&u) == 0 && u.machine[0] ? u.machine : "unknown");
}

const char *aclrtGetSocName(void) {
    pthread_once(&soc_once, soc_init);
    return soc_name;
}

aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode) {
    if (mode == ACL_RT_OVERFLOW_MODE_INFNAN) return ACL_SUCCESS; /* what CPUs do */
    if (mode == ACL_RT_OVERFLOW_MODE_SATURATION)
        return fail(ACL_ERROR_FEATURE_UNSUPPORTED,
                    "aclrtSetDeviceSatMode: CPUs compute floats as IEEE 754 does (overflow gives "
                    "inf/nan); ACL_RT_OVERFLOW_MODE_SATURATION is not available");
    return fail(ACL_ERROR_INVALID_PARAM,
                "aclrtSetDeviceSatMode: mode %d is not an aclrtFloatOverflowMode", (int)mode);
}

/* ------------------------------------------------------------ streams */

typedef struct task {
    ddpc__acl_task_fn fn;
    void *arg; /* owned by fn */
    struct task *next;
} task;

typedef struct acl_stream {
    pthread_mutex_t mu;
    pthread_cond_t more; /* a task was queued, or stop */
    pthread_cond_t idle; /* done advanced */
    task *head, *tail;
    uint64_t queued, done; /* tasks ever queued, ever run */
    int stop;
    int stop_on_failure; /* ACL_STOP_ON_FAILURE: refuse work while err is set */
    aclError err;        /* first failure since the last synchronization */
    char msg[MSG_LEN];
    pthread_t th;
    struct acl_stream *next; /* the registry */
} acl_stream;

static acl_stream *g_streams;              /* every live stream (g_mu) */
static acl_stream *g_default[MAX_DEVICES]; /* each device's, made on first use (g_mu) */

static void *stream_main(void *p) {
    acl_stream *s = p;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stop) pthread_cond_wait(&s->more, &s->mu);
        if (!s->head) break; /* stopping, and nothing left */
        task *t = s->head;
        s->head = t->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        char msg[MSG_LEN] = "";
        aclError e = t->fn(t->arg, msg, sizeof msg);
        free(t);
        pthread_mutex_lock(&s->mu);
        if (e != ACL_SUCCESS && s->err == ACL_SUCCESS) {
            s->err = e;
            snprintf(s->msg, sizeof s->msg, "%s",
                     msg[0] ? msg : "a task queued on the stream failed");
        }
        s->done++;
        pthread_cond_broadcast(&s->idle);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static aclError stream_new(acl_stream **out) {
    acl_stream *s = calloc(1, sizeof *s);
    if (!s) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "aclrtCreateStream: out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->more, NULL);
    pthread_cond_init(&s->idle, NULL);
    int rc = pthread_create(&s->th, NULL, stream_main, s);
    if (rc != 0) {
        free(s);
        return fail(ACL_ERROR_RT_INTERNAL_ERROR, "aclrtCreateStream: pthread_create: %s",
                    strerror(rc));
    }
    pthread_mutex_lock(&g_mu);
    s->next = g_streams;
    g_streams = s;
    pthread_mutex_unlock(&g_mu);
    *out = s;
    return ACL_SUCCESS;
}

/* stream as one of ours, or NULL: the current device's default stream. */
static aclError stream_get(aclrtStream stream, const char *what, acl_stream **out) {
    pthread_mutex_lock(&g_mu);
    acl_stream *s = NULL;
    if (stream) {
        for (s = g_streams; s && s != stream; s = s->next) {}
        pthread_mutex_unlock(&g_mu);
        if (!s)
            return fail(ACL_ERROR_RT_INVALID_HANDLE, "%s: %p is not a live stream", what, stream);
        *out = s;
        return ACL_SUCCESS;
    }
    int dev = cur_dev < 0 ? 0 : cur_dev;
    s = g_default[dev];
    pthread_mutex_unlock(&g_mu);
    if (s) {
        *out = s;
        return ACL_SUCCESS;
    }
    acl_stream *made = NULL;
    aclError e = stream_new(&made);
    if (e != ACL_SUCCESS) return e;
    pthread_mutex_lock(&g_mu);
    if (!g_default[dev]) g_default[dev] = made, made = NULL; /* else another thread won the race */
    s = g_default[dev];
    pthread_mutex_unlock(&g_mu);
    if (made) aclrtDestroyStream(made);
    *out = s;
    return ACL_SUCCESS;
}

aclError ddpc__acl_enqueue(aclrtStream stream, ddpc__acl_task_fn fn, void *arg) {
    acl_stream *s;
    aclError e = stream_get(stream, "enqueue", &s);
    if (e != ACL_SUCCESS) return e;
    task *t = malloc(sizeof *t);
    if (!t) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of memory queuing a task");
    *t = (task){ fn, arg, NULL };
    pthread_mutex_lock(&s->mu);
    if (s->stop_on_failure && s->err != ACL_SUCCESS) {
        char msg[MSG_LEN];
        memcpy(msg, s->msg, sizeof msg);
        pthread_mutex_unlock(&s->mu);
        free(t);
        return fail(ACL_ERROR_RT_STREAM_ABORT,
                    "stream %p stopped at a failure (ACL_STOP_ON_FAILURE): %s; "
                    "aclrtSynchronizeStream reports it and opens the stream again",
                    (void *)s, msg);
    }
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    s->queued++;
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->mu);
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *stream) {
    if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
    acl_stream *s = NULL;
    aclError e = stream_new(&s);
    *stream = s;
    return e;
}

/* Waits until every task queued on s so far has run; returns and clears
 * the first failure among them. */
static aclError stream_sync(acl_stream *s) {
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->queued;
    while (s->done < target) pthread_cond_wait(&s->idle, &s->mu);
    aclError e = s->err;
    char msg[MSG_LEN];
    memcpy(msg, s->msg, sizeof msg);
    s->err = ACL_SUCCESS;
    s->msg[0] = '\0';
    pthread_mutex_unlock(&s->mu);
    if (e != ACL_SUCCESS) ddpc__acl_set_error(msg);
    return e;
}

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE)
        return fail(ACL_ERROR_INVALID_PARAM,
                    "aclrtSetStreamFailureMode: mode %llu is not ACL_CONTINUE_ON_FAILURE (0) or "
                    "ACL_STOP_ON_FAILURE (1)",
                    (unsigned long long)mode);
    acl_stream *s;
    aclError e = stream_get(stream, "aclrtSetStreamFailureMode", &s);
    if (e != ACL_SUCCESS) return e;
    pthread_mutex_lock(&s->mu);
    s->stop_on_failure = mode == ACL_STOP_ON_FAILURE;
    pthread_mutex_unlock(&s->mu);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    acl_stream *s;
    aclError e = stream_get(stream, "aclrtSynchronizeStream", &s);
    return e != ACL_SUCCESS ? e : stream_sync(s);
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (!stream) return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: stream is NULL");
    pthread_mutex_lock(&g_mu);
    acl_stream **pp = &g_streams;
    while (*pp && *pp != stream) pp = &(*pp)->next;
    acl_stream *s = *pp;
    int is_default = 0;
    for (int d = 0; s && d < MAX_DEVICES; d++) is_default |= g_default[d] == s;
    if (s && !is_default) *pp = s->next; /* default streams live as long as the process */
    pthread_mutex_unlock(&g_mu);
    if (!s)
        return fail(ACL_ERROR_RT_INVALID_HANDLE, "aclrtDestroyStream: %p is not a live stream",
                    stream);
    if (is_default)
        return fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyStream: a device's default stream");
    pthread_mutex_lock(&s->mu);
    s->stop = 1; /* the thread runs what is queued, then ends */
    pthread_cond_signal(&s->more);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    pthread_cond_destroy(&s->more);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) {
    /* Each live stream in turn (the registry is walked again after each
     * wait, since a wait lets streams come and go). */
    aclError first = ACL_SUCCESS;
    for (int i = 0;; i++) {
        pthread_mutex_lock(&g_mu);
        acl_stream *s = g_streams;
        for (int k = 0; s && k < i; k++) s = s->next;
        pthread_mutex_unlock(&g_mu);
        if (!s) break;
        aclError e = stream_sync(s);
        if (first == ACL_SUCCESS) first = e;
    }
    return first;
}

aclError aclrtResetDevice(int32_t deviceId) {
    if (deviceId < 0 || deviceId >= MAX_DEVICES)
        return fail(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtResetDevice: device %d does not exist",
                    deviceId);
    pthread_mutex_lock(&g_mu);
    acl_stream *s = g_default[deviceId];
    pthread_mutex_unlock(&g_mu);
    if (cur_dev == deviceId) cur_dev = -1;
    return s ? stream_sync(s) : ACL_SUCCESS;
}

/* ------------------------------------------------------------ memory */

static aclError host_alloc(void **p, size_t size, const char *what) {
    if (!p) return fail(ACL_ERROR_INVALID_PARAM, "%s: the pointer's address is NULL", what);
    if (size == 0) return fail(ACL_ERROR_INVALID_PARAM, "%s: size must be greater than zero", what);
    void *m = NULL;
    if (posix_memalign(&m, 64, size) != 0)
        return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "%s: out of memory for %zu bytes", what, size);
    *p = m;
    return ACL_SUCCESS;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    (void)policy; /* huge pages or not: the host's business */
    return host_alloc(devPtr, size, "aclrtMalloc");
}

aclError aclrtMallocHost(void **hostPtr, size_t size) {
    return host_alloc(hostPtr, size, "aclrtMallocHost");
}

aclError aclrtFree(void *devPtr) {
    if (!devPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFree: devPtr is NULL");
    free(devPtr);
    return ACL_SUCCESS;
}

aclError aclrtFreeHost(void *hostPtr) {
    if (!hostPtr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtFreeHost: hostPtr is NULL");
    free(hostPtr);
    return ACL_SUCCESS;
}

static aclError copy_check(void *dst, size_t destMax, const void *src, size_t count, int kind,
                           const char *what) {
    if (count == 0) return ACL_SUCCESS;
    if (!dst || !src) return fail(ACL_ERROR_INVALID_PARAM, "%s: dst or src is NULL", what);
    if (count > destMax)
        return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu is more than destMax %zu", what, count,
                    destMax);
    if (kind < ACL_MEMCPY_HOST_TO_HOST || kind > ACL_MEMCPY_INTER_DEVICE_TO_DEVICE)
        return fail(ACL_ERROR_INVALID_PARAM, "%s: kind %d is not an aclrtMemcpyKind", what, kind);
    return ACL_SUCCESS;
}

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind) {
    aclError e = copy_check(dst, destMax, src, count, (int)kind, "aclrtMemcpy");
    if (e == ACL_SUCCESS && count) memmove(dst, src, count);
    return e;
}

static aclError set_check(void *p, size_t maxCount, size_t count, const char *what) {
    if (count == 0) return ACL_SUCCESS;
    if (!p) return fail(ACL_ERROR_INVALID_PARAM, "%s: devPtr is NULL", what);
    if (count > maxCount)
        return fail(ACL_ERROR_INVALID_PARAM, "%s: count %zu is more than maxCount %zu", what, count,
                    maxCount);
    return ACL_SUCCESS;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    aclError e = set_check(devPtr, maxCount, count, "aclrtMemset");
    if (e == ACL_SUCCESS && count) memset(devPtr, value, count);
    return e;
}

typedef struct mem_arg {
    void *dst;
    const void *src; /* NULL: a memset of value */
    int value;
    size_t count;
} mem_arg;

static aclError mem_task(void *arg, char *err, size_t errlen) {
    mem_arg *a = arg;
    if (a->count) {
        if (a->src)
            memmove(a->dst, a->src, a->count);
        else
            memset(a->dst, a->value, a->count);
    }
    free(a);
    return ACL_SUCCESS;
}

static aclError mem_enqueue(aclrtStream stream, mem_arg m) {
    mem_arg *a = malloc(sizeof *a);
    if (!a) return fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "out of memory queuing a copy");
    *a = m;
    aclError e = ddpc__acl_enqueue(stream, mem_task, a);
    if (e != ACL_SUCCESS) free(a);
    return e;
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                          aclrtMemcpyKind kind, aclrtStream stream) {
    aclError e = copy_check(dst, destMax, src, count, (int)kind, "aclrtMemcpyAsync");
    return e != ACL_SUCCESS ? e : mem_enqueue(stream, (mem_arg){ dst, src, 0, count });
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
                          aclrtStream stream) {
    aclError e = set_check(devPtr, maxCount, count, "aclrtMemsetAsync");
    return e != ACL_SUCCESS ? e : mem_enqueue(stream, (mem_arg){ devPtr, NULL, value, count });
}
