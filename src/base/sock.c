/* sock.c — TCP sockets with deadlines (see sock.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/sock.h"

void ddpc__sock_addr_str(const struct sockaddr *sa, char *buf, size_t len, int *port) {
    char host[INET6_ADDRSTRLEN] = "?";
    int p = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
        p = ntohs(s4->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
        p = ntohs(s6->sin6_port);
    }
    snprintf(buf, len, "%s", host);
    if (port) *port = p;
}

ddpc_status ddpc__sock_local_addr(int fd, char *buf, size_t len, int *port) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "getsockname");
    ddpc__sock_addr_str((struct sockaddr *)&ss, buf, len, port);
    return DDPC_OK;
}

ddpc_status ddpc__sock_set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK)) < 0)
        return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "fcntl(O_NONBLOCK)");
    return DDPC_OK;
}

ddpc_status ddpc__sock_tune(int fd, int bufsize) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    if (bufsize > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
    }
    return DDPC_OK;
}

static ddpc_status resolve(const char *host, int port, int passive, struct addrinfo **res) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host && *host ? host : NULL, ps, &hints, res);
    if (rc != 0)
        return ddpc__err(DDPC_ERR_NOT_FOUND, "cannot resolve host '%s': %s", host ? host : "",
                         gai_strerror(rc));
    return DDPC_OK;
}

ddpc_status ddpc__sock_listen(const char *host, int port, int backlog, int *fd, int *bound_port) {
    return ddpc__sock_listen_try(host, port, backlog, fd, bound_port, NULL);
}

ddpc_status ddpc__sock_listen_ports(const char *host, const ddpc__ports *ports, int backlog,
                                    int *fd, int *bound_port) {
    if (!ports || ports->n == 0) return ddpc__sock_listen(host, 0, backlog, fd, bound_port);
    long total = 0;
    for (int i = 0; i < ports->n; i++) total += ports->hi[i] - ports->lo[i] + 1;
    for (long k = 0; k < total; k++) { /* at most 65535 binds */
        long at = (ports->first + k) % total;
        int i = 0;
        while (at > ports->hi[i] - ports->lo[i]) at -= ports->hi[i] - ports->lo[i] + 1, i++;
        int in_use = 0;
        ddpc_status s =
            ddpc__sock_listen_try(host, ports->lo[i] + (int)at, backlog, fd, bound_port, &in_use);
        if (s == DDPC_OK || !in_use) return s;
    }
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; i < ports->n && used + 16 < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d-%d", i ? "," : "",
                                 ports->lo[i], ports->hi[i]);
    return ddpc__err(DDPC_ERR_SYSTEM, "no free port on %s among %s (%s): every one is taken",
                     host && *host ? host : "*", list, ports->why);
}

ddpc_status ddpc__sock_listen_try(const char *host, int port, int backlog, int *fd, int *bound_port,
                                  int *in_use) {
    if (in_use) *in_use = 0;
    if (port < 0 || port > 65535)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "port %d is out of range [0, 65535]", port);
    int s = -1, err = 0;
    if (!host || !*host) { /* any address: prefer dual-stack IPv6, else IPv4 */
        s = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s >= 0) {
            int zero = 0, one = 1;
            setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            struct sockaddr_in6 a;
            memset(&a, 0, sizeof a);
            a.sin6_family = AF_INET6;
            a.sin6_addr = in6addr_any;
            a.sin6_port = htons((uint16_t)port);
            if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
                err = errno;
                close(s);
                s = -1;
                if (err == EADDRINUSE) goto in_use;
            }
        }
        if (s < 0) {
            s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (s < 0) return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "socket");
            int one = 1;
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            struct sockaddr_in a;
            memset(&a, 0, sizeof a);
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_ANY);
            a.sin_port = htons((uint16_t)port);
            if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
                err = errno;
                close(s);
                if (err == EADDRINUSE) goto in_use;
                return ddpc__err_errno(DDPC_ERR_SYSTEM, err, "bind to port %d", port);
            }
        }
    } else {
        struct addrinfo *res, *ai;
        DDPC_CHECK(resolve(host, port, 1, &res));
        for (ai = res; ai; ai = ai->ai_next) {
            s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (s < 0) {
                err = errno;
                continue;
            }
            int one = 1;
            setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (bind(s, ai->ai_addr, ai->ai_addrlen) == 0) break;
            err = errno;
            close(s);
            s = -1;
        }
        freeaddrinfo(res);
        if (s < 0) {
            if (err == EADDRINUSE) goto in_use;
            return ddpc__err_errno(DDPC_ERR_SYSTEM, err, "cannot bind to %s:%d", host, port);
        }
    }
    if (listen(s, backlog > 0 ? backlog : 128) != 0) {
        err = errno;
        close(s);
        /* With SO_REUSEADDR two sockets may both bind a port that neither
         * listens on yet; the second to listen loses: try another port. */
        if (err == EADDRINUSE) goto in_use;
        return ddpc__err_errno(DDPC_ERR_SYSTEM, err, "listen on %s:%d", host ? host : "*", port);
    }
    if (bound_port) {
        char buf[64];
        ddpc__sock_local_addr(s, buf, sizeof buf, bound_port);
    }
    *fd = s;
    return DDPC_OK;
