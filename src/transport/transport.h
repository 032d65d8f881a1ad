/*
 * transport.h — the table of functions a transport implements: moving bytes
 * between this rank and one peer over a full-duplex, ordered byte stream.
 *
 * The communicator (src/comm) owns the connections and drives them; the
 * collectives (src/coll) never see a transport directly. A transport knows
 * nothing of ranks, headers or collectives: it sets up connections and moves
 * the bytes of a transfer (a list of at most two byte ranges) as far as it
 * can without blocking. Waiting is done by the communicator's progress loop,
 * on the descriptor the transport exposes (poll) — so a shared-memory
 * transport slots in beside TCP by exposing an eventfd.
 *
 * Thread-safety: one thread at a time drives a connection; shutdown() may be
 * called from any thread, at any time, and makes every later transfer on the
 * connection fail (that is how abort wakes a blocked progress loop).
 */
#ifndef DDPC_TRANSPORT_H
#define DDPC_TRANSPORT_H

#include <stddef.h>
#include <sys/uio.h>

#include "base/base.h"

typedef struct ddpc_conn ddpc_conn;         /* one connection to one peer */
typedef struct ddpc_listener ddpc_listener; /* where peers connect to us */

/* A transfer in flight: the bytes of iov[0..niov) in order. The transport
 * advances done; the transfer is complete when done == total. */
typedef struct ddpc_xfer {
    struct iovec iov[2];
    int niov;
    size_t total; /* bytes in all iov */
    size_t done;  /* bytes moved so far */
} ddpc_xfer;

/* Fills x with up to two ranges (len 0 ranges are skipped). */
void ddpc_xfer_init(ddpc_xfer *x, void *a, size_t alen, void *b, size_t blen);

typedef struct ddpc_transport {
    const char *name;
    /* Listens on ip (numeric IPv4 or IPv6). base_port > 0: the first free
     * port in [base_port, base_port + 1023]; 0: any free port. *port gets
     * the bound port. */
    ddpc_status (*listen)(const char *ip, int base_port, ddpc_listener **out, int *port);
    /* Accepts one connection before deadline; abort_fd readable = ABORTED. */
    ddpc_status (*accept)(ddpc_listener *l, double deadline, int abort_fd, ddpc_conn **out);
    /* Connects to ip:port, retrying until deadline. */
    ddpc_status (*connect)(const char *ip, int port, double deadline, ddpc_conn **out);
    void (*close_listener)(ddpc_listener *l); /* NULL harmless */

    /* Move as many bytes of x as possible without blocking; DDPC_OK even
     * when none moved. EOF or reset = DDPC_ERR_PEER_LOST. *moved (may be
     * NULL) gets the bytes moved by this call. */
    ddpc_status (*send)(ddpc_conn *c, ddpc_xfer *x, size_t *moved);
    ddpc_status (*recv)(ddpc_conn *c, ddpc_xfer *x, size_t *moved);
    /* Copies up to len bytes waiting to be received without consuming them;
     * *got = bytes copied, *eof = 1 when the peer closed and nothing waits. */
    ddpc_status (*peek)(ddpc_conn *c, void *buf, size_t len, size_t *got, int *eof);
    /* Whole-buffer blocking transfers bounded by deadline (handshakes). */
    ddpc_status (*send_full)(ddpc_conn *c, const void *buf, size_t len, double deadline,
                             int abort_fd);
    ddpc_status (*recv_full)(ddpc_conn *c, void *buf, size_t len, double deadline,
                             int abort_fd);

    /* The descriptor to poll() for readiness (POLLIN: bytes or EOF to
     * receive; POLLOUT: room to send), or -1 when the transport has none. */
    int (*poll_fd)(const ddpc_conn *c);
    /* Makes every later transfer fail and the peer see this side as gone.
     * Thread-safe, idempotent. */
    void (*shutdown)(ddpc_conn *c);
    void (*close)(ddpc_conn *c); /* NULL harmless */
} ddpc_transport;

/* TCP over IPv4 or IPv6: non-blocking sockets, TCP_NODELAY, DDPC_SOCKBUF
 * send and receive buffers. */
extern const ddpc_transport ddpc_transport_tcp;

#endif /* DDPC_TRANSPORT_H */
