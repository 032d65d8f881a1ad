/*
 * try.h — DDPC_TRY for programs built on ddpc (not for the library, whose
 * calls return their status): stops the program on the first failed call.
 *
 *     #include "ddpc/try.h"
 *     DDPC_TRY(ddpc_comm_create_env(&comm));
 *
 * A call that does not return DDPC_OK prints "<program>: <ddpc_last_error()>"
 * on stderr and exits with status 1. DDPC_TRY is an expression (void), so it
 * may stand where a statement cannot, e.g. in a for loop's condition.
 */
#ifndef DDPC_TRY_H
#define DDPC_TRY_H

#include <stdio.h>
#include <stdlib.h>

#include "ddpc/ddpc.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GLIBC__)
extern char *program_invocation_short_name;
#define DDPC__PROGRAM_NAME program_invocation_short_name
#else
#define DDPC__PROGRAM_NAME "ddpc"
#endif

/* Prints the program's name and ddpc_last_error(), then exits 1. */
static inline void ddpc__try_failed(void) {
    fprintf(stderr, "%s: %s\n", DDPC__PROGRAM_NAME, ddpc_last_error());
    exit(1);
}

#define DDPC_TRY(call) ((void)((call) == DDPC_OK || (ddpc__try_failed(), 0)))

#ifdef __cplusplus
}
#endif
#endif /* DDPC_TRY_H */
