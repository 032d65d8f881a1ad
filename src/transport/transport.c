/*
 * transport.c — the table of transports a pair may use, and the choice
 * among them: the first whose can_connect says yes carries the pair
 * (NCCL's transport selection in src/transport.cc: the first transport of
 * its list that can connect the two peers).
 *
 * Adding a transport is its own file and one entry here, before the ones
 * it should win over; TCP carries every pair, so it comes last.
 */
#include "transport/transport.h"

const ddpc__transport *const ddpc__transports[] = {
    &ddpc__transport_shm,     /* same host, DDPC_SHM */
    &ddpc__transport_streams, /* other hosts, DDPC_SOCKETS_PER_PEER > 1 */
    &ddpc__transport_tcp,     /* every pair */
};
const int ddpc__ntransports = (int)(sizeof ddpc__transports / sizeof ddpc__transports[0]);

const ddpc__transport *ddpc__transport_pick(const ddpc__pair *pair, int *nconn) {
    for (int i = 0; i < ddpc__ntransports; i++) {
        int n = ddpc__transports[i]->can_connect(pair);
        if (n > 0) {
            *nconn = n;
            return ddpc__transports[i];
        }
    }
    *nconn = 1; /* not reached: TCP carries every pair */
    return &ddpc__transport_tcp;
}
