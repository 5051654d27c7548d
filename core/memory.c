/*
 * core/memory.c: the program's device memory under each policy (memory.h).
 *
 * always_update: every memory call is forwarded; the live bytes of successful
 * allocations are tracked until freed so that bytes_requested is the peak the
 * program held at once.
 *
 * skip_temp, skip_profiled: cuMemAlloc_v2 and cuMemAllocAsync(_ptsz) are
 * placed in a per-context arena (arena.c), so that a program that repeats its
 * allocation pattern gets the same addresses and its graphs stay identical.
 * Anything the library does not place goes to the driver unchanged: size 0,
 * sizes above STABLEGRAPH_PLACE_MAX_BYTES, cuMemAllocFromPoolAsync (the pool's
 * properties are the program's), cuMemAllocAsync on a device whose current
 * memory pool the program replaced (pool_replaced below), cuMemAllocAsync on
 * a capturing stream (a graph memory node), cuMemAlloc while any stream capture is in progress (the
 * driver then refuses it, and invalidates the capture, exactly when the
 * capture mode says so), devices without VMM, and any allocation whose
 * placement failed.
 *
 * Memory pressure: freed blocks stay mapped (their granules serve the next
 * blocks at the same addresses, with no VMM call), until something runs
 * short: when placing needs a new chunk and cuMemCreate says
 * CUDA_ERROR_OUT_OF_MEMORY, or an allocation the library forwards (any path:
 * cuMemAlloc, cuMemCreate, pools, managed, pitched, arrays) gets that error,
 * every arena gives back its unused chunks (sg_arena_trim) and the call is
 * tried once more; placing that still fails goes to the driver's allocator.
 * cuMemGetInfo reports the mapped bytes no block uses as free, as the
 * driver would after the program's frees.
 *
 * Frees: cuMemFree of a placed block gets the driver's own answer and
 * implicit synchronization: the library frees a one-page block of its own
 * (cuMemAlloc in the block's context, in relaxed mode, or in the program's
 * mode when no capture is in progress, then cuMemFree in the program's
 * capture mode with the program's current context current, as its own free
 * would be made). Refused (a capture whose mode forbids the call):
 * the program gets that error, the driver has invalidated what it
 * invalidates, nothing is freed. Allowed: the driver synchronized the
 * context as for the program's own block (cuda.h: cuMemFree "may perform
 * implicit synchronization"; the emulated driver waits for every stream of
 * the context, as drivers do), so the range is reusable at once. The library
 * never calls cuCtxSynchronize, which a capture in progress anywhere in the
 * context (even one that begins on another thread while it runs) refuses,
 * invalidating that capture, except when not one page is left for its block
 * and no capture is in progress. If no block can be had during a capture, or
 * the context cannot be made current, the free is allowed (a valid program
 * does not free where its capture forbids it) and the range quarantined until
 * the next free of that context that synchronized. With no context current
 * the program gets CUDA_ERROR_INVALID_CONTEXT, as from the driver, and
 * nothing is freed.
 * cuMemFree of a placed cuMemAllocAsync block synchronizes nothing, as the
 * driver's does not (cuda.h): outside a capture the range is reusable at
 * once, with no token (one cuCtxGetCurrent, for the no-context refusal);
 * during a capture it takes the token's path for the verdict, and so also
 * waits for the context (a documented difference: docs/design.md).
 * cuMemFreeAsync records an event from a
 * small per-arena pool on the freeing stream; the block is reusable at once on
 * that stream and elsewhere once the event completed (arena.h); if no event
 * can be recorded the range is quarantined (never a host wait). On a
 * capturing stream the call goes to the driver, which decides (a free of
 * memory not allocated in the capture).
 *
 * The library's own driver calls run in relaxed capture mode (vmm.h), so a
 * capture in progress is never invalidated by them.
 *
 * Locks, in the order they may be taken (never the other way):
 *   contexts.c's record lock (VMM set-up, the arena part pointer);
 *   ar->lock      one per context: its arena, event pool, quarantine, state;
 *   the registry's lock (mem_registry.c).
 * No lock is held across a call that can block on the GPU
 * (cuCtxSynchronize) or across forward(). VMM and event calls (cuMemCreate,
 * cuMemMap, cuEventQuery, ...) run under ar->lock: they do not wait for the GPU.
 */
