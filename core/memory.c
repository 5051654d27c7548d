/*
 * core/memory.c: the program's allocations under each policy (memory.h).
 *
 * always_update: every memory call is forwarded; the live bytes of successful
 * allocations are tracked until freed so that bytes_requested is the peak the
 * program held at once.
 *
 * skip_temp, skip_profiled: cuMemAlloc_v2 and cuMemAllocAsync(_ptsz) are
 * placed in a per-context arena (arena.c: VA reservations whose mapped prefix
 * grows with cuMemCreate + cuMemMap + cuMemSetAccess, first fit, never
 * unmapped before the context goes), so that a program that repeats its
 * allocation pattern gets the same addresses and its graphs stay identical.
 * The library answers for placed memory what the driver would answer for a
 * cuMemAlloc block (address range, attributes, IPC, double free). Anything it
 * does not place goes to the driver unchanged: size 0, sizes above
 * STABLEGRAPH_PLACE_MAX_BYTES, cuMemAllocFromPoolAsync (the pool's properties
 * are the program's), cuMemAllocAsync on a capturing stream (a graph memory
 * node), devices without VMM, and any allocation whose growth failed in a
 * VMM call (logged once per failing call).
 *
 * Why memory stays mapped: a freed block goes back to the free list but its
 * physical memory stays mapped until the context is destroyed, so a graph
 * exec that captured it (or queued work) never touches unmapped memory.
 *
 * Frees: cuMemFree of a placed block keeps the driver's implicit
 * synchronization (cuCtxSynchronize in the program's capture mode: if that
 * fails, e.g. during a global capture, the program gets its error and nothing
 * is freed, as with the driver). cuMemFreeAsync records an event from a small
 * per-arena pool on the freeing stream; the block is reusable at once on that
 * stream and elsewhere once the event completed (arena.h).
 *
 * Capture safety: every driver call the library makes on its own behalf
 * that the driver could refuse during a capture (VMM, events) runs in
 * CU_STREAM_CAPTURE_MODE_RELAXED (sg_vmm_relax() of vmm_util.h, restored by
 * sg_vmm_unrelax() at the end of each operation), so an application's
 * capture in progress is never invalidated by the library.
 *
 * Locks, in the order they may be taken (never the other way):
 *   arenas_lock   the list of per-context arenas, the retired list, the
 *                 primary-context table;
 *   ar->lock      one per context: its arena (placement, extent, chunks),
 *                 its event pool, its state;
 *   reg_lock      the registry: live placed blocks (sorted by base), the
 *                 reservation spans, the snapshot view, the forwarded-
 *                 allocation table of always_update.
 * No lock is held across a call that can block on the GPU
 * (cuCtxSynchronize, cuStreamSynchronize) or across forward(). VMM and
 * event calls (cuMemCreate, cuMemMap, cuEventQuery, ...) run under ar->lock:
 * they do not wait for the GPU.
 *
 * Arena records of destroyed contexts are retired, never freed (a thread may
 * still hold a pointer to one); they hold no memory.
 */
#include "memory.h"

#include "arena.h"
#include "driver.h"
#include "log.h"
#include "stats.h"
#include "vmm_util.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* With HASH_NONFATAL_OOM a failed uthash allocation sets fwd_oom (reg_lock). */
static int fwd_oom;
#define uthash_nonfatal_oom(elt) (fwd_oom = 1)
#include "hash.h"

#define SG_MEM_MAX_DEVICES 64
#define SG_MEM_EVENT_POOL 64           /* events kept per arena for reuse */
#define SG_MEM_RESV_FALLBACK ((size_t)64 << 30)

