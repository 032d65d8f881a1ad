/*
 * algo.c — DDPC_ALGO's value, in ddpc's words or HCCL_ALGO's (its alias):
 * which collective algorithms a communicator uses. The one parser; comm.c
 * calls it with the variable the value came from.
 *
 * ddpc's words: auto, flat, hier, ring, rhd, tree (env_vars.h).
 * HCCL_ALGO's syntax (CANN's documentation of the variable):
 *   level0:NA;level1:<algo>[;level2:<algo>]
 *   <op>=level0:NA;level1:<algo>/<op>=...      (per operation)
 * level0 is the intra-server algorithm (HCCL accepts only NA), level1 the
 * inter-server one, level2 the one between super-nodes. What maps:
 *   level1:ring   -> hier, the inter-host step of allreduce a ring
 *   level1:H-D_R  -> hier, that step recursive halving-doubling
 * HCCL's other level1 algorithms (NHR, NHR_V1, NB, AHC, pipeline,
 * pairwise), a level0 other than NA, level2, and per-operation entries for
 * operations other than allreduce have no counterpart here: each is named
 * in a WARN and left to auto. Anything HCCL would not accept either (an
 * unknown level or algorithm, a missing ':') is an error naming it.
 */
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"

/* Every communicator reads the variable (splits too): its warnings are
 * logged by the first only. */
static int warned;
#define WARN_ONCE(...)                                                                 \
    do {                                                                               \
        if (!__atomic_load_n(&warned, __ATOMIC_RELAXED)) DDPC_WARN(INIT, __VA_ARGS__); \
    } while (0)

/* HCCL's level1 algorithm names; those that map first. */
static const char *const hccl_known[] = { "ring", "H-D_R", "NHR",      "NHR_V1",
                                          "NB",   "AHC",   "pipeline", "pairwise" };

/* Whether v is one of the n names. */
static int one_of(const char *v, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v, names[i])) return 1;
    return 0;
}

/* Copies [s, e) into buf (NUL-terminated, truncated to cap). */
static const char *span(char *buf, size_t cap, const char *s, const char *e) {
    size_t n = (size_t)(e - s);
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* One "level0:NA;level1:ring" group [s, e) of variable var; applies =
 * whether it sets the algorithms (the global form, or allreduce's entry);
 * op names the operation in messages ("" for the global form). */
static ddpc_status hccl_group(const char *var, const char *s, const char *e, int applies,
                              const char *op, ddpc__algo_choice *out) {
    char item[64], val[64];
    while (s < e) {
        const char *semi = memchr(s, ';', (size_t)(e - s));
        if (!semi) semi = e;
        const char *colon = memchr(s, ':', (size_t)(semi - s));
        span(item, sizeof item, s, semi);
        if (!colon || colon == s || colon + 1 == semi)
            return ddpc__err(DDPC_ERR_ENV,
                             "%s: '%s' is not 'levelN:algorithm' (e.g. level0:NA;level1:ring)", var,
                             item);
        span(val, sizeof val, colon + 1, semi);
        size_t ln = (size_t)(colon - s);
        if (ln == 6 && !strncmp(s, "level0", 6)) {
            if (strcmp(val, "NA") != 0)
                WARN_ONCE("%s: %slevel0:%s does not map: ddpc's intra-host steps are its own "
                          "(ring and trees over shared memory); ignored",
                          var, op, val);
        } else if (ln == 6 && !strncmp(s, "level1", 6)) {
            if (!one_of(val, hccl_known, sizeof hccl_known / sizeof *hccl_known))
                return ddpc__err(DDPC_ERR_ENV,
                                 "%s: level1:%s is not one of HCCL's algorithms (ring, H-D_R, NHR, "
                                 "NHR_V1, NB, AHC, pipeline, pairwise)",
                                 var, val);
            int inter = !strcmp(val, "ring")    ? DDPC_ALGO_RING
                        : !strcmp(val, "H-D_R") ? DDPC_ALGO_RHD
                                                : -1;
            if (inter < 0 || !applies) {
                WARN_ONCE("%s: %slevel1:%s does not map to ddpc (it maps allreduce's level1:ring "
                          "and level1:H-D_R); left to DDPC_ALGO=auto",
                          var, op, val);
            } else {
                out->algo = DDPC_ALGO_HIER;
                out->inter = inter;
            }
        } else if (ln == 6 && !strncmp(s, "level2", 6)) {
            WARN_ONCE("%s: %slevel2:%s does not map: ddpc has two levels (host, cluster); "
                      "ignored",
                      var, op, val);
        } else {
            return ddpc__err(DDPC_ERR_ENV, "%s: '%s': the levels are level0, level1, level2", var,
                             span(item, sizeof item, s, colon));
        }
        s = semi < e ? semi + 1 : e;
    }
    return DDPC_OK;
}

/* HCCL's operation names for the per-operation form. */
static const char *const hccl_ops[] = { "allgather", "reducescatter", "allreduce", "broadcast",
                                        "reduce",    "scatter",       "alltoall" };

static ddpc_status hccl_parse(const char *var, const char *v, ddpc__algo_choice *out) {
    const char *end = v + strlen(v);
    if (!strchr(v, '=')) return hccl_group(var, v, end, 1, "", out);
    for (const char *s = v; s < end;) {
        const char *slash = strchr(s, '/');
        if (!slash) slash = end;
        const char *eq = memchr(s, '=', (size_t)(slash - s));
        char op[64], msg[80];
        if (!eq)
            return ddpc__err(DDPC_ERR_ENV,
                             "%s: '%s' has no operation (per operation: "
                             "allreduce=level0:NA;level1:ring/alltoall=...)",
                             var, span(op, sizeof op, s, slash));
        span(op, sizeof op, s, eq);
        if (!one_of(op, hccl_ops, sizeof hccl_ops / sizeof *hccl_ops))
            return ddpc__err(DDPC_ERR_ENV,
                             "%s: '%s' is not one of HCCL's operations (allgather, reducescatter, "
                             "allreduce, broadcast, reduce, scatter, alltoall)",
                             var, op);
        snprintf(msg, sizeof msg, "%s=", op);
        DDPC_CHECK(hccl_group(var, eq + 1, slash, !strcmp(op, "allreduce"), msg, out));
        s = slash < end ? slash + 1 : end;
    }
    return DDPC_OK;
}

ddpc_status ddpc__algo_parse(const char *var, const char *v, ddpc__algo_choice *out) {
    static const struct {
        const char *name;
        int algo;
    } words[] = {
        { "auto", DDPC_ALGO_AUTO }, { "ring", DDPC_ALGO_RING }, { "rhd", DDPC_ALGO_RHD },
        { "tree", DDPC_ALGO_TREE }, { "flat", DDPC_ALGO_FLAT }, { "hier", DDPC_ALGO_HIER }
    };
    out->algo = DDPC_ALGO_AUTO;
    out->inter = DDPC_ALGO_AUTO;
    if (!v || !*v) return DDPC_OK;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (!strcmp(v, words[i].name)) {
            out->algo = words[i].algo;
            return DDPC_OK;
        }
    if (strchr(v, ':')) {
        ddpc_status s = hccl_parse(var, v, out);
        __atomic_store_n(&warned, 1, __ATOMIC_RELAXED);
        return s;
    }
    return ddpc__err(DDPC_ERR_ENV,
                     "%s='%s' is not one of auto, flat, hier, ring, rhd, tree, nor HCCL_ALGO's "
                     "'level0:NA;level1:ring' (or level1:H-D_R)",
                     var, v);
}
