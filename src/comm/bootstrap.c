/*
 * bootstrap.c — how a communicator's ranks meet: through the store, each
 * rank learning every other's address and settings. It only exchanges
 * addresses: making the pairs' connections is link.c's, over the
 * transport table (transport/transport.h).
 *
 * In order, each step a function below:
 *   1. connect to the store (store_connect; hosting it is comm.c's) and
 *      reconnect when it vanishes before any peer is connected
 *      (ddpc__bootstrap_addr);
 *   2. listen on the chosen address (listen_for_peers; the choice is
 *      iface.c's);
 *   3. publish "peer/<rank>" = {size, host id, address, port, DDPC_SHM,
 *      DDPC_SHM_BYTES, machine, DDPC_LAZY_CONNECT, DDPC_SOCKETS_PER_PEER}
 *      under the communicator's key prefix (publish); rank 0 waits for
 *      every rank's entry, bounded by DDPC_CONNECT_TIMEOUT, the error
 *      listing the ranks that never came (wait_entries), reads them and
 *      publishes them all as one value, "peers", which every other rank
 *      reads in one request (a store round trip per rank and entry made 64
 *      ranks wait on 8,000 requests);
 *   4. ranks with the same host id (DDPC_HOST_ID, else host_id below) form
 *      a host; the hosts, each rank's host and local rank are the host
 *      layout (host_layout, logged at INFO); the transport table picks
 *      each pair's transport from the published entries (ddpc__link_plan:
 *      shared memory for a pair of one host where both publish DDPC_SHM=1
 *      and the same DDPC_SHM_BYTES, else TCP), so both ends always agree;
 *   5. connections, in the mode rank 0 published (DDPC_LAZY_CONNECT; auto:
 *      lazy above 16 ranks): the listener goes to link.c, which makes each
 *      pair's connection when an operation first needs it (lazy), or every
 *      pair's now (eager, ddpc__link_all: a full mesh; every rank sees a
 *      dead peer's sockets close).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/env.h"
#include "base/sock.h"
#include "base/strbuf.h"
#include "base/util.h"
#include "comm/comm.h"
#include "ddpc/store.h"

static const ddpc__transport *const tcp = &ddpc__transport_tcp;

/* This host's identity: DDPC_HOST_ID when set (so that tests make several
 * hosts on one machine), else hostname, kernel boot id and network
 * namespace, so that "nodes" simulated in network namespaces of one kernel
 * count as separate hosts, as their launcher's LOCAL_RANK does. Spaces
 * become '_' (the published entry is space-separated). *machine: a hash of
 * hostname and boot id alone, the kernel whose CPUs the rank runs on. */
static void host_id(char *buf, size_t len, uint64_t *machine) {
    char name[64] = "?", boot[64] = "", ns[64] = "";
    const char *src, *given = ddpc__env(DDPC_ENV_HOST_ID, &src);
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
    snprintf(buf, len, "%s/%.40s", name, boot);
    *machine = ddpc__fnv1a(buf, strlen(buf)); /* the kernel, whose CPUs every namespace shares */
    snprintf(buf, len, "%s/%.40s/%s", name, boot, ns);
    if (given && *given) snprintf(buf, len, "%s", given);
    for (char *p = buf; *p; p++)
        if (*p == ' ' || *p == '\t' || *p == '\n') *p = '_';
}

/* How a waiting rank retries before it sleeps (ddpc__progress), unless
 * DDPC_SPIN_US says how long. The ranks counted are those on this machine
 * (hosts made with DDPC_HOST_ID or network namespaces share its CPUs).
 * While they do not outnumber its CPUs, a sleeping rank's core halts, and
 * waking it costs tens of microseconds a message (more under a
 * hypervisor): retry up to 1 ms, the
 * first busy_polls tries without yielding (a peer's reply is often under a
 * microsecond away, less than one sched_yield costs under a hypervisor).
 * Where they outnumber them, a spinning rank takes time from one that has
 * work: 50 us, every try yielding the core. */
