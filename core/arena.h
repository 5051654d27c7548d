/*
 * core/arena.h: the placement algorithm over virtual-address reservations,
 * with no driver in sight (memory.c supplies the VMM operations through
 * sg_arena_ops; unit tests supply fakes).
 *
 * An arena is a list of segments, each one reservation [base, base+size).
 * Physical memory is mapped into a segment one granule at a time: a chunk is
 * one handle of exactly the granularity, mapped once at a fixed address, so
 * that any granule no block uses can be given back on its own (a mapping
 * cannot be unmapped in part). Blocks are placed by deterministic
 * address-ordered first fit (segments in creation order, addresses
 * ascending) over the free ranges, first among those already mapped, then
 * among all (the granules a block needs that are not mapped yet get chunks);
 * when nothing fits a new segment is reserved. A block never moves. The same
 * sequence of calls gives the same addresses.
 *
 * Memory pressure: sg_arena_trim() unmaps and releases every chunk that no
 * live block and no pending stream-ordered free touches, and returns how
 * many bytes it gave back; the addresses stay reserved, so a later block
 * there gets new chunks at the same place.
 *
 * Stream order: a block freed with an event (cuMemFreeAsync) becomes a
 * "pending" free range tagged with the freeing stream's key. Pending ranges
 * are usable at once by allocations carrying the same key (stream order
 * makes that safe) and by everyone once ops->event_done says the event has
 * completed (checked at each allocation and trim: the range then becomes
 * available and coalesces). Adjacent usable ranges are treated as one during
 * the scan, so an allocation on the freeing stream finds the same address
 * whether or not the event has completed yet. sg_arena_rekey() detaches the
 * pending ranges of a stream that is gone (its handle may be reused) so that
 * only their events make them usable.
 *
 * Own handles: a block placed with own=1 starts on a granule boundary and
 * covers whole granules (for aliasing: its chunks back no other block).
 *
 * Thread safety: none inside; the caller holds one lock per arena around
 * every call (memory.c). Ops are called with that lock held and must not
 * block on the GPU.
 */
