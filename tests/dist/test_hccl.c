/* test_hccl.c — HCCL programs on CPUs: tests/hccl/hccl_check.c (and
 * hccl_test_calls.c, HCCL Test's calls beside the collectives), written
 * against hccl/hccl.h and acl/acl.h only and linked with -lhccl -lascendcl,
 * run as HCCL programs are run: ranks as processes started by ddpc-run (the
 * root info through a file) and by mpirun (the root info broadcast with
 * MPI, as HCCL's examples do), and ranks as "devices" of one process
 * (HcclCommInitAll), at 2 and 3 ranks. The program checks every call with
 * every data type at sizes 0, 1, odd and large, and prints one line per
 * rank; these tests want every rank's "OK" line. The programs are found
 * through DDPC_BIN (make hccl builds them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

static char out[1 << 20];

#define run(timeout_s, ...) t_run_cmdf((timeout_s), out, sizeof out, __VA_ARGS__)

static const char *bin(const char *name) {
    const char *b = t_bin(name);
    CHECK_MSG(access(b, X_OK) == 0, "%s is not built (make hccl)", b);
    return b;
}

/* Fails unless out has "hccl_check rank R/N (how): OK" for every rank. */
static void ranks_ok(int n, const char *how) {
    for (int r = 0; r < n; r++) {
        char want[160];
        snprintf(want, sizeof want, "hccl_check rank %d/%d (%s): OK", r, n, how);
        CHECK_MSG(strstr(out, want) != NULL, "no line \"%s\" in: %s", want, out);
    }
}

TEST_T(hccl_argument_checks, 30) {
    int rc = run(20, "%s --errors 2>&1", bin("hccl_check"));
    CHECK_MSG(rc == 0 && strstr(out, "hccl_check errors: OK"), "exit %d: %s", rc, out);
}

static void init_all(int n) {
    int rc = run(120, "%s --init-all %d 2>&1", bin("hccl_check"), n);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "HcclCommInitAll");
}
TEST_T(hccl_init_all_2, 150) { init_all(2); }
TEST_T(hccl_init_all_3, 150) { init_all(3); }

static void under_ddpc_run(int n) {
    int rc = run(120, "%s --standalone --nproc-per-node=%d %s %s 2>&1", bin("ddpc-run"), n,
                 bin("hccl_check"), t_tmp_path("root_info"));
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "root info through a file");
    t_tmp_remove();
}
TEST_T(hccl_ddpc_run_2, 150) { under_ddpc_run(2); }
TEST_T(hccl_ddpc_run_3, 150) { under_ddpc_run(3); }

/* Open MPI leaves its own allocations (its plugins are unloaded at exit)
 * for the system to reclaim, so LeakSanitizer, in a sanitizer build of the
 * MPI programs, would report Open MPI's memory: leaks are not checked in
 * processes mpirun starts. */
#define MPIRUN \
    "ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" mpirun --allow-run-as-root --oversubscribe"

static void under_mpirun(int n) {
    if (run(10, "command -v mpirun") != 0)
        SKIP("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev, or "
             "DDPC_SETUP_PEERS=1 bash scripts/setup.sh)");
    const char *b = t_bin("hccl_check_mpi");
    if (access(b, X_OK) != 0)
        SKIP("%s is not built: make found no mpicc (apt-get install libopenmpi-dev)", b);
    int rc = run(120, MPIRUN " -np %d %s 2>&1", n, b);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "mpirun, MPI_Bcast");
}
TEST_T(hccl_mpirun_2, 150) { under_mpirun(2); }
TEST_T(hccl_mpirun_3, 150) { under_mpirun(3); }

/* The calls Huawei's HCCL Test makes beyond the collectives (its -t, -z, -m
 * and profiling modes), made its way and their wrong uses refused, by a
 * program linked as it links (-lhccl -lacl_rt -lmsprofiler). */
