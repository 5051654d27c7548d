/*
 * core/mem_arena.c: one arena per context (mem_internal.h): made at the
 * context's first placed allocation, set up over the driver's VMM calls
 * (the arena.c operations below), trimmed under memory pressure, torn down
 * with the context (contexts.h, step 3), and the quarantine of ranges freed
 * without a synchronization the library could count on (released by the
 * next free of the context that synchronized: memory.c).
 *
 * Locks: ar->lock, one per arena, guards its arena.c state, event pool,
 * quarantine and state; contexts.c's record lock is taken before it (the
 * arena part pointer), the registry's lock after it. VMM and event calls run
 * under ar->lock (they do not wait for the GPU). marks_lock guards the set
 * of live completion marks; it is a leaf (taken under ar->lock or by the
 * driver's host-function thread, nothing taken under it).
 */
#include "mem_internal.h"

static int mark_oom;               /* set by uthash when a mark cannot be added (marks_lock held) */
#define uthash_nonfatal_oom(elt) (mark_oom = 1)
#include "hash.h"

#include "arena.h"
#include "capture.h"
#include "contexts.h"
#include "driver.h"
#include "ipc.h"
#include "log.h"
#include "stats.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define RESV_FALLBACK ((size_t)64 << 30)

/* ----------------------------------------------------- arena ops (driver) */

static CUresult op_reserve(void *u, size_t size, size_t align, CUdeviceptr *base)
{
    (void)u;
    CUresult rc = sg_vmm_reserve(size, align, base);
    if (rc == CUDA_SUCCESS) sg_mem_span_add(*base, size);
    return rc;
}

static CUresult op_unreserve(void *u, CUdeviceptr base, size_t size)
{
    (void)u;
    sg_mem_span_del(base);
    return sg_vmm_unreserve(base, size);
}

static void headroom_grown(CUdevice dev, size_t bytes);

static CUresult op_create(void *u, size_t size, CUmemGenericAllocationHandle *h)
{
    mem_arena *ar = u;
    CUresult rc = sg_vmm_create(&ar->vmm, size, h);
    if (rc == CUDA_SUCCESS) headroom_grown(ar->vmm.dev, size);
    return rc;
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

/* Completion marks (sg_marena_mark_queue): a heap flag set by a host
 * function on the freeing stream, standing where an event would. The live
 * ones are in a set (marks, guarded by marks_lock; nmarks lets the common
 * case, none, skip the lock): a live mark and a live driver event are two
 * live objects, so no handle is ever taken for a mark. Two references: the
 * host function's and the arena's (event_put). */
typedef struct free_mark {
    void *key;                     /* itself */
    int done, refs;                /* atomics */
    UT_hash_handle hh;
} free_mark;

static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;
static free_mark *marks;
static int nmarks;                 /* atomic */

static free_mark *mark_of(void *ev)
{
    free_mark *m = NULL;
    if (!__atomic_load_n(&nmarks, __ATOMIC_ACQUIRE)) return NULL;
    pthread_mutex_lock(&marks_lock);
    HASH_FIND_PTR(marks, &ev, m);
    pthread_mutex_unlock(&marks_lock);
    return m;
}

static void mark_unref(free_mark *m)
{
    if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_lock(&marks_lock);
    HASH_DEL(marks, m);
    __atomic_sub_fetch(&nmarks, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&marks_lock);
    free(m);
}

void sg_marena_marks_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&marks_lock);
    else pthread_mutex_unlock(&marks_lock);
}

static void CUDA_CB mark_run(void *p)
{
    free_mark *m = p;
    __atomic_store_n(&m->done, 1, __ATOMIC_RELEASE);
    mark_unref(m);
}

