/* test_torch_store.c — ddpc's store against PyTorch's real c10d TCPStore
 * (python3-torch, torch 1.13), both ways:
 *
 *   torch_store_torch_client_vs_ddpc_server  PyTorch's TCPStore client runs
 *       every operation it has against ddpc's server (tests/py/
 *       tcpstore_peer.py client), then the C side reads what it left;
 *   torch_store_ddpc_client_vs_torch_server  ddpc's client detects a TCPStore
 *       server hosted by PyTorch (tcpstore_peer.py server) and runs every
 *       ddpc_store_* call against it;
 *   torch_store_ddpc_client_vs_ddpc_server   the same client still speaks
 *       ddpc's protocol to ddpc's server, and DDPC_STORE_PROTOCOL=torch forces
 *       TCPStore's protocol on it (the server speaks both).
 *
 * Key names: torch 1.13's TCPStore sends every key with "/" in front (Python
 * key K is "/K" on the wire; the constructor's "init/" counter excepted); a
 * ddpc client sends its keys as they are, in either protocol. So the C side
 * reaches Python's keys through a view with prefix "/".
 *
 * The PyTorch tests skip when /usr/bin/python3 cannot import torch. Every
 * process they start is bounded (the harness's deadline on the command, a
 * deadline on the background server, SIGALRM inside the Python script) and
 * everything is on 127.0.0.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "ddpc/store.h"
#include "test.h"

#define PYTHON  "/usr/bin/python3"
#define BIG_LEN ((1u << 20) + 3) /* tcpstore_peer.py's BIG_LEN */

/* ------------------------------------------------------------ helpers */

/* The Python to run PyTorch's side with: Debian's torch 1.13 (PYTHON), or
 * with torch2 the torch 2.x Python named by DDPC_TEST_TORCH2_PY (the
 * Makefile's venv). Skips the test unless it can import torch. */
static const char *need_torch(int torch2) {
    static char out[4096];
    const char *py = PYTHON;
    if (torch2) {
        py = getenv("DDPC_TEST_TORCH2_PY");
        if (!py || !*py)
            SKIP("DDPC_TEST_TORCH2_PY is unset: it names a Python with torch 2.x (the Makefile "
                 "sets build/venv-torch2/bin/python)");
        if (access(py, X_OK) != 0)
            SKIP("DDPC_TEST_TORCH2_PY=%s is not an executable (%s)", py, strerror(errno));
    }
    char cmd[PATH_MAX + 160];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import sys, torch.distributed; v = torch.__version__; "
             "sys.exit(0 if v.split(\".\")[0] %s \"1\" else 3)' 2>&1",
             py, torch2 ? "!=" : "==");
    int rc = t_run_cmd(cmd, 60, out, sizeof out);
    if (rc == 3)
        SKIP("%s has torch %s, not %s", py, torch2 ? "1.x" : "2.x", torch2 ? "2.x" : "1.13");
    if (rc != 0)
        SKIP("PyTorch is not available to %s (%s): %.300s", py,
             torch2 ? "set DDPC_TEST_TORCH2_PY to a Python with torch 2.x"
                    : "install python3-torch",
             out);
    return py;
}

/* tests/py/tcpstore_peer.py: from the working directory (the repository
 * root under make test), else from a directory above this binary. */
static const char *peer_script(void) {
    static char path[PATH_MAX + 64];
    const char *rel = "tests/py/tcpstore_peer.py";
    if (access(rel, R_OK) == 0) return rel;
    char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n > 0) {
        dir[n] = 0;
        for (int up = 0; up < 6; up++) {
            char *slash = strrchr(dir, '/');
            if (!slash || slash == dir) break;
            *slash = 0;
            snprintf(path, sizeof path, "%s/%s", dir, rel);
            if (access(path, R_OK) == 0) return path;
        }
    }
    t_fail(__FILE__, __LINE__, "cannot find %s (run from the repository root)", rel);
}

/* 1 MiB + 3 bytes in which every byte value occurs (tcpstore_peer.py's
 * big_value()). The caller frees. */
static unsigned char *big_value(void) {
    unsigned char *b = malloc(BIG_LEN);
    CHECK(b != NULL);
    for (size_t i = 0; i < BIG_LEN; i++) b[i] = (unsigned char)((i * 131 + (i >> 13)) & 0xff);
    return b;
}

