/*
 * test_env.c — the list of environment variables (src/base/env_vars.h): every
 * row sound, and the typed readers checking each row's one range
 * (test_docs.c checks docs/ENVIRONMENT.md against the list).
 */
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "test.h"

TEST(env_rows_are_sound) {
    CHECK_EQ(ddpc__env_table_len, DDPC_ENV_COUNT);
    for (int i = 0; i < ddpc__env_table_len; i++) {
        const ddpc__env_var *v = &ddpc__env_table[i];
        CHECK_MSG(v->name && *v->name && v->meaning && *v->meaning, "row %d is incomplete", i);
        for (int j = 0; j < i; j++) {
            CHECK_MSG(strcmp(v->name, ddpc__env_table[j].name) != 0, "%s has two rows", v->name);
            if (v->alias && ddpc__env_table[j].alias)
                CHECK_MSG(strcmp(v->alias, ddpc__env_table[j].alias) != 0, "alias %s twice",
                          v->alias);
        }
        if (v->type == DDPC_ENVT_STR) continue;
        CHECK_MSG(v->lo <= v->hi, "%s: range [%g, %g] is empty", v->name, v->lo, v->hi);
        if (!v->deflt) continue;
        /* the default must be a value the variable may take */
        unsetenv(v->name);
        if (v->alias) unsetenv(v->alias);
        long l;
        double d;
        if (v->type == DDPC_ENVT_INT)
            CHECK_MSG(ddpc__env_long((ddpc__env_id)i, &l) == DDPC_OK, "%s: default %s: %s", v->name,
                      v->deflt, ddpc_last_error());
        else
            CHECK_MSG(ddpc__env_double((ddpc__env_id)i, &d) == DDPC_OK, "%s: default %s: %s",
                      v->name, v->deflt, ddpc_last_error());
    }
}

TEST(env_typed_readers_check_the_rows_range) {
    double d;
    long l;
    unsetenv("DDPC_TIMEOUT");
    unsetenv("HCCL_EXEC_TIMEOUT");
    CHECK_OK(ddpc__env_double(DDPC_ENV_TIMEOUT, &d));
    CHECK_NEAR(d, 1836, 0);
    setenv("HCCL_EXEC_TIMEOUT", "30", 1); /* the alias, when ddpc's own name is unset */
    CHECK_OK(ddpc__env_double(DDPC_ENV_TIMEOUT, &d));
    CHECK_NEAR(d, 30, 0);
    const char *src;
    CHECK_STR(ddpc__env(DDPC_ENV_TIMEOUT, &src), "30");
    CHECK_STR(src, "HCCL_EXEC_TIMEOUT");
    setenv("DDPC_TIMEOUT", "2e7", 1); /* above the row's range: named with the range */
    CHECK_STATUS(ddpc__env_double(DDPC_ENV_TIMEOUT, &d), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_TIMEOUT='2e7' is not a number in [0, 1e7]");
    setenv("DDPC_IF_BASE_PORT", "70000", 1);
    CHECK_STATUS(ddpc__env_long(DDPC_ENV_IF_BASE_PORT, &l), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "DDPC_IF_BASE_PORT='70000' is not an integer in [0, 65535]");
    setenv("DDPC_IF_BASE_PORT", "60000", 1);
    CHECK_OK(ddpc__env_long(DDPC_ENV_IF_BASE_PORT, &l));
    CHECK_EQ(l, 60000);
    unsetenv("RANK"); /* no default: unset is an error naming it */
    CHECK(!ddpc__env_isset(DDPC_ENV_RANK));
    CHECK_STATUS(ddpc__env_long(DDPC_ENV_RANK, &l), DDPC_ERR_ENV);
    CHECK_CONTAINS(ddpc_last_error(), "RANK is not set");
    /* a reader of the wrong type is a bug, not a user's error */
    CHECK_STATUS(ddpc__env_long(DDPC_ENV_TIMEOUT, &l), DDPC_ERR_INTERNAL);
}