#include "mem_internal.h"

#include "arena.h"
#include "capture.h"
#include "contexts.h"
#include "driver.h"
#include "ipc.h"
#include "log.h"
#include "stats.h"
#include "streams.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t place_max = SIZE_MAX;
static size_t own_min = SIZE_MAX;

/* ------------------------------------------------------- current pools */

/* cuMemAllocAsync takes memory from the current pool of the stream's device,
 * the default one unless the program made another current (cuDeviceSetMemPool,
 * or cuMemSetMemPool for the device's pinned memory). Placed, a block answers as
 * default-pool memory (mem_query.c); from another pool it must be the driver's.
 * pool_replaced[dev] is set when the driver accepted another pool than the
 * default one for dev, cleared when it accepted the default one again; a location
 * the library does not model (not a device's or the host's) sets every device's;
 * after cuMemPoolDestroy (of the current pool: the default one is current again)
 * pool_recheck clears those the driver says have their default pool; devices from
 * POOL_DEVICES on stay forwarded (atomics: only unordered allocations race). */
#define POOL_DEVICES 64
static unsigned char pool_replaced[POOL_DEVICES];
static int pool_any_replaced;

static int pool_is_replaced(CUdevice dev)
{
    if (!__atomic_load_n(&pool_any_replaced, __ATOMIC_ACQUIRE)) return 0;
    return dev < 0 || dev >= POOL_DEVICES || __atomic_load_n(&pool_replaced[dev], __ATOMIC_RELAXED);
}

static void pool_mark(CUdevice dev, int replaced)
{
    if (replaced) __atomic_store_n(&pool_any_replaced, 1, __ATOMIC_RELEASE);
    if (dev >= 0 && dev < POOL_DEVICES) __atomic_store_n(&pool_replaced[dev], replaced, __ATOMIC_RELAXED);
}

/* Whether pool is dev's default pool (1), another (0, also if unknown). */
static int pool_is_default(CUdevice dev, CUmemoryPool pool)
{
    CUmemoryPool d = NULL;
    return sg_drv.cuDeviceGetDefaultMemPool &&
           SG_DRIVER_CALL(cuDeviceGetDefaultMemPool, &d, dev) == CUDA_SUCCESS && d == pool;
}

static void pool_recheck(void)
{
    CUmemoryPool cur;
    for (CUdevice d = 0; sg_drv.cuDeviceGetMemPool && d < POOL_DEVICES; d++)
        if (__atomic_load_n(&pool_replaced[d], __ATOMIC_RELAXED) &&
            SG_DRIVER_CALL(cuDeviceGetMemPool, &cur, d) == CUDA_SUCCESS && pool_is_default(d, cur))
            pool_mark(d, 0);
}

static CUresult mem_pool_set(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS) return rc;
    const CUmemLocation *loc = c->u.pool.loc;
    if (c->u.pool.destroyed) pool_recheck();
    else if (!c->u.pool.by_location) pool_mark(c->u.pool.dev, !pool_is_default(c->u.pool.dev, c->u.pool.pool));
    else if (loc && loc->type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (c->u.pool.type == CU_MEM_ALLOCATION_TYPE_PINNED)
            pool_mark(loc->id, !pool_is_default(loc->id, c->u.pool.pool));
    } else if (!loc || (loc->type != CU_MEM_LOCATION_TYPE_HOST &&
                        loc->type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
                        loc->type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT)) {
        for (CUdevice d = 0; d < POOL_DEVICES; d++) pool_mark(d, 1);
    }
    return rc;
}

