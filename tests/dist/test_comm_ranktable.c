/* test_comm_ranktable.c — ddpc's own communicators from HCCL's rank table
 * files (RANK_TABLE_FILE with RANK_ID, ddpc_comm_create_rank_table) on one
 * and two loopback "servers", versions 1.0 and 1.2; every malformed table
 * refused naming its field; and HCCL's port and address-family variables:
 * HCCL_IF_BASE_PORT (a unique id's 32 ports), HCCL_HOST_SOCKET_PORT_RANGE,
 * HCCL_SOCKET_FAMILY. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "comm/comm.h"
#include "comm_fixtures.h"

/* ------------------------------------------------------------ tables */

#define DEV(id, rank) "{\"device_id\": \"" id "\", \"rank_id\": \"" rank "\"}"
#define HEAD(version) "{\"version\": \"" version "\", \"status\": \"completed\", "

/* One server, 127.0.0.1, ranks 0-2 (device_ips as HCCL's examples have them). */
static const char one_server[] =
    HEAD("1.0") "\"server_count\": \"1\", \"server_list\": [{\"server_id\": \"127.0.0.1\", "
                "\"device\": [{\"device_id\": \"0\", \"device_ip\": \"192.168.1.8\", \"rank_id\": "
                "\"0\"}, " DEV("1", "1") ", " DEV("2", "2") "]}]}";

/* Two servers, listed in the other order than their ranks: node-b
 * (host_ip 127.0.0.2) has ranks 2-3, 127.0.0.1 ranks 0-1, so rank 0 (the
 * store's host) is on the second server of the list. */
static const char two_servers[] =
    HEAD("1.2") "\"server_count\": \"2\", \"server_list\": ["
                "{\"server_id\": \"node-b\", \"host_ip\": \"127.0.0.2\", \"device\": [" DEV(
                    "4", "2") ", " DEV("5", "3") "]}, "
                                                 "{\"server_id\": \"127.0.0.1\", \"device\": [" DEV(
                                                     "0", "0") ", " DEV("1", "1") "]}]}";

static char g_table[4096];

/* A rank started as HCCL's scripts start one: RANK_TABLE_FILE and RANK_ID
 * (odd ranks: RANK, the fallback), nothing else of the job. */
static void table_body(int rank, int world, void *arg) {
    clear_env();
    char b[16];
    snprintf(b, sizeof b, "%d", rank);
    setenv(rank % 2 ? "RANK" : "RANK_ID", b, 1);
    setenv("RANK_TABLE_FILE", g_table, 1);
    snprintf(b, sizeof b, "%d", g_port);
    setenv("DDPC_RANK_TABLE_PORT", b, 1);
    setenv("DDPC_CONNECT_TIMEOUT", "20", 1);
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_env(&c));
    CHECK_EQ(ddpc_comm_rank(c), rank);
    CHECK_EQ(ddpc_comm_size(c), world);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
}

static void run_table(const char *text, int world) {
    snprintf(g_table, sizeof g_table, "%s", t_tmp_write("table.json", text));
    g_port = t_free_port();
    t_run_ranks(world, 40, table_body, NULL);
    t_tmp_remove();
}

TEST_T(rank_table_one_server_v10, 60) { run_table(one_server, 3); }
TEST_T(rank_table_two_servers_v12, 60) { run_table(two_servers, 4); }