/* A warning printed the first time this place is reached only. */
#define WARN_ONCE(...)                                                        \
    do {                                                                      \
        static int sg_once_;                                                  \
        if (!__atomic_exchange_n(&sg_once_, 1, __ATOMIC_RELAXED)) SG_WARN(__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------ state */

typedef struct sg_ctx_arena {
    CUcontext ctx;
    pthread_mutex_t lock;          /* guards everything below */
    int state;                     /* 0 not set up, 1 placing, -1 forwarding, -2 context gone */
    CUdevice dev;
    sg_arena *arena;
    CUmemAllocationProp prop;
    CUmemAccessDesc access[SG_MEM_MAX_DEVICES];
    size_t naccess;
    CUevent events[SG_MEM_EVENT_POOL];
    size_t nevents;
    struct sg_ctx_arena *next;
} sg_ctx_arena;

typedef struct sg_block {
    CUdeviceptr base;
    size_t size, placed;
    uint64_t id;
    sg_ctx_arena *owner;
    int own;
    int ipc_warned;
} sg_block;

typedef struct sg_fwd {
    CUdeviceptr p;
    size_t size;
    UT_hash_handle hh;
} sg_fwd;

struct sg_mem_view {
    int refs;                      /* guarded by reg_lock */
    size_t n;
    sg_alloc_info v[];
};

static int placing;                /* set once by sg_mem_init */
static size_t place_max = SIZE_MAX;
static size_t own_min = SIZE_MAX;  /* atomic */

static pthread_mutex_t arenas_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_ctx_arena *arenas, *retired;
static CUcontext primary[SG_MEM_MAX_DEVICES];

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_block **blocks;          /* sorted by base */
static size_t nblocks, capblocks;
static struct span { CUdeviceptr base; size_t size; } *spans;
static size_t nspans, capspans;
static sg_mem_view *view_cur;
static int view_dirty = 1;
static sg_fwd *fwd_live;

static uint64_t next_id;           /* atomic */
static unsigned long live_now, mapped_now;   /* atomics */

/* ------------------------------------------------------------- statistics */

static void live_add(size_t n)
{
    unsigned long now = __atomic_add_fetch(&live_now, n, __ATOMIC_RELAXED);
    SG_TOTAL_MAX(bytes_requested, now);
}

static void live_sub(size_t n) { __atomic_sub_fetch(&live_now, n, __ATOMIC_RELAXED); }

static void mapped_delta(size_t before, size_t after)
{
    if (after > before) {
        unsigned long now = __atomic_add_fetch(&mapped_now, after - before, __ATOMIC_RELAXED);
        SG_TOTAL_MAX(bytes_mapped, now);
    } else if (before > after) {
        __atomic_sub_fetch(&mapped_now, before - after, __ATOMIC_RELAXED);
    }
}

/* --------------------------------------------------------------- registry */

/* Index of the first block whose base is > p (reg_lock held). */
static size_t reg_upper(CUdeviceptr p)
{
    size_t lo = 0, hi = nblocks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (blocks[mid]->base <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The live block containing p, or NULL (reg_lock held). */
static sg_block *reg_containing(CUdeviceptr p)
{
    size_t i = reg_upper(p);
    if (i == 0) return NULL;
    sg_block *b = blocks[i - 1];
    return p - b->base < b->size ? b : NULL;
}

/* The live block starting exactly at p, or NULL (reg_lock held). */
static sg_block *reg_exact(CUdeviceptr p)
{
    sg_block *b = reg_containing(p);
    return b && b->base == p ? b : NULL;
}

/* 1 if p lies in one of the library's reservations (reg_lock held). */
static int reg_in_spans(CUdeviceptr p)
{
    for (size_t i = 0; i < nspans; i++)
        if (p >= spans[i].base && p - spans[i].base < spans[i].size) return 1;
    return 0;
}

static int reg_insert(sg_block *b)
{
    pthread_mutex_lock(&reg_lock);
    int ok = nblocks < capblocks;
    if (!ok) {
        size_t ncap = capblocks ? capblocks * 2 : 64;
        sg_block **nb = realloc(blocks, ncap * sizeof *nb);
        if (nb) { blocks = nb; capblocks = ncap; ok = 1; }
    }
    if (ok) {
        size_t i = reg_upper(b->base);
        memmove(&blocks[i + 1], &blocks[i], (nblocks - i) * sizeof *blocks);
        blocks[i] = b;
        nblocks++;
        view_dirty = 1;
    }
    pthread_mutex_unlock(&reg_lock);
    return ok ? 0 : -1;
}

/* Removes blocks[i] (reg_lock held). */
static void reg_remove_at(size_t i)
{
    memmove(&blocks[i], &blocks[i + 1], (nblocks - i - 1) * sizeof *blocks);
    nblocks--;
    view_dirty = 1;
}

/* Takes the live block starting at p out of the registry; NULL if none. */
static sg_block *reg_take(CUdeviceptr p)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_exact(p);
    if (b) reg_remove_at(reg_upper(p) - 1);
    pthread_mutex_unlock(&reg_lock);
    return b;
}

static void span_add(CUdeviceptr base, size_t size)
{
    pthread_mutex_lock(&reg_lock);
    if (nspans == capspans) {
        size_t ncap = capspans ? capspans * 2 : 8;
        struct span *ns = realloc(spans, ncap * sizeof *ns);
        if (ns) { spans = ns; capspans = ncap; }
    }
    /* Out of memory: the span is not known, so a double free there is
     * forwarded and the driver answers it (still an error). */
    if (nspans < capspans) spans[nspans++] = (struct span){ base, size };
    pthread_mutex_unlock(&reg_lock);
}

static void span_del(CUdeviceptr base)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < nspans; i++) {
        if (spans[i].base == base) {
            spans[i] = spans[--nspans];
            break;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

static void info_of(const sg_block *b, sg_alloc_info *out)
{
    *out = (sg_alloc_info){ .base = b->base, .size = b->size, .id = b->id,
                            .ctx = b->owner->ctx, .own_handles = b->own };
}

int sg_mem_find(CUdeviceptr p, sg_alloc_info *out)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    if (b && out) info_of(b, out);
    pthread_mutex_unlock(&reg_lock);
    return b != NULL;
}

static void view_unref_locked(sg_mem_view *v)
{
    if (v && --v->refs == 0) free(v);
}

const sg_mem_view *sg_mem_view_acquire(void)
{
    pthread_mutex_lock(&reg_lock);
    if (view_dirty || !view_cur) {
        sg_mem_view *v = malloc(sizeof *v + nblocks * sizeof v->v[0]);
        if (!v) {
            pthread_mutex_unlock(&reg_lock);
            return NULL;
        }
        v->refs = 1;                  /* the reference of view_cur itself */
        v->n = nblocks;
        for (size_t i = 0; i < nblocks; i++) info_of(blocks[i], &v->v[i]);
        view_unref_locked(view_cur);
        view_cur = v;
        view_dirty = 0;
    }
    sg_mem_view *v = view_cur;
    v->refs++;
    pthread_mutex_unlock(&reg_lock);
    return v;
}

int sg_mem_view_find(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->v[mid].base <= p) lo = mid + 1; else hi = mid;
    }
    if (lo == 0 || p - v->v[lo - 1].base >= v->v[lo - 1].size) return 0;
    if (out) *out = v->v[lo - 1];
    return 1;
}

void sg_mem_view_release(const sg_mem_view *v)
{
    pthread_mutex_lock(&reg_lock);
    view_unref_locked((sg_mem_view *)v);
    pthread_mutex_unlock(&reg_lock);
}

/* Forwarded allocations (live bytes accounting only). */
static void fwd_track(CUdeviceptr p, size_t size)
{
    sg_fwd *e = calloc(1, sizeof *e);
    if (!e) return;
    e->p = p;
    e->size = size;
    pthread_mutex_lock(&reg_lock);
    sg_fwd *old;
    HASH_FIND(hh, fwd_live, &p, sizeof p, old);
    if (old) {                     /* the driver reused an address we missed the free of */
        HASH_DEL(fwd_live, old);
        live_sub(old->size);
        free(old);
    }
    fwd_oom = 0;
    HASH_ADD(hh, fwd_live, p, sizeof e->p, e);
    if (fwd_oom) { free(e); e = NULL; }
    pthread_mutex_unlock(&reg_lock);
    if (e) live_add(size);
}

static void fwd_untrack(CUdeviceptr p)
{
    pthread_mutex_lock(&reg_lock);
    sg_fwd *e;
    HASH_FIND(hh, fwd_live, &p, sizeof p, e);
    if (e) HASH_DEL(fwd_live, e);
    pthread_mutex_unlock(&reg_lock);
    if (e) {
        live_sub(e->size);
        free(e);
    }
}

/* ----------------------------------------------------- arena ops (driver) */

static CUresult op_reserve(void *u, size_t size, size_t align, CUdeviceptr *base)
{
    (void)u;
    sg_vmm_relax();
    CUresult rc = SG_DRIVER_CALL(cuMemAddressReserve, base, size, align, 0, 0);
    if (rc == CUDA_SUCCESS) span_add(*base, size);
    return rc;
}

static CUresult op_unreserve(void *u, CUdeviceptr base, size_t size)
{
    (void)u;
    sg_vmm_relax();
    span_del(base);
    return SG_DRIVER_CALL(cuMemAddressFree, base, size);
}

static CUresult op_create(void *u, size_t size, CUmemGenericAllocationHandle *h)
{
    sg_ctx_arena *ar = u;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemCreate, h, size, &ar->prop, 0);
}

