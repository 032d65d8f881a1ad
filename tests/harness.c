/* harness.c — runs each registered test in its own process group with a
 * deadline, and ends with "N passed, N failed, N skipped".
 *
 *   ddpc-tests [-l] [-j N] [FILTER...]   run the tests whose names contain a FILTER
 */

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define HAVE_MEMCHECK 1
#endif
#endif

typedef struct {
    const char *name, *file;
    t_fn fn;
    double timeout;
} t_case;

static t_case cases[1024];
static int ncases;

void t_register(const char *name, t_fn fn, double timeout_s, const char *file) {
    if (ncases < (int)(sizeof cases / sizeof cases[0]))
        cases[ncases++] = (t_case){ name, file, fn, timeout_s };
}

/* DDPC_TEST_SLOW: every deadline the harness keeps (a test's, its ranks',
 * its commands') is multiplied by it, for runs under a slow tool such as
 * valgrind (make check-valgrind). 1 when unset or not a number >= 1. Read
 * once (pthread_once: a test's threads ask too). */
static double slow_f;
static pthread_once_t slow_once = PTHREAD_ONCE_INIT;

static void slow_read(void) {
    const char *v = getenv("DDPC_TEST_SLOW");
    double x = v && *v ? strtod(v, NULL) : 1;
    slow_f = x >= 1 ? x : 1;
}

double t_slow(void) {
    pthread_once(&slow_once, slow_read);
    return slow_f;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void t_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  [pid %d] %s:%d: ", (int)getpid(), file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

void t_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  skipped: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    _exit(77);
}

int t_free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &l) != 0)
        t_fail(__FILE__, __LINE__, "cannot find a free port: %s", strerror(errno));
    close(s);
    return ntohs(a.sin_port);
}

/* LeakSanitizer's entry point when the binary is built with
 * -fsanitize=address (or leak); a null weak reference otherwise. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

/* Tests and ranks end with _exit, which skips LeakSanitizer's exit-time
 * check; this runs it where a test or a rank has finished cleanly, so a
 * leak fails the test. No-op without LeakSanitizer or with detect_leaks=0.
 * Under valgrind's memcheck (make check-valgrind, which turns its exit-time
 * check off: a process forked beside a running thread, as a store test's
 * client is, would find that thread's memory lost) it asks memcheck the
 * same here, and definitely lost bytes fail the test. */
static void leak_check(void) {
    if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check()) {
        fprintf(stderr, "  [pid %d] LeakSanitizer found leaks (report above)\n", (int)getpid());
        fflush(stderr);
        _exit(1);
    }
#if HAVE_MEMCHECK
    if (RUNNING_ON_VALGRIND) {
        unsigned long lost = 0, dubious = 0, reachable = 0, suppressed = 0;
        VALGRIND_DO_LEAK_CHECK;
        VALGRIND_COUNT_LEAK_BLOCKS(lost, dubious, reachable, suppressed);
        (void)dubious, (void)reachable, (void)suppressed;
        if (lost) {
            fprintf(stderr, "  [pid %d] memcheck found %lu blocks definitely lost (report above)\n",
                    (int)getpid(), lost);
            fflush(stderr);
            _exit(1);
        }
    }
#endif
}

int t_free_port_pair(void) {
    for (int i = 0; i < 50; i++) {
        int p = t_free_port();
        if (p >= 65535) continue;
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)(p + 1)),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0) close(s);
        if (ok) return p;
    }
    t_fail(__FILE__, __LINE__, "no pair of free ports P, P+1 on 127.0.0.1");
}

void t_set_rank_env(int rank, int world, int port) {
    char b[32];
    snprintf(b, sizeof b, "%d", rank);
    setenv("RANK", b, 1);
    setenv("LOCAL_RANK", b, 1);
    snprintf(b, sizeof b, "%d", world);
    setenv("WORLD_SIZE", b, 1);
    setenv("LOCAL_WORLD_SIZE", b, 1);
    snprintf(b, sizeof b, "%d", port);
    setenv("MASTER_PORT", b, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
}

/* Waits for pid until deadline; returns 1 and *st when it exited. */
static int wait_until(pid_t pid, double deadline, int *st) {
    double sleep_s = 0.0005;
    for (;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid) return 1;
        if (r < 0 && errno != EINTR) {
            *st = 0;
            return 1;
        }
        if (now() >= deadline) return 0;
        struct timespec ts = { 0, (long)(sleep_s * 1e9) };
        nanosleep(&ts, NULL);
        if (sleep_s < 0.01) sleep_s *= 2;
    }
}