/* key's value must be exactly want[0 .. wlen). */
static void get_is(ddpc_store *st, const char *key, const void *want, size_t wlen,
                   double timeout_s) {
    void *v = NULL;
    size_t n = 0;
    ddpc_status s = ddpc_store_get(st, key, timeout_s, &v, &n);
    CHECK_MSG(s == DDPC_OK, "get '%s' -> %s (%s)", key, ddpc_status_str(s), ddpc_last_error());
    CHECK_MSG(n == wlen, "get '%s': %zu bytes, want %zu", key, n, wlen);
    CHECK_MSG(wlen == 0 || memcmp(v, want, wlen) == 0, "get '%s': the bytes differ", key);
    CHECK_MSG(((char *)v)[n] == 0, "get '%s': no NUL after the value", key);
    free(v);
}
static void get_str(ddpc_store *st, const char *key, const char *want) {
    get_is(st, key, want, strlen(want), 5);
}

static void exists_is(ddpc_store *st, const char *key, int want) {
    int ex = -1;
    CHECK_OK(ddpc_store_check(st, key, &ex));
    CHECK_MSG(ex == want, "check '%s': %d, want %d", key, ex, want);
}

/* Fails the test unless out (what a Python peer printed) contains needle;
 * the message shows all of out. */
static void must_contain(const char *out, const char *needle) {
    if (!strstr(out, needle))
        t_fail(__FILE__, __LINE__, "the Python peer did not print \"%s\"; it printed:\n%s", needle,
               out);
}

/* Prints the lines of out that start with "note" (what the Python peer
 * observed without failing). */
static void show_notes(const char *out) {
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, "note", 4)) fprintf(stderr, "  python: %.*s\n", (int)strcspn(l, "\n"), l);
}

/* Waits up to timeout_s for pid; its exit status, -1 if it was killed on the
 * deadline (the caller fails then). */
static int wait_pid(pid_t pid, double timeout_s) {
    double deadline = ddpc__now() + timeout_s * t_slow();
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 && errno != EINTR) return -1;
        if (ddpc__now() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        ddpc__sleep(0.01);
    }
}

/* A command in the background, its stdout and stderr read through a pipe.
 * It stays in the test's process group, so the harness kills it if the test
 * dies first. */
typedef struct bg {
    pid_t pid;
    int fd;
    char out[1 << 16]; /* what it printed so far (NUL-terminated, truncated) */
    size_t used;
    int eof;
} bg;

static void bg_start(bg *p, const char *cmd) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) t_fail(__FILE__, __LINE__, "pipe: %s", strerror(errno));
    fflush(NULL);
    p->pid = fork();
    if (p->pid < 0) t_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (p->pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
    p->used = 0;
    p->out[0] = 0;
    p->eof = 0;
}

/* Reads what p prints until deadline (absolute) or EOF. */
static void bg_read(bg *p, double deadline) {
    while (!p->eof) {
        int ms = ddpc__deadline_ms(deadline, 1000);
        if (ms <= 0 && ddpc__now() >= deadline) return;
        struct pollfd pf = { p->fd, POLLIN, 0 };
        int n = poll(&pf, 1, ms);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        char buf[4096];
        ssize_t k = read(p->fd, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            p->eof = 1;
            return;
        }
        size_t room = sizeof p->out - 1 - p->used, c = (size_t)k < room ? (size_t)k : room;
        memcpy(p->out + p->used, buf, c);
        p->used += c;
        p->out[p->used] = 0;
        return; /* one chunk: the caller looks at it */
    }
}

/* The number after a line "PORT <n>" that p prints within timeout_s; fails
 * the test with p's output otherwise. */
static int bg_port(bg *p, double timeout_s) {
    double deadline = ddpc__now() + timeout_s * t_slow();
    for (;;) {
        const char *l = strstr(p->out, "PORT ");
        if (l && (l == p->out || l[-1] == '\n') && strchr(l, '\n')) return atoi(l + 5);
        if (p->eof || ddpc__now() >= deadline) break;
        bg_read(p, deadline);
    }
    kill(p->pid, SIGKILL);
    t_fail(__FILE__, __LINE__, "the PyTorch store server printed no port within %.0f s:\n%s",
           timeout_s, p->out);
}