static void choose_spin(ddpc_comm *c) {
    long local = 0, lws;
    for (int r = 0; r < c->size; r++)
        local += c->peers[r].ep.machine == c->peers[c->rank].ep.machine;
    if (ddpc__env_isset(DDPC_ENV_LOCAL_WORLD_SIZE) &&
        ddpc__env_long(DDPC_ENV_LOCAL_WORLD_SIZE, &lws) == DDPC_OK && lws > local)
        local = lws;               /* a sub-communicator's host may hold more of the job's ranks */
    long cpus = ddpc__cpu_count(); /* a rank bound to one CPU is told the node's (DDPC_CPUS) */
    if (ddpc__env_isset(DDPC_ENV_CPUS) && ddpc__env_long(DDPC_ENV_CPUS, &cpus) != DDPC_OK)
        cpus = ddpc__cpu_count();
    c->busy_polls = local <= cpus && c->spin_s != 0 ? DDPC_BUSY_POLLS : 0;
    c->poll_budget = c->busy_polls;
    if (c->spin_s >= 0) return;
    c->spin_s = local <= cpus ? 1e-3 : 50e-6;
    DDPC_INFO(INIT,
              "rank %d: %ld ranks on this machine, %ld CPUs: waits poll %d times, then spin "
              "%g us before sleeping (DDPC_SPIN_US)",
              c->rank, local, cpus, c->busy_polls, c->spin_s * 1e6);
}

/* ------------------------------------------------------------ 2. listen */

/* Listens on c->ip (on a port ports.c allows) when there are peers; *port
 * is where (0 for a communicator of one). */
static ddpc_status listen_for_peers(ddpc_comm *c, ddpc__listener **lis, int *port) {
    ddpc__ports ports;
    *lis = NULL;
    *port = 0;
    DDPC_CHECK(ddpc__ports_data(&ports));
    if (c->size == 1) return DDPC_OK;
    ddpc_status s = tcp->listen(c->ip, &ports, lis, port);
    if (s != DDPC_OK)
        return ddpc__err_wrap(s, "rank %d: cannot listen for peers on %s", c->rank, c->ip);
    return DDPC_OK;
}

/* ------------------------------------------------- 3. publish, read entries */

/* Publishes this rank's entry; one already there from another process
 * with this rank is an error naming it. */
static ddpc_status publish(ddpc_comm *c, ddpc_store *st, int port) {
    char val[512], key[64];
    const ddpc__endpoint *me = &c->peers[c->rank].ep;
    snprintf(val, sizeof val, "v6 %d %d %s %s %d %ld %llx %d %d", c->size, port, c->ip, me->host,
             c->shm, c->shm_bytes, (unsigned long long)me->machine, c->lazy, c->streams);
    snprintf(key, sizeof key, "peer/%d", c->rank);
    void *actual = NULL;
    size_t alen = 0;
    ddpc_status s = ddpc_store_compare_set(st, key, NULL, 0, val, strlen(val), &actual, &alen);
    if (s == DDPC_OK && (alen != strlen(val) || memcmp(actual, val, alen) != 0))
        s = ddpc__err(DDPC_ERR_ENV, "RANK=%d is already taken by another process (%.*s)", c->rank,
                      (int)alen, (char *)actual);
    free(actual);
    return s;
}

/* The error for the entries miss[0, nmiss) that never came; s is how the
 * waiting ended (not DDPC_OK: the store went away). */
static ddpc_status never_arrived(ddpc_comm *c, const char **miss, int nmiss, ddpc_status s) {
    char list[256] = "", why[512] = "";
    size_t used = 0;
    for (int i = 0; i < nmiss && i < 32; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", miss[i] + 5);
        if (n > 0 && (size_t)n < sizeof list - used) used += (size_t)n;
    }
    if (nmiss > 32) snprintf(list + used, sizeof list - used, " and %d more", nmiss - 32);
    if (s != DDPC_OK)
        snprintf(why, sizeof why, " (then the store went away: %s)", ddpc_last_error());
    return ddpc__err(DDPC_ERR_TIMEOUT,
                     "rank %d: ranks %s of %d never arrived within DDPC_CONNECT_TIMEOUT=%g s%s",
                     c->rank, list, c->size, c->connect_timeout, why);
}

/* Waits until every key[0, size) exists, in short rounds, so that the ranks
 * still missing are known even if the store's host gives up first.
 * *store_gone = 1 when the store was lost while ranks were missing. */
