/*
 * link.c — one pair's connection: one state machine per pair, the same for
 * pairs connected when the communicator is made (eager, DDPC_LAZY_CONNECT=0,
 * and auto up to 16 ranks: ddpc__link_all) and for pairs connected the
 * first time an operation needs them (lazy, as NCCL and HCCL do: a rank of
 * 256 that talks to 15 peers holds 15 connections, not 255).
 *
 * What carries a pair is the transport table's choice (transport.h;
 * ddpc__link_plan: the first transport whose can_connect says yes, once per
 * pair, alike on both ends). This file makes the pair's TCP connection(s),
 * proves the job token, greets the peer and settles who keeps which
 * connection; then it hands the connections to the chosen transport
 * (setup, connect), which makes them the pair's link. Nothing here knows
 * shared memory or streams by name.
 *
 * Every connection opens with a hello {magic, version, communicator id,
 * rank, size, flags, stream} from the side that connected (greet,
 * read_hello).
 *
 * Lazy: the listener stays open for the communicator's life and every wait
 * of the progress engine watches it. When an operation posts a message to
 * or from a peer with no link (ddpc__link_need), this rank connects to it,
 * whichever of the two it is, so that a send never waits for the peer to
 * need the pair too (the messages a connection made at creation would
 * have buffered are buffered here as well). Eager: each rank connects to
 * every lower rank and takes every higher one's connection, running the
 * same steps until every pair is up (ddpc__link_all). The rules, the same
 * on both ends:
 *   1. a connection from the higher rank of the pair always stands: the
 *      lower rank takes it as its link, dropping its own attempt if any;
 *   2. a connection from the lower rank asks: the higher rank answers yes
 *      (and takes it) when it has no link to that rank under way, else no
 *      (its own connection is on its way, rule 1), and closes it;
 *   3. a transport with a setup (shm) is set up by one end, the offering
 *      one: lazy, the higher rank, right behind its hello or its yes (the
 *      lower rank joins as it takes the link); eager, the lower rank, once
 *      it took the higher one's connection (the higher rank joins when the
 *      offer comes: JOINING). The offering end connects when the answer
 *      comes (OFFERED);
 *   4. with a job token (DDPC_JOB_TOKEN) the token's handshake comes first
 *      (PROVING), in steps like the rest: this rank sends its hello and
 *      goes on; the peer's progress answers it whatever call the peer is
 *      in (its every wait watches the listener and the connections
 *      proving the token, tcp.c); the answer wakes this rank's wait, which
 *      sends the proof, and the verdict the next. Then the link's own
 *      hello goes out and rules 1 to 3 follow. Two ranks connecting to
 *      each other at once each answer the other's handshake meanwhile, so
 *      neither waits on the other;
 *   5. a link of several TCP connections (the streams transport): the end
 *      that made the first makes the others, each through the token's
 *      handshake in steps (STREAMS); the other gathers them as their
 *      hellos come (GATHER); the link is up when all are in.
 * No step waits on the peer beyond reading what it has already sent, so
 * progress goes on moving other peers' messages meanwhile. Connecting is
 * bounded by DDPC_CONNECT_TIMEOUT (a peer that is gone is named at once);
 * waiting for a peer to answer, by the operation's deadline (eager: the
 * creation's). A connection on the listener that is not a hello of this
 * communicator, or brings none within DDPC_CONNECT_TIMEOUT, is closed with
 * a warning and the communicator goes on.
 */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/auth.h"
#include "base/sock.h"
#include "comm/comm.h"

#define HELLO_MAGIC   0x48504444u /* "DDPH" */
#define HELLO_VERSION 3u
#define HELLO_F_OFFER 1u          /* the transport's setup (an offer) follows */
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
struct ddpc__incoming {
    ddpc__conn *conn; /* owned */
    double since;
};

static const ddpc__transport *const tcp = &ddpc__transport_tcp;

#define LISTENER_FDS 65 /* the listener and its connections proving the token */

/* ------------------------------------------------------------ the pair */

/* The pair (this rank, p) as the transport table sees it. */
static ddpc__pair pair_of(const ddpc_comm *c, int p) {
    ddpc__pair pr = { .self = &c->peers[c->rank].ep,
                      .peer = &c->peers[p].ep,
                      .rank = c->rank,
                      .peer_rank = p,
                      .streams = c->streams,
                      .shm_copy = c->shm_copy };
    snprintf(pr.name, sizeof pr.name, "rank %d", p);
    return pr;
}

