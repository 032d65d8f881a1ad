/*
 * link.c — one pair's connection: how it is made, at bootstrap for every
 * pair (eager, DDPC_LAZY_CONNECT=0, and auto up to 16 ranks) or the first
 * time an operation needs it (lazy, as NCCL and HCCL do: a rank of 256
 * that talks to 15 peers holds 15 connections, not 255).
 *
 * Every connection opens with a hello {magic, version, communicator id,
 * rank, size, flags} from the side that connected (ddpc__link_connect,
 * ddpc__link_hello: the only two places a data connection is set up, so
 * that a handshake of more steps slots in there).
 *
 * Eager (bootstrap.c): each rank connects to every lower rank and accepts
 * every higher one; same-host pairs then move to shared memory.
 *
 * Lazy: the listener stays open for the communicator's life and every wait
 * of the progress engine watches it. When an operation posts a message to
 * or from a peer with no link (ddpc__link_need), this rank connects to it,
 * whichever of the two it is, so that a send never waits for the peer to
 * need the pair too (the messages a connection made at bootstrap would
 * have buffered are buffered here as well). Both may connect at once; the
 * rule that settles it, the same on both ends:
 *   1. a connection from the higher rank of the pair always stands: the
 *      lower rank takes it as its link, dropping its own attempt if any;
 *   2. a connection from the lower rank asks: the higher rank answers yes
 *      (and takes it) when it has no link to that rank under way, else no
 *      (its own connection is on its way, rule 1), and closes it;
 *   3. shared memory (same host, both DDPC_SHM=1, the same DDPC_SHM_BYTES,
 *      as at bootstrap) is offered by the higher rank, right behind its
 *      hello or its yes: the lower rank joins as it takes the link, the
 *      higher one finishes when the answer comes (ddpc__shm_offer).
 *   4. with a job token (DDPC_JOB_TOKEN) the token's handshake comes first
 *      (PROVING), in steps like the rest: this rank sends its hello and
 *      goes on; the peer's progress answers it whatever call the peer is
 *      in (its every wait watches the listener and the connections
 *      proving the token, tcp.c); the answer wakes this rank's wait, which
 *      sends the proof, and the verdict the next. Then the link's own
 *      hello goes out and rules 1 to 3 follow. Two ranks connecting to
 *      each other at once each answer the other's handshake meanwhile, so
 *      neither waits on the other.
 * No step waits on the peer beyond reading what it has already sent, so
 * the progress engine goes on moving other peers' messages meanwhile, and
 * a send never waits for the peer to need the pair too, token or none.
 * Connecting is bounded by DDPC_CONNECT_TIMEOUT (a peer that is gone is
 * named as at bootstrap); waiting for a peer to answer, by the operation's
 * deadline, as any wait for a peer that has not reached the operation yet.
 * A connection on the listener that is not a hello of this communicator,
 * or brings none within DDPC_CONNECT_TIMEOUT, is closed with a warning and
 * the communicator goes on.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/auth.h"
#include "base/sock.h"
#include "comm/comm.h"

#define HELLO_MAGIC   0x48504444u /* "DDPH" */
#define HELLO_VERSION 3u
#define HELLO_F_OFFER 1u          /* a shared-memory offer follows */
#define VERDICT_MAGIC 0x56504444u /* "DDPV" */

typedef struct hello {
    uint32_t magic, version;
    uint64_t uid;
    int32_t rank, size;
    uint32_t flags;
    uint32_t stream; /* which of the link's connections this is (0: its first) */
} hello;

/* The higher rank's answer to a lower rank's connection (rule 2). */
typedef struct verdict {
    uint32_t magic, yes;
} verdict;

/* A connection accepted on the listener whose hello has not come yet. */
struct ddpc_incoming {
    ddpc_conn *conn; /* owned */
    double since;
};

static const ddpc_transport *const tcp = &ddpc__transport_tcp;

#define LISTENER_FDS 65 /* the listener and its connections proving the token */

/* ------------------------------------------------------------ both modes */

/* Sends rank p the hello on conn, as stream k of the link (closed on
 * failure). */
static ddpc_status greet(ddpc_comm *c, int p, ddpc_conn *conn, int offer, int k, double deadline) {
    hello h = { HELLO_MAGIC, HELLO_VERSION, c->hello_uid,
                c->rank,     c->size,       offer ? HELLO_F_OFFER : 0,
                (uint32_t)k };
    ddpc_status s = tcp->send_full(conn, &h, sizeof h, deadline, c->abort_fd);
    if (s != DDPC_OK) {
        tcp->close(conn);
        return ddpc__err_wrap(s, "rank %d: greeting rank %d", c->rank, p);
    }
    return DDPC_OK;
}

