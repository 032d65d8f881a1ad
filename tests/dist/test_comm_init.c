/* test_comm_init.c — communicators made every way (environment, URL, unique id, OpenMPI's
 * variables, an agent store, a caller's own store), queries, split, async
 * ordering, interface choice, the INFO log, early destroy, re-init; and
 * smoke tests of each collective. */
#include <pthread.h>

#include "comm_fixtures.h"

/* ------------------------------------------------------------ allreduce smoke */

TEST_T(comm_allreduce_w1, 30) { run_world(1, allreduce_body, 25); }
TEST_T(comm_allreduce_w2, 60) { run_world(2, allreduce_body, 55); }
TEST_T(comm_allreduce_w3, 60) { run_world(3, allreduce_body, 55); }
TEST_T(comm_allreduce_w5, 90) { run_world(5, allreduce_body, 85); }

/* ------------------------------------------------------------ every collective */

TEST_T(comm_colls_w1, 30) { run_all(1, NULL); }
TEST_T(comm_colls_w2, 60) { run_all(2, NULL); }
TEST_T(comm_colls_w3_auto, 110) { run_all(3, NULL); }
TEST_T(comm_colls_w4_ring, 110) { run_all(4, "ring"); }
TEST_T(comm_colls_w5_tree, 110) { run_all(5, "tree"); }
TEST_T(comm_colls_w6_rhd, 110) { run_all(6, "rhd"); }

/* ------------------------------------------------------------ bootstrap variants */

static void url_body(int rank, int world, void *arg) {
    char url[64];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_url(url, rank, world, &c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    CHECK_EQ(ddpc_comm_size(c), world);
    CHECK_EQ(ddpc_comm_local_rank(c), rank); /* one host */
    CHECK_EQ(ddpc_comm_local_size(c), world);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_init_url, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, url_body, NULL);
    ddpc_comm *c;
    CHECK_STATUS(ddpc_comm_create_url("http://x:1", 0, 1, &c), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "tcp://");
    CHECK_STATUS(ddpc_comm_create_url("tcp://127.0.0.1:99999", 0, 1, &c), DDPC_ERR_INVALID_ARG);
    CHECK_STATUS(ddpc_comm_create_url("tcp://127.0.0.1:5000", 3, 2, &c), DDPC_ERR_INVALID_ARG);
}

static int g_pipe[2];

static void uid_body(int rank, int world, void *arg) {
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    ddpc_unique_id id;
    if (rank == 0) {
        CHECK_OK(ddpc_get_unique_id(NULL, &id));
        for (int i = 1; i < world; i++)
            CHECK(write(g_pipe[1], &id, sizeof id) == (ssize_t)sizeof id);
    } else {
        CHECK(read(g_pipe[0], &id, sizeof id) == (ssize_t)sizeof id);
    }
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_rank(&id, rank, world, NULL, &c));
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_init_unique_id, 30) {
    CHECK(pipe(g_pipe) == 0);
    t_run_ranks(4, 25, uid_body, NULL);
    ddpc_unique_id bad;
    memset(&bad, 0, sizeof bad);
    ddpc_comm *c;
    CHECK_STATUS(ddpc_comm_create_rank(&bad, 0, 2, NULL, &c), DDPC_ERR_INVALID_ARG);
}

static void ompi_body(int rank, int world, void *arg) {
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    char b[16];
    snprintf(b, sizeof b, "%d", rank);
    setenv("OMPI_COMM_WORLD_RANK", b, 1);
    snprintf(b, sizeof b, "%d", world);
    setenv("OMPI_COMM_WORLD_SIZE", b, 1);
    snprintf(b, sizeof b, "%d", g_port);
    setenv("MASTER_PORT", b, 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_init_ompi_vars, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, ompi_body, NULL);
}

/* ------------------------------------------------------------ agent store */

/* torchrun's contract: the launcher hosts the store at MASTER_ADDR:MASTER_PORT
 * and says TORCHELASTIC_USE_AGENT_STORE=True; every rank is a client, and
 * each restart attempt rendezvouses under its own keys in the same store. */
