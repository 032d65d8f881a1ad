/*
 * util.h — small utilities more than one layer needs: a hash of bytes, and
 * condition-variable waits against a ddpc deadline.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_BASE_UTIL_H
#define DDPC_BASE_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/export.h"

/* 64-bit FNV-1a of p[0, n): fast, stable across runs and hosts (a hash
 * table's or an id's, not a defence against chosen inputs). */
DDPC_LAYER_API uint64_t ddpc__fnv1a(const void *p, size_t n);

/* Initialises cv on CLOCK_MONOTONIC, ddpc__now()'s clock, so that
 * ddpc__cond_wait_until's deadlines hold when the wall clock jumps.
 * 0 or an errno value (pthread_cond_init's). */
DDPC_LAYER_API int ddpc__cond_init_monotonic(pthread_cond_t *cv);

/* With mu held: waits on cv (made by ddpc__cond_init_monotonic) until it
 * is signalled, deadline (absolute, ddpc__now()'s clock; +inf: none)
 * passes, or cap_s seconds (> 0; <= 0: no cap) go by, whichever is first.
 * Returns at once when the deadline has passed. Wakes may be spurious: the
 * caller re-checks its condition and the deadline in a loop. */
DDPC_LAYER_API void ddpc__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double deadline,
                                          double cap_s);

#endif /* DDPC_BASE_UTIL_H */