/* Connects to peer p and greets it as stream k of the link. */
static ddpc_status connect_stream(ddpc_comm *c, int p, int offer, int k, double deadline,
                                  ddpc_conn **out) {
    ddpc_peer *pe = &c->peers[p];
    ddpc_conn *conn = NULL;
    *out = NULL;
    ddpc_status s = tcp->connect(pe->ip, pe->port, deadline, c->lazy, &conn);
    if (s != DDPC_OK)
        return ddpc__err_wrap(s, "rank %d: connecting to rank %d at %s:%d", c->rank, p, pe->ip,
                              pe->port);
    DDPC_CHECK(greet(c, p, conn, offer, k, deadline));
    *out = conn;
    return DDPC_OK;
}

ddpc_status ddpc__link_connect(ddpc_comm *c, int p, int offer, double deadline, ddpc_conn **out) {
    return connect_stream(c, p, offer, 0, deadline, out);
}

int ddpc__link_streams(const ddpc_comm *c, int p) {
    return c->host_of && c->streams > 1 && c->host_of[p] != c->host ? c->streams : 1;
}

const ddpc_transport *ddpc__link_tp(int n) { return n > 1 ? &ddpc__transport_streams : tcp; }

ddpc_status ddpc__link_connect_rest(ddpc_comm *c, int p, ddpc_conn *conn, double deadline,
                                    ddpc_conn **out) {
    int n = ddpc__link_streams(c, p);
    ddpc_conn *s[DDPC_STREAMS_MAX] = { conn };
    *out = NULL;
    if (n == 1) {
        *out = conn;
        return DDPC_OK;
    }
    for (int k = 1; k < n; k++) {
        ddpc_status st = connect_stream(c, p, 0, k, deadline, &s[k]);
        if (st != DDPC_OK) {
            while (k-- > 0) tcp->close(s[k]);
            return ddpc__err_wrap(st, "connection %d of %d (DDPC_SOCKETS_PER_PEER)", k + 2, n);
        }
    }
    return ddpc__streams_create(s, n, out);
}

ddpc_status ddpc__link_gather(ddpc_comm *c, int q, int k, ddpc_conn *conn, ddpc_conn **out) {
    ddpc_peer *qe = &c->peers[q];
    int n = ddpc__link_streams(c, q);
    *out = NULL;
    if (n == 1 && k == 0) {
        *out = conn;
        return DDPC_OK;
    }
    char why[160];
    if (k < 0 || k >= n) {
        snprintf(why, sizeof why,
                 "rank %d sent connection %d of a link of %d (DDPC_SOCKETS_PER_PEER=%d here)", q,
                 k + 1, n, c->streams);
        ddpc__link_reject(c, conn, why);
        return DDPC_OK;
    }
    if (!qe->gather && !(qe->gather = calloc((size_t)n, sizeof *qe->gather))) {
        tcp->close(conn);
        return ddpc__err(DDPC_ERR_NOMEM, "out of memory for rank %d's connections", q);
    }
    if (qe->gather[k]) {
        snprintf(why, sizeof why, "a second connection %d of %d from rank %d", k + 1, n, q);
        ddpc__link_reject(c, conn, why);
        return DDPC_OK;
    }
    qe->gather[k] = conn;
    for (int i = 0; i < n; i++)
        if (!qe->gather[i]) return DDPC_OK; /* more to come */
    ddpc_status s = ddpc__streams_create(qe->gather, n, out);
    free(qe->gather);
    qe->gather = NULL;
    return s;
}

/* Closes the streams gathered from peer p so far. */
static void drop_gathered(ddpc_comm *c, int p) {
    ddpc_peer *pe = &c->peers[p];
    for (int k = 0; pe->gather && k < c->streams; k++) tcp->close(pe->gather[k]);
    free(pe->gather);
    free(pe->xauth);
    pe->gather = NULL;
    pe->xauth = NULL;
    pe->xready = 0;
}

