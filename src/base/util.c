/*
 * util.c — small utilities more than one layer needs (util.h).
 */
#include "base/util.h"

#include <math.h>
#include <time.h>

#include "base/base.h"

uint64_t ddpc__fnv1a(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 14695981039346656037ull; /* the offset basis */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

int ddpc__cond_init_monotonic(pthread_cond_t *cv) {
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc) return rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (!rc) rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc;
}

void ddpc__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline, double cap_s) {
    double left = isinf(deadline) ? INFINITY : deadline - ddpc__now();
    if (cap_s > 0 && left > cap_s) left = cap_s;
    if (left <= 0) return;
    if (isinf(left)) {
        pthread_cond_wait(cv, mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    time_t whole = (time_t)left;
    ts.tv_sec += whole;
    ts.tv_nsec += (long)((left - (double)whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}