static void test_calls(int n) {
    int rc = run(120, "%s --standalone --nproc-per-node=%d %s %s %s 2>&1", bin("ddpc-run"), n,
                 bin("hccl_test_calls"), t_tmp_path("root_info"), t_tmp_path("prof"));
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    for (int r = 0; r < n; r++) {
        char want[96];
        snprintf(want, sizeof want, "hccl_test_calls rank %d/%d: OK", r, n);
        CHECK_MSG(strstr(out, want) != NULL, "no line \"%s\" in: %s", want, out);
    }
    t_tmp_remove();
}
TEST_T(hccl_test_calls_2, 150) { test_calls(2); }
TEST_T(hccl_test_calls_3, 150) { test_calls(3); }

/* Ranks that disagree on a count: every rank's aclrtSynchronizeStream fails,
 * HcclGetCommAsyncError is HCCL_E_PARA, and the text names both calls. */
TEST_T(hccl_mismatch_reported_on_every_rank, 60) {
    int rc = run(50, "%s --standalone --nproc-per-node=2 %s %s --mismatch 2>&1", bin("ddpc-run"),
                 bin("hccl_check"), t_tmp_path("root_info"));
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(2, "root info through a file");
    CHECK_CONTAINS(out, "this rank (0) called allreduce(count=4, float32, sum)");
    CHECK_CONTAINS(out, "this rank (1) called allreduce(count=5, float32, sum)");
    t_tmp_remove();
}

/* ------------------------------------------------------------ rank tables */

#define DEV(id, rank) \
    "{\"device_id\": \"" id "\", \"device_ip\": \"192.168.1." id "\", \"rank_id\": \"" rank "\"}"
#define HEAD(version, status) "{\"version\": \"" version "\", \"status\": \"" status "\", "
#define ONE_SERVER                                                                           \
    "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": [" DEV("0", "0") ", " DEV( \
        "1", "1") "]}]}"

static void under_rank_table(int n, const char *text) {
    const char *p = t_tmp_write("rank_table.json", text);
    int rc = run(
        120, "DDPC_RANK_TABLE_PORT=%d %s --standalone --nproc-per-node=%d %s --rank-table %s 2>&1",
        t_free_port(), bin("ddpc-run"), n, bin("hccl_check"), p);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(n, "rank table");
    t_tmp_remove();
}

TEST_T(hccl_rank_table_one_server, 150) {
    under_rank_table(2, HEAD("1.0", "completed") ONE_SERVER);
}

/* Two "servers" on loopback, version 1.2 with host_ip on the second. */
TEST_T(hccl_rank_table_two_servers, 150) {
    under_rank_table(
        4, HEAD("1.2",
                "completed") "\"server_count\": \"2\", \"server_list\": ["
                             "{\"server_id\": \"127.0.0.1\", \"device\": [" DEV("0", "0") ", " DEV(
                                 "1",
                                 "1") "]}, "
                                      "{\"server_id\": \"127.0.0.2\", \"host_ip\": \"127.0.0.1\", "
                                      "\"device\": [" DEV("0", "2") ", " DEV("1", "3") "]}]}");
}

/* Runs ranks 0, 1 in one network namespace and 2, 3 in another (joined by
 * a veth pair, 198.18.subnet.1 and .2), each started by hand as a
 * cluster's scripts start HCCL programs: "RANK=r [LOCAL_RANK=l] hccl_check
 * args", with env_a / env_b exported in each; wants 4 ranks OK (how). */
static void two_hosts(const char *tag, int subnet, const char *env_a, const char *env_b,
                      const char *args, const char *how) {
    char a[32], b[32];
    t_netns_pair(tag, subnet, a, b);
    const char *hc = bin("hccl_check"), *blog = t_tmp_path("b.log");
    int rc = run(120,
                 "export WORLD_SIZE=4 HCCL_CONNECT_TIMEOUT=60; "
                 "ip netns exec %s sh -c '%s; RANK=2 LOCAL_RANK=0 %s %s & RANK=3 LOCAL_RANK=1 %s "
                 "%s & wait' > %s 2>&1 & "
                 "ip netns exec %s sh -c '%s; RANK=0 LOCAL_RANK=0 %s %s & RANK=1 LOCAL_RANK=1 %s "
                 "%s & wait' 2>&1; "
                 "wait; cat %s",
                 b, env_b, hc, args, hc, args, blog, a, env_a, hc, args, hc, args, blog);
    static char saved[sizeof out];
    snprintf(saved, sizeof saved, "%s", out);
    t_netns_del(a, b);
    snprintf(out, sizeof out, "%s", saved);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    ranks_ok(4, how);
    t_tmp_remove();
}

