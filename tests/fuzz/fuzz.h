/*
 * fuzz.h — what the fuzz targets share. Each fuzz_*.c defines one
 * `int fuzz_NAME(const uint8_t *data, size_t size)` that feeds arbitrary
 * bytes to one of ddpc's parsers and checks what it promises about bad
 * input (an error that names the problem, nothing changed, no crash);
 * a broken promise calls fuzz_fail, which aborts.
 *
 * Built with clang's libFuzzer (`make fuzz`), DDPC_FUZZ_ENTRY names the
 * target that becomes LLVMFuzzerTestOneInput. Without it (the test suite,
 * tests/unit/test_fuzz_corpus.c) the same functions replay the corpus kept
 * in tests/fuzz/corpus/NAME/, so what a fuzzer once found stays fixed.
 */
#ifndef DDPC_FUZZ_H
#define DDPC_FUZZ_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((format(printf, 1, 2), noreturn)) static inline void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: broken promise: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

/* A file that holds exactly data[0, size), at a path the loaders can open
 * (a memfd, through /proc/self/fd). Returns the path; the same file is
 * rewritten at each call. */
const char *fuzz_file(const char *name, const void *data, size_t size);

#endif
