/* test_comm_lazy.c — connections made on first use (DDPC_LAZY_CONNECT=1)
 * and at creation (=0): who holds which connection, both ends of a pair
 * connecting at once, a send that must not wait for its receiver to need
 * the pair, a stranger on the data port, a peer gone before its first use,
 * and 256 ranks on this machine without running out of descriptors or
 * ports. */
#include <sys/resource.h>

#include "comm_fixtures.h"

/* Peers this rank has a connection to (link up) and ones under way. */
static int links_up(const ddpc_comm *c) {
    int n = 0;
    for (int p = 0; p < c->size; p++) n += c->peers[p].conn != NULL;
    return n;
}

static int links_pending(const ddpc_comm *c) {
    int n = 0;
    for (int p = 0; p < c->size; p++)
        n += c->peers[p].link != DDPC_LINK_NONE && c->peers[p].link != DDPC_LINK_UP;
    return n;
}

/* This process's open descriptors and, of them, sockets. */
static void count_fds(int *fds, int *socks) {
    *fds = *socks = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
        char path[300], to[64];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, to, sizeof to - 1);
        to[n > 0 ? n : 0] = '\0';
        (*fds)++;
        *socks += !strncmp(to, "socket:", 7);
    }
    closedir(d);
}

/* world ranks running fn(arg) on a fresh port, for at most secs; no
 * shared-memory segment left behind. */
static void run_arg(int world, t_rank_fn fn, void *arg, double secs) {
    g_port = t_free_port();
    pids_init();
    t_run_ranks(world, secs, fn, arg);
    check_no_segments_left(world);
}

/* ------------------------------------------------------------ who connects */

/* arg: DDPC_LAZY_CONNECT for this rank ("0", "1", "auto": lazy above 16
 * ranks), or "mixed": rank 0 says 0 and the others 1 (rank 0's applies). */
static void mode_body(int rank, int world, void *arg) {
    const char *mode = arg;
    int lazy = !strcmp(mode, "1") || (!strcmp(mode, "auto") && world > 16);
    setenv("DDPC_LAZY_CONNECT", !strcmp(mode, "mixed") ? (rank ? "1" : "0") : mode, 1);
    ddpc_comm *c = env_comm(rank, world);
    CHECK_EQ(c->lazy, lazy);
    CHECK_EQ(links_up(c), lazy ? 0 : world - 1); /* eager: a full mesh at creation */
    int32_t x = rank + 1, y = 0;
    CHECK_OK(ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM));
    CHECK_EQ(y, world * (world + 1) / 2);
    CHECK_OK(ddpc_broadcast(c, &x, &x, 1, DDPC_INT32, world - 1));
    CHECK_EQ(x, world);
    CHECK_OK(ddpc_barrier(c));
    int up = links_up(c);
    if (lazy) /* small collectives on 16 ranks use a few peers each, never all */
        CHECK_MSG(up >= 2 && up < world - 1, "rank %d has %d links after 3 collectives", rank, up);
    else
        CHECK_EQ(up, world - 1);
    CHECK_EQ(links_pending(c), 0);
    CHECK_OK(ddpc_comm_destroy(c));
    all_colls_body(rank, world, NULL); /* every collective, on a communicator of the same mode */
}

TEST_T(comm_lazy_connects_only_what_collectives_use, 120) { run_arg(16, mode_body, "1", 110); }
TEST_T(comm_eager_connects_every_pair_at_creation, 120) { run_arg(16, mode_body, "0", 110); }
/* With a job token only the higher rank of a pair connects (link.c, rule 4),
 * through the token's handshake; every collective still runs. */
TEST_T(comm_lazy_with_a_job_token, 120) {
    setenv("DDPC_JOB_TOKEN", "lazy-connections-test-token", 1);
    run_arg(16, mode_body, "1", 110);
}
TEST_T(comm_connect_mode_is_rank_0s, 60) { run_arg(4, mode_body, "mixed", 55); }
TEST_T(comm_connect_mode_auto_is_eager_up_to_16, 60) { run_arg(4, mode_body, "auto", 55); }

/* ------------------------------------------------------------ races */

/* Every rank sends to every other at once (alltoall, then pairwise
 * send/recv where both ends send first): both ends of each pair connect at
 * the same moment; one connection per pair stands, on both ends, and the
 * data is right. Fresh communicators, several rounds, shm and TCP. */
