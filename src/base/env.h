/*
 * env.h — the environment variables ddpc reads, by id: DDPC_ENV_<ID> for
 * each row of env_vars.h (the one list: name, HCCL alias, type, default,
 * range, meaning), the table made from it, and the typed readers that check
 * a value against its row's range. docs/ENVIRONMENT.md is printed from the
 * table (`ddpc-run --env`). ddpc's own names win over the HCCL aliases when
 * both are set.
 */
#ifndef DDPC_ENV_H
#define DDPC_ENV_H

#include <stdio.h>

#include "base/base.h"

#include "base/env_vars.h"

/* What kind of value a variable holds: text, an integer or a number. */
typedef enum { DDPC_ENVT_STR, DDPC_ENVT_INT, DDPC_ENVT_REAL } ddpc__env_type;

/* DDPC_ENV_<ID> for every row of env_vars.h: a misspelt id does not compile. */
typedef enum {
#define DDPC_ENV_ID(id, ...) DDPC_ENV_##id,
    DDPC_ENV_VARS(DDPC_ENV_ID)
#undef DDPC_ENV_ID
        DDPC_ENV_COUNT
} ddpc__env_id;

typedef struct ddpc__env_var {
    const char *name;  /* DDPC_... or the torchrun / launcher name */
    const char *alias; /* HCCL_... name honoured too, or NULL */
    ddpc__env_type type;
    const char *deflt;   /* default as text, or NULL for none */
    double lo, hi;       /* the one range of an INT or REAL value */
    const char *meaning; /* one line */
} ddpc__env_var;

/* Indexed by ddpc__env_id. */
extern const ddpc__env_var ddpc__env_table[];
extern const int ddpc__env_table_len;

/* The value of variable id: its own name first, then its HCCL alias, then
 * the default (NULL when it has none). *source (may be NULL) gets the name
 * it came from or "default". */
const char *ddpc__env(ddpc__env_id id, const char **source);
/* 1 if the variable (or its alias) is set to a non-empty value. */
DDPC_LAYER_API int ddpc__env_isset(ddpc__env_id id);
/* An INT / REAL variable's value, checked against its range; malformed or
 * out of range is DDPC_ERR_ENV naming the variable, the value and the range;
 * unset with no default is DDPC_ERR_ENV ("NAME is not set"): test
 * ddpc__env_isset first when optional. */
DDPC_LAYER_API ddpc_status ddpc__env_long(ddpc__env_id id, long *out);
DDPC_LAYER_API ddpc_status ddpc__env_double(ddpc__env_id id, double *out);
/* The variable's name, e.g. for messages. */
const char *ddpc__env_name(ddpc__env_id id);

/* Parse helpers used by the table readers and by tools. */
ddpc_status ddpc__parse_long(const char *what, const char *s, long lo, long hi, long *out);
ddpc_status ddpc__parse_double(const char *what, const char *s, double lo, double hi, double *out);
/* "64", "4K", "1M", "2G" (powers of 1024) to bytes. */
ddpc_status ddpc__parse_size(const char *what, const char *s, size_t *out);

/* Writes the table as Markdown (markdown = 1) or plain text. */
void ddpc__env_print(FILE *f, int markdown);
/* Logs every table variable's effective value and source at INFO. */
void ddpc__env_log_effective(unsigned subsys);

#endif /* DDPC_ENV_H */
