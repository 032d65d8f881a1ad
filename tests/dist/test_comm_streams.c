/* test_comm_streams.c — several TCP connections between two ranks on
 * different hosts (DDPC_SOCKETS_PER_PEER; hosts made with DDPC_HOST_ID on
 * this machine): every collective and send/recv right at 1, 2 and 4
 * connections, sizes 0, 1, odd, prime and large, async too, each
 * connection carrying its part; connections made at creation and on first
 * use, with a job token; a rank killed mid-transfer and one connection of
 * the N closing named as the peer lost; a stranger's hello for a further
 * connection refused without the token; rank 0's setting applies; bad
 * values named. */
#include <linux/tcp.h>
#include <netinet/in.h>

#include "comm_fixtures.h"

/* What a run asks for: N connections, ranks per host, connection mode. */
typedef struct setup {
    const char *n, *lazy, *shm;
    int per_host;
} setup;

/* This rank's communicator on host "h<rank / per_host>". */
static ddpc_comm *host_comm(int rank, int world, const setup *su) {
    char id[32];
    snprintf(id, sizeof id, "streams-h%d", rank / su->per_host);
    setenv("DDPC_HOST_ID", id, 1);
    setenv("DDPC_SOCKETS_PER_PEER", su->n, 1);
    setenv("DDPC_LAZY_CONNECT", su->lazy, 1);
    setenv("DDPC_SHM", su->shm, 1);
    return env_comm_unchecked(rank, world);
}

/* Each link up has its connections: n to another host, one within a host
 * (none over shared memory). */
static void check_sockets(ddpc_comm *c, const setup *su, int n) {
    int me = ddpc_comm_rank(c);
    for (int p = 0; p < ddpc_comm_size(c); p++) {
        if (p == me || !c->peers[p].conn) continue;
        int same = p / su->per_host == me / su->per_host;
        int want = !same ? n : strcmp(su->shm, "1") ? 1 : 0;
        CHECK_MSG(ddpc__peer_sockets(c, p) == want,
                  "rank %d holds %d connections to rank %d, want %d", me, ddpc__peer_sockets(c, p),
                  p, want);
    }
}

/* Bytes stream k of the link to peer has received so far (TCP_INFO). */
static unsigned long long stream_rx(ddpc_comm *c, int peer, int k) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    int fd = ddpc__streams_fd(c->peers[peer].conn, k);
    CHECK(fd >= 0);
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0);
    return (unsigned long long)ti.tcpi_bytes_received;
}

static uint8_t byte_at(int from, size_t i) { return (uint8_t)(from * 31 + i * 7 + i / 251); }

/* Send/recv with the partner (rank ^ world / 2: on another host in these
 * tests) at each size, both directions, and (n > 1) every connection of the
 * pair carried its part of the large one. */
static void p2p_checks(ddpc_comm *c, int rank, int world, int n) {
    int partner = rank ^ (world / 2);
    CHECK_EQ(ddpc__peer_sockets(c, partner), n);
    size_t sizes[] = { 0, 1, 3, 65537, 131071, 262147, (5u << 20) + 7 };
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t len = sizes[si];
        uint8_t *out = malloc(len + 1), *in = malloc(len + 1);
        for (size_t i = 0; i < len; i++) out[i] = byte_at(rank, i);
        memset(in, 0xee, len + 1);
        int sock = ddpc__peer_sockets(c, partner);
        unsigned long long before[DDPC_STREAMS_MAX] = { 0 };
        for (int k = 0; k < sock && sock > 1; k++) before[k] = stream_rx(c, partner, k);
        CHECK_OK(ddpc_barrier(c)); /* no byte of the message has come before */
        for (int turn = 0; turn < 2; turn++) {
            if ((turn == 0) == (rank < partner))
                CHECK_OK(ddpc_send(c, out, len, DDPC_UINT8, partner));
            else
                CHECK_OK(ddpc_recv(c, in, len, DDPC_UINT8, partner));
        }
        for (size_t i = 0; i < len; i++)
            CHECK_MSG(in[i] == byte_at(partner, i), "size %zu: byte %zu is %u, want %u", len, i,
                      in[i], byte_at(partner, i));
        CHECK_MSG(in[len] == 0xee, "size %zu: a byte past the end was written", len);
        if (len > (4u << 20) && sock > 1) /* every connection carried about len / n */
            for (int k = 0; k < sock; k++) {
                unsigned long long got = stream_rx(c, partner, k) - before[k];
                CHECK_MSG(got >= len / (size_t)sock - 4096 && got <= len / (size_t)sock + 4096,
                          "rank %d: connection %d of %d to rank %d carried %llu of %zu bytes", rank,
                          k, sock, partner, got, len);
            }
        free(out);
        free(in);
    }
}