void t_run_ranks_status(int world, double timeout_s, t_rank_fn fn, void *arg, int *status) {
    pid_t pids[256];
    fflush(NULL);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0) t_fail(__FILE__, __LINE__, "fork: %s", strerror(errno));
        if (pids[r] == 0) {
            fn(r, world, arg);
            fflush(NULL);
            leak_check();
            _exit(0);
        }
    }
    double deadline = now() + timeout_s * t_slow();
    for (int r = 0; r < world; r++) {
        int st;
        if (wait_until(pids[r], deadline, &st)) {
            status[r] = st;
        } else {
            status[r] = -1;
            for (int k = 0; k < world; k++) kill(pids[k], SIGKILL);
        }
    }
}

void t_run_ranks(int world, double timeout_s, t_rank_fn fn, void *arg) {
    int st[256];
    t_run_ranks_status(world, timeout_s, fn, arg, st);
    for (int r = 0; r < world; r++) {
        if (st[r] == -1)
            t_fail(__FILE__, __LINE__, "rank %d of %d did not finish within %.0f s", r, world,
                   timeout_s);
        if (WIFSIGNALED(st[r]))
            t_fail(__FILE__, __LINE__, "rank %d of %d was killed by signal %d", r, world,
                   WTERMSIG(st[r]));
        if (WEXITSTATUS(st[r]) == 77) _exit(77);
        if (WEXITSTATUS(st[r]) != 0)
            t_fail(__FILE__, __LINE__, "rank %d of %d failed (exit %d)", r, world,
                   WEXITSTATUS(st[r]));
    }
}

