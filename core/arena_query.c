/*
 * core/arena_query.c: what an arena answers without changing (arena.h): the
 * operation that failed, by name; whether an address is the arena's; the
 * chunks under a range; bytes mapped, reservations and free ranges.
 *
 * No locking here: the caller serialises every call on one arena (arena.h).
 */
#include "arena_internal.h"

const char *sg_arena_fail_name(sg_arena_fail f)
{
    static const char *const names[] = { "none", "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                                         "cuMemSetAccess", "out of host memory" };
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "?";
}

int sg_arena_contains(const sg_arena *a, CUdeviceptr p) { return seg_of(a, p) != NULL; }

size_t sg_arena_chunks(const sg_arena *a, CUdeviceptr addr, size_t len, sg_arena_chunk *out,
                       size_t max)
{
    const seg *s = seg_of(a, addr);
    size_t n = 0;
    if (!s) return 0;
    for (size_t i = ch_index(s, addr / a->gran * a->gran); i < s->nch; i++) {
        const sg_arena_chunk *c = &s->ch[i];
        if (c->va >= addr + len) break;
        if (c->va + c->size <= addr) continue;
        if (n < max) out[n] = *c;
        n++;
    }
    return n;
}

size_t sg_arena_mapped(const sg_arena *a) { return a->mapped; }
size_t sg_arena_segments(const sg_arena *a) { return a->nsegs; }

size_t sg_arena_free_ranges(const sg_arena *a)
{
    size_t n = 0;
    for (size_t k = 0; k < a->nsegs; k++) n += sg_blocked_count(&a->segs[k].fr);
    return n;
}
