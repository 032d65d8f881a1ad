/*
 * export.h — DDPC_LAYER_API marks the internal functions that the training
 * library (libddpc_train: nn, data, ddp) calls in libddpc across the shared
 * libraries' boundary. Everything else internal stays hidden
 * (-fvisibility=hidden); these are exported from libddpc.so under their
 * internal ddpc__ names, declared in no public header, and are no part of
 * the API: a program must not call them.
 */
#ifndef DDPC_BASE_EXPORT_H
#define DDPC_BASE_EXPORT_H

#define DDPC_LAYER_API __attribute__((visibility("default")))

#endif
