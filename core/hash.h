/*
 * core/hash.h: include this instead of <uthash.h> in core/. Every table in
 * core/ is keyed by a handle or a device address (8 bytes); uthash's default
 * Jenkins hash costs ~60 instructions per lookup, which is most of what a
 * graph launch costs the library (two lookups per launch). An 8-byte key is
 * hashed here with one multiplication (Fibonacci hashing: the high bits of
 * key x 2^64/phi, which spread handles that differ only in low, aligned bits);
 * other key lengths keep uthash's own function.
 *
 * Define uthash_nonfatal_oom before including it, as with uthash.
 */
#ifndef SG_HASH_H
#define SG_HASH_H

#include <stdint.h>
#include <string.h>

static inline unsigned sg_hash8(const void *key)
{
    uint64_t k;
    memcpy(&k, key, sizeof k);
    return (unsigned)((k * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

#define HASH_FUNCTION(keyptr, keylen, hashv)                                  \
    do {                                                                      \
        if ((keylen) == 8) (hashv) = sg_hash8(keyptr);                        \
        else HASH_JEN(keyptr, keylen, hashv);                                 \
    } while (0)

#include <uthash.h>

#endif /* SG_HASH_H */