in_use:
    if (in_use) *in_use = 1;
    return ddpc__err(DDPC_ERR_SYSTEM, "port %d on %s is already in use", port,
                     host && *host ? host : "*");
}

/* Waits for fd to be ready for events, or abort_fd readable, before deadline. */
static ddpc_status wait_fd(int fd, short events, double deadline, int abort_fd) {
    for (;;) {
        struct pollfd p[2] = { { fd, events, 0 }, { abort_fd, POLLIN, 0 } };
        int ms = ddpc__deadline_ms(deadline, 0);
        if (ms == 0) return DDPC_ERR_TIMEOUT;
        int n = poll(p, abort_fd >= 0 ? 2 : 1, ms);
        if (n < 0) {
            if (errno == EINTR) continue;
            return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "poll");
        }
        if (n == 0) continue; /* loop re-checks the deadline */
        if (abort_fd >= 0 && (p[1].revents & POLLIN)) return DDPC_ERR_ABORTED;
        if (p[0].revents) return DDPC_OK;
    }
}

ddpc_status ddpc__sock_accept(int lfd, double deadline, int abort_fd, int *fd) {
    for (;;) {
        ddpc_status s = wait_fd(lfd, POLLIN, deadline, abort_fd);
        if (s == DDPC_ERR_TIMEOUT) return ddpc__err(s, "timed out waiting for a connection");
        if (s == DDPC_ERR_ABORTED) return ddpc__err(s, "aborted while waiting for a connection");
        DDPC_CHECK(s);
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c >= 0) {
            *fd = c;
            return DDPC_OK;
        }
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED)
            continue;
        return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "accept");
    }
}

ddpc_status ddpc__sock_connect(const char *host, int port, double deadline, int *fd) {
    return ddpc__sock_connect_to(host, port, deadline, 0, fd);
}

ddpc_status ddpc__sock_connect_to(const char *host, int port, double deadline, int listening,
                                  int *fd) {
    double backoff = 0.005;
    int last_err = 0;
    for (;;) {
        struct addrinfo *res;
        DDPC_CHECK(resolve(host, port, 0, &res));
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                           ai->ai_protocol);
            if (s < 0) {
                last_err = errno;
                continue;
            }
            int rc = connect(s, ai->ai_addr, ai->ai_addrlen);
            if (rc != 0 && errno == EINPROGRESS) {
                /* bounded by the remaining deadline, at most 1 s per attempt */
                struct pollfd p = { s, POLLOUT, 0 };
                int ms = ddpc__deadline_ms(deadline, 1000);
                rc = -1;
                errno = ETIMEDOUT;
                if (poll(&p, 1, ms) > 0) {
                    int e = 0;
                    socklen_t el = sizeof e;
                    getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
                    if (e == 0)
                        rc = 0;
                    else
                        errno = e;
                }
            }
            if (rc == 0) {
                freeaddrinfo(res);
                ddpc__sock_set_nonblock(s, 0);
                *fd = s;
                return DDPC_OK;
            }
            last_err = errno;
            close(s);
        }
        freeaddrinfo(res);
        if (listening && last_err == ECONNREFUSED)
            return ddpc__err_errno(DDPC_ERR_PEER_LOST, last_err,
                                   "nothing listens at %s:%d any more", host, port);
        if (ddpc__expired(deadline))
            return ddpc__err_errno(DDPC_ERR_TIMEOUT, last_err, "cannot connect to %s:%d", host,
                                   port);
        double left = deadline - ddpc__now();
        ddpc__sleep(backoff < left ? backoff : left);
        if (backoff < 0.25) backoff *= 2;
    }
}

ddpc_status ddpc__sock_read_full(int fd, void *buf, size_t len, double deadline, int abort_fd) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) return ddpc__err(DDPC_ERR_PEER_LOST, "connection closed by peer");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            ddpc_status s = wait_fd(fd, POLLIN, deadline, abort_fd);
            if (s == DDPC_ERR_TIMEOUT) return ddpc__err(s, "timed out reading from peer");
            if (s == DDPC_ERR_ABORTED) return ddpc__err(s, "aborted while reading from peer");
            DDPC_CHECK(s);
            continue;
        }
        if (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT)
            return ddpc__err_errno(DDPC_ERR_PEER_LOST, errno, "reading from peer");
        return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "recv");
    }
    return DDPC_OK;
}

ddpc_status ddpc__sock_write_full(int fd, const void *buf, size_t len, double deadline,
                                  int abort_fd) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ddpc_status s = wait_fd(fd, POLLOUT, deadline, abort_fd);
            if (s == DDPC_ERR_TIMEOUT) return ddpc__err(s, "timed out writing to peer");
            if (s == DDPC_ERR_ABORTED) return ddpc__err(s, "aborted while writing to peer");
            DDPC_CHECK(s);
            continue;
        }
        if (n < 0 && (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT))
            return ddpc__err_errno(DDPC_ERR_PEER_LOST, errno, "writing to peer");
        return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "send");
    }
    return DDPC_OK;
}