/* Three allreduces in flight at once (odd, prime and large counts). */
static void async_checks(ddpc_comm *c, int rank, int world) {
    size_t counts[3] = { 17, 300007, (1u << 20) + 1 };
    float *x[3], *y[3];
    ddpc_work *w[3];
    for (int j = 0; j < 3; j++) {
        x[j] = malloc(sizeof(float) * counts[j]);
        y[j] = malloc(sizeof(float) * counts[j]);
        for (size_t i = 0; i < counts[j]; i++) x[j][i] = (float)((rank + 1) * (int)(i % 17 + j));
        CHECK_OK(ddpc_allreduce_async(c, x[j], y[j], counts[j], DDPC_FLOAT32, DDPC_SUM, &w[j]));
    }
    float tot = (float)(world * (world + 1) / 2);
    for (int j = 0; j < 3; j++) {
        CHECK_OK(ddpc_work_wait(w[j], -1));
        ddpc_work_destroy(w[j]);
        for (size_t i = 0; i < counts[j]; i++)
            CHECK_MSG(y[j][i] == tot * (float)(i % 17 + (size_t)j), "async %d [%zu] %g", j, i,
                      y[j][i]);
        free(x[j]);
        free(y[j]);
    }
}

static void correct_body(int rank, int world, void *arg) {
    const setup *su = arg;
    int n = atoi(su->n);
    ddpc_comm *c = host_comm(rank, world, su);
    CHECK_EQ(c->streams, n);
    check_sockets(c, su, n);
    allreduce_checks(c, rank, world);
    p2p_checks(c, rank, world, n);
    async_checks(c, rank, world);
    check_sockets(c, su, n);
    CHECK_OK(ddpc_comm_destroy(c));
    /* every collective (env_comm: over TCP, the hosts as set above) */
    if (!strcmp(su->shm, "0")) all_colls_body(rank, world, NULL);
}

static void run_setup(int world, t_rank_fn fn, setup *su, double secs) {
    g_port = t_free_port();
    pids_init();
    t_run_ranks(world, secs, fn, su);
    check_no_segments_left(world);
}

#define STREAMS_TEST(NAME, N, LAZY, SHM, PER_HOST) \
    TEST_T(NAME, 120) {                            \
        setup su = { N, LAZY, SHM, PER_HOST };     \
        run_setup(4, correct_body, &su, 110);      \
    }

/* 4 ranks, each on a host of its own, at 1, 2 and 4 connections */
STREAMS_TEST(comm_streams_1_every_pair_tcp, "1", "0", "0", 1)
STREAMS_TEST(comm_streams_2_every_pair_tcp, "2", "0", "0", 1)
STREAMS_TEST(comm_streams_4_two_hosts_tcp, "4", "0", "0", 2)
/* two hosts of two: shared memory within, 4 connections across */
STREAMS_TEST(comm_streams_4_two_hosts_shm, "4", "0", "1", 2)
/* connections on first use: each further connection gathered by its hello */
STREAMS_TEST(comm_streams_3_lazy, "3", "1", "0", 1)

/* every connection of the N proves the job token */
TEST_T(comm_streams_4_job_token_eager, 120) {
    setenv("DDPC_JOB_TOKEN", "streams-test-token", 1);
    setup su = { "4", "0", "0", 1 };
    run_setup(4, correct_body, &su, 110);
}
TEST_T(comm_streams_4_job_token_lazy, 120) {
    setenv("DDPC_JOB_TOKEN", "streams-test-token", 1);
    setup su = { "4", "1", "1", 2 };
    run_setup(4, correct_body, &su, 110);
}

/* Rank 0's setting applies: rank 0 says 3, the others 1. */
static void rank0_body(int rank, int world, void *arg) {
    setup su = { rank ? "1" : "3", "0", "0", 1 };
    ddpc_comm *c = host_comm(rank, world, &su);
    CHECK_EQ(c->streams, 3);
    check_sockets(c, &su, 3);
    p2p_checks(c, rank, world, 3);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_streams_setting_is_rank_0s, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 50, rank0_body, NULL);
}

