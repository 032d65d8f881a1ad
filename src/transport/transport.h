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

#include "base/auth.h"
#include "base/base.h"
#include "base/sock.h"

typedef struct ddpc_conn ddpc_conn;         /* one connection to one peer */
typedef struct ddpc_listener ddpc_listener; /* where peers connect to us */

/* Combines n bytes (whole units) that arrived at src into dst (a range of
 * the receive's iov[1]) instead of copying them there. */
typedef void (*ddpc_combine_fn)(void *dst, const void *src, size_t n, void *ctx);

/* A transfer in flight: the bytes of iov[0..niov) in order. The transport
 * advances done; the transfer is complete when done == total. */
typedef struct ddpc_xfer {
    struct iovec iov[2];
    int niov;
    size_t total; /* bytes in all iov */
    size_t done;  /* bytes moved so far */
    /* Optional, on a receive with two ranges, and only given to a transport
     * whose combines is set: iov[1]'s bytes go through combine, unit bytes
     * (at most 16, a divisor of iov[1]'s length) at a time, never part of
     * one; and a call that moves iov[0]'s last byte moves none of iov[1]'s,
     * so that the caller can check a header before anything is combined. */
    ddpc_combine_fn combine;
    void *combine_ctx;
    size_t unit;
} ddpc_xfer;

/* Fills x with up to two ranges (len 0 ranges are skipped); no combine. */
void ddpc__xfer_init(ddpc_xfer *x, void *a, size_t alen, void *b, size_t blen);

typedef struct ddpc_transport {
    const char *name;
    /* Listen, accept, connect: NULL where connections are made otherwise
     * (shm). Listens on ip (numeric IPv4 or IPv6), on the first free port
     * of ports (NULL or none: any free port; base/sock.h). *port gets the
     * bound port. */
    ddpc_status (*listen)(const char *ip, const ddpc_ports *ports, ddpc_listener **out, int *port);
    /* Accepts one connection before deadline; abort_fd readable = ABORTED. */
    ddpc_status (*accept)(ddpc_listener *l, double deadline, int abort_fd, ddpc_conn **out);
    /* Connects to ip:port, retrying until deadline; listening = 1: the peer
     * is known to listen there, so a refusal is DDPC_ERR_PEER_LOST at once. */
    ddpc_status (*connect)(const char *ip, int port, double deadline, int listening,
                           ddpc_conn **out);
    void (*close_listener)(ddpc_listener *l); /* NULL harmless */
    /* The descriptors to poll() for progress on l (POLLIN): its socket, then
     * the connections it holds still proving the job token; up to max into
     * fds, returns how many (at most 1 + 64). */
    int (*listener_fds)(const ddpc_listener *l, int *fds, int max);

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
    ddpc_status (*recv_full)(ddpc_conn *c, void *buf, size_t len, double deadline, int abort_fd);
    /* Optional: finishes send x (begun with send), blocking until deadline
     * or abort_fd; NULL where send_full of x's remaining bytes does it. */
    ddpc_status (*send_rest)(ddpc_conn *c, ddpc_xfer *x, double deadline, int abort_fd);

    /* The descriptor to poll() for readiness (POLLIN: bytes or EOF to
     * receive; POLLOUT: room to send), or -1 when the transport has none. */
    int (*poll_fd)(const ddpc_conn *c);
    /* Optional (NULL for TCP, whose descriptor is its readiness). Before
     * sleeping in poll() until c is ready for events (POLLIN, POLLOUT),
     * the waiter calls arm(c, events): 1 = ready already (or the peer is
     * gone): do not sleep; 0 = armed: the peer will make poll_fd readable
     * (POLLIN; ask for nothing else, the descriptor is always writable)
     * once c may be ready. After the wait, arm(c, 0) disarms. Readable
     * without c being ready is possible (a late doorbell); retry. */
    int (*arm)(ddpc_conn *c, short events);
    /* Makes every later transfer fail and the peer see this side as gone.
     * Thread-safe, idempotent. */
    void (*shutdown)(ddpc_conn *c);
    void (*close)(ddpc_conn *c); /* NULL harmless */
    int combines;                /* 1: recv honours ddpc_xfer's combine */
} ddpc_transport;

/* TCP over IPv4 or IPv6: non-blocking sockets, TCP_NODELAY, DDPC_SOCKBUF
 * send and receive buffers. */
