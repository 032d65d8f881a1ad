/*
 * test_docs.c — the parts of the docs generated from the code are current:
 * docs/ENVIRONMENT.md's table (src/base/env_vars.h) and the README's
 * example (examples/ddp_mnist.c's main). `make docs` rewrites both.
 * Run from the top of the repository, as `make test` does.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/env.h"
#include "test.h"

/* The file's text (malloc'd), failing the test when it cannot be read. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    char cwd[512];
    CHECK_MSG(f, "cannot open %s from %s (run the tests from the top of the repository)", path,
              getcwd(cwd, sizeof cwd) ? cwd : "?");
    char *text = NULL;
    size_t cap = 0, n = 0;
    for (size_t got = 1; got > 0;) {
        if (cap - n < 4096) CHECK((text = realloc(text, cap = cap * 2 + 8192)) != NULL);
        got = fread(text + n, 1, cap - n - 1, f);
        n += got;
    }
    fclose(f);
    text[n] = 0;
    return text;
}

/* The text strictly between the line `begin` and the next line `end` of
 * text, cut in place (NULL when a marker is missing). */
static char *block(char *text, const char *begin, const char *end) {
    char *b = strstr(text, begin), *e;
    if (!b) return NULL;
    b += strlen(begin);
    if (!(e = strstr(b, end))) return NULL;
    *e = 0;
    return b;
}

TEST(docs_environment_table_is_current) {
    char *doc = slurp("docs/ENVIRONMENT.md");
    char *table = block(doc, "<!-- generated: ddpc-run --env -->\n", "<!-- end generated -->");
    CHECK_MSG(table, "docs/ENVIRONMENT.md lacks its generated block's markers");
    char *gen = NULL;
    size_t glen = 0;
    FILE *m = open_memstream(&gen, &glen);
    ddpc__env_print(m, 1);
    fclose(m);
    int same = strcmp(table, gen) == 0;
    free(gen);
    free(doc);
    CHECK_MSG(same,
              "docs/ENVIRONMENT.md is out of date: run `make docs` (it rewrites the table from "
              "src/base/env_vars.h)");
}

TEST(docs_readme_example_is_current) {
    char *readme = slurp("README.md"), *ex = slurp("examples/ddp_mnist.c");
    char *shown = block(readme, "```c\n", "```\n");
    CHECK_MSG(shown, "README.md has no ```c block (the example)");
    char *main_fn = block(ex, "\nint main", "\n}\n");
    CHECK_MSG(main_fn, "examples/ddp_mnist.c has no main");
    size_t n = strlen(main_fn);
    /* the README shows "int main...}" followed by a newline */
    int same = strncmp(shown, "int main", 8) == 0 && strncmp(shown + 8, main_fn, n) == 0 &&
               strcmp(shown + 8 + n, "\n}\n") == 0;
    free(readme);
    free(ex);
    CHECK_MSG(same,
              "README.md's example differs from examples/ddp_mnist.c's main: run `make docs`");
}
