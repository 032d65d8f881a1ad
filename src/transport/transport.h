/*
 * transport.h — the table of functions a transport implements: whether it
 * can carry a pair of ranks, setting the pair's connection up, and moving
 * bytes between this rank and the peer over a full-duplex, ordered byte
 * stream.
 *
 * The shape is NCCL's (src/include/transport.h: canConnect, setup,
 * connect, free) and gloo's (transport/device.h: createPair): the
 * communicator (src/comm/link.c) runs one state machine per pair, the same
 * for pairs connected at creation and at first use, and asks the table
 * which transport carries the pair (can_connect, in ddpc__transports'
 * order: the first that can), then makes the pair's TCP connection(s),
 * greets the peer, and hands them to that transport (setup, connect) to
 * become the pair's link. A transport knows nothing of ranks beyond the
 * published endpoints it decides on, nor of headers or collectives. Adding
 * one (an RDMA verbs one, say) is a new file and an entry in
 * ddpc__transports (transport.c).
 *
 * Moving bytes: a transfer (a list of at most two byte ranges) goes as far
 * as it can without blocking. Waiting is done by the communicator's
 * progress loop, on the descriptor the transport exposes (poll) -- so a
 * shared-memory transport slots in beside TCP by exposing an eventfd.
 *
 * Thread-safety: one thread at a time drives a connection; shutdown() may be
 * called from any thread, at any time, and makes every later transfer on the
 * connection fail (that is how abort wakes a blocked progress loop).
 */
#ifndef DDPC_TRANSPORT_H
#define DDPC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "base/auth.h"
#include "base/base.h"
#include "base/sock.h"

typedef struct ddpc__conn ddpc__conn;         /* one connection to one peer */
typedef struct ddpc__listener ddpc__listener; /* where peers connect to us */

/* Combines n bytes (whole units) that arrived at src into dst (a range of
 * the receive's iov[1]) instead of copying them there. */
typedef void (*ddpc__combine_fn)(void *dst, const void *src, size_t n, void *ctx);

/* A transfer in flight: the bytes of iov[0..niov) in order. The transport
 * advances done; the transfer is complete when done == total. */
typedef struct ddpc__xfer {
    struct iovec iov[2];
    int niov;
    size_t total; /* bytes in all iov */
    size_t done;  /* bytes moved so far */
    /* Optional, on a receive with two ranges, and only given to a transport
     * whose combines is set: iov[1]'s bytes go through combine, unit bytes
     * (at most 16, a divisor of iov[1]'s length) at a time, never part of
     * one; and a call that moves iov[0]'s last byte moves none of iov[1]'s,
     * so that the caller can check a header before anything is combined. */
    ddpc__combine_fn combine;
    void *combine_ctx;
    size_t unit;
} ddpc__xfer;

/* Fills x with up to two ranges (len 0 ranges are skipped); no combine. */
void ddpc__xfer_init(ddpc__xfer *x, void *a, size_t alen, void *b, size_t blen);

/* What a rank publishes at bootstrap for its peers to reach it (its
 * "peer/<rank>" entry, comm/bootstrap.c): a transport decides from two of
 * these whether it can carry the pair, so both ends decide alike. */
typedef struct ddpc__endpoint {
    char host[128];   /* host id (DDPC_HOST_ID, else hostname/boot id/network namespace) */
    uint64_t machine; /* hash of the real host identity (DDPC_HOST_ID aside) */
    char ip[64];      /* where it listens for its peers */
    int port;
    int shm;        /* its DDPC_SHM */
    long shm_bytes; /* its DDPC_SHM_BYTES: ring bytes per direction */
} ddpc__endpoint;

/* One pair as the table's set-up functions see it (borrowed for a call). */
typedef struct ddpc__pair {
    const ddpc__endpoint *self, *peer;
    int rank, peer_rank;
    int streams;   /* DDPC_SOCKETS_PER_PEER, as rank 0 published it (1..DDPC_STREAMS_MAX) */
    int shm_copy;  /* DDPC_SHM_COPY, as ddpc__shm_copy_policy gives it */
    char name[32]; /* "rank 3": the peer, in warnings */
} ddpc__pair;