void *sg_marena_mark_queue(CUstream s, int per_thread)
{
    if (per_thread ? !sg_drv.cuLaunchHostFunc_ptsz : !sg_drv.cuLaunchHostFunc) return NULL;
    free_mark *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->key = m;
    m->refs = 2;
    pthread_mutex_lock(&marks_lock);
    mark_oom = 0;
    HASH_ADD_PTR(marks, key, m);
    int added = !mark_oom;
    if (added) __atomic_add_fetch(&nmarks, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&marks_lock);
    if (!added) {
        free(m);
        return NULL;
    }
    sg_vmm_relax();
    CUresult rc = per_thread ? SG_DRIVER_CALL(cuLaunchHostFunc_ptsz, s, mark_run, m)
                             : SG_DRIVER_CALL(cuLaunchHostFunc, s, mark_run, m);
    if (rc != CUDA_SUCCESS) {
        mark_unref(m);             /* both references: the host function's never ran */
        mark_unref(m);
        return NULL;
    }
    return m;
}

/* An event that cannot be queried (an error other than NOT_READY) is taken
 * as not complete: the memory stays out of use rather than risk reuse. */
static int op_event_done(void *u, void *ev)
{
    mem_arena *ar = u;
    free_mark *m = mark_of(ev);
    if (m) return __atomic_load_n(&m->done, __ATOMIC_ACQUIRE);
    /* An orphan's events are its dead context's, recorded on that context's
     * streams, whose work ended with it: complete (and their handles may
     * name new events now). */
    if (__atomic_load_n(&ar->orphan, __ATOMIC_ACQUIRE)) return 1;
    sg_vmm_relax();
    return SG_DRIVER_CALL(cuEventQuery, (CUevent)ev) == CUDA_SUCCESS;
}

/* Back to the pool (ar->lock held); after the context is gone the event
 * went with it. */
void sg_marena_event_put(void *u, void *ev)
{
    mem_arena *ar = u;
    free_mark *m = mark_of(ev);
    if (m) {
        mark_unref(m);
        return;
    }
    if (ar->state == -2) return;
    if (ar->nevents < EVENT_POOL) {
        ar->events[ar->nevents++] = (CUevent)ev;
    } else {
        sg_vmm_relax();
        SG_DRIVER_CALL(cuEventDestroy_v2, (CUevent)ev);
    }
}

/* The driver's free memory on ar's device (cuMemGetInfo in ar's context:
 * allowed in every capture mode); 0, or -1 if it cannot say. */
static int device_free(mem_arena *ar, size_t *fr)
{
    CUcontext prev;
    size_t total = 0;
    if (!sg_drv.cuMemGetInfo_v2) return -1;
    if (sg_vmm_ctx_enter(ar->ctx, &prev) != 0) return -1;
    CUresult rc = SG_DRIVER_CALL(cuMemGetInfo_v2, fr, &total);
    sg_vmm_ctx_leave(ar->ctx, prev);
    return rc == CUDA_SUCCESS ? 0 : -1;
}

/* Whether ar's device has `bytes` free; 1 if the driver cannot say (the
 * chunks' own creation then decides). */
static int op_room(void *u, size_t bytes)
{
    size_t fr = 0;
    sg_vmm_relax();                /* (as the chunks' creation that follows) */
    return device_free(u, &fr) != 0 || bytes <= fr;
}

/* A claim's wait (sg_marena_place_claiming): the allocating stream waits for
 * the freeing stream's event. A completion mark is no event: refused. */
typedef struct claim_wait {
    CUstream s;
    int per_thread;
} claim_wait;

static int op_claim_wait(void *arg, void *ev)
{
    const claim_wait *w = arg;
    if (mark_of(ev)) return -1;
    sg_vmm_relax();
    CUresult rc = w->per_thread ? SG_DRIVER_CALL(cuStreamWaitEvent_ptsz, w->s, (CUevent)ev, 0)
                                : SG_DRIVER_CALL(cuStreamWaitEvent, w->s, (CUevent)ev, 0);
    return rc == CUDA_SUCCESS ? 0 : -1;
}

sg_arena_fail sg_marena_place_claiming(mem_arena *ar, size_t bytes, int own, sg_arena_key key,
                                       CUstream s, int per_thread, CUdeviceptr *addr,
                                       size_t *placed)
{
    claim_wait w = { s, per_thread };
    sg_arena_fail f = SG_ARENA_FAIL_NOMEM;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1)
        f = sg_arena_alloc_claiming(ar->arena, bytes, own, key, op_claim_wait, &w, addr, placed);
    pthread_mutex_unlock(&ar->lock);
    return f;
}