/* What the table object says of the two servers. */
TEST_T(rank_table_queries, 30) {
    ddpc_rank_table *t = NULL;
    CHECK_OK(ddpc_rank_table_load(t_tmp_write("t.json", two_servers), &t));
    CHECK_EQ(ddpc_rank_table_size(t), 4);
    CHECK_EQ(ddpc_rank_table_servers(t), 2);
    ddpc_rank_table_server s;
    CHECK_OK(ddpc_rank_table_server_at(t, 0, &s));
    CHECK_STR(s.server_id, "node-b");
    CHECK_STR(s.host, "127.0.0.2");
    CHECK_EQ(s.first_rank, 2);
    CHECK_EQ(s.nranks, 2);
    CHECK_OK(ddpc_rank_table_server_at(t, 1, &s));
    CHECK_STR(s.host, "127.0.0.1"); /* no host_ip: the server_id */
    CHECK_EQ(s.first_rank, 0);
    CHECK_EQ(ddpc_rank_table_server_of(t, 0), 1);
    CHECK_EQ(ddpc_rank_table_server_of(t, 3), 0);
    CHECK_EQ(ddpc_rank_table_server_of(t, 4), -1);
    CHECK_EQ(ddpc_rank_table_device(t, 3), 5);
    CHECK_STATUS(ddpc_rank_table_server_at(t, 2, &s), DDPC_ERR_INVALID_ARG);
    ddpc_comm *c = NULL;
    CHECK_STATUS(ddpc_comm_create_rank_table(t, 4, NULL, &c), DDPC_ERR_INVALID_ARG);
    CHECK_CONTAINS(ddpc_last_error(), "rank 4 is not in the rank table");
    ddpc_rank_table_destroy(t);
    ddpc_rank_table_destroy(NULL);
    t_tmp_remove();
}

/* Every malformed table: DDPC_ERR_IO, EI0004, the field named. */
TEST_T(rank_table_errors_name_the_field, 30) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        { "{\"version\": \"1.0\",", "(the whole file): not valid JSON" },
        { "[1, 2]", "(the whole file): must be a JSON object" },
        { "{\"status\": \"completed\", \"server_list\": []}", "version: missing" },
        { HEAD("1.1") "\"server_list\": []}", "version: \"1.1\" is not \"1.0\" or \"1.2\"" },
        { "{\"version\": 1.2, \"status\": \"completed\"}", "version: must be a string" },
        { "{\"version\": \"1.2\", \"status\": \"initializing\"}",
          "status: \"initializing\": the table is not \"completed\"" },
        { "{\"version\": \"1.0\"}", "status: missing" },
        { HEAD("1.2") "\"server_count\": \"1\"}", "server_list: missing" },
        { HEAD("1.0") "\"server_list\": {}}", "server_list: must be a non-empty array" },
        { HEAD("1.2") "\"server_count\": \"2\", \"server_list\": [{\"server_id\": \"a\", "
                      "\"device\": [" DEV("0", "0") "]}]}",
          "server_count: \"2\" but server_list has 1 servers" },
        { HEAD("1.0") "\"server_list\": [7]}", "server_list[0]: must be an object" },
        { HEAD("1.0") "\"server_list\": [{\"device\": [" DEV("0", "0") "]}]}",
          "server_list[0].server_id: missing" },
        { HEAD("1.2") "\"server_list\": [{\"server_id\": \"a\", \"host_ip\": 1, \"device\": "
                      "[" DEV("0", "0") "]}]}",
          "server_list[0].host_ip: must be a string" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\"}]}",
          "server_list[0].device: missing" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\", \"device\": []}]}",
          "server_list[0].device: must be a non-empty array" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\", \"device\": [\"x\"]}]}",
          "server_list[0].device[0]: must be an object" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\", \"device\": [{\"rank_id\": "
                      "\"0\"}]}]}",
          "server_list[0].device[0].device_id: missing" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": "
                      "\"-1\", \"rank_id\": \"0\"}]}]}",
          "server_list[0].device[0].device_id: \"-1\" is not a whole number" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": "
                      "\"0\", \"device_ip\": 3, \"rank_id\": \"0\"}]}]}",
          "server_list[0].device[0].device_ip: must be a string" },
        { HEAD("1.2") "\"server_list\": [{\"server_id\": \"a\", \"device\": [{\"device_id\": "
                      "\"0\"}]}]}",
          "server_list[0].device[0].rank_id: missing" },
        { HEAD("1.2") "\"server_list\": [{\"server_id\": \"a\", \"device\": [" DEV(
              "0", "0") ", " DEV("1", "2") "]}]}",
          "server_list[0].device[1].rank_id: \"2\" is not a whole number in 0..1" },
        { HEAD("1.0") "\"server_list\": [{\"server_id\": \"a\", \"device\": [" DEV(
              "0", "1") ", " DEV("1", "1") "]}]}",
          "server_list[0].device[1].rank_id: rank 1 is listed twice" },
        { HEAD("1.2") "\"server_list\": [{\"server_id\": \"a\", \"device\": [" DEV(
              "0", "0") ", " DEV("1",
                                 "2") "]}, {\"server_id\": \"b\", \"device\": [" DEV("0",
                                                                                     "1") "]}]}",
          "server_list[0].device[].rank_id: the ranks of one server must be contiguous" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = t_tmp_write("bad.json", cases[i].text);
        ddpc_rank_table *t = (ddpc_rank_table *)1;
        ddpc_status s = ddpc_rank_table_load(p, &t);
        CHECK_MSG(s == DDPC_ERR_IO && t == NULL, "case %zu: %s (%s)", i, ddpc_status_str(s),
                  ddpc_last_error());
        char want[512];
        snprintf(want, sizeof want, "EI0004: the rank table %s is invalid: %s", p, cases[i].want);
        CHECK_MSG(strstr(ddpc_last_error(), want), "case %zu: want \"%s\" in \"%s\"", i, want,
                  ddpc_last_error());
    }
    ddpc_rank_table *t = NULL;
    CHECK_STATUS(ddpc_rank_table_load(t_tmp_path("absent.json"), &t), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "absent.json cannot be opened");
    CHECK_STATUS(ddpc_rank_table_load(t_tmp_dir(), &t), DDPC_ERR_SYSTEM); /* a directory */
    CHECK_CONTAINS(ddpc_last_error(), "cannot be read");
    t_tmp_remove();
}