ddpc_status ddpc__link_hello(ddpc_comm *c, ddpc_conn *conn, double deadline, int *rank, int *offer,
                             int *stream) {
    hello h;
    ddpc_status s = tcp->recv_full(conn, &h, sizeof h, deadline, c->abort_fd);
    if (s != DDPC_OK) return ddpc__err_wrap(s, "no hello");
    if (h.magic == DDPC_AUTH_MAGIC)
        return ddpc__err(DDPC_ERR_PROTOCOL,
                         "it sent a job token's handshake, but DDPC_JOB_TOKEN is unset here");
    if (h.magic != HELLO_MAGIC || h.version != HELLO_VERSION || h.uid != c->hello_uid ||
        h.size != c->size || h.rank < 0 || h.rank >= c->size || h.rank == c->rank)
        return ddpc__err(
            DDPC_ERR_PROTOCOL,
            "rank %d: unexpected hello (magic 0x%x version %u rank %d) on the data port", c->rank,
            h.magic, h.version, h.rank);
    *rank = h.rank;
    *offer = (h.flags & HELLO_F_OFFER) != 0;
    *stream = (int)h.stream;
    return DDPC_OK;
}

/* ------------------------------------------------------------ lazy */

/* How long a step that reads what the peer has already sent may take. */
static double step_deadline(const ddpc_exec *e) {
    double d = ddpc__deadline_in(e->c->connect_timeout);
    return e->deadline < d ? e->deadline : d;
}

/* Peer p's link carries messages from now on: over conn, or over shared
 * memory sc when the pair has it (conn is then closed). */
static void link_up(ddpc_comm *c, int p, ddpc_conn *conn, ddpc_conn *sc) {
    ddpc_peer *pe = &c->peers[p];
    if (sc) {
        ddpc__shm_set_copy_policy(sc, c->shm_copy);
        tcp->close(conn);
        conn = sc;
    }
    pe->want_shm = sc != NULL;
    pe->tp = sc ? &ddpc__transport_shm : ddpc__link_tp(ddpc__link_streams(c, p));
    __atomic_store_n(&pe->conn, conn, __ATOMIC_RELEASE); /* ddpc_comm_abort reads it */
    pe->pend = NULL;
    pe->offer = NULL;
    pe->link = DDPC_LINK_UP;
    DDPC_INFO(NET, "rank %d: connected to rank %d over %s", c->rank, p, pe->tp->name);
}

/* Drops peer p's own attempt (PROVING, ASKED): its connection and any offer. */
static void drop_attempt(ddpc_peer *pe) {
    tcp->close(pe->pend);
    ddpc__shm_pending_free(pe->offer);
    pe->pend = NULL;
    pe->offer = NULL;
}

/* Fails e: connecting the streams of p's link went wrong (s). */
static ddpc_status streams_failed(ddpc_exec *e, int p, ddpc_status s) {
    drop_gathered(e->c, p);
    e->c->peers[p].link = DDPC_LINK_NONE;
    e->lost = p;
    return ddpc__fail(e, s, "rank %d: connecting to rank %d: %s", e->c->rank, p, ddpc_last_error());
}

/* STREAMS: takes each further connection of p's link through what has come
 * of the job token's handshake (never waiting for more), greets it once
 * proved; the link is up when they all are. */
static ddpc_status streams_step(ddpc_exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    int n = ddpc__link_streams(c, p);
    for (int k = 1; k < n; k++) {
        if (pe->xready & (1u << k)) continue;
        int done = 0;
        ddpc_status s = ddpc__tcp_connect_step(pe->gather[k], &pe->xauth[k], pe->ip, pe->port,
                                               step_deadline(e), &done);
        if (s == DDPC_OK && done && (s = greet(c, p, pe->gather[k], 0, k, step_deadline(e))))
            pe->gather[k] = NULL; /* greet closed it */
        if (s != DDPC_OK) return streams_failed(e, p, s);
        if (done) pe->xready |= 1u << k;
    }
    if (pe->xready != (1u << n) - 1) return DDPC_OK;
    ddpc_conn *out = NULL;
    ddpc_status s = ddpc__streams_create(pe->gather, n, &out);
    free(pe->gather);
    pe->gather = NULL;
    if (s != DDPC_OK) return streams_failed(e, p, s);
    drop_gathered(c, p);
    link_up(c, p, out, NULL);
    return DDPC_OK;
}

/* This rank's first connection conn of p's link (of several streams)
 * stands: connects the others, each through the job token's handshake in
 * steps as the first (STREAMS; the peer answers from its progress), so
 * that two ranks each connecting their links never wait on each other. */
