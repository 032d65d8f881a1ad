/*
 * test_auth.c — membership and security (docs/SECURITY.md): with a job token
 * (DDPC_JOB_TOKEN), the store and the data listeners refuse connections that
 * send garbage, have no token, have a wrong one, or replay a handshake
 * recorded from a good connection, each closed and warned about with its
 * address, while a job's collectives go on with verified results; a
 * connection that stalls is closed after DDPC_AUTH_TIMEOUT; HCCL's
 * whitelist refuses other addresses (127.0.0.2 against 127.0.0.1, both
 * loopback); data listeners and the store listen on the chosen address
 * only; ddpc-run makes a token for a single-node job.
 *
 * The intruder speaks the wire format itself (base/auth.h), so that it can
 * do what the library never does: prove a wrong token, replay a proof.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/random.h>

#include "base/auth.h"
#include "base/sha256.h"
#include "comm_fixtures.h"
#include "ddpc/store.h"
#include "transport/transport.h"

#define TOKEN "test-job-token-0123456789abcdef"
#define WRONG "test-job-token-0123456789abcdeX"

/* ------------------------------------------------ the intruder's tools */

/* A TCP connection to 127.0.0.1:port from source address src (NULL: any). */
static int dial(const char *src, const char *dst, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    if (src) {
        struct sockaddr_in a = { .sin_family = AF_INET };
        inet_pton(AF_INET, src, &a.sin_addr);
        CHECK_MSG(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", src,
                  strerror(errno));
    }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    inet_pton(AF_INET, dst, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int local_port(int fd) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    CHECK(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
    return ntohs(a.sin_port);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads exactly n bytes within secs; the bytes read (short: the peer closed). */
static size_t read_n(int fd, void *buf, size_t n, double secs) {
    size_t got = 0;
    double end = ddpc__now() + secs * t_slow();
    while (got < n && ddpc__now() < end) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

/* The server closes fd within secs (EOF or reset), having sent at most
 * what a refusal carries (a verdict or an error frame). */
static void expect_closed(int fd, double secs, const char *what) {
    char buf[4096];
    double end = ddpc__now() + secs * t_slow();
    size_t total = 0;
    for (;;) {
        CHECK_MSG(ddpc__now() < end, "%s: the connection was not closed within %g s", what, secs);
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) break;
        total += (size_t)r;
        CHECK_MSG(total < 1024, "%s: the server sent %zu bytes instead of closing", what, total);
    }
    close(fd);
}

/* The client half done by hand with token (right or wrong), on a fresh
 * connection: returns the verdict word (DDPC_AUTH_ACCEPTED, ...) or -1 when
 * the server closed first. rec (when not NULL) gets the hello and the
 * proof sent, for a replay. */
static long raw_auth(int fd, const char *token, int purpose,
                     unsigned char rec[DDPC_AUTH_HELLO + DDPC_AUTH_PROOF]) {
    unsigned char hello[DDPC_AUTH_HELLO], ch[DDPC_AUTH_CHALLENGE], proof[32], v[8];
    put32(hello, DDPC_AUTH_MAGIC);
    put32(hello + 4, DDPC_AUTH_VERSION);
    put32(hello + 8, (uint32_t)purpose);
    put32(hello + 12, 0);
    CHECK_EQ(getrandom(hello + 16, 32, 0), 32);
    CHECK_EQ(write(fd, hello, sizeof hello), (ssize_t)sizeof hello);
    if (read_n(fd, ch, sizeof ch, 30) != sizeof ch) return -1;
    CHECK_EQ(get32(ch), DDPC_AUTH_MAGIC);
    char label[32];
    unsigned char p[4];
    int ln = snprintf(label, sizeof label, "ddpc job token v1 client");
    put32(p, (uint32_t)purpose);
    const void *parts[4] = { label, p, hello + 16, ch + 8 };
    size_t lens[4] = { (size_t)ln, 4, 32, 32 };
    ddpc__hmac_sha256(token, strlen(token), parts, lens, 4, proof);
    CHECK_EQ(write(fd, proof, sizeof proof), (ssize_t)sizeof proof);
    if (rec) {
        memcpy(rec, hello, sizeof hello);
        memcpy(rec + sizeof hello, proof, sizeof proof);
    }
    if (read_n(fd, v, 8, 30) != 8) return -1;
    CHECK_EQ(get32(v), DDPC_AUTH_MAGIC);
    return (long)get32(v + 4);
}

/* Whether log holds a refusal of the connection from 127.0.0.1:port. */
static int refused_in_log(const char *log, int port) {
    char pat[64];
    snprintf(pat, sizeof pat, "from 127.0.0.1:%d", port);
    for (const char *p = strstr(log, pat); p; p = strstr(p + 1, pat)) {
        const char *bol = p;
        while (bol > log && bol[-1] != '\n') bol--;
        if (strstr(bol, "WARN") && strstr(bol, "WARN") < p) return 1;
    }
    return 0;
}

/* ------------------------------------------------ a data listener */

typedef struct acceptor {
    ddpc__listener *lis;
    int want, got; /* good connections to accept, accepted */
    char first[8][5];
    ddpc_status s;
} acceptor;

/* Accepts until want connections came through, reading 4 bytes from each. */
static void *accept_loop(void *p) {
    acceptor *a = p;
    const ddpc__transport *tcp = &ddpc__transport_tcp;
    double deadline = ddpc__deadline_in(60 * t_slow());
    while (a->got < a->want && a->got < 8) {
        ddpc__conn *c = NULL;
        a->s = tcp->accept(a->lis, deadline, -1, &c);
        if (a->s != DDPC_OK) return NULL;
        a->s = tcp->recv_full(c, a->first[a->got], 4, deadline, -1);
        tcp->close(c);
        if (a->s != DDPC_OK) return NULL;
        a->first[a->got++][4] = '\0';
    }
    return NULL;
}

/* One data listener (the TCP transport's, as every rank's) with a job
 * token: of a staller, garbage, a hello without a token, a wrong token, a
 * good handshake (recorded), its replay and the library's own client,
 * only the two good ones come out of accept; every other one is closed,
 * and warned about with its address. */
TEST(auth_data_listener_refuses_intruders) {
    setenv("DDPC_JOB_TOKEN", TOKEN, 1);
    setenv("DDPC_AUTH_TIMEOUT", "1", 1);
    log_to_file("lis", 0);
    const ddpc__transport *tcp = &ddpc__transport_tcp;
    acceptor a = { .want = 2 };
    int port = 0;
    CHECK_OK(tcp->listen("127.0.0.1", 0, &a.lis, &port));
    pthread_t th;
    CHECK(pthread_create(&th, NULL, accept_loop, &a) == 0);
    /* a staller first: it must hold up nobody */
    int stall = dial(NULL, "127.0.0.1", port), stall_port = local_port(stall);
    double t_stall = ddpc__now();
    int g = dial(NULL, "127.0.0.1", port), g_port = local_port(g);
    CHECK_EQ(write(g, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 27);
    expect_closed(g, 10, "garbage");
    int n = dial(NULL, "127.0.0.1", port), n_port = local_port(n);
    unsigned char hello[24] = { 0x44, 0x44, 0x50, 0x48, 1 }; /* bootstrap's hello, no token */
    CHECK_EQ(write(n, hello, sizeof hello), (ssize_t)sizeof hello);
    expect_closed(n, 10, "no token");
    int w = dial(NULL, "127.0.0.1", port), w_port = local_port(w);
    CHECK_EQ(raw_auth(w, WRONG, DDPC_AUTH_DATA, NULL), DDPC_AUTH_REFUSED);
    expect_closed(w, 10, "wrong token");
    int s = dial(NULL, "127.0.0.1", port), s_port = local_port(s);
    CHECK_EQ(raw_auth(s, TOKEN, DDPC_AUTH_STORE, NULL), -1); /* a store handshake */
    expect_closed(s, 10, "store purpose");
    unsigned char rec[DDPC_AUTH_HELLO + DDPC_AUTH_PROOF];
    int ok = dial(NULL, "127.0.0.1", port);
    CHECK_EQ(raw_auth(ok, TOKEN, DDPC_AUTH_DATA, rec), DDPC_AUTH_ACCEPTED); /* the control */
    CHECK_EQ(write(ok, "GOOD", 4), 4);
    int r = dial(NULL, "127.0.0.1", port), r_port = local_port(r);
    CHECK_EQ(write(r, rec, sizeof rec), (ssize_t)sizeof rec);
    unsigned char buf[DDPC_AUTH_CHALLENGE + 8];
    CHECK_EQ(read_n(r, buf, sizeof buf, 10), sizeof buf); /* a challenge, then the verdict */
    CHECK_EQ(get32(buf + DDPC_AUTH_CHALLENGE + 4), DDPC_AUTH_REFUSED);
    expect_closed(r, 10, "replay");
    ddpc__conn *lib = NULL;
    CHECK_OK(ddpc__tcp_dial("127.0.0.1", port, ddpc__deadline_in(10), 0, &lib));
    CHECK_OK(tcp->send_full(lib, "LIBC", 4, ddpc__deadline_in(10), -1));
    pthread_join(th, NULL);
    CHECK_OK(a.s);
    CHECK_EQ(a.got, 2);
    CHECK_STR(a.first[0], "GOOD");
    CHECK_STR(a.first[1], "LIBC");
    /* the staller is closed once DDPC_AUTH_TIMEOUT passes, if accept is
     * still being called: call it once more, briefly */
    ddpc__conn *none = NULL;
    CHECK_STATUS(tcp->accept(a.lis, ddpc__deadline_in(1.5 * t_slow()), -1, &none),
                 DDPC_ERR_TIMEOUT);
    expect_closed(stall, 5, "staller");
    CHECK(ddpc__now() - t_stall >= 0.9);
    tcp->close(lib);
    close(ok);
    tcp->close_listener(a.lis);
    const char *log = slurp_log("lis", 0);
    int ports[] = { g_port, n_port, w_port, s_port, r_port, stall_port };
    const char *names[] = { "garbage",       "no token", "wrong token",
                            "store purpose", "replay",   "staller" };
    for (int i = 0; i < 6; i++)
        CHECK_MSG(refused_in_log(log, ports[i]), "no warning for the %s connection (port %d): %s",
                  names[i], ports[i], log);
    CHECK_CONTAINS(log, "a wrong token, or a replayed handshake");
    CHECK_CONTAINS(log, "within DDPC_AUTH_TIMEOUT=1 s");
}

/* ------------------------------------------------ a job under attack */

#define WORLD 3

typedef struct shared {
    volatile int phase; /* 1: bootstrap attacks sent; 2: all attacks done */
    volatile int iters[WORLD];
    int ports[16]; /* the intruder's store connections' local ports */
    int nports;
} shared;

static shared *g_sh;

/* The ranks: the last one starts when the intruder has sent its first
 * attacks at rank 0's data port (so they land during the bootstrap);
 * then collectives in a loop, every result checked, until the intruder is
 * done (the ranks agree on when through an allreduce). */
static void job_rank(int rank, int world, void *arg) {
    setenv("DDPC_JOB_TOKEN", TOKEN, 1);
    setenv("DDPC_AUTH_TIMEOUT", "2", 1);
    setenv("DDPC_SHM", "0", 1); /* every byte over the authenticated sockets */
    if (rank == 0) log_to_file("job", 0);
    if (rank == world - 1)
        for (double end = ddpc__now() + 60 * t_slow(); g_sh->phase < 1 && ddpc__now() < end;)
            ddpc__sleep(0.01);
    ddpc_comm *c = env_comm(rank, world);
    int32_t x[1000], y[1000], done = 0;
    for (long it = 0; !done && it < 200000; it++) {
        for (int i = 0; i < 1000; i++) x[i] = rank * 1000 + i + (int32_t)it;
        CHECK_OK(ddpc_allreduce(c, x, y, 1000, DDPC_INT32, DDPC_SUM));
        for (int i = 0; i < 1000; i++)
            CHECK_EQ(y[i], 1000 * (world * (world - 1) / 2) + world * (i + (int32_t)it));
        CHECK_OK(ddpc_broadcast(c, x, y, 1000, DDPC_INT32, (int)(it % world)));
        for (int i = 0; i < 1000; i++) CHECK_EQ(y[i], (it % world) * 1000 + i + (int32_t)it);
        g_sh->iters[rank] = (int)it + 1;
        int32_t flag = g_sh->phase >= 2, any = 0;
        CHECK_OK(ddpc_allreduce(c, &flag, &any, 1, DDPC_INT32, DDPC_MAX));
        done = any;
    }
    CHECK_MSG(done, "rank %d: the intruder never finished", rank);
    CHECK_OK(ddpc_comm_destroy(c));
    if (rank != 0) return;
    const char *log = slurp_log("job", 0);
    for (int i = 0; i < g_sh->nports; i++)
        CHECK_MSG(refused_in_log(log, g_sh->ports[i]),
                  "no warning for intruder connection %d (port %d) in rank 0's log: %s", i,
                  g_sh->ports[i], log);
}

static int g_data_port;

/* Rank 0's data port, from its published entry. */
static int data_port_of_rank0(ddpc_store *st) {
    void *v = NULL;
    size_t n = 0;
    CHECK_OK(ddpc_store_get(st, "ddpc/comm0/peer/0", 60 * t_slow(), &v, &n));
    int size = 0, port = 0;
    CHECK_EQ(sscanf((char *)v, "v6 %d %d", &size, &port), 2);
    free(v);
    return port;
}

/* Records connection fd's local port as one rank 0 must warn about. */
static int noted(int fd) {
    if (fd >= 0 && g_sh->nports < 16) g_sh->ports[g_sh->nports++] = local_port(fd);
    return fd;
}

/* Every attack on the store at port, while the job runs. */
static void attack_store(int port) {
    /* garbage */
    int g = noted(dial(NULL, "127.0.0.1", port));
    CHECK_EQ(write(g, "\xff\xfe garbage \x00\x01", 13), 13);
    expect_closed(g, 10, "store: garbage");
    /* ddpc's store handshake without a token: told why, in its protocol */
    int n = noted(dial(NULL, "127.0.0.1", port));
    unsigned char hs[8];
    put32(hs, 0x53504444u);
    put32(hs + 4, 1);
    CHECK_EQ(write(n, hs, 8), 8);
    char reply[256] = "";
    size_t got = read_n(n, reply, sizeof reply - 1, 10);
    CHECK(got > 5);
    CHECK_CONTAINS(reply + 5, "requires the job's token");
    expect_closed(n, 10, "store: no token");
    /* the library's client without a token says so too */
    unsetenv("DDPC_JOB_TOKEN");
    ddpc_store *st = NULL;
    CHECK_STATUS(ddpc_store_create_tcp("127.0.0.1", port, 10, &st), DDPC_ERR_PROTOCOL);
    CHECK_CONTAINS(ddpc_last_error(), "requires the job's token");
    setenv("DDPC_JOB_TOKEN", WRONG, 1); /* and with a wrong token it refuses the store */
    CHECK_STATUS(ddpc_store_create_tcp("127.0.0.1", port, 10, &st), DDPC_ERR_DENIED);
    CHECK_CONTAINS(ddpc_last_error(), "does not know this job's token");
    setenv("DDPC_JOB_TOKEN", TOKEN, 1);
    /* a PyTorch TCPStore query (num_keys): no token possible, refused */
    int q = noted(dial(NULL, "127.0.0.1", port));
    CHECK_EQ(write(q, "\x06", 1), 1);
    expect_closed(q, 10, "store: TCPStore client");
    /* a wrong token's proof */
    int w = noted(dial(NULL, "127.0.0.1", port));
    CHECK_EQ(raw_auth(w, WRONG, DDPC_AUTH_STORE, NULL), DDPC_AUTH_REFUSED);
    expect_closed(w, 10, "store: wrong token");
    /* a good handshake (the control: the store then answers a ping) ... */
    unsigned char rec[DDPC_AUTH_HELLO + DDPC_AUTH_PROOF];
    int ok = dial(NULL, "127.0.0.1", port);
    CHECK_EQ(raw_auth(ok, TOKEN, DDPC_AUTH_STORE, rec), DDPC_AUTH_ACCEPTED);
    unsigned char ping[13];
    memcpy(ping, hs, 8);
    put32(ping + 8, 1);
    ping[12] = 9; /* OP_PING */
    CHECK_EQ(write(ok, ping, 13), 13);
    unsigned char ans[14];
    CHECK_EQ(read_n(ok, ans, 9, 10), 9); /* the handshake's reply: len 5, RS_OK, version */
    CHECK_EQ(ans[4], 0);
    CHECK_EQ(read_n(ok, ans, 5, 10), 5); /* the ping's: len 1, RS_OK */
    CHECK_EQ(ans[4], 0);
    close(ok);
    /* ... replayed on a new connection */
    int r = noted(dial(NULL, "127.0.0.1", port));
    CHECK_EQ(write(r, rec, sizeof rec), (ssize_t)sizeof rec);
    unsigned char buf[DDPC_AUTH_CHALLENGE + 8];
    CHECK_EQ(read_n(r, buf, sizeof buf, 10), sizeof buf);
    CHECK_EQ(get32(buf + DDPC_AUTH_CHALLENGE + 4), DDPC_AUTH_REFUSED);
    expect_closed(r, 10, "store: replay");
    /* a staller: closed after DDPC_AUTH_TIMEOUT (2 s) */
    int s = noted(dial(NULL, "127.0.0.1", port));
    expect_closed(s, 2 + 10, "store: staller");
}

static void intruder(void) {
    setenv("DDPC_JOB_TOKEN", TOKEN, 1);
    ddpc_store *st = NULL;
    for (double end = ddpc__now() + 60 * t_slow(); st == NULL && ddpc__now() < end;)
        if (ddpc_store_create_tcp("127.0.0.1", g_port, 1, &st) != DDPC_OK) ddpc__sleep(0.05);
    CHECK_MSG(st != NULL, "the job's store never came up: %s", ddpc_last_error());
    g_data_port = data_port_of_rank0(st);
    /* during the bootstrap: rank 0 accepts these beside its peers */
    int g = dial(NULL, "127.0.0.1", g_data_port);
    CHECK_EQ(write(g, "garbage garbage garbage garbage", 31), 31);
    int n = dial(NULL, "127.0.0.1", g_data_port);
    unsigned char hello[24] = { 0x44, 0x44, 0x50, 0x48, 1 };
    CHECK_EQ(write(n, hello, sizeof hello), (ssize_t)sizeof hello);
    int s = dial(NULL, "127.0.0.1", g_data_port); /* a staller */
    g_sh->phase = 1;
    expect_closed(g, 30, "data: garbage");
    expect_closed(n, 30, "data: no token");
    expect_closed(s, 30, "data: staller");
    /* the job runs: the store refuses every intruder */
    for (double end = ddpc__now() + 60 * t_slow(); g_sh->iters[0] < 10 && ddpc__now() < end;)
        ddpc__sleep(0.01);
    CHECK(g_sh->iters[0] >= 10);
    int before = g_sh->iters[0];
    attack_store(g_port);
    /* and rank 0's data port no longer listens */
    int late = dial(NULL, "127.0.0.1", g_data_port);
    if (late >= 0) expect_closed(late, 10, "data: after the bootstrap");
    CHECK_MSG(g_sh->iters[0] > before, "the job made no progress during the attacks");
    ddpc_store_destroy(st);
    g_sh->phase = 2;
}

static void job_or_intruder(int rank, int world, void *arg) {
    if (rank == WORLD)
        intruder();
    else
        job_rank(rank, WORLD, arg);
}

TEST_T(auth_job_refuses_intruders, 180) {
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(g_sh != MAP_FAILED);
    memset(g_sh, 0, sizeof *g_sh);
    g_port = t_free_port();
    pids_init();
    t_run_ranks(WORLD + 1, 150, job_or_intruder, NULL);
    CHECK_EQ(g_sh->nports, 6);
    for (int r = 0; r < WORLD; r++) CHECK(g_sh->iters[r] > 10);
}

/* ------------------------------------------------ whitelist, binding */

static void wl_rank(int rank, int world, void *arg) {
    setenv("HCCL_WHITELIST_DISABLE", "0", 1);
    setenv("HCCL_WHITELIST_FILE", (const char *)arg, 1);
    if (rank == 0) log_to_file("wl", 0);
    if (rank < 2) {
        ddpc_comm *c = env_comm(rank, 2);
        int32_t any = 0;
        for (long it = 0; !any && it < 1000000; it++) { /* until the intruder is done */
            sum_check(c, 1);
            int32_t flag = g_sh->phase >= 2;
            CHECK_OK(ddpc_allreduce(c, &flag, &any, 1, DDPC_INT32, DDPC_MAX));
        }
        CHECK(any);
        CHECK_OK(ddpc_comm_destroy(c));
        if (rank == 0) {
            const char *log = slurp_log("wl", 0);
            CHECK_CONTAINS(log, "refused a connection from 127.0.0.2:");
            CHECK_CONTAINS(log, "not in HCCL_WHITELIST_FILE");
        }
        return;
    }
    /* the intruder, from 127.0.0.2 (also loopback, but not listed) */
    unsetenv("HCCL_WHITELIST_DISABLE");
    ddpc_store *st = NULL;
    for (double end = ddpc__now() + 60 * t_slow(); st == NULL && ddpc__now() < end;)
        if (ddpc_store_create_tcp("127.0.0.1", g_port, 1, &st) != DDPC_OK) ddpc__sleep(0.05);
    CHECK(st != NULL); /* from 127.0.0.1: listed */
    ddpc_store_destroy(st);
    int fd = dial("127.0.0.2", "127.0.0.1", g_port);
    CHECK(fd >= 0);
    expect_closed(fd, 10, "whitelist: store from 127.0.0.2");
    g_sh->phase = 2;
}

/* HCCL_WHITELIST_DISABLE=0 with HCCL_WHITELIST_FILE listing 127.0.0.1: the
 * job runs; a connection to its store from 127.0.0.2 is closed, warned. */
TEST(auth_whitelist) {
    const char *path = t_tmp_path("whitelist.json");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "{\"host_ip\": [\"127.0.0.1\"], \"device_ip\": []}\n");
    fclose(f);
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(g_sh, 0, sizeof *g_sh);
    g_port = t_free_port();
    t_run_ranks(3, 90, wl_rank, (void *)path);
    t_tmp_remove();
}

static void bind_rank(int rank, int world, void *arg) {
    if (rank == 0) {
        ddpc_comm *c = env_comm(0, 2);
        sum_check(c, 1);
        CHECK_OK(ddpc_comm_destroy(c));
        return;
    }
    ddpc_store *st = NULL;
    for (double end = ddpc__now() + 60 * t_slow(); st == NULL && ddpc__now() < end;)
        if (ddpc_store_create_tcp("127.0.0.1", g_port, 1, &st) != DDPC_OK) ddpc__sleep(0.05);
    CHECK(st != NULL);
    int port = data_port_of_rank0(st);
    ddpc_store_destroy(st);
    /* rank 0 chose 127.0.0.1 (the route to MASTER_ADDR): its data port and
     * its store answer there and not at 127.0.0.2, which reaches any
     * socket listening on every address */
    CHECK_MSG(dial(NULL, "127.0.0.2", port) < 0, "rank 0's data port %d answers on 127.0.0.2",
              port);
    CHECK_MSG(dial(NULL, "127.0.0.2", g_port) < 0, "the store (port %d) answers on 127.0.0.2",
              g_port);
    int fd = dial(NULL, "127.0.0.1", port);
    CHECK(fd >= 0);
    close(fd); /* rank 0 warns and goes on */
    ddpc_comm *c = env_comm(1, 2);
    sum_check(c, 1);
    CHECK_OK(ddpc_comm_destroy(c));
}

/* Data listeners and the store listen on the chosen address only; a stray
 * connection to a data port during the bootstrap does not break it. */
TEST(auth_listen_on_chosen_address) {
    g_port = t_free_port();
    t_run_ranks(2, 90, bind_rank, NULL);
    /* asked for: every address */
    setenv("DDPC_STORE_ANY_ADDR", "1", 1);
    ddpc_store_server *srv = NULL;
    CHECK_OK(ddpc_store_server_create("127.0.0.1", 0, &srv));
    int fd = dial(NULL, "127.0.0.2", ddpc_store_server_port(srv));
    CHECK_MSG(fd >= 0, "DDPC_STORE_ANY_ADDR=1: the store does not answer on 127.0.0.2");
    close(fd);
    ddpc_store_server_destroy(srv);
    unsetenv("DDPC_STORE_ANY_ADDR");
    CHECK_OK(ddpc_store_server_create("127.0.0.1", 0, &srv));
    CHECK(dial(NULL, "127.0.0.2", ddpc_store_server_port(srv)) < 0);
    ddpc_store_server_destroy(srv);
}

/* A rank without the job's token, or with another, fails at once with an
 * error that names DDPC_JOB_TOKEN; the others are not disturbed into a
 * wrong answer (they time out waiting for it). */
static void mismatch_rank(int rank, int world, void *arg) {
    setenv("DDPC_CONNECT_TIMEOUT", "5", 1);
    if (rank == 0) setenv("DDPC_JOB_TOKEN", TOKEN, 1);
    if (rank == 1) unsetenv("DDPC_JOB_TOKEN");
    t_set_rank_env(rank, 2, g_port);
    ddpc_comm *c = NULL;
    ddpc_status s = ddpc_comm_create_env(&c);
    CHECK(s != DDPC_OK);
    if (rank == 1) CHECK_CONTAINS(ddpc_last_error(), "DDPC_JOB_TOKEN");
}

TEST(auth_token_mismatch_is_named) {
    g_port = t_free_port();
    t_run_ranks(2, 60, mismatch_rank, NULL);
}

/* ddpc-run gives a single-node job's workers one token, a new one each
 * job; it makes none for several nodes (the user sets it everywhere). */
TEST(auth_ddpc_run_makes_a_token) {
    char out[4096], out2[4096];
    int p = t_free_port_pair();
    int rc = t_run_cmdf(60, out, sizeof out,
                        "env -u DDPC_JOB_TOKEN %s --nproc-per-node=2 --master-port=%d sh -c "
                        "'echo \"tok=$DDPC_JOB_TOKEN\"' 2>&1",
                        t_bin("ddpc-run"), p);
    CHECK_MSG(rc == 0, "%s", out);
    const char *a = strstr(out, "tok="), *b = a ? strstr(a + 4, "tok=") : NULL;
    CHECK_MSG(a && b, "%s", out);
    CHECK_EQ(strcspn(a + 4, "\n"), 64);
    CHECK(strncmp(a, b, 68) == 0);
    rc = t_run_cmdf(60, out2, sizeof out2,
                    "env -u DDPC_JOB_TOKEN %s --nproc-per-node=1 --master-port=%d sh -c "
                    "'echo \"tok=$DDPC_JOB_TOKEN\"' 2>&1",
                    t_bin("ddpc-run"), p);
    CHECK_MSG(rc == 0, "%s", out2);
    const char *c = strstr(out2, "tok=");
    CHECK(c && strncmp(a, c, 68) != 0);
    /* a token the user set is kept */
    rc = t_run_cmdf(60, out, sizeof out,
                    "DDPC_JOB_TOKEN=" TOKEN " %s --nproc-per-node=1 --master-port=%d sh -c "
                    "'echo \"tok=$DDPC_JOB_TOKEN\"' 2>&1",
                    t_bin("ddpc-run"), p);
    CHECK_MSG(rc == 0, "%s", out);
    CHECK_CONTAINS(out, "tok=" TOKEN);
    /* set empty: none is made */
    rc = t_run_cmdf(60, out, sizeof out,
                    "DDPC_JOB_TOKEN= %s --nproc-per-node=1 --master-port=%d sh -c "
                    "'echo \"tok=[$DDPC_JOB_TOKEN]\"' 2>&1",
                    t_bin("ddpc-run"), p);
    CHECK_MSG(rc == 0, "%s", out);
    CHECK_CONTAINS(out, "tok=[]");
}

/* Two nodes (two ddpc-runs on loopback), the token set on both: the
 * launchers and their 4 workers authenticate and the job's allreduces
 * check out; a node whose token differs is refused at once, saying why,
 * and the other gives up within its join timeout. */
TEST_T(auth_two_nodes_share_a_token, 120) {
    char out[1 << 16];
    int p = t_free_port_pair();
    const char *node =
        "DDPC_JOB_TOKEN=%s DDPC_CONNECT_TIMEOUT=%s %s --nnodes=2 --node-rank=%d "
        "--nproc-per-node=2 --master-port=%d %s allreduce -b 4K -e 64K -n 2 -w 1 2>&1";
    char n1[1024], n0[1024];
    snprintf(n1, sizeof n1, node, TOKEN, "60", t_bin("ddpc-run"), 1, p, t_bin("ddpc-bench"));
    snprintf(n0, sizeof n0, node, TOKEN, "60", t_bin("ddpc-run"), 0, p, t_bin("ddpc-bench"));
    int rc =
        t_run_cmdf(90, out, sizeof out, "%s & %s; r0=$?; wait $!; echo \"rc0=$r0 rc1=$?\"", n1, n0);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_MSG(strstr(out, "rc0=0 rc1=0") != NULL, "a node failed: %s", out);
    CHECK_CONTAINS(out, "Out of bounds values : 0 OK");
    /* node 1 has another token */
    p = t_free_port_pair();
    snprintf(n1, sizeof n1, node, WRONG, "5", t_bin("ddpc-run"), 1, p, t_bin("ddpc-bench"));
    snprintf(n0, sizeof n0, node, TOKEN, "5", t_bin("ddpc-run"), 0, p, t_bin("ddpc-bench"));
    double t0 = ddpc__now();
    rc = t_run_cmdf(90, out, sizeof out,
                    "%s & sleep 0.5; %s; r1=$?; wait $!; echo \"rc0=$? rc1=$r1\"", n0, n1);
    CHECK_MSG(rc == 0, "rc=%d: %s", rc, out);
    CHECK_MSG(strstr(out, "rc0=0") == NULL && strstr(out, "rc1=0") == NULL, "%s", out);
    CHECK_CONTAINS(out, "does not know this job's token");
    CHECK(ddpc__now() - t0 < 60 * t_slow());
}
