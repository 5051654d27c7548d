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
 * properties are the program's), cuMemAllocAsync on a capturing stream (a
 * graph memory node), cuMemAlloc while any stream capture is in progress (the
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
 * Frees: cuMemFree of a placed block keeps the driver's implicit
 * synchronization (cuCtxSynchronize in the block's context, in the program's
 * capture mode: during a global capture it fails and invalidates it as the
 * real cuMemFree would, and nothing is freed). If the block's context cannot
 * be made current (a failing cuCtxGetCurrent), the block is freed for the
 * program but its range is quarantined: reused only after the next successful
 * synchronization of that context. cuMemFreeAsync records an event from a
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
 *   reg_lock      the registry: live placed blocks (sorted by base), the
 *                 reservation spans, the snapshot view, the forwarded-
 *                 allocation table.
 * No lock is held across a call that can block on the GPU
 * (cuCtxSynchronize) or across forward(). VMM and event calls (cuMemCreate,
 * cuMemMap, cuEventQuery, ...) run under ar->lock: they do not wait for the GPU.
 */
#include "memory.h"

#include "arena.h"
#include "capture.h"
#include "contexts.h"
#include "driver.h"
#include "log.h"
#include "stats.h"
#include "streams.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* With HASH_NONFATAL_OOM a failed uthash allocation sets fwd_oom (reg_lock). */
static int fwd_oom;
#define uthash_nonfatal_oom(elt) (fwd_oom = 1)
#include "hash.h"

#define EVENT_POOL 64                  /* events kept per arena for reuse */
#define RESV_FALLBACK ((size_t)64 << 30)

/* ------------------------------------------------------------------ state */

/* One context's arena: contexts.c's record holds it as SG_CTX_PART_ARENA.
 * refs: the record's reference plus one per operation in progress; the last
 * one frees it (after teardown). */
typedef struct mem_arena {
    int refs;                      /* atomic */
    pthread_mutex_t lock;          /* guards everything below */
    int state;                     /* 0 not set up, 1 placing, -1 forwarding, -2 context gone */
    CUcontext ctx;
    sg_vmm_dev vmm;                /* copied from the context record */
    sg_arena *arena;
    CUevent events[EVENT_POOL];
    size_t nevents;
    struct qrange { CUdeviceptr addr; size_t placed; } *quar;   /* freed, awaiting a sync */
    size_t nquar, capquar;
} mem_arena;

typedef struct sg_block {
    CUdeviceptr base;
    size_t size, placed;
    uint64_t id;
    mem_arena *owner;
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
static size_t own_min = SIZE_MAX;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_block **blocks;          /* sorted by base */
static size_t nblocks, capblocks;
static struct span { CUdeviceptr base; size_t size; } *spans;
static size_t nspans, capspans;
static CUdeviceptr span_lo = UINTPTR_MAX, span_hi;   /* atomics: every span is inside */
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

/* 0 if p cannot be the library's (outside every reservation): no lock. */
static int maybe_ours(CUdeviceptr p)
{
    return p >= __atomic_load_n(&span_lo, __ATOMIC_ACQUIRE) &&
           p < __atomic_load_n(&span_hi, __ATOMIC_ACQUIRE);
}

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
    int ok = sg_grow((void **)&blocks, &capblocks, nblocks + 1, sizeof *blocks) == 0;
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
    sg_block *b = reg_containing(p);
    if (b && b->base == p) reg_remove_at(reg_upper(p) - 1);
    else b = NULL;
    pthread_mutex_unlock(&reg_lock);
    return b;
}

static void span_add(CUdeviceptr base, size_t size)
{
    pthread_mutex_lock(&reg_lock);
    /* Out of memory: the span is not known, so a double free there is
     * forwarded and the driver answers it (still an error). */
    if (sg_grow((void **)&spans, &capspans, nspans + 1, sizeof *spans) == 0)
        spans[nspans++] = (struct span){ base, size };
    if (base < span_lo) __atomic_store_n(&span_lo, base, __ATOMIC_RELEASE);
    if (base + size > span_hi) __atomic_store_n(&span_hi, base + size, __ATOMIC_RELEASE);
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
    if (!maybe_ours(p)) return 0;
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    if (b && out) info_of(b, out);
    pthread_mutex_unlock(&reg_lock);
    return b != NULL;
}

/* Looks p up: 1 and *out if inside a live placed block, 0 if inside a
 * reservation of the library but no live block, -1 if not ours. */
static int lookup(CUdeviceptr p, sg_alloc_info *out)
{
    if (!maybe_ours(p)) return -1;
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    int r = b ? 1 : reg_in_spans(p) ? 0 : -1;
    if (b) info_of(b, out);
    pthread_mutex_unlock(&reg_lock);
    return r;
}

CUresult sg_mem_check_range(CUdeviceptr p, size_t len)
{
    sg_alloc_info b;
    if (len == 0 || !placing) return CUDA_SUCCESS;
    int r = lookup(p, &b);
    if (r < 0) return CUDA_SUCCESS;
    if (r == 0) return CUDA_ERROR_INVALID_VALUE;            /* freed placed memory */
    return len <= b.size - (size_t)(p - b.base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
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

/* Index of the first view entry whose base is > p. */
static size_t view_upper(const sg_mem_view *v, CUdeviceptr p)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v->v[mid].base <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

int sg_mem_view_find(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out)
{
    size_t i = view_upper(v, p);
    if (i == 0 || p - v->v[i - 1].base >= v->v[i - 1].size) return 0;
    if (out) *out = v->v[i - 1];
    return 1;
}

int sg_mem_view_find_end(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out)
{
    size_t i = view_upper(v, p - 1);
    if (i == 0 || v->v[i - 1].base + v->v[i - 1].size != p) return 0;
    if (out) *out = v->v[i - 1];
    return 1;
}

void sg_mem_view_release(const sg_mem_view *cv)
{
    sg_mem_view *v = (sg_mem_view *)cv;
    if (!v) return;
    pthread_mutex_lock(&reg_lock);
    view_unref_locked(v);
    pthread_mutex_unlock(&reg_lock);
}

/* ----------------------------------------------- forwarded allocations */

static void fwd_track(CUdeviceptr p, size_t size)
{
    sg_fwd *e = calloc(1, sizeof *e);
    if (!e) return;
    e->p = p;
    e->size = size;
    pthread_mutex_lock(&reg_lock);
    sg_fwd *old;
    HASH_FIND(hh, fwd_live, &p, sizeof p, old);
    if (old) {
        HASH_DEL(fwd_live, old);
        live_sub(old->size);
        free(old);
    }
    fwd_oom = 0;
    HASH_ADD(hh, fwd_live, p, sizeof e->p, e);
    if (fwd_oom) {
        free(e);
        e = NULL;
    }
    pthread_mutex_unlock(&reg_lock);
    if (e) live_add(size);
}

static void fwd_untrack(CUdeviceptr p)
{
    sg_fwd *e;
    pthread_mutex_lock(&reg_lock);
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
    CUresult rc = sg_vmm_reserve(size, align, base);
    if (rc == CUDA_SUCCESS) span_add(*base, size);
    return rc;
}

static CUresult op_unreserve(void *u, CUdeviceptr base, size_t size)
{
    (void)u;
    span_del(base);
    return sg_vmm_unreserve(base, size);
}

static CUresult op_create(void *u, size_t size, CUmemGenericAllocationHandle *h)
{
    return sg_vmm_create(&((mem_arena *)u)->vmm, size, h);
}

static CUresult op_release(void *u, CUmemGenericAllocationHandle h)
{
    (void)u;
    return sg_vmm_release(h);
}

static CUresult op_map(void *u, CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    (void)u;
    return sg_vmm_map(va, size, h);
}

static CUresult op_set_access(void *u, CUdeviceptr va, size_t size)
{
    return sg_vmm_set_access(&((mem_arena *)u)->vmm, va, size);
}

static CUresult op_unmap(void *u, CUdeviceptr va, size_t size)
{
    (void)u;
    return sg_vmm_unmap(va, size);
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
    mem_arena *ar = u;
    if (ar->state == -2) return;
    if (ar->nevents < EVENT_POOL) {
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

static void arena_unref(mem_arena *ar)
{
    if (ar && __atomic_sub_fetch(&ar->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        pthread_mutex_destroy(&ar->lock);
        free(ar->quar);
        free(ar);
    }
}

/* The arena of ctx, made (not set up) if missing, with a reference for the
 * caller. NULL if out of memory. */
static mem_arena *arena_get(CUcontext ctx)
{
    sg_ctx *cx = sg_ctx_get(ctx);
    if (!cx) return NULL;
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = cx->part[SG_CTX_PART_ARENA];
    if (!ar && !cx->dead && (ar = calloc(1, sizeof *ar))) {
        ar->refs = 1;                  /* the record's */
        ar->ctx = ctx;
        pthread_mutex_init(&ar->lock, NULL);
        if (sg_ctx_vmm_locked(cx)) ar->vmm = cx->vmm;
        else ar->state = -1;
        cx->part[SG_CTX_PART_ARENA] = ar;
    }
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cx->lock);
    sg_ctx_put(cx);
    return ar;
}

/* Sets up ar (ar->lock held). */
static void arena_setup(mem_arena *ar)
{
    /* Address space is cheap and an allocation never moves: reserve twice
     * the device's memory per reservation, so one normally suffices. */
    size_t resv = ar->vmm.total && ar->vmm.total <= SIZE_MAX / 2 ? ar->vmm.total * 2 : RESV_FALLBACK;
    sg_arena_ops ops = driver_ops;
    ops.user = ar;
    ar->state = -1;
    if (!(ar->arena = sg_arena_new(&ops, ar->vmm.gran, resv))) {
        SG_WARN_ONCE("out of memory setting up an arena: allocations go to the driver unchanged");
        return;
    }
    ar->state = 1;
}

/* Context teardown (contexts.h, step 3): the context is gone, its work and
 * events with it. Forgets its blocks, unmaps and releases its memory. */
static void arena_teardown(sg_ctx *cx)
{
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = cx->part[SG_CTX_PART_ARENA];
    cx->part[SG_CTX_PART_ARENA] = NULL;
    pthread_mutex_unlock(&cx->lock);
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
    ar->state = -2;                /* events went with the context */
    if (was == 1) {
        mapped_delta(sg_arena_mapped(ar->arena), 0);
        sg_arena_destroy(ar->arena, 0);
        ar->arena = NULL;
    }
    ar->nevents = 0;
    ar->nquar = 0;
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
    arena_unref(ar);
}

/* Trims one arena; returns the bytes given back. */
static size_t arena_trim(mem_arena *ar)
{
    size_t given = 0;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) {
        size_t before = sg_arena_mapped(ar->arena);
        given = sg_arena_trim(ar->arena);
        mapped_delta(before, sg_arena_mapped(ar->arena));
    }
    pthread_mutex_unlock(&ar->lock);
    return given;
}

static void trim_one(sg_ctx *cx, void *u)
{
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = cx->part[SG_CTX_PART_ARENA];
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cx->lock);
    if (!ar) return;
    *(size_t *)u += arena_trim(ar);
    arena_unref(ar);
}

size_t sg_mem_trim(void)
{
    size_t given = 0;
    if (!placing) return 0;
    sg_ctx_foreach(trim_one, &given);
    sg_vmm_unrelax();
    if (given) SG_DEBUG("memory pressure: gave back %zu bytes of unused placed memory", given);
    return given;
}

/* ------------------------------------------------------------- allocation */

/* Forwards an allocation; on CUDA_ERROR_OUT_OF_MEMORY gives back what the
 * arenas hold and tries once more. */
static CUresult forward_retry(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim() > 0) rc = c->forward(c->args);
    return rc;
}

static CUresult fwd_alloc(const sg_call *c)
{
    CUresult rc = forward_retry(c);
    if (rc == CUDA_SUCCESS && c->u.alloc.out) fwd_track(*c->u.alloc.out, c->u.alloc.bytes);
    return rc;
}

static CUresult fwd_free(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS) fwd_untrack(c->u.free.ptr);
    return rc;
}

static sg_arena_key key_of(CUstream s, int per_thread)
{
    sg_stream_id id = sg_stream_id_of(s, per_thread);
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
    if (ar->state == 0) arena_setup(ar);
    if (ar->state == 1) {
        before = sg_arena_mapped(ar->arena);
        f = sg_arena_alloc(ar->arena, bytes, own, key, addr, placed, rc);
        after = sg_arena_mapped(ar->arena);
    }
    int state = ar->state;
    pthread_mutex_unlock(&ar->lock);
    mapped_delta(before, after);
    return state == 1 ? f : SG_ARENA_FAIL_NOMEM + 1;
}

static CUresult mem_alloc(const sg_call *c)
{
    size_t bytes = c->u.alloc.bytes;
    CUstream s = c->u.alloc.stream;
    if (!placing || bytes == 0 || bytes > place_max || !c->u.alloc.out ||
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
        key = key_of(s, c->per_thread);
    } else if (sg_capture_active() || SG_DRIVER_CALL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS) {
        return fwd_alloc(c);
    }
    if (!ctx) return fwd_alloc(c);
    mem_arena *ar = arena_get(ctx);
    if (!ar) return fwd_alloc(c);
    int own = bytes >= own_min;
    CUdeviceptr addr = 0;
    size_t placed = 0;
    CUresult rc = CUDA_SUCCESS;
    sg_arena_fail f = place(ar, bytes, own, key, &addr, &placed, &rc);
    if (f == SG_ARENA_FAIL_CREATE && rc == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim() > 0)
        f = place(ar, bytes, own, key, &addr, &placed, &rc);
    sg_vmm_unrelax();
    if (f != SG_ARENA_OK) {
        if (f <= SG_ARENA_FAIL_NOMEM) log_growth_failure(f, rc, bytes);
        arena_unref(ar);
        return fwd_alloc(c);
    }
    sg_block *b = calloc(1, sizeof *b);
    if (b) {
        *b = (sg_block){ .base = addr, .size = bytes, .placed = placed, .owner = ar, .own = own,
                         .id = SG_MEM_ID_BASE + __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED) };
    }
    if (!b || reg_insert(b) != 0) {
        free(b);
        pthread_mutex_lock(&ar->lock);
        if (ar->state == 1) sg_arena_free(ar->arena, addr, placed, (sg_arena_key){ 0, 0 }, NULL);
        pthread_mutex_unlock(&ar->lock);
        arena_unref(ar);
        return fwd_alloc(c);
    }
    arena_unref(ar);
    *c->u.alloc.out = addr;
    live_add(bytes);
    return CUDA_SUCCESS;
}