static CUresult op_release(void *u, CUmemGenericAllocationHandle h)
{
    (void)u;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemRelease, h);
}

static CUresult op_map(void *u, CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    (void)u;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemMap, va, size, 0, h, 0);
}

static CUresult op_set_access(void *u, CUdeviceptr va, size_t size)
{
    sg_ctx_arena *ar = u;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemSetAccess, va, size, ar->access, ar->naccess);
}

static CUresult op_unmap(void *u, CUdeviceptr va, size_t size)
{
    (void)u;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuMemUnmap, va, size);
}

/* An event that cannot be queried (an error other than NOT_READY) is taken
 * as not complete: the memory stays out of use rather than risk reuse. */
static int op_event_done(void *u, void *ev)
{
    (void)u;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuEventQuery, (CUevent)ev) == CUDA_SUCCESS;
}

/* Back to the pool (ar->lock held); after the context is gone the event
 * went with it. */
static void op_event_put(void *u, void *ev)
{
    sg_ctx_arena *ar = u;
    if (ar->state == -2) return;
    if (ar->nevents < SG_MEM_EVENT_POOL) {
        ar->events[ar->nevents++] = (CUevent)ev;
    } else {
        sg_vmm_relax();
        SG_DRIVER_CALL(cuEventDestroy_v2, (CUevent)ev);
    }
}

