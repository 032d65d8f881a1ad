/* env.c — the table of environment variables, their readers and printer. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"

/* The rows of env_vars.h, in its order (so indexed by ddpc__env_id). */
const ddpc__env_var ddpc__env_table[] = {
#define DDPC_ENV_ROW(id, name, alias, type, deflt, lo, hi, meaning) \
    { name, alias, DDPC_ENVT_##type, deflt, (double)(lo), (double)(hi), meaning },
    DDPC_ENV_VARS(DDPC_ENV_ROW)
#undef DDPC_ENV_ROW
};
const int ddpc__env_table_len = (int)(sizeof ddpc__env_table / sizeof ddpc__env_table[0]);

ddpc_status ddpc__parse_long(const char *what, const char *s, long lo, long hi, long *out) {
    if (!s || !*s) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s is empty", what);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || *end || end == s)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s='%s' is not an integer", what, s);
    if (v < lo || v > hi)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s=%ld is out of range [%ld, %ld]", what, v, lo,
                         hi);
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc__parse_double(const char *what, const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s is empty", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (*end && isspace((unsigned char)*end)) end++;
    if (errno || *end || end == s || isnan(v))
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s='%s' is not a number", what, s);
    if (v < lo || v > hi)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s=%g is out of range [%g, %g]", what, v, lo, hi);
    *out = v;
    return DDPC_OK;
}

ddpc_status ddpc__parse_size(const char *what, const char *s, size_t *out) {
    if (!s || !*s) return ddpc__err(DDPC_ERR_INVALID_ARG, "%s is empty", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (errno || *end || end == s || !(v >= 0) || v * mul > 1e18)
        return ddpc__err(DDPC_ERR_INVALID_ARG, "%s='%s' is not a size (like 8, 4K, 1M, 2G)", what,
                         s);
    *out = (size_t)(v * mul);
    return DDPC_OK;
}

const char *ddpc__env_name(ddpc__env_id id) {
    return id >= 0 && id < DDPC_ENV_COUNT ? ddpc__env_table[id].name : "(no such variable)";
}

const char *ddpc__env(ddpc__env_id id, const char **source) {
    if (source) *source = "default";
    if (id < 0 || id >= DDPC_ENV_COUNT) return NULL;
    const ddpc__env_var *v = &ddpc__env_table[id];
    const char *s = getenv(v->name);
    if (s && *s) {
        if (source) *source = v->name;
        return s;
    }
    if (v->alias && (s = getenv(v->alias)) && *s) {
        if (source) *source = v->alias;
        return s;
    }
    return v->deflt;
}

int ddpc__env_isset(ddpc__env_id id) {
    const char *src;
    return ddpc__env(id, &src) != NULL && strcmp(src, "default") != 0;
}

/* A number as a user would write it: 0.001, 120, 1e7 (not 1e+07). */
static void number_text(double x, char *buf, size_t len) {
    char t[40];
    snprintf(t, sizeof t, "%g", x);
    char *e = strstr(t, "e+");
    if (e) {
        char *d = e + 2;
        while (*d == '0' && d[1]) d++;
        memmove(e + 1, d, strlen(d) + 1);
    }
    snprintf(buf, len, "%s", t);
}

/* Value of id as text, DDPC_ERR_ENV when unset with no default. */
static ddpc_status env_text(ddpc__env_id id, const char **val, const char **src) {
    *val = ddpc__env(id, src);
    if (!*val) return ddpc__err(DDPC_ERR_ENV, "%s is not set", ddpc__env_name(id));
    return DDPC_OK;
}

ddpc_status ddpc__env_long(ddpc__env_id id, long *out) {
    const char *val, *src;
    DDPC_CHECK(env_text(id, &val, &src));
    const ddpc__env_var *v = &ddpc__env_table[id];
    long lo = (long)v->lo, hi = (long)v->hi;
    if (v->type != DDPC_ENVT_INT)
        return ddpc__err(DDPC_ERR_INTERNAL, "%s is not an integer variable", v->name);
    if (ddpc__parse_long(src, val, lo, hi, out) != DDPC_OK)
        return ddpc__err(DDPC_ERR_ENV, "%s='%s' is not an integer in [%ld, %ld]", src, val, lo, hi);
    return DDPC_OK;
}

ddpc_status ddpc__env_double(ddpc__env_id id, double *out) {
    const char *val, *src;
    DDPC_CHECK(env_text(id, &val, &src));
    const ddpc__env_var *v = &ddpc__env_table[id];
    if (v->type != DDPC_ENVT_REAL)
        return ddpc__err(DDPC_ERR_INTERNAL, "%s is not a real-valued variable", v->name);
    if (ddpc__parse_double(src, val, v->lo, v->hi, out) != DDPC_OK) {
        char lo[40], hi[40];
        number_text(v->lo, lo, sizeof lo);
        number_text(v->hi, hi, sizeof hi);
        return ddpc__err(DDPC_ERR_ENV, "%s='%s' is not a number in [%s, %s]", src, val, lo, hi);
    }
    return DDPC_OK;
}

/* "[0, 65535]", "[0.001, 1e7]", or "" for text. */
static void range_text(const ddpc__env_var *v, char *buf, size_t len) {
    char lo[40], hi[40];
    if (v->type == DDPC_ENVT_STR) {
        buf[0] = 0;
        return;
    }
    if (v->type == DDPC_ENVT_INT) {
        snprintf(lo, sizeof lo, "%ld", (long)v->lo);
        snprintf(hi, sizeof hi, "%ld", (long)v->hi);
    } else {
        number_text(v->lo, lo, sizeof lo);
        number_text(v->hi, hi, sizeof hi);
    }
    snprintf(buf, len, "[%s, %s]", lo, hi);
}

void ddpc__env_print(FILE *f, int markdown) {
    if (markdown)
        fprintf(f,
                "| variable | HCCL alias | default | range | meaning |\n|---|---|---|---|---|\n");
    for (int i = 0; i < ddpc__env_table_len; i++) {
        const ddpc__env_var *v = &ddpc__env_table[i];
        char range[96];
        range_text(v, range, sizeof range);
        const char *alias = v->alias ? v->alias : "", *deflt = v->deflt ? v->deflt : "";
        const char *aq = *alias ? "`" : "", *dq = *deflt ? "`" : "", *rq = *range ? "`" : "";
        if (markdown)
            fprintf(f, "| `%s` | %s%s%s | %s%s%s | %s%s%s | %s |\n", v->name, aq, alias, aq, dq,
                    deflt, dq, rq, range, rq, v->meaning);
        else
            fprintf(f, "  %-22s %-22s %-10s %-14s %s\n", v->name, alias, *deflt ? deflt : "-",
                    *range ? range : "-", v->meaning);
    }
}

void ddpc__env_log_effective(unsigned subsys) {
    if (!ddpc__log_enabled(DDPC_LOG_INFO, subsys)) return;
    for (int i = 0; i < ddpc__env_table_len; i++) {
        const char *src;
        const char *val = ddpc__env((ddpc__env_id)i, &src);
        if (strncmp(ddpc__env_table[i].name, "DDPC_", 5) != 0) continue;
        if (i == DDPC_ENV_JOB_TOKEN && val) { /* a secret: its length only */
            ddpc__log(DDPC_LOG_INFO, subsys, "%s=(set, %zu characters) (%s)",
                      ddpc__env_table[i].name, strlen(val), src);
            continue;
        }
        ddpc__log(DDPC_LOG_INFO, subsys, "%s=%s (%s)", ddpc__env_table[i].name,
                  val ? val : "(unset)", src);
    }
}