static void agent_body(int rank, int world, void *arg) {
    t_set_rank_env(rank, world, g_port);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    setenv("DDPC_STORE_PROTOCOL", (const char *)arg, 1);
    for (int attempt = 0; attempt < 2; attempt++) {
        char b[16];
        snprintf(b, sizeof b, "%d", attempt);
        setenv("TORCHELASTIC_RESTART_COUNT", b, 1);
        ddpc_comm *c = NULL;
        CHECK_OK(ddpc_comm_create_env(&c));
        sum_check(c, world * (world - 1) / 2);
        CHECK_OK(ddpc_comm_destroy(c));
    }
}

static void run_agent(const char *proto) {
    int down = -1;
    pid_t launcher = store_process(&down);
    t_run_ranks(3, 25, agent_body, (void *)proto);
    /* the ranks left their keys under ddpc/attempt_<n>/, nowhere else */
    ddpc_store *st = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", g_port, 5, &st));
    int64_t n = 0;
    CHECK_OK(ddpc_store_num_keys(st, &n));
    CHECK(n > 0);
    int ex = 0;
    CHECK_OK(ddpc_store_check(st, "ddpc/attempt_0/comm0/peer/2", &ex));
    CHECK_EQ(ex, 1);
    CHECK_OK(ddpc_store_check(st, "ddpc/attempt_1/comm1/peer/2", &ex));
    CHECK_EQ(ex, 1);
    CHECK_OK(ddpc_store_check(st, "ddpc/comm0/peer/2", &ex));
    CHECK_EQ(ex, 0);
    ddpc_store_destroy(st);
    close(down); /* the launcher stops its store */
    int status = 0;
    CHECK_EQ(waitpid(launcher, &status, 0), launcher);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST_T(comm_agent_store_ddpc_protocol, 30) { run_agent("ddpc"); }
TEST_T(comm_agent_store_torch_protocol, 30) { run_agent("torch"); }

/* ------------------------------------------------------------ split */

static void split_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    ddpc_comm *s = NULL;
    int color = rank == world - 1 ? -1 : rank % 2;
    CHECK_OK(ddpc_comm_split(c, color, -rank, &s));
    if (color < 0) {
        CHECK(s == NULL);
    } else {
        int members = 0, sum = 0, before = 0;
        for (int r = 0; r < world - 1; r++)
            if (r % 2 == color) {
                members++;
                sum += r;
                if (r > rank) before++; /* key = -rank: higher old ranks first */
            }
        CHECK_EQ(ddpc_comm_size(s), members);
        CHECK_EQ(ddpc_comm_rank(s), before);
        int32_t x = rank, y = -1;
        CHECK_OK(ddpc_allreduce(s, &x, &y, 1, DDPC_INT32, DDPC_SUM));
        CHECK_EQ(y, sum);
        /* a split of the split */
        ddpc_comm *s2 = NULL;
        CHECK_OK(ddpc_comm_split(s, 0, 0, &s2));
        CHECK_EQ(ddpc_comm_size(s2), members);
        CHECK_OK(ddpc_comm_destroy(s2));
    }
    /* the parent still works */
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(s));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_split, 40) {
    g_port = t_free_port();
    t_run_ranks(5, 35, split_body, NULL);
}

/* ------------------------------------------------------------ async */

static void async_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    enum { K = 6 };
    size_t n = 50000;
    float *buf[K];
    ddpc_work *w[K];
    for (int k = 0; k < K; k++) {
        buf[k] = malloc(sizeof(float) * n);
        for (size_t i = 0; i < n; i++) buf[k][i] = (float)(k * 100 + rank);
    }
    for (int k = 0; k < K; k++)
        CHECK_OK(ddpc_allreduce_async(c, buf[k], buf[k], n, DDPC_FLOAT32, DDPC_SUM, &w[k]));
    /* a blocking call after queued ones runs after them, in order */
    int32_t x = 1, y = 0;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, world);
    int done = 0;
    CHECK_OK(ddpc_work_test(w[0], &done));
    CHECK_EQ(done, 1); /* ran before the blocking call */
    for (int k = K - 1; k >= 0; k--) {
        CHECK_OK(ddpc_work_wait(w[k], 10));
        float want = (float)(world * k * 100 + world * (world - 1) / 2);
        for (size_t i = 0; i < n; i += 997) CHECK_NEAR(buf[k][i], want, 0);
        ddpc_work_destroy(w[k]);
        free(buf[k]);
    }
    /* broadcast + barrier async, freed without waiting */
    ddpc_work *wb, *wr;
    int32_t v = rank == 1 ? 42 : 0;
    CHECK_OK(ddpc_broadcast_async(c, &v, &v, 1, DDPC_INT32, 1, &wb));
    CHECK_OK(ddpc_barrier_async(c, &wr));
    ddpc_work_destroy(wb);
    CHECK_OK(ddpc_work_wait(wr, -1));
    ddpc_work_destroy(wr);
    CHECK_EQ(v, 42);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_async_outstanding, 40) {
    g_port = t_free_port();
    t_run_ranks(3, 35, async_body, NULL);
}