/* Both ends of every pair connect at once (alltoall on a lazy
 * communicator, no token): one link of N connections stands per pair. */
static void crossing_body(int rank, int world, void *arg) {
    setup su = { "2", "1", "0", 1 };
    for (int round = 0; round < 3; round++) {
        ddpc_comm *c = host_comm(rank, world, &su);
        int32_t send[16], recv[16];
        for (int p = 0; p < world; p++) send[p] = rank * 1000 + p;
        CHECK_OK(ddpc_alltoall(c, send, recv, 1, DDPC_INT32));
        for (int p = 0; p < world; p++) CHECK_EQ(recv[p], p * 1000 + rank);
        /* a link may still be gathering on the side that did not connect it */
        CHECK_OK(ddpc_barrier(c));
        size_t big = 300000;
        int32_t *a = malloc(4 * big * (size_t)world), *b = malloc(4 * big * (size_t)world);
        for (size_t i = 0; i < big * (size_t)world; i++) a[i] = (int32_t)(rank * 7 + i);
        CHECK_OK(ddpc_alltoall(c, a, b, big, DDPC_INT32));
        for (int p = 0; p < world; p++)
            for (size_t i = 0; i < big; i++)
                CHECK_EQ(b[(size_t)p * big + i], (int32_t)(p * 7 + (size_t)rank * big + i));
        free(a);
        free(b);
        check_sockets(c, &su, 2);
        CHECK_OK(ddpc_comm_destroy(c));
    }
}

TEST_T(comm_streams_lazy_both_ends_connect_at_once, 120) {
    g_port = t_free_port();
    t_run_ranks(6, 110, crossing_body, NULL);
}
/* the same with a job token: every connection's handshake in steps, so
 * ranks connecting their links to each other at once never wait on each
 * other */
TEST_T(comm_streams_lazy_both_ends_connect_at_once_token, 120) {
    setenv("DDPC_JOB_TOKEN", "streams-test-token", 1);
    g_port = t_free_port();
    t_run_ranks(6, 110, crossing_body, NULL);
}

/* ------------------------------------------------------------ faults */

/* Rank 2 is killed in the middle of a large allreduce: the others fail
 * within seconds naming it. */
static void killed_body(int rank, int world, void *arg) {
    rank2_killed_checks(host_comm(rank, world, arg), rank, 4u << 20);
}

TEST_T(comm_streams_rank_killed_mid_transfer, 60) {
    setup su = { "4", "0", "0", 1 };
    run_rank2_killed(4, killed_body, &su);
}
TEST_T(comm_streams_rank_killed_mid_transfer_lazy, 60) {
    setup su = { "4", "1", "0", 1 };
    run_rank2_killed(4, killed_body, &su);
}

/* One of the N connections closes (rank 1 shuts its third connection to
 * rank 0 down) while both wait in a large allreduce: both fail at once,
 * rank 0 naming rank 1 as lost. */
static void one_closed_body(int rank, int world, void *arg) {
    setup su = { "4", "0", "0", 1 };
    ddpc_comm *c = host_comm(rank, world, &su);
    size_t n = 1u << 20;
    float *x = calloc(n, sizeof(float));
    CHECK_OK(ddpc_allreduce(c, x, x, n, DDPC_FLOAT32, DDPC_SUM));
    if (rank == 1) {
        int fd = ddpc__streams_fd(c->peers[0].conn, 2);
        CHECK(fd >= 0);
        CHECK(shutdown(fd, SHUT_RDWR) == 0);
    }
    double t0 = ddpc__now();
    ddpc_status s = DDPC_OK;
    for (int it = 0; it < 20 && s == DDPC_OK; it++)
        s = ddpc_allreduce(c, x, x, n, DDPC_FLOAT32, DDPC_SUM);
    double took = ddpc__now() - t0;
    CHECK_MSG(s == DDPC_ERR_PEER_LOST, "rank %d: %s (%s)", rank, ddpc_status_str(s),
              ddpc_last_error());
    CHECK_MSG(took < 5.0 * t_slow(), "rank %d noticed after %.2f s", rank, took);
    if (rank == 0) CHECK_CONTAINS(ddpc_last_error(), "lost rank 1");
    CHECK_OK(ddpc_comm_destroy(c));
    free(x);
}