/* The environment's mistakes, each one line naming the variable. */
TEST_T(rank_table_env_errors, 30) {
    clear_env();
    setenv("RANK_TABLE_FILE", t_tmp_write("t.json", one_server), 1);
    bad_env(DDPC_ERR_ENV, "is set but RANK_ID is not");
    setenv("RANK_ID", "3", 1);
    bad_env(DDPC_ERR_ENV, "RANK_ID=3 is not a rank of RANK_TABLE_FILE=");
    setenv("RANK_ID", "x", 1);
    bad_env(DDPC_ERR_ENV, "RANK_ID='x'");
    setenv("RANK_ID", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    bad_env(DDPC_ERR_ENV, "WORLD_SIZE=4 but RANK_TABLE_FILE=");
    setenv("WORLD_SIZE", "3", 1);
    setenv("RANK_SIZE", "2", 1);
    bad_env(DDPC_ERR_ENV, "RANK_SIZE=2 but RANK_TABLE_FILE=");
    unsetenv("WORLD_SIZE");
    unsetenv("RANK_SIZE");
    setenv("RANK_TABLE_FILE", t_tmp_path("absent.json"), 1);
    bad_env(DDPC_ERR_NOT_FOUND, "cannot be opened");
    setenv("RANK_TABLE_FILE", t_tmp_write("bad.json", "{"), 1);
    bad_env(DDPC_ERR_IO, "EI0004");
    unsetenv("RANK_TABLE_FILE");
    unsetenv("RANK_ID");
    t_tmp_remove();
}

/* ------------------------------------------------------------ ports */

/* 1 when nothing can bind 127.0.0.1:port now (someone listens there). */
static int port_taken(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int taken = bind(fd, (struct sockaddr *)&a, sizeof a) != 0;
    close(fd);
    return taken;
}

/* A base with 32 free ports on 127.0.0.1 from it (tries a few). */
/* 32 free ports in a row, below Linux's ephemeral ports (32768 up), so that
 * no connection of this test or another takes one between the check and
 * the bind (CI saw a rank's range port taken so). */
static int free_base(void) {
    for (int k = 0; k < 50; k++) {
        int b = 20000 + (int)((unsigned)(getpid() * 7919 + k * 613) % 12700), ok = 1;
        for (int p = b; p < b + 32 && ok; p++) ok = !port_taken(p);
        if (ok) return b;
    }
    SKIP("no 32 free ports in a row on 127.0.0.1");
}

/* Makes a unique id and a communicator of one from it (which takes the
 * id's store over and frees it again). */
static void id_comm(const ddpc_comm_options *opt, int *port_seen, int base) {
    ddpc_unique_id id;
    CHECK_OK(ddpc_get_unique_id(opt, &id));
    *port_seen = -1;
    for (int p = base; p < base + 32 && base > 0; p++)
        if (port_taken(p)) *port_seen = p;
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_rank(&id, 0, 1, opt, &c));
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(hccl_if_base_port, 30) {
    clear_env();
    int base = free_base(), seen;
    char b[16];
    snprintf(b, sizeof b, "%d", base);
    setenv("HCCL_IF_BASE_PORT", b, 1);
    setenv("LOCAL_RANK", "3", 1); /* "device" 3: base + 3 */
    id_comm(NULL, &seen, base);
    CHECK_EQ(seen, base + 3);
    unsetenv("LOCAL_RANK");
    id_comm(NULL, &seen, base);
    CHECK_EQ(seen, base);
    /* the option's base is HCCL's default: the variable wins over it */
    ddpc_comm_options o = ddpc_comm_options_default();
    o.id_port_base = 1024;
    id_comm(&o, &seen, base);
    CHECK_EQ(seen, base);
    unsetenv("HCCL_IF_BASE_PORT");
    o.id_port_base = base;
    setenv("LOCAL_RANK", "33", 1); /* wraps round the 32 */
    id_comm(&o, &seen, base);
    CHECK_EQ(seen, base + 1);
    unsetenv("LOCAL_RANK");
    /* base + 0 taken: the next of the 32 */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)base) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
    ddpc_unique_id id;
    CHECK_OK(ddpc_get_unique_id(&o, &id));
    CHECK(port_taken(base + 1));
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_rank(&id, 0, 1, NULL, &c));
    CHECK_OK(ddpc_comm_destroy(c));
    close(fd);
    /* outside HCCL's range: refused naming it */
    setenv("HCCL_IF_BASE_PORT", "65521", 1);
    CHECK_STATUS(ddpc_get_unique_id(NULL, &id), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(),
                   "HCCL_IF_BASE_PORT='65521' is not an integer in [1024, 65520]");
    setenv("HCCL_IF_BASE_PORT", "80", 1);
    CHECK_STATUS(ddpc_get_unique_id(NULL, &id), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_IF_BASE_PORT='80'");
}