/* A rank table naming two real hosts' addresses. */
TEST_T(hccl_rank_table_two_hosts, 150) {
    const char *p = t_tmp_write(
        "rank_table.json",
        HEAD("1.0",
             "completed") "\"server_count\": \"2\", \"server_list\": ["
                          "{\"server_id\": \"198.18.21.1\", \"device\": [" DEV("0", "0") ", " DEV(
                              "1", "1") "]}, "
                                        "{\"server_id\": \"198.18.21.2\", \"device\": [" DEV(
                                            "0", "2") ", " DEV("1", "3") "]}]}");
    char args[4200];
    snprintf(args, sizeof args, "--rank-table %s", p);
    two_hosts("H", 21, "export DDPC_RANK_TABLE_PORT=29600", "export DDPC_RANK_TABLE_PORT=29600",
              args, "rank table");
}

/* Root info across two hosts, each host's HCCL_IF_IP naming its address
 * (as HCCL asks of multi-host root-info jobs). */
TEST_T(hccl_root_info_two_hosts, 150) {
    two_hosts("I", 22, "export HCCL_IF_IP=198.18.22.1", "export HCCL_IF_IP=198.18.22.2",
              t_tmp_path("root_info"), "root info through a file");
}

/* Every malformed table is refused (HCCL_E_PARA, EI0004) naming its field. */
TEST_T(hccl_rank_table_errors_name_the_field, 60) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        { "{\"version\": \"1.0\",", "(the whole file): not valid JSON" },
        { "[1, 2]", "(the whole file): must be a JSON object" },
        { "{\"status\": \"completed\", " ONE_SERVER, "version: missing" },
        { HEAD("2.0", "completed") ONE_SERVER, "version: \"2.0\" is not \"1.0\" or \"1.2\"" },
        { "{\"version\": 1.0, \"status\": \"completed\", " ONE_SERVER,
          "version: must be a string" },
        { HEAD("1.0", "initializing") ONE_SERVER,
          "status: \"initializing\": the table is not \"completed\"" },
        { HEAD("1.0", "completed") "\"server_count\": \"1\"}", "server_list: missing" },
        { HEAD("1.0", "completed") "\"server_list\": []}",
          "server_list: must be a non-empty array" },
        { HEAD("1.0", "completed") "\"server_count\": \"3\", " ONE_SERVER,
          "server_count: \"3\" but server_list has 1" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"device\": [" DEV("0", "0") "]}]}",
          "server_list[0].server_id: missing" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\"}]}",
          "server_list[0].device: missing" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": "
                                   "[{\"device_id\": \"0\", \"rank_id\": 0}]}]}",
          "server_list[0].device[0].rank_id: must be a string" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": "
                                   "[{\"rank_id\": \"0\"}]}]}",
          "server_list[0].device[0].device_id: missing" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": "
                                   "[" DEV("0", "x") "]}]}",
          "server_list[0].device[0].rank_id: \"x\" is not a whole number" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": "
                                   "[" DEV("0", "0") ", " DEV("1", "5") "]}]}",
          "server_list[0].device[1].rank_id: \"5\" is not a whole number in 0..1" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": "
                                   "[" DEV("0", "0") ", " DEV("1", "0") "]}]}",
          "server_list[0].device[1].rank_id: rank 0 is listed twice" },
        { HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": \"127.0.0.1\", \"device\": "
                                   "[" DEV("0", "0") ", " DEV(
                                       "1", "2") "]}, {\"server_id\": \"127.0.0.2\", \"device\": "
                                                 "[" DEV("0", "1") ", " DEV("1", "3") "]}]}",
          "server_list[0].device[].rank_id: the ranks of one server must be contiguous" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = t_tmp_write("bad.json", cases[i].text);
        int rc = run(20, "RANK=0 %s --rank-table %s 2>&1", bin("hccl_check"), p);
        CHECK_MSG(rc == 3, "case %zu: exit %d: %s", i, rc, out);
        CHECK_MSG(strstr(out, "HcclCommInitClusterInfo = 1 ") &&
                      strstr(out, "EI0004: the rank table") && strstr(out, cases[i].want),
                  "case %zu: want HCCL_E_PARA and \"%s\" in: %s", i, cases[i].want, out);
    }
    /* a file that is not there; a rank the table lacks */
    CHECK_EQ(
        run(20, "RANK=0 %s --rank-table %s 2>&1", bin("hccl_check"), t_tmp_path("absent.json")), 3);
    CHECK_CONTAINS(out, "HcclCommInitClusterInfo = 10 ");
    CHECK_CONTAINS(out, "cannot be opened");
    CHECK_EQ(run(20, "RANK=5 %s --rank-table %s 2>&1", bin("hccl_check"),
                 t_tmp_write("good.json", HEAD("1.0", "completed") ONE_SERVER)),
             3);
    CHECK_CONTAINS(out, "rank 5 is not in the rank table");
    t_tmp_remove();
}

