/*
 * core/util.h: small helpers every part of core/ shares: growing arrays,
 * the monotonic clock, rounding, two hashes (Fibonacci for 8-byte keys,
 * FNV-1a for byte strings), and a log-once macro.
 *
 * No state, no locks (sg_grow, sg_big_realloc and sg_now_ns are in util.c).
 */
#ifndef SG_UTIL_H
#define SG_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Makes room for `need` elements of `elem` bytes in *buf (capacity *cap),
 * doubling from 8; the new elements are zeroed. Returns 0, or -1 if out of
 * memory or the size overflows (then *buf and *cap are unchanged). */
int sg_grow_slow(void **buf, size_t *cap, size_t need, size_t elem);
static inline int sg_grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    return need <= *cap ? 0 : sg_grow_slow(buf, cap, need, elem);
}

/* Arrays as large as a graph (a description's nodes and edges, a delta's
 * copies): from SG_BIG_BYTES up each lives in a mapping of its own, so that
 * freeing or shrinking it gives the memory back to the system at once.
 * malloc would put them on its heap as soon as the program has freed one
 * large block (glibc then raises its mmap threshold), where the small blocks
 * allocated after them pin the heap: train_loop at 16,384 nodes under
 * skip_profiled held 50 MB more resident memory than without the library
 * for 23 MB of live library blocks (docs/benchmarks.md). Under
 * AddressSanitizer they stay on the heap, where it checks them.
 * sg_big_realloc is realloc for such a block (p NULL: a new one; bytes >
 * 0), sg_big_free is free: a block of one must never reach the other pair.
 */
#define SG_BIG_BYTES ((size_t)256 << 10)
void *sg_big_realloc(void *p, size_t bytes);
void sg_big_free(void *p);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t sg_now_ns(void);

/* v rounded up to a multiple of q (q > 0); 0 if that overflows. */
static inline size_t sg_round_up(size_t v, size_t q)
{
    size_t r = (v + q - 1) / q * q;
    return r < v ? 0 : r;
}

/* An 8-byte key (a handle, an address) hashed with one multiplication
 * (Fibonacci hashing: the high bits of key x 2^64/phi, which spread keys that
 * differ only in low, aligned bits). hash.h's tables and the fingerprints'
 * node map use it. */
static inline unsigned sg_hash8(const void *key)
{
    uint64_t k;
    memcpy(&k, key, sizeof k);
    return (unsigned)((k * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

/* FNV-1a over n bytes, continuing from h (SG_FNV_BASIS to start): the one
 * checksum of byte strings in core/ (IPC handles, profiled states and
 * allocation sequences). */
#define SG_FNV_BASIS UINT64_C(0xcbf29ce484222325)
static inline uint64_t sg_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

/* A warning printed the first time this place is reached only (log.h). */
#define SG_WARN_ONCE(...)                                                     \
    do {                                                                      \
        static int sg_once_;                                                  \
        if (!__atomic_exchange_n(&sg_once_, 1, __ATOMIC_RELAXED)) SG_WARN(__VA_ARGS__); \
    } while (0)

#endif /* SG_UTIL_H */