static void wait_timeout_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    int32_t x = rank + 1, y = 0;
    if (rank == 1) ddpc__sleep(1.0);
    ddpc_work *w;
    CHECK_OK(ddpc_allreduce_async(c, &x, &y, 1, DDPC_INT32, DDPC_SUM, &w));
    if (rank == 0) {
        double t0 = ddpc__now();
        CHECK_STATUS(ddpc_work_wait(w, 0), DDPC_ERR_TIMEOUT); /* 0: a poll */
        CHECK_STATUS(ddpc_work_wait(w, 0.2), DDPC_ERR_TIMEOUT);
        CHECK(ddpc__now() - t0 < 0.9 * t_slow());
        int done = 1;
        CHECK_OK(ddpc_work_test(w, &done));
        CHECK_EQ(done, 0);
    }
    CHECK_OK(ddpc_work_wait(w, -1));
    CHECK_EQ(y, 3);
    ddpc_work_destroy(w);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_work_wait_timeout, 30) {
    g_port = t_free_port();
    t_run_ranks(2, 25, wait_timeout_body, NULL);
}

/* ------------------------------------------------ a caller's own store */

/* The caller's store, as ddpc_store_ops: here a ddpc store client (any
 * store with set, a get that waits and add would do), counting its calls. */
typedef struct kv_ctx {
    ddpc_store *st;
    int calls;
} kv_ctx;

static ddpc_status kv_set(void *ctx, const char *key, const void *val, size_t len, char *err,
                          size_t errlen) {
    kv_ctx *k = ctx;
    k->calls++;
    return ddpc_store_set(k->st, key, val, len);
}
static ddpc_status kv_get(void *ctx, const char *key, double timeout_s, void **val, size_t *len,
                          char *err, size_t errlen) {
    kv_ctx *k = ctx;
    k->calls++;
    ddpc_status s = ddpc_store_get(k->st, key, timeout_s, val, len);
    if (s != DDPC_OK && s != DDPC_ERR_TIMEOUT) snprintf(err, errlen, "%s", ddpc_last_error());
    return s;
}
static ddpc_status kv_add(void *ctx, const char *key, int64_t delta, int64_t *result, char *err,
                          size_t errlen) {
    kv_ctx *k = ctx;
    k->calls++;
    return ddpc_store_add(k->st, key, delta, result);
}
static ddpc_status kv_broken(void *ctx, const char *key, int64_t delta, int64_t *result, char *err,
                             size_t errlen) {
    snprintf(err, errlen, "the service said no");
    return DDPC_ERR_PEER_LOST;
}

