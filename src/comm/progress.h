/*
 * progress.h — what the progress engine's three files share: progress.c
 * (posting, driving and waiting), fail.c (header checks, failures and
 * their notices), tags.c (point-to-point matching). Internal to them.
 */
#ifndef DDPC_COMM_PROGRESS_H
#define DDPC_COMM_PROGRESS_H

#include "comm/comm.h"

/* 1 once c was aborted (ddpc_comm_abort). */
static inline int ddpc__aborted(ddpc_comm *c) {
    return __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE);
}

/* Appends r to the FIFO (*head, *tail). */
void ddpc__enqueue(ddpc__req **head, ddpc__req **tail, ddpc__req *r);

/* fail.c: compares a received header with the one r expects; a notice or
 * a goodbye in its place is handled (stall.c) or fails e. */
ddpc_status ddpc__check_hdr(ddpc__exec *e, const ddpc__req *r);
/* fail.c: peer's failure notice h fails e too, naming the rank it lost or
 * both calls of a mismatch. */
ddpc_status ddpc__peer_failed(ddpc__exec *e, int peer, const ddpc__hdr *h);
/* fail.c: a transfer with peer failed with s (dir: "sending to", ...):
 * fails e, with the peer's own notice when it left one. */
ddpc_status ddpc__lost(ddpc__exec *e, int peer, ddpc_status s, const char *dir);

/* tags.c: completes the receives posted from pe whose tag an unexpected
 * message holds (*moved = 1 when one did). */
ddpc_status ddpc__match_ux(ddpc__exec *e, ddpc__peer *pe, int *moved);
/* tags.c: the head of p's receives is tagged and has read nothing: puts at
 * the head the receive the next message belongs to (*wait = 1 while its
 * header has not all come). */
ddpc_status ddpc__route(ddpc__exec *e, int p, int *wait);

#endif /* DDPC_COMM_PROGRESS_H */
