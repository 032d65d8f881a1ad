/*
 * link.h — one pair's connection (link.c): its state machine, the same for
 * pairs connected when the communicator is made (eager) and at first use
 * (lazy), over the transport table (transport/transport.h).
 *
 * Included by comm.h; the functions take its types, declared there.
 */
#ifndef DDPC_COMM_LINK_H
#define DDPC_COMM_LINK_H

#include <stdint.h>

#include "base/auth.h"
#include "transport/transport.h"

struct ddpc_comm;
struct ddpc__exec;

/* Where a pair's connection stands (ddpc__peer.link). */
enum {
    DDPC_LINK_NONE = 0, /* no connection, none asked for */
    DDPC_LINK_ASKED,    /* this (lower) rank connected and waits for the peer's verdict */
    DDPC_LINK_OFFERED,  /* connected; waits for the answer to its transport's setup (offer) */
    DDPC_LINK_REFUSED,  /* the peer refused this rank's connection: its own is on the way */
    DDPC_LINK_UP,       /* conn carries messages */
    DDPC_LINK_PROVING,  /* connected; proving the job token, answered from the peer's progress */
    DDPC_LINK_GATHER,   /* the link's first connection stands; its other streams are coming */
    DDPC_LINK_STREAMS,  /* this rank's first connection stands; its others prove the token */
    DDPC_LINK_JOINING,  /* connected and greeted; waits for the peer's setup (offer) to join */
    DDPC_LINK_STATES
};

/* A pair's set-up: what the table chose for it, and what is under way. */
typedef struct ddpc__link_setup {
    const ddpc__transport *tp; /* the transport chosen (ddpc__transport_pick); NULL for self */
    int nconn;                 /* the TCP connections its link is made over */
    int offers;                /* this rank runs tp's setup (the pair's offering end) */
    ddpc__conn *pend;    /* PROVING, ASKED, OFFERED, JOINING: the connection being set up; owned */
    ddpc__auth_cli auth; /* PROVING: the client half of the job token's handshake */
    void *res;           /* OFFERED (or ASKED with an offer): tp's setup; owned */
    double since;        /* when this rank began waiting for the link (s) */
    ddpc__conn **gather; /* GATHER: the link's TCP connections accepted so far, by stream;
                          * STREAMS: those this rank made ([nconn]; owned), until all are in */
    ddpc__auth_cli *xauth; /* STREAMS: each one's job token handshake ([nconn]) */
    uint32_t xready;       /* STREAMS: bit k, connection k is proved and greeted */
} ddpc__link_setup;

/* Chooses every pair's transport (the table's first that can connect the
 * two published endpoints) and which end of each sets it up. Once, after
 * the entries are exchanged (bootstrap.c); both ends decide alike. */
void ddpc__link_plan(struct ddpc_comm *c);
/* Eager: connects every pair before deadline, this rank connecting to every
 * lower rank and taking every higher one's connection, through the same
 * steps as a lazy link; then closes the listener. Errors name the ranks
 * that never connected. */
ddpc_status ddpc__link_all(struct ddpc_comm *c, double deadline);
/* Lazy links: advances peer p's link by what can be done without waiting on
 * the peer (connects when this rank may; see link.c). A failure fails the
 * operation (ddpc__fail). */
ddpc_status ddpc__link_need(struct ddpc__exec *e, int p);
/* Accepts what waits on the listener, reads the hellos and answers that
 * have come, and finishes the links they complete (*moved = 1 when one came
 * up). Does not wait. */
ddpc_status ddpc__link_poll(struct ddpc__exec *e, int *moved);
/* The descriptors a sleeping wait watches for links (listener, accepted
 * connections without a hello, connections waiting for an answer): writes
 * up to max into fds, returns how many (at most c->size * c->streams +
 * c->ninc + 1). */
int ddpc__link_fds(struct ddpc_comm *c, int *fds, int max);
/* Closes everything link.c holds (listener, accepted and pending
 * connections, set-ups under way). */
void ddpc__link_free(struct ddpc_comm *c);

#endif /* DDPC_COMM_LINK_H */
