/*
 * comm.c — the communicator: creation (environment, URL, unique id),
 * bootstrap through the store, topology, the ordered queue of operations and
 * its progress thread, work handles, abort, split and destroy.
 *
 * Bootstrap, in order:
 *   1. rank 0 hosts the store unless a launcher does (DDPC_STORE_ADDR);
 *   2. choose the address to listen on (iface.c) and listen there;
 *   3. publish "peer/<rank>" = {size, host id, address, port, DDPC_SHM,
 *      DDPC_SHM_BYTES} under the communicator's key prefix and wait for
 *      every rank's entry (bounded by DDPC_CONNECT_TIMEOUT; the error lists
 *      the ranks that never came);
 *   4. connect to every lower rank, accept every higher one (a full mesh:
 *      any algorithm can talk to any peer, and every rank sees a dead peer's
 *      sockets close); each connection opens with a hello {magic, version,
 *      communicator id, rank};
 *   5. ranks with the same host id form the local group; a pair in it whose
 *      ranks both publish DDPC_SHM=1 and the same DDPC_SHM_BYTES upgrades
 *      its connection to shared memory (transport.h: ddpc_shm_offer), the
 *      TCP socket staying as its doorbell. Both ends decide from the same
 *      published entries, so they always agree; where shared memory cannot
 *      be had, the pair stays on TCP with a warning.
 * The algorithms live in src/coll; the socket driving in progress.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "base/sock.h"
#include "comm/comm.h"
#include "ddpc/store.h"

#define HELLO_MAGIC 0x48504444u /* "DDPH" */
#define HELLO_VERSION 1u

typedef struct hello {
    uint32_t magic, version;
    uint64_t uid;
    int32_t rank, size;
} hello;

/* A store server shared by a communicator and the ones split from it. */
typedef struct ddpc_srv_ref {
    ddpc_store_server *server;
    int refs; /* atomic */
} ddpc_srv_ref;

struct ddpc_work {
    ddpc_comm *c; /* borrowed; only used while queued */
    ddpc_args a;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int started;    /* taken off the queue (under c->mu) */
    ddpc_status st;
    double timeout; /* the comm's exec timeout, for wait(-1) */
    double spin_s;  /* the comm's spin before a wait sleeps */
    int no_thread;  /* the comm has no progress thread: waiters run the queue */
    int refs;       /* atomic: the caller's and the queue's */
    char err[1024];
    struct ddpc_work *next;
};

static int init_counter; /* atomic: communicators created by this process */

/* ------------------------------------------------------------ helpers */

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static void srv_release(ddpc_srv_ref *r) {
    if (r && __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        ddpc_store_server_stop(r->server);
        free(r);
    }
}

static ddpc_srv_ref *srv_wrap(ddpc_store_server *s) {
    ddpc_srv_ref *r = malloc(sizeof *r);
    if (!r) return NULL;
    r->server = s;
    r->refs = 1;
    return r;
}

/* This host's identity: hostname, kernel boot id and network namespace, so
 * that "nodes" simulated in network namespaces of one kernel count as
 * separate hosts, as their launcher's LOCAL_RANK does. */
static void host_id(char *buf, size_t len) {
    char name[64] = "?", boot[64] = "", ns[64] = "";
    gethostname(name, sizeof name);
    name[sizeof name - 1] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
        boot[strcspn(boot, "\n")] = '\0';
    }
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    snprintf(buf, len, "%s/%.40s/%s", name, boot, ns);
    for (char *p = buf; *p; p++)
        if (*p == ' ') *p = '_';
}

/* How a waiting rank retries before it sleeps (ddpc__progress), unless
 * DDPC_SPIN_US says how long. While this host's ranks do not outnumber its
 * CPUs, a sleeping rank's core halts, and waking it costs tens of
 * microseconds a message (more under a hypervisor): retry up to 1 ms, the
 * first busy_polls tries without yielding (a peer's reply is often under a
 * microsecond away, less than one sched_yield costs under a hypervisor).
 * Where they outnumber them, a spinning rank takes time from one that has
 * work: 50 us, every try yielding the core. */
static void choose_spin(ddpc_comm *c) {
    long local = c->local_size, lws;
    if (ddpc_env_isset("LOCAL_WORLD_SIZE") &&
        ddpc_env_long("LOCAL_WORLD_SIZE", 1, 1L << 20, &lws) == DDPC_OK && lws > local)
        local = lws; /* a sub-communicator's host may hold more of the job's ranks */
    long cpus = ddpc_cpu_count();
    c->busy_polls = local <= cpus && c->spin_s != 0 ? DDPC_BUSY_POLLS : 0;
    c->poll_budget = c->busy_polls;
    if (c->spin_s >= 0) return;
    c->spin_s = local <= cpus ? 1e-3 : 50e-6;
    DDPC_INFO(INIT, "rank %d: %ld ranks on this host, %ld CPUs: waits poll %d times, then spin "
              "%g us before sleeping (DDPC_SPIN_US)", c->rank, local, cpus, c->busy_polls,
              c->spin_s * 1e6);
}

/* Reads the settings every communicator needs. */
static ddpc_status read_settings(ddpc_comm *c) {
    DDPC_CHECK(ddpc_env_double("DDPC_CONNECT_TIMEOUT", 0.001, 1e9, &c->connect_timeout));
    DDPC_CHECK(ddpc_env_double("DDPC_TIMEOUT", 0, 1e9, &c->exec_timeout));
    long chunk, spin;
    DDPC_CHECK(ddpc_env_long("DDPC_CHUNK", 4096, 1L << 30, &chunk));
    c->chunk = (size_t)chunk;
    c->spin_s = -1; /* unset: chosen once the host's ranks are known (choose_spin) */
    if (ddpc_env_isset("DDPC_SPIN_US")) {
        DDPC_CHECK(ddpc_env_long("DDPC_SPIN_US", 0, 10000000, &spin));
        c->spin_s = (double)spin * 1e-6;
    }
    long shm;
    DDPC_CHECK(ddpc_env_long("DDPC_SHM", 0, 1, &shm));
    c->shm = (int)shm;
    DDPC_CHECK(ddpc_env_long("DDPC_SHM_BYTES", 4096, 1L << 30, &c->shm_bytes));
    const char *copy_src, *copy = ddpc_env_str("DDPC_SHM_COPY", &copy_src);
    c->shm_copy = ddpc_shm_copy_policy(copy);
    if (c->shm_copy < 0)
        return ddpc_err(DDPC_ERR_ENV, "%s='%s' is not one of auto, cached, stream", copy_src, copy);
    const char *src, *algo = ddpc_env_str("DDPC_ALGO", &src);
    if (!algo || !strcmp(algo, "auto")) c->algo = DDPC_ALGO_AUTO;
    else if (!strcmp(algo, "ring")) c->algo = DDPC_ALGO_RING;
    else if (!strcmp(algo, "rhd")) c->algo = DDPC_ALGO_RHD;
    else if (!strcmp(algo, "tree")) c->algo = DDPC_ALGO_TREE;
    else return ddpc_err(DDPC_ERR_ENV, "%s='%s' is not one of auto, ring, rhd, tree", src, algo);
    return DDPC_OK;
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
    pthread_cond_init(&c->cv, NULL);
    pthread_mutex_init(&c->err_mu, NULL);
    if (!c->peers || !c->p2p_sent || !c->p2p_recvd || c->abort_fd < 0) {
        free(c->peers);
        free(c->p2p_sent);
        free(c->p2p_recvd);
        if (c->abort_fd >= 0) close(c->abort_fd);
        free(c);
        return NULL;
    }
    /* every peer starts on TCP; same-host peers may move to shared memory
     * at the end of the bootstrap (setup_shm) */
    for (int i = 0; i < size; i++) c->peers[i].tp = &ddpc_transport_tcp;
    return c;
}

