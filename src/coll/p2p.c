/*
 * p2p.c — send, recv and barrier.
 *
 * Point-to-point messages carry their tag in the header's root field and a
 * per-(sender, receiver) sequence number (for diagnostics) in place of the
 * collective one; a receive takes the earliest message of its (peer, tag),
 * held aside or yet to come (comm/progress.c), and a count or dtype that
 * differs is caught by the header check. Empty messages (nbytes 0) do not
 * travel, as in the queue's batches (comm/queue.c). The
 * barrier is a dissemination barrier: ceil(log2 n) rounds of empty messages
 * to rank + 2^k.
 */
#include "coll/coll.h"

ddpc_status ddpc__send(ddpc__exec *e, const void *buf, size_t nbytes, int peer) {
    ddpc__req q;
    if (nbytes == 0) return DDPC_OK;
    e->fp.seq = e->c->p2p_sent[peer]++;
    ddpc__post_send(e, &q, peer, buf, nbytes);
    return ddpc__wait(e, &q);
}

ddpc_status ddpc__recv(ddpc__exec *e, void *buf, size_t nbytes, int peer) {
    ddpc__req q;
    if (nbytes == 0) return DDPC_OK;
    e->fp.seq = e->c->p2p_recvd[peer]++;
    ddpc__post_recv_tagged(e, &q, peer, buf, nbytes);
    return ddpc__wait(e, &q);
}

ddpc_status ddpc__barrier(ddpc__exec *e) {
    ddpc_comm *c = e->c;
    int n = c->size, r = c->rank;
    for (int k = 1; k < n; k <<= 1) {
        ddpc__req q[2];
        ddpc__post_send(e, &q[0], (r + k) % n, NULL, 0);
        ddpc__post_recv(e, &q[1], (r + n - k % n) % n, NULL, 0);
        DDPC_CHECK(ddpc__wait_all(e, q, 2));
    }
    return DDPC_OK;
}
