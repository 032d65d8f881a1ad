/* test_store.c — the rendezvous store: every operation, timeouts, many
 * concurrent clients, prefixes, hostile input, and stopping with clients
 * connected. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "base/sock.h"
#include "ddpc/store.h"
#include "store/proto.h"
#include "test.h"

static ddpc_store_server *start(int *port) {
    ddpc_store_server *s = NULL;
    CHECK_OK(ddpc_store_server_create("127.0.0.1", 0, &s));
    *port = ddpc_store_server_port(s);
    CHECK(*port > 0);
    return s;
}

static ddpc_store *connect_to(int port) {
    ddpc_store *c = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &c));
    return c;
}

static void get_str(ddpc_store *c, const char *key, const char *want) {
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ddpc_store_get(c, key, 1, &v, &n));
    CHECK_EQ(n, strlen(want));
    CHECK_STR((char *)v, want);
    free(v);
}

TEST(store_every_op) {
    int port;
    ddpc_store_server *s = start(&port);
    ddpc_store *c = connect_to(port);

    CHECK_OK(ddpc_store_set(c, "k", "hello", 5));
    get_str(c, "k", "hello");
    CHECK_OK(ddpc_store_set(c, "k", "bye", 3)); /* overwrite */
    get_str(c, "k", "bye");
    CHECK_OK(ddpc_store_set(c, "empty", NULL, 0));
    get_str(c, "empty", "");

    int ex = -1;
    CHECK_OK(ddpc_store_check(c, "k", &ex));
    CHECK_EQ(ex, 1);
    CHECK_OK(ddpc_store_check(c, "nope", &ex));
    CHECK_EQ(ex, 0);

    int64_t r = 0, nk = 0;
    CHECK_OK(ddpc_store_add(c, "ctr", 5, &r)); /* absent = 0 */
    CHECK_EQ(r, 5);
    CHECK_OK(ddpc_store_add(c, "ctr", -7, &r));
    CHECK_EQ(r, -2);
    get_str(c, "ctr", "-2"); /* stored as decimal text, as torch does */
    CHECK_STATUS(ddpc_store_add(c, "k", 1, &r), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "not an integer");
    CHECK_OK(ddpc_store_set(c, "big", "9223372036854775807", 19));
    CHECK_STATUS(ddpc_store_add(c, "big", 1, NULL), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "overflows");

    /* compare-set, torch semantics */
    void *a = NULL;
    size_t an = 0;
    CHECK_OK(ddpc_store_compare_set(c, "cas", NULL, 0, "v1", 2, &a, &an)); /* absent, expected "" */
    CHECK_EQ(an, 2);
    CHECK(memcmp(a, "v1", 2) == 0);
    free(a);
    CHECK_OK(ddpc_store_compare_set(c, "cas", "zz", 2, "v2", 2, &a, &an)); /* mismatch: unchanged */
    CHECK_STR((char *)a, "v1");
    free(a);
    CHECK_OK(ddpc_store_compare_set(c, "cas", "v1", 2, "v2", 2, &a, &an)); /* match: swapped */
    CHECK_STR((char *)a, "v2");
    free(a);
    CHECK_OK(
        ddpc_store_compare_set(c, "absent", "x", 1, "y", 1, &a, &an)); /* absent, expected "x" */
    CHECK_STR((char *)a, "x");
    free(a);
    CHECK_OK(ddpc_store_check(c, "absent", &ex));
    CHECK_EQ(ex, 0);
    CHECK_OK(ddpc_store_compare_set(c, "cas", "v2", 2, "v3", 2, NULL, NULL));
    get_str(c, "cas", "v3");

    const char *keys[] = { "k", "ctr", "cas" };
    CHECK_OK(ddpc_store_wait(c, keys, 3, 1));

    CHECK_OK(ddpc_store_num_keys(c, &nk));
    CHECK_EQ(nk, 5); /* k, empty, ctr, big, cas */
    int del = -1;
    CHECK_OK(ddpc_store_delete(c, "k", &del));
    CHECK_EQ(del, 1);
    CHECK_OK(ddpc_store_delete(c, "k", &del));
    CHECK_EQ(del, 0);
    CHECK_OK(ddpc_store_num_keys(c, &nk));
    CHECK_EQ(nk, 4);
    CHECK_OK(ddpc_store_ping(c));

    /* a large binary value survives intact */
    size_t big = (8u << 20) + 3;
    unsigned char *buf = malloc(big);
    for (size_t i = 0; i < big; i++) buf[i] = (unsigned char)(i * 131 + (i >> 13));
    CHECK_OK(ddpc_store_set(c, "blob", buf, big));
    void *v = NULL;
    size_t vn = 0;
    CHECK_OK(ddpc_store_get(c, "blob", 1, &v, &vn));
    CHECK_EQ(vn, big);
    CHECK(memcmp(v, buf, big) == 0);
    free(v);
    free(buf);

    ddpc_store_destroy(c);
    ddpc_store_server_destroy(s);
    ddpc_store_destroy(NULL);
    ddpc_store_server_destroy(NULL);
}