void ddpc__link_plan(ddpc_comm *c) {
    for (int p = 0; p < c->size; p++) {
        ddpc__link_setup *ls = &c->peers[p].set;
        if (p == c->rank) continue;
        ddpc__pair pr = pair_of(c, p);
        ls->tp = ddpc__transport_pick(&pr, &ls->nconn);
        ls->offers = ls->tp->setup && (c->lazy ? c->rank > p : c->rank < p); /* rule 3 */
    }
}

/* How long a step that reads what the peer has already sent may take. */
static double step_deadline(const ddpc__exec *e) {
    double d = ddpc__deadline_in(e->c->connect_timeout);
    return e->deadline < d ? e->deadline : d;
}

/* Fails e over peer p: the operation's failure, or the creation's (boot). */
static ddpc_status fail(ddpc__exec *e, int p, ddpc_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ddpc_status fail(ddpc__exec *e, int p, ddpc_status s, const char *fmt, ...) {
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    e->lost = p;
    if (e->boot) return ddpc__err(s, "%s", what);
    return ddpc__fail(e, s, "%s", what);
}

/* Sends rank p the hello on conn, as stream k of the link (closed on failure). */
static ddpc_status greet(ddpc_comm *c, int p, ddpc__conn *conn, int offer, int k, double deadline) {
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

/* Reads and checks the hello on an accepted connection (bytes already
 * there, or arriving before deadline): *rank = who it is, *offer = an
 * offer follows, *stream = which of the link's connections it is.
 * DDPC_ERR_PROTOCOL for anything but a hello of this communicator from
 * another of its ranks. */
static ddpc_status read_hello(ddpc_comm *c, ddpc__conn *conn, double deadline, int *rank,
                              int *offer, int *stream) {
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

/* Closes an accepted connection that is not a link (a stranger, another
 * communicator's rank, no hello), warning with its address and why. */
static void reject(ddpc_comm *c, ddpc__conn *conn, const char *why) {
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

/* Drops peer p's own attempt (PROVING, ASKED, OFFERED, JOINING) and setup. */
static void drop_attempt(ddpc__peer *pe) {
    tcp->close(pe->set.pend);
    if (pe->set.res && pe->set.tp->free) pe->set.tp->free(pe->set.res);
    pe->set.pend = NULL;
    pe->set.res = NULL;
}

/* Closes the streams gathered from (or made to) peer p so far. */
static void drop_gathered(ddpc_comm *c, int p) {
    ddpc__link_setup *ls = &c->peers[p].set;
    for (int k = 0; ls->gather && k < ls->nconn; k++) tcp->close(ls->gather[k]);
    free(ls->gather);
    free(ls->xauth);
    ls->gather = NULL;
    ls->xauth = NULL;
    ls->xready = 0;
}

/* Peer p's link carries messages from now on: conn, of transport used. */
static void link_up(ddpc_comm *c, int p, ddpc__conn *conn, const ddpc__transport *used) {
    ddpc__peer *pe = &c->peers[p];
    pe->tp = used;
    __atomic_store_n(&pe->conn, conn, __ATOMIC_RELEASE); /* ddpc_comm_abort reads it */
    pe->set.pend = NULL;
    pe->set.res = NULL;
    pe->link = DDPC_LINK_UP;
    DDPC_INFO(NET, "rank %d: connected to rank %d over %s", c->rank, p, pe->tp->name);
}

/* Makes p's link of its TCP connections conns[0, n) (taken) through the
 * pair's transport, res being this end's setup (or NULL), and brings it
 * up. */
static ddpc_status make_link(ddpc__exec *e, int p, ddpc__conn **conns, int n, void *res) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    ddpc__pair pr = pair_of(c, p);
    ddpc__conn *out = NULL;
    const ddpc__transport *used = tcp;
    ddpc_status s =
        pe->set.tp->connect(&pr, conns, n, res, step_deadline(e), c->abort_fd, &out, &used);
    if (s != DDPC_OK) {
        pe->link = DDPC_LINK_NONE;
        return fail(e, p, s, "lost rank %d while connecting to it (%s)", p, ddpc_last_error());
    }
    link_up(c, p, out, used);
    return DDPC_OK;
}

/* Files conn (taken) as stream k of q's link (rule 5); the link is made
 * once every stream is in. A stream out of range or already in is a
 * stranger's: closed with a warning. */
static ddpc_status gather(ddpc__exec *e, int q, int k, ddpc__conn *conn) {
    ddpc_comm *c = e->c;
    ddpc__link_setup *ls = &c->peers[q].set;
    int n = ls->nconn;
    char why[160];
    if (k < 0 || k >= n) {
        snprintf(why, sizeof why,
                 "rank %d sent connection %d of a link of %d (DDPC_SOCKETS_PER_PEER=%d here)", q,
                 k + 1, n, c->streams);
        reject(c, conn, why);
        return DDPC_OK;
    }
    if (n == 1) return make_link(e, q, &conn, 1, NULL);
    if (!ls->gather && !(ls->gather = calloc((size_t)n, sizeof *ls->gather))) {
        tcp->close(conn);
        return fail(e, q, DDPC_ERR_NOMEM, "out of memory for rank %d's connections", q);
    }
    if (ls->gather[k]) {
        snprintf(why, sizeof why, "a second connection %d of %d from rank %d", k + 1, n, q);
        reject(c, conn, why);
        return DDPC_OK;
    }
    ls->gather[k] = conn;
    for (int i = 0; i < n; i++)
        if (!ls->gather[i]) return DDPC_OK; /* more to come */
    ddpc__conn **all = ls->gather;
    ls->gather = NULL;
    drop_gathered(c, q);
    ddpc_status s = make_link(e, q, all, n, NULL);
    free(all);
    return s;
}

/* ------------------------------------------------ the state machine */

/* Fails e: connecting the streams of p's link went wrong (s). */
static ddpc_status streams_failed(ddpc__exec *e, int p, ddpc_status s) {
    drop_gathered(e->c, p);
    e->c->peers[p].link = DDPC_LINK_NONE;
    return fail(e, p, s, "rank %d: connecting to rank %d: %s", e->c->rank, p, ddpc_last_error());
}

/* STREAMS: takes each further connection of p's link through what has come
 * of the job token's handshake (never waiting for more), greets it once
 * proved; the link is made when they all are. */
static ddpc_status streams_step(ddpc__exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    ddpc__link_setup *ls = &pe->set;
    int n = ls->nconn;
    for (int k = 1; k < n; k++) {
        if (ls->xready & (1u << k)) continue;
        int done = 0;
        ddpc_status s = ddpc__tcp_connect_step(ls->gather[k], &ls->xauth[k], pe->ep.ip, pe->ep.port,
                                               step_deadline(e), &done);
        if (s == DDPC_OK && done && (s = greet(c, p, ls->gather[k], 0, k, step_deadline(e))))
            ls->gather[k] = NULL; /* greet closed it */
        if (s != DDPC_OK) return streams_failed(e, p, s);
        if (done) ls->xready |= 1u << k;
    }
    if (ls->xready != (1u << n) - 1) return DDPC_OK;
    ddpc__conn **all = ls->gather;
    ls->gather = NULL;
    drop_gathered(c, p);
    ddpc_status s = make_link(e, p, all, n, NULL);
    free(all);
    return s;
}

/* This rank's first connection conn of p's link (of several streams)
 * stands: connects the others, each through the job token's handshake in
 * steps as the first (STREAMS; the peer answers from its progress), so
 * that two ranks each connecting their links never wait on each other. */
static ddpc_status streams_start(ddpc__exec *e, int p, ddpc__conn *conn) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    ddpc__link_setup *ls = &pe->set;
    int n = ls->nconn;
    ls->gather = calloc((size_t)n, sizeof *ls->gather);
    ls->xauth = calloc((size_t)n, sizeof *ls->xauth);
    if (!ls->gather || !ls->xauth) {
        tcp->close(conn);
        return streams_failed(e, p, ddpc__err(DDPC_ERR_NOMEM, "out of memory"));
    }
    ls->gather[0] = conn;
    ls->xready = 1;
    pe->link = DDPC_LINK_STREAMS;
    for (int k = 1; k < n; k++) {
        int proving = 0;
        ddpc_status s = ddpc__tcp_connect_start(pe->ep.ip, pe->ep.port, step_deadline(e), c->lazy,
                                                &ls->xauth[k], &proving, &ls->gather[k]);
        if (s == DDPC_OK && !proving) ls->xauth[k].stage = 2; /* no token: nothing to prove */
        if (s != DDPC_OK)
            return streams_failed(
                e, p, ddpc__err_wrap(s, "connection %d of %d (DDPC_SOCKETS_PER_PEER)", k + 1, n));
    }
    return streams_step(e, p);
}

/* The first connection conn of p's link stands (rules 1, 2; mine: this
 * rank made it): the pair's transport takes it from here. With a setup
 * (rule 3): the offering end sets up and waits for the answer (OFFERED);
 * the other joins the offer that follows now (follows) or waits for it
 * (JOINING). Over several streams (rule 5): the end that made the first
 * connection makes the others, the other gathers them. Else the link is
 * made of conn alone. */
static ddpc_status stand(ddpc__exec *e, int p, ddpc__conn *conn, int mine, int follows) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    ddpc__link_setup *ls = &pe->set;
    if (ls->tp->setup && ls->offers) {
        ddpc__pair pr = pair_of(c, p);
        ddpc_status s = ls->tp->setup(&pr, conn, step_deadline(e), c->abort_fd, &ls->res);
        if (s != DDPC_OK) {
            tcp->close(conn);
            pe->link = DDPC_LINK_NONE;
            return fail(e, p, s, "setting up %s with rank %d: %s", ls->tp->name, p,
                        ddpc_last_error());
        }
        ls->pend = conn;
        pe->link = DDPC_LINK_OFFERED;
        return DDPC_OK;
    }
    if (ls->tp->setup && !follows) {
        ls->pend = conn;
        pe->link = DDPC_LINK_JOINING;
        return DDPC_OK;
    }
    if (ls->nconn > 1 && mine) return streams_start(e, p, conn);
    if (ls->nconn > 1) pe->link = DDPC_LINK_GATHER;
    return gather(e, p, 0, conn);
}

/* This rank's connection conn to p is made (and the token proved, if
 * any): greets p, then rule 1 or 2. */
static ddpc_status greet_and_go(ddpc__exec *e, int p, ddpc__conn *conn) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    ddpc_status s = greet(c, p, conn, pe->set.offers, 0, step_deadline(e));
    if (s != DDPC_OK) {
        pe->link = DDPC_LINK_NONE;
        return fail(e, p, s, "lost rank %d while connecting to it (%s)", p, ddpc_last_error());
    }
    if (c->rank > p) return stand(e, p, conn, 1, 0); /* rule 1: it stands */
    pe->set.pend = conn;                             /* rule 2: ask */
    pe->link = DDPC_LINK_ASKED;
    return DDPC_OK;
}

