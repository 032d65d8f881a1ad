/* test_base.c — status strings, dtypes, half/bfloat16, env parsing, sockets,
 * string buffers and rank lists, fnv1a, condition waits with a deadline. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "base/sock.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "test.h"

TEST(base_status_strings) {
    for (int s = 0; s < DDPC_STATUS_COUNT; s++) CHECK(strlen(ddpc_status_str((ddpc_status)s)) > 0);
    CHECK_STR(ddpc_status_str((ddpc_status)999), "unknown status");
    CHECK_EQ(ddpc__err(DDPC_ERR_ENV, "RANK=%s bad", "x"), DDPC_ERR_ENV);
    CHECK_STR(ddpc_last_error(), "RANK=x bad");
}

/* The CPUs this process may use, not those the host has: narrowing the
 * affinity (this test's own process) narrows the count. */
TEST(base_cpu_count_follows_affinity) {
    cpu_set_t set;
    CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
    CHECK_EQ(ddpc__cpu_count(), (long)CPU_COUNT(&set));
    int first = 0;
    while (!CPU_ISSET(first, &set)) first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK_EQ(ddpc__cpu_count(), 1);
    CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

TEST(base_dtype_parse) {
    ddpc_dtype t;
    CHECK_OK(ddpc_dtype_parse("float", &t));
    CHECK_EQ(t, DDPC_FLOAT32);
    CHECK_OK(ddpc_dtype_parse("bf16", &t));
    CHECK_EQ(t, DDPC_BFLOAT16);
    CHECK_STATUS(ddpc_dtype_parse("float128", &t), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "float128");
    ddpc_op op;
    CHECK_OK(ddpc_op_parse("avg", &op));
    CHECK_EQ(op, DDPC_AVG);
    CHECK_EQ(ddpc_dtype_size(DDPC_FLOAT16), 2);
    CHECK_EQ(ddpc_dtype_size((ddpc_dtype)77), 0);
}

/* int16 / uint16 and the bitwise ops: names, sizes, aliases; every name
 * parses back to its own value. */
TEST(base_dtype_op_names) {
    static const struct {
        const char *s;
        ddpc_dtype t;
    } ds[] = {
        { "int16", DDPC_INT16 },   { "i16", DDPC_INT16 },     { "short", DDPC_INT16 },
        { "INT16", DDPC_INT16 },   { "uint16", DDPC_UINT16 }, { "u16", DDPC_UINT16 },
        { "ushort", DDPC_UINT16 },
    };
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        ddpc_dtype t = DDPC_FLOAT32;
        CHECK_OK(ddpc_dtype_parse(ds[i].s, &t));
        CHECK_MSG(t == ds[i].t, "'%s' parsed as %s", ds[i].s, ddpc_dtype_name(t));
    }
    CHECK_STR(ddpc_dtype_name(DDPC_INT16), "int16");
    CHECK_STR(ddpc_dtype_name(DDPC_UINT16), "uint16");
    CHECK_EQ(ddpc_dtype_size(DDPC_INT16), 2);
    CHECK_EQ(ddpc_dtype_size(DDPC_UINT16), 2);
    CHECK_STR(ddpc_dtype_name(DDPC_DTYPE_COUNT), "?");
    CHECK_EQ(ddpc_dtype_size(DDPC_DTYPE_COUNT), 0);
    for (int t = 0; t < DDPC_DTYPE_COUNT; t++) {
        ddpc_dtype back = DDPC_DTYPE_COUNT;
        CHECK(ddpc_dtype_size((ddpc_dtype)t) > 0);
        CHECK_OK(ddpc_dtype_parse(ddpc_dtype_name((ddpc_dtype)t), &back));
        CHECK_EQ(back, t);
    }

    static const char *const ops[] = { "band", "bor", "bxor" };
    for (int i = 0; i < 3; i++) {
        ddpc_op op = DDPC_SUM;
        CHECK_OK(ddpc_op_parse(ops[i], &op));
        CHECK_EQ(op, DDPC_BAND + i);
        CHECK_STR(ddpc_op_name(op), ops[i]);
    }
    for (int o = 0; o < DDPC_OP_COUNT; o++) {
        ddpc_op back = DDPC_OP_COUNT;
        CHECK_OK(ddpc_op_parse(ddpc_op_name((ddpc_op)o), &back));
        CHECK_EQ(back, o);
    }
    CHECK_STR(ddpc_op_name(DDPC_OP_COUNT), "?");
    ddpc_op op;
    CHECK_STATUS(ddpc_op_parse("xor", &op), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "bxor"); /* the list of known ops */
    ddpc_dtype t;
    CHECK_STATUS(ddpc_dtype_parse("int12", &t), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "int16, uint16");
}

