/*
 * conn.h — what the store server's two files share: a client connection
 * (its state, its input and its pending reply) and the server itself.
 * server.c owns the connections, their I/O and the poll loop, and queues
 * replies; requests.c executes decoded requests against the table. The
 * server thread alone touches any of it.
 *
 * Internal header (not installed).
 */
#ifndef DDPC_STORE_CONN_H
#define DDPC_STORE_CONN_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store/gate.h"
#include "store/proto.h"
#include "store/table.h"

/* A connection's state: its handshake, ready for a request, parked on a
 * GET or WAIT (wq), closing. */
enum { C_HANDSHAKE, C_READY, C_WAITING, C_CLOSING };

typedef struct conn {
    int fd;
    int state;
    char peer[72];     /* "addr:port" of the client, for logs */
    unsigned char *in; /* the frame being read (header included) */
    size_t in_have;    /* bytes of it read so far */
    size_t in_cap;
    unsigned char *out; /* the reply being written */
    size_t out_len, out_off;
    double deadline;            /* waiting: the request's timeout; closing: linger end */
    size_t drained;             /* closing: bytes discarded */
    int wr_shut;                /* closing: shutdown(SHUT_WR) done */
    int proto;                  /* PROTO_*, 0 until the first byte tells */
    int dialect;                /* TCPStore: TORCH_1 or TORCH_2, 0 until its first bytes tell */
    uint64_t wait_wake;         /* waiting on a BARRIER: the key's wake when it parked */
    size_t req_len;             /* TCPStore: bytes of the request being handled */
    store_req wq;               /* waiting: the parked GET or WAIT (points into in) */
    int admitted;               /* proved the job token, or none is needed (a torch client
                                  under DDPC_STORE_TORCH=1, or no token) */
    ddpc__gate_pending pending; /* until admitted: the job token's handshake (gate.c) */
} conn;

struct ddpc_store_server {
    int lfd;
    int port;
    int wake_fd; /* eventfd: stop request */
    pthread_t thread;
    conn **conns; /* nconns live connections */
    int nconns, cap;
    ddpc__table tab;
    ddpc__table queues;    /* torch 2.x's queues: each value is its items, u64 len + bytes each */
    uint64_t wake_seq;     /* the last ddpc__entry.wake given */
    int dirty;             /* a key was set since waiters were last checked */
    double accept_pause;   /* accept paused until then (fd limit reached) */
    ddpc__store_gate gate; /* who is let in: the job token, DDPC_AUTH_TIMEOUT, torch clients */
};

/* server.c: queues h + p as c's reply (on memory shortage c is closed
 * instead); a ddpc reply frame (status, payload), and one with a printf
 * message; a protocol violation answered (ddpc: RS_ERROR; TCPStore has no
 * error reply) and c closing. */
void ddpc__conn_queue(conn *c, const void *h, size_t hn, const void *p, size_t n);
void ddpc__conn_reply(conn *c, int status, const void *p, size_t n);
void ddpc__conn_reply_msg(conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ddpc__conn_fail(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* requests.c: executes one decoded request on c and, when it is finished
 * with, drops its bytes from the input (a GET or WAIT whose keys are
 * missing parks c in C_WAITING instead). */
void ddpc__req_handle(struct ddpc_store_server *s, conn *c, const store_req *q);

/* requests.c: re-examines c's parked GET or WAIT (c->wq): replies when its
 * keys exist, or RS_TIMEOUT once its deadline has passed. */
void ddpc__req_check_waiter(struct ddpc_store_server *s, conn *c, double now);

/* requests.c: the request just handled is done: drops its bytes from
 * c->in (a TCPStore client may have sent the next ones behind it). */
void ddpc__req_done(conn *c);

#endif /* DDPC_STORE_CONN_H */