TEST(store_client_checks_its_arguments) {
    int port;
    ddpc_store_server *s = start(&port);
    ddpc_store *c = connect_to(port);
    char key[DDPC_STORE_MAX_KEY + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = 0;
    CHECK_STATUS(ddpc_store_set(c, key, "x", 1), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_STORE_MAX_KEY");
    CHECK_STATUS(ddpc_store_set(c, "", "x", 1), DDPC_ERR_INVALID_ARG);
    CHECK_STATUS(ddpc_store_set(c, "k", "x", (size_t)DDPC_STORE_MAX_VALUE + 1),
                 DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_STORE_MAX_VALUE");
    key[DDPC_STORE_MAX_KEY] = 0; /* exactly the limit is fine */
    CHECK_OK(ddpc_store_set(c, key, "x", 1));
    CHECK_OK(ddpc_store_ping(c));
    ddpc_store_destroy(c);
    ddpc_store_server_destroy(s);
}

TEST(store_get_times_out_then_succeeds) {
    int port;
    ddpc_store_server *s = start(&port);
    ddpc_store *c = connect_to(port);
    void *v = NULL;
    size_t n;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_get(c, "late", 0.3, &v, &n), DDPC_ERR_TIMEOUT);
    double dt = ddpc__now() - t0;
    CHECK_MSG(dt >= 0.28 && dt < 2.0 * t_slow(), "get timed out after %.3f s, want ~0.3", dt);
    CHECK_CONTAINS(ddpc_last_error(), "late");
    CHECK_STATUS(ddpc_store_get(c, "late", 0, &v, &n), DDPC_ERR_TIMEOUT); /* look once */

    /* the stream is still in step: a child sets the key while we wait */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        ddpc_store *cc = NULL;
        ddpc__sleep(0.3);
        if (ddpc_store_create_tcp("127.0.0.1", port, 5, &cc) != DDPC_OK) _exit(1);
        if (ddpc_store_set(cc, "late", "now", 3) != DDPC_OK) _exit(2);
        ddpc_store_destroy(cc);
        _exit(0);
    }
    t0 = ddpc__now();
    CHECK_OK(ddpc_store_get(c, "late", 10, &v, &n));
    dt = ddpc__now() - t0;
    CHECK_STR((char *)v, "now");
    free(v);
    CHECK_MSG(dt >= 0.2 && dt < 5 * t_slow(), "get returned after %.3f s", dt);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ddpc_store_destroy(c);
    ddpc_store_server_destroy(s);
}

TEST(store_wait_times_out_naming_keys_then_succeeds) {
    int port;
    ddpc_store_server *s = start(&port);
    ddpc_store *c = connect_to(port);
    CHECK_OK(ddpc_store_set(c, "a", "1", 1));
    const char *keys[] = { "a", "missing_b", "missing_c" };
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_wait(c, keys, 3, 0.25), DDPC_ERR_TIMEOUT);
    CHECK(ddpc__now() - t0 >= 0.23);
    CHECK_CONTAINS(ddpc_last_error(), "2 of 3 keys");
    CHECK_CONTAINS(ddpc_last_error(), "missing_b");
    CHECK_CONTAINS(ddpc_last_error(), "missing_c");

    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        ddpc_store *cc = NULL;
        if (ddpc_store_create_tcp("127.0.0.1", port, 5, &cc) != DDPC_OK) _exit(1);
        ddpc__sleep(0.2);
        ddpc_store_set(cc, "missing_b", "", 0);
        ddpc__sleep(0.2);
        ddpc_store_set(cc, "missing_c", "", 0);
        ddpc_store_destroy(cc);
        _exit(0);
    }
    t0 = ddpc__now();
    CHECK_OK(ddpc_store_wait(c, keys, 3, 10));
    CHECK(ddpc__now() - t0 >= 0.3);
    waitpid(pid, NULL, 0);
    ddpc_store_destroy(c);
    ddpc_store_server_destroy(s);
}