/* An event recorded on the freeing stream (ar->ctx current or not: the
 * stream names its context); NULL if none could be had. */
static CUevent free_event(mem_arena *ar, const sg_call *c)
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
    CUresult rc = c->per_thread ? SG_DRIVER_CALL(cuEventRecord_ptsz, ev, c->u.free.stream)
                                : SG_DRIVER_CALL(cuEventRecord, ev, c->u.free.stream);
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_lock(&ar->lock);
        op_event_put(ar, ev);
        pthread_mutex_unlock(&ar->lock);
        return NULL;
    }
    return ev;
}

/* The implicit synchronization of cuMemFree: cuCtxSynchronize in ar's
 * context, in the program's capture mode. 0 done; 1 the context could not be
 * made current (nothing synchronized); -1 the driver refused (*rc). */
static int ctx_sync(mem_arena *ar, CUresult *rc)
{
    CUcontext prev;
    if (sg_vmm_ctx_enter(ar->ctx, &prev) != 0) return 1;
    *rc = SG_DRIVER_CALL(cuCtxSynchronize);
    sg_vmm_ctx_leave(ar->ctx, prev);
    return *rc == CUDA_SUCCESS ? 0 : -1;
}

/* After a successful synchronization of ar's context: the quarantined
 * ranges are free (ar->lock held). */