static void ops_body(int rank, int world, void *arg) {
    ddpc_store *tcp = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", g_port, 10, &tcp));
    kv_ctx k = { tcp, 0 };
    ddpc_store_ops ops = { kv_set, kv_get, kv_add };
    ddpc_store *st = NULL;
    CHECK_OK(ddpc_store_create_ops(&ops, &k, "the test's store", &st));
    CHECK(!strcmp(ddpc_store_protocol(st), "ops"));
    ddpc_comm_options opt = ddpc_comm_options_default();
    opt.connect_timeout_s = 10;
    opt.exec_timeout_s = 5;
    opt.progress_thread = 0; /* the waiters run the queue */
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_store(st, rank, world, &opt, &c));
    CHECK(k.calls >= 3);
    sum_check(c, world * (world - 1) / 2);
    int32_t a[3] = { rank, rank, rank }, b = rank;
    ddpc_work *w1, *w2;
    CHECK_OK(ddpc_allreduce_async(c, a, a, 3, DDPC_INT32, DDPC_SUM, &w1));
    CHECK_OK(ddpc_allreduce_async(c, &b, &b, 1, DDPC_INT32, DDPC_MAX, &w2));
    int done = 1;
    CHECK_OK(ddpc_work_test(w1, &done)); /* nobody runs it yet */
    CHECK_EQ(done, 0);
    CHECK_OK(ddpc_work_wait(w2, 5.0)); /* runs the queue up to w2 */
    CHECK_OK(ddpc_work_test(w1, &done));
    CHECK_EQ(done, 1);
    CHECK_EQ(a[2], world * (world - 1) / 2);
    CHECK_EQ(b, world - 1);
    ddpc_work_destroy(w1);
    ddpc_work_destroy(w2);
    CHECK_OK(ddpc_allreduce_async(c, a, a, 3, DDPC_INT32, DDPC_SUM, &w1));
    ddpc_work_destroy(w1); /* runs it: nobody else would */
    CHECK_EQ(a[0], world * world * (world - 1) / 2);
    /* a split meets through the same store */
    ddpc_comm *s = NULL;
    CHECK_OK(ddpc_comm_split(c, rank % 2, 0, &s));
    int32_t x = 1, y = 0;
    CHECK_OK(ddpc_allreduce(s, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, (world + 1 - rank % 2) / 2);
    CHECK_OK(ddpc_comm_destroy(s));
    CHECK_OK(ddpc_comm_destroy(c));
    /* what such a store cannot do, it says */
    CHECK_STATUS(ddpc_store_delete(st, "x", NULL), DDPC_ERR_INVALID_ARG);
    int64_t nk;
    CHECK_STATUS(ddpc_store_num_keys(st, &nk), DDPC_ERR_INVALID_ARG);
    ddpc_store_destroy(st);
    /* a failing store: the error names it and its reason */
    if (rank == 0) {
        ddpc_store_ops bad = { kv_set, kv_get, kv_broken };
        CHECK_OK(ddpc_store_create_ops(&bad, &k, "the flaky service", &st));
        CHECK_STATUS(ddpc_store_add(st, "n", 1, &nk), DDPC_ERR_PEER_LOST);
        CHECK_CONTAINS(ddpc_last_error(), "the flaky service");
        CHECK_CONTAINS(ddpc_last_error(), "the service said no");
        ddpc_store_destroy(st);
        ddpc_store_ops none = { kv_set, NULL, kv_add };
        CHECK_STATUS(ddpc_store_create_ops(&none, &k, "x", &st), DDPC_ERR_INVALID_ARG);
    }
    ddpc_store_destroy(tcp);
}

TEST_T(comm_init_store_ops, 40) {
    int down = -1;
    pid_t launcher = store_process(&down);
    t_run_ranks(3, 35, ops_body, NULL);
    close(down);
    int status = 0;
    CHECK_EQ(waitpid(launcher, &status, 0), launcher);
}

/* No progress thread (the waiters run the queue) and two threads on one
 * communicator: a waiter whose work is queued behind a blocking call that
 * runs inline on another thread sleeps until that call gives the right to
 * execute back, then runs its work. It used to sleep on its work alone,
 * which nobody would ever run: rank 0's wait timed out, and rank 1's
 * allreduce with it. On rank 0 the blocking call waits for rank 1, which
 * comes 1.5 s late, so it is running when the waiter comes (0.5 s after
 * it started); both ranks issue the blocking call first. */
typedef struct {
    ddpc_comm *c;
    int started;
    ddpc_status s;
    int32_t out;
} inline_call;

static void *blocking_call(void *arg) {
    inline_call *b = arg;
    int32_t x = 1;
    __atomic_store_n(&b->started, 1, __ATOMIC_RELEASE);
    b->s = ddpc_allreduce(b->c, &x, &b->out, 1, DDPC_INT32, DDPC_SUM);
    return NULL;
}