/* ------------------------------------------------------------- allocation */

/* Forwards an allocation; on CUDA_ERROR_OUT_OF_MEMORY gives back what the
 * arenas hold and tries once more. */
static CUresult forward_retry(const sg_call *c)
{
    return sg_mem_retry(c, c->forward(c->args));
}

static CUresult fwd_alloc(const sg_call *c)
{
    CUresult rc = forward_retry(c);
    if (rc == CUDA_SUCCESS && c->u.alloc.out) sg_mem_fwd_track(*c->u.alloc.out, c->u.alloc.bytes);
    return rc;
}

/* Memory the library did not place (foreign: managed, pinned and registered
 * host memory, the program's own VMM mappings, unplaced cuMemAlloc and pool
 * blocks, imported memory) is range-checked by the driver whenever it sees
 * an update; an update the library answers itself must be one the driver
 * would accept, so a foreign operand that may have ended since the driver
 * last saw it is asked of the driver. foreign_gen counts the calls that may
 * end foreign memory (each bumped after the driver's call returned, so a
 * query made before it is not trusted afterwards); foreign_async is set
 * for good by the first stream-ordered free of foreign memory, which ends
 * it when the stream reaches it, at no call the library sees. */
static uint64_t foreign_gen;         /* atomic */
static int foreign_async;             /* atomic */

void sg_mem_foreign_gone(int async)
{
    if (async) __atomic_store_n(&foreign_async, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&foreign_gen, 1, __ATOMIC_ACQ_REL);
}

uint64_t sg_mem_foreign_gen(void)
{
    if (__atomic_load_n(&foreign_async, __ATOMIC_ACQUIRE)) return SG_FOREIGN_ALWAYS;
    return __atomic_load_n(&foreign_gen, __ATOMIC_ACQUIRE);
}

static CUresult fwd_free(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS) sg_mem_fwd_untrack(c->u.free.ptr);
    sg_mem_foreign_gone(c->u.free.async);
    return rc;
}

/* A stream's key for stream-ordered reuse: its identity (streams.h). A
 * default stream (legacy or per-thread) is one per context, ctx, the current
 * one (the caller's to find, so that it is not asked twice; unused for a
 * named stream). */
static sg_arena_key key_of(CUstream s, int per_thread, CUcontext ctx)
{
    sg_stream_id id = sg_default_stream(s) ? sg_stream_id_in(s, per_thread, ctx) : sg_stream_id_of(s, per_thread);
    return (sg_arena_key){ id.stream, id.thread };
}

static void log_growth_failure(sg_arena_fail f, CUresult rc, size_t bytes)
{
    static int warned[SG_ARENA_FAIL_NOMEM + 1];
    if ((unsigned)f <= SG_ARENA_FAIL_NOMEM && !__atomic_exchange_n(&warned[f], 1, __ATOMIC_RELAXED))
        SG_WARN("%s failed (error %d) placing %zu bytes: this allocation, and any other whose "
                "placement fails the same way, goes to the driver's allocator unchanged "
                "(logged once)", sg_arena_fail_name(f), (int)rc, bytes);
}

/* Places `bytes` in ar for key. Returns SG_ARENA_OK with *addr, *placed. */
static sg_arena_fail place(mem_arena *ar, size_t bytes, int own, sg_arena_key key,
                           CUdeviceptr *addr, size_t *placed, CUresult *rc)
{
    sg_arena_fail f = SG_ARENA_FAIL_NOMEM;
    size_t before = 0, after = 0;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 0) sg_marena_setup_locked(ar);
    if (ar->state == 1) {
        before = sg_arena_mapped(ar->arena);
        f = sg_arena_alloc(ar->arena, bytes, own, key, addr, placed, rc);
        after = sg_arena_mapped(ar->arena);
    }
    int state = ar->state;
    pthread_mutex_unlock(&ar->lock);
    sg_mem_mapped_delta(before, after);
    return state == 1 ? f : SG_ARENA_FAIL_NOMEM + 1;
}