int t_run_cmd(const char *cmd, double timeout_s, char *out, size_t outlen) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) t_fail(__FILE__, __LINE__, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(p[1], 1);
        dup2(p[1], 2);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t used = 0;
    double deadline = now() + timeout_s * t_slow();
    int timed_out = 0;
    for (;;) {
        int ms = (int)((deadline - now()) * 1000);
        if (ms <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf = { p[0], POLLIN, 0 };
        int n = poll(&pf, 1, ms);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            timed_out = 1;
            break;
        }
        char buf[4096];
        ssize_t k = read(p[0], buf, sizeof buf);
        if (k <= 0) break;
        if (out && used + 1 < outlen) {
            size_t c = (size_t)k < outlen - 1 - used ? (size_t)k : outlen - 1 - used;
            memcpy(out + used, buf, c);
            used += c;
        }
    }
    if (out && outlen) out[used] = '\0';
    close(p[0]);
    int st = 0;
    if (timed_out) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    if (!wait_until(pid, deadline + 5, &st)) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static char tmp_dir[] = "/tmp/ddpc-test-XXXXXX";
static int tmp_made; /* tmp_dir exists */

const char *t_tmp_dir(void) {
    if (!tmp_made) {
        if (!mkdtemp(tmp_dir)) t_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
        tmp_made = 1;
    }
    return tmp_dir;
}

const char *t_tmp_path(const char *name) {
    static char bufs[8][512];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", t_tmp_dir(), name);
    return b;
}

const char *t_tmp_write(const char *name, const char *text) {
    const char *p = t_tmp_path(name);
    FILE *f = fopen(p, "w");
    CHECK_MSG(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", p);
    return p;
}

void t_tmp_remove(void) {
    if (!tmp_made) return;
    DIR *d = opendir(tmp_dir);
    if (!d) return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(tmp_dir);
    tmp_made = 0;
    memcpy(tmp_dir + sizeof tmp_dir - 7, "XXXXXX", 6);
}

void t_netns_pair(const char *tag, int subnet, char a[32], char b[32]) {
    if (geteuid() != 0) t_skip("needs root to create network namespaces");
    int id = (int)getpid() % 100000;
    char va[32], vb[32], cmd[2048], out[4096];
    snprintf(a, 32, "ddpc%sA%d", tag, id);
    snprintf(b, 32, "ddpc%sB%d", tag, id);
    snprintf(va, sizeof va, "d%sa%d", tag, id);
    snprintf(vb, sizeof vb, "d%sb%d", tag, id);
    snprintf(cmd, sizeof cmd,
             "set -e; ip netns add %s; ip netns add %s; ip link add %s type veth peer name %s; "
             "ip link set %s netns %s; ip link set %s netns %s; "
             "ip -n %s addr add 198.18.%d.1/24 dev %s; ip -n %s addr add 198.18.%d.2/24 dev %s; "
             "ip -n %s link set %s up; ip -n %s link set %s up; ip -n %s link set lo up; "
             "ip -n %s link set lo up 2>&1",
             a, b, va, vb, va, a, vb, b, a, subnet, va, b, subnet, vb, a, va, b, vb, a, b);
    if (t_run_cmd(cmd, 20, out, sizeof out) != 0) {
        t_netns_del(a, b);
        t_skip("cannot set up network namespaces (%s)", out);
    }
}

void t_netns_del(const char *a, const char *b) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ip netns del %s; ip netns del %s", a, b);
    t_run_cmd(cmd, 10, NULL, 0);
}

const char *t_bin(const char *name) {
    static char bufs[8][4096]; /* several may appear in one printf */
    static int next;
    char *buf = bufs[next++ % 8];
    const char *d = getenv("DDPC_BIN");
    snprintf(buf, sizeof bufs[0], "%s/%s", d && *d ? d : "build/bin", name);
    return buf;
}

static int matches(const char *name, int nf, char **filters) {
    if (nf == 0) return 1;
    for (int i = 0; i < nf; i++)
        if (strstr(name, filters[i])) return 1;
    return 0;
}

/* A failed test's processes may have sent their stderr to a file
 * (comm_fixtures.h's log_to_file: /tmp/ddpc-test-TAG-PPID-RANK.log) and died
 * before reading it back, a sanitizer's report inside: prints the last
 * 8 KiB of each such file of this harness's or test pid's children, and
 * removes it. */
static void show_logs(pid_t pid) {
    char pat[96];
    pid_t ppids[2] = { getpid(), pid };
    for (int k = 0; k < 2; k++) {
        glob_t g;
        snprintf(pat, sizeof pat, "/tmp/ddpc-test-*-%d-*.log", (int)ppids[k]);
        if (glob(pat, 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc && i < 64; i++) {
            FILE *f = fopen(g.gl_pathv[i], "r");
            if (!f) continue;
            static char buf[8193];
            fseek(f, 0, SEEK_END);
            long size = ftell(f);
            fseek(f, size > 8192 ? size - 8192 : 0, SEEK_SET);
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = '\0';
            fclose(f);
            if (n)
                fprintf(stderr, "  --- %s%s:\n%s", g.gl_pathv[i], size > 8192 ? " (its end)" : "",
                        buf);
            unlink(g.gl_pathv[i]);
        }
        globfree(&g);
    }
}

/* 0 pass, 1 fail, 2 skip */
static int run_one(const t_case *c, double *secs) {
    double t0 = now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        c->fn();
        fflush(NULL);
        leak_check();
        _exit(0);
    }
    setpgid(pid, pid);
    int st = 0, done = wait_until(pid, t0 + c->timeout * t_slow(), &st);
    kill(-pid, SIGKILL); /* leftovers of the test's own children */
    if (!done) {
        waitpid(pid, &st, 0);
        *secs = now() - t0;
        fprintf(stderr, "  timed out after %.0f s\n", c->timeout * t_slow());
        show_logs(pid);
        return 1;
    }
    *secs = now() - t0;
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "  killed by signal %d (%s)\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
        show_logs(pid);
        return 1;
    }
    if (WEXITSTATUS(st) == 77) return 2;
    if (WEXITSTATUS(st) != 0) show_logs(pid);
    return WEXITSTATUS(st) != 0;
}

int main(int argc, char **argv) {
    int list = 0, nf = 0;
    char *filters[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-l") || !strcmp(argv[i], "--list"))
            list = 1;
        else if (nf < 64)
            filters[nf++] = argv[i];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    int pass = 0, fail = 0, skip = 0;
    char failed[8192] = "";
    for (int i = 0; i < ncases; i++) {
        const t_case *c = &cases[i];
        if (!matches(c->name, nf, filters)) continue;
        if (list) {
            printf("%s\n", c->name);
            continue;
        }
        double secs;
        int r = run_one(c, &secs);
        const char *tag = r == 0 ? "ok  " : r == 1 ? "FAIL" : "skip";
        printf("%s %-48s %6.2f s\n", tag, c->name, secs);
        if (r == 0)
            pass++;
        else if (r == 2)
            skip++;
        else {
            fail++;
            size_t l = strlen(failed);
            snprintf(failed + l, sizeof failed - l, " %s", c->name);
        }
    }
    if (list) return 0;
    if (fail) printf("failed:%s\n", failed);
    printf("%d passed, %d failed, %d skipped\n", pass, fail, skip);
    return fail ? 1 : 0;
}

int t_run_cmdf(double timeout_s, char *out, size_t outlen, const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return t_run_cmd(cmd, timeout_s, out, outlen);
}