static void crossing_body(int rank, int world, void *arg) {
    for (int round = 0; round < 4; round++) {
        setenv("DDPC_SHM", round % 2 ? "0" : "1", 1);
        ddpc_comm *c = env_comm(rank, world);
        int32_t send[64], recv[64];
        for (int p = 0; p < world; p++) send[p] = rank * 1000 + p;
        CHECK_OK(ddpc_alltoall(c, send, recv, 1, DDPC_INT32));
        for (int p = 0; p < world; p++) CHECK_EQ(recv[p], p * 1000 + rank);
        CHECK_EQ(links_up(c), world - 1);
        CHECK_EQ(links_pending(c), 0);
        int fds, socks;
        count_fds(&fds, &socks);
        /* the listener and one socket per peer (a shm link keeps its doorbell);
         * rank 0 also hosts the store, whose clients may still be closing;
         * with a token (arg), the listener may still hold a lower rank's
         * withdrawn attempt mid-handshake, closed at its next look */
        int slack = arg ? rank : 0;
        CHECK_MSG(socks >= world && (rank == 0 || socks <= world + 2 + slack),
                  "rank %d: %d sockets for %d peers", rank, socks, world - 1);
        int partner = rank ^ 1;
        if (partner < world) { /* both send first: small messages are buffered */
            int32_t v = rank, w = -1;
            CHECK_OK(ddpc_send(c, &v, 1, DDPC_INT32, partner));
            CHECK_OK(ddpc_recv(c, &w, 1, DDPC_INT32, partner));
            CHECK_EQ(w, partner);
        }
        CHECK_OK(ddpc_comm_destroy(c));
    }
}

TEST_T(comm_lazy_both_ends_connect_at_once, 120) {
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    run_arg(8, crossing_body, NULL, 110);
}

/* The same with a job token: each end answers the other's handshake while
 * its own is under way (link.c, rule 4), and the one withdrawn is not
 * warned of. */
static void token_crossing_body(int rank, int world, void *arg) {
    log_to_file("token-crossing", rank);
    crossing_body(rank, world, "token");
    const char *log = slurp_log("token-crossing", rank);
    CHECK_MSG(!strstr(log, "[NET] WARN"), "rank %d warned: %s", rank, log);
}

TEST_T(comm_lazy_token_both_ends_connect_at_once, 120) {
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    setenv("DDPC_JOB_TOKEN", "lazy-crossing-test-token", 1);
    run_arg(8, token_crossing_body, NULL, 110);
}

/* A send to a rank that does not need the pair yet completes, as it would
 * over a connection made at creation: rank 0 sends to 2, then to 1; 1
 * passes it on to 2; 2 receives from 1 first, and from 0 only then. Were
 * the lower rank of a pair to wait for the higher one to connect, 0's first
 * send would wait on 2, which waits on 1, which waits on 0. */
static void send_first_body(int rank, int world, void *arg) {
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    ddpc_comm *c = env_comm(rank, world);
    int32_t a = 7, b = 11, x = -1, y = -1;
    if (rank == 0) {
        CHECK_OK(ddpc_send(c, &a, 1, DDPC_INT32, 2));
        CHECK_OK(ddpc_send(c, &b, 1, DDPC_INT32, 1));
    } else if (rank == 1) {
        CHECK_OK(ddpc_recv(c, &x, 1, DDPC_INT32, 0));
        CHECK_EQ(x, 11);
        CHECK_OK(ddpc_send(c, &x, 1, DDPC_INT32, 2));
    } else {
        CHECK_OK(ddpc_recv(c, &x, 1, DDPC_INT32, 1));
        CHECK_OK(ddpc_recv(c, &y, 1, DDPC_INT32, 0));
        CHECK_EQ(x, 11);
        CHECK_EQ(y, 7);
    }
    CHECK_OK(ddpc_barrier(c));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_lazy_send_does_not_wait_for_the_receiver_to_connect, 60) {
    for (int i = 0; i < 3; i++) run_arg(3, send_first_body, NULL, 15);
}

