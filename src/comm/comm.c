/*
 * comm.c — a communicator's life: creation from the environment, a URL, a
 * unique id or the caller's store (rank 0 hosting the store where nobody
 * else does), the settings it reads once, its queries, abort and destroy.
 *
 * What it leaves to others: how the ranks meet (bootstrap.c), the address
 * to listen on (iface.c), the queue of operations and work handles
 * (queue.c), split (split.c), moving the bytes (progress.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/env.h"
#include "base/util.h"
#include "comm/comm.h"
#include "ddpc/store.h"
#include "store/server.h"

/* A store server shared by a communicator and the ones split from it. */
struct ddpc__srv_ref {
    ddpc_store_server *server;
    int refs; /* atomic */
};

static int init_counter; /* atomic: communicators created by this process */

/* ------------------------------------------------------------ helpers */

static void srv_release(ddpc__srv_ref *r) {
    if (r && __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        ddpc_store_server_destroy(r->server);
        free(r);
    }
}

static ddpc__srv_ref *srv_wrap(ddpc_store_server *s) {
    ddpc__srv_ref *r = malloc(sizeof *r);
    if (!r) return NULL;
    r->server = s;
    r->refs = 1;
    return r;
}

/* Reads the settings every communicator needs. */
static ddpc_status read_settings(ddpc_comm *c) {
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_CONNECT_TIMEOUT, &c->connect_timeout));
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_TIMEOUT, &c->exec_timeout));
    long chunk, spin;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_CHUNK, &chunk));
    c->chunk = (size_t)chunk;
    double us, gbit;
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_NET_US, &us));
    DDPC_CHECK(ddpc__env_double(DDPC_ENV_NET_GBIT, &gbit));
    c->tuner.net_alpha = us * 1e-6;
    c->tuner.net_beta = 8e-9 / gbit;
    c->spin_s = -1; /* unset: chosen once the host's ranks are known (choose_spin) */
    if (ddpc__env_isset(DDPC_ENV_SPIN_US)) {
        DDPC_CHECK(ddpc__env_long(DDPC_ENV_SPIN_US, &spin));
        c->spin_s = (double)spin * 1e-6;
    }
    long shm;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_SHM, &shm));
    c->shm = (int)shm;
    const char *lazy_src, *lazy = ddpc__env(DDPC_ENV_LAZY_CONNECT, &lazy_src);
    if (!lazy || !strcmp(lazy, "auto")) /* a full mesh costs size^2 connections; see bootstrap.c */
        c->lazy = c->size > DDPC_LAZY_AUTO_ABOVE;
    else if (!strcmp(lazy, "0") || !strcmp(lazy, "1"))
        c->lazy = lazy[0] == '1';
    else
        return ddpc__err(DDPC_ERR_ENV, "%s='%s' is not one of auto, 0, 1", lazy_src, lazy);
    /* published; rank 0's decides (bootstrap.c) */
    const char *token = NULL;
    DDPC_CHECK(ddpc__auth_token(&token));
    c->auth = token != NULL;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_SHM_BYTES, &c->shm_bytes));
    long ux_max;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_P2P_UNEXPECTED_BYTES, &ux_max));
    c->ux_max = (size_t)ux_max;
    long streams;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_SOCKETS_PER_PEER, &streams));
    c->streams = (int)streams; /* published; rank 0's decides (bootstrap.c) */
    const char *copy_src, *copy = ddpc__env(DDPC_ENV_SHM_COPY, &copy_src);
    c->shm_copy = ddpc__shm_copy_policy(copy);
    if (c->shm_copy < 0)
        return ddpc__err(DDPC_ERR_ENV, "%s='%s' is not one of auto, cached, stream", copy_src,
                         copy);
    const char *src, *algo = ddpc__env(DDPC_ENV_ALGO, &src);
    ddpc__algo_choice ac;
    DDPC_CHECK(ddpc__algo_parse(src, algo, &ac));
    c->tuner.algo = ac.algo;
    c->tuner.algo_inter = ac.inter;
    return DDPC_OK;
}