extern const ddpc_transport ddpc__transport_tcp;

/* TCP's connect in steps, for a caller that must not wait for the peer to
 * answer (a lazy link, which the peer answers from its progress engine:
 * comm/link.c). connect_start connects to ip:port before deadline
 * (listening as for connect) and, with a job token, sends the token
 * handshake's hello (auth.h) and sets *authing. connect_step then takes
 * the handshake as far as what has arrived allows, never waiting for
 * more (writes are a 32-byte proof, bounded by deadline): *done = 1 once
 * the peer accepted the token, the connection then being the caller's.
 * Errors are auth.h's, naming ip:port. */
ddpc_status ddpc__tcp_connect_start(const char *ip, int port, double deadline, int listening,
                                    ddpc__auth_cli *auth, int *authing, ddpc_conn **out);
ddpc_status ddpc__tcp_connect_step(ddpc_conn *c, ddpc__auth_cli *auth, const char *ip, int port,
                                   double deadline, int *done);

/* Shared memory between two processes of one host: two byte rings of
 * DDPC_SHM_BYTES in a POSIX shared-memory segment, the pair's TCP socket
 * kept as doorbell and liveness channel. No listen/accept/connect: a pair
 * upgrades its established TCP connection tcp (borrowed) in three steps,
 * the lower rank calling offer then finish, the higher one join between:
 *   offer:  creates the segment and sends its name, or a refusal when it
 *           cannot (warned; *pending = NULL);
 *   join:   reads the offer, maps the segment and answers; *out = the shm
 *           connection, or NULL when either side could not (warned);
 *   finish: reads the answer and removes the segment's name; *out as for
 *           join. Consumes pending (NULL included) on every path.
 * The offers to higher ranks never block, so a rank can make all of them
 * before joining its lower ranks' and finishing its own. *out holds its
 * own duplicate of tcp's socket: the caller closes tcp either way. A
 * status other than DDPC_OK is a failure of the TCP exchange itself (peer
 * lost, deadline, abort_fd, a corrupt message); shared memory being
 * unavailable never is. peer names the other side in warnings. */
extern const ddpc_transport ddpc__transport_shm;
typedef struct ddpc_shm_pending ddpc_shm_pending;
ddpc_status ddpc__shm_offer(ddpc_conn *tcp, const char *peer, size_t ring_bytes, double deadline,
                            int abort_fd, ddpc_shm_pending **pending);
ddpc_status ddpc__shm_join(ddpc_conn *tcp, const char *peer, size_t ring_bytes, double deadline,
                           int abort_fd, ddpc_conn **out);
ddpc_status ddpc__shm_finish(ddpc_shm_pending *pending, ddpc_conn *tcp, const char *peer,
                             double deadline, int abort_fd, ddpc_conn **out);
/* Unmaps and removes an offered segment that will not be finished. NULL harmless. */
void ddpc__shm_pending_free(ddpc_shm_pending *pending);
/* DDPC_SHM_COPY's value (NULL = unset) as the transport's policy for
 * copies into a ring: 0 auto, 1 cached, 2 stream; -1 for anything else.
 * A new shm connection starts with auto; set_copy_policy sets another. */
int ddpc__shm_copy_policy(const char *value);
void ddpc__shm_set_copy_policy(ddpc_conn *shm, int policy);

/* One pair's link over n (2..DDPC_STREAMS_MAX) TCP connections made by the
 * caller, a message's parts spread over them (streams.c:
 * DDPC_SOCKETS_PER_PEER). Both ends must hand over the same connections in
 * the same order (stream k here is stream k there). create takes the
 * connections (tcp's, owned from then on, closed on failure too); send,
 * recv and friends as tcp's, a header (send_full, peek) on stream 0. */
#define DDPC_STREAMS_MAX 16
extern const ddpc_transport ddpc__transport_streams;
ddpc_status ddpc__streams_create(ddpc_conn **streams, int n, ddpc_conn **out);
/* The connections c (of ddpc__transport_streams) spreads over. */
int ddpc__streams_count(const ddpc_conn *c);
/* Stream k's socket (tests look at what each carried); -1 out of range. */
int ddpc__streams_fd(const ddpc_conn *c, int k);

#endif /* DDPC_TRANSPORT_H */