static ddpc_status streams_start(ddpc_exec *e, int p, ddpc_conn *conn) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    int n = ddpc__link_streams(c, p);
    pe->gather = calloc((size_t)n, sizeof *pe->gather);
    pe->xauth = calloc((size_t)n, sizeof *pe->xauth);
    if (!pe->gather || !pe->xauth) {
        tcp->close(conn);
        return streams_failed(e, p, ddpc__err(DDPC_ERR_NOMEM, "out of memory"));
    }
    pe->gather[0] = conn;
    pe->xready = 1;
    pe->link = DDPC_LINK_STREAMS;
    for (int k = 1; k < n; k++) {
        int proving = 0;
        ddpc_status s = ddpc__tcp_connect_start(pe->ip, pe->port, step_deadline(e), 1,
                                                &pe->xauth[k], &proving, &pe->gather[k]);
        if (s == DDPC_OK && !proving) pe->xauth[k].stage = 2; /* no token: nothing to prove */
        if (s != DDPC_OK)
            return streams_failed(
                e, p, ddpc__err_wrap(s, "connection %d of %d (DDPC_SOCKETS_PER_PEER)", k + 1, n));
    }
    return streams_step(e, p);
}

/* A TCP link's first connection conn stands: the side that made it
 * (mine) connects the link's other streams (STREAMS until they are all
 * made), the other gathers them as they come (GATHER until they are all
 * in); then the link is up. */
static ddpc_status stand(ddpc_exec *e, int p, ddpc_conn *conn, int mine) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    ddpc_conn *out = NULL;
    if (mine && ddpc__link_streams(c, p) > 1) return streams_start(e, p, conn);
    ddpc_status s = ddpc__link_gather(c, p, 0, conn, &out);
    if (s != DDPC_OK) {
        e->lost = p;
        return ddpc__fail(e, s, "rank %d: connecting to rank %d: %s", c->rank, p,
                          ddpc_last_error());
    }
    if (out)
        link_up(c, p, out, NULL);
    else
        pe->link = DDPC_LINK_GATHER;
    return DDPC_OK;
}

/* The higher rank's side of rule 3: offers shared memory to p over conn,
 * which then waits for the answer (OFFERED); without shared memory the
 * link stands (mine: this rank connected it). */
static ddpc_status offer_or_up(ddpc_exec *e, int p, ddpc_conn *conn, int mine) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    if (!pe->want_shm) return stand(e, p, conn, mine);
    char who[32];
    snprintf(who, sizeof who, "rank %d", p);
    ddpc_status s =
        ddpc__shm_offer(conn, who, (size_t)c->shm_bytes, step_deadline(e), c->abort_fd, &pe->offer);
    if (s != DDPC_OK) {
        tcp->close(conn);
        e->lost = p;
        return ddpc__fail(e, s, "offering shared memory to rank %d: %s", p, ddpc_last_error());
    }
    pe->pend = conn;
    pe->link = DDPC_LINK_OFFERED;
    return DDPC_OK;
}

/* The lower rank's side of rule 3: joins the offer that follows on conn
 * (when offered), and the link is up; unoffered, it stands (mine: this rank
 * connected it). */
static ddpc_status join_and_up(ddpc_exec *e, int p, ddpc_conn *conn, int offered, int mine) {
    ddpc_comm *c = e->c;
    ddpc_conn *sc = NULL;
    if (!offered) return stand(e, p, conn, mine);
    char who[32];
    snprintf(who, sizeof who, "rank %d", p);
    ddpc_status s =
        ddpc__shm_join(conn, who, (size_t)c->shm_bytes, step_deadline(e), c->abort_fd, &sc);
    if (s != DDPC_OK) {
        tcp->close(conn);
        e->lost = p;
        return ddpc__fail(e, s, "joining rank %d's shared memory: %s", p, ddpc_last_error());
    }
    link_up(c, p, conn, sc);
    return DDPC_OK;
}

/* This rank's connection conn to p is made (and the token proved, if
 * any): greets p, then rule 1 or 2. */
static ddpc_status greet_and_go(ddpc_exec *e, int p, ddpc_conn *conn) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    int higher = c->rank > p;
    ddpc_status s = greet(c, p, conn, higher && pe->want_shm, 0, step_deadline(e));
    if (s != DDPC_OK) {
        pe->link = DDPC_LINK_NONE;
        e->lost = p;
        return ddpc__fail(e, s, "lost rank %d while connecting to it (%s)", p, ddpc_last_error());
    }
    if (higher) return offer_or_up(e, p, conn, 1); /* rule 1: it stands */
    pe->pend = conn;                               /* rule 2: ask */
    pe->link = DDPC_LINK_ASKED;
    return DDPC_OK;
}