static const sg_arena_ops driver_ops = {
    .reserve = op_reserve, .unreserve = op_unreserve, .create = op_create,
    .release = op_release, .map = op_map, .set_access = op_set_access, .unmap = op_unmap,
    .event_done = op_event_done, .event_put = sg_marena_event_put, .room = op_room,
};

/* ------------------------------------------------------------------ arenas */

void sg_marena_unref(mem_arena *ar)
{
    if (ar && __atomic_sub_fetch(&ar->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        pthread_mutex_destroy(&ar->lock);
        free(ar->quar);
        free(ar);
    }
}

void sg_marena_hold(mem_arena *ar) { __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED); }

/* The arena of ctx, made (not set up) if missing, with a reference for the
 * caller. NULL if out of memory. */
mem_arena *sg_marena_get(CUcontext ctx)
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
void sg_marena_setup_locked(mem_arena *ar)
{
    /* Address space is cheap and an allocation never moves: reserve twice
     * the device's memory per reservation, so one normally suffices. */
    size_t resv = ar->vmm.total && ar->vmm.total <= SIZE_MAX / 2 ? ar->vmm.total * 2 : RESV_FALLBACK;
    sg_arena_ops ops = driver_ops;
    ops.user = ar;
    ar->state = -1;
    if (!(ar->arena = sg_arena_new(&ops, ar->vmm.gran, ar->vmm.align, resv))) {
        SG_WARN_ONCE("out of memory setting up an arena: allocations go to the driver unchanged");
        return;
    }
    ar->state = 1;
}

/* Unmaps and releases ar's memory (ar->lock held): its context's events
 * went with the context. */
static void arena_end_locked(mem_arena *ar)
{
    int was = ar->state;
    ar->state = -2;                /* event_put then drops marks only */
    if (was == 1) {
        sg_mem_mapped_delta(sg_arena_mapped(ar->arena), 0);
        sg_arena_destroy(ar->arena, 1);
        ar->arena = NULL;
    }
    ar->nevents = 0;
    ar->nquar = 0;
}

/* An orphan ends when no block and no stream-ordered free is left in it: a
 * free on a live stream (another context's) may still have work queued
 * before it that reads the block, and unmapping under it faults. */
int sg_marena_orphan_end_locked(mem_arena *ar)
{
    if (!__atomic_load_n(&ar->orphan, __ATOMIC_ACQUIRE) || ar->state == -2 || sg_mem_reg_owned(ar) ||
        (ar->state == 1 && sg_arena_pending(ar->arena) > 0))
        return 0;
    arena_end_locked(ar);
    sg_mem_reg_orphan_del(ar);
    return 1;
}

size_t sg_marena_orphan_trim_locked(mem_arena *ar)
{
    if (ar->state != 1) return 0;
    size_t before = sg_arena_mapped(ar->arena);
    size_t given = sg_arena_trim(ar->arena, SIZE_MAX);
    sg_mem_mapped_delta(before, sg_arena_mapped(ar->arena));
    SG_TOTAL_ADD(bytes_given_back, given);
    return given;
}

/* Context teardown (contexts.h, step 3): the context is gone, its work and
 * events with it. Forgets its blocks, unmaps and releases its memory; but
 * cuCtxDestroy "will not destroy memory allocations by ... cuMemAllocAsync"
 * (cuda.h): while such blocks live, or frees of them on another context's
 * stream are still pending (completion marks: work queued there before the
 * free may still read the block), the arena stays, orphaned (no new block:
 * the context record no longer names it), for their frees, and ends once
 * none is left (memory.c, or memory pressure). It keeps no chunk nothing
 * uses (it never places again). Its event pool went with the context; its
 * pending events are complete (op_event_done). */