/* Reads p's output to EOF and waits for it, both within timeout_s; its exit
 * status, or -1 when it was killed on the deadline. */
static int bg_finish(bg *p, double timeout_s) {
    double deadline = ddpc__now() + timeout_s * t_slow();
    while (!p->eof && ddpc__now() < deadline) bg_read(p, deadline);
    close(p->fd);
    double left = deadline - ddpc__now();
    return wait_pid(p->pid, left > 0.1 ? left / t_slow() : 0.1);
}

/* --------------------------------------- PyTorch's client, ddpc's server */

/* The forked helper of test torch_store_torch_client_vs_ddpc_server: once
 * the Python client announces py_waiting (and then waits for wake_a and
 * wake_b), sets them through a ddpc client of its own. */
static void waker(int port) {
    ddpc_store *c = NULL, *py = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &c));
    CHECK_OK(ddpc_store_prefixed(c, "/", &py));
    void *v = NULL;
    size_t n;
    CHECK_OK(ddpc_store_get(py, "py_waiting", 100, &v, &n));
    free(v);
    ddpc__sleep(0.1);
    CHECK_OK(ddpc_store_set(py, "wake_a", "a", 1));
    ddpc__sleep(0.1);
    CHECK_OK(ddpc_store_set(py, "wake_b", "b", 1));
    ddpc_store_destroy(py);
    ddpc_store_destroy(c);
}

static void torch_client_vs_ddpc_server(int torch2) {
    const char *python = need_torch(torch2);
    ddpc_store_server *srv = NULL;
    CHECK_OK(ddpc_store_server_create("127.0.0.1", 0, &srv));
    int port = ddpc_store_server_port(srv);
    ddpc_store *c = NULL, *py = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &c));
    CHECK_STR(ddpc_store_protocol(c), "ddpc");
    CHECK_OK(ddpc_store_prefixed(c, "/", &py)); /* Python's key K is "/K" */

    /* 1. keys for the Python client to read */
    CHECK_OK(ddpc_store_set(py, "c_to_py", "from C", 6));
    CHECK_OK(ddpc_store_set(py, "c_bin", "\0C\0\xff", 4));
    CHECK_OK(ddpc_store_set(py, "c_ctr", "41", 2));

    /* 2. the Python client, with a ddpc client waking its wait meanwhile */
    fflush(NULL);
    pid_t wk = fork();
    if (wk < 0) t_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (wk == 0) {
        waker(port);
        fflush(NULL);
        _exit(0);
    }
    char cmd[PATH_MAX + 128];
    static char out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s %s client 127.0.0.1 %d 2>&1", python, peer_script(), port);
    int rc = t_run_cmd(cmd, 150, out, sizeof out);
    CHECK_MSG(rc == 0, "%s exited %d (-1: killed on the deadline); it printed:\n%s", cmd, rc, out);
    must_contain(out, "tcpstore_peer client: all ");
    must_contain(out, "ok   get c_to_py (set by C)");
    must_contain(out, "ok   get c_bin (set by C, NUL bytes)");
    must_contain(out, "ok   wait on wake_a, wake_b, set by a ddpc client meanwhile");
    must_contain(out, "ok   wait on keys never set, 1 s: the exception names a timeout");
    if (torch2) {
        must_contain(out, "ok   v2 blocking queue_pop woken by another client's push");
        must_contain(out, "ok   v2 barrier: both arrivals pass once the second comes");
        must_contain(out, "ok   v2 the same client after its wait timed out (cancel_wait)");
    }
    show_notes(out);
    CHECK_EQ(wait_pid(wk, 10), 0);

    /* 3. what the Python client left, read by ddpc's client */
    get_str(py, "py_to_c", "from python");
    get_is(py, "py_bin", "\0\1py\0", 5, 5);
    unsigned char *big = big_value();
    get_is(py, "py_big", big, BIG_LEN, 5);
    free(big);
    get_str(py, "py_str", "second");
    get_str(py, "py_empty", "");
    unsigned char all[256];
    for (int i = 0; i < 256; i++) all[i] = (unsigned char)i;
    get_is(py, "py_bytes", all, 256, 5);
    get_str(py, "py_ctr", "-2");
    get_str(py, "py_ctr_big", "1099511627776");
    get_str(py, "c_ctr", "42"); /* 41 from C, + 1 from Python */
    get_str(py, "cas_a", "two");
    get_str(py, "wake_b", "b");
    get_str(py, "py_done", "1");
    get_str(c, "init/", "1");   /* the constructor's counter has no "/" */
    exists_is(py, "cas_b", 0);  /* compare_set on an absent key with expected != "" */
    exists_is(py, "py_tmp", 0); /* deleted */
    exists_is(py, "never_a", 0);
    exists_is(py, "py_missing", 0);
    /* c_to_py c_bin c_ctr init/ py_str py_empty py_bytes py_big py_ctr
     * py_ctr_big cas_a py_waiting wake_a wake_b py_to_c py_bin py_done */
    int64_t nk = 0;
    CHECK_OK(ddpc_store_num_keys(c, &nk));
    CHECK_EQ(nk, 17);
    int64_t r = 0;
    CHECK_OK(ddpc_store_add(py, "py_ctr", 3, &r)); /* and the server still serves C */
    CHECK_EQ(r, 1);

    ddpc_store_destroy(py);
    ddpc_store_destroy(c);
    ddpc_store_server_destroy(srv);
}