static ddpc_status wait_entries(ddpc_comm *c, ddpc_store *st, const char **keys, double deadline,
                                int *store_gone) {
    int nmiss = c->size;
    const char **miss = malloc(sizeof *miss * (size_t)c->size);
    if (!miss) return ddpc__err(DDPC_ERR_NOMEM, "out of memory");
    memcpy(miss, keys, sizeof *miss * (size_t)c->size);
    ddpc_status s = DDPC_OK;
    for (;;) {
        int k = 0;
        for (int i = 0; i < nmiss && s == DDPC_OK; i++) {
            int ex = 0;
            s = ddpc_store_check(st, miss[i], &ex);
            if (!ex) miss[k++] = miss[i];
        }
        if (s == DDPC_OK) nmiss = k;
        if (s != DDPC_OK || nmiss == 0 || ddpc__expired(deadline)) break;
        double left = deadline - ddpc__now();
        ddpc_status w =
            ddpc_store_wait(st, miss, nmiss, left < 0.25 ? (left > 0.001 ? left : 0.001) : 0.25);
        if (w != DDPC_OK && w != DDPC_ERR_TIMEOUT) s = w;
    }
    if (nmiss > 0) {
        if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
        s = never_arrived(c, miss, nmiss, s);
    }
    free(miss);
    return s;
}

/* Parses rank r's entry txt into c->peers[r] (rank 0's also gives the
 * communicator's connection mode and streams per pair). */
static ddpc_status parse_entry(ddpc_comm *c, int r, const char *txt) {
    ddpc__endpoint *pe = &c->peers[r].ep;
    int psize = 0, lazy = 0, streams = 0;
    unsigned long long machine = 0;
    /* v6: point-to-point headers carry their tag in root (progress.c) */
    if (txt[0] == 'v' && strncmp(txt, "v6 ", 3) != 0)
        return ddpc__err(DDPC_ERR_PROTOCOL,
                         "rank %d runs a ddpc of another wire version ('%.8s', this rank's v6): "
                         "every rank must run the same ddpc",
                         r, txt);
    if (sscanf(txt, "v6 %d %d %63s %127s %d %ld %llx %d %d", &psize, &pe->port, pe->ip, pe->host,
               &pe->shm, &pe->shm_bytes, &machine, &lazy, &streams) != 9 ||
        streams < 1 || streams > DDPC_STREAMS_MAX)
        return ddpc__err(DDPC_ERR_PROTOCOL, "rank %d published a malformed entry '%.200s'", r, txt);
    if (psize != c->size)
        return ddpc__err(DDPC_ERR_ENV, "rank %d has WORLD_SIZE=%d but rank %d has WORLD_SIZE=%d", r,
                         psize, c->rank, c->size);
    pe->machine = machine;
    if (r == 0) c->lazy = lazy;
    if (r == 0) c->streams = streams;
    return DDPC_OK;
}

/* Rank 0: reads every rank's entry into c->peers and, one a line, into
 * *table (malloc'd) for the others. */
static ddpc_status read_entries(ddpc_comm *c, ddpc_store *st, const char **keys, char **table,
                                size_t *tlen, int *store_gone) {
    ddpc__strbuf b = DDPC_STRBUF_HEAP;
    ddpc_status s = DDPC_OK;
    for (int r = 0; r < c->size && s == DDPC_OK; r++) {
        void *v = NULL;
        size_t vl = 0;
        s = ddpc_store_get(st, keys[r], 1.0, &v, &vl);
        if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
        if (s != DDPC_OK) break;
        char txt[512];
        snprintf(txt, sizeof txt, "%.*s", (int)vl, (char *)v);
        free(v);
        s = parse_entry(c, r, txt);
        ddpc__sb_printf(&b, "%s\n", txt);
    }
    if (s == DDPC_OK && b.oom) s = ddpc__err(DDPC_ERR_NOMEM, "out of memory");
    if (s != DDPC_OK) {
        ddpc__sb_free(&b);
        return s;
    }
    *tlen = b.len;
    *table = b.p; /* ownership moves to the caller */
    return DDPC_OK;
}

/* Every rank but 0: reads rank 0's table of all entries into c->peers;
 * when it never comes, names the ranks whose entries never did (looked up
 * after each second of waiting and after the last, so that they are known
 * even if the store's host gives up first and takes the store with it). */