static const sg_arena_ops driver_ops = {
    .reserve = op_reserve, .unreserve = op_unreserve, .create = op_create,
    .release = op_release, .map = op_map, .set_access = op_set_access, .unmap = op_unmap,
    .event_done = op_event_done, .event_put = op_event_put,
};

/* ------------------------------------------------------------------ arenas */

/* The arena record of ctx, created (not set up) if missing. NULL if out of
 * memory. */
static sg_ctx_arena *arena_get(CUcontext ctx)
{
    pthread_mutex_lock(&arenas_lock);
    sg_ctx_arena *ar = arenas;
    while (ar && ar->ctx != ctx) ar = ar->next;
    if (!ar && (ar = calloc(1, sizeof *ar))) {
        ar->ctx = ctx;
        pthread_mutex_init(&ar->lock, NULL);
        ar->next = arenas;
        arenas = ar;
    }
    pthread_mutex_unlock(&arenas_lock);
    return ar;
}

/* Sets up ar (ar->lock held): device, VMM support, granularity, which
 * devices get access, reservation size. On failure ar forwards from then on
 * and the log says why, once. */
static void arena_setup(sg_ctx_arena *ar)
{
    CUcontext prev;
    int vmm = 0;
    size_t gran = 0, total = 0;
    ar->state = -1;
    if (sg_vmm_ctx_enter(ar->ctx, &prev) != 0) {
        WARN_ONCE("cannot make context %p current to set up its arena: its allocations go "
                  "to the driver unchanged", (void *)ar->ctx);
        return;
    }
    CUresult rc = SG_DRIVER_CALL(cuCtxGetDevice, &ar->dev);
    sg_vmm_ctx_leave(ar->ctx, prev);
    if (rc != CUDA_SUCCESS) {
        WARN_ONCE("cuCtxGetDevice failed (%d): allocations go to the driver unchanged", (int)rc);
        return;
    }
    rc = SG_DRIVER_CALL(cuDeviceGetAttribute, &vmm,
                        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, ar->dev);
    if (rc != CUDA_SUCCESS || !vmm) {
        WARN_ONCE("device %d has no virtual memory management support: allocations go to the "
                  "driver unchanged (no stable addresses for temporaries)", (int)ar->dev);
        return;
    }
    ar->prop = (CUmemAllocationProp){ .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                      .location = { CU_MEM_LOCATION_TYPE_DEVICE, ar->dev } };
    rc = SG_DRIVER_CALL(cuMemGetAllocationGranularity, &gran, &ar->prop,
                        CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (rc != CUDA_SUCCESS || gran == 0 || (gran & (gran - 1))) {
        WARN_ONCE("cuMemGetAllocationGranularity failed (%d): allocations go to the driver "
                  "unchanged", (int)rc);
        return;
    }
    /* The arena's own device, and every peer that can access its memory:
     * a program that enabled peer access expects to reach cuMemAlloc memory
     * from there (NCCL deadlocks without it). */
    ar->naccess = sg_vmm_access_descs(ar->dev, ar->access, SG_MEM_MAX_DEVICES);
    /* Address space is cheap and an allocation never moves: reserve twice
     * the device's memory per reservation, so one normally suffices. */
    size_t resv = SG_MEM_RESV_FALLBACK;
    if (sg_drv.cuDeviceTotalMem_v2 &&
        SG_DRIVER_CALL(cuDeviceTotalMem_v2, &total, ar->dev) == CUDA_SUCCESS && total > 0 &&
        total <= SIZE_MAX / 2)
        resv = total * 2;
    sg_arena_ops ops = driver_ops;
    ops.user = ar;
    if (!(ar->arena = sg_arena_new(&ops, gran, resv))) {
        WARN_ONCE("out of memory setting up an arena: allocations go to the driver unchanged");
        return;
    }
    ar->state = 1;
}

/* Unmaps and frees everything of ctx's arena and forgets its blocks. The
 * context is gone (its work with it), so nothing can touch the memory. */
static void arena_teardown(CUcontext ctx)
{
    if (!ctx) return;
    pthread_mutex_lock(&arenas_lock);
    sg_ctx_arena **pp = &arenas;
    while (*pp && (*pp)->ctx != ctx) pp = &(*pp)->next;
    sg_ctx_arena *ar = *pp;
    if (ar) {
        *pp = ar->next;
        ar->next = retired;
        retired = ar;
    }
    pthread_mutex_unlock(&arenas_lock);
    if (!ar) return;

    size_t freed = 0;
    pthread_mutex_lock(&reg_lock);
    for (size_t i = nblocks; i-- > 0;) {
        if (blocks[i]->owner != ar) continue;
        freed += blocks[i]->size;
        free(blocks[i]);
        reg_remove_at(i);
    }
    pthread_mutex_unlock(&reg_lock);
    live_sub(freed);

    pthread_mutex_lock(&ar->lock);
    int was = ar->state;
    ar->state = -2;                /* events went with the context: op_event_put drops them */
    if (was == 1) {
        mapped_delta(sg_arena_mapped(ar->arena), 0);
        sg_arena_destroy(ar->arena);
        ar->arena = NULL;
    }
    ar->nevents = 0;
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
}

static void (*ctx_gone_hook)(CUcontext ctx);   /* set once at init */

void sg_mem_on_ctx_gone(void (*fn)(CUcontext ctx)) { ctx_gone_hook = fn; }

/* A context is gone: others drop what they hold in it, then the arena goes. */
static void ctx_gone(CUcontext ctx)
{
    if (ctx && ctx_gone_hook) ctx_gone_hook(ctx);
    arena_teardown(ctx);
}

/* ------------------------------------------------------------- allocation */

static CUresult fwd_alloc(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS && c->dptr_out) fwd_track(*c->dptr_out, c->bytes);
    return rc;
}

