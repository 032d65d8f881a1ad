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

#include "base/auth.h"
#include "base/env.h"
#include "base/sock.h"
#include "transport/transport.h"

struct ddpc__conn {
    int fd;
};

/* A connection accepted but still proving the job token (auth.h). */
typedef struct pending {
    int fd;
    double deadline; /* closed when it has not proved it by then */
    char peer[72];   /* "addr:port", for warnings */
    ddpc__auth_srv a;
} pending;

#define MAX_PENDING 64 /* a listener's connections still authenticating */

struct ddpc__listener {
    int fd;
    int port;
    char *token;   /* DDPC_JOB_TOKEN when listening (owned); NULL: no authentication */
    double auth_s; /* DDPC_AUTH_TIMEOUT */
    int npend;
    pending pend[MAX_PENDING];
};

void ddpc__xfer_init(ddpc__xfer *x, void *a, size_t alen, void *b, size_t blen) {
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

static ddpc_status wrap_fd(int fd, ddpc__conn **out) {
    ddpc__sock_tune(fd, sockbuf_bytes());
    ddpc_status s = ddpc__sock_set_nonblock(fd, 1);
    if (s != DDPC_OK) {
        close(fd);
        return s;
    }
    ddpc__conn *c = malloc(sizeof *c);
    if (!c) {
        close(fd);
        return ddpc__err(DDPC_ERR_NOMEM, "tcp: out of memory for a connection");
    }
    c->fd = fd;
    *out = c;
    return DDPC_OK;
}

/* Listens on ip, on the first free port of ports. */
static ddpc_status tcp_listen(const char *ip, const ddpc__ports *ports, ddpc__listener **out,
                              int *port) {
    int fd = -1;
    DDPC_CHECK(ddpc__sock_listen_ports(ip, ports, 1024, &fd, port));
    /* accepted sockets inherit the listener's buffer sizes */
    ddpc__sock_tune(fd, sockbuf_bytes());
    const char *token = NULL;
    ddpc__listener *l = NULL;
    ddpc_status s = ddpc__sock_set_nonblock(fd, 1); /* accept_new takes what waits, never more */
    if (s == DDPC_OK) s = ddpc__whitelist_load();
    if (s == DDPC_OK) s = ddpc__auth_token(&token);
    if (s == DDPC_OK && !(l = calloc(1, sizeof *l)))
        s = ddpc__err(DDPC_ERR_NOMEM, "tcp: out of memory for a listener");
    if (s == DDPC_OK && token && !(l->token = strdup(token)))
        s = ddpc__err(DDPC_ERR_NOMEM, "tcp: out of memory for a listener");
    if (s == DDPC_OK) s = ddpc__env_double(DDPC_ENV_AUTH_TIMEOUT, &l->auth_s);
    if (s != DDPC_OK) {
        close(fd);
        if (l) free(l->token);
        free(l);
        return s;
    }
    l->fd = fd;
    l->port = *port;
    *out = l;
    return DDPC_OK;
}

/* Closes pending connection i of l, saying why at WARN (NULL: silently). */
static void drop_pending(ddpc__listener *l, int i, const char *why) {
    if (why)
        DDPC_WARN(NET, "data port %d: refused the connection from %s: %s", l->port, l->pend[i].peer,
                  why);
    close(l->pend[i].fd);
    l->pend[i] = l->pend[--l->npend];
}

/* Pending connection i is gone after its hello, in the middle of the
 * handshake: a peer that took the other connection of the pair instead
 * (comm/link.c, rule 1), as far as this side can tell; closed, said at
 * INFO (what did not say a hello is warned of). */
static void drop_withdrawn(ddpc__listener *l, int i) {
    DDPC_INFO(NET, "data port %d: %s closed its connection after its job token's hello", l->port,
              l->pend[i].peer);
    drop_pending(l, i, NULL);
}

/* Reads what pending connection i has sent and answers it. 1: it proved
 * the token (its verdict sent; *fd is it, removed from the set); 0: not
 * yet; -1: dropped. */
static int step_pending(ddpc__listener *l, int i, int *fd) {
    pending *p = &l->pend[i];
    for (int rounds = 0; rounds < 4; rounds++) {
        size_t need = ddpc__auth_srv_need(&p->a);
        ssize_t n = recv(p->fd, p->a.in + p->a.have, need, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0 && p->a.stage == 1) {
            drop_withdrawn(l, i);
            return -1;
        }
        if (n <= 0) {
            drop_pending(l, i, "it closed the connection during the job token's handshake");
            return -1;
        }
        p->a.have += (size_t)n;
        unsigned char out[DDPC_AUTH_CHALLENGE];
        size_t olen = 0;
        char why[256];
        int r = ddpc__auth_srv_step(&p->a, l->token, out, &olen, why, sizeof why);
        int wrote = !olen || ddpc__sock_write_full(p->fd, out, olen, p->deadline, -1) == DDPC_OK;
        if (!wrote && r == 1) { /* the challenge: it left after its hello */
            drop_withdrawn(l, i);
            return -1;
        }
        if (!wrote && r >= 0)
            r = -1, snprintf(why, sizeof why, "cannot answer it: %s", ddpc_last_error());
        if (r < 0) {
            drop_pending(l, i, why);
            return -1;
        }
        if (r == 2) {
            *fd = p->fd;
            l->pend[i] = l->pend[--l->npend];
            return 1;
        }
    }
    return 0;
}

/* Accepts what waits on l's socket: a connection from outside the
 * whitelist is closed (warned); without a token the first one is returned
 * in *fd (1); with one, each joins the pending set (the oldest dropped
 * when it is full). */
static int accept_new(ddpc__listener *l, int *fd) {
    for (int k = 0; k < 16; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int c = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) return 0;
        char what[32];
        snprintf(what, sizeof what, "data port %d", l->port);
        if (!ddpc__admit_addr(what, (struct sockaddr *)&ss)) {
            close(c);
            continue;
        }
        if (!l->token) {
            *fd = c;
            return 1;
        }
        if (l->npend == MAX_PENDING) drop_pending(l, 0, "too many connections authenticating");
        pending *p = &l->pend[l->npend++];
        int port = 0;
        char host[64];
        ddpc__sock_addr_str((struct sockaddr *)&ss, host, sizeof host, &port);
        snprintf(p->peer, sizeof p->peer, "%s:%d", host, port);
        p->fd = c;
        p->deadline = ddpc__now() + l->auth_s;
        ddpc__auth_srv_init(&p->a, DDPC_AUTH_DATA);
    }
    return 0;
}