static CUresult mem_alloc(const sg_call *c)
{
    size_t bytes = c->u.alloc.bytes;
    CUstream s = c->u.alloc.stream;
    if (!sg_mem_placing || bytes == 0 || bytes > place_max || !c->u.alloc.out ||
        (c->u.alloc.async && c->u.alloc.pool))
        return fwd_alloc(c);
    CUcontext ctx = NULL;
    sg_arena_key key = { 0, 0 };
    if (c->u.alloc.async) {
        if (sg_capture_active() && sg_capture_stream(s, c->per_thread))
            return c->forward(c->args);          /* a graph memory node, or the driver's verdict */
        CUresult rc = c->per_thread ? SG_DRIVER_CALL(cuStreamGetCtx_ptsz, s, &ctx)
                                    : SG_DRIVER_CALL(cuStreamGetCtx, s, &ctx);
        if (rc != CUDA_SUCCESS) return fwd_alloc(c);
        key = key_of(s, c->per_thread, ctx);   /* a default stream is ctx's */
    } else if (sg_capture_active() || SG_DRIVER_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS) {
        return fwd_alloc(c);
    }
    if (!ctx) return fwd_alloc(c);
    /* the arena (and the block's context) is the owner's: a green context's converted
     * context allocates the primary context's memory (the stream key stays ctx's) */
    ctx = sg_ctx_owner(ctx, c->u.alloc.async ? s : CU_STREAM_LEGACY, c->u.alloc.async && c->per_thread);
    mem_arena *ar = sg_marena_get(ctx);
    if (!ar) return fwd_alloc(c);
    if (c->u.alloc.async && pool_is_replaced(ar->vmm.dev)) {
        sg_marena_unref(ar);
        return fwd_alloc(c);
    }
    int own = bytes >= own_min;
    CUdeviceptr addr = 0;
    size_t placed = 0;
    CUresult rc = CUDA_SUCCESS;
    sg_arena_fail f = place(ar, bytes, own, key, &addr, &placed, &rc);
    /* placed again only if this trim gave memory back: a placement that
     * fails sends the allocation to the driver, whose refusal is retried
     * (sg_mem_retry), never to the program */
    if (f == SG_ARENA_FAIL_CREATE && rc == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim() > 0)
        f = place(ar, bytes, own, key, &addr, &placed, &rc);
    if (f == SG_ARENA_FAIL_CREATE && rc == CUDA_ERROR_OUT_OF_MEMORY && c->u.alloc.async)
        f = sg_marena_place_claiming(ar, bytes, own, key, s, c->per_thread, &addr, &placed);
    sg_vmm_unrelax();
    if (f != SG_ARENA_OK) {
        if (f <= SG_ARENA_FAIL_NOMEM) log_growth_failure(f, rc, bytes);
        sg_marena_unref(ar);
        return fwd_alloc(c);
    }
    sg_block *b = calloc(1, sizeof *b);
    if (b) {
        *b = (sg_block){ .base = addr, .size = bytes, .placed = placed, .owner = ar, .ctx = ctx,
                         .own = own, .id = sg_mem_next_id(), .stream_ordered = c->u.alloc.async };
    }
    if (!b || sg_mem_reg_insert(b) != 0) {
        free(b);
        pthread_mutex_lock(&ar->lock);
        if (ar->state == 1) sg_arena_free(ar->arena, addr, placed, (sg_arena_key){ 0, 0 }, NULL);
        pthread_mutex_unlock(&ar->lock);
        sg_marena_unref(ar);
        return fwd_alloc(c);
    }
    sg_marena_unref(ar);
    *c->u.alloc.out = addr;
    sg_mem_live_add(bytes);
    return CUDA_SUCCESS;
}