static CUresult fwd_free(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS) fwd_untrack(c->dptr);
    return rc;
}

/* The stream a stream-ordered call names, as a key: NULL means the legacy
 * or the per-thread default stream, and per-thread streams of different
 * threads differ. */
static sg_arena_key stream_key(const sg_call *c)
{
    CUstream s = c->stream ? c->stream : c->per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    sg_arena_key k = { (uintptr_t)s, 0 };
    if (s == CU_STREAM_PER_THREAD) k.thread = (uintptr_t)pthread_self();
    return k;
}

static CUresult stream_capturing(const sg_call *c, CUstreamCaptureStatus *st)
{
    return c->per_thread ? SG_DRIVER_CALL(cuStreamIsCapturing_ptsz, c->stream, st)
                         : SG_DRIVER_CALL(cuStreamIsCapturing, c->stream, st);
}

static void log_growth_failure(sg_arena_fail f, CUresult rc, size_t bytes)
{
    static int warned[SG_ARENA_FAIL_NOMEM + 1];
    if ((unsigned)f <= SG_ARENA_FAIL_NOMEM && !__atomic_exchange_n(&warned[f], 1, __ATOMIC_RELAXED))
        SG_WARN("%s failed (error %d) placing %zu bytes: this allocation, and any other whose "
                "placement fails the same way, goes to the driver's allocator unchanged "
                "(logged once)", sg_arena_fail_name(f), (int)rc, bytes);
}

