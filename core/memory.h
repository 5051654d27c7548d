/*
 * core/memory.h: placement of the program's allocations (memory.c, arena.c).
 *
 * Under skip_temp and skip_profiled the library backs cuMemAlloc_v2 and the
 * stream-ordered allocations with its own physical memory, mapped into one
 * persistent virtual-address reservation per context (grown by adding
 * reservations), placed deterministically so that a program that repeats its
 * allocation pattern step after step gets the same addresses. Under
 * always_update it only counts. Anything it does not own goes to the driver
 * unchanged.
 */
#ifndef SG_MEMORY_H
#define SG_MEMORY_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "core.h"

/* Reads what it needs from the configuration. Called once by sg_core_init. */
void sg_mem_init(const sg_config *cfg);

/* Handles ALLOC, FREE, ADDR_RANGE, PTR_ATTR, PTR_ATTRS, IPC_HANDLE,
 * CTX_DESTROY, PRIMARY_RETAIN and PRIMARY_DROP calls; returns what the
 * program gets. */
CUresult sg_mem_call(const sg_call *c);

/* A live allocation the library knows about (placed by it). */
typedef struct sg_alloc_info {
    CUdeviceptr base;        /* what the program was given */
    size_t size;             /* bytes it asked for */
    uint64_t id;             /* unique for the life of the process, never reused
                              * (also what BUFFER_ID reports: SG_MEM_ID_BASE + n) */
    CUcontext ctx;
    int own_handles;         /* backed by physical handles no other block shares */
} sg_alloc_info;

/* Block ids start here, far above the ids a driver hands out, so that a
 * program comparing CU_POINTER_ATTRIBUTE_BUFFER_ID values never sees a placed
 * block collide with a driver allocation. */
#define SG_MEM_ID_BASE (1ULL << 62)

/* If p lies inside a live allocation placed by the library (any interior
 * address), fills *out and returns 1; else 0. Thread-safe; no driver call;
 * O(log n) on an immutable snapshot (see sg_mem_view_*). */
int sg_mem_find(CUdeviceptr p, sg_alloc_info *out);

/* For many lookups in a row (every word of a kernel's arguments): take a
 * view once, look up without any lock, release it. A view is an immutable
 * snapshot of the live placed allocations at acquire time; it may be held
 * across driver calls. Returns NULL only if out of memory (then use
 * sg_mem_find). */
typedef struct sg_mem_view sg_mem_view;
const sg_mem_view *sg_mem_view_acquire(void);
int sg_mem_view_find(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out);
void sg_mem_view_release(const sg_mem_view *v);

/* Own handles (for aliasing, issue 5): placed allocations of at least
 * min_bytes start on a granule boundary and are backed by physical handles
 * no other allocation shares (each costs a whole number of granules).
 * Default SIZE_MAX: none. Applies to allocations made after the call. */
void sg_mem_set_own_handles_min(size_t min_bytes);

/* One physical handle backing (part of) a placed allocation. */
typedef struct sg_mem_handle {
    CUmemGenericAllocationHandle handle;  /* owned by the library: do not release */
    CUdeviceptr va;          /* where the library maps the whole handle */
    size_t size;             /* the handle's size (a multiple of the granularity) */
    long long offset;        /* va - the allocation's base (< 0: starts before it) */
} sg_mem_handle;

/* Lists the handles backing the live placed allocation that starts at base,
 * in address order: writes up to max into out and returns how many there are
 * (0 if base is not such an allocation). For an own-handle allocation they
 * tile [base, base + size rounded up to the granularity) from offset 0 and
 * back nothing else; otherwise they may be shared with other allocations. */
size_t sg_mem_block_handles(CUdeviceptr base, sg_mem_handle *out, size_t max);

/* Registers fn, called once for every context the library sees destroyed
 * (cuCtxDestroy succeeded, or a primary context became inactive after
 * cuDevicePrimaryCtxRelease / Reset), before the context's arena is torn
 * down. Set once at initialisation. */
void sg_mem_on_ctx_gone(void (*fn)(CUcontext ctx));

/* Tears every arena down (unmapping and releasing through the driver
 * table) and empties the registry (unit tests). */
void sg_mem_reset(void);

#endif /* SG_MEMORY_H */