/* An event recorded on the freeing stream (ar->ctx current or not: the
 * stream names its context); NULL if none could be had (*rc_out: the
 * driver's refusal of the event or its record, if that was why). Stream-ordered
 * memory may be freed on another context's stream, where the driver refuses
 * ar's event (cuEventRecord: "hEvent and hStream must be from the same
 * context otherwise CUDA_ERROR_INVALID_HANDLE"): the free then waits for a
 * completion mark (mem_arena.c) set by a host function on that stream, so
 * that no handle of that context is kept where its destruction would leave
 * it stale. */
static CUevent free_event(mem_arena *ar, const sg_call *c, CUresult *rc_out)
{
    CUevent ev = NULL;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) {
        if (ar->nevents > 0) {
            ev = ar->events[--ar->nevents];
        } else {
            CUcontext prev;
            sg_vmm_relax();
            if (sg_vmm_ctx_enter(ar->ctx, &prev) == 0) {
                CUresult crc = SG_DRIVER_CALL(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING);
                if (crc != CUDA_SUCCESS) {
                    ev = NULL;
                    *rc_out = crc;
                }
                sg_vmm_ctx_leave(ar->ctx, prev);
            }
        }
    }
    pthread_mutex_unlock(&ar->lock);
    if (!ev) return NULL;
    sg_vmm_relax();
    CUresult rc = c->per_thread ? SG_DRIVER_CALL(cuEventRecord_ptsz, ev, c->u.free.stream)
                                : SG_DRIVER_CALL(cuEventRecord, ev, c->u.free.stream);
    if (rc == CUDA_ERROR_INVALID_HANDLE) {     /* the event and the stream are of two contexts */
        pthread_mutex_lock(&ar->lock);
        sg_marena_event_put(ar, ev);
        pthread_mutex_unlock(&ar->lock);
        return (CUevent)sg_marena_mark_queue(c->u.free.stream, c->per_thread);
    }
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_lock(&ar->lock);
        sg_marena_event_put(ar, ev);
        pthread_mutex_unlock(&ar->lock);
        *rc_out = rc;
        return NULL;
    }
    return ev;
}

/* The implicit synchronization and the capture verdict of cuMemFree, from
 * the driver (see the header). The token is allocated in the block's
 * context, so that it is what the program's block is (the same context and
 * device), and freed with the program's current context current, as the
 * program's own free is: whatever the driver synchronizes for a free of a
 * block of context A while B is current (the emulated driver: B's streams,
 * not A's) it synchronizes for the token. Synchronizing A instead hung a
 * program whose stream of A waited for the host, and gave the block back
 * while B's kernels still read it (tests/e2e/adv_devices.c, free_*).
 * 0 allowed and synchronized; 2 allowed, the program's own synchronization
 * made but the block's context is another (the block is reusable at once,
 * as the driver's would be; the quarantine is not known to be done); 1
 * allowed, not synchronized (quarantine); -1 refused (*rc, the program's
 * answer). */