TEST_T(store_many_clients_add, 60) {
    int port;
    ddpc_store_server *s = start(&port);
    enum { PROCS = 24, ADDS = 200 };
    pid_t pids[PROCS];
    fflush(NULL);
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            ddpc_store *c = NULL;
            if (ddpc_store_create_tcp("127.0.0.1", port, 10, &c) != DDPC_OK) _exit(1);
            for (int i = 0; i < ADDS; i++)
                if (ddpc_store_add(c, "counter", 1, NULL) != DDPC_OK) _exit(2);
            char key[32];
            snprintf(key, sizeof key, "done/%d", p);
            if (ddpc_store_set(c, key, "1", 1) != DDPC_OK) _exit(3);
            /* everyone waits for everyone: a barrier through the store */
            int64_t arrived;
            if (ddpc_store_add(c, "arrived", 1, &arrived) != DDPC_OK) _exit(4);
            void *v;
            size_t n;
            if (arrived == PROCS) ddpc_store_set(c, "go", "", 0);
            if (ddpc_store_get(c, "go", 20, &v, &n) != DDPC_OK) _exit(5);
            free(v);
            ddpc_store_destroy(c);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int st;
        waitpid(pids[p], &st, 0);
        CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d failed (status 0x%x)", p, st);
    }
    ddpc_store *c = connect_to(port);
    int64_t r;
    CHECK_OK(ddpc_store_add(c, "counter", 0, &r));
    CHECK_EQ(r, PROCS * ADDS);
    int64_t nk;
    CHECK_OK(ddpc_store_num_keys(c, &nk));
    CHECK_EQ(nk, PROCS + 3); /* done/N, counter, arrived, go */
    ddpc_store_destroy(c);
    ddpc_store_server_destroy(s);
}