/* Returns the next connection that passes the whitelist and, with a job
 * token, proves it; the others are closed with a warning naming their
 * address and the job goes on. Connections authenticate side by side, so
 * one that stalls holds up nobody, for at most DDPC_AUTH_TIMEOUT. */
static ddpc_status tcp_accept(ddpc__listener *l, double deadline, int abort_fd, ddpc__conn **out) {
    for (;;) {
        struct pollfd pf[MAX_PENDING + 2];
        double next = deadline, now = ddpc__now();
        for (int i = l->npend - 1; i >= 0; i--)
            if (now >= l->pend[i].deadline) {
                char why[96];
                snprintf(why, sizeof why,
                         "it did not prove the job token within DDPC_AUTH_TIMEOUT=%g s", l->auth_s);
                drop_pending(l, i, why);
            }
        int fd = -1;
        for (int i = l->npend - 1; i >= 0; i--)
            if (step_pending(l, i, &fd) > 0) return wrap_fd(fd, out);
        pf[0] = (struct pollfd){ l->fd, POLLIN, 0 };
        pf[1] = (struct pollfd){ abort_fd, POLLIN, 0 };
        for (int i = 0; i < l->npend; i++) {
            pf[i + 2] = (struct pollfd){ l->pend[i].fd, POLLIN, 0 };
            if (l->pend[i].deadline < next) next = l->pend[i].deadline;
        }
        if (ddpc__expired(deadline))
            return ddpc__err(DDPC_ERR_TIMEOUT, "timed out waiting for a connection");
        int n = poll(pf, (nfds_t)l->npend + 2, ddpc__deadline_ms(next, 1000));
        if (n < 0 && errno != EINTR) return ddpc__err_errno(DDPC_ERR_SYSTEM, errno, "poll");
        if (n > 0 && abort_fd >= 0 && (pf[1].revents & POLLIN))
            return ddpc__err(DDPC_ERR_ABORTED, "aborted while waiting for a connection");
        if (n > 0 && (pf[0].revents & POLLIN) && accept_new(l, &fd)) return wrap_fd(fd, out);
    }
}

ddpc_status ddpc__tcp_dial(const char *ip, int port, double deadline, int listening,
                           ddpc__conn **out) {
    int fd;
    const char *token = NULL;
    DDPC_CHECK(ddpc__auth_token(&token));
    DDPC_CHECK(ddpc__sock_connect_to(ip, port, deadline, listening, &fd));
    if (token) {
        char peer[96];
        snprintf(peer, sizeof peer, "the peer at %s:%d", ip, port);
        ddpc_status s = ddpc__auth_client(fd, token, DDPC_AUTH_DATA, deadline, -1, peer);
        if (s != DDPC_OK) {
            close(fd);
            return s;
        }
    }
    return wrap_fd(fd, out);
}

ddpc_status ddpc__tcp_connect_start(const char *ip, int port, double deadline, int listening,
                                    ddpc__auth_cli *auth, int *authing, ddpc__conn **out) {
    int fd;
    const char *token = NULL;
    *authing = 0;
    DDPC_CHECK(ddpc__auth_token(&token));
    DDPC_CHECK(ddpc__sock_connect_to(ip, port, deadline, listening, &fd));
    if (token) {
        unsigned char hello[DDPC_AUTH_HELLO];
        char peer[96];
        snprintf(peer, sizeof peer, "the peer at %s:%d", ip, port);
        ddpc_status s = ddpc__auth_cli_start(auth, DDPC_AUTH_DATA, hello);
        if (s == DDPC_OK && (s = ddpc__sock_write_full(fd, hello, sizeof hello, deadline, -1)))
            s = ddpc__auth_cli_lost(auth, s, peer);
        if (s != DDPC_OK) {
            close(fd);
            return s;
        }
        *authing = 1;
    }
    return wrap_fd(fd, out);
}