TEST_T(torch_store_torch_client_vs_ddpc_server, 180) { torch_client_vs_ddpc_server(0); }

/* torch 2.x's client: its VALIDATE first, its renumbered queries, and
 * those 2.x added (append, multi_get/set, queues, list_keys, barrier,
 * cancel_wait). */
TEST_T(torch_store_torch2_client_vs_ddpc_server, 180) { torch_client_vs_ddpc_server(1); }

/* --------------------------------------- ddpc's client, PyTorch's server */

/* The forked helper of test torch_store_ddpc_client_vs_torch_server: a
 * second ddpc client of the PyTorch server sets "late" while the first
 * waits for it. */
static void setter(int port) {
    ddpc_store *c = NULL, *py = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &c));
    CHECK_STR(ddpc_store_protocol(c), "torch");
    CHECK_OK(ddpc_store_prefixed(c, "/", &py));
    ddpc__sleep(0.3);
    CHECK_OK(ddpc_store_set(py, "late", "L", 1));
    ddpc_store_destroy(py);
    ddpc_store_destroy(c);
}

static void ddpc_client_vs_torch_server(int torch2) {
    const char *python = need_torch(torch2);
    char cmd[2 * PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "exec %s %s server", python, peer_script());
    static bg srv; /* 64 KiB of output: not on the stack */
    bg_start(&srv, cmd);
    int port = bg_port(&srv, 90);
    CHECK(port > 0 && port < 65536);

    /* 1. auto-detection: ddpc's handshake, closed by torch, then TCPStore's */
    ddpc_store *c = NULL, *py = NULL;
    double t0 = ddpc__now();
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 10, &c));
    CHECK_STR(ddpc_store_protocol(c), "torch");
    CHECK_MSG(ddpc__now() - t0 < 5 * t_slow(), "connect took %.2f s", ddpc__now() - t0);
    CHECK_OK(ddpc_store_prefixed(c, "/", &py)); /* Python's key K is "/K" */
    CHECK_STR(ddpc_store_protocol(py), "torch");

    /* 2. get: what Python set (text, NUL bytes, 1 MiB); timeout 0 looks once */
    get_str(py, "py_a", "alpha");
    get_is(py, "py_b", "\0b\0", 3, 5);
    unsigned char *big = big_value();
    get_is(py, "py_big", big, BIG_LEN, 5);
    get_is(py, "py_a", "alpha", 5, 0);

    /* 3. set: text, NUL bytes, 1 MiB, empty, overwrite */
    CHECK_OK(ddpc_store_set(py, "c_str", "hello from C", 12));
    CHECK_OK(ddpc_store_set(py, "c_bin", "\0\1\0\xff", 4));
    CHECK_OK(ddpc_store_set(py, "c_big", big, BIG_LEN));
    get_is(py, "c_big", big, BIG_LEN, 5);
    free(big);
    CHECK_OK(ddpc_store_set(py, "c_empty", NULL, 0));
    get_str(py, "c_empty", "");
    CHECK_OK(ddpc_store_set(py, "c_over", "one", 3));
    CHECK_OK(ddpc_store_set(py, "c_over", "two!", 4));
    get_str(py, "c_over", "two!");

    /* 4. get of a key nobody sets: DDPC_ERR_TIMEOUT in time, then the client
     * (which reconnects: TCPStore cannot cancel a wait) still works */
    void *v = NULL;
    size_t n = 0;
    t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_get(py, "c_missing", 0, &v, &n), DDPC_ERR_TIMEOUT);
    CHECK_MSG(ddpc__now() - t0 < 2 * t_slow(), "get with timeout 0 took %.2f s", ddpc__now() - t0);
    t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_get(py, "c_missing", 0.5, &v, &n), DDPC_ERR_TIMEOUT);
    double dt = ddpc__now() - t0;
    CHECK_MSG(dt >= 0.45 && dt < 5 * t_slow(), "get with timeout 0.5 s returned after %.2f s", dt);
    CHECK_CONTAINS(ddpc_last_error(), "c_missing");
    get_str(py, "py_a", "alpha");
    CHECK_OK(ddpc_store_set(py, "after_timeout", "yes", 3));

    /* 5. add: Python's counter, a new one, negative deltas */
    int64_t r = 0;
    CHECK_OK(ddpc_store_add(py, "py_ctr", -3, &r));
    CHECK_EQ(r, 7);
    CHECK_OK(ddpc_store_add(py, "c_ctr", 4, &r)); /* absent = 0 */
    CHECK_EQ(r, 4);
    CHECK_OK(ddpc_store_add(py, "c_ctr", -9, &r));
    CHECK_EQ(r, -5);
    CHECK_OK(ddpc_store_add(py, "c_ctr", 0, NULL));
    get_str(py, "c_ctr", "-5");

    /* 6. compare_set, torch's three cases (torch's server is the reference) */
    void *a = NULL;
    size_t an = 0;
    CHECK_OK(ddpc_store_compare_set(py, "c_cas", NULL, 0, "v1", 2, &a, &an)); /* absent, "": sets */
    CHECK_EQ(an, 2);
    CHECK(memcmp(a, "v1", 2) == 0);
    free(a);
    get_str(py, "c_cas", "v1");
    CHECK_OK(ddpc_store_compare_set(py, "c_cas_absent", "x", 1, "y", 1, &a, &an)); /* absent, "x" */
    CHECK_EQ(an, 1);
    CHECK_STR((char *)a, "x"); /* answers expected ... */
    free(a);
    exists_is(py, "c_cas_absent", 0); /* ... and sets nothing */
    CHECK_OK(
        ddpc_store_compare_set(py, "c_cas", "zz", 2, "v3", 2, &a, &an)); /* unequal: unchanged */
    CHECK_EQ(an, 2);
    CHECK_STR((char *)a, "v1");
    free(a);
    CHECK_OK(ddpc_store_compare_set(py, "c_cas", "v1", 2, "v2", 2, &a, &an)); /* equal: swaps */
    CHECK_EQ(an, 2);
    CHECK_STR((char *)a, "v2");
    free(a);
    CHECK_OK(ddpc_store_compare_set(py, "c_cas", NULL, 0, "v9", 2, NULL,
                                    NULL)); /* present, "": unchanged */
    get_str(py, "c_cas", "v2");

    /* 7. wait: keys that exist; a key another client sets meanwhile; keys
     * nobody sets (DDPC_ERR_TIMEOUT, then the client still works) */
    const char *have[] = { "py_a", "py_b", "c_str" };
    CHECK_OK(ddpc_store_wait(py, have, 3, 5));
    fflush(NULL);
    pid_t sp = fork();
    if (sp < 0) t_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
    if (sp == 0) {
        setter(port);
        fflush(NULL);
        _exit(0);
    }
    const char *late[] = { "py_a", "late" };
    t0 = ddpc__now();
    CHECK_OK(ddpc_store_wait(py, late, 2, 20));
    CHECK_MSG(ddpc__now() - t0 < 15 * t_slow(), "the wait for 'late' took %.2f s",
              ddpc__now() - t0);
    CHECK_EQ(wait_pid(sp, 10), 0);
    get_str(py, "late", "L");
    const char *never[] = { "py_a", "never_1", "never_2" };
    t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_wait(py, never, 3, 0.5), DDPC_ERR_TIMEOUT);
    dt = ddpc__now() - t0;
    CHECK_MSG(dt >= 0.45 && dt < 5 * t_slow(), "wait with timeout 0.5 s returned after %.2f s", dt);
    get_str(py, "py_a", "alpha");

    /* 8. check */
    exists_is(py, "py_a", 1);
    exists_is(py, "c_str", 1);
    exists_is(py, "never_1", 0);
    exists_is(c, "py_a", 0); /* without the "/": not Python's key */

    /* 9. delete and num_keys (counted relative to what is there) */
    int64_t nk0 = 0, nk = 0;
    CHECK_OK(ddpc_store_num_keys(py, &nk0));
    CHECK(nk0 >= 10);
    CHECK_OK(ddpc_store_set(py, "c_deleted", "x", 1));
    CHECK_OK(ddpc_store_num_keys(py, &nk));
    CHECK_EQ(nk, nk0 + 1);
    int del = -1;
    CHECK_OK(ddpc_store_delete(py, "c_deleted", &del));
    CHECK_EQ(del, 1);
    CHECK_OK(ddpc_store_delete(py, "c_deleted", &del));
    CHECK_EQ(del, 0);
    CHECK_OK(ddpc_store_delete(py, "c_deleted", NULL));
    exists_is(py, "c_deleted", 0);
    CHECK_OK(ddpc_store_num_keys(c, &nk)); /* the whole store, whatever the view */
    CHECK_EQ(nk, nk0);

    /* 10. a view of a view: Python sees its keys under the full name */
    ddpc_store *pv = NULL;
    CHECK_OK(ddpc_store_prefixed(py, "pv/", &pv));
    CHECK_STR(ddpc_store_protocol(pv), "torch");
    CHECK_OK(ddpc_store_set(pv, "k", "view value", 10));
    CHECK_OK(ddpc_store_add(pv, "ctr", 3, &r));
    CHECK_EQ(r, 3);
    const char *pk[] = { "k", "ctr" };
    CHECK_OK(ddpc_store_wait(pv, pk, 2, 5));
    exists_is(pv, "k", 1);
    get_str(pv, "k", "view value");
    get_str(py, "pv/k", "view value");
    get_str(c, "/pv/k", "view value");
    CHECK_OK(ddpc_store_set(py, "pv/from_root", "r", 1));
    get_str(pv, "from_root", "r");
    ddpc_store_destroy(pv);

    /* 11. done: Python checks what C set, then exits */
    CHECK_OK(ddpc_store_set(py, "done", "1", 1));
    ddpc_store_destroy(py);
    ddpc_store_destroy(c);
    int rc = bg_finish(&srv, 60);
    CHECK_MSG(rc == 0, "%s exited %d (-1: killed on the deadline); it printed:\n%s", cmd, rc,
              srv.out);
    must_contain(srv.out, "tcpstore_peer server: all ");
    must_contain(srv.out, "ok   get pv/k (set by C through prefixed views");
}

