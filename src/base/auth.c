/* auth.c — the job token's challenge-response and HCCL's whitelist (see
 * auth.h for the exchange; docs/SECURITY.md for what it protects). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#ifdef DDPC_HAVE_CJSON
#include <cJSON.h>
#endif

#include "base/auth.h"
#include "base/env.h"
#include "base/sha256.h"
#include "base/sock.h"

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

ddpc_status ddpc__auth_token(const char **token) {
    static int said;
    *token = NULL;
    if (!ddpc__env_isset(DDPC_ENV_JOB_TOKEN)) {
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            DDPC_INFO(NET, "DDPC_JOB_TOKEN is unset: connections to the store and between ranks "
                           "are not authenticated (docs/SECURITY.md)");
        return DDPC_OK;
    }
    const char *t = ddpc__env(DDPC_ENV_JOB_TOKEN, NULL);
    if (strlen(t) < DDPC_AUTH_MIN_TOKEN)
        return ddpc__err(DDPC_ERR_ENV,
                         "DDPC_JOB_TOKEN has %zu characters; a job token needs at least %d (e.g. "
                         "the output of `od -An -tx1 -N32 /dev/urandom | tr -d ' \\n'`)",
                         strlen(t), DDPC_AUTH_MIN_TOKEN);
    *token = t;
    return DDPC_OK;
}

/* 32 bytes from the kernel's generator (getrandom never returns short for
 * 32 bytes once the pool is ready; EINTR is retried). */
static ddpc_status nonce(unsigned char out[32]) {
    for (int tries = 0; tries < 100; tries++) {
        ssize_t n = getrandom(out, 32, 0);
        if (n == 32) return DDPC_OK;
        if (n < 0 && errno != EINTR)
            return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "getrandom for a handshake nonce");
    }
    return ddpc__err(DDPC_ERR_SYSTEM, "getrandom returned short reads 100 times");
}

/* mac(role) over purpose, nc and ns (auth.h). */
static void mac(const char *token, const char *role, int purpose, const unsigned char nc[32],
                const unsigned char ns[32], unsigned char out[32]) {
    char label[32];
    unsigned char p[4];
    int ln = snprintf(label, sizeof label, "ddpc job token v1 %s", role);
    put32(p, (uint32_t)purpose);
    const void *parts[4] = { label, p, nc, ns };
    size_t lens[4] = { (size_t)ln, 4, 32, 32 };
    ddpc__hmac_sha256(token, strlen(token), parts, lens, 4, out);
}

static const char *purpose_name(int purpose) {
    return purpose == DDPC_AUTH_STORE ? "store" : purpose == DDPC_AUTH_DATA ? "data" : "unknown";
}

/* ------------------------------------------------------------ client */

ddpc_status ddpc__auth_cli_start(ddpc__auth_cli *a, int purpose,
                                 unsigned char hello[DDPC_AUTH_HELLO]) {
    memset(a, 0, sizeof *a);
    a->purpose = purpose;
    DDPC_CHECK(nonce(a->nc));
    put32(hello, DDPC_AUTH_MAGIC);
    put32(hello + 4, DDPC_AUTH_VERSION);
    put32(hello + 8, (uint32_t)purpose);
    put32(hello + 12, 0);
    memcpy(hello + 16, a->nc, 32);
    return DDPC_OK;
}

size_t ddpc__auth_cli_need(const ddpc__auth_cli *a) {
    /* the challenge's first 8 bytes alone first: a server without a token
     * answers only those, then closes */
    size_t want = a->stage == 0   ? (a->have < 8 ? 8 : DDPC_AUTH_CHALLENGE)
                  : a->stage == 1 ? DDPC_AUTH_VERDICT
                                  : 0;
    return want > a->have ? want - a->have : 0;
}