ddpc_status ddpc__link_need(ddpc__exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    if (pe->link != DDPC_LINK_NONE) return DDPC_OK; /* under way, or refused: rule 1 brings it */
    pe->set.since = ddpc__now();
    ddpc__conn *conn = NULL;
    int proving = 0;
    ddpc_status s = ddpc__tcp_connect_start(pe->ep.ip, pe->ep.port, step_deadline(e), c->lazy,
                                            &pe->set.auth, &proving, &conn);
    if (s != DDPC_OK)
        return fail(e, p, s,
                    "rank %d: connecting to rank %d at %s:%d: %s (DDPC_CONNECT_TIMEOUT=%g "
                    "s; it destroyed its communicator, exited, crashed or was killed)",
                    c->rank, p, pe->ep.ip, pe->ep.port, ddpc_last_error(), c->connect_timeout);
    if (!proving) return greet_and_go(e, p, conn);
    pe->set.pend = conn; /* rule 4: the token's handshake first */
    pe->link = DDPC_LINK_PROVING;
    return DDPC_OK;
}

/* Peer p's connection proving the token (PROVING) is readable: the next
 * step of the handshake, and once the token is accepted, the link's own
 * set-up (rules 1, 2). */
static ddpc_status on_proving(ddpc__exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    int done = 0;
    ddpc_status s = ddpc__tcp_connect_step(pe->set.pend, &pe->set.auth, pe->ep.ip, pe->ep.port,
                                           step_deadline(e), &done);
    if (s != DDPC_OK) {
        drop_attempt(pe);
        pe->link = DDPC_LINK_NONE;
        return fail(e, p, s, "rank %d: connecting to rank %d: %s", c->rank, p, ddpc_last_error());
    }
    if (!done) return DDPC_OK;
    ddpc__conn *conn = pe->set.pend;
    pe->set.pend = NULL;
    return greet_and_go(e, p, conn);
}