static void arena_teardown(sg_ctx *cx)
{
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = cx->part[SG_CTX_PART_ARENA];
    cx->part[SG_CTX_PART_ARENA] = NULL;
    pthread_mutex_unlock(&cx->lock);
    size_t kept = 0;
    if (ar) sg_mem_live_sub(sg_mem_reg_drop_owner(ar, 1, &kept));
    sg_ipc_ctx_gone(cx->ctx);      /* after its blocks left the registry, before its chunks go */
    if (!ar) return;
    pthread_mutex_lock(&ar->lock);
    int ended = 1;
    if (ar->state == 1) __atomic_store_n(&ar->orphan, 1, __ATOMIC_RELEASE);   /* events done */
    if (ar->state == 1 && (kept || sg_arena_pending(ar->arena) > 0)) {
        ar->nevents = 0;
        ar->nquar = 0;
        sg_marena_orphan_trim_locked(ar);
        /* not listed (out of memory): never trimmed, ended by a last free */
        (void)sg_mem_reg_orphan_add(ar);
        ended = sg_marena_orphan_end_locked(ar);    /* freed meanwhile */
    } else {
        if (kept) sg_mem_live_sub(sg_mem_reg_drop_owner(ar, 0, NULL));
        arena_end_locked(ar);
    }
    pthread_mutex_unlock(&ar->lock);
    sg_vmm_unrelax();
    if (ended) sg_marena_unref(ar);   /* the record's reference; an orphan keeps it */
}

/* Ends every orphan, pending frees or not (reset). */
void sg_marena_orphans_drop(void)
{
    mem_arena *ar;
    while (sg_mem_reg_orphans(&ar, 1) > 0) {
        sg_mem_live_sub(sg_mem_reg_drop_owner(ar, 0, NULL));
        pthread_mutex_lock(&ar->lock);
        int ended = ar->state != -2;
        arena_end_locked(ar);
        sg_mem_reg_orphan_del(ar);
        pthread_mutex_unlock(&ar->lock);
        if (ended) sg_marena_unref(ar);
        sg_marena_unref(ar);       /* sg_mem_reg_orphans' hold */
    }
    sg_vmm_unrelax();
}

/* Calls fn(ar, u) for every listed orphan, ar->lock held, then ends it if
 * nothing is left in it. */
static void orphans_each(void (*fn)(mem_arena *ar, void *u), void *u)
{
    size_t n = sg_mem_reg_orphans(NULL, 0);
    mem_arena **v = n ? malloc(n * sizeof *v) : NULL;
    if (!v) return;
    size_t now = sg_mem_reg_orphans(v, n);   /* held: min(now, n) of them */
    if (now < n) n = now;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&v[i]->lock);
        fn(v[i], u);
        int ended = sg_marena_orphan_end_locked(v[i]);
        pthread_mutex_unlock(&v[i]->lock);
        if (ended) sg_marena_unref(v[i]);   /* the context record's reference */
        sg_marena_unref(v[i]);
    }
    free(v);
}

static void orphan_trim(mem_arena *ar, void *u)
{
    size_t mapped = ar->state == 1 ? sg_arena_mapped(ar->arena) : 0;
    size_t given = sg_marena_orphan_trim_locked(ar);
    /* ended below when nothing is left: its remaining chunks count too */
    if (ar->state == 1 && !sg_mem_reg_owned(ar) && sg_arena_pending(ar->arena) == 0) given = mapped;
    *(size_t *)u += given;
}

/* Trims one arena (at least at_most bytes if it has them); returns the
 * bytes given back. */
static size_t arena_trim(mem_arena *ar, size_t at_most)
{
    size_t given = 0;
    pthread_mutex_lock(&ar->lock);
    if (ar->state == 1) {
        size_t before = sg_arena_mapped(ar->arena);
        given = sg_arena_trim(ar->arena, at_most);
        sg_mem_mapped_delta(before, sg_arena_mapped(ar->arena));
    }
    pthread_mutex_unlock(&ar->lock);
    SG_TOTAL_ADD(bytes_given_back, given);
    return given;
}

/* What a trim asks: the arenas of dev (-1: every device), until budget bytes
 * went back (SIZE_MAX: all they can give); given, what did. */
typedef struct trim_req {
    CUdevice dev;
    size_t budget, given;
} trim_req;