#ifndef SG_ARENA_H
#define SG_ARENA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* The least alignment and size quantum of ordinary blocks; an arena's own
 * (sg_arena_new's align) may be larger: the device's texture alignment. */
#define SG_ARENA_ALIGN 256

/* The VMM operations an arena needs. Each returns a CUresult (0 = success);
 * a failing operation must have changed nothing. */
typedef struct sg_arena_ops {
    void *user;
    CUresult (*reserve)(void *user, size_t size, size_t align, CUdeviceptr *base);
    CUresult (*unreserve)(void *user, CUdeviceptr base, size_t size);
    CUresult (*create)(void *user, size_t size, CUmemGenericAllocationHandle *h);
    CUresult (*release)(void *user, CUmemGenericAllocationHandle h);
    CUresult (*map)(void *user, CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h);
    CUresult (*set_access)(void *user, CUdeviceptr va, size_t size);
    CUresult (*unmap)(void *user, CUdeviceptr va, size_t size);
    /* 1 if the event recorded at a stream-ordered free has completed. */
    int (*event_done)(void *user, void *event);
    /* The arena no longer needs the event (return it to a pool). */
    void (*event_put)(void *user, void *event);
    /* Before a block maps more than one new granule: 0 if the device
     * certainly lacks `bytes` of free memory (the block then fails with
     * SG_ARENA_FAIL_CREATE and CUDA_ERROR_OUT_OF_MEMORY, having created
     * nothing), else 1. NULL: never asked. */
    int (*room)(void *user, size_t bytes);
} sg_arena_ops;

/* Which operation failed, for the caller's log line. */
typedef enum {
    SG_ARENA_OK, SG_ARENA_FAIL_RESERVE, SG_ARENA_FAIL_CREATE, SG_ARENA_FAIL_MAP,
    SG_ARENA_FAIL_SET_ACCESS, SG_ARENA_FAIL_NOMEM
} sg_arena_fail;
const char *sg_arena_fail_name(sg_arena_fail f);   /* "cuMemCreate", ... */

/* Who allocates or frees, for stream order. stream == 0: not stream-ordered
 * (cuMemAlloc / cuMemFree): uses only ranges available to everyone. thread
 * distinguishes per-thread default streams of different threads (a value
 * never reused: memory.c's per-thread id). */
typedef struct sg_arena_key {
    uintptr_t stream;
    uint64_t thread;
} sg_arena_key;

/* One physical chunk backing (part of) a block. */
typedef struct sg_arena_chunk {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle handle;
} sg_arena_chunk;

typedef struct sg_arena sg_arena;

/* A new, empty arena (nothing reserved yet). granularity: a power of two;
 * align: the alignment and size quantum of ordinary blocks, a power of two
 * from SG_ARENA_ALIGN to the granularity (else NULL); resv_size: bytes per
 * reservation (rounded up to the granularity; a larger block gets a
 * reservation of its own size). NULL if out of memory. */
sg_arena *sg_arena_new(const sg_arena_ops *ops, size_t granularity, size_t align, size_t resv_size);

/* Unmaps and releases every chunk, frees every reservation and the arena.
 * put_events: give each pending event back through event_put (0 when the
 * context is gone: its events went with it). Errors from ops are ignored. */
void sg_arena_destroy(sg_arena *a, int put_events);

/* Places a block of `size` bytes (> 0) for `key`. own: on its own chunks.
 * On success stores the address and the bytes it occupies (size rounded up
 * to the arena's alignment, or to the granularity when own) and returns
 * SG_ARENA_OK. On failure returns which operation failed (*rc: its
 * CUresult) and nothing changed: whatever a failed growth created is
 * released again. */
sg_arena_fail sg_arena_alloc(sg_arena *a, size_t size, int own, sg_arena_key key,
                             CUdeviceptr *addr, size_t *placed, CUresult *rc);

/* sg_arena_alloc under memory pressure, for a stream-ordered allocation of
 * key (stream != 0): over mapped free ranges only (nothing is created),
 * those pending for other streams included, as the driver's pool may reuse
 * memory another stream freed by making the allocating stream wait for that
 * free (CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES). Before the block
 * is carved, wait(arg, event) is called with the event of each other
 * stream's pending range it overlaps; if one returns non-zero, nothing
 * changes (the waits already made stay). SG_ARENA_OK with *addr and
 * *placed (as sg_arena_alloc), or SG_ARENA_FAIL_NOMEM. */
sg_arena_fail sg_arena_alloc_claiming(sg_arena *a, size_t size, int own, sg_arena_key key,
                                      int (*wait)(void *arg, void *event), void *arg,
                                      CUdeviceptr *addr, size_t *placed);

/* Returns [addr, addr+placed) (as sg_arena_alloc gave it) to the free list.
 * event NULL: available to everyone at once. Else pending for `key` until
 * event_done(event); the arena then calls event_put(event) once. Returns 0,
 * or -1 if out of memory (the range then stays unusable; nothing breaks). */
int sg_arena_free(sg_arena *a, CUdeviceptr addr, size_t placed, sg_arena_key key, void *event);

/* Gives back (unmap + release) the chunks that nothing uses, from the
 * highest address down (first fit reuses the lowest first), until at least
 * at_most bytes went back or none is left (SIZE_MAX: every one); returns the
 * bytes given back. */
size_t sg_arena_trim(sg_arena *a, size_t at_most);
/* The stream-ordered frees still pending (their events not complete), after
 * taking in those that completed. */
size_t sg_arena_pending(sg_arena *a);

/* The pending ranges of `key` stop being usable by `key` (its stream is gone
 * and its handle may come back for another stream). */
void sg_arena_rekey(sg_arena *a, sg_arena_key key);

/* 1 if p lies inside one of the arena's reservations. */
int sg_arena_contains(const sg_arena *a, CUdeviceptr p);

/* Writes up to max chunks overlapping [addr, addr+len) into out (address
 * order); returns how many overlap in all. */
size_t sg_arena_chunks(const sg_arena *a, CUdeviceptr addr, size_t len, sg_arena_chunk *out,
                       size_t max);

/* Bytes mapped (sum of chunk sizes); bytes of the chunks that no block uses
 * and no pending free holds, wholly, after taking in the frees that
 * completed (what sg_arena_trim could give back: the
 * free bytes of a chunk a live block still touches are not counted, as no
 * larger allocation can use them; cuMemGetInfo adds this to the driver's
 * free memory); reservations; free ranges (tests, logs). */
size_t sg_arena_mapped(const sg_arena *a);
size_t sg_arena_mapped_free(sg_arena *a);
size_t sg_arena_segments(const sg_arena *a);
size_t sg_arena_free_ranges(const sg_arena *a);

/* Tests: on, placement visits every free range (the scan without
 * arena_index.c's index), for comparing the addresses with and without it. */
void sg_arena_set_linear(sg_arena *a, int on);
/* Tests: how many blocks of the index hold figures other than their free
 * ranges give now (0: arena_index.c's invariant holds). */
size_t sg_arena_ix_stale(const sg_arena *a);
/* Tests: how many rules the free ranges break (0: every block of them holds
 * 1 to SG_ARENA_FR_BLOCK ranges, the ranges lie inside their reservation in
 * address order without overlap, the count is right, no two adjacent
 * ones could have merged, and no chunk lies under an unmapped one). */
#define SG_ARENA_FR_BLOCK 64   /* free ranges per block of arena_index.c, at most */
size_t sg_arena_fr_bad(const sg_arena *a);

#endif /* SG_ARENA_H */