/* What opt (may be NULL) says instead of the environment. */
static void apply_options(ddpc_comm *c, const ddpc_comm_options *opt) {
    if (opt && opt->connect_timeout_s > 0) c->connect_timeout = opt->connect_timeout_s;
    if (opt && opt->exec_timeout_s >= 0) c->exec_timeout = opt->exec_timeout_s;
    if (opt && opt->progress_thread == 0) c->no_thread = 1;
}

static ddpc_comm *comm_alloc(int rank, int size) {
    ddpc_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->rank = rank;
    c->size = size;
    c->abort_fd = -1;
    c->peers = calloc((size_t)size, sizeof *c->peers);
    c->p2p_sent = calloc((size_t)size, sizeof *c->p2p_sent);
    c->p2p_recvd = calloc((size_t)size, sizeof *c->p2p_recvd);
    c->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&c->mu, NULL);
    ddpc__cond_init_monotonic(&c->cv); /* timed waits: run_inline (queue.c) */
    pthread_mutex_init(&c->err_mu, NULL);
    if (!c->peers || !c->p2p_sent || !c->p2p_recvd || c->abort_fd < 0) {
        free(c->peers);
        free(c->p2p_sent);
        free(c->p2p_recvd);
        if (c->abort_fd >= 0) close(c->abort_fd);
        free(c);
        return NULL;
    }
    /* every peer starts on TCP; its link, when made, is carried by the
     * transport the table chose for the pair (link.c) */
    for (int i = 0; i < size; i++) c->peers[i].tp = &ddpc__transport_tcp;
    return c;
}

/* Frees c without any goodbye (bootstrap failures, and the end of destroy). */
static void comm_free(ddpc_comm *c) {
    if (!c) return;
    ddpc__rec_fini(c); /* first: a dump on another thread reads the peers */
    ddpc__link_free(c);
    for (int i = 0; i < c->size; i++) {
        if (c->peers[i].conn) c->peers[i].tp->close(c->peers[i].conn);
        free(c->peers[i].notes.more); /* a stall's (stall.c) */
    }
    ddpc__ux_free(c);
    free(c->peers);
    free(c->p2p_sent);
    free(c->p2p_recvd);
    free(c->host_of);
    free(c->scratch);
    if (c->abort_fd >= 0) close(c->abort_fd);
    srv_release(c->srv);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->err_mu);
    free(c);
}

/* Frees c, whose creation failed with s, and returns s with the error text
 * that said why (kept across the frees). */
static ddpc_status comm_abandon(ddpc_comm *c, ddpc_status s) {
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", ddpc_last_error());
    comm_free(c);
    return ddpc__err(s, "%s", keep);
}

const char *ddpc__peer_transport(const ddpc_comm *c, int peer) {
    if (!c || peer < 0 || peer >= c->size) return NULL;
    if (peer == c->rank) return "self";
    const ddpc__peer *pe = &c->peers[peer];
    if (pe->conn) return pe->tp->name;
    return pe->set.tp ? pe->set.tp->name : "tcp"; /* lazy: what the pair is to use */
}

int ddpc__peer_sockets(const ddpc_comm *c, int peer) {
    if (!c || peer < 0 || peer >= c->size || peer == c->rank) return 0;
    const ddpc__peer *pe = &c->peers[peer];
    if (!pe->conn || pe->tp == &ddpc__transport_shm) return 0;
    return pe->tp == &ddpc__transport_streams ? ddpc__streams_count(pe->conn) : 1;
}

/* Gives c its share of the store's server: srv's when given, else a new
 * server at host:port when host_store and c is rank 0, else none. who names
 * the variables the address came from. */
