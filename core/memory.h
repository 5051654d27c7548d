/*
 * core/memory.h: the program's device memory under each policy (memory.c,
 * arena.c).
 *
 * Under skip_temp and skip_profiled the library backs cuMemAlloc_v2 and the
 * stream-ordered allocations with its own physical memory, mapped into
 * persistent virtual-address reservations per context, placed
 * deterministically so that a program that repeats its allocation pattern
 * step after step gets the same addresses. Under always_update it only
 * counts. Anything it does not own goes to the driver unchanged. What the
 * program can observe of a placed block (address range, attributes, VMM
 * queries, range checks of copies and memsets, cuMemGetInfo) is what it
 * would observe of a cuMemAlloc block; where that is impossible (legacy
 * IPC) the README says so.
 */
#ifndef SG_MEMORY_H
#define SG_MEMORY_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "call.h"
#include "policy.h"

/* Reads what it needs from the capabilities and registers the arena's
 * context teardown. Called once at start-up. */
void sg_mem_init(const sg_caps *caps);

/* Handles ALLOC, DEV_ALLOC, CTX_CREATE, FREE, STREAM_DESTROY and POOL_SET calls (memory.c);
 * returns what the program gets. */
CUresult sg_mem_call(const sg_call *c);

/* Handles ADDR_RANGE, PTR_ATTR(S), IPC_HANDLE, RETAIN_HANDLE, MEM_ACCESS,
 * MEM_INFO and MEMOP calls: what the program asks of its memory
 * (mem_query.c). */
CUresult sg_mem_query(const sg_call *c);

/* A live allocation placed by the library. */
typedef struct sg_alloc_info {
    CUdeviceptr base;        /* what the program was given */
    size_t size;             /* bytes it asked for */
    uint64_t id;             /* unique for the life of the process, never reused
                              * (also what BUFFER_ID reports: SG_MEM_ID_BASE + n) */
    CUcontext ctx;
    CUdevice dev;            /* the device of ctx */
    int own_handles;         /* backed by physical handles no other block shares */
    int stream_ordered;      /* cuMemAllocAsync: answers as memory of the device's default pool */
    int sync_memops;         /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS as the program set it */
} sg_alloc_info;

/* Block ids start here, far above the ids a driver hands out, so that a
 * program comparing CU_POINTER_ATTRIBUTE_BUFFER_ID values never sees a placed
 * block collide with a driver allocation. */
#define SG_MEM_ID_BASE (1ULL << 62)

/* If p lies inside a live allocation placed by the library (any interior
 * address), fills *out and returns 1; else 0. Thread-safe; no driver call. */
int sg_mem_find(CUdeviceptr p, sg_alloc_info *out);

/* For many lookups in a row (every word of a kernel's arguments): take a
 * view once, look up without any lock, release it. A view is an immutable
 * snapshot of the live placed allocations at acquire time; under a policy
 * that places nothing, of the live allocations forwarded to the driver
 * through the hooked allocation calls instead (context NULL, own_handles 0,
 * a fresh id per allocation). While many placed blocks change between views,
 * the view is the registry itself instead (each lookup takes its lock: no
 * snapshot copied per view; mem_registry.c). It may be held across driver
 * calls. Returns NULL only if out of memory (then use sg_mem_find). */
typedef struct sg_mem_view sg_mem_view;
const sg_mem_view *sg_mem_view_acquire(void);
int sg_mem_view_find(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out);
/* The live allocation that ends exactly at p (p == base + size), if any
 * (one-past-the-end pointers, for aliasing). */
int sg_mem_view_find_end(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out);
void sg_mem_view_release(const sg_mem_view *v);

/* The driver's range check for [p, p + len) as the library must make it for
 * placed memory: CUDA_SUCCESS if p is not in the library's reservations or
 * the range lies inside the live block containing p; CUDA_ERROR_INVALID_VALUE
 * if it runs past the block's end or p is placed memory already freed. */
CUresult sg_mem_check_range(CUdeviceptr p, size_t len);

/* The same checks for a memcpy or memset node's parameters (graph
 * updates). With `ask`, a device operand (or a unified one the driver knows
 * as device memory) that is not the library's is asked of the driver
 * (cuMemGetAddressRange): one it does not show allocated over the whole
 * range gives SG_FOREIGN_UNSURE, for the driver to judge. */
#define SG_FOREIGN_UNSURE CUDA_ERROR_NOT_FOUND
CUresult sg_mem_check_memcpy(const CUDA_MEMCPY3D *p, int ask);
CUresult sg_mem_check_memset(const CUDA_MEMSET_NODE_PARAMS *m, int ask);