static ddpc_status read_table(ddpc_comm *c, ddpc_store *st, const char **keys, double deadline,
                              int *store_gone) {
    void *v = NULL;
    size_t vl = 0;
    char missing[1024] = "";
    ddpc_status s;
    for (;;) {
        double left = deadline - ddpc__now();
        s = ddpc_store_get(st, "peers", left > 1 ? 1 : left > 0.001 ? left : 0.001, &v, &vl);
        if (s != DDPC_ERR_TIMEOUT) break;
        int gone = 0;
        if (wait_entries(c, st, keys, ddpc__now(), &gone) == DDPC_OK)
            missing[0] = '\0';
        else if (!gone)
            snprintf(missing, sizeof missing, "%s", ddpc_last_error());
        if (ddpc__expired(deadline)) break; /* after a look: a first wait may use it all */
    }
    if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
    if (s != DDPC_OK && missing[0])
        return ddpc__err(DDPC_ERR_TIMEOUT, "%s%s", missing,
                         s == DDPC_ERR_PEER_LOST ? " (then the store went away)" : "");
    if (s == DDPC_ERR_TIMEOUT)
        return ddpc__err(DDPC_ERR_TIMEOUT,
                         "rank %d: rank 0 did not publish the table of peers within "
                         "DDPC_CONNECT_TIMEOUT=%g s (every rank's entry is there)",
                         c->rank, c->connect_timeout);
    if (s != DDPC_OK) return s;
    char *line = v;
    for (int r = 0; r < c->size && s == DDPC_OK; r++) {
        char *nl = line ? strchr(line, '\n') : NULL;
        if (!nl) {
            s = ddpc__err(DDPC_ERR_PROTOCOL, "rank 0's table of peers ends at rank %d of %d", r,
                          c->size);
            break;
        }
        *nl = '\0';
        s = parse_entry(c, r, line);
        line = nl + 1;
    }
    free(v);
    return s;
}

/* Step 3 whole: publish this rank's entry; rank 0 waits for everyone's,
 * reads them and publishes the table; the others read the table.
 * *store_gone = 1 when it failed because the store's connection was lost. */
static ddpc_status exchange_entries(ddpc_comm *c, ddpc_store *st, int port, double deadline,
                                    int *store_gone) {
    ddpc_status s = publish(c, st, port);
    if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
    if (s != DDPC_OK) return s;
    /* the keys "peer/<r>": pointers, then the texts they point to */
    const char **keys = malloc((size_t)c->size * (sizeof *keys + 24));
    if (!keys) return ddpc__err(DDPC_ERR_NOMEM, "out of memory");
    char *text = (char *)(keys + c->size), *table = NULL;
    size_t tlen = 0;
    for (int r = 0; r < c->size; r++) {
        snprintf(text + r * 24, 24, "peer/%d", r);
        keys[r] = text + r * 24;
    }
    if (c->rank != 0) {
        s = read_table(c, st, keys, deadline, store_gone);
        goto out;
    }
    DDPC_CHECK_GOTO(wait_entries(c, st, keys, deadline, store_gone), s, out);
    DDPC_CHECK_GOTO(read_entries(c, st, keys, &table, &tlen, store_gone), s, out);
    s = ddpc_store_set(st, "peers", table, tlen);
    if (s == DDPC_ERR_PEER_LOST) *store_gone = 1;
out:
    free(table);
    free(keys);
    return s;
}

/* ------------------------------------------------- 4. topology */

/* The host layout from the published host ids: hosts numbered in the
 * order of their lowest rank, local ranks in rank order (quadratic in the
 * number of hosts, once per communicator). */
static ddpc_status host_layout(ddpc_comm *c) {
    int n = c->size;
    int *hof = malloc(sizeof *hof * 2 * (size_t)n), *first = malloc(sizeof *first * (size_t)n);
    int *cnt = calloc((size_t)n, sizeof *cnt);
    if (!hof || !first || !cnt) {
        free(hof);
        free(first);
        free(cnt);
        return ddpc__err(DDPC_ERR_NOMEM, "out of memory for the host layout");
    }
    int *lof = hof + n, nh = 0;
    for (int r = 0; r < n; r++) {
        int h = 0;
        while (h < nh && strcmp(c->peers[first[h]].ep.host, c->peers[r].ep.host) != 0) h++;
        if (h == nh) first[nh++] = r;
        hof[r] = h;
        lof[r] = cnt[h]++;
    }
    free(c->host_of);
    c->host_of = hof;
    c->local_of = lof;
    c->nhosts = nh;
    c->host = hof[c->rank];
    c->local_rank = lof[c->rank];
    c->local_size = cnt[c->host];
    c->max_local = 0;
    for (int h = 0; h < nh; h++)
        if (cnt[h] > c->max_local) c->max_local = cnt[h];
    free(first);
    free(cnt);
    return DDPC_OK;
}