static ddpc_status share_store(ddpc_comm *c, ddpc__srv_ref *srv, int host_store, const char *host,
                               int port, const char *who) {
    if (srv) {
        __atomic_add_fetch(&srv->refs, 1, __ATOMIC_ACQ_REL);
        c->srv = srv;
        return DDPC_OK;
    }
    if (!host_store || c->rank != 0) return DDPC_OK;
    ddpc_store_server *server = NULL;
    if (ddpc_store_server_create(host, port, &server) != DDPC_OK)
        return ddpc__err(DDPC_ERR_ENV, "%s: rank 0 cannot host the store there: %s", who,
                         ddpc_last_error());
    c->srv = srv_wrap(server);
    if (!c->srv) {
        ddpc_store_server_destroy(server);
        return ddpc__err(DDPC_ERR_NOMEM, "out of memory");
    }
    return DDPC_OK;
}

ddpc_status ddpc__comm_create(int rank, int size, const char *host, int port, int host_store,
                              ddpc__srv_ref *srv, const char *prefix, const char *who,
                              const ddpc_comm_options *opt, ddpc_comm **out) {
    *out = NULL;
    ddpc_comm *c = comm_alloc(rank, size);
    if (!c) return ddpc__err(DDPC_ERR_NOMEM, "out of memory for a communicator of %d ranks", size);
    ddpc_status s;
    DDPC_CHECK_GOTO(read_settings(c), s, fail);
    apply_options(c, opt);
    DDPC_CHECK_GOTO(ddpc__rec_init(c), s, fail);
    snprintf(c->store_host, sizeof c->store_host, "%s", host);
    c->store_port = port;
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    ddpc__log_set_rank(rank);
    ddpc__env_log_effective(DDPC_SUB_ENV);
    DDPC_CHECK_GOTO(share_store(c, srv, host_store, host, port, who), s, fail);
    DDPC_CHECK_GOTO(ddpc__choose_ip(host, c->ip, sizeof c->ip, c->ifname, sizeof c->ifname), s,
                    fail);
    DDPC_CHECK_GOTO(ddpc__bootstrap_addr(c, host, port, who), s, fail);
    ddpc__rec_register(c);
    *out = c;
    return DDPC_OK;
fail:
    return comm_abandon(c, s);
}

ddpc_status ddpc__comm_create_store(int rank, int size, ddpc_store *st, const char *prefix,
                                    const ddpc_comm_options *opt, ddpc_comm **out) {
    *out = NULL;
    ddpc_comm *c = comm_alloc(rank, size);
    if (!c) return ddpc__err(DDPC_ERR_NOMEM, "out of memory for a communicator of %d ranks", size);
    ddpc_status s;
    DDPC_CHECK_GOTO(read_settings(c), s, fail);
    apply_options(c, opt);
    DDPC_CHECK_GOTO(ddpc__rec_init(c), s, fail);
    snprintf(c->store_host, sizeof c->store_host, "%s", ddpc_store_addr(st));
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    c->ext_store = st;
    ddpc__log_set_rank(rank);
    ddpc__env_log_effective(DDPC_SUB_ENV);
    const char *route = ddpc__env(DDPC_ENV_MASTER_ADDR, NULL); /* its default: 127.0.0.1 */
    DDPC_CHECK_GOTO(ddpc__choose_ip(route, c->ip, sizeof c->ip, c->ifname, sizeof c->ifname), s,
                    fail);
    DDPC_CHECK_GOTO(ddpc__bootstrap_store(c, st), s, fail);
    ddpc__rec_register(c);
    *out = c;
    return DDPC_OK;
fail:
    return comm_abandon(c, s);
}

/* ------------------------------------------------------------ creation */

ddpc_comm_options ddpc_comm_options_default(void) {
    ddpc_comm_options o = {
        .connect_timeout_s = -1, .exec_timeout_s = -1, .progress_thread = -1, .id_port_base = -1
    };
    return o;
}

