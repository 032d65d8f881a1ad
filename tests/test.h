/*
 * test.h — ddpc's test framework: each TEST runs in its own process (and
 * process group) with a deadline; a failed check prints both operands.
 * Helpers for multi-process tests: free ports, ranks as forked processes,
 * commands with a deadline and captured output.
 */
#ifndef DDPC_TEST_H
#define DDPC_TEST_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "ddpc/ddpc.h"

typedef void (*t_fn)(void);
void t_register(const char *name, t_fn fn, double timeout_s, const char *file);

#define TEST_T(name, secs)                                      \
    static void test_##name(void);                              \
    __attribute__((constructor)) static void reg_##name(void) { \
        t_register(#name, test_##name, (secs), __FILE__);       \
    }                                                           \
    static void test_##name(void)
#define TEST(name) TEST_T(name, 60)

void t_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
/* Ends the test as skipped (exit code 77), printing why. */
void t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define SKIP(...) t_skip(__VA_ARGS__)

#define CHECK(c)                                                      \
    do {                                                              \
        if (!(c)) t_fail(__FILE__, __LINE__, "CHECK(%s) failed", #c); \
    } while (0)
#define CHECK_MSG(c, ...)                                  \
    do {                                                   \
        if (!(c)) t_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#define CHECK_EQ(a, b)                                                                        \
    do {                                                                                      \
        long long t__a = (long long)(a), t__b = (long long)(b);                               \
        if (t__a != t__b)                                                                     \
            t_fail(__FILE__, __LINE__, "CHECK_EQ(%s, %s): %lld != %lld", #a, #b, t__a, t__b); \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                          \
    do {                                                                               \
        double t__a = (double)(a), t__b = (double)(b);                                 \
        if (!(t__a - t__b <= (tol) && t__b - t__a <= (tol)))                           \
            t_fail(__FILE__, __LINE__, "CHECK_NEAR(%s, %s, %g): %.9g vs %.9g", #a, #b, \
                   (double)(tol), t__a, t__b);                                         \
    } while (0)
#define CHECK_STR(a, b)                                                               \
    do {                                                                              \
        const char *t__a = (a), *t__b = (b);                                          \
        if (!t__a || !t__b || strcmp(t__a, t__b) != 0)                                \
            t_fail(__FILE__, __LINE__, "CHECK_STR(%s, %s): \"%s\" != \"%s\"", #a, #b, \
                   t__a ? t__a : "(null)", t__b ? t__b : "(null)");                   \
    } while (0)
#define CHECK_CONTAINS(hay, needle)                                                      \
    do {                                                                                 \
        const char *t__h = (hay), *t__n = (needle);                                      \
        if (!t__h || !strstr(t__h, t__n))                                                \
            t_fail(__FILE__, __LINE__, "%s does not contain \"%s\": \"%s\"", #hay, t__n, \
                   t__h ? t__h : "(null)");                                              \
    } while (0)
/* expr must return DDPC_OK; otherwise prints the status and ddpc_last_error(). */
#define CHECK_OK(expr)                                                                \
    do {                                                                              \
        ddpc_status t__s = (expr);                                                    \
        if (t__s != DDPC_OK)                                                          \
            t_fail(__FILE__, __LINE__, "%s -> %s (%s)", #expr, ddpc_status_str(t__s), \
                   ddpc_last_error());                                                \
    } while (0)
#define CHECK_STATUS(expr, want)                                                               \
    do {                                                                                       \
        ddpc_status t__s = (expr);                                                             \
        if (t__s != (want))                                                                    \
            t_fail(__FILE__, __LINE__, "%s -> %s, want %s (%s)", #expr, ddpc_status_str(t__s), \
                   ddpc_status_str(want), ddpc_last_error());                                  \
    } while (0)

/* A TCP port free on 127.0.0.1 right now. */
int t_free_port(void);
/* A port P free on 127.0.0.1 with P+1 free too (ddpc-run's store port). */
int t_free_port_pair(void);
/* Sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
 * MASTER_PORT=port in this process. */
void t_set_rank_env(int rank, int world, int port);

/* Forks world processes, each running fn(rank, world, arg) and exiting 0 if
 * it returns. Waits at most timeout_s for all; on a deadline kills them all.
 * Fails the test naming the first rank that failed, timed out or died. */
typedef void (*t_rank_fn)(int rank, int world, void *arg);
void t_run_ranks(int world, double timeout_s, t_rank_fn fn, void *arg);
/* Same, but returns each rank's wait status in status[] (-1 = killed on the
 * deadline) instead of failing. */
void t_run_ranks_status(int world, double timeout_s, t_rank_fn fn, void *arg, int *status);

/* Runs "sh -c cmd" with a deadline, stdout and stderr captured together into
 * out (NUL-terminated, truncated to outlen). Returns the exit code, 128+sig
 * when killed by a signal, or -1 when the deadline passed (then killed). */
int t_run_cmd(const char *cmd, double timeout_s, char *out, size_t outlen);
/* t_run_cmd with the command line built from fmt (at most 8 KiB). */
int t_run_cmdf(double timeout_s, char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The factor DDPC_TEST_SLOW puts on the harness's deadlines (1 by default);
 * a test that times something of its own against a deadline scales it too. */
double t_slow(void);
/* A scratch directory of this test process, made on first use; a path in
 * it (one of 8 rotating buffers); removing it and its files (flat), which
 * tests do when they pass, so a failure leaves its files to look at. */
const char *t_tmp_dir(void);
const char *t_tmp_path(const char *name);
void t_tmp_remove(void);
/* Writes text as the file name of the scratch directory; returns its path. */
const char *t_tmp_write(const char *name, const char *text);
/* Two test "hosts": network namespaces a and b joined by a veth pair, at
 * 198.18.<subnet>.1 and .2 (the range reserved for network benchmarking),
 * loopback up in each. Skips the test, saying why, when not root or when
 * ip netns fails. tag (a letter or two) keeps names apart between tests.
 * t_netns_del removes both (and so the veth pair). */
void t_netns_pair(const char *tag, int subnet, char a[32], char b[32]);
void t_netns_del(const char *a, const char *b);
/* Path of a built tool: $DDPC_BIN/name, else build/bin/name. One of 8
 * rotating static buffers, so several can be used in one printf. */
const char *t_bin(const char *name);

#endif