/* Logs the host layout at INFO, on rank 0 (the others know the same):
 * "host layout: 3 hosts, 1-2 ranks each; host 0 'a': ranks 0-1; host 1
 * 'b': ranks 2-3; host 2 'c': ranks 4". */
static void log_hosts(const ddpc_comm *c) {
    if (!ddpc__log_enabled(DDPC_LOG_INFO, DDPC_SUB_INIT) || c->rank != 0) return;
    int *ranks = malloc(sizeof *ranks * (size_t)c->size);
    if (!ranks) return;
    char line[2048];
    ddpc__strbuf b;
    ddpc__sb_fixed(&b, line, sizeof line);
    int least = c->size;
    for (int h = 0; h < c->nhosts; h++) {
        int k = 0;
        for (int r = 0; r < c->size; r++) k += c->host_of[r] == h;
        if (k < least) least = k;
    }
    ddpc__sb_printf(&b, "host layout: %d host%s, ", c->nhosts, c->nhosts == 1 ? "" : "s");
    if (least < c->max_local) ddpc__sb_printf(&b, "%d-", least);
    ddpc__sb_printf(&b, "%d rank%s each", c->max_local, c->max_local == 1 ? "" : "s");
    for (int h = 0; h < c->nhosts && h < 64; h++) {
        int k = 0;
        for (int r = 0; r < c->size; r++)
            if (c->host_of[r] == h) ranks[k++] = r;
        ddpc__sb_printf(&b, "; host %d '%s': ranks ", h, c->peers[ranks[0]].ep.host);
        ddpc__sb_ranks(&b, ranks, k);
    }
    if (c->nhosts > 64) ddpc__sb_printf(&b, "; ... (%d hosts more)", c->nhosts - 64);
    free(ranks);
    DDPC_INFO(INIT, "%s", line);
}

/* ------------------------------------------------ 5. connections */

/* The hello's communicator id: this key space and rank 0's listening
 * address as the store gave it (unique among live communicators, and the
 * same on every rank). Not the store's host as each rank was told it:
 * ranks may spell one host differently (Kubeflow gives the master pod
 * MASTER_ADDR=localhost and the others its service name). */
static uint64_t hello_id(const ddpc_comm *c) {
    const ddpc__endpoint *p0 = &c->peers[0].ep;
    return ddpc__fnv1a(c->prefix, strlen(c->prefix)) ^ ((uint64_t)c->store_port << 48) ^
           (ddpc__fnv1a(p0->ip, strlen(p0->ip)) * 31 + (uint64_t)p0->port);
}

/* Logs, at INFO, which transport each peer uses (lazy: is to use):
 * "rank 0: shm to ranks 1-3; tcp to ranks 4,5". */
static void log_transports(const ddpc_comm *c) {
    if (!ddpc__log_enabled(DDPC_LOG_INFO, DDPC_SUB_INIT) || c->size < 2) return;
    static const char *const tps[2] = { "shm", "tcp" };
    int *ranks = malloc(sizeof *ranks * (size_t)c->size);
    if (!ranks) return;
    char line[1024];
    ddpc__strbuf b;
    ddpc__sb_fixed(&b, line, sizeof line);
    ddpc__sb_printf(&b, "rank %d:", c->rank);
    for (int t = 0, parts = 0; t < 2; t++) {
        int n = 0;
        for (int r = 0; r < c->size; r++)
            if (r != c->rank && !strcmp(ddpc__peer_transport(c, r), tps[t])) ranks[n++] = r;
        if (!n) continue;
        ddpc__sb_printf(&b, "%s %s to ranks ", parts++ ? ";" : "", tps[t]);
        ddpc__sb_ranks(&b, ranks, n);
    }
    free(ranks);
    DDPC_INFO(INIT, "%s", line);
}

/* ------------------------------------------------------------ the whole */

/* Steps 2–5 (see the top of the file), before deadline. st is the
 * communicator's prefixed view of the store (borrowed). *store_gone = 1
 * when it failed because the store's connection was lost before any peer
 * was connected (the caller may reconnect and retry). */