/* The job's rank and size from torchrun's, OpenMPI's or Slurm's variables. */
static ddpc_status job_rank(long *rank, long *size, int *fallback) {
    static const ddpc__env_id sets[3][2] = {
        { DDPC_ENV_RANK, DDPC_ENV_WORLD_SIZE },
        { DDPC_ENV_OMPI_RANK, DDPC_ENV_OMPI_SIZE },
        { DDPC_ENV_SLURM_PROCID, DDPC_ENV_SLURM_NTASKS },
    };
    for (int i = 0; i < 3; i++) {
        const char *rname = ddpc__env_name(sets[i][0]), *sname = ddpc__env_name(sets[i][1]);
        if (!ddpc__env_isset(sets[i][0])) continue;
        if (!ddpc__env_isset(sets[i][1]))
            return ddpc__err(DDPC_ERR_ENV, "%s is not set (%s=%s is)", sname, rname,
                             ddpc__env(sets[i][0], NULL));
        DDPC_CHECK(ddpc__env_long(sets[i][1], size));
        DDPC_CHECK(ddpc__env_long(sets[i][0], rank));
        if (*rank >= *size)
            return ddpc__err(DDPC_ERR_ENV, "%s=%ld is not below %s=%ld", rname, *rank, sname,
                             *size);
        *fallback = i;
        ddpc__log_set_rank((int)*rank);
        DDPC_INFO(INIT, "rank %ld of %ld (from %s and %s)", *rank, *size, rname, sname);
        return DDPC_OK;
    }
    return ddpc__err(
        DDPC_ERR_ENV,
        "RANK is not set (nor OMPI_COMM_WORLD_RANK or SLURM_PROCID): start the program "
        "with ddpc-run, torchrun, mpirun or srun, or set RANK and WORLD_SIZE");
}

/* torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE, when set, must fit the job. */
static ddpc_status check_local(long size) {
    long lr, lws = size;
    if (!ddpc__env_isset(DDPC_ENV_LOCAL_RANK)) return DDPC_OK;
    if (ddpc__env_isset(DDPC_ENV_LOCAL_WORLD_SIZE)) {
        DDPC_CHECK(ddpc__env_long(DDPC_ENV_LOCAL_WORLD_SIZE, &lws));
        if (lws > size)
            return ddpc__err(DDPC_ERR_ENV, "LOCAL_WORLD_SIZE=%ld is above WORLD_SIZE=%ld", lws,
                             size);
    }
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_LOCAL_RANK, &lr));
    if (lr >= lws)
        return ddpc__err(DDPC_ERR_ENV, "LOCAL_RANK='%ld' is not below LOCAL_WORLD_SIZE=%ld", lr,
                         lws);
    return DDPC_OK;
}

ddpc_status ddpc_comm_create_env(ddpc_comm **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_comm_create_env: out is NULL");
    *out = NULL;
    long rank, size, port, restart;
    int which = 0;
    ddpc_rank_table *table = NULL;
    if (ddpc__env_isset(DDPC_ENV_RANK_TABLE_FILE)) {
        DDPC_CHECK(ddpc__rank_table_env(&table, &rank));
        size = ddpc_rank_table_size(table);
    } else {
        DDPC_CHECK(job_rank(&rank, &size, &which));
        if (which == 0) DDPC_CHECK(check_local(size));
    }
    char prefix[256], who[512];
    int k = __atomic_fetch_add(&init_counter, 1, __ATOMIC_RELAXED);
    const char *src;
    const char *host = ddpc__env(DDPC_ENV_MASTER_ADDR, &src);
    /* torchrun's contract: its agent (or ddpc-run) hosts the store there,
     * and each restart is a new attempt whose keys must not meet the last's */
    const char *agent = ddpc__env(DDPC_ENV_USE_AGENT_STORE, NULL);
    int use_agent =
        agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1"));
    if (table && !use_agent) { /* rank 0 hosts the store as the table says */
        ddpc_status s = ddpc_comm_create_rank_table(table, (int)rank, NULL, out);
        ddpc_rank_table_destroy(table);
        return s;
    }
    ddpc_rank_table_destroy(table);
    if (!host || !*host) return ddpc__err(DDPC_ERR_ENV, "MASTER_ADDR is empty");
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_MASTER_PORT, &port));
    snprintf(who, sizeof who, "MASTER_ADDR=%s MASTER_PORT=%ld", host, port);
    if (use_agent) {
        DDPC_CHECK(ddpc__env_long(DDPC_ENV_RESTART_COUNT, &restart));
        snprintf(prefix, sizeof prefix, "ddpc/attempt_%ld/comm%d/", restart, k);
        DDPC_INFO(INIT, "store: %s (the launcher's agent store), keys under ddpc/attempt_%ld/", who,
                  restart);
        return ddpc__comm_create((int)rank, (int)size, host, (int)port, 0, NULL, prefix, who, NULL,
                                 out);
    }
    snprintf(prefix, sizeof prefix, "ddpc/comm%d/", k);
    DDPC_INFO(INIT, "store: %s (MASTER_ADDR from %s; rank 0 hosts it)", who, src);
    return ddpc__comm_create((int)rank, (int)size, host, (int)port, 1, NULL, prefix, who, NULL,
                             out);
}