static void quarantine_release_locked(mem_arena *ar)
{
    for (size_t i = 0; i < ar->nquar && ar->state == 1; i++)
        sg_arena_free(ar->arena, ar->quar[i].addr, ar->quar[i].placed, (sg_arena_key){ 0, 0 }, NULL);
    ar->nquar = 0;
}

static CUresult mem_free(const sg_call *c)
{
    CUdeviceptr p = c->u.free.ptr;
    if (!placing || !maybe_ours(p)) return fwd_free(c);
    pthread_mutex_lock(&reg_lock);
    sg_block *found = reg_containing(p);
    if (found && found->base != p) found = NULL;
    mem_arena *ar = found ? found->owner : NULL;
    int ours = found || reg_in_spans(p);
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&reg_lock);
    if (!found) return ours ? CUDA_ERROR_INVALID_VALUE : fwd_free(c);

    CUevent ev = NULL;
    sg_arena_key key = { 0, 0 };
    int synced = 0;
    CUresult rc = CUDA_SUCCESS;
    if (!c->u.free.async) {
        int r = ctx_sync(ar, &rc);
        if (r < 0) {
            arena_unref(ar);
            return rc;         /* as the driver's cuMemFree: nothing freed */
        }
        synced = r == 0;
    } else {
        if (sg_capture_active() && sg_capture_stream(c->u.free.stream, c->per_thread)) {
            arena_unref(ar);
            return c->forward(c->args);   /* the driver decides; the block stays */
        }
        key = key_of(c->u.free.stream, c->per_thread);
        ev = free_event(ar, c);
    }
    sg_block *b = reg_take(p);
    if (!b) {                      /* another thread freed it meanwhile */
        if (ev) {
            pthread_mutex_lock(&ar->lock);
            op_event_put(ar, ev);
            pthread_mutex_unlock(&ar->lock);
        }
        sg_vmm_unrelax();
        arena_unref(ar);
        return CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) {
        if (synced) quarantine_release_locked(ar);
        int quarantine = !ev && !synced;
        if (quarantine) {
            if (sg_grow((void **)&ar->quar, &ar->capquar, ar->nquar + 1, sizeof *ar->quar) == 0)
                ar->quar[ar->nquar++] = (struct qrange){ b->base, b->placed };
            /* else: the range stays unusable until the context goes */
        } else if (sg_arena_free(ar->arena, b->base, b->placed, key, ev) != 0) {
            SG_WARN("out of memory: %zu bytes at 0x%llx are not reused", b->placed,
                    (unsigned long long)b->base);
        }
    }
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
    live_sub(b->size);
    free(b);
    arena_unref(ar);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- queries */