typedef struct ddpc__transport {
    const char *name;

    /* ---- setting a pair up (NCCL's canConnect, setup, connect, free) ----
     * Every pair starts as n TCP connections made, proved (job token) and
     * greeted by the communicator (comm/link.c); the transport then makes
     * them the pair's link, or upgrades the first one to something else
     * (shm: a segment offered over it, the socket kept as doorbell). */

    /* 0: this transport cannot carry the pair; else how many TCP
     * connections its link is made over (1; streams: DDPC_SOCKETS_PER_PEER).
     * Decided from the published endpoints alone, so both ends answer
     * alike; says at WARN why not where the two ends' settings differ.
     * Asked once per pair, when the communicator is made. */
    int (*can_connect)(const ddpc__pair *pair);
    /* Optional (NULL: nothing to set up; then can_connect is 1 or more and
     * connect needs no res). One end of the pair, the offering one, sets
     * the pair up: prepares what the link needs and sends the peer how to
     * reach it over the pair's first connection base (borrowed), bounded by
     * deadline; *res (never NULL after DDPC_OK, even where this end could
     * not offer and said so) then holds it until connect or free. Never
     * waits for the peer to answer. */
    ddpc_status (*setup)(const ddpc__pair *pair, ddpc__conn *base, double deadline, int abort_fd,
                         void **res);
    /* Makes the pair's link *out from its TCP connections conns[0, n),
     * which it takes (closed, or kept inside *out, on every path). Where
     * there is a setup: the offering end passes its res (consumed) and
     * reads the peer's answer; the other end passes NULL, reads the offer
     * and answers it; both read only what the peer has sent or is sending
     * now, bounded by deadline. *used: the transport that carries *out --
     * this one, or TCP where the pair could not have it (warned: the pair
     * then stays on conns[0]). A status other than DDPC_OK is a failure of
     * the TCP exchange itself (peer lost, deadline, abort_fd, a corrupt
     * message). */
    ddpc_status (*connect)(const ddpc__pair *pair, ddpc__conn **conns, int n, void *res,
                           double deadline, int abort_fd, ddpc__conn **out,
                           const struct ddpc__transport **used);
    /* Frees a res that connect will not consume (NULL harmless). */
    void (*free)(void *res);

    /* ---- listening (TCP alone: NULL where connections are made over
     * TCP's) ---- Listens on ip (numeric IPv4 or IPv6), on the first free
     * port of ports (NULL or none: any free port; base/sock.h). *port gets
     * the bound port. */
    ddpc_status (*listen)(const char *ip, const ddpc__ports *ports, ddpc__listener **out,
                          int *port);
    /* Accepts one connection before deadline; abort_fd readable = ABORTED. */
    ddpc_status (*accept)(ddpc__listener *l, double deadline, int abort_fd, ddpc__conn **out);
    void (*close_listener)(ddpc__listener *l); /* NULL harmless */
    /* The descriptors to poll() for progress on l (POLLIN): its socket, then
     * the connections it holds still proving the job token; up to max into
     * fds, returns how many (at most 1 + 64). */
    int (*listener_fds)(const ddpc__listener *l, int *fds, int max);

    /* ---- moving bytes ----
     * Move as many bytes of x as possible without blocking; DDPC_OK even
     * when none moved. EOF or reset = DDPC_ERR_PEER_LOST. *moved (may be
     * NULL) gets the bytes moved by this call. */
    ddpc_status (*send)(ddpc__conn *c, ddpc__xfer *x, size_t *moved);
    ddpc_status (*recv)(ddpc__conn *c, ddpc__xfer *x, size_t *moved);
    /* Copies up to len bytes waiting to be received without consuming them;
     * *got = bytes copied, *eof = 1 when the peer closed and nothing waits. */
    ddpc_status (*peek)(ddpc__conn *c, void *buf, size_t len, size_t *got, int *eof);
    /* Whole-buffer blocking transfers bounded by deadline (handshakes). */
    ddpc_status (*send_full)(ddpc__conn *c, const void *buf, size_t len, double deadline,
                             int abort_fd);
    ddpc_status (*recv_full)(ddpc__conn *c, void *buf, size_t len, double deadline, int abort_fd);
    /* Optional: finishes send x (begun with send), blocking until deadline
     * or abort_fd; NULL where send_full of x's remaining bytes does it. */
    ddpc_status (*send_rest)(ddpc__conn *c, ddpc__xfer *x, double deadline, int abort_fd);

    /* The descriptor to poll() for readiness (POLLIN: bytes or EOF to
     * receive; POLLOUT: room to send), or -1 when the transport has none. */
    int (*poll_fd)(const ddpc__conn *c);
    /* Optional (NULL for TCP, whose descriptor is its readiness). Before
     * sleeping in poll() until c is ready for events (POLLIN, POLLOUT),
     * the waiter calls arm(c, events): 1 = ready already (or the peer is
     * gone): do not sleep; 0 = armed: the peer will make poll_fd readable
     * (POLLIN; ask for nothing else, the descriptor is always writable)
     * once c may be ready. After the wait, arm(c, 0) disarms. Readable
     * without c being ready is possible (a late doorbell); retry. */
    int (*arm)(ddpc__conn *c, short events);
    /* Makes every later transfer fail and the peer see this side as gone.
     * Thread-safe, idempotent. */
    void (*shutdown)(ddpc__conn *c);
    void (*close)(ddpc__conn *c); /* NULL harmless */
    int combines;                 /* 1: recv honours ddpc__xfer's combine */
} ddpc__transport;