static ddpc_status bootstrap(ddpc_comm *c, ddpc_store *st, double deadline, int *store_gone) {
    ddpc__listener *lis = NULL;
    int port = 0;
    ddpc_status s;
    *store_gone = 0;
    ddpc__endpoint *me = &c->peers[c->rank].ep;
    host_id(me->host, sizeof me->host, &me->machine);
    DDPC_CHECK(listen_for_peers(c, &lis, &port));
    DDPC_CHECK_GOTO(exchange_entries(c, st, port, deadline, store_gone), s, out);
    c->hello_uid = hello_id(c);
    DDPC_CHECK_GOTO(host_layout(c), s, out);
    ddpc__link_plan(c); /* each pair's transport, from the table */
    choose_spin(c);
    c->lis = lis; /* link.c accepts on it from now on */
    lis = NULL;
    if (!c->lazy) DDPC_CHECK_GOTO(ddpc__link_all(c, deadline), s, out);
    DDPC_INFO(INIT,
              "rank %d of %d ready: host %d of %d, local rank %d of %d, listening on %s:%d (%s); "
              "%s",
              c->rank, c->size, c->host, c->nhosts, c->local_rank, c->local_size, c->ip, port,
              c->ifname[0] ? c->ifname : "?",
              c->lazy ? "each pair connects on first use (DDPC_LAZY_CONNECT=1)"
                      : "every pair connected (DDPC_LAZY_CONNECT=0)");
    log_hosts(c);
    log_transports(c);
out:
    tcp->close_listener(lis);
    return s;
}

/* Connects to the store at host:port before deadline; a reset during the
 * handshake is a store closing down (see ddpc__bootstrap_addr), tried again
 * for a while by a rank that does not host it. */
static ddpc_status store_connect(ddpc_comm *c, const char *host, int port, double deadline,
                                 ddpc_store **root) {
    double left = deadline - ddpc__now();
    ddpc_status s = ddpc_store_create_tcp(host, port, left > 0.001 ? left : 0.001, root);
    for (int k = 0; s == DDPC_ERR_PEER_LOST && !c->srv && k < 100 && !ddpc__expired(deadline);
         k++) {
        ddpc__sleep(0.02);
        left = deadline - ddpc__now();
        s = ddpc_store_create_tcp(host, port, left > 0.001 ? left : 0.001, root);
    }
    return s;
}

ddpc_status ddpc__bootstrap_addr(ddpc_comm *c, const char *host, int port, const char *who) {
    double deadline = ddpc__deadline_in(c->connect_timeout);
    char first_err[1024] = "";
    ddpc_store *root = NULL, *st = NULL;
    ddpc_status s;
    for (int attempt = 0;; attempt++) {
        s = store_connect(c, host, port, deadline, &root);
        if (s != DDPC_OK && first_err[0]) { /* the retry found no store: report the first failure */
            s = ddpc__err(DDPC_ERR_TIMEOUT, "%s", first_err);
            goto out;
        }
        if (s != DDPC_OK) {
            s = ddpc__err(
                s == DDPC_ERR_TIMEOUT ? DDPC_ERR_TIMEOUT : s,
                "rank %d: cannot reach the store at %s within DDPC_CONNECT_TIMEOUT=%g s: %s",
                c->rank, who, c->connect_timeout, ddpc_last_error());
            goto out;
        }
        DDPC_CHECK_GOTO(ddpc_store_prefixed(root, c->prefix, &st), s, out);
        int store_gone = 0;
        s = bootstrap(c, st, deadline, &store_gone);
        /* a store that vanished under a rank that does not host it: most
         * likely rank 0's previous communicator's, about to be replaced by
         * the next one on the same port. Reconnect while time remains. */
        if (s == DDPC_OK || !store_gone || c->srv || attempt >= 20 || ddpc__expired(deadline))
            goto out;
        if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", ddpc_last_error());
        DDPC_INFO(INIT, "rank %d: lost the store during bootstrap (%s); reconnecting", c->rank,
                  ddpc_last_error());
        ddpc_store_destroy(st);
        ddpc_store_destroy(root);
        st = root = NULL;
        ddpc__sleep(0.05);
    }
out:
    ddpc_store_destroy(st);
    ddpc_store_destroy(root);
    return s;
}

ddpc_status ddpc__bootstrap_store(ddpc_comm *c, ddpc_store *st) {
    ddpc_store *view = NULL;
    int store_gone = 0;
    DDPC_CHECK(ddpc_store_prefixed(st, c->prefix, &view));
    ddpc_status s = bootstrap(c, view, ddpc__deadline_in(c->connect_timeout), &store_gone);
    ddpc_store_destroy(view);
    return s;
}