TEST(store_prefixes) {
    int port;
    ddpc_store_server *s = start(&port);
    ddpc_store *c = connect_to(port), *g0, *g1, *nested;
    CHECK_OK(ddpc_store_prefixed(c, "gen0/", &g0));
    CHECK_OK(ddpc_store_prefixed(c, "gen1/", &g1));
    CHECK_OK(ddpc_store_prefixed(g0, "rank/", &nested));
    CHECK_OK(ddpc_store_set(g0, "x", "zero", 4));
    CHECK_OK(ddpc_store_set(g1, "x", "one", 3));
    CHECK_OK(ddpc_store_set(nested, "3", "addr", 4));
    get_str(c, "gen0/x", "zero");
    get_str(c, "gen1/x", "one");
    get_str(g0, "rank/3", "addr");
    get_str(nested, "3", "addr");
    int ex;
    CHECK_OK(ddpc_store_check(g1, "rank/3", &ex));
    CHECK_EQ(ex, 0);
    int64_t r;
    CHECK_OK(ddpc_store_add(nested, "n", 2, &r));
    CHECK_OK(ddpc_store_add(c, "gen0/rank/n", 3, &r));
    CHECK_EQ(r, 5);
    const char *keys[] = { "x", "rank/3" };
    CHECK_OK(ddpc_store_wait(g0, keys, 2, 1));
    CHECK_STATUS(ddpc_store_wait(g1, keys, 2, 0.05), DDPC_ERR_TIMEOUT);
    CHECK_CONTAINS(ddpc_last_error(), "gen1/rank/3");
    int64_t nk;
    CHECK_OK(ddpc_store_num_keys(nested, &nk)); /* the whole store */
    CHECK_EQ(nk, 4);
    int del;
    CHECK_OK(ddpc_store_delete(g1, "x", &del));
    CHECK_EQ(del, 1);
    get_str(g0, "x", "zero");
    /* a prefix that leaves no room for a key is refused */
    char longp[DDPC_STORE_MAX_KEY + 1];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    ddpc_store *bad = (ddpc_store *)1;
    CHECK_STATUS(ddpc_store_prefixed(c, longp, &bad), DDPC_ERR_INVALID_ARG);
    CHECK(bad == NULL);
    ddpc_store_destroy(nested);
    ddpc_store_destroy(g1);
    ddpc_store_destroy(g0);
    ddpc_store_destroy(c);
    ddpc_store_server_destroy(s);
}

/* ------------------------------------------------------- hostile input */

static int raw_connect(int port) {
    int fd = -1;
    CHECK_OK(ddpc__sock_connect("127.0.0.1", port, ddpc__deadline_in(5), &fd));
    return fd;
}

static void raw_send(int fd, const void *p, size_t n) {
    CHECK_OK(ddpc__sock_write_full(fd, p, n, ddpc__deadline_in(5), -1));
}

static void raw_handshake(int fd) {
    unsigned char hs[8], hdr[4], body[5];
    put_u32(hs, STORE_MAGIC);
    put_u32(hs + 4, STORE_VERSION);
    raw_send(fd, hs, 8);
    CHECK_OK(ddpc__sock_read_full(fd, hdr, 4, ddpc__deadline_in(5), -1));
    CHECK_EQ(get_u32(hdr), 5);
    CHECK_OK(ddpc__sock_read_full(fd, body, 5, ddpc__deadline_in(5), -1));
    CHECK_EQ(body[0], RS_OK);
}

/* Reads one reply frame; expects RS_ERROR whose message contains want,
 * then the server closing the connection. */
static void expect_error_then_close(int fd, const char *want) {
    unsigned char hdr[4];
    char msg[2048];
    CHECK_OK(ddpc__sock_read_full(fd, hdr, 4, ddpc__deadline_in(5), -1));
    uint32_t len = get_u32(hdr);
    CHECK(len >= 1 && len < sizeof msg);
    CHECK_OK(ddpc__sock_read_full(fd, msg, len, ddpc__deadline_in(5), -1));
    msg[len] = 0;
    CHECK_EQ(msg[0], RS_ERROR);
    CHECK_CONTAINS(msg + 1, want);
    char c;
    CHECK_STATUS(ddpc__sock_read_full(fd, &c, 1, ddpc__deadline_in(5), -1), DDPC_ERR_PEER_LOST);
    close(fd);
}

static void good_client_works(int port) {
    ddpc_store *c = connect_to(port);
    int64_t r;
    CHECK_OK(ddpc_store_add(c, "alive", 1, &r));
    get_str(c, "alive", "1");
    CHECK_OK(ddpc_store_delete(c, "alive", NULL));
    ddpc_store_destroy(c);
}