/* Memory the library did not place ("foreign") may have ended: called after
 * each call that may end some (cuMemFree / cuMemFreeAsync of an unplaced
 * block, cuMemFreeHost, cuMemHostUnregister, cuMemUnmap, cuIpcCloseMemHandle,
 * a context's teardown; async: a stream-ordered free, which ends it later).
 * sg_mem_foreign_gen: how many such calls were made (0: none), or
 * SG_FOREIGN_ALWAYS once a stream-ordered one was (no answer about foreign
 * memory can be kept from then on). Lock-free. */
#define SG_FOREIGN_ALWAYS UINT64_MAX
void sg_mem_foreign_gone(int async);
uint64_t sg_mem_foreign_gen(void);

/* One physical handle backing (part of) a placed allocation. */
typedef struct sg_mem_handle {
    CUmemGenericAllocationHandle handle;  /* owned by the library: do not release */
    CUdeviceptr va;          /* where the library maps the whole handle */
    size_t size;             /* the handle's size (the granularity) */
    long long offset;        /* va - the allocation's base (< 0: starts before it) */
} sg_mem_handle;

/* Lists the handles backing the live placed allocation that starts at base,
 * in address order: writes up to max into out and returns how many there are
 * (0 if base is not such an allocation). For an own-handle allocation they
 * tile [base, base + size rounded up to the granularity) from offset 0 and
 * back nothing else; otherwise they may be shared with other allocations. */
size_t sg_mem_block_handles(CUdeviceptr base, sg_mem_handle *out, size_t max);

/* Gives back every unused physical chunk of every arena (memory pressure);
 * returns the bytes given back. Call with no lock held, or only an exec's
 * rec->lock (graph records, 2 in docs/locking.md: every lock the trim takes
 * comes after it). */
size_t sg_mem_trim(void);
/* Also called by sg_mem_trim (slots.c sets it: slots that still map freed blocks); its bytes. */
extern size_t (*sg_mem_trim_hook)(void);
/* rc, the driver's answer to c as the program made it; if that is
 * CUDA_ERROR_OUT_OF_MEMORY while placing, the arenas trimmed and c made
 * once more (also when this trim gave nothing: another thread's may have)
 * and its answer. For the calls that take device memory the arenas may be
 * holding: allocations, instantiations, launches and uploads of graphs
 * (whose allocation nodes take their memory then), module and library loads,
 * contexts, context limits, pools, mipmapped arrays, streams and events
 * (interpose/hooks.def). Locks: as sg_mem_trim. */
CUresult sg_mem_retry(const sg_call *c, CUresult rc);
/* The arenas give back what they hold after a call was refused for want
 * of memory; 1 if the call is to be made once more (always, while placing:
 * another thread's trim may have given back what it needed), else 0. Every
 * retry of a call whose refusal would reach the program goes through it.
 * Locks: as sg_mem_trim. */
int sg_mem_trim_retry(void);

/* The launch filter (round 24). Under lazy loading a function's first launch
 * in a context may take device memory, and an uncaptured launch goes
 * straight to the driver (interpose/hooks.c), where no retry can see its
 * result. So the direct path reads, for its function, a byte of the table
 * sg_launch_known names (SG_LAUNCH_SLOT): 0 sends the launch to the general
 * path (mem_lazy.c sg_mem_kernel_launch: on CUDA_ERROR_OUT_OF_MEMORY
 * trimmed and made once more, then the byte set in the current context's
 * table, which the thread's pointer then names). Each thread starts on an all-zero table; a
 * context switch (cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent,
 * cuCtxCreate) points it back there; a context destroyed, a primary one
 * released or reset, or a module or library unloaded (its kernels' handle
 * values come back for new kernels) clears every table. Not placing (off, always_update):
 * the thread is pointed at sg_launch_all, every byte 1. Two functions of one
 * slot: the second's first launch goes direct, as without the filter. */
#define SG_LAUNCH_TABLE 4096
#define SG_LAUNCH_SHIFT 4
#define SG_LAUNCH_SLOT(f) (((uintptr_t)(f) >> SG_LAUNCH_SHIFT) & (SG_LAUNCH_TABLE - 1))
extern __thread const unsigned char *sg_launch_known
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
extern const unsigned char sg_launch_all[SG_LAUNCH_TABLE];
/* Every context's table cleared (a context destroyed, a primary one released
 * or reset: what its functions had loaded is gone; a module or library
 * unloaded: its handle values may name new kernels next). */
void sg_launch_filter_forget(void);
/* The calling thread switched contexts: its filter starts again. */
void sg_launch_filter_switched(void);
/* At start-up (sg_mem_init): an ended context's table goes back for reuse. */
void sg_launch_filter_init(void);

/* Fork: 0 prepare (lock), 1 parent, 2 child (unlock). */
void sg_mem_atfork(int phase);

/* Tears every arena down and empties the registry (unit tests). */
void sg_mem_reset(void);

#endif /* SG_MEMORY_H */
