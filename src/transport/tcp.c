/*
 * tcp.c — the TCP transport: one non-blocking stream socket per peer.
 *
 * Every socket gets TCP_NODELAY (small collectives must not wait for Nagle)
 * and DDPC_SOCKBUF bytes of send and receive buffer (a ring step's chunk
 * should fit in flight). Transfers use sendmsg/recvmsg over the transfer's
 * two ranges (header + payload in one system call) with MSG_DONTWAIT, so a
 * call never blocks; the communicator's progress loop polls the descriptor.
 * Blocking whole-buffer I/O (handshakes) goes through base/sock.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/env.h"
#include "base/sock.h"
#include "transport/transport.h"

struct ddpc_conn {
    int fd;
};

struct ddpc_listener {
    int fd;
};

void ddpc__xfer_init(ddpc_xfer *x, void *a, size_t alen, void *b, size_t blen) {
    x->niov = 0;
    if (alen) x->iov[x->niov++] = (struct iovec){ a, alen };
    if (blen) x->iov[x->niov++] = (struct iovec){ b, blen };
    x->total = alen + blen;
    x->done = 0;
    x->combine = NULL;
    x->combine_ctx = NULL;
    x->unit = 1;
}

/* DDPC_SOCKBUF, read once per connection (a bad value falls back to the OS
 * default with a warning rather than failing set-up). */
static int sockbuf_bytes(void) {
    long v;
    if (ddpc__env_long(DDPC_ENV_SOCKBUF, &v) != DDPC_OK) {
        DDPC_WARN(NET, "%s; using the OS default socket buffers", ddpc_last_error());
        return 0;
    }
    return (int)v;
}

static ddpc_status wrap_fd(int fd, ddpc_conn **out) {
    ddpc__sock_tune(fd, sockbuf_bytes());
    ddpc_status s = ddpc__sock_set_nonblock(fd, 1);
    if (s != DDPC_OK) {
        close(fd);
        return s;
    }
    ddpc_conn *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        return ddpc__err(DDPC_ERR_NOMEM, "tcp: out of memory for a connection");
    }
    c->fd = fd;
    *out = c;
    return DDPC_OK;
}

/* Listens on ip, on the first free port of ports. */
static ddpc_status tcp_listen(const char *ip, const ddpc_ports *ports, ddpc_listener **out,
                              int *port) {
    int fd = -1;
    DDPC_CHECK(ddpc__sock_listen_ports(ip, ports, 1024, &fd, port));
    /* accepted sockets inherit the listener's buffer sizes */
    ddpc__sock_tune(fd, sockbuf_bytes());
    ddpc_listener *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return ddpc__err(DDPC_ERR_NOMEM, "tcp: out of memory for a listener");
    }
    l->fd = fd;
    *out = l;
    return DDPC_OK;
}

static ddpc_status tcp_accept(ddpc_listener *l, double deadline, int abort_fd, ddpc_conn **out) {
    int fd;
    DDPC_CHECK(ddpc__sock_accept(l->fd, deadline, abort_fd, &fd));
    return wrap_fd(fd, out);
}

static ddpc_status tcp_connect(const char *ip, int port, double deadline, ddpc_conn **out) {
    int fd;
    DDPC_CHECK(ddpc__sock_connect(ip, port, deadline, &fd));
    return wrap_fd(fd, out);
}

static void tcp_close_listener(ddpc_listener *l) {
    if (!l) return;
    close(l->fd);
    free(l);
}

/* The unmoved part of x as an iovec array in tmp; returns its length. */
static int remaining_iov(const ddpc_xfer *x, struct iovec tmp[2]) {
    size_t skip = x->done;
    int n = 0;
    for (int i = 0; i < x->niov; i++) {
        if (skip >= x->iov[i].iov_len) {
            skip -= x->iov[i].iov_len;
            continue;
        }
        tmp[n].iov_base = (char *)x->iov[i].iov_base + skip;
        tmp[n].iov_len = x->iov[i].iov_len - skip;
        skip = 0;
        n++;
    }
    return n;
}

static ddpc_status io_error(int err, const char *what) {
    if (err == ECONNRESET || err == EPIPE || err == ETIMEDOUT || err == ENOTCONN ||
        err == ESHUTDOWN)
        return ddpc__err_errno(DDPC_ERR_PEER_LOST, err, "%s", what);
    return ddpc__err_errno(DDPC_ERR_SYSTEM, err, "%s", what);
}

static ddpc_status tcp_send(ddpc_conn *c, ddpc_xfer *x, size_t *moved) {
    size_t start = x->done;
    while (x->done < x->total) {
        struct iovec tmp[2];
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = tmp;
        m.msg_iovlen = (size_t)remaining_iov(x, tmp);
        ssize_t n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            x->done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (moved) *moved = x->done - start;
        return io_error(n < 0 ? errno : EPIPE, "send");
    }
    if (moved) *moved = x->done - start;
    return DDPC_OK;
}

static ddpc_status tcp_recv(ddpc_conn *c, ddpc_xfer *x, size_t *moved) {
    size_t start = x->done;
    while (x->done < x->total) {
        struct iovec tmp[2];
        struct msghdr m;
        memset(&m, 0, sizeof m);
        m.msg_iov = tmp;
        m.msg_iovlen = (size_t)remaining_iov(x, tmp);
        ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT);
        if (n > 0) {
            x->done += (size_t)n;
            continue;
        }
        if (moved) *moved = x->done - start;
        if (n == 0) return ddpc__err(DDPC_ERR_PEER_LOST, "the peer closed the connection");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return DDPC_OK;
        return io_error(errno, "recv");
    }
    if (moved) *moved = x->done - start;
    return DDPC_OK;
}

static ddpc_status tcp_peek(ddpc_conn *c, void *buf, size_t len, size_t *got, int *eof) {
    *got = 0;
    *eof = 0;
    for (;;) {
        ssize_t n = recv(c->fd, buf, len, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) {
            *got = (size_t)n;
            return DDPC_OK;
        }
        if (n == 0) {
            *eof = 1;
            return DDPC_OK;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return DDPC_OK;
        if (errno == ECONNRESET || errno == ENOTCONN) {
            *eof = 1;
            return DDPC_OK;
        }
        return io_error(errno, "recv(MSG_PEEK)");
    }
}

static ddpc_status tcp_send_full(ddpc_conn *c, const void *buf, size_t len, double deadline,
                                 int abort_fd) {
    return ddpc__sock_write_full(c->fd, buf, len, deadline, abort_fd);
}

static ddpc_status tcp_recv_full(ddpc_conn *c, void *buf, size_t len, double deadline,
                                 int abort_fd) {
    return ddpc__sock_read_full(c->fd, buf, len, deadline, abort_fd);
}

static int tcp_poll_fd(const ddpc_conn *c) { return c->fd; }

static void tcp_shutdown(ddpc_conn *c) { shutdown(c->fd, SHUT_RDWR); }

static void tcp_close(ddpc_conn *c) {
    if (!c) return;
    close(c->fd);
    free(c);
}

const ddpc_transport ddpc__transport_tcp = {
    .name = "tcp",
    .listen = tcp_listen,
    .accept = tcp_accept,
    .connect = tcp_connect,
    .close_listener = tcp_close_listener,
    .send = tcp_send,
    .recv = tcp_recv,
    .peek = tcp_peek,
    .send_full = tcp_send_full,
    .recv_full = tcp_recv_full,
    .poll_fd = tcp_poll_fd,
    .shutdown = tcp_shutdown,
    .close = tcp_close,
};