static void put_u64(void *d, unsigned long long v) { memcpy(d, &v, sizeof v); }
static void put_int(void *d, int v) { memcpy(d, &v, sizeof v); }

/* Writes what a cuMemAlloc block would report for attribute a, for the
 * attributes whose driver answer would reveal the arena (the reservation,
 * the shared chunk, its id, VMM handle types, no context); 0 if a is not one
 * of them (the driver's answer stands: memory type, device, access...). */
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
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        put_u64(data, CU_MEM_HANDLE_TYPE_NONE);
        return 1;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        put_int(data, 1);          /* what cuMemAlloc memory says (README: legacy IPC) */
        return 1;
    default:
        return 0;
    }
}

static CUresult mem_addr_range(const sg_call *c)
{
    sg_alloc_info b;
    int r = placing ? lookup(c->u.range.ptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) return CUDA_ERROR_NOT_FOUND;
    if (c->u.range.base) *c->u.range.base = b.base;
    if (c->u.range.size) *c->u.range.size = b.size;
    return CUDA_SUCCESS;
}

static CUresult mem_ptr_attr(const sg_call *c)
{
    sg_alloc_info b;
    int r = placing && c->u.attr.data ? lookup(c->u.attr.ptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) return CUDA_ERROR_INVALID_VALUE;   /* as for unallocated memory */
    return attr_override(&b, c->u.attr.attr, c->u.attr.data) ? CUDA_SUCCESS : c->forward(c->args);
}