static int free_verdict(mem_arena *ar, CUresult *rc)
{
    CUcontext prev;
    CUdeviceptr token = 0;
    if (sg_vmm_ctx_enter(ar->ctx, &prev) != 0) return 1;
    if (!prev) {                   /* no current context: the driver's answer */
        sg_vmm_ctx_leave(ar->ctx, prev);
        *rc = CUDA_ERROR_INVALID_CONTEXT;
        return -1;
    }
    /* With no capture in progress the token's allocation is allowed in any
     * mode: it is made in the program's mode, with no mode exchange. A
     * capture that begins meanwhile on another thread then gets from it the
     * verdict the program's own cuMemFree would have got at that moment. */
    int quiet = !sg_capture_active();
    if (!quiet) sg_vmm_relax();
    int have = sg_drv.cuMemAlloc_v2 && sg_drv.cuMemFree_v2;
    CUresult a = have ? SG_DRIVER_CALL(cuMemAlloc_v2, &token, 1) : CUDA_ERROR_NOT_SUPPORTED;
    if (!quiet) sg_vmm_unrelax();
    if (quiet && (a == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || a == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)) {
        sg_vmm_ctx_leave(ar->ctx, prev);
        *rc = a;
        return -1;
    }
    int verdict = 1;
    if (a == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim_retry()) {
        sg_vmm_relax();
        a = SG_DRIVER_CALL(cuMemAlloc_v2, &token, 1);
        sg_vmm_unrelax();
    }
    sg_vmm_ctx_leave(ar->ctx, prev);   /* the program's context, for the free */
    if (a == CUDA_SUCCESS) {
        *rc = SG_DRIVER_CALL(cuMemFree_v2, token);
        verdict = 0;
        if (*rc != CUDA_SUCCESS) {
            verdict = -1;
            sg_vmm_relax();        /* the token itself still goes, in its own context */
            if (SG_DRIVER_CALL(cuMemFree_v2, token) != CUDA_SUCCESS &&
                sg_vmm_ctx_enter(ar->ctx, &prev) == 0) {
                SG_DRIVER_CALL(cuMemFree_v2, token);
                sg_vmm_ctx_leave(ar->ctx, prev);
            }
            sg_vmm_unrelax();
        }
    } else if (!sg_capture_active() && sg_drv.cuCtxSynchronize) {
        /* the device is full: with no capture in progress, the
         * synchronization cuMemFree would make (of the current context) */
        *rc = SG_DRIVER_CALL(cuCtxSynchronize);
        verdict = *rc == CUDA_SUCCESS ? 0 : -1;
    } else {
        SG_WARN_ONCE("cuMemAlloc of one page failed (%d) during a capture: a cuMemFree of a "
                     "placed block is taken as allowed and its range kept out of use until a "
                     "later free synchronizes its context", (int)a);
    }
    return verdict == 0 && prev != ar->ctx ? 2 : verdict;
}

/* How a free of a placed block goes: the event its range waits for (ev,
 * for key), reusable at once after a synchronization (synced, which also
 * frees the quarantine) or without one (done), else quarantined. */
typedef struct free_how {
    CUevent ev;
    sg_arena_key key;
    int synced, done;
} free_how;

/* Decides *h for c, a free of a block of ar (stream-ordered: ordered).
 * Returns 0 to free the block; 1: the program gets *rc and nothing is freed;
 * 2: the call goes to the driver (a free in a capture: its verdict). */