static void nothread_body(int rank, int world, void *arg) {
    ddpc_store_server *srv = NULL;
    if (rank == 0) CHECK_OK(ddpc_store_server_create("127.0.0.1", g_port, &srv));
    ddpc_store *st = NULL;
    CHECK_OK(ddpc_store_create_tcp("127.0.0.1", g_port, 10, &st));
    ddpc_comm_options opt = ddpc_comm_options_default();
    opt.connect_timeout_s = 10;
    opt.exec_timeout_s = 10;
    opt.progress_thread = 0;
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_store(st, rank, world, &opt, &c));
    inline_call b = { c, 0, DDPC_OK, 0 };
    if (rank == 1) ddpc__sleep(1.5);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, blocking_call, &b) == 0);
    while (!__atomic_load_n(&b.started, __ATOMIC_ACQUIRE)) ddpc__sleep(0.001);
    ddpc__sleep(0.5);
    int32_t y = rank, z = -1;
    ddpc_work *w = NULL;
    CHECK_OK(ddpc_allreduce_async(c, &y, &z, 1, DDPC_INT32, DDPC_MAX, &w));
    CHECK_OK(ddpc_work_wait(w, 8));
    CHECK_EQ(z, world - 1);
    ddpc_work_destroy(w);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_OK(b.s);
    CHECK_EQ(b.out, world);
    int32_t one = 1, all = 0; /* every rank is done with the store */
    CHECK_OK(ddpc_allreduce(c, &one, &all, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(all, world);
    CHECK_OK(ddpc_comm_destroy(c));
    ddpc_store_destroy(st);
    if (srv) ddpc_store_server_destroy(srv);
}

TEST_T(comm_no_thread_waiter_behind_inline_call, 40) {
    g_port = t_free_port();
    t_run_ranks(2, 35, nothread_body, NULL);
}

/* ------------------------------------------------------------ interfaces */

TEST(comm_ifname_syntax) {
    CHECK(ddpc__ifname_match("eth,enp", "eth0"));
    CHECK(ddpc__ifname_match("eth,enp", "enp3s0"));
    CHECK(!ddpc__ifname_match("eth,enp", "lo"));
    CHECK(!ddpc__ifname_match("^eth", "eth1"));
    CHECK(ddpc__ifname_match("^eth", "lo"));
    CHECK(ddpc__ifname_match("=eth0", "eth0"));
    CHECK(!ddpc__ifname_match("=eth0", "eth01"));
    CHECK(!ddpc__ifname_match("^=eth0", "eth0"));
    CHECK(ddpc__ifname_match("^=eth0", "eth01"));
    CHECK(ddpc__ifname_match("=lo,=eth0", "lo"));
}

static void iface_body(int rank, int world, void *arg) {
    const char *spec = arg;
    char var[64];
    snprintf(var, sizeof var, "%s", spec);
    char *eq = strchr(var, ':');
    *eq = '\0';
    setenv(var, eq + 1, 1);
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, 1);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_iface(const char *spec) {
    g_port = t_free_port();
    t_run_ranks(2, 20, iface_body, (void *)spec);
}

TEST_T(comm_iface_by_ip, 30) {
    run_iface("DDPC_IF_IP:127.0.0.1");
    run_iface("HCCL_IF_IP:127.0.0.1");
}

TEST_T(comm_iface_by_name, 30) {
    run_iface("DDPC_SOCKET_IFNAME:lo");
    run_iface("HCCL_SOCKET_IFNAME:=lo");
}

TEST_T(comm_iface_errors, 30) {
    char ip[64], ifn[64];
    clear_env();
    setenv("DDPC_IF_IP", "198.18.7.7", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_IF_IP=198.18.7.7");
    CHECK_CONTAINS(ddpc_last_error(), "lo");
    setenv("DDPC_IF_IP", "not-an-ip", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_IF_IP='not-an-ip'");
    unsetenv("DDPC_IF_IP");
    setenv("HCCL_SOCKET_IFNAME", "=nosuchif0", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_SOCKET_IFNAME==nosuchif0");
    unsetenv("HCCL_SOCKET_IFNAME");
    CHECK_OK(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn));
    CHECK_STR(ip, "127.0.0.1");
    CHECK_STR(ifn, "lo");
    /* through init_env: a one-line error naming the variable */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    char port[16];
    snprintf(port, sizeof port, "%d", t_free_port());
    setenv("MASTER_PORT", port, 1);
    setenv("DDPC_SOCKET_IFNAME", "nosuch", 1);
    bad_env(DDPC_ERR_NOT_FOUND, "DDPC_SOCKET_IFNAME=nosuch");
}

TEST_T(comm_iface_ipv6, 30) {
    char ip[64], ifn[64];
    clear_env();
    setenv("DDPC_IF_IP", "::1", 1);
    if (ddpc__choose_ip("::1", ip, sizeof ip, ifn, sizeof ifn) != DDPC_OK)
        SKIP("no ::1 here: %s", ddpc_last_error());
    unsetenv("DDPC_IF_IP");
    run_iface("DDPC_IF_IP:::1");
}

/* ------------------------------------------------------------ INFO log, base port */

static void info_body(int rank, int world, void *arg) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/ddpc-test-info-%d-%d.log", (int)getppid(), rank);
    int saved = dup(2); /* the checks below report on the real stderr */
    FILE *f = freopen(path, "w", stderr);
    CHECK(saved >= 0 && f != NULL);
    setenv("DDPC_DEBUG", "INFO", 1);
    char base[16];
    snprintf(base, sizeof base, "%d", *(int *)arg);
    setenv("DDPC_IF_BASE_PORT", base, 1);
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char buf[16384];
    FILE *r = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof buf - 1, r);
    buf[n] = '\0';
    fclose(r);
    unlink(path);
    CHECK_CONTAINS(buf, "DDPC_TIMEOUT=20 (DDPC_TIMEOUT)");
    CHECK_CONTAINS(buf, "DDPC_ALGO=auto (default)");
    char set[64];
    snprintf(set, sizeof set, "DDPC_IF_BASE_PORT=%s (DDPC_IF_BASE_PORT)", base);
    CHECK_CONTAINS(buf, set);
    CHECK_CONTAINS(buf, "listening on 127.0.0.1 (interface lo");
    /* data ports come from the base range */
    char want[64];
    snprintf(want, sizeof want, "listening on 127.0.0.1:%d", *(int *)arg + rank);
    char want2[64];
    snprintf(want2, sizeof want2, "listening on 127.0.0.1:%d", *(int *)arg + 1 - rank);
    CHECK_MSG(strstr(buf, want) || strstr(buf, want2), "no '%s' in the log: %s", want, buf);
}

TEST_T(comm_info_log_and_base_port, 30) {
    /* the two ranks listen on base and base + 1, both free and neither the
     * store's port: a rank pushed to base + 2 would fail the test */
    int base = t_free_port_pair();
    do g_port = t_free_port();
    while (g_port == base || g_port == base + 1);
    t_run_ranks(2, 25, info_body, &base);
}

/* ------------------------------------------------------------ clean close */

static void early_destroy_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, world * (world - 1) / 2);
    if (rank == 2) { /* done early: a goodbye, not a crash */
        CHECK_OK(ddpc_comm_destroy(c));
        return;
    }
    ddpc__sleep(0.3); /* rank 2 is gone by now */
    int32_t v[1000];
    for (int it = 0; it < 20; it++) {
        for (int i = 0; i < 1000; i++) v[i] = rank == 0 ? it * i : -1;
        if (rank == 0)
            CHECK_OK(ddpc_send(c, v, 1000, DDPC_INT32, 1));
        else {
            CHECK_OK(ddpc_recv(c, v, 1000, DDPC_INT32, 0));
            for (int i = 0; i < 1000; i++) CHECK_EQ(v[i], it * i);
        }
    }
    /* a collective needs rank 2: named as gone, not a hang */
    double t0 = ddpc__now();
    ddpc_status s = ddpc_barrier(c);
    CHECK(s == DDPC_ERR_MISMATCH || s == DDPC_ERR_PEER_LOST);
    CHECK(ddpc__now() - t0 < 3.0 * t_slow());
    CHECK_CONTAINS(ddpc_last_error(), "rank 2");
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_peer_destroyed_early_is_not_a_crash, 30) {
    g_port = t_free_port();
    t_run_ranks(3, 25, early_destroy_body, NULL);
}

/* ------------------------------------------------------------ re-init */

static void reinit_body(int rank, int world, void *arg) {
    for (int round = 0; round < 6; round++) {
        if (rank == 0 && round % 2) ddpc__sleep(0.05); /* others reach the old store first */
        ddpc_comm *c = env_comm(rank, world);
        sum_check(c, world * (world - 1) / 2);
        CHECK_OK(ddpc_comm_destroy(c));
    }
}

TEST_T(comm_reinit_same_port, 40) {
    g_port = t_free_port();
    t_run_ranks(3, 35, reinit_body, NULL);
}