/* The same with a job token on 20 ranks: rank 0 sends to 19, then to 1; 1
 * passes it on to 19; 19 receives from 1 first. Rank 19 is in a call that
 * does not need rank 0 (a receive from 1, which waits on 0) when 0 asks
 * for the pair: its progress must take 0's connection through the token's
 * handshake, and 0's must not wait for 19 to need the pair too. Every
 * rank's calls finish within seconds, far inside DDPC_TIMEOUT. A second
 * round has 19 blocked in a barrier that 16 joins only after its send. */
static void token_chain_body(int rank, int world, void *arg) {
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    setenv("DDPC_JOB_TOKEN", "lazy-token-chain-test-token", 1);
    ddpc_comm *c = env_comm(rank, world);
    int last = world - 1;
    double t0 = ddpc__now();
    int32_t a = 7, b = 11, x = -1, y = -1;
    if (rank == 0) {
        CHECK_OK(ddpc_send(c, &a, 1, DDPC_INT32, last));
        CHECK_OK(ddpc_send(c, &b, 1, DDPC_INT32, 1));
    } else if (rank == 1) {
        CHECK_OK(ddpc_recv(c, &x, 1, DDPC_INT32, 0));
        CHECK_EQ(x, 11);
        CHECK_OK(ddpc_send(c, &x, 1, DDPC_INT32, last));
    } else if (rank == last) {
        CHECK_OK(ddpc_recv(c, &x, 1, DDPC_INT32, 1));
        CHECK_OK(ddpc_recv(c, &y, 1, DDPC_INT32, 0));
        CHECK_EQ(x, 11);
        CHECK_EQ(y, 7);
    }
    CHECK_MSG(ddpc__now() - t0 < 5.0 * t_slow(), "rank %d: the chain took %.1f s", rank,
              ddpc__now() - t0);
    /* round 2: 19 waits in a barrier while 16 sends to it (19 receives
     * after); the dissemination barrier on 20 ranks never pairs 16 and 19 */
    t0 = ddpc__now();
    if (rank == last - 3) CHECK_OK(ddpc_send(c, &b, 1, DDPC_INT32, last));
    CHECK_OK(ddpc_barrier(c));
    if (rank == last) {
        CHECK_OK(ddpc_recv(c, &y, 1, DDPC_INT32, last - 3));
        CHECK_EQ(y, 11);
    }
    CHECK_MSG(ddpc__now() - t0 < 5.0 * t_slow(), "rank %d: round 2 took %.1f s", rank,
              ddpc__now() - t0);
    CHECK_OK(ddpc_barrier(c));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_lazy_token_send_does_not_wait_for_the_receiver_to_connect, 120) {
    for (int i = 0; i < 2; i++) run_arg(20, token_chain_body, NULL, 55);
}

/* ------------------------------------------------------------ faults */

/* Strangers on rank 0's data port while the job runs (garbage, a hello of
 * another communicator, a connection that says nothing): each is closed
 * with a warning, and the collectives go on with the right results. */
static void stranger_body(int rank, int world, void *arg) {
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    log_to_file("stranger", rank);
    ddpc_comm *c = env_comm(rank, world);
    int fd[3] = { -1, -1, -1 };
    if (rank == 1) {
        const ddpc__peer *p0 = &c->peers[0];
        for (int k = 0; k < 3; k++)
            CHECK_OK(ddpc__sock_connect(p0->ep.ip, p0->ep.port, ddpc__deadline_in(5), &fd[k]));
        char junk[40];
        memset(junk, 'x', sizeof junk);
        CHECK(write(fd[0], junk, sizeof junk) == (ssize_t)sizeof junk);
        uint32_t other[10] = { 0x48504444u, 2, 1, 2, 1, (uint32_t)world }; /* wrong id */
        CHECK(write(fd[1], other, sizeof other) == (ssize_t)sizeof other);
        close(fd[2]); /* says nothing */
    }
    /* collectives until rank 0 has closed both talkers (its log says so) */
    int done = collectives_until_logged(c, "stranger", "unexpected hello", 2);
    CHECK(done);
    CHECK_OK(ddpc_comm_destroy(c));
    for (int k = 0; k < 2; k++)
        if (fd[k] >= 0) close(fd[k]);
    const char *log = slurp_log("stranger", rank);
    if (rank == 0) {
        CHECK_CONTAINS(log, "on the data port: rank 0: unexpected hello");
        CHECK(strstr(strstr(log, "unexpected hello") + 1, "unexpected hello") != NULL);
    }
}