TEST_T(comm_streams_one_connection_closing_is_the_peer_lost, 60) {
    g_port = t_free_port();
    t_run_ranks(2, 50, one_closed_body, NULL);
}

/* A connection to rank 0 made by hand (no job token's handshake) that
 * says this rank's hello (link.c's, version 3) for stream k of its link. */
static int raw_hello(ddpc_comm *c, int k) {
    int fd = -1;
    CHECK_OK(ddpc__sock_connect(c->peers[0].ep.ip, c->peers[0].ep.port, ddpc__deadline_in(5), &fd));
    uint32_t hello[8] = { 0x48504444u,
                          3,
                          (uint32_t)c->hello_uid,
                          (uint32_t)(c->hello_uid >> 32),
                          (uint32_t)c->rank,
                          (uint32_t)c->size,
                          0,
                          (uint32_t)k };
    CHECK(write(fd, hello, sizeof hello) == (ssize_t)sizeof hello);
    return fd;
}

/* Rank 1 opens its link to rank 0 (a hello for its first connection,
 * rule 1: it stands) and dies before making the others: rank 0, waiting
 * on rank 2 meanwhile, names rank 1 within seconds instead of waiting out
 * DDPC_TIMEOUT for connections that never come. */
static void gather_gone_body(int rank, int world, void *arg) {
    setup su = { "2", "1", "0", 1 };
    ddpc_comm *c = host_comm(rank, world, &su);
    if (rank == 1) {
        raw_hello(c, 0);
        ddpc__sleep(0.3);
        _exit(0); /* no goodbye: as a crash */
    }
    if (rank == 2) {
        ddpc__sleep(5);
        _exit(0);
    }
    double t0 = ddpc__now();
    int32_t x = 0;
    ddpc_status s = ddpc_recv(c, &x, 1, DDPC_INT32, 2);
    CHECK_MSG(s == DDPC_ERR_PEER_LOST, "%s: %s", ddpc_status_str(s), ddpc_last_error());
    CHECK_CONTAINS(ddpc_last_error(), "lost rank 1 while its connections came (1 of 2 in");
    CHECK(ddpc__now() - t0 < 3.0 * t_slow());
    ddpc_comm_destroy(c);
}

TEST_T(comm_streams_peer_gone_while_its_connections_come, 60) {
    g_port = t_free_port();
    t_run_ranks(3, 50, gather_gone_body, NULL);
}

/* With a job token, a stranger's hello for a further connection of a link
 * (no handshake) is refused like any connection without the token, and
 * the job goes on with the right results. */
static void stranger_body(int rank, int world, void *arg) {
    setup su = { "2", "1", "0", 1 };
    log_to_file("streams-stranger", rank);
    ddpc_comm *c = host_comm(rank, world, &su);
    int fd = -1;
    if (rank == 1) {
        fd = raw_hello(c, 1);
    }
    int done = collectives_until_logged(c, "streams-stranger", "refused the connection", 1);
    CHECK(done);
    p2p_checks(c, rank, world, 2);
    check_sockets(c, &su, 2);
    CHECK_OK(ddpc_comm_destroy(c));
    if (fd >= 0) close(fd);
    const char *log = slurp_log("streams-stranger", rank);
    if (rank == 0) CHECK_CONTAINS(log, "job token");
}

TEST_T(comm_streams_stranger_without_the_token_refused, 60) {
    setenv("DDPC_JOB_TOKEN", "streams-test-token", 1);
    setenv("DDPC_AUTH_TIMEOUT", "1", 1);
    g_port = t_free_port();
    t_run_ranks(2, 50, stranger_body, NULL);
}

/* Bad values are named. */
TEST_T(comm_streams_bad_values, 30) {
    const char *bad[] = { "0", "17", "two", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("DDPC_SOCKETS_PER_PEER", bad[i], 1);
        t_set_rank_env(0, 1, t_free_port());
        ddpc_comm *c = NULL;
        ddpc_status s = ddpc_comm_create_env(&c);
        CHECK_MSG(s == DDPC_ERR_ENV, "DDPC_SOCKETS_PER_PEER=%s: %s", bad[i], ddpc_status_str(s));
        CHECK_CONTAINS(ddpc_last_error(), "DDPC_SOCKETS_PER_PEER");
        CHECK(c == NULL);
    }
}
