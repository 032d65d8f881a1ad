/* test_comm_shm.c — ranks of one host over shared memory: fallbacks to TCP, stale
 * segments, small rings, 8 ranks on 2 cores, namespace "nodes". */
#include "comm_fixtures.h"

/* ------------------------------------------------------------ shared memory */

/* arg: the transport expected between the ranks ("shm" or "tcp"); the INFO
 * line that says so is checked too. */
static void transport_body(int rank, int world, void *arg) {
    const char *want = arg;
    log_to_file("transport", rank);
    setenv("DDPC_DEBUG", "INFO", 1);
    setenv("DDPC_DEBUG_SUBSYS", "INIT,SHM", 1);
    ddpc_comm *c = env_comm(rank, world);
    check_transports(c, want, world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *log = slurp_log("transport", rank);
    char line[64];
    if (rank == 0)
        snprintf(line, sizeof line, "rank 0: %s to ranks 1-%d\n", want, world - 1);
    else
        snprintf(line, sizeof line, "rank %d: %s to ranks 0", rank, want);
    CHECK_CONTAINS(log, line);
    CHECK(!strstr(log, "WARN"));
}

TEST_T(comm_shm_between_ranks_of_one_host, 40) {
    setenv("DDPC_SHM", "1", 1);
    g_port = t_free_port();
    pids_init();
    t_run_ranks(4, 35, transport_body, "shm");
    check_no_segments_left(4);
}

/* Makes /dev/shm/<name> (a segment's name as shm.c spells it, or not). */
static void make_shm_name(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/%s", name);
    int fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK_MSG(fd >= 0, "shm_open(%s): %s", path, strerror(errno));
    close(fd);
}

static int shm_name_exists(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    return access(path, F_OK) == 0;
}

static void two_rank_body(int rank, int world, void *arg) {
    ddpc_comm *c = env_comm(rank, world);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
}

/* A segment left by a process that is gone (killed between creating it and
 * its peer's answer) is removed by the next process that offers one; a live
 * process's, and names not spelt as segments are, stay. */
TEST_T(comm_shm_stale_segments_of_dead_processes_removed, 40) {
    setenv("DDPC_SHM", "1", 1);
    pid_t dead = fork();
    CHECK(dead >= 0);
    if (dead == 0) _exit(0);
    CHECK(waitpid(dead, NULL, 0) == dead);
    char stale[64], live[64], odd[64];
    const char *hex = "0123456789abcdef0123456789abcdef";
    snprintf(stale, sizeof stale, "ddpc-%d-%s", (int)dead, hex);
    snprintf(live, sizeof live, "ddpc-%d-%s", (int)getpid(), hex);
    snprintf(odd, sizeof odd, "ddpc-%d-notasegment", (int)dead);
    make_shm_name(stale);
    make_shm_name(live);
    make_shm_name(odd);
    g_port = t_free_port();
    t_run_ranks(2, 35, two_rank_body, NULL);
    int stale_left = shm_name_exists(stale), live_left = shm_name_exists(live),
        odd_left = shm_name_exists(odd);
    char path[128];
    const char *names[] = { stale, live, odd };
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "/%s", names[i]);
        shm_unlink(path);
    }
    CHECK_MSG(!stale_left, "/dev/shm/%s (pid %d is gone) is still there", stale, (int)dead);
    CHECK_MSG(live_left, "/dev/shm/%s of a live process was removed", live);
    CHECK_MSG(odd_left, "/dev/shm/%s (not a segment's name) was removed", odd);
}

TEST_T(comm_shm_off_is_tcp_everywhere, 40) {
    setenv("DDPC_SHM", "0", 1);
    g_port = t_free_port();
    t_run_ranks(4, 35, transport_body, "tcp");
}

/* Rings of 4 KiB: every message larger than a ring wraps it many times and
 * waits for room (flow control); every collective, every algorithm. */
TEST_T(comm_shm_ring_smaller_than_messages, 110) {
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_SHM_BYTES", "4096", 1);
    run_world(3, allreduce_body, 50);
    run_all(4, "ring");
    run_all(3, "rhd");
    run_all(3, "tree");
}

TEST_T(comm_shm_w8_on_two_cores, 60) {
    setenv("DDPC_SHM", "1", 1);
    run_world(8, allreduce_body, 55);
}

/* Rank 1 has DDPC_SHM=0 and rank 2 other DDPC_SHM_BYTES: the pairs with
 * them use TCP (with a warning on the ranks that wanted shm), 0-3 shm. */