/* ------------------------------------------------------------ ddpc-run from a rank table */

/* Two loopback "servers" of uneven size: 127.0.0.1 ranks 0-1, 127.0.0.2
 * ranks 2-4 (version 1.2, host_ip given). */
#define TWO_LOOPBACK                                                                          \
    HEAD("1.2", "completed")                                                                  \
    "\"server_count\": \"2\", \"server_list\": [{\"server_id\": \"127.0.0.1\", \"host_ip\": " \
    "\"127.0.0.1\", \"device\": [" DEV("0", "0") ", " DEV(                                    \
        "1", "1") "]}, {\"server_id\": "                                                      \
                  "\"127.0.0.2\", \"host_ip\": \"127.0.0.2\", \"device\": [" DEV(             \
                      "0", "2") ", " DEV("1", "3") ", " DEV("2", "4") "]}]}"

/* Wants every rank's hccl_check line and ddpc-bench's clean table. */
static void table_job_ok(int n, const char *what) {
    ranks_ok(n, "rank table");
    CHECK_MSG(strstr(out, "# Out of bounds values : 0 OK"), "%s: ddpc-bench failed: %s", what, out);
}

/* The programs a rank-table job runs here: an HCCL one (HcclCommInitClusterInfo
 * with the table and RANK_ID ddpc-run gives it) and a ddpc one
 * (ddpc_comm_create_env: RANK_TABLE_FILE, RANK_ID, the launcher's store). */
static const char *table_progs(char *buf, size_t len) {
    char text[8192];
    snprintf(text, sizeof text,
             "#!/bin/sh\n%s --rank-table \"$RANK_TABLE_FILE\" && test \"$RANK_ID\" = \"$RANK\" "
             "&& exec %s allreduce -b 8 -e 64K -f 64\n",
             bin("hccl_check"), bin("ddpc-bench"));
    const char *p = t_tmp_write("progs.sh", text);
    CHECK(chmod(p, 0755) == 0);
    snprintf(buf, len, "%s", p);
    return buf;
}

/* One server, the launcher finding itself by this machine's 127.0.0.1;
 * --rank-table, then RANK_TABLE_FILE in its environment. */
TEST_T(hccl_ddpc_run_rank_table_one_server, 150) {
    const char *p = t_tmp_write("rank_table.json", HEAD("1.0", "completed") ONE_SERVER);
    char progs[8192];
    table_progs(progs, sizeof progs);
    int rc = run(120, "DDPC_RANK_TABLE_PORT=%d %s --rank-table %s --master-port %d %s 2>&1",
                 t_free_port(), bin("ddpc-run"), p, t_free_port(), progs);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_CONTAINS(out, "server 0 of 1 (127.0.0.1), ranks 0-1 of 2");
    table_job_ok(2, "--rank-table");
    rc = run(120, "RANK_TABLE_FILE=%s DDPC_RANK_TABLE_PORT=%d %s --master-port %d %s 2>&1", p,
             t_free_port(), bin("ddpc-run"), t_free_port(), progs);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    table_job_ok(2, "RANK_TABLE_FILE");
    t_tmp_remove();
}