/* ddpc_comm_create_rank's options: rank 0's exec timeout of 0.5 s (the
 * environment says 20) ends a wait for a rank that never comes. Rank 0
 * makes the id (its store must run in a rank, not in the test) and hands
 * it over in shared memory. */
typedef struct shared_id {
    ddpc_unique_id id;
    int ready; /* atomic */
} shared_id;

static void uid_opt_body(int rank, int world, void *arg) {
    shared_id *sh = arg;
    setenv("DDPC_TIMEOUT", "20", 1);
    if (rank == 0) {
        CHECK_OK(ddpc_get_unique_id(NULL, &sh->id));
        __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
    }
    for (int k = 0; k < 2000 && !__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE); k++)
        ddpc__sleep(0.01); /* at most 20 s */
    CHECK(__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE));
    ddpc_comm_options o = ddpc_comm_options_default();
    o.connect_timeout_s = 20;
    o.exec_timeout_s = rank == 0 ? 0.5 : -1;
    ddpc_comm *c = NULL;
    CHECK_OK(ddpc_comm_create_rank(&sh->id, rank, world, &o, &c));
    if (rank == 0) {
        int32_t v = 1;
        double t0 = ddpc__now();
        CHECK_STATUS(ddpc_allreduce(c, &v, &v, 1, DDPC_INT32, DDPC_SUM), DDPC_ERR_TIMEOUT);
        CHECK_MSG(ddpc__now() - t0 < 10, "the 0.5 s option did not hold: %.1f s", ddpc__now() - t0);
    } else {
        ddpc__sleep(2.0); /* never calls the allreduce */
    }
    ddpc_comm_destroy(c);
}