ddpc_status ddpc__tcp_connect_step(ddpc__conn *c, ddpc__auth_cli *auth, const char *ip, int port,
                                   double deadline, int *done) {
    const char *token = NULL;
    char peer[96];
    *done = 0;
    DDPC_CHECK(ddpc__auth_token(&token));
    snprintf(peer, sizeof peer, "the peer at %s:%d", ip, port);
    for (int rounds = 0; rounds < 4 && ddpc__auth_cli_need(auth) > 0; rounds++) {
        ssize_t n = recv(c->fd, auth->in + auth->have, ddpc__auth_cli_need(auth), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return DDPC_OK; /* not yet */
        if (n <= 0) {
            ddpc_status s = n == 0 ? ddpc__err(DDPC_ERR_PEER_LOST, "connection closed")
                                   : ddpc__err_errno(DDPC_ERR_PEER_LOST, errno, "recv");
            return ddpc__auth_cli_lost(auth, s, peer);
        }
        auth->have += (size_t)n;
        unsigned char proof[DDPC_AUTH_PROOF];
        size_t olen = 0;
        DDPC_CHECK(ddpc__auth_cli_step(auth, token, peer, proof, &olen));
        ddpc_status s = DDPC_OK;
        if (olen && (s = ddpc__sock_write_full(c->fd, proof, olen, deadline, -1)) != DDPC_OK)
            return ddpc__auth_cli_lost(auth, s, peer);
    }
    *done = ddpc__auth_cli_need(auth) == 0;
    return DDPC_OK;
}

static void tcp_close_listener(ddpc__listener *l) {
    if (!l) return;
    while (l->npend) drop_pending(l, l->npend - 1, NULL);
    close(l->fd);
    free(l->token);
    free(l);
}

static int tcp_listener_fds(const ddpc__listener *l, int *fds, int max) {
    int n = 0;
    if (max > 0) fds[n++] = l->fd;
    for (int i = 0; i < l->npend && n < max; i++) fds[n++] = l->pend[i].fd;
    return n;
}

/* The unmoved part of x as an iovec array in tmp; returns its length. */
static int remaining_iov(const ddpc__xfer *x, struct iovec tmp[2]) {
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

static ddpc_status tcp_send(ddpc__conn *c, ddpc__xfer *x, size_t *moved) {
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

static ddpc_status tcp_recv(ddpc__conn *c, ddpc__xfer *x, size_t *moved) {
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

static ddpc_status tcp_peek(ddpc__conn *c, void *buf, size_t len, size_t *got, int *eof) {
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

static ddpc_status tcp_send_full(ddpc__conn *c, const void *buf, size_t len, double deadline,
                                 int abort_fd) {
    return ddpc__sock_write_full(c->fd, buf, len, deadline, abort_fd);
}

static ddpc_status tcp_recv_full(ddpc__conn *c, void *buf, size_t len, double deadline,
                                 int abort_fd) {
    return ddpc__sock_read_full(c->fd, buf, len, deadline, abort_fd);
}

static int tcp_poll_fd(const ddpc__conn *c) { return c->fd; }

/* ------------------------------------------------------------ a pair */

static void tcp_close(ddpc__conn *c) {
    if (!c) return;
    close(c->fd);
    free(c);
}

/* TCP carries every pair, over one connection. */
static int tcp_can_connect(const ddpc__pair *pair) { return 1; }

/* The pair's one connection is its link. */
static ddpc_status tcp_pair_connect(const ddpc__pair *pair, ddpc__conn **conns, int n, void *res,
                                    double deadline, int abort_fd, ddpc__conn **out,
                                    const ddpc__transport **used) {
    for (int k = 1; k < n; k++) tcp_close(conns[k]);
    *out = conns[0];
    *used = &ddpc__transport_tcp;
    return DDPC_OK;
}

static void tcp_shutdown(ddpc__conn *c) { shutdown(c->fd, SHUT_RDWR); }

const ddpc__transport ddpc__transport_tcp = {
    .name = "tcp",
    .can_connect = tcp_can_connect,
    .connect = tcp_pair_connect,
    .listen = tcp_listen,
    .accept = tcp_accept,
    .close_listener = tcp_close_listener,
    .listener_fds = tcp_listener_fds,
    .send = tcp_send,
    .recv = tcp_recv,
    .peek = tcp_peek,
    .send_full = tcp_send_full,
    .recv_full = tcp_recv_full,
    .poll_fd = tcp_poll_fd,
    .shutdown = tcp_shutdown,
    .close = tcp_close,
};
