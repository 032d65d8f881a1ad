/*
 * ranktable.c — ddpc-run started from a rank table (HCCL's file, what
 * RANK_TABLE_FILE names; read by ddpc_rank_table_load): one node per
 * server, in the file's order (node 0, the first server, hosts the job's
 * store); this launcher is the server given by --node-rank, else the one
 * whose host_ip or server_id is HCCL_IF_IP, else the one that has one of
 * this machine's addresses or its hostname; its workers are that server's
 * ranks, each told RANK_ID, RANK_SIZE, DEVICE_ID and RANK_TABLE_FILE as
 * HCCL's own launch scripts tell them.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/sock.h"
#include "run.h"

/* s as a canonical numeric address when it is one, else as it is. */
static void canon(const char *s, char *out, size_t len) {
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, s, &a4) == 1 && inet_ntop(AF_INET, &a4, out, (socklen_t)len)) return;
    if (inet_pton(AF_INET6, s, &a6) == 1 && inet_ntop(AF_INET6, &a6, out, (socklen_t)len)) return;
    snprintf(out, len, "%s", s);
}

/* Whether server s is name (an address or a host name). */
static int server_is(const ddpc_rank_table_server *s, const char *name) {
    char a[256], b[256], n[256];
    canon(name, n, sizeof n);
    canon(s->host, a, sizeof a);
    canon(s->server_id, b, sizeof b);
    return strcmp(a, n) == 0 || strcmp(b, n) == 0;
}

/* The servers that are this machine: one of its interfaces' addresses,
 * or its hostname. Returns how many; the first in *found; this machine's
 * names listed in mine for messages. */
static int find_me(const ddpc_rank_table *t, int *found, char *mine, size_t mlen) {
    struct ifaddrs *ifs = NULL;
    char names[64][64];
    int nn = 0, hits = 0;
    if (gethostname(names[nn], sizeof names[0]) == 0) names[nn++][63] = '\0';
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && nn < 64; i = i->ifa_next)
            if (i->ifa_addr &&
                (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6))
                ddpc__sock_addr_str(i->ifa_addr, names[nn++], sizeof names[0], NULL);
        freeifaddrs(ifs);
    }
    size_t used = 0;
    mine[0] = '\0';
    for (int k = 0; k < nn && used + 70 < mlen; k++)
        used += (size_t)snprintf(mine + used, mlen - used, "%s%s", k ? ", " : "", names[k]);
    for (int s = 0; s < ddpc_rank_table_servers(t); s++) {
        ddpc_rank_table_server v;
        ddpc_rank_table_server_at(t, s, &v);
        for (int k = 0; k < nn; k++)
            if (server_is(&v, names[k])) {
                if (hits++ == 0) *found = s;
                break;
            }
    }
    return hits;
}

/* The servers of t, "0 a (10.0.0.1), 1 b" for messages. */
static void list_servers(const ddpc_rank_table *t, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int s = 0; s < ddpc_rank_table_servers(t) && used + 80 < len; s++) {
        ddpc_rank_table_server v;
        ddpc_rank_table_server_at(t, s, &v);
        used += (size_t)snprintf(buf + used, len - used, "%s%d %s", s ? ", " : "", s, v.server_id);
        if (strcmp(v.host, v.server_id) != 0)
            used += (size_t)snprintf(buf + used, len - used, " (%s)", v.host);
    }
}

/* Which server this launcher is; -1 with the reason said. */
static int which_server(const ddpc_rank_table *t, const char *path, int node_rank) {
    int n = ddpc_rank_table_servers(t), s = -1;
    char servers[1024], mine[1024];
    list_servers(t, servers, sizeof servers);
    if (node_rank >= 0) {
        if (node_rank < n) return node_rank;
        say("error: --node-rank=%d: the rank table %s has servers 0..%d (%s)", node_rank, path,
            n - 1, servers);
        return -1;
    }
    const char *if_ip = getenv("HCCL_IF_IP");
    if (if_ip && *if_ip) {
        for (int k = 0; k < n; k++) {
            ddpc_rank_table_server v;
            ddpc_rank_table_server_at(t, k, &v);
            if (server_is(&v, if_ip)) return k;
        }
        say("error: HCCL_IF_IP=%s is no server of the rank table %s (servers: %s); set it to "
            "this server's host_ip, or give --node-rank",
            if_ip, path, servers);
        return -1;
    }
    int hits = find_me(t, &s, mine, sizeof mine);
    if (hits == 1) return s;
    if (hits == 0)
        say("error: this machine (%s) is no server of the rank table %s (servers: %s); give "
            "--node-rank or set HCCL_IF_IP to this server's host_ip",
            mine, path, servers);
    else
        say("error: this machine (%s) is %d servers of the rank table %s (servers: %s): give "
            "--node-rank or set HCCL_IF_IP to say which",
            mine, hits, path, servers);
    return -1;
}

int run_rank_table(opts *o, const char *path, int node_rank, int master_given) {
    if (ddpc_rank_table_load(path, &o->table) != DDPC_OK) {
        say("error: %s", ddpc_last_error());
        return -1;
    }
    if (!realpath(path, o->table_path)) snprintf(o->table_path, sizeof o->table_path, "%s", path);
    int s = which_server(o->table, path, node_rank);
    if (s < 0) return -1;
    ddpc_rank_table_server me, first;
    ddpc_rank_table_server_at(o->table, s, &me);
    ddpc_rank_table_server_at(o->table, 0, &first);
    if (me.nranks > MAX_NPROC) {
        say("error: server %d (%s) of the rank table %s has %d ranks; ddpc-run starts at most %d",
            s, me.server_id, path, me.nranks, MAX_NPROC);
        return -1;
    }
    o->nnodes = ddpc_rank_table_servers(o->table);
    o->node_rank = s;
    o->nproc = me.nranks;
    o->rank_base = me.first_rank;
    o->world = ddpc_rank_table_size(o->table);
    if (!master_given) snprintf(o->master_addr, sizeof o->master_addr, "%s", first.host);
    say("rank table %s: server %d of %d (%s), ranks %d-%d of %d; node 0 (%s) hosts the job's store",
        path, s, o->nnodes, me.server_id, me.first_rank, me.first_rank + me.nranks - 1, o->world,
        o->master_addr);
    return 0;
}

int run_rank_table_env(const opts *o, int rank, char **mine, int m) {
    if (!o->table) return m;
    mine[m++] = xasprintf("RANK_TABLE_FILE=%s", o->table_path);
    mine[m++] = xasprintf("RANK_ID=%d", rank);
    mine[m++] = xasprintf("RANK_SIZE=%d", o->world);
    mine[m++] = xasprintf("DEVICE_ID=%d", ddpc_rank_table_device(o->table, rank));
    return m;
}