TEST(store_survives_garbage_and_bad_handshakes) {
    int port;
    ddpc_store_server *s = start(&port);
    /* a client that holds a half-sent frame the whole time stalls no one */
    int slow = raw_connect(port);
    raw_handshake(slow);
    unsigned char part[6] = { 100, 0, 0, 0, OP_SET, 3 };
    raw_send(slow, part, sizeof part);

    int fd = raw_connect(port);
    raw_send(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
    expect_error_then_close(fd, "bad handshake: magic");
    good_client_works(port);

    fd = raw_connect(port);
    unsigned char hs[8];
    put_u32(hs, STORE_MAGIC);
    put_u32(hs + 4, 99);
    raw_send(fd, hs, 8);
    expect_error_then_close(fd, "version 99 is not supported");
    good_client_works(port);

    /* the client side reports a refused handshake clearly (a first byte
     * below 9 would be a TCPStore query) */
    fd = raw_connect(port);
    raw_send(fd, "\xff\0\0\0\0\0\0\0", 8);
    expect_error_then_close(fd, "magic 0x000000ff");

    /* random bytes after a good handshake */
    fd = raw_connect(port);
    raw_handshake(fd);
    unsigned char junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (unsigned char)(i * 37 + 11);
    put_u32(junk, 60);
    junk[4] = 0xee;
    raw_send(fd, junk, 64);
    expect_error_then_close(fd, "unknown operation");
    good_client_works(port);
    close(slow);
    ddpc_store_server_destroy(s);
}

TEST(store_survives_truncated_and_oversized_frames) {
    int port;
    ddpc_store_server *s = start(&port);
    unsigned char f[64];

    /* truncated: a frame announcing 100 bytes, 10 sent, then half-close */
    int fd = raw_connect(port);
    raw_handshake(fd);
    memset(f, 0, sizeof f);
    put_u32(f, 100);
    f[4] = OP_SET;
    raw_send(fd, f, 14);
    shutdown(fd, SHUT_WR);
    expect_error_then_close(fd, "truncated frame");
    good_client_works(port);

    /* truncated inside the handshake */
    fd = raw_connect(port);
    raw_send(fd, "DDP", 3);
    shutdown(fd, SHUT_WR);
    expect_error_then_close(fd, "truncated frame");

    /* an oversized length header is refused before any body is read */
    fd = raw_connect(port);
    raw_handshake(fd);
    put_u32(f, 0xffffffffu);
    raw_send(fd, f, 4);
    expect_error_then_close(fd, "exceeds the store's limit");
    good_client_works(port);

    /* an empty frame */
    fd = raw_connect(port);
    raw_handshake(fd);
    put_u32(f, 0);
    raw_send(fd, f, 4);
    expect_error_then_close(fd, "empty frame");

    /* a key longer than DDPC_STORE_MAX_KEY */
    fd = raw_connect(port);
    raw_handshake(fd);
    put_u32(f, 1 + 4 + 8);
    f[4] = OP_CHECK;
    put_u32(f + 5, DDPC_STORE_MAX_KEY + 1);
    raw_send(fd, f, 4 + 1 + 4 + 8);
    expect_error_then_close(fd, "DDPC_STORE_MAX_KEY");
    good_client_works(port);

    /* a value longer than DDPC_STORE_MAX_VALUE */
    fd = raw_connect(port);
    raw_handshake(fd);
    put_u32(f, 1 + 4 + 1 + 4 + 16);
    f[4] = OP_SET;
    put_u32(f + 5, 1);
    f[9] = 'k';
    put_u32(f + 10, DDPC_STORE_MAX_VALUE + 1);
    raw_send(fd, f, 4 + 1 + 4 + 1 + 4 + 16);
    expect_error_then_close(fd, "DDPC_STORE_MAX_VALUE");

    /* fields that overrun their frame */
    fd = raw_connect(port);
    raw_handshake(fd);
    put_u32(f, 1 + 4 + 2);
    f[4] = OP_GET;
    put_u32(f + 5, 100);
    raw_send(fd, f, 4 + 1 + 4 + 2);
    expect_error_then_close(fd, "get: malformed");

    /* a request with trailing bytes */
    fd = raw_connect(port);
    raw_handshake(fd);
    put_u32(f, 1 + 3);
    f[4] = OP_NUM_KEYS;
    raw_send(fd, f, 4 + 1 + 3);
    expect_error_then_close(fd, "num_keys: malformed");

    good_client_works(port);
    ddpc_store_server_destroy(s);
}

TEST(store_client_names_a_dead_server) {
    int port = t_free_port();
    ddpc_store *c = (ddpc_store *)1;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_create_tcp("127.0.0.1", port, 0.3, &c), DDPC_ERR_TIMEOUT);
    CHECK(ddpc__now() - t0 < 2 * t_slow());
    CHECK(c == NULL);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    CHECK_CONTAINS(ddpc_last_error(), want);

    /* a server that dies under a connected client */
    ddpc_store_server *s = start(&port);
    c = connect_to(port);
    CHECK_OK(ddpc_store_set(c, "k", "v", 1));
    ddpc_store_server_destroy(s);
    CHECK_STATUS(ddpc_store_set(c, "k", "v", 1), DDPC_ERR_PEER_LOST);
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    CHECK_CONTAINS(ddpc_last_error(), want);
    CHECK_STATUS(ddpc_store_ping(c), DDPC_ERR_PEER_LOST); /* stays broken, says so */
    CHECK_CONTAINS(ddpc_last_error(), want);
    ddpc_store_destroy(c);
}

