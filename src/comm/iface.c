/*
 * iface.c — which address this rank listens on and advertises to its peers.
 *
 * In order: DDPC_IF_IP (alias HCCL_IF_IP), which must be an address of one
 * of this host's interfaces; else DDPC_SOCKET_IFNAME (HCCL_SOCKET_IFNAME)
 * with HCCL's syntax, the first matching interface's IPv4 address, else its
 * IPv6 one (link-local IPv6 skipped); else the address of the interface that
 * routes towards the store's host (a connected UDP socket's local address,
 * which sends nothing). HCCL_SOCKET_FAMILY (AF_INET, AF_INET6) restricts
 * each of these to its address family. A variable that matches nothing is
 * an error, never a silent fallback. The choice is logged at INFO (NET).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/env.h"
#include "base/sock.h"
#include "comm/comm.h"

/*
 * spec: "eth,enp" = names starting with eth or enp; "^eth" = names not
 * starting with eth; "=eth0" = exactly eth0; "^=eth0" = anything but eth0.
 * Returns 1 when name is selected.
 */
int ddpc__ifname_match(const char *spec, const char *name) {
    int exclude = 0, exact = 0;
    if (*spec == '^') {
        exclude = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    int hit = 0;
    const char *p = spec;
    while (*p && !hit) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            if (exact)
                hit = strlen(name) == len && strncmp(name, p, len) == 0;
            else
                hit = strncmp(name, p, len) == 0;
        }
        p = end ? end + 1 : p + len;
    }
    return exclude ? !hit : hit;
}

static int is_link_local6(const struct sockaddr *sa) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    return sa->sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr);
}

/* The names of this host's interfaces with an address, for error texts. */
static void list_ifaces(struct ifaddrs *ifs, char *buf, size_t len) {
    buf[0] = '\0';
    size_t used = 0;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        int seen = 0;
        for (struct ifaddrs *j = ifs; j != i; j = j->ifa_next)
            if (j->ifa_addr &&
                (j->ifa_addr->sa_family == AF_INET || j->ifa_addr->sa_family == AF_INET6) &&
                strcmp(j->ifa_name, i->ifa_name) == 0)
                seen = 1;
        if (seen) continue;
        int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", i->ifa_name);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
}

/* Finds the interface that has address ip; ifname "" when none. */
static int iface_of(struct ifaddrs *ifs, const char *ip, char *ifname, size_t iflen) {
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        char a[INET6_ADDRSTRLEN];
        ddpc__sock_addr_str(i->ifa_addr, a, sizeof a, NULL);
        if (strcmp(a, ip) == 0) {
            snprintf(ifname, iflen, "%s", i->ifa_name);
            return 1;
        }
    }
    snprintf(ifname, iflen, "%s", "");
    return 0;
}

/* Canonical numeric form of a v4/v6 literal; 0 if it is not one. */
static int canon_ip(const char *s, char *out, size_t len) {
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, s, &a4) == 1)
        return inet_ntop(AF_INET, &a4, out, (socklen_t)len) != NULL;
    if (inet_pton(AF_INET6, s, &a6) == 1)
        return inet_ntop(AF_INET6, &a6, out, (socklen_t)len) != NULL;
    return 0;
}

/* HCCL_SOCKET_FAMILY as AF_INET or AF_INET6; AF_UNSPEC when unset. */
static ddpc_status family(int *fam) {
    const char *v = ddpc__env(DDPC_ENV_HCCL_SOCKET_FAMILY, NULL);
    *fam = AF_UNSPEC;
    if (!v || !*v) return DDPC_OK;
    if (strcmp(v, "AF_INET") == 0)
        *fam = AF_INET;
    else if (strcmp(v, "AF_INET6") == 0)
        *fam = AF_INET6;
    else
        return ddpc__err(DDPC_ERR_ENV, "HCCL_SOCKET_FAMILY='%s' is not AF_INET or AF_INET6", v);
    return DDPC_OK;
}

static const char *fam_name(int fam) { return fam == AF_INET ? "AF_INET" : "AF_INET6"; }

static ddpc_status by_ip(struct ifaddrs *ifs, int fam, char *ip, size_t iplen, char *ifname,
                         size_t iflen) {
    const char *src;
    const char *v = ddpc__env(DDPC_ENV_IF_IP, &src);
    char canon[INET6_ADDRSTRLEN];
    if (!canon_ip(v, canon, sizeof canon))
        return ddpc__err(DDPC_ERR_ENV, "%s='%s' is not an IPv4 or IPv6 address", src, v);
    int v6 = strchr(canon, ':') != NULL;
    if (fam != AF_UNSPEC && v6 != (fam == AF_INET6))
        return ddpc__err(DDPC_ERR_ENV, "%s=%s is an IPv%d address but HCCL_SOCKET_FAMILY=%s", src,
                         v, v6 ? 6 : 4, fam_name(fam));
    if (!iface_of(ifs, canon, ifname, iflen)) {
        char names[512];
        list_ifaces(ifs, names, sizeof names);
        return ddpc__err(DDPC_ERR_NOT_FOUND,
                         "%s=%s is not an address of any interface on this host (interfaces: %s)",
                         src, v, names);
    }
    snprintf(ip, iplen, "%s", canon);
    DDPC_INFO(NET, "listening on %s (interface %s, from %s)", ip, ifname, src);
    return DDPC_OK;
}

