/* test_fuzz_corpus.c — the fuzz targets of tests/fuzz/ without libFuzzer:
 * each replays its corpus (tests/fuzz/corpus/NAME: valid files of each kind,
 * and every input a fuzzer found a fault with), then a fixed number of
 * mutations of each corpus file (bytes flipped, set, cut, duplicated), so
 * `make test` keeps what `make fuzz` fixed. A broken promise aborts the
 * test's process, which fails the test with the target's message. */
#include <dirent.h>
#include <string.h>

#include "test.h"

#include "../fuzz/fuzz_auth.c"
#include "../fuzz/fuzz_ckpt.c"
#include "../fuzz/fuzz_idx.c"
#include "../fuzz/fuzz_ranktable.c"
#include "../fuzz/fuzz_store.c"
#include "../fuzz/fuzz_util.c"

typedef int (*target_fn)(const uint8_t *, size_t);

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* One random change of buf[0, *n) (capacity cap). */
static void mutate(uint8_t *buf, size_t *n, size_t cap) {
    size_t len = *n;
    switch (next() % 5) {
    case 0:
        if (len) buf[next() % len] ^= (uint8_t)(1u << (next() % 8));
        break; /* flip a bit */
    case 1:
        if (len) buf[next() % len] = (uint8_t)next();
        break; /* set a byte */
    case 2:
        if (len) buf[next() % len] = next() % 2 ? 0xff : 0;
        break;                                            /* a boundary byte */
    case 3: *n = len ? (size_t)(next() % len) : 0; break; /* cut */
    default: {                                            /* duplicate a run */
        if (!len) break;
        size_t at = (size_t)(next() % len), k = 1 + (size_t)(next() % 16);
        if (at + k > len) k = len - at;
        if (len + k > cap) break;
        memmove(buf + at + k, buf + at, len - at);
        *n = len + k;
    }
    }
}

static void replay(const char *name, target_fn fn, int mutations) {
    char dir[512];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "no corpus at %s (run the tests from the top of the repository)", dir);
    static uint8_t buf[1 << 16], mut[1 << 16];
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "rb");
        CHECK_MSG(f != NULL, "cannot open %s", p);
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        fn(buf, n);
        files++;
        for (int k = 0; k < mutations; k++) {
            size_t m = n;
            memcpy(mut, buf, n);
            for (int j = 1 + (int)(next() % 3); j > 0; j--) mutate(mut, &m, sizeof mut);
            fn(mut, m);
        }
    }
    closedir(d);
    CHECK_MSG(files > 0, "%s is empty", dir);
}

TEST(fuzz_corpus_idx) { replay("idx", fuzz_idx, 300); }
TEST(fuzz_corpus_ckpt) { replay("ckpt", fuzz_ckpt, 500); }
TEST(fuzz_corpus_store) { replay("store", fuzz_store, 100); }
TEST(fuzz_corpus_ranktable) { replay("ranktable", fuzz_ranktable, 300); }
TEST(fuzz_corpus_auth) { replay("auth", fuzz_auth, 2000); }