/* Frees c without any goodbye (bootstrap failures, and the end of destroy). */
static void comm_free(ddpc_comm *c) {
    if (!c) return;
    for (int i = 0; i < c->size; i++)
        if (c->peers[i].conn) c->peers[i].tp->close(c->peers[i].conn);
    free(c->peers);
    free(c->p2p_sent);
    free(c->p2p_recvd);
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
    return ddpc_err(s, "%s", keep);
}

/* Whether this rank and peer p move to shared memory: same host, both
 * DDPC_SHM=1, the same DDPC_SHM_BYTES (from the published entries, so both
 * ends decide alike). Warns, once per pair, where the settings differ. */
static int shm_pair(const ddpc_comm *c, int p) {
    const ddpc_peer *pe = &c->peers[p];
    if (p == c->rank || strcmp(pe->host, c->peers[c->rank].host) != 0) return 0;
    if (!c->shm || !pe->shm) {
        if (c->shm)
            DDPC_WARN(SHM, "rank %d: rank %d on this host has DDPC_SHM=0 (this rank: 1); using TCP to it",
                      c->rank, p);
        return 0;
    }
    if (pe->shm_bytes != c->shm_bytes) {
        DDPC_WARN(SHM, "rank %d: rank %d on this host has DDPC_SHM_BYTES=%ld, this rank %ld; using TCP "
                  "to it (set the same value on every rank)", c->rank, p, pe->shm_bytes, c->shm_bytes);
        return 0;
    }
    return 1;
}

/* Step 5's upgrade of same-host connections to shared memory, in three
 * rounds so that no rank waits on one that waits on it: offers to higher
 * ranks (small writes that never block), then answers to the lower ranks'
 * offers, then the answers to this rank's own offers. */
static ddpc_status setup_shm(ddpc_comm *c, double deadline) {
    if (!c->shm || c->local_size < 2) return DDPC_OK;
    ddpc_shm_pending **pend = calloc((size_t)c->size, sizeof *pend);
    char *use = calloc((size_t)c->size, 1);
    if (!pend || !use) {
        free(pend);
        free(use);
        return ddpc_err(DDPC_ERR_NOMEM, "out of memory");
    }
    for (int p = 0; p < c->size; p++) use[p] = (char)shm_pair(c, p);
    ddpc_status s = DDPC_OK;
    int p = -1; /* the peer being set up */
    for (int round = 0; round < 3 && s == DDPC_OK; round++) {
        int lo = round == 1 ? 0 : c->rank + 1, hi = round == 1 ? c->rank : c->size;
        for (p = lo; p < hi && s == DDPC_OK; p++) {
            if (!use[p]) continue;
            ddpc_peer *pe = &c->peers[p];
            ddpc_conn *sc = NULL;
            char who[32];
            snprintf(who, sizeof who, "rank %d", p);
            if (round == 0) {
                s = ddpc_shm_offer(pe->conn, who, (size_t)c->shm_bytes, deadline, c->abort_fd, &pend[p]);
            } else if (round == 1) {
                s = ddpc_shm_join(pe->conn, who, (size_t)c->shm_bytes, deadline, c->abort_fd, &sc);
            } else {
                s = ddpc_shm_finish(pend[p], pe->conn, who, deadline, c->abort_fd, &sc);
                pend[p] = NULL;
            }
            if (s != DDPC_OK) break;
            if (sc) { /* sc has its own copy of the socket */
                ddpc_shm_set_copy_policy(sc, c->shm_copy);
                pe->tp->close(pe->conn);
                pe->conn = sc;
                pe->tp = &ddpc_transport_shm;
            }
        }
    }
    if (s != DDPC_OK)
        s = ddpc_err_wrap(s, "rank %d: setting up shared memory with rank %d", c->rank, p);
    for (int q = 0; q < c->size; q++) ddpc_shm_pending_free(pend[q]);
    free(pend);
    free(use);
    return s;
}

/* Appends "a-b" or "a" for the run [a, b] to buf. */
static void append_run(char *buf, size_t len, size_t *used, int a, int b) {
    int n = a == b ? snprintf(buf + *used, len - *used, "%s%d", *used ? "," : "", a)
                   : snprintf(buf + *used, len - *used, "%s%d-%d", *used ? "," : "", a, b);
    if (n > 0 && (size_t)n < len - *used) *used += (size_t)n;
}

/* Logs, at INFO, which transport each peer uses:
 * "rank 0: shm to ranks 1-3; tcp to ranks 4,5". */
static void log_transports(const ddpc_comm *c) {
    if (!ddpc_log_enabled(DDPC_LOG_INFO, DDPC_SUB_INIT) || c->size < 2) return;
    static const ddpc_transport *const tps[2] = {&ddpc_transport_shm, &ddpc_transport_tcp};
    char line[1024];
    int used = snprintf(line, sizeof line, "rank %d:", c->rank), parts = 0;
    for (int t = 0; t < 2; t++) {
        char list[900];
        size_t lu = 0;
        int start = -1;
        for (int r = 0; r <= c->size; r++) {
            int in = r < c->size && r != c->rank && c->peers[r].tp == tps[t];
            if (in && start < 0) start = r;
            if (!in && start >= 0) {
                append_run(list, sizeof list, &lu, start, r - 1);
                start = -1;
            }
        }
        if (!lu) continue;
        int n = snprintf(line + used, sizeof line - (size_t)used, "%s %s to ranks %s", parts++ ? ";" : "",
                         tps[t]->name, list);
        if (n > 0 && (size_t)n < sizeof line - (size_t)used) used += n;
    }
    DDPC_INFO(INIT, "%s", line);
}

const char *ddpc__peer_transport(const ddpc_comm *c, int peer) {
    if (!c || peer < 0 || peer >= c->size) return NULL;
    if (peer == c->rank) return "self";
    return c->peers[peer].tp->name;
}

/* Steps 2–5 of the bootstrap (see the top of the file), before deadline.
 * st is the communicator's prefixed view of the store (borrowed).
 * *store_gone = 1 when it failed because the store's connection was lost
 * before any peer was connected (the caller may reconnect and retry). */