/* A hello has come on accepted connection conn: rules 1, 2 and 5. */
static ddpc_status on_hello(ddpc__exec *e, ddpc__conn *conn) {
    ddpc_comm *c = e->c;
    int q = -1, offered = 0, k = 0;
    if (read_hello(c, conn, step_deadline(e), &q, &offered, &k) != DDPC_OK) {
        reject(c, conn, ddpc_last_error());
        return DDPC_OK;
    }
    ddpc__peer *qe = &c->peers[q];
    int st = qe->link;
    int linked = st == DDPC_LINK_UP || st == DDPC_LINK_OFFERED || st == DDPC_LINK_STREAMS ||
                 st == DDPC_LINK_JOINING;
    if (k != 0) { /* another stream of a link whose first connection stands, or is on its way */
        if (linked) {
            reject(c, conn, "a further connection from a rank already connected");
            return DDPC_OK;
        }
        return gather(e, q, k, conn);
    }
    if (q > c->rank) { /* rule 1 */
        if (linked || st == DDPC_LINK_GATHER) {
            reject(c, conn, "a second connection from a rank already connected");
            return DDPC_OK;
        }
        if (st == DDPC_LINK_ASKED || st == DDPC_LINK_PROVING) drop_attempt(qe);
        return stand(e, q, conn, 0, offered);
    }
    /* rule 2: q asks */
    verdict v = { VERDICT_MAGIC, qe->link == DDPC_LINK_NONE };
    ddpc_status s = tcp->send_full(conn, &v, sizeof v, step_deadline(e), c->abort_fd);
    if (!v.yes || s != DDPC_OK) {
        tcp->close(conn); /* q reads no, or (gone) nothing */
        return DDPC_OK;
    }
    qe->set.since = ddpc__now();
    return stand(e, q, conn, 0, 0);
}