TEST_T(unique_id_create_rank_options, 60) {
    clear_env();
    shared_id *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    int st[2];
    t_run_ranks_status(2, 40, uid_opt_body, sh, st);
    CHECK_MSG(st[0] == 0, "rank 0: status %d", st[0]);
}

TEST_T(hccl_host_socket_port_range_parse, 30) {
    ddpc__ports p;
    CHECK_OK(ddpc__ports_parse("X", "60000-60050", &p));
    CHECK(p.n == 1 && p.lo[0] == 60000 && p.hi[0] == 60050);
    CHECK_OK(ddpc__ports_parse("X", "60000, 60050-60100,60150-60160", &p));
    CHECK(p.n == 3 && p.lo[1] == 60050 && p.hi[1] == 60100 && p.lo[2] == 60150);
    CHECK_OK(ddpc__ports_parse("X", "56000,56005,56007", &p));
    CHECK(p.n == 3 && p.lo[2] == 56007 && p.hi[2] == 56007);
    CHECK_OK(ddpc__ports_parse("X", "auto", &p));
    CHECK_EQ(p.n, 0);
    static const char *const bad[][2] = {
        { "", "'' is not a port" },
        { "0", "'0' is not a port" },
        { "65536", "'65536' is not a port" },
        { "60050-60000", "'60050-60000' is not a port" },
        { "60000,", "'' is not a port" },
        { "6000x", "'6000x' is not a port" },
        { "60000-60010,60005", "60000-60010 and 60005-60005 overlap" },
        { "Auto", "'Auto' is not a port" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_STATUS(ddpc__ports_parse("HCCL_HOST_SOCKET_PORT_RANGE", bad[i][0], &p), DDPC_ERR_ENV);
        CHECK_CONTAINS(ddpc_last_error(), bad[i][1]);
        CHECK_CONTAINS(ddpc_last_error(), "HCCL_HOST_SOCKET_PORT_RANGE=");
    }
}

/* Ranks whose data listeners must take ports of the range arg ("A,B-C"):
 * each finds its port in its INFO log. */
static void range_body(int rank, int world, void *arg) {
    const int *ports = arg; /* 3 ports */
    char spec[64];
    snprintf(spec, sizeof spec, "%d,%d-%d", ports[0], ports[1], ports[2]);
    setenv("HCCL_HOST_SOCKET_PORT_RANGE", spec, 1);
    setenv("DDPC_DEBUG", "INFO", 1);
    setenv("DDPC_DEBUG_SUBSYS", "INIT", 1);
    log_to_file("range", rank);
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, world * (world - 1) / 2);
    CHECK_OK(ddpc_comm_destroy(c));
    const char *buf = slurp_log("range", rank);
    const char *at = strstr(buf, "listening on 127.0.0.1:");
    CHECK_MSG(at, "no 'listening on' in the log: %s", buf);
    int port = atoi(at + strlen("listening on 127.0.0.1:"));
    CHECK_MSG(port == ports[0] || port == ports[1] || port == ports[2],
              "rank %d listens on %d, not in %s", rank, port, spec);
}

