/*
 * ddp_test.h — what the tests look at inside DDP's reducer and a program
 * has no use for (tests/dist/test_ddp.c); not installed, not exported.
 */
#ifndef DDPC_DDP_TEST_H
#define DDPC_DDP_TEST_H

#include "ddpc/ddp.h"

/* Buckets whose allreduce has been issued and not yet waited for: as
 * backward ends (seen from a backward_end hook wrapping DDP's) with overlap,
 * every bucket whose gradients are final is in flight, except the last,
 * which the end of backward reduces; without overlap none is (all but the
 * last are already reduced); after backward none is. */
int ddpc__ddp_buckets_in_flight(const ddpc_ddp *d);

#endif /* DDPC_DDP_TEST_H */