TEST(base_half_roundtrip) {
    /* every half value survives half -> float -> half (NaNs stay NaN) */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ddpc_half_to_float((uint16_t)h);
        uint16_t back = ddpc_float_to_half(f);
        if (isnan(f))
            CHECK(isnan(ddpc_half_to_float(back)));
        else
            CHECK_EQ(back, h);
    }
    CHECK_NEAR(ddpc_half_to_float(0x3c00), 1.0, 0);
    CHECK_EQ(ddpc_float_to_half(65504.0f), 0x7bff);
    CHECK_EQ(ddpc_float_to_half(1e6f), 0x7c00);
    CHECK_EQ(ddpc_float_to_half(5.96046448e-8f), 0x0001);     /* smallest subnormal */
    CHECK_EQ(ddpc_float_to_half(1.0f + 1.0f / 2048), 0x3c00); /* tie rounds to even */
    CHECK_EQ(ddpc_float_to_half(1.0f + 3.0f / 2048), 0x3c02);
}

TEST(base_bf16_roundtrip) {
    for (uint32_t b = 0; b < 65536; b++) {
        float f = ddpc_bf16_to_float((uint16_t)b);
        if (isnan(f)) continue;
        CHECK_EQ(ddpc_float_to_bf16(f), b);
    }
    CHECK_EQ(ddpc_float_to_bf16(1.0f), 0x3f80);
    CHECK_EQ(ddpc_float_to_bf16(1.00390625f), 0x3f80); /* tie to even */
}

TEST(base_env_parse) {
    double t;
    setenv("DDPC_TIMEOUT", "12", 1);
    CHECK_OK(ddpc__env_double(DDPC_ENV_TIMEOUT, &t));
    CHECK_EQ(t, 12);
    unsetenv("DDPC_TIMEOUT");
    setenv("HCCL_EXEC_TIMEOUT", "7x", 1); /* the alias's malformed value is named */
    CHECK_STATUS(ddpc__env_double(DDPC_ENV_TIMEOUT, &t), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_EXEC_TIMEOUT='7x'");
    size_t sz;
    CHECK_OK(ddpc__parse_size("-b", "4K", &sz));
    CHECK_EQ(sz, 4096);
    CHECK_OK(ddpc__parse_size("-e", "64M", &sz));
    CHECK_EQ(sz, 64u << 20);
    CHECK_STATUS(ddpc__parse_size("-e", "12Q", &sz), DDPC_ERR_INVALID_ARG);
}

TEST(base_sock_roundtrip) {
    int lfd, port, cfd, afd;
    CHECK_OK(ddpc__sock_listen("127.0.0.1", 0, 4, &lfd, &port));
    CHECK(port > 0);
    CHECK_OK(ddpc__sock_connect("127.0.0.1", port, ddpc__deadline_in(5), &cfd));
    CHECK_OK(ddpc__sock_accept(lfd, ddpc__deadline_in(5), -1, &afd));
    char big[1 << 16], got[1 << 16];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)(i * 7);
    CHECK_OK(ddpc__sock_write_full(cfd, big, sizeof big, ddpc__deadline_in(5), -1));
    CHECK_OK(ddpc__sock_read_full(afd, got, sizeof got, ddpc__deadline_in(5), -1));
    CHECK(memcmp(big, got, sizeof big) == 0);
    /* a read with nothing coming times out, and a closed peer is PEER_LOST */
    CHECK_STATUS(ddpc__sock_read_full(afd, got, 1, ddpc__deadline_in(0.05), -1), DDPC_ERR_TIMEOUT);
    close(cfd);
    CHECK_STATUS(ddpc__sock_read_full(afd, got, 1, ddpc__deadline_in(5), -1), DDPC_ERR_PEER_LOST);
    /* the same port again is "in use" */
    int lfd2, p2;
    CHECK_STATUS(ddpc__sock_listen("127.0.0.1", port, 4, &lfd2, &p2), DDPC_ERR_SYSTEM);
    CHECK_CONTAINS(ddpc_last_error(), "in use");
    close(afd);
    close(lfd);
}