ddpc_status ddpc__link_need(ddpc_exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    if (pe->link != DDPC_LINK_NONE) return DDPC_OK; /* under way, or refused: rule 1 brings it */
    pe->link_since = ddpc__now();
    ddpc_conn *conn = NULL;
    int proving = 0;
    ddpc_status s =
        ddpc__tcp_connect_start(pe->ip, pe->port, step_deadline(e), 1, &pe->auth, &proving, &conn);
    if (s != DDPC_OK) {
        e->lost = p;
        return ddpc__fail(e, s,
                          "rank %d: connecting to rank %d at %s:%d: %s (DDPC_CONNECT_TIMEOUT=%g "
                          "s; it destroyed its communicator, exited, crashed or was killed)",
                          c->rank, p, pe->ip, pe->port, ddpc_last_error(), c->connect_timeout);
    }
    if (!proving) return greet_and_go(e, p, conn);
    pe->pend = conn; /* rule 4: the token's handshake first */
    pe->link = DDPC_LINK_PROVING;
    return DDPC_OK;
}

/* Peer p's connection proving the token (PROVING) is readable: the next
 * step of the handshake, and once the token is accepted, the link's own
 * set-up (rules 1, 2). */
static ddpc_status on_proving(ddpc_exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    int done = 0;
    ddpc_status s =
        ddpc__tcp_connect_step(pe->pend, &pe->auth, pe->ip, pe->port, step_deadline(e), &done);
    if (s != DDPC_OK) {
        drop_attempt(pe);
        pe->link = DDPC_LINK_NONE;
        e->lost = p;
        return ddpc__fail(e, s, "rank %d: connecting to rank %d: %s", c->rank, p,
                          ddpc_last_error());
    }
    if (!done) return DDPC_OK;
    ddpc_conn *conn = pe->pend;
    pe->pend = NULL;
    return greet_and_go(e, p, conn);
}

void ddpc__link_reject(ddpc_comm *c, ddpc_conn *conn, const char *why) {
    char addr[64] = "?";
    int port = 0;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(tcp->poll_fd(conn), (struct sockaddr *)&ss, &sl) == 0)
        ddpc__sock_addr_str((struct sockaddr *)&ss, addr, sizeof addr, &port);
    DDPC_WARN(NET, "rank %d: closed a connection from %s:%d on the data port: %s", c->rank, addr,
              port, why);
    tcp->close(conn);
}

static void reject(ddpc_comm *c, ddpc_conn *conn, const char *why) {
    ddpc__link_reject(c, conn, why);
}

/* A hello has come on accepted connection conn: rules 1 and 2. */
static ddpc_status on_hello(ddpc_exec *e, ddpc_conn *conn) {
    ddpc_comm *c = e->c;
    int q = -1, offered = 0, k = 0;
    if (ddpc__link_hello(c, conn, step_deadline(e), &q, &offered, &k) != DDPC_OK) {
        reject(c, conn, ddpc_last_error());
        return DDPC_OK;
    }
    ddpc_peer *qe = &c->peers[q];
    if (k != 0) { /* another stream of a link whose first connection stands, or is on its way */
        ddpc_conn *out = NULL;
        if (qe->link == DDPC_LINK_UP || qe->link == DDPC_LINK_OFFERED ||
            qe->link == DDPC_LINK_STREAMS) {
            reject(c, conn, "a further connection from a rank already connected");
            return DDPC_OK;
        }
        ddpc_status s = ddpc__link_gather(c, q, k, conn, &out);
        if (s != DDPC_OK) {
            e->lost = q;
            return ddpc__fail(e, s, "rank %d: connecting to rank %d: %s", c->rank, q,
                              ddpc_last_error());
        }
        if (out) link_up(c, q, out, NULL); /* stream 0 is in: the link is GATHER */
        return DDPC_OK;
    }
    if (q > c->rank) { /* rule 1 */
        if (qe->link == DDPC_LINK_UP || qe->link == DDPC_LINK_OFFERED ||
            qe->link == DDPC_LINK_GATHER || qe->link == DDPC_LINK_STREAMS) {
            reject(c, conn, "a second connection from a rank already connected");
            return DDPC_OK;
        }
        if (qe->link == DDPC_LINK_ASKED || qe->link == DDPC_LINK_PROVING) drop_attempt(qe);
        return join_and_up(e, q, conn, offered, 0);
    }
    /* rule 2: q asks */
    verdict v = { VERDICT_MAGIC, qe->link == DDPC_LINK_NONE };
    ddpc_status s = tcp->send_full(conn, &v, sizeof v, step_deadline(e), c->abort_fd);
    if (!v.yes || s != DDPC_OK) {
        tcp->close(conn); /* q reads no, or (gone) nothing */
        return DDPC_OK;
    }
    qe->link_since = ddpc__now();
    return offer_or_up(e, q, conn, 0);
}