TEST_T(hccl_host_socket_port_range, 60) {
    clear_env();
    int base = free_base(), seen;
    char spec[64];
    /* a unique id's store: the range wins over HCCL_IF_BASE_PORT */
    snprintf(spec, sizeof spec, "%d", base + 7);
    setenv("HCCL_HOST_SOCKET_PORT_RANGE", spec, 1);
    setenv("HCCL_IF_BASE_PORT", "60000", 1);
    id_comm(NULL, &seen, base);
    CHECK_EQ(seen, base + 7);
    unsetenv("HCCL_IF_BASE_PORT");
    /* every port of the range taken: an error naming it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(base + 7)) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
    ddpc_unique_id id;
    CHECK_STATUS(ddpc_get_unique_id(NULL, &id), DDPC_ERR_SYSTEM);
    CHECK_CONTAINS(ddpc_last_error(), "every one is taken");
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_HOST_SOCKET_PORT_RANGE=");
    close(fd);
    setenv("HCCL_HOST_SOCKET_PORT_RANGE", "1-", 1);
    CHECK_STATUS(ddpc_get_unique_id(NULL, &id), DDPC_ERR_ENV);
    unsetenv("HCCL_HOST_SOCKET_PORT_RANGE");
}

/* The data listeners of 3 ranks, DDPC_IF_BASE_PORT set elsewhere (the
 * range wins). Its own test: the ranks' logs start in them. */
TEST_T(hccl_host_socket_port_range_data, 60) {
    clear_env();
    int base = free_base();
    setenv("DDPC_IF_BASE_PORT", "1030", 1);
    int ports[3] = { base + 20, base + 25, base + 26 };
    g_port = base + 31;
    t_run_ranks(3, 40, range_body, ports);
}

/* ------------------------------------------------------------ address family */

TEST_T(hccl_socket_family, 30) {
    char ip[64], ifn[64];
    clear_env();
    setenv("HCCL_SOCKET_IFNAME", "lo", 1);
    setenv("HCCL_SOCKET_FAMILY", "AF_INET", 1);
    CHECK_OK(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn));
    CHECK_STR(ip, "127.0.0.1");
    setenv("HCCL_SOCKET_FAMILY", "AF_INET6", 1);
    if (ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn) != DDPC_OK)
        SKIP("lo has no IPv6 address here: %s", ddpc_last_error());
    CHECK_STR(ip, "::1");
    unsetenv("HCCL_SOCKET_IFNAME");
    /* the route to the store, in the family asked for */
    CHECK_OK(ddpc__choose_ip("::1", ip, sizeof ip, ifn, sizeof ifn));
    CHECK_STR(ip, "::1");
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_NOT_FOUND);
    CHECK_CONTAINS(ddpc_last_error(), "'127.0.0.1' as HCCL_SOCKET_FAMILY=AF_INET6");
    setenv("HCCL_IF_IP", "127.0.0.1", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_IF_IP=127.0.0.1 is an IPv4 address but "
                                      "HCCL_SOCKET_FAMILY=AF_INET6");
    unsetenv("HCCL_IF_IP");
    setenv("HCCL_SOCKET_FAMILY", "inet6", 1);
    CHECK_STATUS(ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "HCCL_SOCKET_FAMILY='inet6' is not AF_INET or AF_INET6");
    unsetenv("HCCL_SOCKET_FAMILY");
}

/* Two ranks over IPv6 loopback, the store on IPv4's. */
static void v6_body(int rank, int world, void *arg) {
    setenv("HCCL_SOCKET_FAMILY", "AF_INET6", 1);
    setenv("HCCL_SOCKET_IFNAME", "=lo", 1);
    ddpc_comm *c = env_comm(rank, world);
    sum_check(c, 1);
    CHECK_OK(ddpc_comm_destroy(c));
}

TEST_T(hccl_socket_family_ipv6_comm, 30) {
    char ip[64], ifn[64];
    clear_env();
    setenv("HCCL_SOCKET_FAMILY", "AF_INET6", 1);
    setenv("HCCL_SOCKET_IFNAME", "=lo", 1);
    ddpc_status s = ddpc__choose_ip("127.0.0.1", ip, sizeof ip, ifn, sizeof ifn);
    if (s != DDPC_OK) SKIP("lo has no IPv6 address here: %s", ddpc_last_error());
    g_port = t_free_port();
    t_run_ranks(2, 25, v6_body, NULL);
}