ddpc_status ddpc_comm_create_rank_table(const ddpc_rank_table *t, int rank,
                                        const ddpc_comm_options *opt, ddpc_comm **out) {
    if (!out || !t)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_comm_create_rank_table: out and t must be non-NULL");
    *out = NULL;
    int n = ddpc_rank_table_size(t);
    if (rank < 0 || rank >= n)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "rank %d is not in the rank table %s (ranks 0..%d)",
                         rank, ddpc__rank_table_path(t), n - 1);
    long port;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_RANK_TABLE_PORT, &port));
    ddpc_rank_table_server root;
    DDPC_CHECK(ddpc_rank_table_server_at(t, ddpc_rank_table_server_of(t, 0), &root));
    char prefix[64], who[512];
    int k = __atomic_fetch_add(&init_counter, 1, __ATOMIC_RELAXED);
    snprintf(prefix, sizeof prefix, "ddpc/table%d/", k);
    snprintf(who, sizeof who,
             "the rank table %s: rank 0's server %s at %s, DDPC_RANK_TABLE_PORT=%ld",
             ddpc__rank_table_path(t), root.server_id, root.host, port);
    DDPC_INFO(INIT, "store: %s (rank 0 hosts it)", who);
    return ddpc__comm_create(rank, n, root.host, (int)port, 1, NULL, prefix, who, opt, out);
}

/* Splits "tcp://host:port" or "tcp://[v6]:port". */
static ddpc_status parse_url(const char *url, char *host, size_t hlen, int *port) {
    if (!url || strncmp(url, "tcp://", 6) != 0)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "URL '%s' does not start with tcp://",
                         url ? url : "(null)");
    const char *h = url + 6, *colon;
    size_t n;
    if (*h == '[') {
        const char *close_b = strchr(h, ']');
        if (!close_b || close_b[1] != ':')
            return ddpc__err(DDPC_ERR_INVALID_ARG, "URL '%s' is not tcp://[address]:port", url);
        n = (size_t)(close_b - h - 1);
        h++;
        colon = close_b + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon) return ddpc__err(DDPC_ERR_INVALID_ARG, "URL '%s' has no :port", url);
        n = (size_t)(colon - h);
    }
    if (n == 0 || n >= hlen) return ddpc__err(DDPC_ERR_INVALID_ARG, "URL '%s' has no host", url);
    memcpy(host, h, n);
    host[n] = '\0';
    long p;
    if (ddpc__parse_long("port", colon + 1, 1, 65535, &p) != DDPC_OK)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "URL '%s' has a bad port '%s'", url, colon + 1);
    *port = (int)p;
    return DDPC_OK;
}

static ddpc_status check_rank_size(int rank, int size) {
    if (size < 1) return ddpc__err(DDPC_ERR_INVALID_ARG, "size=%d must be at least 1", size);
    if (rank < 0 || rank >= size)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "rank=%d is not in [0, %d)", rank, size);
    return DDPC_OK;
}