TEST(base_sock_connect_refused_times_out) {
    int port = t_free_port(), fd;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc__sock_connect("127.0.0.1", port, ddpc__deadline_in(0.3), &fd),
                 DDPC_ERR_TIMEOUT);
    CHECK(ddpc__now() - t0 < 2.0 * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), "cannot connect to 127.0.0.1");
}

/* A fixed buffer drops a piece that does not fit whole, and every later
 * one; a heap buffer grows past any one printf's scratch space. */
TEST(base_strbuf) {
    char arr[8];
    ddpc__strbuf b;
    ddpc__sb_fixed(&b, arr, sizeof arr);
    CHECK_STR(arr, "");
    ddpc__sb_printf(&b, "%d,", 123);
    ddpc__sb_puts(&b, "ab");
    CHECK_STR(arr, "123,ab");
    ddpc__sb_puts(&b, "cd"); /* 8 bytes with the NUL: dropped */
    CHECK(b.cut);
    ddpc__sb_puts(&b, "e");
    CHECK_STR(arr, "123,ab");
    CHECK_EQ(b.len, 6);

    ddpc__strbuf h = DDPC_STRBUF_HEAP;
    ddpc__sb_put(&h, "", 0);
    CHECK(h.p != NULL);
    CHECK_STR(h.p, "");
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    for (int i = 0; i < 5; i++) ddpc__sb_printf(&h, "%s%d", big, i);
    CHECK_EQ(h.len, 5 * 1000);
    CHECK(!h.oom && !h.cut);
    CHECK_EQ(h.p[999], '0');
    CHECK_EQ(h.p[4999], '4');
    CHECK_EQ(strlen(h.p), 5000);
    ddpc__sb_free(&h);
    CHECK(h.p == NULL && h.len == 0);
}

TEST(base_rank_runs) {
    static const struct {
        int r[8];
        int n;
        const char *want;
    } cs[] = {
        { { 0 }, 0, "" },
        { { 5 }, 1, "5" },
        { { 0, 1, 2, 3, 5 }, 5, "0-3,5" },
        { { 1, 2, 4, 6, 7, 8 }, 6, "1-2,4,6-8" },
        { { 0, 2, 4 }, 3, "0,2,4" },
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        char out[64];
        ddpc__strbuf b;
        ddpc__sb_fixed(&b, out, sizeof out);
        ddpc__sb_ranks(&b, cs[i].r, cs[i].n);
        CHECK_STR(out, cs[i].want);
    }
}

/* The published FNV-1a 64 test vectors (the copies this replaces had lost
 * the offset basis's last digit). */
TEST(base_fnv1a) {
    CHECK(ddpc__fnv1a("", 0) == 0xcbf29ce484222325ull);
    CHECK(ddpc__fnv1a("a", 1) == 0xaf63dc4c8601ec8cull);
    CHECK(ddpc__fnv1a("foobar", 6) == 0x85944171f73967e8ull);
}

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int flag;
} waiter;

static void *set_flag_later(void *arg) {
    waiter *w = arg;
    ddpc__sleep(0.05);
    pthread_mutex_lock(&w->mu);
    w->flag = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* A wait ends at its deadline, at its cap, or when signalled; a deadline
 * already past returns at once. */
TEST(base_cond_wait_until) {
    waiter w = { .flag = 0 };
    pthread_mutex_init(&w.mu, NULL);
    CHECK_EQ(ddpc__cond_init_monotonic(&w.cv), 0);
    pthread_mutex_lock(&w.mu);
    double t0 = ddpc__now();
    ddpc__cond_wait_until(&w.cv, &w.mu, t0 - 1, 0);
    CHECK(ddpc__now() - t0 < 0.05);
    t0 = ddpc__now();
    double deadline = t0 + 0.1;
    while (ddpc__now() < deadline) ddpc__cond_wait_until(&w.cv, &w.mu, deadline, 0);
    CHECK(ddpc__now() - t0 >= 0.1);
    CHECK(ddpc__now() - t0 < 5 * t_slow());
    t0 = ddpc__now();
    ddpc__cond_wait_until(&w.cv, &w.mu, INFINITY, 0.05);
    CHECK(ddpc__now() - t0 < 5 * t_slow());
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, set_flag_later, &w), 0);
    t0 = ddpc__now();
    while (!w.flag) ddpc__cond_wait_until(&w.cv, &w.mu, INFINITY, 0);
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    CHECK(w.flag);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
}
