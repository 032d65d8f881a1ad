/*
 * sock.h — TCP sockets with deadlines: listen, connect with retry, accept,
 * full reads and writes that handle partial transfers, EINTR and EAGAIN.
 * IPv4 and IPv6. Writes use MSG_NOSIGNAL: a dead peer is an error, never a
 * SIGPIPE.
 */
#ifndef DDPC_SOCK_H
#define DDPC_SOCK_H

#include <stddef.h>
#include <sys/socket.h>

#include "base/base.h"

/* Listens on host:port (host NULL/"" = any, IPv6 dual-stack when possible;
 * port 0 = a free port). *bound_port gets the actual port. Port in use is
 * DDPC_ERR_SYSTEM naming host:port. */
ddpc_status ddpc__sock_listen(const char *host, int port, int backlog, int *fd, int *bound_port);
/* As ddpc__sock_listen; *in_use (may be NULL) is 1 when the failure was the
 * port being taken (EADDRINUSE), else 0, so that a caller trying a range of
 * ports tells a taken port from a real failure without reading the message. */
ddpc_status ddpc__sock_listen_try(const char *host, int port, int backlog, int *fd, int *bound_port,
                                  int *in_use);
/* The ports a listener may take: ranges tried in turn, from the first'th
 * port counted over all of them (wrapping round); n == 0: any free port.
 * Filled from the environment by src/comm/ports.c. */
#define DDPC_PORT_RANGES 64
typedef struct ddpc__ports {
    int n;
    int lo[DDPC_PORT_RANGES], hi[DDPC_PORT_RANGES]; /* inclusive */
    int first;
    char why[128]; /* where they came from, for errors ("HCCL_IF_BASE_PORT=60000") */
} ddpc__ports;
/* As ddpc__sock_listen on the first free port of ports (NULL: any free
 * port); every port taken is DDPC_ERR_SYSTEM naming host, the ranges and
 * where they came from. */
ddpc_status ddpc__sock_listen_ports(const char *host, const ddpc__ports *ports, int backlog,
                                    int *fd, int *bound_port);
/* Accepts one connection before deadline (abort_fd >= 0: also returns
 * DDPC_ERR_ABORTED as soon as abort_fd becomes readable). */
ddpc_status ddpc__sock_accept(int lfd, double deadline, int abort_fd, int *fd);
/* Connects to host:port, retrying refused / unreachable attempts with
 * backoff until deadline. The error names host:port and the last errno. */
ddpc_status ddpc__sock_connect(const char *host, int port, double deadline, int *fd);
/* As ddpc__sock_connect; listening = 1: the peer is known to have been
 * listening there, so a refusal (nothing listens any more) is
 * DDPC_ERR_PEER_LOST at once instead of being retried. */
ddpc_status ddpc__sock_connect_to(const char *host, int port, double deadline, int listening,
                                  int *fd);

/* Reads / writes exactly len bytes before deadline. EOF or reset is
 * DDPC_ERR_PEER_LOST; the deadline passing is DDPC_ERR_TIMEOUT. Works on
 * blocking and non-blocking sockets. abort_fd as for accept (-1 = none). */
ddpc_status ddpc__sock_read_full(int fd, void *buf, size_t len, double deadline, int abort_fd);
ddpc_status ddpc__sock_write_full(int fd, const void *buf, size_t len, double deadline,
                                  int abort_fd);

ddpc_status ddpc__sock_set_nonblock(int fd, int on);
/* TCP_NODELAY, keepalive, and send/receive buffers of bufsize bytes (0 = OS default). */
ddpc_status ddpc__sock_tune(int fd, int bufsize);

/* Numeric address of a sockaddr as text ("127.0.0.1", "::1"), and its port. */
void ddpc__sock_addr_str(const struct sockaddr *sa, char *buf, size_t len, int *port);
/* The local address and port of a connected or bound socket. */
ddpc_status ddpc__sock_local_addr(int fd, char *buf, size_t len, int *port);

#endif /* DDPC_SOCK_H */
