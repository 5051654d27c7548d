/*
 * core/hash.h: include this instead of <uthash.h> in core/. Every table in
 * core/ is keyed by a handle or a device address (8 bytes); uthash's default
 * Jenkins hash costs ~60 instructions per lookup, which is most of what a
 * graph launch costs the library (two lookups per launch). An 8-byte key is
 * hashed with one multiplication (sg_hash8, util.h); other key lengths keep
 * uthash's own function.
 *
 * Define uthash_nonfatal_oom before including it, as with uthash.
 */
#ifndef SG_HASH_H
#define SG_HASH_H

#include "util.h"       /* sg_hash8 */

#define HASH_FUNCTION(keyptr, keylen, hashv)                                  \
    do {                                                                      \
        if ((keylen) == 8) (hashv) = sg_hash8(keyptr);                        \
        else HASH_JEN(keyptr, keylen, hashv);                                 \
    } while (0)

#include <uthash.h>

#endif /* SG_HASH_H */