static void trim_one(sg_ctx *cx, void *u)
{
    trim_req *q = u;
    if (q->given >= q->budget) return;
    pthread_mutex_lock(&cx->lock);
    mem_arena *ar = q->dev < 0 || (cx->vmm_state == 1 && cx->vmm.dev == q->dev) ? cx->part[SG_CTX_PART_ARENA]
                                                                                 : NULL;
    if (ar) __atomic_add_fetch(&ar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cx->lock);
    if (!ar) return;
    q->given += arena_trim(ar, q->budget - q->given);
    sg_marena_unref(ar);
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
    if (ar->state == 1) q->bytes += sg_arena_mapped_free(ar->arena);   /* (event queries) */
    pthread_mutex_unlock(&ar->lock);
    sg_marena_unref(ar);
}

static void orphan_free_of_device(mem_arena *ar, void *u)
{
    struct { CUdevice dev; size_t bytes; } *q = u;
    if (ar->state != 1 || ar->vmm.dev != q->dev) return;
    q->bytes += sg_arena_mapped_free(ar->arena);
}

size_t sg_mem_mapped_free_on(CUdevice dev)
{
    struct { CUdevice dev; size_t bytes; } q = { dev, 0 };
    sg_ctx_foreach(free_of_device, &q);
    orphans_each(orphan_free_of_device, &q);
    sg_vmm_unrelax();              /* the event queries ran in relaxed mode */
    return q.bytes;
}

size_t (*sg_mem_trim_hook)(void);

size_t sg_mem_trim(void)
{
    if (!sg_mem_placing) return 0;
    trim_req q = { -1, SIZE_MAX, 0 };
    sg_ctx_foreach(trim_one, &q);
    size_t given = q.given;
    orphans_each(orphan_trim, &given);
    if (sg_mem_trim_hook) given += sg_mem_trim_hook();
    sg_vmm_unrelax();
    if (given) SG_DEBUG("memory pressure: gave back %zu bytes of unused placed memory", given);
    return given;
}

/* A call refused for want of memory is made once more even when this
 * trim gave nothing back: another thread's trim, which this one waited
 * behind, may have given back what the call needed (round 25: four threads'
 * first launches of kernels, on a squeezed device, got
 * CUDA_ERROR_OUT_OF_MEMORY at once; the first trim gave back every chunk,
 * the others found none and returned the error). A call that failed had no
 * effect: the retry costs one driver call. */
int sg_mem_trim_retry(void)
{
    if (!sg_mem_placing) return 0;
    sg_mem_trim();
    return 1;
}

CUresult sg_mem_retry(const sg_call *c, CUresult rc)
{
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim_retry()) rc = c->forward(c->args);
    return rc;
}

/* After a successful synchronization of ar's context: the quarantined
 * ranges are free (ar->lock held). */
void sg_marena_quarantine_release_locked(mem_arena *ar)
{
    for (size_t i = 0; i < ar->nquar && ar->state == 1; i++)
        sg_arena_free(ar->arena, ar->quar[i].addr, ar->quar[i].placed, (sg_arena_key){ 0, 0 }, NULL);
    ar->nquar = 0;
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
    sg_marena_unref(ar);
}

void sg_marena_rekey_all(sg_arena_key key) { sg_ctx_foreach(rekey_one, &key); }

/* ------------------------------------------------------------- headroom */

/* Freed placed memory stays mapped for the next blocks, but the driver may
 * need device memory where no call of the program tells the library so: a
 * kernel's code loaded at its first launch (lazy loading), a kernel's local
 * memory grown at its launch (an uncaptured launch goes straight to the
 * driver: interpose/hooks.c), another process on the device. So after a
 * placed free the library keeps the device's free memory (the driver's
 * figure, which does not count the arenas' unused chunks) at the headroom
 * (STABLEGRAPH_HEADROOM; by default a sixteenth of the device's memory, at
 * most 256 MiB) or above: below it, the device's arenas give back unused
 * chunks, the highest first, until it is restored or none is left. The
 * driver is asked (cuMemGetInfo, in the arena's context) at the device's
 * first free, then at every 64th free while at least 4 headrooms were free,
 * every 8th above 2, every one below: a device with room costs one query
 * per 64 frees. What was free when last asked counts less the chunks the
 * arenas created since (round 25: one free with room, then 50 blocks of 4
 * MiB allocated and freed left the device short for 50 frees, none of which
 * asked). State per device, in atomics: a race asks once more or once
 * less. */