TEST(store_stop_with_clients_connected_and_waiting) {
    int port;
    ddpc_store_server *s = start(&port);
    ddpc_store *idle = connect_to(port);
    int half = raw_connect(port); /* mid-handshake */
    raw_send(half, "DD", 2);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* blocked in a long get when the server goes */
        ddpc_store *c = NULL;
        if (ddpc_store_create_tcp("127.0.0.1", port, 5, &c) != DDPC_OK) _exit(1);
        if (ddpc_store_set(c, "waiting", "", 0) != DDPC_OK) _exit(2);
        void *v;
        size_t n;
        double t0 = ddpc__now();
        ddpc_status st = ddpc_store_get(c, "never", 30, &v, &n);
        if (st != DDPC_ERR_PEER_LOST) _exit(3);
        if (ddpc__now() - t0 > 10) _exit(4);
        _exit(0);
    }
    void *v;
    size_t n;
    CHECK_OK(ddpc_store_get(idle, "waiting", 10, &v, &n));
    free(v);
    ddpc__sleep(0.1); /* the child is parked in its get */
    double t0 = ddpc__now();
    ddpc_store_server_destroy(s);
    CHECK(ddpc__now() - t0 < 2 * t_slow());
    int st;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "waiting client: status 0x%x", st);
    CHECK_STATUS(ddpc_store_ping(idle), DDPC_ERR_PEER_LOST);
    ddpc_store_destroy(idle);
    close(half);
}

TEST_T(store_random_frames_fuzz, 60) {
    int port;
    ddpc_store_server *s = start(&port);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    unsigned char f[600];
    for (int iter = 0; iter < 300; iter++) {
        int fd = raw_connect(port);
        raw_handshake(fd);
        size_t len = 0;
        for (int frames = 0; frames < 3; frames++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            len = 1 + (size_t)(x % 500);
            for (size_t i = 0; i < len + 4; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                f[i] = (unsigned char)x;
            }
            put_u32(f, (uint32_t)len);
            f[4] =
                (unsigned char)(1 + f[4] % (OP_COUNT + 1)); /* mostly real ops, with bad fields */
            if (ddpc__sock_write_full(fd, f, len + 4, ddpc__deadline_in(1), -1) != DDPC_OK) break;
        }
        char buf[256];
        ddpc__sock_read_full(fd, buf, sizeof buf, ddpc__deadline_in(0.02), -1); /* whatever comes */
        close(fd);
        if (iter % 50 == 0) good_client_works(port);
    }
    good_client_works(port);
    ddpc_store_server_destroy(s);
}