static CUresult mem_alloc(const sg_call *c)
{
    if (!placing || c->bytes == 0 || c->bytes > place_max || !c->dptr_out ||
        (c->async && c->pool))
        return fwd_alloc(c);
    CUcontext ctx = NULL;
    sg_arena_key key = { 0, 0 };
    if (c->async) {
        CUstreamCaptureStatus st;
        if (stream_capturing(c, &st) != CUDA_SUCCESS) return fwd_alloc(c);
        if (st != CU_STREAM_CAPTURE_STATUS_NONE) return c->forward(c->args);  /* graph memory node */
        CUresult rc = c->per_thread ? SG_DRIVER_CALL(cuStreamGetCtx_ptsz, c->stream, &ctx)
                                    : SG_DRIVER_CALL(cuStreamGetCtx, c->stream, &ctx);
        if (rc != CUDA_SUCCESS) return fwd_alloc(c);
        key = stream_key(c);
    } else if (SG_DRIVER_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS) {
        return fwd_alloc(c);
    }
    if (!ctx) return fwd_alloc(c);
    sg_ctx_arena *ar = arena_get(ctx);
    if (!ar) return fwd_alloc(c);
    int own = c->bytes >= __atomic_load_n(&own_min, __ATOMIC_RELAXED);

    CUdeviceptr addr = 0;
    size_t placed = 0, before = 0, after = 0;
    CUresult rc = CUDA_SUCCESS;
    sg_arena_fail f = SG_ARENA_FAIL_NOMEM;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 0) arena_setup(ar);
    int state = ar->state;
    if (state == 1) {
        before = sg_arena_mapped(ar->arena);
        f = sg_arena_alloc(ar->arena, c->bytes, own, key, &addr, &placed, &rc);
        after = sg_arena_mapped(ar->arena);
    }
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
    if (state != 1) return fwd_alloc(c);
    mapped_delta(before, after);
    if (f != SG_ARENA_OK) {
        log_growth_failure(f, rc, c->bytes);
        return fwd_alloc(c);
    }

    sg_block *b = calloc(1, sizeof *b);
    if (b) {
        *b = (sg_block){ .base = addr, .size = c->bytes, .placed = placed, .owner = ar, .own = own,
                         .id = SG_MEM_ID_BASE + __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED) };
    }
    if (!b || reg_insert(b) != 0) {
        free(b);
        pthread_mutex_lock(&ar->lock);
        if (ar->state == 1) sg_arena_free(ar->arena, addr, placed, (sg_arena_key){ 0, 0 }, NULL);
        pthread_mutex_unlock(&ar->lock);
        return fwd_alloc(c);
    }
    *c->dptr_out = addr;
    live_add(c->bytes);
    return CUDA_SUCCESS;
}

/* An event recorded on the freeing stream, for a stream-ordered free of a
 * block of ar; NULL if none could be had (the caller then synchronizes). */
static CUevent free_event(sg_ctx_arena *ar, const sg_call *c)
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
                if (SG_DRIVER_CALL(cuEventCreate, &ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
                    ev = NULL;
                sg_vmm_ctx_leave(ar->ctx, prev);
            }
        }
    }
    pthread_mutex_unlock(&ar->lock);
    if (!ev) return NULL;
    sg_vmm_relax();
    CUresult rc = c->per_thread ? SG_DRIVER_CALL(cuEventRecord_ptsz, ev, c->stream)
                                : SG_DRIVER_CALL(cuEventRecord, ev, c->stream);
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_lock(&ar->lock);
        op_event_put(ar, ev);
        pthread_mutex_unlock(&ar->lock);
        return NULL;
    }
    return ev;
}