/* Two loopback servers of 2 and 3 ranks, a launcher each: the first finds
 * itself (127.0.0.1 is this machine's), the second is --node-rank 1. */
TEST_T(hccl_ddpc_run_rank_table_two_servers, 150) {
    const char *p = t_tmp_write("rank_table.json", TWO_LOOPBACK), *blog = t_tmp_path("b.log");
    char progs[8192];
    table_progs(progs, sizeof progs);
    int port = t_free_port_pair();
    int rc =
        run(120,
            "export DDPC_RANK_TABLE_PORT=%d; %s --rank-table %s --node-rank 1 --master-port %d "
            "%s > %s 2>&1 & %s --rank-table %s --master-port %d %s 2>&1; a=$?; wait $! || "
            "a=$((a+100)); cat %s; exit $a",
            port + 1, bin("ddpc-run"), p, port, progs, blog, bin("ddpc-run"), p, port, progs, blog);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_CONTAINS(out, "server 0 of 2 (127.0.0.1), ranks 0-1 of 5");
    CHECK_CONTAINS(out, "server 1 of 2 (127.0.0.2), ranks 2-4 of 5");
    table_job_ok(5, "two servers");
    t_tmp_remove();
}

/* In a network namespace whose loopback also has 127.0.0.2, each launcher
 * finds its server by HCCL_IF_IP (and its workers listen there); without
 * it both addresses are this machine's, which is refused. */
TEST_T(hccl_ddpc_run_rank_table_by_hccl_if_ip, 150) {
    char a[32], b[32];
    t_netns_pair("T", 23, a, b);
    char setup[128];
    snprintf(setup, sizeof setup, "ip -n %s addr add 127.0.0.2/8 dev lo", a);
    CHECK_EQ(run(10, "%s 2>&1", setup), 0);
    const char *p = t_tmp_write("rank_table.json", TWO_LOOPBACK), *blog = t_tmp_path("b.log");
    char progs[8192];
    table_progs(progs, sizeof progs);
    int rc = run(120,
                 "export DDPC_RANK_TABLE_PORT=29601; ip netns exec %s sh -c 'HCCL_IF_IP=127.0.0.2 "
                 "%s --rank-table %s --master-port 29600 %s' > %s 2>&1 & ip netns exec %s sh -c "
                 "'HCCL_IF_IP=127.0.0.1 %s --rank-table %s --master-port 29600 %s' 2>&1; a=$?; "
                 "wait $! || a=$((a+100)); cat %s; exit $a",
                 a, bin("ddpc-run"), p, progs, blog, a, bin("ddpc-run"), p, progs, blog);
    static char saved[sizeof out];
    snprintf(saved, sizeof saved, "%s", out);
    int rc2 = run(20, "ip netns exec %s %s --rank-table %s true 2>&1", a, bin("ddpc-run"), p);
    static char saved2[4096];
    snprintf(saved2, sizeof saved2, "%.4000s", out);
    t_netns_del(a, b);
    snprintf(out, sizeof out, "%s", saved);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_CONTAINS(out, "server 1 of 2 (127.0.0.2), ranks 2-4 of 5");
    table_job_ok(5, "by HCCL_IF_IP");
    CHECK_MSG(rc2 == 2 && strstr(saved2, "is 2 servers of the rank table"), "exit %d: %s", rc2,
              saved2);
    t_tmp_remove();
}

