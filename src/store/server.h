/*
 * server.h — what the store's server offers ddpc's other layers beyond its
 * public calls (ddpc/store.h): a server on the first free port of a list
 * (a unique id's store, comm.c).
 */
#ifndef DDPC_STORE_SERVER_H
#define DDPC_STORE_SERVER_H

#include "base/sock.h"
#include "ddpc/store.h"

/* As ddpc_store_server_create on host:port when ports is NULL, else on the
 * first free port of ports (base/sock.h). */
ddpc_status ddpc__store_server_create_ports(const char *host, int port, const ddpc__ports *ports,
                                            ddpc_store_server **out);

#endif /* DDPC_STORE_SERVER_H */