static CUresult mem_free(const sg_call *c)
{
    if (!placing) return fwd_free(c);
    pthread_mutex_lock(&reg_lock);
    sg_block *found = reg_exact(c->dptr);
    sg_ctx_arena *ar = found ? found->owner : NULL;
    int ours = found || reg_in_spans(c->dptr);
    pthread_mutex_unlock(&reg_lock);
    if (!found) return ours ? CUDA_ERROR_INVALID_VALUE : fwd_free(c);

    CUevent ev = NULL;
    sg_arena_key key = { 0, 0 };
    CUresult rc;
    if (!c->async) {
        /* The driver's implicit synchronization, in the program's own capture
         * mode: during a global capture it fails (and invalidates it) as the
         * real cuMemFree would, and nothing is freed. */
        CUcontext prev;
        if (sg_vmm_ctx_enter(ar->ctx, &prev) != 0) return CUDA_ERROR_INVALID_CONTEXT;
        rc = SG_DRIVER_CALL(cuCtxSynchronize);
        sg_vmm_ctx_leave(ar->ctx, prev);
        if (rc != CUDA_SUCCESS) return rc;
    } else {
        CUstreamCaptureStatus st;
        if ((rc = stream_capturing(c, &st)) != CUDA_SUCCESS) return rc;
        if (st != CU_STREAM_CAPTURE_STATUS_NONE) {
            WARN_ONCE("cuMemFreeAsync of memory the library placed, on a capturing stream: "
                      "not supported (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); free it outside "
                      "the capture");
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        key = stream_key(c);
        if (!(ev = free_event(ar, c))) {
            sg_vmm_unrelax();
            rc = c->per_thread ? SG_DRIVER_CALL(cuStreamSynchronize_ptsz, c->stream)
                               : SG_DRIVER_CALL(cuStreamSynchronize, c->stream);
            if (rc != CUDA_SUCCESS) return rc;
        }
    }
    sg_block *b = reg_take(c->dptr);
    if (!b) {                      /* another thread freed it meanwhile */
        if (ev) {
            pthread_mutex_lock(&ar->lock);
            op_event_put(ar, ev);
            pthread_mutex_unlock(&ar->lock);
        }
        sg_vmm_unrelax();
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1 && sg_arena_free(ar->arena, b->base, b->placed, key, ev) != 0)
        SG_WARN("out of memory: %zu bytes at 0x%llx are not reused", b->placed,
                (unsigned long long)b->base);
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
    live_sub(b->size);
    free(b);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- queries */

/* Looks p up: 1 and *out if inside a live placed block, 0 if inside a
 * reservation of the library but no live block, -1 if not ours. */
static int lookup(CUdeviceptr p, sg_alloc_info *out)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    int r = b ? 1 : reg_in_spans(p) ? 0 : -1;
    if (b) info_of(b, out);
    pthread_mutex_unlock(&reg_lock);
    return r;
}

static void put_u64(void *d, unsigned long long v) { memcpy(d, &v, sizeof v); }

/* Writes what a cuMemAlloc block would report for attribute a, for the
 * attributes whose driver answer would reveal the arena (the reservation,
 * the shared chunk, its id, no context); 0 if a is not one of them (the
 * driver's answer stands: memory type, device, access, IPC capability 0...). */
static int attr_override(const sg_alloc_info *b, CUpointer_attribute a, void *data)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: {
        CUcontext ctx = b->ctx;
        memcpy(data, &ctx, sizeof ctx);
        return 1;
    }
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        put_u64(data, b->id);
        return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        put_u64(data, b->base);
        return 1;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        put_u64(data, b->size);
        return 1;
    default:
        return 0;
    }
}

static CUresult mem_addr_range(const sg_call *c)
{
    sg_alloc_info b;
    int r = placing ? lookup(c->dptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) return CUDA_ERROR_NOT_FOUND;
    if (c->base_out) *c->base_out = b.base;
    if (c->size_out) *c->size_out = b.size;
    return CUDA_SUCCESS;
}

static CUresult mem_ptr_attr(const sg_call *c)
{
    sg_alloc_info b;
    int r = placing && c->attr_data ? lookup(c->dptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) return CUDA_ERROR_INVALID_VALUE;   /* as for unallocated memory */
    return attr_override(&b, c->attr, c->attr_data) ? CUDA_SUCCESS : c->forward(c->args);
}

static CUresult mem_ptr_attrs(const sg_call *c)
{
    sg_alloc_info b;
    int r = placing ? lookup(c->dptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) { /* freed placed memory: what the driver says of an unallocated pointer */
        if (!sg_drv.cuPointerGetAttributes) return CUDA_ERROR_INVALID_VALUE;
        return SG_DRIVER_CALL(cuPointerGetAttributes, c->nattrs, c->attrs, c->attr_datas, 0);
    }
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS) return rc;
    for (unsigned i = 0; i < c->nattrs; i++) attr_override(&b, c->attrs[i], c->attr_datas[i]);
    return CUDA_SUCCESS;
}

/* Legacy IPC cannot export VMM memory: the driver's own answer for it is
 * CUDA_ERROR_INVALID_VALUE. Say once per allocation which one and how to
 * keep such allocations away from the library. */
static CUresult mem_ipc(const sg_call *c)
{
    if (!placing) return c->forward(c->args);
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(c->dptr);
    int ours = b || reg_in_spans(c->dptr);
    int warn = b && !b->ipc_warned;
    CUdeviceptr base = b ? b->base : 0;
    size_t size = b ? b->size : 0;
    if (b) b->ipc_warned = 1;
    pthread_mutex_unlock(&reg_lock);
    if (!ours) return c->forward(c->args);
    if (warn)
        SG_WARN("cuIpcGetMemHandle on the allocation at 0x%llx (%zu bytes), which the library "
                "placed in VMM memory: legacy IPC is not possible there (CUDA_ERROR_INVALID_VALUE). "
                "To give such allocations to the driver unchanged, set %s below their size "
                "(e.g. %s=%zu)", (unsigned long long)base, size, SG_ENV_PLACE_MAX,
                SG_ENV_PLACE_MAX, size ? size - 1 : 0);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---------------------------------------------------------------- contexts */

static CUresult mem_primary_retain(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS && c->ctx_out && c->device >= 0 && c->device < SG_MEM_MAX_DEVICES) {
        pthread_mutex_lock(&arenas_lock);
        primary[c->device] = *c->ctx_out;
        pthread_mutex_unlock(&arenas_lock);
    }
    return rc;
}