/* What ddpc-run refuses, exit 2 and one line saying why. */
TEST_T(hccl_ddpc_run_rank_table_errors, 60) {
    const char *p = t_tmp_write("rank_table.json", TWO_LOOPBACK);
    static const struct {
        const char *args, *want;
    } cases[] = {
        { "--node-rank 2", "--node-rank=2: the rank table" },
        { "--nproc-per-node 2", "--rank-table gives the nodes and their workers" },
        { "--standalone", "--rank-table gives the nodes and their workers" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run(20, "%s --rank-table %s %s true 2>&1", bin("ddpc-run"), p, cases[i].args);
        CHECK_MSG(rc == 2 && strstr(out, cases[i].want), "%s: exit %d: %s", cases[i].args, rc, out);
    }
    int rc = run(20, "HCCL_IF_IP=10.9.9.9 %s --rank-table %s true 2>&1", bin("ddpc-run"), p);
    CHECK_MSG(rc == 2 && strstr(out, "HCCL_IF_IP=10.9.9.9 is no server of the rank table"),
              "exit %d: %s", rc, out);
    rc = run(20, "%s --rank-table %s true 2>&1", bin("ddpc-run"),
             t_tmp_write("other.json", HEAD("1.0", "completed") "\"server_list\": [{\"server_id\": "
                                                                "\"198.18.99.1\", \"device\": "
                                                                "[" DEV("0", "0") "]}]}"));
    CHECK_MSG(rc == 2 && strstr(out, "is no server of the rank table"), "exit %d: %s", rc, out);
    rc = run(
        20, "%s --rank-table %s true 2>&1", bin("ddpc-run"),
        t_tmp_write("bad.json", HEAD("1.0", "completed") "\"server_list\": [{\"device\": []}]}"));
    CHECK_MSG(rc == 2 && strstr(out, "EI0004: the rank table") &&
                  strstr(out, "server_list[0].server_id: missing"),
              "exit %d: %s", rc, out);
    t_tmp_remove();
}

/* ------------------------------------------------------------ HCCL's ports */

/* The port rank 0's root info store took, from its INFO log: the first
 * store of a line of rank 0's (ddpc-run's own has no prefix). -1: none. */
static int root_port(void) {
    static const char mark[] = "store server listening on 127.0.0.1:";
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *at = strstr(l, mark), *eol = strchr(l, '\n');
        if (!strncmp(l, "[0]: ", 5) && at && (!eol || at < eol)) return atoi(at + strlen(mark));
    }
    return -1;
}

/* HcclGetRootInfo's store: one of HCCL_IF_BASE_PORT's 32 ports (60000's
 * when unset; HCCL_HOST_SOCKET_PORT_RANGE wins), the base refused outside
 * [1024, 65520]. */