ddpc_status ddpc__auth_cli_step(ddpc__auth_cli *a, const char *token, const char *peer,
                                unsigned char out[DDPC_AUTH_PROOF], size_t *olen) {
    *olen = 0;
    if (a->stage == 2) return DDPC_OK;
    if (a->stage == 1) {
        if (a->have < DDPC_AUTH_VERDICT) return DDPC_OK;
        if (get32(a->in) != DDPC_AUTH_MAGIC || get32(a->in + 4) != DDPC_AUTH_ACCEPTED)
            return ddpc__err(DDPC_ERR_DENIED,
                             "%s refused this process's job token (DDPC_JOB_TOKEN)", peer);
        a->stage = 2;
        return DDPC_OK;
    }
    if (a->have < 8) return DDPC_OK;
    uint32_t magic = get32(a->in), word = get32(a->in + 4);
    if (magic == DDPC_AUTH_MAGIC && word == DDPC_AUTH_NO_TOKEN)
        return ddpc__err(DDPC_ERR_DENIED,
                         "%s has no job token but this process has one (DDPC_JOB_TOKEN): set the "
                         "same DDPC_JOB_TOKEN for every process of the job, or none",
                         peer);
    if (magic != DDPC_AUTH_MAGIC || word != DDPC_AUTH_VERSION)
        return ddpc__err(DDPC_ERR_PROTOCOL,
                         "%s answered the job token's handshake with 0x%08x 0x%08x, not a "
                         "challenge (version %u)",
                         peer, magic, word, DDPC_AUTH_VERSION);
    if (a->have < DDPC_AUTH_CHALLENGE) return DDPC_OK; /* the rest of the challenge */
    unsigned char want[32];
    mac(token, "server", a->purpose, a->nc, a->in + 8, want);
    if (!ddpc__equal_ct(want, a->in + 40, 32))
        return ddpc__err(DDPC_ERR_DENIED,
                         "%s does not know this job's token: its proof does not match "
                         "DDPC_JOB_TOKEN (another job's server, or a different token)",
                         peer);
    mac(token, "client", a->purpose, a->nc, a->in + 8, out);
    *olen = DDPC_AUTH_PROOF;
    a->stage = 1;
    a->have = 0;
    return DDPC_OK;
}

ddpc_status ddpc__auth_cli_lost(const ddpc__auth_cli *a, ddpc_status s, const char *peer) {
    if (s == DDPC_ERR_PEER_LOST && a->stage == 0 && a->have < 8)
        return ddpc__err(s,
                         "%s closed the connection on the job token's handshake (it is not ddpc, "
                         "or an older ddpc without DDPC_JOB_TOKEN support)",
                         peer);
    return ddpc__err_wrap(s, "authenticating to %s", peer);
}

ddpc_status ddpc__auth_client(int fd, const char *token, int purpose, double deadline, int abort_fd,
                              const char *peer) {
    ddpc__auth_cli a;
    unsigned char hello[DDPC_AUTH_HELLO], proof[DDPC_AUTH_PROOF];
    DDPC_CHECK(ddpc__auth_cli_start(&a, purpose, hello));
    ddpc_status s = ddpc__sock_write_full(fd, hello, sizeof hello, deadline, abort_fd);
    if (s != DDPC_OK) return ddpc__auth_cli_lost(&a, s, peer);
    for (size_t need; (need = ddpc__auth_cli_need(&a)) > 0;) { /* three steps at most */
        s = ddpc__sock_read_full(fd, a.in + a.have, need, deadline, abort_fd);
        if (s != DDPC_OK) return ddpc__auth_cli_lost(&a, s, peer);
        a.have += need;
        size_t olen = 0;
        DDPC_CHECK(ddpc__auth_cli_step(&a, token, peer, proof, &olen));
        if (olen && (s = ddpc__sock_write_full(fd, proof, olen, deadline, abort_fd)) != DDPC_OK)
            return ddpc__auth_cli_lost(&a, s, peer);
    }
    return DDPC_OK;
}

/* ------------------------------------------------------------ server */

void ddpc__auth_srv_init(ddpc__auth_srv *a, int purpose) {
    memset(a, 0, sizeof *a);
    a->purpose = purpose;
}

size_t ddpc__auth_srv_need(const ddpc__auth_srv *a) {
    size_t want = a->stage == 0 ? DDPC_AUTH_HELLO : a->stage == 1 ? DDPC_AUTH_PROOF : 0;
    return want > a->have ? want - a->have : 0;
}

static size_t verdict(unsigned char *out, uint32_t v) {
    put32(out, DDPC_AUTH_MAGIC);
    put32(out + 4, v);
    return DDPC_AUTH_VERDICT;
}