static CUresult mem_ptr_attrs(const sg_call *c)
{
    sg_alloc_info b;
    int r = placing ? lookup(c->u.attrs.ptr, &b) : -1;
    if (r < 0) return c->forward(c->args);
    if (r == 0) { /* freed placed memory: what the driver says of an unallocated pointer */
        if (!sg_drv.cuPointerGetAttributes) return CUDA_ERROR_INVALID_VALUE;
        return SG_DRIVER_CALL(cuPointerGetAttributes, c->u.attrs.n, c->u.attrs.attrs,
                              c->u.attrs.data, 0);
    }
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS) return rc;
    for (unsigned i = 0; i < c->u.attrs.n; i++)
        if (c->u.attrs.data[i]) attr_override(&b, c->u.attrs.attrs[i], c->u.attrs.data[i]);
    return CUDA_SUCCESS;
}

/* Legacy IPC cannot export VMM memory: the driver's own answer for it is
 * CUDA_ERROR_INVALID_VALUE. Say once per allocation which one and how to
 * keep such allocations away from the library. */
static CUresult mem_ipc(const sg_call *c)
{
    if (!placing || !maybe_ours(c->u.ipc.ptr)) return c->forward(c->args);
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(c->u.ipc.ptr);
    int ours = b || reg_in_spans(c->u.ipc.ptr);
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

/* cuMemRetainAllocationHandle and cuMemGetAccess answer for VMM mappings
 * only: on cuMemAlloc memory the driver says CUDA_ERROR_INVALID_VALUE, and so
 * does the library for placed memory (its chunks are not the program's). */
static CUresult mem_vmm_query(const sg_call *c, CUdeviceptr p)
{
    sg_alloc_info b;
    if (!placing || lookup(p, &b) < 0) return c->forward(c->args);
    return CUDA_ERROR_INVALID_VALUE;
}

static void free_of_device(sg_ctx *cx, void *u)
{
    struct { CUdevice dev; size_t bytes; } *q = u;
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = cx->vmm_state == 1 && cx->vmm.dev == q->dev ? cx->part[SG_CTX_PART_ARENA] : NULL;
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cx->lock);
    if (!ar) return;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) q->bytes += sg_arena_mapped_free(ar->arena);
    pthread_mutex_unlock(&ar->lock);
    arena_unref(ar);
}