TEST_T(hccl_root_info_ports, 150) {
    static const struct {
        const char *env;
        int lo, hi;
    } cases[] = {
        { "", 60000, 60031 },
        { "HCCL_IF_BASE_PORT=%d", 0, 31 },
        { "HCCL_IF_BASE_PORT=60000 HCCL_HOST_SOCKET_PORT_RANGE=%d-%d", 0, 9 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int base = t_free_port_pair(), lo = cases[i].lo + (i ? base : 0);
        char env[128];
        snprintf(env, sizeof env, cases[i].env, base, base + 9); /* every listener's */
        int rc =
            run(120,
                "%s DDPC_DEBUG=INFO DDPC_DEBUG_SUBSYS=STORE %s --standalone --nproc-per-node=2 "
                "%s %s 2>&1",
                env, bin("ddpc-run"), bin("hccl_check"), t_tmp_path("root_info"));
        CHECK_MSG(rc == 0, "%s: exit %d: %s", env, rc, out);
        ranks_ok(2, "root info through a file");
        int port = root_port(), hi = cases[i].hi + (i ? base : 0);
        CHECK_MSG(port >= lo && port <= hi, "%s: the root info's store is on %d, not in %d-%d: %s",
                  env, port, lo, hi, out);
        t_tmp_remove(); /* the next case's ranks must not read this root info */
    }
    int rc = run(60, "HCCL_IF_BASE_PORT=65521 %s --standalone --nproc-per-node=2 %s %s 2>&1",
                 bin("ddpc-run"), bin("hccl_check"), t_tmp_path("root_info"));
    CHECK_MSG(rc != 0 && strstr(out, "HcclGetRootInfo(&id) = 1:") &&
                  strstr(out, "HCCL_IF_BASE_PORT='65521' is not an integer in [1024, 65520]"),
              "exit %d: %s", rc, out);
    t_tmp_remove();
}

/* ------------------------------------------------------------ benchmark */

/* HCCL's benchmark command line and table, every row checked: "success". */
static void bench_ok(const char *what, int rows) {
    CHECK_CONTAINS(out, "data_size(Bytes)  | avg_time(us)  | alg_bandwidth(GB/s) | check_result");
    int n = 0;
    for (const char *p = out; (p = strstr(p, "| success")); p++) n++;
    CHECK_MSG(n == rows && !strstr(out, "failed"), "%s: want %d rows, all success: %s", what, rows,
              out);
}

TEST_T(hccl_benchmark_under_ddpc_run, 150) {
    static const char *const ops[] = { "all_reduce",     "all_gather", "broadcast", "reduce",
                                       "reduce_scatter", "alltoall",   "scatter" };
    for (int i = 0; i < 7; i++) {
        char prog[64];
        snprintf(prog, sizeof prog, "%s_test", ops[i]);
        int rc = run(
            60,
            "HCCL_TEST_ROOT_INFO=%s %s --standalone --nproc-per-node=2 %s -b 8 -e 8K -f 32 -d fp16 "
            "-o max -r 1 -n 3 -w 1 2>&1",
            t_tmp_path("root_info"), bin("ddpc-run"), bin(prog));
        CHECK_MSG(rc == 0, "%s: exit %d: %s", prog, rc, out);
        bench_ok(prog, 3); /* 8, 256, 8192 bytes */
    }
    t_tmp_remove();
}

TEST_T(hccl_benchmark_under_mpirun, 150) {
    if (run(10, "command -v mpirun") != 0)
        SKIP("mpirun is not installed (apt-get install openmpi-bin)");
    char b[4096];
    snprintf(b, sizeof b, "%s/../hccl_test/bin/all_reduce_test",
             getenv("DDPC_BIN") ? getenv("DDPC_BIN") : "build/bin");
    if (access(b, X_OK) != 0)
        SKIP("%s is not built: make found no mpicc (apt-get install libopenmpi-dev)", b);
    int rc = run(60, MPIRUN " -np 3 %s -b 1K -e 1M -f 32 -d fp32 -o sum 2>&1", b);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    bench_ok("all_reduce_test", 3); /* 1K, 32K, 1M */
}

/* ------------------------------------------------------------ errors, headers, install */

/* A rank that never joins (mode --silent-peer[-config], --lost-peer): the
 * others' streams fail, their output has code (the aclError and async
 * HcclResult) and want (why). */
static void silent_peer(const char *env, const char *mode, const char *code, const char *want) {
    int rc = run(50, "%s %s --standalone --nproc-per-node=2 %s %s %s 2>&1", env, bin("ddpc-run"),
                 bin("hccl_check"), t_tmp_path("root_info"), mode);
    CHECK_MSG(rc == 0, "exit %d: %s", rc, out);
    CHECK_CONTAINS(out,
                   "hccl_check rank 0/2 (root info through a file): OK"); /* saw what it expected */
    CHECK_CONTAINS(out, code);
    CHECK_CONTAINS(out, want);
    t_tmp_remove();
}

#define TIMED_OUT "rank 0: silent peer: aclrtSynchronizeStream = 107020, async error 9 "

/* HCCL_EXEC_TIMEOUT: ddpc's text names the silent rank and the link. */
TEST_T(hccl_silent_peer_times_out_naming_it, 60) {
    silent_peer("HCCL_EXEC_TIMEOUT=1", "--silent-peer", TIMED_OUT, "rank 1 is silent");
    /* and the link as HCCL's link-error table gives it: rank 1 waited for */
    CHECK_CONTAINS(out, "LINK_ERROR_INFO");
    CHECK_CONTAINS(out, "| 127.0.0.1(1) |");
    CHECK_CONTAINS(out, "| waiter | time out |");
}

/* The communicator's own timeout (HcclCommConfig's hcclExecTimeOut = 1). */
TEST_T(hccl_config_exec_timeout, 60) {
    silent_peer("", "--silent-peer-config", TIMED_OUT,
                "not done within the communicator's hcclExecTimeOut (1 s)");
}

/* A rank that exits without a word fails the others at once:
 * ACL_ERROR_RT_SUSPECT_REMOTE_ERROR, HCCL_E_TCP_TRANSFER, the rank named. */
TEST_T(hccl_lost_peer_fails_the_others_at_once, 60) {
    silent_peer("HCCL_EXEC_TIMEOUT=30", "--lost-peer",
                "rank 0: silent peer: aclrtSynchronizeStream = 507057, async error 13 ",
                "lost rank 1");
}

/* Each public header compiles on its own, as C11 and as C++. */
TEST_T(hccl_headers_compile_alone, 60) {
    static const char *const hdrs[] = { "hccl/hccl.h",       "hccl/hccl_comm.h",
                                        "hccl/hccl_types.h", "acl/acl.h",
                                        "acl/acl_rt.h",      "acl/acl_base.h",
                                        "acl/acl_prof.h",    "acl/error_codes/rt_error_codes.h" };
    int cxx = run(10, "command -v c++") == 0;
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        int rc = run(30,
                     "echo '#include \"%s\"' | cc -std=c11 -Wall -Wextra -Werror -Iinclude -x c "
                     "-fsyntax-only - 2>&1",
                     hdrs[i]);
        CHECK_MSG(rc == 0, "%s as C: %s", hdrs[i], out);
        if (!cxx) continue;
        rc = run(30,
                 "echo '#include \"%s\"' | c++ -Wall -Wextra -Werror -Iinclude -x c++ "
                 "-fsyntax-only - 2>&1",
                 hdrs[i]);
        CHECK_MSG(rc == 0, "%s as C++: %s", hdrs[i], out);
    }
}