/* The transports a pair may use, in the order they are asked (the first
 * whose can_connect says yes carries the pair): shm, streams, tcp. TCP
 * carries every pair, so it comes last. transport.c. */
extern const ddpc__transport *const ddpc__transports[];
extern const int ddpc__ntransports;
/* The first transport of ddpc__transports that can carry pair; *nconn: the
 * TCP connections its link is made over. */
const ddpc__transport *ddpc__transport_pick(const ddpc__pair *pair, int *nconn);

/* TCP over IPv4 or IPv6: non-blocking sockets, TCP_NODELAY, DDPC_SOCKBUF
 * send and receive buffers. Carries every pair over one connection. */
extern const ddpc__transport ddpc__transport_tcp;

/* Connects to ip:port before deadline (listening as for connect_start
 * below) and, with a job token, proves it, blocking (the token's tests;
 * the communicator connects in steps). */
ddpc_status ddpc__tcp_dial(const char *ip, int port, double deadline, int listening,
                           ddpc__conn **out);

/* TCP's connect in steps, for a caller that must not wait for the peer to
 * answer (a pair's state machine, which the peer answers from its progress
 * engine: comm/link.c). connect_start connects to ip:port before deadline
 * (listening = 1: the peer is known to listen there, so a refusal is
 * DDPC_ERR_PEER_LOST at once; 0: retried until deadline) and, with a job
 * token, sends the token
 * handshake's hello (auth.h) and sets *authing. connect_step then takes
 * the handshake as far as what has arrived allows, never waiting for
 * more (writes are a 32-byte proof, bounded by deadline): *done = 1 once
 * the peer accepted the token, the connection then being the caller's.
 * Errors are auth.h's, naming ip:port. */
ddpc_status ddpc__tcp_connect_start(const char *ip, int port, double deadline, int listening,
                                    ddpc__auth_cli *auth, int *authing, ddpc__conn **out);
ddpc_status ddpc__tcp_connect_step(ddpc__conn *c, ddpc__auth_cli *auth, const char *ip, int port,
                                   double deadline, int *done);

/* Shared memory between two processes of one host (shm.c moves, shm_segment.c
 * sets up): two byte rings of DDPC_SHM_BYTES in a POSIX shared-memory
 * segment, the pair's TCP socket kept as doorbell and liveness channel.
 * can_connect: same host id, both DDPC_SHM=1, the same DDPC_SHM_BYTES.
 * setup creates the segment and sends its name (or a refusal, warned,
 * when it cannot); connect without res maps the offered segment and
 * answers; with res, reads the answer and removes the segment's name.
 * Setups never block on the peer, so a rank can make all of its offers
 * before answering its peers'. Shared memory being unavailable is never an
 * error: the pair stays on TCP (*used). */
extern const ddpc__transport ddpc__transport_shm;
/* DDPC_SHM_COPY's value (NULL = unset) as the transport's policy for
 * copies into a ring: 0 auto, 1 cached, 2 stream; -1 for anything else.
 * connect gives a new shm connection the pair's shm_copy. */
int ddpc__shm_copy_policy(const char *value);

/* One pair's link over n (2..DDPC_STREAMS_MAX) TCP connections, a message's
 * parts spread over them (streams.c: DDPC_SOCKETS_PER_PEER). can_connect:
 * different hosts and DDPC_SOCKETS_PER_PEER above 1; connect takes the
 * connections in stream order (stream k here is stream k there). send,
 * recv and friends as tcp's, a header (send_full, peek) on stream 0. */
#define DDPC_STREAMS_MAX 16
extern const ddpc__transport ddpc__transport_streams;
/* The connections c (of ddpc__transport_streams) spreads over. */
int ddpc__streams_count(const ddpc__conn *c);
/* Stream k's socket (tests look at what each carried); -1 out of range. */
int ddpc__streams_fd(const ddpc__conn *c, int k);

#endif /* DDPC_TRANSPORT_H */
