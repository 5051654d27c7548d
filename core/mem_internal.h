/*
 * core/mem_internal.h: what the parts of the memory code share (memory.c:
 * allocation and frees; mem_arena.c: each context's arena, its life, trim
 * and quarantine; mem_registry.c: the registry of placed blocks,
 * the library's reservations, the forwarded allocations and the byte
 * counts; mem_query.c: what the program asks of its memory, and the
 * driver's range checks). Not for the rest of core/: memory.h is the
 * interface.
 *
 * Locks: the registry's lock (mem_registry.c, reg_lock) guards the block
 * list, the spans, the view and the forwarded-allocation table; it is the
 * last one taken (memory.c takes it inside an arena's lock, never the other
 * way) and is never held across a driver call.
 */
#ifndef SG_MEM_INTERNAL_H
#define SG_MEM_INTERNAL_H

#include "memory.h"

#include "arena.h"
#include "vmm.h"

#include <pthread.h>

#define EVENT_POOL 64                  /* events kept per arena for reuse */

/* One context's arena (mem_arena.c): contexts.c's record holds it as
 * SG_CTX_PART_ARENA. refs: the record's reference plus one per operation in
 * progress; the last one frees it (after teardown). */
typedef struct mem_arena {
    int refs;                      /* atomic */
    pthread_mutex_t lock;          /* guards everything below */
    int state;                     /* 0 not set up, 1 placing, -1 forwarding, -2 context gone */
    int orphan;                    /* atomic: the context went while stream-ordered blocks lived
                                    * (cuCtxDestroy leaves cuMemAllocAsync memory alone) or
                                    * their frees on other contexts' streams were pending: the
                                    * arena serves their frees only and goes once none is left */
    CUcontext ctx;
    sg_vmm_dev vmm;                /* copied from the context record */
    sg_arena *arena;
    CUevent events[EVENT_POOL];
    size_t nevents;
    struct qrange { CUdeviceptr addr; size_t placed; } *quar;   /* freed, awaiting a sync */
    size_t nquar, capquar;
} mem_arena;

/* The arena of ctx, made (not set up) if missing, with a reference for the
 * caller. NULL if out of memory. */
mem_arena *sg_marena_get(CUcontext ctx);
void sg_marena_hold(mem_arena *ar);
void sg_marena_unref(mem_arena *ar);
/* Sets ar up (ar->lock held): state 1, or -1 if it cannot be. */
void sg_marena_setup_locked(mem_arena *ar);
/* An event back to ar's pool (ar->lock held). */
void sg_marena_event_put(void *ar, void *ev);
/* After a successful synchronization of ar's context: the quarantined
 * ranges are free (ar->lock held). */
void sg_marena_quarantine_release_locked(mem_arena *ar);
/* Places `bytes` in ar for a stream-ordered allocation of key on stream s
 * when the device has no room left (an allocation, its chunk's creation and
 * a trim failed): over ranges other streams freed and have not reached yet,
 * s waiting for those frees (cuStreamWaitEvent), as the driver's pool does
 * with CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES (sg_arena_alloc_claiming).
 * SG_ARENA_OK with *addr and *placed, or SG_ARENA_FAIL_NOMEM. */
sg_arena_fail sg_marena_place_claiming(mem_arena *ar, size_t bytes, int own, sg_arena_key key,
                                       CUstream s, int per_thread, CUdeviceptr *addr,
                                       size_t *placed);
/* A destroyed stream's key: every arena's pending frees under it wait for
 * their events only. */
void sg_marena_rekey_all(sg_arena_key key);
/* Registers the arenas' part of context teardown; the headroom to keep
 * (STABLEGRAPH_HEADROOM: bytes, SG_HEADROOM_AUTO, or 0). */
void sg_marena_init(size_t headroom);
/* After a placed free of ar's: keeps its device's free memory at the
 * headroom, giving back unused chunks of the device's arenas (mem_arena.c;
 * no lock held). */
void sg_marena_keep_headroom(mem_arena *ar);

/* A live placed block. */
typedef struct sg_block {
    CUdeviceptr base;
    size_t size, placed;       /* asked for; occupied in the arena */
    uint64_t id;
    mem_arena *owner;
    CUcontext ctx;
    int own;
    int stream_ordered;        /* cuMemAllocAsync: not legacy-IPC capable */
    int ipc_warned;
    int sync_memops;           /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (reg_lock) */
} sg_block;

extern int sg_mem_placing;     /* set once by sg_mem_init (mem_registry.c) */

/* Lazy loading (mem_lazy.c): cuLibraryGetKernel, which loads the kernel
 * into the current context; an uncaptured kernel launch the launch filter
 * sent to the general path (memory.h). */
CUresult sg_mem_kernel_lookup(const sg_call *c);
CUresult sg_mem_kernel_launch(const sg_call *c);

/* 0 if p cannot be the library's (outside every reservation): no lock. */
int sg_mem_maybe_ours(CUdeviceptr p);
/* Looks p up: 1 and *out if inside a live placed block, 0 if inside a
 * reservation of the library but no live block, -1 if not ours. */
int sg_mem_lookup(CUdeviceptr p, sg_alloc_info *out);