/* cuMemGetInfo: the driver's figure plus the placed memory the program has
 * freed (mapped, unused), which the driver would count as free. */
static CUresult mem_info(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS || !placing || !c->u.info.free) return rc;
    struct { CUdevice dev; size_t bytes; } q = { 0, 0 };
    if (SG_DRIVER_CALL(cuCtxGetDevice, &q.dev) != CUDA_SUCCESS) return rc;
    sg_ctx_foreach(free_of_device, &q);
    size_t total = c->u.info.total ? *c->u.info.total : SIZE_MAX;
    size_t f = *c->u.info.free + q.bytes;
    *c->u.info.free = f < *c->u.info.free || f > total ? total : f;
    return rc;
}

/* ----------------------------------------------------------- range checks */

/* The bytes a 2D / 3D copy operand touches from its base pointer. */
static size_t extent3d(size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t w,
                       size_t h, size_t d)
{
    if (!w || !h || !d) return 0;
    return ((z + d - 1) * height + (y + h - 1)) * pitch + x + w;
}

static int device_operand(CUmemorytype t, CUdeviceptr p)
{
    return t == CU_MEMORYTYPE_DEVICE || (t == CU_MEMORYTYPE_UNIFIED && maybe_ours(p));
}

static CUresult check_copy3d(const CUDA_MEMCPY3D *p)
{
    CUresult rc = CUDA_SUCCESS;
    if (device_operand(p->srcMemoryType, p->srcDevice))
        rc = sg_mem_check_range(p->srcDevice, extent3d(p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch,
                                                       p->srcHeight, p->WidthInBytes, p->Height,
                                                       p->Depth));
    if (rc == CUDA_SUCCESS && device_operand(p->dstMemoryType, p->dstDevice))
        rc = sg_mem_check_range(p->dstDevice, extent3d(p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch,
                                                       p->dstHeight, p->WidthInBytes, p->Height,
                                                       p->Depth));
    return rc;
}

static CUresult check_memset(CUdeviceptr dst, size_t pitch, size_t es, size_t w, size_t h)
{
    return sg_mem_check_range(dst, h ? (h - 1) * pitch + w * es : 0);
}

/* CUDA_SUCCESS, or the error the driver gives for a range outside its
 * allocation. */
static CUresult check_op(const sg_call *c)
{
    const void *d = c->u.memop.desc;
    CUresult rc = CUDA_SUCCESS;
    switch (c->u.memop.kind) {
    case SG_OP_RANGES:
        if (c->u.memop.dst) rc = sg_mem_check_range(c->u.memop.dst, c->u.memop.dst_bytes);
        if (rc == CUDA_SUCCESS && c->u.memop.src)
            rc = sg_mem_check_range(c->u.memop.src, c->u.memop.src_bytes);
        return rc;
    case SG_OP_COPY2D: {
        const CUDA_MEMCPY2D *p = d;
        if (!p) return CUDA_SUCCESS;
        if (device_operand(p->srcMemoryType, p->srcDevice))
            rc = sg_mem_check_range(p->srcDevice, extent3d(p->srcXInBytes, p->srcY, 0, p->srcPitch,
                                                           0, p->WidthInBytes, p->Height, 1));
        if (rc == CUDA_SUCCESS && device_operand(p->dstMemoryType, p->dstDevice))
            rc = sg_mem_check_range(p->dstDevice, extent3d(p->dstXInBytes, p->dstY, 0, p->dstPitch,
                                                           0, p->WidthInBytes, p->Height, 1));
        return rc;
    }
    case SG_OP_COPY3D:
        return d ? check_copy3d(d) : CUDA_SUCCESS;
    case SG_OP_MEMSET_NODE: {
        const CUDA_MEMSET_NODE_PARAMS *m = d;
        return m ? check_memset(m->dst, m->pitch, m->elementSize, m->width, m->height)
                 : CUDA_SUCCESS;
    }
    case SG_OP_NODE_PARAMS: {
        const CUgraphNodeParams *n = d;
        if (!n) return CUDA_SUCCESS;
        if (n->type == CU_GRAPH_NODE_TYPE_MEMSET)
            return check_memset(n->memset.dst, n->memset.pitch, n->memset.elementSize,
                                n->memset.width, n->memset.height);
        if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY) return check_copy3d(&n->memcpy.copyParams);
        return CUDA_SUCCESS;
    }
    }
    return CUDA_SUCCESS;
}