static ddpc_status by_name(struct ifaddrs *ifs, int fam, char *ip, size_t iplen, char *ifname,
                           size_t iflen) {
    const char *src;
    const char *spec = ddpc__env(DDPC_ENV_SOCKET_IFNAME, &src);
    if (!*spec || strcmp(spec, "^") == 0 || strcmp(spec, "=") == 0 || strcmp(spec, "^=") == 0)
        return ddpc__err(DDPC_ERR_ENV, "%s='%s' names no interface", src, spec);
    /* first pass IPv4, second pass IPv6 (not link-local) */
    for (int pass = 0; pass < 2; pass++) {
        int want = pass == 0 ? AF_INET : AF_INET6;
        if (fam != AF_UNSPEC && want != fam) continue; /* HCCL_SOCKET_FAMILY */
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != want) continue;
            if (!(i->ifa_flags & IFF_UP)) continue;
            if (is_link_local6(i->ifa_addr)) continue;
            if (!ddpc__ifname_match(spec, i->ifa_name)) continue;
            ddpc__sock_addr_str(i->ifa_addr, ip, iplen, NULL);
            snprintf(ifname, iflen, "%s", i->ifa_name);
            DDPC_INFO(NET, "listening on %s (interface %s, from %s=%s)", ip, ifname, src, spec);
            return DDPC_OK;
        }
    }
    char names[512];
    list_ifaces(ifs, names, sizeof names);
    return ddpc__err(DDPC_ERR_NOT_FOUND,
                     "%s=%s matches no interface that is up with an %saddress (interfaces: %s)",
                     src, spec,
                     fam == AF_UNSPEC ? ""
                     : fam == AF_INET ? "IPv4 (HCCL_SOCKET_FAMILY=AF_INET) "
                                      : "IPv6 (HCCL_SOCKET_FAMILY=AF_INET6) ",
                     names);
}

static ddpc_status by_route(struct ifaddrs *ifs, int fam, const char *peer_host, char *ip,
                            size_t iplen, char *ifname, size_t iflen) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = fam;
    hints.ai_socktype = SOCK_DGRAM;
    int rc = getaddrinfo(peer_host, "9", &hints, &res);
    if (rc != 0)
        return ddpc__err(DDPC_ERR_NOT_FOUND,
                         "cannot resolve '%s'%s%s to find the interface towards it: %s", peer_host,
                         fam == AF_UNSPEC ? "" : " as HCCL_SOCKET_FAMILY=",
                         fam == AF_UNSPEC ? "" : fam_name(fam), gai_strerror(rc));
    ddpc_status s = DDPC_ERR_NOT_FOUND;
    int last = 0;
    for (struct addrinfo *ai = res; ai && s != DDPC_OK; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            ddpc__sock_local_addr(fd, ip, iplen, NULL) == DDPC_OK)
            s = DDPC_OK;
        else
            last = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (s != DDPC_OK)
        return ddpc__err_errno(DDPC_ERR_NOT_FOUND, last,
                               "no route to '%s' (set DDPC_IF_IP or DDPC_SOCKET_IFNAME)",
                               peer_host);
    iface_of(ifs, ip, ifname, iflen);
    DDPC_INFO(NET, "listening on %s (interface %s, the route to %s)", ip, ifname[0] ? ifname : "?",
              peer_host);
    return DDPC_OK;
}

ddpc_status ddpc__choose_ip(const char *peer_host, char *ip, size_t iplen, char *ifname,
                            size_t iflen) {
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "getifaddrs");
    int fam;
    ddpc_status s = family(&fam);
    if (s != DDPC_OK)
        ;
    else if (ddpc__env_isset(DDPC_ENV_IF_IP))
        s = by_ip(ifs, fam, ip, iplen, ifname, iflen);
    else if (ddpc__env_isset(DDPC_ENV_SOCKET_IFNAME))
        s = by_name(ifs, fam, ip, iplen, ifname, iflen);
    else
        s = by_route(ifs, fam, peer_host, ip, iplen, ifname, iflen);
    freeifaddrs(ifs);
    return s;
}
