/*
 * core/fp_internal.h: what the parts of the fingerprint code share
 * (fp_pinfo.c: the parameter-layout cache; fp_desc.c: one node's
 * description; fp_build.c: descriptions built through the driver, the node
 * map; fp_compare.c: comparison, deltas; fp_store.c: storage, copies,
 * ownership).
 * Not for the rest of core/: fingerprint.h is the interface.
 */
#ifndef SG_FP_INTERNAL_H
#define SG_FP_INTERNAL_H

#include "fingerprint.h"

#include <stdint.h>
#include <string.h>

/* Most parameters a kernel can have (CUDA allows 32764 bytes of them). */
#define SG_FP_MAX_PARAMS 8192

typedef struct sg_fp_parg {
    uint32_t off, size;              /* one argument: offset and size in the canonical form */
} sg_fp_parg;

/* Parameter layout of one function (cached by fp_pinfo.c; immutable once
 * made). */
struct sg_fp_pinfo {
    const void *h;                   /* CUfunction or CUkernel */
    int ok;                          /* 0: no layout (the node is not comparable) */
    int gaps;                        /* the layout has bytes no argument covers */
    uint32_t dense_n;                /* min(n, 9) if n >= 1, argument i starts where i - 1 ends
                                      * and the first at 0 (the canonical form is the arguments
                                      * back to back, no gaps); else 0 */
    uint32_t n, total;               /* arguments; bytes of the canonical form */
    uint32_t words_n;                /* n if the layout is dense (as dense_n), n <= 64 and every
                                      * argument is 4 or 8 bytes long (packed with no lookup of
                                      * arg: sg_fp_launch_desc); else 0 */
    uint64_t words8;                 /* words_n: bit i set if argument i is 8 bytes long */
    sg_fp_parg *arg;                 /* n of them, in the same allocation */
    uint64_t *off64;                 /* n: arg[i].off as 64 bits (the dense check) */
};


/* The layout of h (a CUfunction, or a CUkernel when is_kern) from the cache,
 * probed on a miss. &sg_fp_pinfo_none if the driver cannot tell, NULL if out
 * of memory. The entry stays valid until the cache epoch changes and no
 * thread is inside sg_fp_cache_enter / leave. */
const sg_fp_pinfo *sg_fp_pinfo_get(int is_kern, const void *h);
extern const sg_fp_pinfo sg_fp_pinfo_none;

/* 16 bytes moved or compared without a call (GCC vector extension: SSE2 on
 * x86-64, two words elsewhere). may_alias: used on keys and byte buffers. */
typedef uint64_t sg_v16 __attribute__((vector_size(16), may_alias));
static inline sg_v16 ld16(const unsigned char *p)
{
    sg_v16 v;
    memcpy(&v, p, 16);
    return v;
}
static inline void st16(unsigned char *p, sg_v16 v) { memcpy(p, &v, 16); }
static inline int v16_zero(sg_v16 v) { return (v[0] | v[1]) == 0; }

/* Payload padding: a payload of len bytes is followed by zero bytes up to
 * the next multiple of 32 (SG_FP_PAD32), so that two payloads are compared in
 * 16- or 32-byte chunks (node_scan) with no tail. Every writer here keeps
 * it; a payload whose padding is not zero only loses the fast comparison
 * (the exact one over len bytes decides then). */
#define SG_FP_PAD32(len) (((len) + 31u) & ~31u)

/* Makes room for `len` payload bytes (a slot of the slab that is too small
 * is left for a buffer of the node's own, its bytes copied). Returns 0, or
 * -1 if out of memory. Capacities are multiples of 32 (64 << k for a
 * buffer of the node's own, the padded length for a slot), so
 * SG_FP_PAD32(len) <= cap always holds. */
int sg_fp_pay_reserve(sg_fp_node *n, uint32_t len);

/* Zeroes the padding of a payload of len bytes (pay_reserve(len) done);
 * before the bytes below len are written. */
static inline void sg_fp_pay_pad(unsigned char *pay, uint32_t len)
{
    if (len & 31u) {
        st16(pay + (len & ~31u), (sg_v16){ 0, 0 });
        st16(pay + (len & ~31u) + 16, (sg_v16){ 0, 0 });
    }
}

/* Copies len bytes without a call: 16-byte moves, the last one ending at
 * len (it may overlap the one before; both write the same bytes). */
static inline void sg_fp_copy_block(unsigned char *dst, const unsigned char *src, uint32_t len)
{
    if (len >= 16) {
        for (uint32_t i = 0; i + 16 < len; i += 16) st16(dst + i, ld16(src + i));
        st16(dst + len - 16, ld16(src + len - 16));
    } else if (len >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + len - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + len - 8, &b, 8);
    } else {
        memcpy(dst, src, len);
    }
}
/* Copies a padded payload: room bytes, a multiple of 32 (SG_FP_PAD32),
 * padding included; the usual one or two chunks without a call. */
static inline void sg_fp_copy_padded(unsigned char *dst, const unsigned char *src, uint32_t room)
{
    if (__builtin_expect(room > 64, 0)) {
        memcpy(dst, src, room);
        return;
    }
    for (uint32_t i = 0; i < room; i += 32) {
        st16(dst + i, ld16(src + i));
        st16(dst + i + 16, ld16(src + i + 16));
    }
}
/* Makes d a copy of s whose payload lies in slot (SG_FP_PAD32(s->len)
 * bytes, lent to d; none when s has no payload) (fp_store.c: copies and
 * deltas fill their slabs with it). */
void sg_fp_copy_into_slot(sg_fp_node *d, const sg_fp_node *s, unsigned char *slot);
/* A description made of the key alone: type and state (fp_desc.c). */
void sg_fp_key_only(sg_fp_node *n, CUgraphNodeType type, int state);
/* Packs kernelParams kp by layout pi into n's payload, argument by argument
 * (fp_desc.c). SG_FP_OK, SG_FP_NOT_COMPARABLE or -1 if out of memory. */
int sg_fp_pack_args_each(sg_fp_node *n, const sg_fp_pinfo *pi, void *const *kp);

#endif /* SG_FP_INTERNAL_H */