/* Peer p's pending connection (ASKED, OFFERED) is readable: the verdict,
 * or the answer to this rank's offer, or the peer is gone. */
static ddpc_status on_answer(ddpc_exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    if (pe->link == DDPC_LINK_OFFERED) {
        char who[32];
        snprintf(who, sizeof who, "rank %d", p);
        ddpc_conn *sc = NULL;
        ddpc_status s =
            ddpc__shm_finish(pe->offer, pe->pend, who, step_deadline(e), c->abort_fd, &sc);
        pe->offer = NULL; /* finish consumed it */
        if (s != DDPC_OK) {
            e->lost = p;
            return ddpc__fail(e, s, "lost rank %d while connecting to it (%s)", p,
                              ddpc_last_error());
        }
        link_up(c, p, pe->pend, sc);
        return DDPC_OK;
    }
    verdict v;
    ddpc_status s = tcp->recv_full(pe->pend, &v, sizeof v, step_deadline(e), c->abort_fd);
    if (s == DDPC_OK && v.magic != VERDICT_MAGIC)
        s = ddpc__err(DDPC_ERR_PROTOCOL, "rank %d answered a connection with magic 0x%x", p,
                      v.magic);
    if (s != DDPC_OK) {
        e->lost = p;
        return ddpc__fail(e, s, "lost rank %d while connecting to it (%s)", p, ddpc_last_error());
    }
    if (!v.yes) { /* its own connection is on its way (rule 1) */
        drop_attempt(pe);
        pe->link = DDPC_LINK_REFUSED;
        return DDPC_OK;
    }
    ddpc_conn *conn = pe->pend;
    pe->pend = NULL;
    return join_and_up(e, p, conn, pe->want_shm, 1);
}

/* Takes the connections waiting on the listener (those that proved the job
 * token, when there is one: tcp.c runs its handshake) into c->inc (at most
 * c->size + 16 held; the oldest is dropped beyond that). */
static ddpc_status accept_waiting(ddpc_exec *e) {
    ddpc_comm *c = e->c;
    for (int k = 0; k < 64; k++) {
        int fds[LISTENER_FDS];
        struct pollfd pf[LISTENER_FDS];
        int n = tcp->listener_fds(c->lis, fds, LISTENER_FDS);
        for (int i = 0; i < n; i++) pf[i] = (struct pollfd){ fds[i], POLLIN, 0 };
        if (poll(pf, (nfds_t)n, 0) <= 0) return DDPC_OK; /* nothing waits */
        ddpc_conn *conn = NULL;
        if (tcp->accept(c->lis, ddpc__deadline_in(0.02), c->abort_fd, &conn) != DDPC_OK)
            return DDPC_OK; /* none ready (or one still proving the token) */
        int cap = c->size * c->streams + 16;
        if (!c->inc) {
            c->inc = calloc((size_t)cap, sizeof *c->inc);
            if (!c->inc) {
                tcp->close(conn);
                return ddpc__fail(e, DDPC_ERR_NOMEM, "out of memory for connections");
            }
        }
        if (c->ninc == cap) {
            reject(c, c->inc[0].conn, "too many connections without a hello");
            memmove(c->inc, c->inc + 1, sizeof *c->inc * (size_t)(cap - 1));
            c->ninc--;
        }
        c->inc[c->ninc++] = (struct ddpc_incoming){ conn, ddpc__now() };
    }
    return DDPC_OK;
}