ddpc_status ddpc_comm_create_url(const char *url, int rank, int size, ddpc_comm **out) {
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_comm_create_url: out is NULL");
    *out = NULL;
    DDPC_CHECK(check_rank_size(rank, size));
    char host[256], prefix[64], who[320];
    int port = 0;
    DDPC_CHECK(parse_url(url, host, sizeof host, &port));
    int k = __atomic_fetch_add(&init_counter, 1, __ATOMIC_RELAXED);
    snprintf(prefix, sizeof prefix, "ddpc/url%d/", k);
    snprintf(who, sizeof who, "%s", url);
    return ddpc__comm_create(rank, size, host, port, 1, NULL, prefix, who, NULL, out);
}

/* The unique id's layout inside ddpc_unique_id.internal. */
typedef struct uid_body {
    uint32_t magic;
    int32_t port;
    uint64_t nonce;
    char host[96];
} uid_body;
#define UID_MAGIC 0x55504444u /* "DDPU" */

/* Servers started by ddpc_get_unique_id in this process, until a rank 0
 * communicator takes one over. */
static pthread_mutex_t uid_mu = PTHREAD_MUTEX_INITIALIZER;
static struct uid_server {
    uint64_t nonce;
    ddpc_store_server *server;
} uid_servers[16];

ddpc_status ddpc_comm_create_store(ddpc_store *st, int rank, int size, const ddpc_comm_options *opt,
                                   ddpc_comm **out) {
    if (!out || !st)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_comm_create_store: out and st must be non-NULL");
    *out = NULL;
    DDPC_CHECK(check_rank_size(rank, size));
    return ddpc__comm_create_store(rank, size, st, "", opt, out);
}

ddpc_status ddpc_get_unique_id(const ddpc_comm_options *opt, ddpc_unique_id *out) {
    _Static_assert(sizeof(uid_body) <= sizeof(((ddpc_unique_id *)0)->internal),
                   "unique id too big");
    if (!out) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_get_unique_id: out is NULL");
    memset(out, 0, sizeof *out);
    char ip[64], ifname[64];
    const char *master = ddpc__env(DDPC_ENV_MASTER_ADDR, NULL);
    DDPC_CHECK(
        ddpc__choose_ip(master ? master : "127.0.0.1", ip, sizeof ip, ifname, sizeof ifname));
    ddpc_store_server *srv = NULL;
    ddpc__ports ports;
    DDPC_CHECK(ddpc__ports_id(opt ? opt->id_port_base : -1, &ports));
    DDPC_CHECK(ddpc__store_server_create_ports(ip, 0, &ports, &srv));
    uid_body b;
    memset(&b, 0, sizeof b);
    b.magic = UID_MAGIC;
    b.port = ddpc_store_server_port(srv);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b.nonce = ddpc__fnv1a(ip, strlen(ip)) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
              ((uint64_t)ts.tv_sec << 20);
    snprintf(b.host, sizeof b.host, "%s", ip);
    pthread_mutex_lock(&uid_mu);
    int slot = -1;
    for (int i = 0; i < 16; i++)
        if (!uid_servers[i].server) {
            slot = i;
            break;
        }
    if (slot >= 0) uid_servers[slot] = (struct uid_server){ b.nonce, srv };
    pthread_mutex_unlock(&uid_mu);
    if (slot < 0) {
        ddpc_store_server_destroy(srv);
        return ddpc__err(
            DDPC_ERR_INVALID_ARG,
            "ddpc_get_unique_id: 16 ids are already waiting for ddpc_comm_create_rank");
    }
    memcpy(out->internal, &b, sizeof b);
    return DDPC_OK;
}