/* libhccl exports HCCL's names only (37 calls); libascendcl ACL's and the
 * hooks libhccl and libmsprofiler use (ddpc__acl_*); libmsprofiler aclprof*
 * only; libacl_rt is a linker script naming libascendcl. */
TEST_T(hccl_libraries_export_only_the_api, 30) {
    if (run(10, "command -v nm") != 0) SKIP("nm is not installed (apt-get install binutils)");
    const char *dir = getenv("DDPC_BIN") ? getenv("DDPC_BIN") : "build/bin";
    int rc = run(
        20,
        "nm -D --defined-only %s/../libhccl.so | awk '$2==\"T\"{print $3}' | grep -v '^Hccl' 2>&1",
        dir);
    CHECK_MSG(rc == 1 && out[0] == '\0', "libhccl.so exports more than Hccl*: %s", out);
    rc = run(
        20,
        "nm -D --defined-only %s/../libascendcl.so | awk '$2==\"T\"{print $3}' | grep -v '^acl' | "
        "grep -v '^ddpc__acl_' 2>&1",
        dir);
    CHECK_MSG(rc == 1 && out[0] == '\0', "libascendcl.so exports more than acl*: %s", out);
    rc = run(20,
             "nm -D --defined-only %s/../libmsprofiler.so | awk '$2==\"T\"{print $3}' | grep -v "
             "'^aclprof' 2>&1",
             dir);
    CHECK_MSG(rc == 1 && out[0] == '\0', "libmsprofiler.so exports more than aclprof*: %s", out);
    CHECK_EQ(run(20, "grep -c 'INPUT(-lascendcl)' %s/../libacl_rt.so", dir), 0);
    CHECK_EQ(run(20, "nm -D --defined-only %s/../libhccl.so | grep -c ' T Hccl'", dir), 0);
    CHECK_MSG(atoi(out) == 37, "libhccl.so exports %d Hccl names, want 37", atoi(out));
}