static CUresult mem_primary_drop(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS || c->device < 0 || c->device >= SG_MEM_MAX_DEVICES) return rc;
    unsigned flags;
    int active = 1;
    if (SG_DRIVER_CALL(cuDevicePrimaryCtxGetState, c->device, &flags, &active) != CUDA_SUCCESS ||
        active)
        return rc;
    pthread_mutex_lock(&arenas_lock);
    CUcontext ctx = primary[c->device];
    primary[c->device] = NULL;
    pthread_mutex_unlock(&arenas_lock);
    ctx_gone(ctx);
    return rc;
}

/* ---------------------------------------------------------------- entry */


void sg_mem_init(const sg_config *cfg)
{
    placing = cfg->policy == SG_POLICY_SKIP_TEMP || cfg->policy == SG_POLICY_SKIP_PROFILED;
    place_max = cfg->place_max_bytes;
}

void sg_mem_set_own_handles_min(size_t min_bytes)
{
    __atomic_store_n(&own_min, min_bytes, __ATOMIC_RELAXED);
}

CUresult sg_mem_call(const sg_call *c)
{
    CUresult rc;
    switch (c->kind) {
    case SG_CALL_ALLOC:
        return mem_alloc(c);
    case SG_CALL_FREE:
        return mem_free(c);
    case SG_CALL_ADDR_RANGE:
        return mem_addr_range(c);
    case SG_CALL_PTR_ATTR:
        return mem_ptr_attr(c);
    case SG_CALL_PTR_ATTRS:
        return mem_ptr_attrs(c);
    case SG_CALL_IPC_HANDLE:
        return mem_ipc(c);
    case SG_CALL_CTX_DESTROY:
        rc = c->forward(c->args);
        if (rc == CUDA_SUCCESS) ctx_gone(c->ctx);
        return rc;
    case SG_CALL_PRIMARY_RETAIN:
        return mem_primary_retain(c);
    case SG_CALL_PRIMARY_DROP:
        return mem_primary_drop(c);
    default:
        return c->forward(c->args);
    }
}

size_t sg_mem_block_handles(CUdeviceptr base, sg_mem_handle *out, size_t max)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_exact(base);
    sg_ctx_arena *ar = b ? b->owner : NULL;
    size_t placed = b ? b->placed : 0;
    pthread_mutex_unlock(&reg_lock);
    if (!ar) return 0;
    sg_arena_chunk *tmp = max ? malloc(max * sizeof *tmp) : NULL;
    if (max && !tmp) return 0;
    pthread_mutex_lock(&ar->lock);
    size_t n = ar->state == 1 ? sg_arena_chunks(ar->arena, base, placed, tmp, max) : 0;
    pthread_mutex_unlock(&ar->lock);
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = (sg_mem_handle){ tmp[i].handle, tmp[i].va, tmp[i].size,
                                  (long long)(tmp[i].va - base) };
    free(tmp);
    return n;
}

void sg_mem_reset(void)
{
    for (;;) {
        pthread_mutex_lock(&arenas_lock);
        CUcontext ctx = arenas ? arenas->ctx : NULL;
        int any = arenas != NULL;
        pthread_mutex_unlock(&arenas_lock);
        if (!any) break;
        arena_teardown(ctx);
    }
    pthread_mutex_lock(&arenas_lock);
    while (retired) {
        sg_ctx_arena *ar = retired;
        retired = ar->next;
        pthread_mutex_destroy(&ar->lock);
        free(ar);
    }
    memset(primary, 0, sizeof primary);
    pthread_mutex_unlock(&arenas_lock);
    pthread_mutex_lock(&reg_lock);
    sg_fwd *e, *tmp;
    HASH_ITER(hh, fwd_live, e, tmp) {
        HASH_DEL(fwd_live, e);
        free(e);
    }
    view_unref_locked(view_cur);
    view_cur = NULL;
    view_dirty = 1;
    nspans = 0;
    pthread_mutex_unlock(&reg_lock);
    __atomic_store_n(&live_now, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mapped_now, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&own_min, SIZE_MAX, __ATOMIC_RELAXED);
}