/* Peer p's pending connection (ASKED, OFFERED, JOINING) is readable: the
 * verdict, the answer to this rank's setup, the peer's offer, or the peer
 * is gone. */
static ddpc_status on_answer(ddpc__exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc__peer *pe = &c->peers[p];
    ddpc__link_setup *ls = &pe->set;
    ddpc__conn *conn = ls->pend;
    if (pe->link == DDPC_LINK_OFFERED || pe->link == DDPC_LINK_JOINING) {
        void *res = ls->res;
        ls->pend = NULL;
        ls->res = NULL; /* connect consumes it */
        return make_link(e, p, &conn, 1, res);
    }
    verdict v;
    ddpc_status s = tcp->recv_full(conn, &v, sizeof v, step_deadline(e), c->abort_fd);
    if (s == DDPC_OK && v.magic != VERDICT_MAGIC)
        s = ddpc__err(DDPC_ERR_PROTOCOL, "rank %d answered a connection with magic 0x%x", p,
                      v.magic);
    if (s != DDPC_OK)
        return fail(e, p, s, "lost rank %d while connecting to it (%s)", p, ddpc_last_error());
    if (!v.yes) { /* its own connection is on its way (rule 1) */
        drop_attempt(pe);
        pe->link = DDPC_LINK_REFUSED;
        return DDPC_OK;
    }
    ls->pend = NULL;
    return stand(e, p, conn, 1, ls->tp->setup != NULL); /* its offer follows its yes */
}

/* Takes the connections waiting on the listener (those that proved the job
 * token, when there is one: tcp.c runs its handshake) into c->inc (at most
 * c->size + 16 held; the oldest is dropped beyond that). */
static ddpc_status accept_waiting(ddpc__exec *e) {
    ddpc_comm *c = e->c;
    for (int k = 0; k < 64; k++) {
        int fds[LISTENER_FDS];
        struct pollfd pf[LISTENER_FDS];
        int n = tcp->listener_fds(c->lis, fds, LISTENER_FDS);
        for (int i = 0; i < n; i++) pf[i] = (struct pollfd){ fds[i], POLLIN, 0 };
        if (poll(pf, (nfds_t)n, 0) <= 0) return DDPC_OK; /* nothing waits */
        ddpc__conn *conn = NULL;
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
        c->inc[c->ninc++] = (struct ddpc__incoming){ conn, ddpc__now() };
    }
    return DDPC_OK;
}

/* Whether conn has n bytes waiting, or its peer closed it (*eof). */
static int has_bytes(ddpc__conn *conn, size_t n, int *eof) {
    char buf[64];
    size_t got = 0;
    *eof = 0;
    if (tcp->peek(conn, buf, n < sizeof buf ? n : sizeof buf, &got, eof) != DDPC_OK) *eof = 1;
    return got >= n;
}

/* GATHER: the link's first connection closing before the others came is
 * the peer lost (it failed or died while connecting them). */