static int free_how_of(mem_arena *ar, const sg_call *c, int ordered, free_how *h, CUresult *rc)
{
    *h = (free_how){ 0 };
    /* an orphan arena (its context gone) serves frees only: no verdict, no
     * event of its own (its range is never placed again); but a
     * cuMemFreeAsync waits for a completion mark on its stream, where work
     * queued before it may still read the block: the orphan ends, unmapping
     * it, only once the stream got there (before, it faulted:
     * tests/e2e/adv_devices.c, orphan_pending) */
    int capturing = c->u.free.async && sg_capture_active() &&
                    sg_capture_stream(c->u.free.stream, c->per_thread);
    if (__atomic_load_n(&ar->orphan, __ATOMIC_ACQUIRE) && !capturing) {
        if (c->u.free.async && sg_default_stream(c->u.free.stream) && sg_vmm_no_context()) {
            *rc = CUDA_ERROR_INVALID_CONTEXT;   /* the driver's answer: no stream to free on */
            return 1;
        }
        if (c->u.free.async) h->ev = sg_marena_mark_queue(c->u.free.stream, c->per_thread);
        h->done = !h->ev;   /* no mark (the stream is refused): as before, at once */
    } else if (!c->u.free.async && ordered && !sg_capture_active()) {
        /* cuMemFree of stream-ordered memory synchronizes nothing (cuda.h:
         * "will not perform any implicit synchronization when the pointer
         * was allocated with cuMemAllocAsync"; the program made sure its
         * accesses completed): reusable at once, with no token. Only the
         * driver's refusal without a current context is left to give. */
        if (sg_vmm_no_context()) {
            *rc = CUDA_ERROR_INVALID_CONTEXT;
            return 1;
        }
        h->done = 1;
    } else if (!c->u.free.async) {
        int r = free_verdict(ar, rc);
        if (r < 0) return 1;   /* as the driver's cuMemFree: nothing freed */
        h->synced = r == 0;
        h->done = r == 2;      /* reusable at once; the quarantine waits for ar's own sync */
    } else {
        if (capturing) return 2;   /* the driver decides; the block stays */
        CUcontext sctx = NULL;     /* a default stream's context: the current one */
        if (sg_default_stream(c->u.free.stream) &&
            (!sg_drv.cuCtxGetCurrent || SG_DRIVER_CALL(cuCtxGetCurrent, &sctx) != CUDA_SUCCESS || !sctx)) {
            *rc = CUDA_ERROR_INVALID_CONTEXT;   /* the driver's answer: no stream to free on */
            return 1;
        }
        h->key = key_of(c->u.free.stream, c->per_thread, sctx);
        CUresult erc = CUDA_SUCCESS;
        h->ev = free_event(ar, c, &erc);
        if (!h->ev && sg_cu_sticky(erc)) {
            /* a kernel faulted: the driver's cuMemFreeAsync fails with the
             * sticky error and frees nothing (round 16, adv_sticky
             * free_first); core.c notes it */
            *rc = erc;
            return 1;
        }
    }
    return 0;
}

static CUresult mem_free(const sg_call *c)
{
    CUdeviceptr p = c->u.free.ptr;
    if (!sg_mem_placing || !sg_mem_maybe_ours(p)) return fwd_free(c);
    int ours;
    sg_block *found = sg_mem_reg_exact(p, &ours, sg_marena_hold);
    if (!found) return ours ? CUDA_ERROR_INVALID_VALUE : fwd_free(c);
    mem_arena *ar = found->owner;     /* held: found itself may go at once */
    free_how h;
    CUresult rc = CUDA_SUCCESS;
    int r = free_how_of(ar, c, ours == 2, &h, &rc);
    if (r) {
        sg_marena_unref(ar);
        return r == 2 ? c->forward(c->args) : rc;
    }
    CUevent ev = h.ev;
    sg_arena_key key = h.key;
    int synced = h.synced, done = h.done;
    sg_block *b = sg_mem_reg_take(p);
    if (!b) {                      /* another thread freed it meanwhile */
        if (ev) {
            pthread_mutex_lock(&ar->lock);
            sg_marena_event_put(ar, ev);
            pthread_mutex_unlock(&ar->lock);
        }
        sg_vmm_unrelax();
        sg_marena_unref(ar);
        return CUDA_ERROR_INVALID_VALUE;
    }
    sg_ipc_block_gone(b->id);      /* its legacy IPC export ends before the range is reused */
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) {
        if (synced) sg_marena_quarantine_release_locked(ar);
        int quarantine = !ev && !synced && !done;
        if (quarantine) {
            if (sg_grow((void **)&ar->quar, &ar->capquar, ar->nquar + 1, sizeof *ar->quar) == 0)
                ar->quar[ar->nquar++] = (struct qrange){ b->base, b->placed };
            /* else: the range stays unusable until the context goes */
        } else if (sg_arena_free(ar->arena, b->base, b->placed, key, ev) != 0) {
            SG_WARN("out of memory: %zu bytes at 0x%llx are not reused", b->placed,
                    (unsigned long long)b->base);
        }
    }
    if (__atomic_load_n(&ar->orphan, __ATOMIC_ACQUIRE)) sg_marena_orphan_trim_locked(ar);
    int ended = sg_marena_orphan_end_locked(ar);   /* an orphan's last block (one flag load else) */
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
    sg_mem_live_sub(b->size);
    free(b);
    if (!ended) sg_marena_keep_headroom(ar);
    if (ended) sg_marena_unref(ar);   /* the context record's reference, kept by the orphan */
    sg_marena_unref(ar);
    return CUDA_SUCCESS;
}