TEST_T(comm_lazy_stranger_on_the_data_port_is_closed, 60) { run_arg(4, stranger_body, NULL, 55); }

/* A rank that exits before anyone connected to it: the first collective
 * that needs it fails on every rank within seconds; its partners in it
 * (ranks 0 and 3 in recursive halving/doubling on 4) name it. (Rank 1 may
 * name one of them instead: once failed and destroyed, their listeners
 * are closed before rank 1 connects.) */
static void gone_body(int rank, int world, void *arg) {
    setenv("DDPC_LAZY_CONNECT", "1", 1);
    setenv("DDPC_ALGO", "rhd", 1);
    ddpc_comm *c = env_comm(rank, world);
    if (rank == 2) _exit(0); /* no goodbye: as a crash */
    ddpc__sleep(0.3);
    double t0 = ddpc__now();
    int32_t x = 1, y = 0;
    ddpc_status s = ddpc_allreduce(c, &x, &y, 1, DDPC_INT32, DDPC_SUM);
    CHECK_STATUS(s, DDPC_ERR_PEER_LOST);
    if (rank != 1) CHECK_CONTAINS(ddpc_last_error(), "rank 2 at 127.0.0.1");
    CHECK(ddpc__now() - t0 < 5.0 * t_slow());
    ddpc_comm_destroy(c);
}

TEST_T(comm_lazy_peer_gone_before_first_use_is_named, 60) {
    g_port = t_free_port();
    t_run_ranks(4, 50, gone_body, NULL);
}

/* ------------------------------------------------------------ many ranks */

/* 256 ranks on this machine: creation, an allreduce, a broadcast, a barrier
 * and destroy, each rank holding a few connections (a full mesh would be
 * 32,640 connections: more than the 28,232 ephemeral ports Linux has by
 * default). Rank 0 reports the descriptors per rank. */
static void many_body(int rank, int world, void *arg) {
    unsetenv("DDPC_LAZY_CONNECT");        /* auto: lazy at 256 */
    setenv("DDPC_SHM_BYTES", "65536", 1); /* 256 ranks' rings in little memory */
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "300", 1);
    setenv("DDPC_TIMEOUT", "300", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    float v[100];
    for (int i = 0; i < 100; i++) v[i] = (float)(rank % 7 + i);
    CHECK_OK(ddpc_allreduce(c, v, v, 100, DDPC_FLOAT32, DDPC_SUM));
    float base = 0;
    for (int r = 0; r < world; r++) base += (float)(r % 7);
    for (int i = 0; i < 100; i++) CHECK_EQ(v[i], base + (float)world * (float)i);
    int32_t b[10];
    for (int i = 0; i < 10; i++) b[i] = rank * 10 + i;
    CHECK_OK(ddpc_broadcast(c, b, b, 10, DDPC_INT32, world - 1));
    for (int i = 0; i < 10; i++) CHECK_EQ(b[i], (world - 1) * 10 + i);
    CHECK_OK(ddpc_barrier(c));
    int fds, socks;
    count_fds(&fds, &socks);
    int32_t mine[3] = { fds, socks, links_up(c) }, most[3], least[3];
    CHECK_OK(ddpc_allreduce(c, mine, most, 3, DDPC_INT32, DDPC_MAX));
    CHECK_OK(ddpc_allreduce(c, mine, least, 3, DDPC_INT32, DDPC_MIN));
    if (rank == 0)
        fprintf(stderr,
                "[comm_lazy_256] per rank: %d-%d descriptors, %d-%d sockets, %d-%d connections "
                "(of %d peers)\n",
                least[0], most[0], least[1], most[1], least[2], most[2], world - 1);
    CHECK_EQ(c->lazy, 1);
    CHECK_MSG(most[2] <= 40, "a rank holds %d connections", most[2]);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_lazy_256_ranks, 600) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 128)
        SKIP("ulimit -n is %llu: too few descriptors for a rank's connections",
             (unsigned long long)rl.rlim_cur);
    long avail_kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %ld kB", &avail_kb) == 1) break;
    if (f) fclose(f);
    if (avail_kb && avail_kb < 256L * 16 * 1024)
        SKIP("%ld MiB of memory available; 256 ranks need about 4 GiB", avail_kb / 1024);
    run_arg(256, many_body, NULL, 590);
}