static void differ_body(int rank, int world, void *arg) {
    log_to_file("differ", rank);
    setenv("DDPC_SHM", rank == 1 ? "0" : "1", 1);
    setenv("DDPC_SHM_BYTES", rank == 2 ? "8192" : "4096", 1);
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    for (int p = 0; p < world; p++) {
        const char *want = p == rank                                        ? "self"
                           : (p == 0 || p == 3) && (rank == 0 || rank == 3) ? "shm"
                                                                            : "tcp";
        CHECK_STR(ddpc__peer_transport(c, p), want);
    }
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *log = slurp_log("differ", rank);
    if (rank != 1) CHECK_CONTAINS(log, "rank 1 on this host has DDPC_SHM=0");
    if (rank == 0 || rank == 3) CHECK_CONTAINS(log, "rank 2 on this host has DDPC_SHM_BYTES=8192");
    if (rank == 2) CHECK_CONTAINS(log, "has DDPC_SHM_BYTES=4096, this rank 8192");
    if (rank == 1) CHECK(!strstr(log, "WARN"));
}

TEST_T(comm_shm_settings_that_differ_fall_back_to_tcp, 40) {
    g_port = t_free_port();
    t_run_ranks(4, 35, differ_body, NULL);
}

/* A /dev/shm too small for one segment: a warning naming the reason and
 * DDPC_SHM=0, TCP between every pair, collectives as usual, nothing left.
 * arg: DDPC_LAZY_CONNECT ("0": pairs connect at creation, the lower rank
 * offering; "1": at first use, the higher rank offering). */
static void full_body(int rank, int world, void *arg) {
    const char *lazy = arg;
    log_to_file("full", rank);
    setenv("DDPC_LAZY_CONNECT", lazy, 1);
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_DEBUG", "INFO", 1);
    setenv("DDPC_DEBUG_SUBSYS", "INIT,SHM", 1);
    t_set_rank_env(rank, world, g_port);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    if (!strcmp(lazy, "0")) check_transports(c, "tcp", world);
    allreduce_checks(c, rank, world); /* connects every pair of 3 */
    check_transports(c, "tcp", world);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *log = slurp_log("full", rank);
    if (!strcmp(lazy, "0")) CHECK_CONTAINS(log, "tcp to ranks");
    if (!strcmp(lazy, "0") ? rank < world - 1 : rank > 0) { /* the creators say why */
        CHECK_CONTAINS(log, "no shared memory with rank");
        CHECK_CONTAINS(log, "posix_fallocate");
        CHECK_CONTAINS(log, "DDPC_SHM=0");
    }
}

TEST_T(comm_shm_full_dev_shm_falls_back_to_tcp, 70) {
    /* a private /dev/shm of 64 KiB for this test's processes only */
    if (geteuid() != 0) SKIP("needs root to mount a small /dev/shm");
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64k,mode=1777") != 0)
        SKIP("cannot mount a private /dev/shm: %s", strerror(errno));
    CHECK_EQ(shm_segments(0), 0);
    for (int lazy = 0; lazy < 2; lazy++) {
        g_port = t_free_port();
        t_run_ranks(3, 35, full_body, lazy ? "1" : "0");
        CHECK_EQ(shm_segments(0), 0); /* the literal count: only this test's ranks write here */
    }
}

/* Two network-namespace "nodes" of two ranks each (different host ids):
 * shm within a node, TCP across. */
static char g_ns[2][32];
static int g_subnet = 11;

static void netns_body(int rank, int world, void *arg) {
    char path[96];
    snprintf(path, sizeof path, "/var/run/netns/%s", g_ns[rank / 2]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK_MSG(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "entering %s: %s", path, strerror(errno));
    close(fd);
    t_set_rank_env(rank, world, g_port);
    char master[32], b[16];
    snprintf(master, sizeof master, "198.18.%d.1", g_subnet);
    setenv("MASTER_ADDR", master, 1);
    snprintf(b, sizeof b, "%d", rank % 2);
    setenv("LOCAL_RANK", b, 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("DDPC_SHM", "1", 1);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    setenv("DDPC_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_local_rank(c), rank % 2);
    CHECK_EQ(ddpc_comm_local_size(c), 2);
    check_transports(c, "shm", 2);
    allreduce_checks(c, rank, world);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(comm_shm_within_namespace_nodes_tcp_between, 60) {
    t_netns_pair("S", g_subnet, g_ns[0], g_ns[1]);
    g_port = t_free_port();
    int st[4];
    t_run_ranks_status(4, 45, netns_body, NULL, st);
    t_netns_del(g_ns[0], g_ns[1]);
    for (int r = 0; r < 4; r++)
        CHECK_MSG(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0,
                  "rank %d failed (status %d)", r, st[r]);
}