static ddpc_status gather_watch(ddpc__exec *e, int p) {
    ddpc_comm *c = e->c;
    ddpc__link_setup *ls = &c->peers[p].set;
    int eof = 0, in = 0;
    has_bytes(ls->gather[0], 1, &eof);
    if (!eof) return DDPC_OK;
    for (int k = 0; k < ls->nconn; k++) in += ls->gather[k] != NULL;
    int n = ls->nconn;
    drop_gathered(c, p);
    c->peers[p].link = DDPC_LINK_NONE;
    return fail(e, p, DDPC_ERR_PEER_LOST,
                "lost rank %d while its connections came (%d of %d in; it exited, crashed, was "
                "killed or aborted)",
                p, in, n);
}

ddpc_status ddpc__link_poll(ddpc__exec *e, int *moved) {
    ddpc_comm *c = e->c;
    if (!c->lis) return DDPC_OK;
    DDPC_CHECK(accept_waiting(e));
    /* hellos: each handled connection leaves the list, whatever became of it */
    for (int i = 0; i < c->ninc;) {
        struct ddpc__incoming in = c->inc[i];
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
        ddpc__peer *pe = &c->peers[p];
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
        if (pe->link != DDPC_LINK_ASKED && pe->link != DDPC_LINK_OFFERED &&
            pe->link != DDPC_LINK_JOINING)
            continue;
        int eof = 0;
        if (!has_bytes(pe->set.pend, sizeof(verdict), &eof) && !eof) continue;
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
        const ddpc__peer *pe = &c->peers[p];
        const ddpc__link_setup *ls = &pe->set;
        if (ls->pend) fds[n++] = tcp->poll_fd(ls->pend);
        if (pe->link == DDPC_LINK_GATHER && ls->gather[0] && n < max)
            fds[n++] = tcp->poll_fd(ls->gather[0]);
        for (int k = 1; pe->link == DDPC_LINK_STREAMS && k < ls->nconn && n < max; k++)
            if (!(ls->xready & (1u << k))) fds[n++] = tcp->poll_fd(ls->gather[k]);
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

/* ------------------------------------------------------------ eager */

static int all_up(const ddpc_comm *c) {
    for (int p = 0; p < c->size; p++)
        if (p != c->rank && c->peers[p].link != DDPC_LINK_UP) return 0;
    return 1;
}

/* The error for the ranks whose link never came up. */
static ddpc_status never_connected(ddpc_comm *c) {
    char miss[256] = "";
    size_t used = 0;
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && c->peers[r].link != DDPC_LINK_UP) {
            int n = snprintf(miss + used, sizeof miss - used, "%s%d", used ? ", " : "", r);
            if (n > 0 && (size_t)n < sizeof miss - used) used += (size_t)n;
        }
    return ddpc__err(DDPC_ERR_TIMEOUT,
                     "rank %d: ranks %s never connected within DDPC_CONNECT_TIMEOUT=%g s", c->rank,
                     miss, c->connect_timeout);
}

/* Sleeps until a link's descriptor or abort_fd is readable (<= 100 ms). */
static void wait_links(ddpc_comm *c, double deadline) {
    int cap = c->size * c->streams + c->ninc + 1 + LISTENER_FDS, fds[cap];
    struct pollfd pf[cap + 1];
    int n = ddpc__link_fds(c, fds, cap);
    pf[0] = (struct pollfd){ c->abort_fd, POLLIN, 0 };
    for (int i = 0; i < n; i++) pf[i + 1] = (struct pollfd){ fds[i], POLLIN, 0 };
    int ms = ddpc__deadline_ms(deadline, 1);
    poll(pf, (nfds_t)n + 1, ms < 0 || ms > 100 ? 100 : ms);
}

ddpc_status ddpc__link_all(ddpc_comm *c, double deadline) {
    ddpc__exec e;
    memset(&e, 0, sizeof e);
    e.c = c;
    e.deadline = deadline;
    e.lost = e.culprit = e.waits_on = -1;
    e.boot = 1;
    ddpc_status s = DDPC_OK;
    for (int p = 0; p < c->rank && s == DDPC_OK; p++) s = ddpc__link_need(&e, p); /* rule 1 */
    while (s == DDPC_OK && !all_up(c)) {
        int moved = 0;
        s = ddpc__link_poll(&e, &moved);
        if (s != DDPC_OK || moved) continue;
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
            s = ddpc__err(DDPC_ERR_ABORTED, "rank %d: aborted while accepting its peers", c->rank);
        else if (ddpc__expired(deadline))
            s = never_connected(c);
        else
            wait_links(c, deadline);
    }
    tcp->close_listener(c->lis); /* every pair is up: nobody else may connect */
    c->lis = NULL;
    return s;
}