CUresult sg_mem_check_memcpy(const CUDA_MEMCPY3D *p) { return p ? check_copy3d(p) : CUDA_SUCCESS; }

CUresult sg_mem_check_memset(const CUDA_MEMSET_NODE_PARAMS *m)
{
    return m ? check_memset(m->dst, m->pitch, m->elementSize, m->width, m->height) : CUDA_SUCCESS;
}

static CUresult mem_op(const sg_call *c)
{
    if (placing) {
        CUresult rc = check_op(c);
        if (rc != CUDA_SUCCESS) return rc;
    }
    return c->forward(c->args);
}

/* A destroyed stream's handle may come back for another stream: its pending
 * frees wait for their events only. */
static void rekey_one(sg_ctx *cx, void *u)
{
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = cx->part[SG_CTX_PART_ARENA];
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cx->lock);
    if (!ar) return;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) sg_arena_rekey(ar->arena, *(sg_arena_key *)u);
    pthread_mutex_unlock(&ar->lock);
    arena_unref(ar);
}

static CUresult mem_stream_destroy(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc == CUDA_SUCCESS && placing && c->u.stream.stream) {
        sg_arena_key k = key_of(c->u.stream.stream, 0);
        sg_ctx_foreach(rekey_one, &k);
    }
    return rc;
}

/* ---------------------------------------------------------------- entry */

void sg_mem_init(const sg_caps *caps)
{
    placing = caps->place;
    place_max = caps->place_max_bytes;
    own_min = caps->own_handles_min;
    sg_ctx_on_teardown(SG_CTX_PART_ARENA, arena_teardown);
}

CUresult sg_mem_call(const sg_call *c)
{
    switch (c->kind) {
    case SG_CALL_ALLOC:
        return mem_alloc(c);
    case SG_CALL_DEV_ALLOC:
        return placing ? forward_retry(c) : c->forward(c->args);
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
    case SG_CALL_RETAIN_HANDLE:
        return mem_vmm_query(c, (CUdeviceptr)(uintptr_t)c->u.retain.addr);
    case SG_CALL_MEM_ACCESS:
        return mem_vmm_query(c, c->u.access.ptr);
    case SG_CALL_MEM_INFO:
        return mem_info(c);
    case SG_CALL_MEMOP:
        return mem_op(c);
    case SG_CALL_STREAM_DESTROY:
        return mem_stream_destroy(c);
    default:
        return c->forward(c->args);
    }
}

size_t sg_mem_block_handles(CUdeviceptr base, sg_mem_handle *out, size_t max)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(base);
    mem_arena *ar = b && b->base == base ? b->owner : NULL;
    size_t placed = ar ? b->placed : 0;
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&reg_lock);
    if (!ar) return 0;
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
    arena_unref(ar);
    return n;
}

void sg_mem_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&reg_lock);
    else pthread_mutex_unlock(&reg_lock);
}

void sg_mem_reset(void)
{
    sg_ctx_reset();                /* tears every arena down */
    pthread_mutex_lock(&reg_lock);
    sg_fwd *e, *tmp;
    HASH_ITER(hh, fwd_live, e, tmp) {
        HASH_DEL(fwd_live, e);
        free(e);
    }
    for (size_t i = 0; i < nblocks; i++) free(blocks[i]);
    nblocks = 0;
    view_unref_locked(view_cur);
    view_cur = NULL;
    view_dirty = 1;
    nspans = 0;
    __atomic_store_n(&span_lo, UINTPTR_MAX, __ATOMIC_RELAXED);
    __atomic_store_n(&span_hi, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&reg_lock);
    __atomic_store_n(&live_now, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mapped_now, 0, __ATOMIC_RELAXED);
}