/* Whether conn has n bytes waiting, or its peer closed it (*eof). */
static int has_bytes(ddpc_conn *conn, size_t n, int *eof) {
    char buf[64];
    size_t got = 0;
    *eof = 0;
    if (tcp->peek(conn, buf, n < sizeof buf ? n : sizeof buf, &got, eof) != DDPC_OK) *eof = 1;
    return got >= n;
}

/* GATHER: the link's first connection closing before the others came is
 * the peer lost (it failed or died while connecting them). */
static ddpc_status gather_watch(ddpc_exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc_peer *pe = &c->peers[p];
    int eof = 0, in = 0;
    has_bytes(pe->gather[0], 1, &eof);
    if (!eof) return DDPC_OK;
    for (int k = 0; k < c->streams; k++) in += pe->gather[k] != NULL;
    drop_gathered(c, p);
    pe->link = DDPC_LINK_NONE;
    e->lost = p;
    return ddpc__fail(e, DDPC_ERR_PEER_LOST,
                      "lost rank %d while its connections came (%d of %d in; it exited, crashed, "
                      "was killed or aborted)",
                      p, in, ddpc__link_streams(c, p));
}

ddpc_status ddpc__link_poll(ddpc_exec *e, int *moved) {
    ddpc_comm *c = e->c;
    if (!c->lis) return DDPC_OK;
    DDPC_CHECK(accept_waiting(e));
    /* hellos: each handled connection leaves the list, whatever became of it */
    for (int i = 0; i < c->ninc;) {
        struct ddpc_incoming in = c->inc[i];
        int eof = 0, ready = has_bytes(in.conn, sizeof(hello), &eof);
        if (!ready && !eof && ddpc__now() - in.since < c->connect_timeout) {
            i++;
            continue;
        }
        c->inc[i] = c->inc[--c->ninc];
        if (ready) {
            DDPC_CHECK(on_hello(e, in.conn));
            *moved = 1;
        } else if (eof) {
            DDPC_INFO(NET, "rank %d: a connection on the data port closed before its hello",
                      c->rank);
            tcp->close(in.conn);
        } else {
            reject(c, in.conn, "no hello within DDPC_CONNECT_TIMEOUT");
        }
    }
    /* answers */
    for (int p = 0; p < c->size; p++) {
        ddpc_peer *pe = &c->peers[p];
        if (pe->link == DDPC_LINK_PROVING || pe->link == DDPC_LINK_STREAMS) {
            int was = pe->link; /* reads only what has come */
            DDPC_CHECK(was == DDPC_LINK_PROVING ? on_proving(e, p) : streams_step(e, p));
            *moved |= pe->link != was;
            continue;
        }
        if (pe->link == DDPC_LINK_GATHER) {
            DDPC_CHECK(gather_watch(e, p));
            continue;
        }
        if (pe->link != DDPC_LINK_ASKED && pe->link != DDPC_LINK_OFFERED) continue;
        int eof = 0;
        if (!has_bytes(pe->pend, sizeof(verdict), &eof) && !eof) continue;
        DDPC_CHECK(on_answer(e, p));
        *moved = 1;
    }
    return DDPC_OK;
}

int ddpc__link_fds(ddpc_comm *c, int *fds, int max) {
    if (!c->lis || max < 1) return 0;
    int n = tcp->listener_fds(c->lis, fds, max < LISTENER_FDS ? max : LISTENER_FDS);
    for (int i = 0; i < c->ninc && n < max; i++) fds[n++] = tcp->poll_fd(c->inc[i].conn);
    for (int p = 0; p < c->size && n < max; p++) {
        const ddpc_peer *pe = &c->peers[p];
        if (pe->pend) fds[n++] = tcp->poll_fd(pe->pend);
        if (pe->link == DDPC_LINK_GATHER && pe->gather[0] && n < max)
            fds[n++] = tcp->poll_fd(pe->gather[0]);
        for (int k = 1; pe->link == DDPC_LINK_STREAMS && k < c->streams && n < max; k++)
            if (!(pe->xready & (1u << k))) fds[n++] = tcp->poll_fd(pe->gather[k]);
    }
    return n;
}

void ddpc__link_free(ddpc_comm *c) {
    for (int i = 0; i < c->ninc; i++) tcp->close(c->inc[i].conn);
    free(c->inc);
    c->inc = NULL;
    c->ninc = 0;
    for (int p = 0; c->peers && p < c->size; p++) {
        drop_attempt(&c->peers[p]);
        drop_gathered(c, p);
    }
    tcp->close_listener(c->lis);
    c->lis = NULL;
}