ddpc_status ddpc_comm_create_rank(const ddpc_unique_id *id, int rank, int size,
                                  const ddpc_comm_options *opt, ddpc_comm **out) {
    if (!out || !id)
        return ddpc__err(DDPC_ERR_INVALID_ARG,
                         "ddpc_comm_create_rank: out and id must be non-NULL");
    *out = NULL;
    DDPC_CHECK(check_rank_size(rank, size));
    uid_body b;
    memcpy(&b, id->internal, sizeof b);
    b.host[sizeof b.host - 1] = '\0';
    if (b.magic != UID_MAGIC || b.port <= 0 || b.port > 65535)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "the unique id was not made by ddpc_get_unique_id");
    ddpc__srv_ref *srv = NULL;
    pthread_mutex_lock(&uid_mu);
    for (int i = 0; i < 16; i++)
        if (uid_servers[i].server && uid_servers[i].nonce == b.nonce) {
            srv = srv_wrap(uid_servers[i].server);
            if (srv) uid_servers[i].server = NULL;
        }
    pthread_mutex_unlock(&uid_mu);
    char prefix[64], who[160];
    snprintf(prefix, sizeof prefix, "ddpc/uid%016" PRIx64 "/", b.nonce);
    snprintf(who, sizeof who, "the unique id's store %s:%d", b.host, b.port);
    ddpc_status s = ddpc__comm_create(rank, size, b.host, b.port, 0, srv, prefix, who, opt, out);
    srv_release(srv); /* the communicator holds its own reference */
    return s;
}

/* ------------------------------------------------------------ queries */

int ddpc_comm_rank(const ddpc_comm *c) { return c ? c->rank : -1; }
int ddpc_comm_size(const ddpc_comm *c) { return c ? c->size : 0; }
int ddpc_comm_local_rank(const ddpc_comm *c) { return c ? c->local_rank : -1; }
int ddpc_comm_local_size(const ddpc_comm *c) { return c ? c->local_size : 0; }

const char *ddpc_comm_last_error(const ddpc_comm *c) { return c ? c->last_err : ""; }

/* ------------------------------------------------------------ abort, destroy */

ddpc_status ddpc_comm_abort(ddpc_comm *c) {
    if (!c) return ddpc__err(DDPC_ERR_INVALID_ARG, "ddpc_comm_abort: communicator is NULL");
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(c->abort_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        DDPC_WARN(INIT, "abort: eventfd write failed: %s", strerror(errno));
    for (int p = 0; p < c->size; p++) { /* a lazy link may come up meanwhile (link.c) */
        ddpc__conn *k = __atomic_load_n(&c->peers[p].conn, __ATOMIC_ACQUIRE);
        if (k) c->peers[p].tp->shutdown(k);
    }
    pthread_mutex_lock(&c->err_mu);
    int first = !c->last_err[0]; /* a failure before wrote the record already */
    if (first)
        snprintf(c->last_err, sizeof c->last_err,
                 "rank %d: the communicator was aborted (ddpc_comm_abort)", c->rank);
    pthread_mutex_unlock(&c->err_mu);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    char why[96];
    snprintf(why, sizeof why, "rank %d: the communicator was aborted (ddpc_comm_abort)", c->rank);
    if (first) ddpc__rec_dump(why);
    return DDPC_OK;
}

ddpc_status ddpc_comm_destroy(ddpc_comm *c) {
    if (!c) return DDPC_OK;
    ddpc__queue_stop(c);
    ddpc_status s = DDPC_OK;
    /* the verdict of the last rooted collectives' checks (ddpc__check_ring_post) */
    if (c->failed == DDPC_OK && !__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        s = ddpc__check_parked_finish(c);
    if (c->failed == DDPC_OK && !__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        /* goodbye: lets the peers tell a clean close from a crash */
        ddpc__hdr bye;
        memset(&bye, 0, sizeof bye);
        bye.magic = DDPC_MSG_MAGIC;
        bye.flags = DDPC_F_BYE;
        bye.seq = c->seq;
        bye.root = -1;
        double deadline = ddpc__deadline_in(2.0);
        for (int p = 0; p < c->size; p++) {
            ddpc__peer *pe = &c->peers[p];
            if (pe->conn && pe->tp->send_full(pe->conn, &bye, sizeof bye, deadline, -1) != DDPC_OK)
                DDPC_INFO(INIT, "rank %d: goodbye to rank %d not sent: %s", c->rank, p,
                          ddpc_last_error());
        }
    }
    comm_free(c);
    return s;
}
