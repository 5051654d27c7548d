/*
 * tests/fuzz/fuzz_input.h: what the fuzz targets share. A reader that takes
 * bytes off the front of a fuzz input (running out is not an error: reads
 * past the end give zeros and empty strings), and FUZZ_ASSERT, which prints
 * the broken property and aborts so that libFuzzer (or the corpus replay in
 * test_fuzz_corpus.c) records the input as a crash.
 */
#ifndef SG_FUZZ_INPUT_H
#define SG_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(cond)                                                     \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__,         \
                    __LINE__, #cond);                                         \
            abort();                                                          \
        }                                                                     \
    } while (0)

typedef struct fuzz_in {
    const uint8_t *p;
    size_t left;
} fuzz_in;

static inline int fuzz_empty(const fuzz_in *in) { return in->left == 0; }

static inline uint8_t fuzz_u8(fuzz_in *in)
{
    if (!in->left) return 0;
    in->left--;
    return *in->p++;
}

/* Little-endian, `bytes` <= 8 bytes long. */
static inline uint64_t fuzz_uint(fuzz_in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)fuzz_u8(in) << (8 * i);
    return v;
}

/* The next `n` bytes (fewer at the end of the input); *got says how many. */
static inline const uint8_t *fuzz_bytes(fuzz_in *in, size_t n, size_t *got)
{
    const uint8_t *p = in->p;
    *got = n < in->left ? n : in->left;
    in->p += *got;
    in->left -= *got;
    return p;
}

/* The bytes up to the next NUL (or the end), as a malloc'ed C string; the
 * NUL is consumed. */
static inline char *fuzz_cstr(fuzz_in *in)
{
    const uint8_t *nul = memchr(in->p, 0, in->left);
    size_t len = nul ? (size_t)(nul - in->p) : in->left;
    char *s = malloc(len + 1);
    FUZZ_ASSERT(s != NULL);
    memcpy(s, in->p, len);
    s[len] = '\0';
    in->p += len + (nul != NULL);
    in->left -= len + (nul != NULL);
    return s;
}

#endif /* SG_FUZZ_INPUT_H */