int ddpc__auth_srv_step(ddpc__auth_srv *a, const char *token, unsigned char *out, size_t *olen,
                        char *why, size_t whylen) {
    *olen = 0;
    if (a->stage == 0) {
        /* refuse what is not a hello as soon as its first word shows it */
        if (a->have >= 4 && get32(a->in) != DDPC_AUTH_MAGIC) {
            uint32_t m = get32(a->in);
            snprintf(why, whylen,
                     "it did not open with the job token's handshake (first bytes 0x%08x%s)", m,
                     m == 0x48504444u || m == 0x53504444u
                         ? ": a ddpc process without DDPC_JOB_TOKEN?"
                         : "");
            return -1;
        }
        if (a->have < DDPC_AUTH_HELLO) return 0;
        uint32_t ver = get32(a->in + 4), purpose = get32(a->in + 8);
        if (ver != DDPC_AUTH_VERSION) {
            snprintf(why, whylen, "handshake version %u (this process speaks %u)", ver,
                     DDPC_AUTH_VERSION);
            return -1;
        }
        if ((int)purpose != a->purpose) {
            snprintf(why, whylen, "a %s handshake on a %s port", purpose_name((int)purpose),
                     purpose_name(a->purpose));
            return -1;
        }
        if (!token) {
            snprintf(why, whylen,
                     "it has a job token but this process has none (DDPC_JOB_TOKEN is unset)");
            *olen = verdict(out, DDPC_AUTH_NO_TOKEN);
            return -1;
        }
        if (nonce(a->ns) != DDPC_OK) {
            snprintf(why, whylen, "%s", ddpc_last_error());
            return -1;
        }
        memcpy(a->nc, a->in + 16, 32);
        put32(out, DDPC_AUTH_MAGIC);
        put32(out + 4, DDPC_AUTH_VERSION);
        memcpy(out + 8, a->ns, 32);
        mac(token, "server", a->purpose, a->nc, a->ns, out + 40);
        *olen = DDPC_AUTH_CHALLENGE;
        a->stage = 1;
        a->have = 0;
        return 1;
    }
    if (a->stage != 1 || a->have < DDPC_AUTH_PROOF) return 0;
    unsigned char want[32];
    mac(token, "client", a->purpose, a->nc, a->ns, want);
    a->stage = 2;
    if (!ddpc__equal_ct(want, a->in, 32)) {
        snprintf(why, whylen,
                 "its proof does not match this job's token (a wrong token, or a "
                 "replayed handshake)");
        *olen = verdict(out, DDPC_AUTH_REFUSED);
        return -1;
    }
    *olen = verdict(out, DDPC_AUTH_ACCEPTED);
    return 2;
}

/* ------------------------------------------------------------ whitelist */

#define WL_MAX 4096

static pthread_mutex_t wl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int on;              /* a list is loaded and enforced */
    char key[4096 + 16]; /* the variables it was loaded for: "DISABLE|FILE" */
    int n;
    struct in6_addr addr[WL_MAX]; /* IPv4 as v4-mapped IPv6 */
} wl;

/* Any address as IPv6 (IPv4 mapped), so that both families compare alike. */
static int to_v6(const char *text, struct in6_addr *out) {
    struct in_addr a4;
    if (inet_pton(AF_INET, text, &a4) == 1) {
        memset(out, 0, sizeof *out);
        out->s6_addr[10] = out->s6_addr[11] = 0xff;
        memcpy(out->s6_addr + 12, &a4, 4);
        return 1;
    }
    return inet_pton(AF_INET6, text, out) == 1;
}