static ddpc_status bootstrap(ddpc_comm *c, ddpc_store *st, double deadline, int *store_gone) {
    const ddpc_transport *tp = &ddpc_transport_tcp;
    *store_gone = 0;
    ddpc_listener *lis = NULL;
    char myhost[128], val[512];
    ddpc_status s = DDPC_OK;
    long base_port;
    host_id(myhost, sizeof myhost);
    snprintf(c->peers[c->rank].host, sizeof c->peers[c->rank].host, "%s", myhost);
    DDPC_CHECK(ddpc_env_long("DDPC_IF_BASE_PORT", 0, 65535, &base_port));

    int port = 0;
    if (c->size > 1) {
        s = tp->listen(c->ip, (int)base_port, &lis, &port);
        if (s != DDPC_OK) return ddpc_err_wrap(s, "rank %d: cannot listen for peers on %s", c->rank, c->ip);
    }
    /* 3. publish and read everyone's entry */
    snprintf(val, sizeof val, "v2 %d %d %s %s %d %ld", c->size, port, c->ip, myhost, c->shm,
             c->shm_bytes);
    char key[64];
    snprintf(key, sizeof key, "peer/%d", c->rank);
    void *actual = NULL;
    size_t alen = 0;
    s = ddpc_store_compare_set(st, key, NULL, 0, val, strlen(val), &actual, &alen);
    if (s == DDPC_OK && (alen != strlen(val) || memcmp(actual, val, alen) != 0))
        s = ddpc_err(DDPC_ERR_ENV, "RANK=%d is already taken by another process (%.*s)", c->rank,
                     (int)alen, (char *)actual);
    free(actual);
    if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
    if (s != DDPC_OK) goto fail;

    const char **keys = NULL;
    char *keybuf = malloc((size_t)c->size * 24);
    keys = malloc(sizeof *keys * (size_t)c->size);
    if (!keys || !keybuf) {
        free(keybuf);
        free(keys);
        s = ddpc_err(DDPC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int r = 0; r < c->size; r++) {
        snprintf(keybuf + r * 24, 24, "peer/%d", r);
        keys[r] = keybuf + r * 24;
    }
    /* wait in short rounds, so that the ranks still missing are known even
     * if the store's host gives up first */
    {
        int nmiss = c->size;
        const char **miss = malloc(sizeof *miss * (size_t)c->size);
        if (!miss) {
            free(keybuf);
            free(keys);
            s = ddpc_err(DDPC_ERR_NOMEM, "out of memory");
            goto fail;
        }
        memcpy(miss, keys, sizeof *miss * (size_t)c->size);
        for (;;) {
            int k = 0;
            for (int i = 0; i < nmiss && s == DDPC_OK; i++) {
                int ex = 0;
                s = ddpc_store_check(st, miss[i], &ex);
                if (!ex) miss[k++] = miss[i];
            }
            if (s == DDPC_OK) nmiss = k;
            if (s != DDPC_OK || nmiss == 0 || ddpc_expired(deadline)) break;
            double left = deadline - ddpc_now();
            ddpc_status w = ddpc_store_wait(st, miss, nmiss, left < 0.25 ? (left > 0.001 ? left : 0.001) : 0.25);
            if (w != DDPC_OK && w != DDPC_ERR_TIMEOUT) s = w;
        }
        if (nmiss > 0) {
            char list[256] = "", why[512] = "";
            size_t used = 0;
            for (int i = 0; i < nmiss && i < 32; i++) {
                int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", miss[i] + 5);
                if (n > 0 && (size_t)n < sizeof list - used) used += (size_t)n;
            }
            if (nmiss > 32) snprintf(list + used, sizeof list - used, " and %d more", nmiss - 32);
            if (s != DDPC_OK) snprintf(why, sizeof why, " (then the store went away: %s)", ddpc_last_error());
            if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
            s = ddpc_err(DDPC_ERR_TIMEOUT, "rank %d: ranks %s of %d never arrived within DDPC_CONNECT_TIMEOUT=%g s%s",
                         c->rank, list, c->size, c->connect_timeout, why);
        }
        free(miss);
    }
    for (int r = 0; r < c->size && s == DDPC_OK; r++) {
        void *v = NULL;
        size_t vl = 0;
        s = ddpc_store_get(st, keys[r], 1.0, &v, &vl);
        if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
        if (s != DDPC_OK) break;
        char txt[512];
        snprintf(txt, sizeof txt, "%.*s", (int)vl, (char *)v);
        free(v);
        ddpc_peer *pe = &c->peers[r];
        int psize = 0;
        if (sscanf(txt, "v2 %d %d %63s %127s %d %ld", &psize, &pe->port, pe->ip, pe->host, &pe->shm,
                   &pe->shm_bytes) != 6)
            s = ddpc_err(DDPC_ERR_PROTOCOL, "rank %d published a malformed entry '%s'", r, txt);
        else if (psize != c->size)
            s = ddpc_err(DDPC_ERR_ENV, "rank %d has WORLD_SIZE=%d but rank %d has WORLD_SIZE=%d", r,
                         psize, c->rank, c->size);
    }
    free(keybuf);
    free(keys);
    if (s != DDPC_OK) goto fail;

    /* 4. connect down, accept up; the hello's id: this store and key space,
     * and rank 0's listening address (unique among live communicators) */
    uint64_t uid = fnv1a(c->prefix) ^ ((uint64_t)c->store_port << 48) ^ fnv1a(c->store_host) ^
                   (fnv1a(c->peers[0].ip) * 31 + (uint64_t)c->peers[0].port);
    for (int r = 0; r < c->rank; r++) {
        ddpc_peer *pe = &c->peers[r];
        s = tp->connect(pe->ip, pe->port, deadline, &pe->conn);
        if (s != DDPC_OK) {
            s = ddpc_err_wrap(s, "rank %d: connecting to rank %d at %s:%d", c->rank, r, pe->ip, pe->port);
            goto fail;
        }
        hello h = {HELLO_MAGIC, HELLO_VERSION, uid, c->rank, c->size};
        s = tp->send_full(pe->conn, &h, sizeof h, deadline, c->abort_fd);
        if (s != DDPC_OK) {
            s = ddpc_err_wrap(s, "rank %d: greeting rank %d", c->rank, r);
            goto fail;
        }
    }
    for (int k = c->rank + 1; k < c->size; k++) {
        ddpc_conn *conn = NULL;
        s = tp->accept(lis, deadline, c->abort_fd, &conn);
        if (s != DDPC_OK) {
            char miss[256] = "";
            size_t used = 0;
            for (int r = c->rank + 1; r < c->size; r++)
                if (!c->peers[r].conn) {
                    int n = snprintf(miss + used, sizeof miss - used, "%s%d", used ? ", " : "", r);
                    if (n > 0 && (size_t)n < sizeof miss - used) used += (size_t)n;
                }
            s = ddpc_err(s == DDPC_ERR_TIMEOUT ? DDPC_ERR_TIMEOUT : s,
                         "rank %d: ranks %s never connected within DDPC_CONNECT_TIMEOUT=%g s", c->rank,
                         miss, c->connect_timeout);
            goto fail;
        }
        hello h;
        s = tp->recv_full(conn, &h, sizeof h, deadline, c->abort_fd);
        if (s == DDPC_OK && (h.magic != HELLO_MAGIC || h.version != HELLO_VERSION || h.uid != uid ||
                             h.rank <= c->rank || h.rank >= c->size || c->peers[h.rank].conn))
            s = ddpc_err(DDPC_ERR_PROTOCOL,
                         "rank %d: unexpected hello (magic 0x%x version %u rank %d) on the data port",
                         c->rank, h.magic, h.version, h.rank);
        if (s != DDPC_OK) {
            tp->close(conn);
            goto fail;
        }
        c->peers[h.rank].conn = conn;
    }
    tp->close_listener(lis);
    lis = NULL;

    /* 5. topology, shared memory */
    c->local_rank = 0;
    c->local_size = 0;
    for (int r = 0; r < c->size; r++) {
        if (strcmp(c->peers[r].host, myhost) != 0) continue;
        if (r < c->rank) c->local_rank++;
        c->local_size++;
    }
    choose_spin(c);
    s = setup_shm(c, deadline);
    if (s != DDPC_OK) return s;
    DDPC_INFO(INIT, "rank %d of %d ready: local rank %d of %d, listening on %s:%d (%s)", c->rank,
              c->size, c->local_rank, c->local_size, c->ip, port, c->ifname[0] ? c->ifname : "?");
    log_transports(c);
    return DDPC_OK;
fail:
    tp->close_listener(lis);
    return s;
}

/*
 * Creates a communicator whose store is at host:port. host_store: rank 0
 * starts the server there (unless srv is given, which is then shared).
 * who names the variables the address came from, for error texts.
 */
static ddpc_status comm_create(int rank, int size, const char *host, int port, int host_store,
                               ddpc_srv_ref *srv, const char *prefix, const char *who,
                               ddpc_comm **out) {
    *out = NULL;
    ddpc_comm *c = comm_alloc(rank, size);
    if (!c) return ddpc_err(DDPC_ERR_NOMEM, "out of memory for a communicator of %d ranks", size);
    ddpc_status s = read_settings(c);
    ddpc_store *root = NULL, *st = NULL;
    if (s != DDPC_OK) goto fail;
    snprintf(c->store_host, sizeof c->store_host, "%s", host);
    c->store_port = port;
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    ddpc_log_set_rank(rank);
    ddpc_env_log_effective(DDPC_SUB_ENV);
    if (srv) {
        __atomic_add_fetch(&srv->refs, 1, __ATOMIC_ACQ_REL);
        c->srv = srv;
    } else if (host_store && rank == 0) {
        ddpc_store_server *server = NULL;
        s = ddpc_store_server_start(host, port, &server);
        if (s != DDPC_OK) {
            s = ddpc_err(DDPC_ERR_ENV, "%s: rank 0 cannot host the store there: %s", who, ddpc_last_error());
            goto fail;
        }
        c->srv = srv_wrap(server);
        if (!c->srv) {
            ddpc_store_server_stop(server);
            s = ddpc_err(DDPC_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    s = ddpc__choose_ip(host, c->ip, sizeof c->ip, c->ifname, sizeof c->ifname);
    if (s != DDPC_OK) goto fail;
    double deadline = ddpc_deadline_in(c->connect_timeout);
    char first_err[1024] = "";
    for (int attempt = 0;; attempt++) {
        double left = deadline - ddpc_now();
        s = ddpc_store_connect(host, port, left > 0.001 ? left : 0.001, &root);
        /* reset during the handshake: a store closing down (see below) */
        for (int k = 0; s == DDPC_ERR_PEER_LOST && !c->srv && k < 100 && !ddpc_expired(deadline); k++) {
            ddpc_sleep(0.02);
            left = deadline - ddpc_now();
            s = ddpc_store_connect(host, port, left > 0.001 ? left : 0.001, &root);
        }
        if (s != DDPC_OK) {
            if (first_err[0]) { /* the retry found no store: report the first failure */
                s = ddpc_err(DDPC_ERR_TIMEOUT, "%s", first_err);
                goto fail;
            }
            s = ddpc_err(s == DDPC_ERR_TIMEOUT ? DDPC_ERR_TIMEOUT : s,
                         "rank %d: cannot reach the store at %s within DDPC_CONNECT_TIMEOUT=%g s: %s", rank,
                         who, c->connect_timeout, ddpc_last_error());
            goto fail;
        }
        s = ddpc_store_prefixed(root, prefix, &st);
        if (s != DDPC_OK) goto fail;
        int store_gone = 0;
        s = bootstrap(c, st, deadline, &store_gone);
        if (s == DDPC_OK) break;
        /* a store that vanished under a rank that does not host it: most
         * likely rank 0's previous communicator's, about to be replaced by
         * the next one on the same port. Reconnect while time remains. */
        if (!store_gone || c->srv || attempt >= 20 || ddpc_expired(deadline)) goto fail;
        if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", ddpc_last_error());
        DDPC_INFO(INIT, "rank %d: lost the store during bootstrap (%s); reconnecting", rank, ddpc_last_error());
        ddpc_store_close(st);
        ddpc_store_close(root);
        st = root = NULL;
        ddpc_sleep(0.05);
    }
    ddpc_store_close(st);
    ddpc_store_close(root);
    *out = c;
    return DDPC_OK;
fail:
    ddpc_store_close(st);
    ddpc_store_close(root);
    return comm_abandon(c, s);
}

/*
 * Creates a communicator that meets its peers through st, the caller's
 * store, under prefix. opt (may be NULL) overrides the environment's
 * timeouts. The address to listen on routes to MASTER_ADDR when it is set
 * (else loopback), unless DDPC_IF_IP / DDPC_SOCKET_IFNAME choose it.
 */
static ddpc_status comm_create_store(int rank, int size, ddpc_store *st, const char *prefix,
                                     const ddpc_comm_options *opt, ddpc_comm **out) {
    *out = NULL;
    ddpc_comm *c = comm_alloc(rank, size);
    if (!c) return ddpc_err(DDPC_ERR_NOMEM, "out of memory for a communicator of %d ranks", size);
    ddpc_store *view = NULL;
    ddpc_status s = read_settings(c);
    if (s != DDPC_OK) goto fail;
    if (opt && opt->connect_timeout_s > 0) c->connect_timeout = opt->connect_timeout_s;
    if (opt && opt->exec_timeout_s >= 0) c->exec_timeout = opt->exec_timeout_s;
    if (opt && opt->progress_thread == 0) c->no_thread = 1;
    snprintf(c->store_host, sizeof c->store_host, "%s", ddpc_store_addr(st));
    snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
    c->ext_store = st;
    ddpc_log_set_rank(rank);
    ddpc_env_log_effective(DDPC_SUB_ENV);
    const char *route = ddpc_env_isset("MASTER_ADDR") ? getenv("MASTER_ADDR") : "127.0.0.1";
    s = ddpc__choose_ip(route, c->ip, sizeof c->ip, c->ifname, sizeof c->ifname);
    if (s != DDPC_OK) goto fail;
    s = ddpc_store_prefixed(st, prefix, &view);
    if (s != DDPC_OK) goto fail;
    int store_gone = 0;
    s = bootstrap(c, view, ddpc_deadline_in(c->connect_timeout), &store_gone);
    if (s != DDPC_OK) goto fail;
    ddpc_store_close(view);
    *out = c;
    return DDPC_OK;
fail:
    ddpc_store_close(view);
    return comm_abandon(c, s);
}

/* ------------------------------------------------------------ creation */

ddpc_comm_options ddpc_comm_options_default(void) {
    ddpc_comm_options o = {.connect_timeout_s = -1, .exec_timeout_s = -1, .progress_thread = -1};
    return o;
}

/* The job's rank and size from torchrun's, OpenMPI's or Slurm's variables. */
static ddpc_status job_rank(long *rank, long *size, int *fallback) {
    static const char *const sets[3][2] = {
        {"RANK", "WORLD_SIZE"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        {"SLURM_PROCID", "SLURM_NTASKS"},
    };
    for (int i = 0; i < 3; i++) {
        if (!ddpc_env_isset(sets[i][0])) continue;
        if (!ddpc_env_isset(sets[i][1]))
            return ddpc_err(DDPC_ERR_ENV, "%s is not set (%s=%s is)", sets[i][1], sets[i][0],
                            ddpc_env_str(sets[i][0], NULL));
        DDPC_CHECK(ddpc_env_long(sets[i][1], 1, 1 << 20, size));
        const char *rv = ddpc_env_str(sets[i][0], NULL);
        if (ddpc_parse_long(sets[i][0], rv, 0, 1 << 20, rank) != DDPC_OK)
            return ddpc_err(DDPC_ERR_ENV, "%s='%s' is not a non-negative integer", sets[i][0], rv);
        if (*rank >= *size)
            return ddpc_err(DDPC_ERR_ENV, "%s=%ld is not below %s=%ld", sets[i][0], *rank, sets[i][1],
                            *size);
        *fallback = i;
        ddpc_log_set_rank((int)*rank);
        DDPC_INFO(INIT, "rank %ld of %ld (from %s and %s)", *rank, *size, sets[i][0], sets[i][1]);
        return DDPC_OK;
    }
    return ddpc_err(DDPC_ERR_ENV,
                    "RANK is not set (nor OMPI_COMM_WORLD_RANK or SLURM_PROCID): start the program "
                    "with ddpc-run, torchrun, mpirun or srun, or set RANK and WORLD_SIZE");
}

ddpc_status ddpc_comm_init_env(ddpc_comm **out) {
    if (!out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_comm_init_env: out is NULL");
    *out = NULL;
    long rank, size, port, restart;
    int which = 0;
    DDPC_CHECK(job_rank(&rank, &size, &which));
    if (which == 0 && ddpc_env_isset("LOCAL_RANK")) {
        long lr, lws = size;
        if (ddpc_env_isset("LOCAL_WORLD_SIZE")) DDPC_CHECK(ddpc_env_long("LOCAL_WORLD_SIZE", 1, size, &lws));
        DDPC_CHECK(ddpc_env_long("LOCAL_RANK", 0, lws - 1, &lr));
    }
    char prefix[256], who[512];
    int k = __atomic_fetch_add(&init_counter, 1, __ATOMIC_RELAXED);
    const char *src;
    const char *host = ddpc_env_str("MASTER_ADDR", &src);
    if (!host || !*host) return ddpc_err(DDPC_ERR_ENV, "MASTER_ADDR is empty");
    DDPC_CHECK(ddpc_env_long("MASTER_PORT", 1, 65535, &port));
    snprintf(who, sizeof who, "MASTER_ADDR=%s MASTER_PORT=%ld", host, port);
    /* torchrun's contract: its agent (or ddpc-run) hosts the store there,
     * and each restart is a new attempt whose keys must not meet the last's */
    const char *agent = ddpc_env_str("TORCHELASTIC_USE_AGENT_STORE", NULL);
    if (agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1"))) {
        DDPC_CHECK(ddpc_env_long("TORCHELASTIC_RESTART_COUNT", 0, 1L << 30, &restart));
        snprintf(prefix, sizeof prefix, "ddpc/attempt_%ld/comm%d/", restart, k);
        DDPC_INFO(INIT, "store: %s (the launcher's agent store), keys under ddpc/attempt_%ld/", who, restart);
        return comm_create((int)rank, (int)size, host, (int)port, 0, NULL, prefix, who, out);
    }
    snprintf(prefix, sizeof prefix, "ddpc/comm%d/", k);
    DDPC_INFO(INIT, "store: %s (MASTER_ADDR from %s; rank 0 hosts it)", who, src);
    return comm_create((int)rank, (int)size, host, (int)port, 1, NULL, prefix, who, out);
}

/* Splits "tcp://host:port" or "tcp://[v6]:port". */
static ddpc_status parse_url(const char *url, char *host, size_t hlen, int *port) {
    if (!url || strncmp(url, "tcp://", 6) != 0)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "URL '%s' does not start with tcp://", url ? url : "(null)");
    const char *h = url + 6, *colon;
    size_t n;
    if (*h == '[') {
        const char *close_b = strchr(h, ']');
        if (!close_b || close_b[1] != ':')
            return ddpc_err(DDPC_ERR_INVALID_ARG, "URL '%s' is not tcp://[address]:port", url);
        n = (size_t)(close_b - h - 1);
        h++;
        colon = close_b + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon) return ddpc_err(DDPC_ERR_INVALID_ARG, "URL '%s' has no :port", url);
        n = (size_t)(colon - h);
    }
    if (n == 0 || n >= hlen) return ddpc_err(DDPC_ERR_INVALID_ARG, "URL '%s' has no host", url);
    memcpy(host, h, n);
    host[n] = '\0';
    long p;
    if (ddpc_parse_long("port", colon + 1, 1, 65535, &p) != DDPC_OK)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "URL '%s' has a bad port '%s'", url, colon + 1);
    *port = (int)p;
    return DDPC_OK;
}

static ddpc_status check_rank_size(int rank, int size) {
    if (size < 1) return ddpc_err(DDPC_ERR_INVALID_ARG, "size=%d must be at least 1", size);
    if (rank < 0 || rank >= size)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "rank=%d is not in [0, %d)", rank, size);
    return DDPC_OK;
}

ddpc_status ddpc_comm_init_url(ddpc_comm **out, const char *url, int rank, int size) {
    if (!out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_comm_init_url: out is NULL");
    *out = NULL;
    DDPC_CHECK(check_rank_size(rank, size));
    char host[256], prefix[64], who[320];
    int port = 0;
    DDPC_CHECK(parse_url(url, host, sizeof host, &port));
    int k = __atomic_fetch_add(&init_counter, 1, __ATOMIC_RELAXED);
    snprintf(prefix, sizeof prefix, "ddpc/url%d/", k);
    snprintf(who, sizeof who, "%s", url);
    return comm_create(rank, size, host, port, 1, NULL, prefix, who, out);
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

ddpc_status ddpc_comm_init_store(ddpc_comm **out, ddpc_store *st, int rank, int size,
                                 const ddpc_comm_options *opt) {
    if (!out || !st)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_comm_init_store: out and st must be non-NULL");
    *out = NULL;
    DDPC_CHECK(check_rank_size(rank, size));
    return comm_create_store(rank, size, st, "", opt, out);
}

ddpc_status ddpc_get_unique_id(ddpc_unique_id *out) {
    _Static_assert(sizeof(uid_body) <= sizeof(((ddpc_unique_id *)0)->internal), "unique id too big");
    if (!out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_get_unique_id: out is NULL");
    memset(out, 0, sizeof *out);
    char ip[64], ifname[64];
    const char *master = ddpc_env_str("MASTER_ADDR", NULL);
    DDPC_CHECK(ddpc__choose_ip(master ? master : "127.0.0.1", ip, sizeof ip, ifname, sizeof ifname));
    ddpc_store_server *srv = NULL;
    DDPC_CHECK(ddpc_store_server_start(ip, 0, &srv));
    uid_body b;
    memset(&b, 0, sizeof b);
    b.magic = UID_MAGIC;
    b.port = ddpc_store_server_port(srv);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b.nonce = fnv1a(ip) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
    snprintf(b.host, sizeof b.host, "%s", ip);
    pthread_mutex_lock(&uid_mu);
    int slot = -1;
    for (int i = 0; i < 16; i++)
        if (!uid_servers[i].server) {
            slot = i;
            break;
        }
    if (slot >= 0) uid_servers[slot] = (struct uid_server){b.nonce, srv};
    pthread_mutex_unlock(&uid_mu);
    if (slot < 0) {
        ddpc_store_server_stop(srv);
        return ddpc_err(DDPC_ERR_INVALID_ARG,
                        "ddpc_get_unique_id: 16 ids are already waiting for ddpc_comm_init_rank");
    }
    memcpy(out->internal, &b, sizeof b);
    return DDPC_OK;
}

ddpc_status ddpc_comm_init_rank(ddpc_comm **out, int size, const ddpc_unique_id *id, int rank) {
    if (!out || !id) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_comm_init_rank: out and id must be non-NULL");
    *out = NULL;
    DDPC_CHECK(check_rank_size(rank, size));
    uid_body b;
    memcpy(&b, id->internal, sizeof b);
    b.host[sizeof b.host - 1] = '\0';
    if (b.magic != UID_MAGIC || b.port <= 0 || b.port > 65535)
        return ddpc_err(DDPC_ERR_INVALID_ARG, "the unique id was not made by ddpc_get_unique_id");
    ddpc_srv_ref *srv = NULL;
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
    ddpc_status s = comm_create(rank, size, b.host, b.port, 0, srv, prefix, who, out);
    srv_release(srv); /* the communicator holds its own reference */
    return s;
}

/* ------------------------------------------------------------ queries */

int ddpc_comm_rank(const ddpc_comm *c) { return c ? c->rank : -1; }
int ddpc_comm_size(const ddpc_comm *c) { return c ? c->size : 0; }
int ddpc_comm_local_rank(const ddpc_comm *c) { return c ? c->local_rank : -1; }
int ddpc_comm_local_size(const ddpc_comm *c) { return c ? c->local_size : 0; }

const char *ddpc_comm_last_error(const ddpc_comm *c) { return c ? c->last_err : ""; }

/* ------------------------------------------------------------ execution */

static int is_collective(ddpc_kind k) { return k != DDPC_K_SEND && k != DDPC_K_RECV; }
static int is_reducing(ddpc_kind k) {
    return k == DDPC_K_ALLREDUCE || k == DDPC_K_REDUCE || k == DDPC_K_REDUCE_SCATTER;
}
static int is_rooted(ddpc_kind k) {
    return k == DDPC_K_BROADCAST || k == DDPC_K_REDUCE || k == DDPC_K_GATHER || k == DDPC_K_SCATTER;
}

/* Runs one operation on this thread: fingerprint, deadline, algorithm. */
/* Readies e to execute a on c: fingerprint, sequence number, deadline.
 * Fails when c was aborted or failed earlier. */
static ddpc_status exec_init(ddpc_comm *c, const ddpc_args *a, ddpc_exec *e) {
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return ddpc_err(DDPC_ERR_ABORTED, "rank %d: the communicator was aborted (ddpc_comm_abort)", c->rank);
    if (c->failed != DDPC_OK) {
        char msg[1024];
        pthread_mutex_lock(&c->err_mu);
        snprintf(msg, sizeof msg, "%s", c->last_err);
        pthread_mutex_unlock(&c->err_mu);
        return ddpc_err(c->failed, "the communicator failed earlier: %s", msg);
    }
    memset(e, 0, sizeof *e);
    e->c = c;
    e->a = *a;
    e->fp.magic = DDPC_MSG_MAGIC;
    e->fp.kind = (uint8_t)(a->kind == DDPC_K_RECV ? DDPC_K_SEND : a->kind);
    e->fp.dtype = a->kind == DDPC_K_BARRIER ? 0 : (uint8_t)a->dtype;
    e->fp.op = is_reducing(a->kind) ? (uint8_t)a->op : 0;
    e->fp.root = is_rooted(a->kind) ? a->root : -1;
    e->fp.count = a->count;
    e->fp.seq = is_collective(a->kind) ? c->seq++ : 0;
    e->deadline = ddpc_deadline_in(c->exec_timeout);
    e->lost = -1;
    e->culprit = -1;
    if (ddpc_log_enabled(DDPC_LOG_TRACE, DDPC_SUB_COLL)) {
        char d[160];
        ddpc__describe(&e->fp, d, sizeof d);
        DDPC_TRACE(COLL, "%s #%" PRIu64 " start", d, e->fp.seq);
    }
    return DDPC_OK;
}

static ddpc_status execute(ddpc_comm *c, const ddpc_args *a) {
    ddpc_exec e;
    DDPC_CHECK(exec_init(c, a, &e));
    return a->run(&e);
}

static void work_release(struct ddpc_work *w) {
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w->a.vec);
        free(w);
    }
}

static void work_complete(struct ddpc_work *w, ddpc_status st) {
    pthread_mutex_lock(&w->mu);
    w->st = st;
    if (st != DDPC_OK) snprintf(w->err, sizeof w->err, "%s", ddpc_last_error());
    __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    work_release(w);
}

static int is_p2p(ddpc_kind k) { return k == DDPC_K_SEND || k == DDPC_K_RECV; }

/* The rank whose next message to this one is the point-to-point message
 * due next from it, for a receive from DDPC_ANY_SOURCE (its header is read
 * without being taken); -1 when none has arrived yet. Ranks with a receive
 * already posted are passed over: their next message is that one's. */
static int any_source(ddpc_comm *c, const ddpc_args *a) {
    for (int k = 1; k < c->size; k++) {
        int p = (c->rank + k) % c->size;
        ddpc_peer *pe = &c->peers[p];
        ddpc_hdr h;
        size_t got = 0;
        int eof = 0;
        if (pe->rq || !pe->conn || pe->tp->peek(pe->conn, &h, sizeof h, &got, &eof) != DDPC_OK) continue;
        if (got >= sizeof h && h.magic == DDPC_MSG_MAGIC && h.kind == DDPC_K_SEND && h.flags == DDPC_F_DATA &&
            h.seq == c->p2p_recvd[p])
            return p;
    }
    return -1;
}

/* One queued send or receive of a batch (run_p2p). */
typedef struct p2p_item {
    struct ddpc_work *w;
    ddpc_exec e;
    ddpc_req q;
    int posted, done;
} p2p_item;

/* Runs the point-to-point operations at the head of the queue together, and
 * takes in those queued behind them while they run: every send and receive
 * of the batch is posted at once and progresses together, so two ranks that
 * each send the other a large message before receiving (torch's
 * batch_isend_irecv, isend then irecv) do not wait on each other forever.
 * Per pair, messages still match in the order issued. c->mu is held on
 * entry and on return; the head is a send or receive; nothing executes. */
static void run_p2p(ddpc_comm *c) {
    p2p_item *b = NULL;
    size_t n = 0, cap = 0, left = 0;
    c->busy = 1;
    for (;;) {
        size_t first_new = n;
        while (c->qhead && is_p2p(c->qhead->a.kind)) {
            if (n == cap) {
                size_t nc = cap ? 2 * cap : 16;
                p2p_item *nb = realloc(b, sizeof *b * nc);
                if (!nb) break; /* run what is taken; the rest waits its turn */
                b = nb;
                cap = nc;
            }
            struct ddpc_work *w = c->qhead;
            c->qhead = w->next;
            if (!c->qhead) c->qtail = NULL;
            w->started = 1;
            memset(&b[n], 0, sizeof b[n]);
            b[n++].w = w;
            left++;
        }
        pthread_mutex_unlock(&c->mu);
        for (size_t i = first_new; i < n; i++) { /* ready the new ones */
            p2p_item *it = &b[i];
            ddpc_status s = exec_init(c, &it->w->a, &it->e);
            if (s != DDPC_OK || it->w->a.count == 0) {
                it->done = 1;
                left--;
                work_complete(it->w, s);
            }
            it->e.nap = 0.001;
        }
        int hold_recv = 0; /* behind a receive from any source still choosing */
        for (size_t i = 0; i < n; i++) { /* post, in order */
            p2p_item *it = &b[i];
            ddpc_args *a = &it->w->a;
            if (it->done || it->posted || (a->kind == DDPC_K_RECV && hold_recv)) continue;
            if (a->kind == DDPC_K_RECV && a->root == DDPC_ANY_SOURCE && (a->root = any_source(c, a)) < 0) {
                hold_recv = 1;
                continue;
            }
            size_t nb = a->count * ddpc_dtype_size(a->dtype);
            if (a->kind == DDPC_K_SEND) {
                it->e.fp.seq = c->p2p_sent[a->root]++;
                ddpc__post_send(&it->e, &it->q, a->root, a->send, nb);
            } else {
                it->e.fp.seq = c->p2p_recvd[a->root]++;
                ddpc__post_recv(&it->e, &it->q, a->root, a->recv, nb);
            }
            it->posted = 1;
        }
        if (left) { /* progress through the oldest pending one (its deadline) */
            p2p_item *drv = NULL;
            for (size_t i = 0; i < n && !drv; i++)
                if (!b[i].done) drv = &b[i];
            ddpc_status s = ddpc__progress(&drv->e, 1);
            for (size_t i = 0; i < n; i++) {
                p2p_item *it = &b[i];
                if (it->done || (s == DDPC_OK && !(it->posted && it->q.done))) continue;
                it->done = 1;
                left--;
                work_complete(it->w, s);
            }
        }
        pthread_mutex_lock(&c->mu);
        if (!left && !(c->qhead && is_p2p(c->qhead->a.kind))) break;
    }
    free(b);
    c->busy = 0;
    pthread_cond_broadcast(&c->cv);
}

/* Takes the queue's head and runs it on this thread; c->mu is held on entry
 * and on return, and no operation is executing. */
static void run_head(ddpc_comm *c) {
    if (is_p2p(c->qhead->a.kind)) {
        run_p2p(c);
        return;
    }
    struct ddpc_work *w = c->qhead;
    c->qhead = w->next;
    if (!c->qhead) c->qtail = NULL;
    w->started = 1;
    c->busy = 1;
    pthread_mutex_unlock(&c->mu);
    ddpc_status st = execute(c, &w->a);
    work_complete(w, st);
    pthread_mutex_lock(&c->mu);
    c->busy = 0;
    pthread_cond_broadcast(&c->cv);
}

/* The progress thread: runs queued operations in order until stopped and
 * the queue is empty. */
static void *worker(void *arg) {
    ddpc_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (!c->qhead || c->busy) {
            if (c->stop && !c->qhead) break;
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        run_head(c);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* A thread that waits for w without a limit of its own runs the queue up to
 * w itself when no operation is executing, instead of sleeping while the
 * progress thread wakes to do it: the last bucket of a DDP step costs two
 * thread hand-offs less. Order is kept (only the head runs, one at a time). */
static void run_inline(struct ddpc_work *w) {
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (done) return; /* w->c may be gone once w is done */
    ddpc_comm *c = w->c;
    pthread_mutex_lock(&c->mu);
    while (!w->started && !c->busy && c->qhead) run_head(c);
    pthread_mutex_unlock(&c->mu);
}

ddpc_status ddpc__submit(ddpc_comm *c, const ddpc_args *a, struct ddpc_work **wout) {
    pthread_mutex_lock(&c->mu);
    if (c->stop) {
        pthread_mutex_unlock(&c->mu);
        free(a->vec);
        return ddpc_err(DDPC_ERR_INVALID_ARG, "rank %d: the communicator is being destroyed", c->rank);
    }
    if (!wout && !c->busy && !c->qhead) { /* fast path: run here, now */
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        ddpc_status st = execute(c, a);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        if (c->qhead) pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        free(a->vec);
        return st;
    }
    struct ddpc_work *w = calloc(1, sizeof *w);
    if (!w) {
        pthread_mutex_unlock(&c->mu);
        free(a->vec);
        return ddpc_err(DDPC_ERR_NOMEM, "out of memory for a work handle");
    }
    w->c = c;
    w->a = *a;
    w->refs = 2;
    w->timeout = c->exec_timeout;
    w->spin_s = c->spin_s;
    w->no_thread = c->no_thread;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (!c->thread_started && !c->no_thread) {
        if (pthread_create(&c->thread, NULL, worker, c) != 0) {
            pthread_mutex_unlock(&c->mu);
            pthread_mutex_destroy(&w->mu);
            pthread_cond_destroy(&w->cv);
            free(w);
            free(a->vec);
            return ddpc_err_errno(DDPC_ERR_SYSTEM, errno, "cannot start the progress thread");
        }
        c->thread_started = 1;
    }
    if (c->qtail) c->qtail->next = w;
    else c->qhead = w;
    c->qtail = w;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (wout) {
        *wout = w;
        return DDPC_OK;
    }
    ddpc_status st = ddpc_work_wait(w, INFINITY); /* the operation itself is bounded */
    ddpc_work_free(w);
    return st;
}

/* Waits for w: timeout_s > 0: that long; 0: not at all; < 0: the comm's
 * exec timeout (none when that is 0); INFINITY: no limit. 1 when done. */
static int wait_done(struct ddpc_work *w, double timeout_s) {
    double limit = timeout_s < 0 ? (w->timeout > 0 ? w->timeout : INFINITY) : timeout_s;
    double deadline = ddpc_now() + limit;
    double spin_until = ddpc_now() + (w->spin_s < limit ? w->spin_s : limit);
    while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) && ddpc_now() < spin_until)
        sched_yield(); /* as the progress loop does: a sleeping core is slow to wake */
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        if (!isinf(limit)) {
            if (ddpc_now() >= deadline) break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double left = deadline - ddpc_now();
            if (left > 1) left = 1;
            if (left < 0) left = 0;
            ts.tv_sec += (time_t)left;
            ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        } else {
            pthread_cond_wait(&w->cv, &w->mu);
        }
    }
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

ddpc_status ddpc_work_wait(ddpc_work *w, double timeout_s) {
    if (!w) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_work_wait: work is NULL");
    /* bounded as the operation is */
    if (timeout_s < 0 || isinf(timeout_s) || (w->no_thread && timeout_s > 0)) run_inline(w);
    if (!wait_done(w, timeout_s))
        return ddpc_err(DDPC_ERR_TIMEOUT, "the operation did not complete within %g s (still running; "
                        "wait again or raise the timeout)", timeout_s < 0 ? w->timeout : timeout_s);
    if (w->st != DDPC_OK) return ddpc_err(w->st, "%s", w->err);
    return DDPC_OK;
}

int ddpc_work_source(ddpc_work *w) {
    if (!w) return -1;
    pthread_mutex_lock(&w->mu);
    int src = w->done ? w->a.root : -1;
    pthread_mutex_unlock(&w->mu);
    return src;
}

ddpc_status ddpc_work_test(ddpc_work *w, int *done) {
    if (!w || !done) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_work_test: work and done must be non-NULL");
    pthread_mutex_lock(&w->mu);
    *done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (!*done) return DDPC_OK;
    if (w->st != DDPC_OK) return ddpc_err(w->st, "%s", w->err);
    return DDPC_OK;
}

void ddpc_work_free(ddpc_work *w) {
    if (!w) return;
    if (w->no_thread) run_inline(w); /* nobody else may run it */
    wait_done(w, INFINITY); /* the operation itself is bounded by DDPC_TIMEOUT */
    work_release(w);
}

/* ------------------------------------------------------------ abort, destroy */

ddpc_status ddpc_comm_abort(ddpc_comm *c) {
    if (!c) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_comm_abort: communicator is NULL");
    __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(c->abort_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        DDPC_WARN(INIT, "abort: eventfd write failed: %s", strerror(errno));
    for (int p = 0; p < c->size; p++)
        if (c->peers[p].conn) c->peers[p].tp->shutdown(c->peers[p].conn);
    pthread_mutex_lock(&c->err_mu);
    if (!c->last_err[0])
        snprintf(c->last_err, sizeof c->last_err, "rank %d: the communicator was aborted (ddpc_comm_abort)",
                 c->rank);
    pthread_mutex_unlock(&c->err_mu);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return DDPC_OK;
}

ddpc_status ddpc_comm_destroy(ddpc_comm *c) {
    if (!c) return DDPC_OK;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    if (c->no_thread) { /* what is still queued runs here, after what runs elsewhere */
        for (;;) {
            if (c->busy) pthread_cond_wait(&c->cv, &c->mu);
            else if (c->qhead) run_head(c);
            else break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (c->thread_started) pthread_join(c->thread, NULL);
    ddpc_status s = DDPC_OK;
    if (c->failed == DDPC_OK && !__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        /* goodbye: lets the peers tell a clean close from a crash */
        ddpc_hdr bye;
        memset(&bye, 0, sizeof bye);
        bye.magic = DDPC_MSG_MAGIC;
        bye.flags = DDPC_F_BYE;
        bye.seq = c->seq;
        bye.root = -1;
        double deadline = ddpc_deadline_in(2.0);
        for (int p = 0; p < c->size; p++) {
            ddpc_peer *pe = &c->peers[p];
            if (pe->conn && pe->tp->send_full(pe->conn, &bye, sizeof bye, deadline, -1) != DDPC_OK)
                DDPC_INFO(INIT, "rank %d: goodbye to rank %d not sent: %s", c->rank, p, ddpc_last_error());
        }
    }
    comm_free(c);
    return s;
}

/* ------------------------------------------------------------ split */

/* Split's own exchange, an executor of comm's (no collective): every rank
 * sends its count elements to every other rank over the parent's
 * connections and receives theirs into recv, in rank order; with count 0 it
 * is a barrier. Run as an operation of the parent, it keeps its place in the
 * queue, its sequence number and fingerprint, and fails as any operation
 * does (a lost peer, DDPC_TIMEOUT, abort). */
static ddpc_status exchange_all(ddpc_exec *e) {
    ddpc_comm *c = e->c;
    size_t nb = e->a.count * ddpc_dtype_size(e->a.dtype);
    if (nb) memcpy((char *)e->a.recv + (size_t)c->rank * nb, e->a.send, nb);
    if (c->size == 1) return DDPC_OK;
    ddpc_req *r = calloc(2 * (size_t)(c->size - 1), sizeof *r);
    if (!r) return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int p = 0; p < c->size; p++) {
        if (p == c->rank) continue;
        ddpc__post_send(e, &r[k++], p, e->a.send, nb);
        ddpc__post_recv(e, &r[k++], p, (char *)e->a.recv + (size_t)p * nb, nb);
    }
    ddpc_status s = ddpc__wait_all(e, r, k);
    free(r);
    return s;
}

/* Runs split's exchange of count int32 per rank (an allgather), or of
 * nothing (a barrier), on c as one blocking operation. */
static ddpc_status split_exchange(ddpc_comm *c, ddpc_kind kind, const int32_t *mine, int32_t *all,
                                  size_t count) {
    ddpc_args a = {kind, mine, all, count, DDPC_INT32, DDPC_SUM, -1, NULL, exchange_all};
    return ddpc__submit(c, &a, NULL);
}

typedef struct member {
    int color, key, rank;
} member;

static int member_cmp(const void *a, const void *b) {
    const member *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

ddpc_status ddpc_comm_split(ddpc_comm *c, int color, int key, ddpc_comm **out) {
    if (!c || !out) return ddpc_err(DDPC_ERR_INVALID_ARG, "ddpc_comm_split: communicator and out must be non-NULL");
    *out = NULL;
    int32_t mine[2] = {color < 0 ? -1 : color, key};
    int32_t *all = malloc(sizeof(int32_t) * 2 * (size_t)c->size);
    member *m = malloc(sizeof *m * (size_t)c->size);
    if (!all || !m) {
        free(all);
        free(m);
        return ddpc_err(DDPC_ERR_NOMEM, "out of memory");
    }
    ddpc_status s = split_exchange(c, DDPC_K_ALLGATHER, mine, all, 2);
    if (s != DDPC_OK) {
        free(all);
        free(m);
        return s;
    }
    uint64_t nsplit = c->nsplit++;
    int n = 0, newrank = -1;
    for (int r = 0; r < c->size; r++)
        if (color >= 0 && all[2 * r] == mine[0]) m[n++] = (member){all[2 * r], all[2 * r + 1], r};
    qsort(m, (size_t)n, sizeof *m, member_cmp);
    for (int i = 0; i < n; i++)
        if (m[i].rank == c->rank) newrank = i;
    free(all);
    free(m);
    ddpc_comm *child = NULL;
    ddpc_status cs = DDPC_OK;
    char keep[1024] = "";
    if (color >= 0) {
        char prefix[320], who[320];
        snprintf(prefix, sizeof prefix, "%.200ssplit%" PRIu64 "/c%d/", c->prefix, nsplit, color);
        snprintf(who, sizeof who, "the store %s:%d", c->store_host, c->store_port);
        if (c->ext_store) {
            ddpc_comm_options opt = {c->connect_timeout, c->exec_timeout, !c->no_thread};
            cs = comm_create_store(newrank, n, c->ext_store, prefix, &opt, &child);
        } else {
            cs = comm_create(newrank, n, c->store_host, c->store_port, 0, c->srv, prefix, who, &child);
        }
        if (cs != DDPC_OK) snprintf(keep, sizeof keep, "%s", ddpc_last_error());
        ddpc_log_set_rank(c->rank);
    }
    /* every child is connected before anyone may stop the store */
    s = split_exchange(c, DDPC_K_BARRIER, NULL, NULL, 0);
    if (cs != DDPC_OK) {
        ddpc_comm_destroy(child);
        return ddpc_err(cs, "split: %s", keep);
    }
    if (s != DDPC_OK) {
        ddpc_comm_destroy(child);
        return s;
    }
    *out = child;
    return DDPC_OK;
}