/* Adds b (0, or -1 if out of memory: not added). */
int sg_mem_reg_insert(sg_block *b);
/* Sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS of the live block containing p if
 * it is still block id: 1, else 0 (freed meanwhile). */
int sg_mem_reg_set_sync(CUdeviceptr p, uint64_t id, int on);
/* Takes the live block starting at p out of the registry; NULL if none. */
sg_block *sg_mem_reg_take(CUdeviceptr p);
/* The live block starting exactly at p (NULL if none; *ours: 0 if p is in
 * none of the library's reservations, 2 if the block found is
 * stream-ordered, else 1); hold(owner) is called under the registry's lock
 * when found, so that the owner outlives the call (the block itself may go
 * at once: read *ours, not the block). */
sg_block *sg_mem_reg_exact(CUdeviceptr p, int *ours, void (*hold)(mem_arena *));
/* Removes and frees every block of owner, but its stream-ordered ones when
 * keep_ordered (*kept: how many stayed); returns the requested bytes
 * removed. */
size_t sg_mem_reg_drop_owner(const mem_arena *owner, int keep_ordered, size_t *kept);
/* The live blocks of owner. */
size_t sg_mem_reg_owned(const mem_arena *owner);
/* The orphan arenas (mem_arena.orphan) not yet ended: added when the
 * context goes (0, or -1 if out of memory: then it is never trimmed, and
 * ends only with a last block freed once nothing is pending), removed when
 * ended (ar->lock held). sg_mem_reg_orphans writes up to max of them, each
 * held (sg_marena_unref), and returns how many there are (no lock when
 * none). */
int sg_mem_reg_orphan_add(mem_arena *ar);
void sg_mem_reg_orphan_del(mem_arena *ar);
size_t sg_mem_reg_orphans(mem_arena **out, size_t max);
/* Context teardown may leave an arena orphaned; once it has no block and no
 * pending stream-ordered free, a free (memory.c), memory pressure or a
 * reset ends it: 1 if it did (ar->lock held; the caller then drops the
 * context record's reference, sg_marena_unref). */
int sg_marena_orphan_end_locked(mem_arena *ar);
/* Gives back the chunks of orphan ar that nothing uses (ar->lock held): it
 * never places again. Returns the bytes given back. */
size_t sg_marena_orphan_trim_locked(mem_arena *ar);
/* A completion mark for a stream-ordered free on another context's stream,
 * standing where the free's event would (ops.event_done, ops.event_put
 * tell it apart): a host function queued on s sets it. NULL if it could not
 * be queued. */
void *sg_marena_mark_queue(CUstream s, int per_thread);
/* fork: 0 takes the marks' lock, 1 (parent) and 2 (child) release it. */
void sg_marena_marks_atfork(int phase);
/* Ends every orphan arena with its blocks (reset). */
void sg_marena_orphans_drop(void);
/* 1 and *out if p lies in a live block (marked as having been asked for a
 * legacy IPC handle; *first: it had not been before), 2 if that block is
 * stream-ordered; 0 in a reservation but no block; -1 not ours. */
int sg_mem_reg_ipc(CUdeviceptr p, sg_alloc_info *out, int *first);

/* The library's reservations (placed memory lies in them). */
void sg_mem_span_add(CUdeviceptr base, size_t size);
void sg_mem_span_del(CUdeviceptr base);

/* Allocations the driver made (forwarded): tracked for the byte counts. */
void sg_mem_fwd_track(CUdeviceptr p, size_t size);
void sg_mem_fwd_untrack(CUdeviceptr p);

/* The byte counts of the report (bytes_requested, bytes_mapped peaks). */
void sg_mem_live_add(size_t n);
void sg_mem_live_sub(size_t n);
void sg_mem_mapped_delta(size_t before, size_t after);

/* A new block id (never reused). */
uint64_t sg_mem_next_id(void);

/* Placed stream-ordered memory as the device's default pool would count it
 * (memory.c places cuMemAllocAsync only while that pool is current): the
 * requested bytes of the live blocks, and their peaks since the program
 * last reset CU_MEMPOOL_ATTR_USED_MEM_HIGH and RESERVED_MEM_HIGH (the
 * library's part of reserved memory is the part in use: a freed placed block
 * is free to cuMemGetInfo too). Kept by the registry under its lock. */
typedef struct sg_pool_use {
    unsigned long long used, used_high, reserved_high;
} sg_pool_use;
/* 0 while no stream-ordered block was ever placed (no lock). */
int sg_mem_reg_pool_any(void);
/* dev's figures (zeros for a device out of range). */
sg_pool_use sg_mem_reg_pool_use(CUdevice dev);
/* Resets dev's peak for attr (CU_MEMPOOL_ATTR_USED_MEM_HIGH or
 * RESERVED_MEM_HIGH) to what is in use, as the driver does when the program
 * sets the attribute to 0. */
void sg_mem_reg_pool_reset(CUdevice dev, CUmemPool_attribute attr);

/* Mapped placed memory no block uses, on device dev (memory.c). */
size_t sg_mem_mapped_free_on(CUdevice dev);

void sg_mem_reg_atfork(int phase);
void sg_mem_reg_reset(void);

#endif /* SG_MEM_INTERNAL_H */