#ifdef DDPC_HAVE_CJSON
/* Reads path's host_ip list into wl (mu held). */
static ddpc_status wl_read(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return ddpc__err_errno(DDPC_ERR_ENV, errno, "HCCL_WHITELIST_FILE=%s", path);
    char *text = malloc(1 << 20);
    size_t n = text ? fread(text, 1, (1 << 20) - 1, f) : 0;
    int big = text && n == (1 << 20) - 1 && fgetc(f) != EOF;
    fclose(f);
    if (!text) return ddpc__err(DDPC_ERR_NOMEM, "out of memory reading HCCL_WHITELIST_FILE");
    if (big) {
        free(text);
        return ddpc__err(DDPC_ERR_ENV, "HCCL_WHITELIST_FILE=%s is larger than 1 MiB", path);
    }
    text[n] = '\0';
    cJSON *root = cJSON_Parse(text);
    free(text);
    ddpc_status s = DDPC_OK;
    const cJSON *ips = root ? cJSON_GetObjectItemCaseSensitive(root, "host_ip") : NULL;
    if (!root)
        s = ddpc__err(DDPC_ERR_ENV, "HCCL_WHITELIST_FILE=%s is not JSON", path);
    else if (!cJSON_IsArray(ips))
        s = ddpc__err(DDPC_ERR_ENV,
                      "HCCL_WHITELIST_FILE=%s has no \"host_ip\" array (want {\"host_ip\": "
                      "[\"10.0.0.1\", ...]})",
                      path);
    wl.n = 0;
    const cJSON *ip;
    int i = 0;
    if (s != DDPC_OK) ips = NULL;
    cJSON_ArrayForEach(ip, ips) {
        if (!cJSON_IsString(ip) || !to_v6(ip->valuestring, &wl.addr[wl.n])) {
            s = ddpc__err(DDPC_ERR_ENV, "HCCL_WHITELIST_FILE=%s: host_ip[%d] is not an IP address",
                          path, i);
            break;
        }
        if (++wl.n == WL_MAX) {
            s = ddpc__err(DDPC_ERR_ENV, "HCCL_WHITELIST_FILE=%s lists more than %d addresses", path,
                          WL_MAX);
            break;
        }
        i++;
    }
    cJSON_Delete(root);
    return s;
}
#else
static ddpc_status wl_read(const char *path) {
    return ddpc__err(DDPC_ERR_ENV,
                     "HCCL_WHITELIST_DISABLE=0, but this ddpc was built without libcjson and "
                     "cannot read HCCL_WHITELIST_FILE=%s (install libcjson-dev and rebuild)",
                     path);
}
#endif

ddpc_status ddpc__whitelist_load(void) {
    long off;
    DDPC_CHECK(ddpc__env_long(DDPC_ENV_HCCL_WHITELIST_DISABLE, &off));
    const char *path = ddpc__env(DDPC_ENV_HCCL_WHITELIST_FILE, NULL);
    char key[sizeof wl.key];
    snprintf(key, sizeof key, "%ld|%s", off, path ? path : "");
    pthread_mutex_lock(&wl_mu);
    ddpc_status s = DDPC_OK;
    if (strcmp(key, wl.key) != 0) {
        wl.on = 0;
        wl.key[0] = '\0';
        if (off) {
            snprintf(wl.key, sizeof wl.key, "%s", key);
        } else if (!path || !*path) {
            s = ddpc__err(DDPC_ERR_ENV, "HCCL_WHITELIST_DISABLE=0 turns the whitelist on, but "
                                        "HCCL_WHITELIST_FILE is not set");
        } else if ((s = wl_read(path)) == DDPC_OK) {
            wl.on = 1;
            snprintf(wl.key, sizeof wl.key, "%s", key);
            DDPC_INFO(NET, "whitelist: accepting connections only from the %d address%s in %s",
                      wl.n, wl.n == 1 ? "" : "es", path);
        }
    }
    pthread_mutex_unlock(&wl_mu);
    return s;
}

int ddpc__whitelist_allows(const struct sockaddr *sa) {
    char text[64];
    struct in6_addr a;
    ddpc__sock_addr_str(sa, text, sizeof text, NULL);
    pthread_mutex_lock(&wl_mu);
    int ok = !wl.on;
    if (!ok && to_v6(text, &a))
        for (int i = 0; i < wl.n && !ok; i++) ok = !memcmp(&a, &wl.addr[i], sizeof a);
    pthread_mutex_unlock(&wl_mu);
    return ok;
}

int ddpc__admit_addr(const char *what, const struct sockaddr *sa) {
    if (ddpc__whitelist_allows(sa)) return 1;
    char text[64];
    int port = 0;
    ddpc__sock_addr_str(sa, text, sizeof text, &port);
    DDPC_WARN(NET, "%s: refused a connection from %s:%d: not in HCCL_WHITELIST_FILE=%s", what, text,
              port, ddpc__env(DDPC_ENV_HCCL_WHITELIST_FILE, NULL));
    return 0;
}