TEST_T(torch_store_ddpc_client_vs_torch_server, 180) { ddpc_client_vs_torch_server(0); }

/* torch 2.x's server: ddpc's client finds it speaks 2.x (proto.h) and
 * validates each connection; a wait that times out is cancelled. */
TEST_T(torch_store_ddpc_client_vs_torch2_server, 180) { ddpc_client_vs_torch_server(1); }

/* ---------------------------------------- ddpc's client, ddpc's server */

TEST_T(torch_store_ddpc_client_vs_ddpc_server, 60) {
    ddpc_store_server *srv = NULL;
    CHECK_OK(ddpc_store_server_create("127.0.0.1", 0, &srv));
    int port = ddpc_store_server_port(srv);

    /* 1. auto: ddpc's handshake succeeds, so ddpc's protocol */
    ddpc_store *c = NULL, *v = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &c));
    CHECK_STR(ddpc_store_protocol(c), "ddpc");
    CHECK_OK(ddpc_store_prefixed(c, "v/", &v));
    CHECK_STR(ddpc_store_protocol(v), "ddpc");
    CHECK_OK(ddpc_store_set(v, "k", "ddpc", 4));
    get_str(c, "v/k", "ddpc");
    CHECK_OK(ddpc_store_ping(c));
    ddpc_store_destroy(v);

    /* 2. DDPC_STORE_PROTOCOL=torch: TCPStore's protocol to the same server
     * (it speaks both), sharing its keys */
    setenv("DDPC_STORE_PROTOCOL", "torch", 1);
    ddpc_store *t = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &t));
    CHECK_STR(ddpc_store_protocol(t), "torch");
    get_str(t, "v/k", "ddpc");
    CHECK_OK(ddpc_store_set(t, "t", "\0torch", 6));
    get_is(c, "t", "\0torch", 6, 5);
    int64_t r = 0;
    CHECK_OK(ddpc_store_add(t, "n", -4, &r));
    CHECK_EQ(r, -4);
    CHECK_OK(ddpc_store_add(c, "n", 10, &r));
    CHECK_EQ(r, 6);
    void *a = NULL;
    size_t an = 0;
    CHECK_OK(ddpc_store_compare_set(t, "cas", "x", 1, "y", 1, &a, &an));
    CHECK_STR((char *)a, "x");
    free(a);
    exists_is(t, "cas", 0);
    exists_is(t, "t", 1);
    void *val = NULL;
    size_t n;
    double t0 = ddpc__now();
    CHECK_STATUS(ddpc_store_get(t, "missing", 0.3, &val, &n), DDPC_ERR_TIMEOUT);
    double dt = ddpc__now() - t0;
    CHECK_MSG(dt >= 0.25 && dt < 5 * t_slow(), "get with timeout 0.3 s returned after %.2f s", dt);
    const char *keys[] = { "t", "missing" };
    CHECK_STATUS(ddpc_store_wait(t, keys, 2, 0.3), DDPC_ERR_TIMEOUT);
    get_is(t, "t", "\0torch", 6, 5); /* reconnected */
    int del = -1;
    CHECK_OK(ddpc_store_delete(t, "t", &del));
    CHECK_EQ(del, 1);
    int64_t nk = 0;
    CHECK_OK(ddpc_store_num_keys(t, &nk));
    CHECK_EQ(nk, 2); /* v/k, n */
    ddpc_store_destroy(t);
    CHECK_OK(ddpc_store_set(c, "t", "\0torch", 6));

    /* 2b. torch1 and torch2 name TCPStore's dialect (no probe): both reach
     * the same keys; a wait that times out is dropped (1.13) or cancelled
     * (2.x), and the client goes on */
    const char *dialects[] = { "torch1", "torch2" };
    for (int d = 0; d < 2; d++) {
        setenv("DDPC_STORE_PROTOCOL", dialects[d], 1);
        t0 = ddpc__now();
        CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &t));
        CHECK_MSG(ddpc__now() - t0 < 1 * t_slow(), "%s: connect took %.2f s", dialects[d],
                  ddpc__now() - t0);
        CHECK_STR(ddpc_store_protocol(t), "torch");
        get_str(t, "v/k", "ddpc");
        CHECK_STATUS(ddpc_store_wait(t, keys, 2, 0.2), DDPC_ERR_TIMEOUT);
        CHECK_OK(ddpc_store_add(t, "n", 1, &r));
        CHECK_EQ(r, 7 + d);
        ddpc_store_destroy(t);
    }

    /* 3. forced ddpc's protocol is ddpc's; an unknown value is refused */
    setenv("DDPC_STORE_PROTOCOL", "ddpc", 1);
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", port, 5, &t));
    CHECK_STR(ddpc_store_protocol(t), "ddpc");
    ddpc_store_destroy(t);
    setenv("DDPC_STORE_PROTOCOL", "gloo", 1);
    t = NULL;
    CHECK_STATUS(ddpc_store_create_tcp("127.0.0.1", port, 5, &t), DDPC_ERR_ENV);
    CHECK(t == NULL);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_STORE_PROTOCOL");
    unsetenv("DDPC_STORE_PROTOCOL");

    ddpc_store_destroy(c);
    ddpc_store_server_destroy(srv);
}