static size_t headroom_cfg;        /* STABLEGRAPH_HEADROOM, SG_HEADROOM_AUTO, or 0: off */
static struct {
    size_t want;                   /* the device's headroom; 0: not known yet */
    size_t last_free;              /* the driver's free memory when last asked (and trimmed) */
    int known;                     /* last_free is set */
    unsigned long frees;           /* frees since then */
    size_t grown;                  /* bytes of chunks created since then */
} room[SG_VMM_MAX_DEVICES];

static void headroom_grown(CUdevice dev, size_t bytes)
{
    if (dev >= 0 && dev < SG_VMM_MAX_DEVICES) __atomic_add_fetch(&room[dev].grown, bytes, __ATOMIC_RELAXED);
}

static size_t headroom_of(CUdevice dev)
{
    size_t want = __atomic_load_n(&room[dev].want, __ATOMIC_RELAXED);
    if (want) return want;
    want = headroom_cfg;
    if (want == SG_HEADROOM_AUTO) {
        size_t total = 0;
        if (!sg_drv.cuDeviceTotalMem_v2 || SG_DRIVER_CALL(cuDeviceTotalMem_v2, &total, dev) != CUDA_SUCCESS)
            return 0;
        want = total / 16 < SG_HEADROOM_AUTO_MAX ? total / 16 : SG_HEADROOM_AUTO_MAX;
    }
    __atomic_store_n(&room[dev].want, want, __ATOMIC_RELAXED);
    return want;
}

void sg_marena_keep_headroom(mem_arena *ar)
{
    CUdevice dev = ar->vmm.dev;
    if (!headroom_cfg || dev < 0 || dev >= SG_VMM_MAX_DEVICES || __atomic_load_n(&ar->orphan, __ATOMIC_ACQUIRE))
        return;
    size_t want = headroom_of(dev);
    if (!want) return;
    unsigned long n = __atomic_add_fetch(&room[dev].frees, 1, __ATOMIC_RELAXED);
    size_t last = __atomic_load_n(&room[dev].last_free, __ATOMIC_RELAXED);
    size_t grown = __atomic_load_n(&room[dev].grown, __ATOMIC_RELAXED);
    last = last > grown ? last - grown : 0;
    unsigned long every = !__atomic_load_n(&room[dev].known, __ATOMIC_ACQUIRE) ? 1
                          : last / 4 >= want                                 ? 64
                          : last / 2 >= want                                 ? 8
                                                                             : 1;
    if (n < every) return;
    __atomic_store_n(&room[dev].frees, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&room[dev].grown, 0, __ATOMIC_RELAXED);   /* (before asking: a race counts twice) */
    size_t fr = 0;
    int known = device_free(ar, &fr) == 0;
    if (known && fr < want) {
        trim_req q = { dev, want - fr, 0 };
        sg_ctx_foreach(trim_one, &q);
        if (q.given) {
            SG_TOTAL_ADD(headroom_trims, 1);
            SG_DEBUG("headroom: device %d had %zu bytes free (headroom %zu): gave back %zu bytes of unused "
                     "placed memory", (int)dev, fr, want, q.given);
        }
        fr += q.given;
    }
    sg_vmm_unrelax();
    if (!known) return;
    __atomic_store_n(&room[dev].last_free, fr, __ATOMIC_RELAXED);
    __atomic_store_n(&room[dev].known, 1, __ATOMIC_RELEASE);
}

void sg_marena_init(size_t headroom)
{
    headroom_cfg = headroom;
    memset(room, 0, sizeof room);
    sg_ctx_on_teardown(SG_CTX_PART_ARENA, arena_teardown);
}