/* The stream's pending frees stop counting on its order before the driver
 * destroys it: once destroyed, its handle may at once name another
 * thread's new stream. Done first, it is safe whatever the driver answers
 * (a stream not destroyed only loses reuse in its own order). */
static CUresult mem_stream_destroy(const sg_call *c)
{
    if (sg_mem_placing && !sg_default_stream(c->u.stream.stream))
        sg_marena_rekey_all(key_of(c->u.stream.stream, 0, NULL));
    return c->forward(c->args);
}

/* ---------------------------------------------------------------- entry */

void sg_mem_init(const sg_caps *caps)
{
    sg_mem_placing = caps->place;
    place_max = caps->place_max_bytes;
    own_min = caps->own_handles_min;
    sg_marena_init(caps->headroom_bytes);
    sg_launch_filter_init();
}

CUresult sg_mem_call(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_ALLOC:
        return mem_alloc(c);
    case SG_CALL_CTX_CREATE:
        sg_launch_filter_switched();       /* the new context is current */
        /* fall through */
    case SG_CALL_DEV_ALLOC:
        return sg_mem_placing ? forward_retry(c) : c->forward(c->args);
    case SG_CALL_FREE:
        return mem_free(c);
    case SG_CALL_FOREIGN_FREE: {
        CUresult rc = c->forward(c->args);
        sg_mem_foreign_gone(0);
        return rc;
    }
    case SG_CALL_STREAM_DESTROY:
        return mem_stream_destroy(c);
    case SG_CALL_POOL_SET:
        return mem_pool_set(c);
    case SG_CALL_KERNEL_LOOKUP:
        return sg_mem_kernel_lookup(c);
    case SG_CALL_KERNEL:
        return sg_mem_kernel_launch(c);
    case SG_CALL_CTX_SWITCH:
        sg_launch_filter_switched();
        return c->forward(c->args);
    default:
        return c->forward(c->args);
    }
}

size_t sg_mem_block_handles(CUdeviceptr base, sg_mem_handle *out, size_t max)
{
    int ours;
    sg_block *b = sg_mem_reg_exact(base, &ours, sg_marena_hold);
    if (!b) return 0;
    mem_arena *ar = b->owner;
    size_t placed = b->placed;     /* a block is never changed, only freed (then ar is held) */
    sg_arena_chunk *tmp = max ? malloc(max * sizeof *tmp) : NULL;
    size_t n = 0;
    if (!max || tmp) {
        pthread_mutex_lock(&ar->lock);
        n = ar->state == 1 ? sg_arena_chunks(ar->arena, base, placed, tmp, max) : 0;
        pthread_mutex_unlock(&ar->lock);
        for (size_t i = 0; i < n && i < max; i++)
            out[i] = (sg_mem_handle){ tmp[i].handle, tmp[i].va, tmp[i].size,
                                      (long long)(tmp[i].va - base) };
    }
    free(tmp);
    sg_marena_unref(ar);
    return n;
}

void sg_mem_atfork(int phase)
{
    if (phase == 0) {
        sg_mem_reg_atfork(0);
        sg_marena_marks_atfork(0);
    } else {
        sg_marena_marks_atfork(phase);
        sg_mem_reg_atfork(phase);
    }
}

void sg_mem_reset(void)
{
    sg_ctx_reset();                /* tears every arena down */
    sg_marena_orphans_drop();
    sg_mem_reg_reset();
    for (CUdevice d = 0; d < POOL_DEVICES; d++) pool_mark(d, 0);
    __atomic_store_n(&pool_any_replaced, 0, __ATOMIC_RELEASE);
}
