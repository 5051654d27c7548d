/*
 * core/slots.c: stable slots (see slots.h for the contract): generations,
 * their timelines, their life and the context teardown. Mapping one slot
 * and the address ranges are slot_map.c's.
 *
 * Layout. Per context (contexts.c's record, part SLOTS) the library
 * reserves address space (reservations of sg_slots_set_reservation_size
 * bytes, more added when one is full) and carves one contiguous range per
 * generation out of it, first fit, returned when the generation goes.
 * Inside a generation's range slot i starts at the sum of the sizes of slots
 * 0..i-1, each rounded up to the granularity, so the layout is deterministic.
 *
 * Timeline. Each generation keeps up to SG_SLOT_TIMELINES (stream, event)
 * entries (the stream as streams.h names it: per-thread default streams of
 * different threads, or of different contexts, differ, for good); sg_slot_gen_launched records the
 * stream's event after each launch. Idle = every entry's event seen complete
 * (cuEventQuery, after which the entry costs nothing until the next record)
 * and no launch whose record failed. The library never waits: it binds
 * without waiting (SG_SLOTS_BUSY) and retires generations
 * (sg_slot_gen_retire: unmapped once idle, checked at the context's next
 * slot operation). Only sg_slot_gen_bind(wait = 1) and sg_slot_gen_destroy
 * wait (one busy event at a time, with no lock held; a failed record falls
 * back to cuCtxSynchronize of the context): for callers outside any hook.
 *
 * Memory pressure (memory.h's sg_mem_trim_hook): a slot's mapping holds
 * the physical memory of the block it shows, also after the program freed
 * it; the idle generations' slots that show freed blocks are emptied then.
 *
 * Every VMM and event call runs in relaxed capture mode (vmm.h); the VMM
 * ones are counted and timed (slot_map.c).
 *
 * Locks, in the order they may be taken:
 *   ctxs_lock   the list of dead generations (their context was torn down)
 *               and the reservation size; held across generation creation
 *               and destruction (they may reserve address space);
 *   contexts.c's record lock (the part pointer);
 *   cx->lock    one per context: its reservations and free ranges, its
 *               lists of live and retiring generations, its orphans
 *               (mappings of destroyed slots whose cuMemUnmap failed:
 *               retried at each destroy and at teardown);
 *   g->lock     one per generation: its slots (ids, mapped pieces), its
 *               timeline entries, dead. Held across VMM calls (they do not
 *               wait for the GPU), released across every wait.
 * Immutable after creation (read without a lock): g->n, g->cx, the slots'
 * base and size, cx->gran, cx->vmm, cx->ctx.
 */
#include "slot_internal.h"

#include "contexts.h"
#include "driver.h"
#include "log.h"
#include "streams.h"
#include "util.h"
#include "vmm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>


static pthread_mutex_t ctxs_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_slot_gen *dead_gens;
static size_t resv_size;         /* 0: default; under ctxs_lock */


/* ----------------------------------------------------------------- contexts */

static void gen_free(sg_slot_gen *g);
static void retiring_reap(sg_slot_ctx *cx);

/* The slots record of ctx (contexts.c's record, part SLOTS), made if
 * missing; NULL if the device has no VMM or out of memory. ctxs_lock held. */
static sg_slot_ctx *ctx_get(CUcontext ctx)
{
    sg_ctx *c = sg_ctx_get(ctx);
    if (!c) return NULL;
    pthread_mutex_lock(&c->lock);
    sg_slot_ctx *cx = c->part[SG_CTX_PART_SLOTS];
    if (!cx && !c->dead && sg_ctx_vmm_locked(c) && (cx = calloc(1, sizeof *cx))) {
        cx->ctx = ctx;
        cx->vmm = c->vmm;
        cx->gran = c->vmm.gran;
        pthread_mutex_init(&cx->lock, NULL);
        c->part[SG_CTX_PART_SLOTS] = cx;
    }
    pthread_mutex_unlock(&c->lock);
    sg_ctx_put(c);
    return cx;
}

/* ------------------------------------------------------------- timeline */

/* 1 if nothing queued can still use g's slots, as far as queries tell
 * (g->lock held). Queries only entries not yet seen complete. */
static int gen_idle_locked(sg_slot_gen *g)
{
    int idle = !g->unknown;
    for (int i = 0; i < SG_SLOT_TIMELINES; i++) {
        timeline *t = &g->tl[i];
        if (t->failed) idle = 0;
        if (!t->busy) continue;
        sg_vmm_relax();
        if (SG_DRIVER_CALL(cuEventQuery, t->ev) == CUDA_SUCCESS)
            t->busy = 0;
        else
            idle = 0;
    }
    return idle;
}

/* Synchronizes ctx (no lock held). 0 or -1. */
static int ctx_sync(CUcontext ctx)
{
    CUcontext prev;
    if (sg_vmm_ctx_enter(ctx, &prev) != 0) return -1;
    sg_vmm_relax();
    CUresult rc = SG_DRIVER_CALL(cuCtxSynchronize);
    sg_vmm_ctx_leave(ctx, prev);
    return rc == CUDA_SUCCESS ? 0 : -1;
}

/* Waits until g is idle (g->lock held on entry and on return; released
 * across each wait). 0, or -1 if waiting failed or the context went. */
static int gen_wait_locked(sg_slot_gen *g)
{
    while (!g->dead && !gen_idle_locked(g)) {
        timeline *busy = NULL;
        int need_sync = g->unknown;
        for (int i = 0; i < SG_SLOT_TIMELINES; i++) {
            if (g->tl[i].failed) need_sync = 1;
            if (g->tl[i].busy && !busy) busy = &g->tl[i];
        }
        unsigned long seq = g->seq, tseq = busy ? busy->seq : 0;
        CUevent ev = busy ? busy->ev : NULL;
        CUcontext ctx = g->cx->ctx;            /* g->cx may go while unlocked */
        STAT_ADD(waits, 1);
        pthread_mutex_unlock(&g->lock);
        int rc;
        if (need_sync) {
            rc = ctx_sync(ctx);
        } else {
            sg_vmm_relax();
            rc = SG_DRIVER_CALL(cuEventSynchronize, ev) == CUDA_SUCCESS ? 0 : -1;
        }
        pthread_mutex_lock(&g->lock);
        if (g->dead) break;
        if (need_sync) {
            if (rc != 0) return -1;
            if (g->seq == seq) {              /* nothing launched meanwhile: all done */
                g->unknown = 0;
                for (int i = 0; i < SG_SLOT_TIMELINES; i++) g->tl[i].busy = g->tl[i].failed = 0;
            }
        } else if (rc != 0) {
            busy->failed = 1;                 /* next round synchronizes the context */
        } else if (busy->seq == tseq) {
            busy->busy = 0;
        }
    }
    return g->dead ? -1 : 0;
}

/* The timeline entry for a stream key: its own, a free one, one whose
 * event completed, else the one recorded longest ago (g->lock held). The
 * launches of a generation are launches of one driver exec (slots.h), which
 * the driver orders ("each launch is ordered behind ... any previous
 * launches of hGraphExec"): the event recorded after this launch completes
 * after that entry's, which may then be forgotten. Never NULL. */
static timeline *timeline_for(sg_slot_gen *g, sg_stream_id key)
{
    timeline *spare = NULL;
    for (int i = 0; i < SG_SLOT_TIMELINES; i++) {
        timeline *t = &g->tl[i];
        if (t->used && sg_stream_id_eq(t->key, key)) return t;
        if (!spare && !t->used) spare = t;
    }
    if (!spare) {
        gen_idle_locked(g);                   /* refresh: completed entries become reusable */
        for (int i = 0; i < SG_SLOT_TIMELINES && !spare; i++)
            if (!g->tl[i].busy && !g->tl[i].failed) spare = &g->tl[i];
    }
    if (!spare) {                             /* all busy: the oldest */
        spare = &g->tl[0];
        for (int i = 1; i < SG_SLOT_TIMELINES; i++)
            if (g->tl[i].seq < spare->seq) spare = &g->tl[i];
    }
    spare->used = 1;
    spare->key = key;
    return spare;
}

/* ---------------------------------------------------------------- the API */

int sg_slot_gen_create(CUcontext ctx, CUdevice dev, const size_t *sizes, size_t n,
                       sg_slot_gen **out)
{
    *out = NULL;
    sg_slot_gen *g = calloc(1, sizeof *g + n * sizeof g->s[0]);
    if (!g) return -1;
    (void)dev;                                 /* the context record knows its device */
    pthread_mutex_lock(&ctxs_lock);
    sg_slot_ctx *cx = ctx_get(ctx);
    int rc = -1;
    if (cx) {
        pthread_mutex_lock(&cx->lock);
        retiring_reap(cx);
        size_t span = 0;
        int overflow = 0;
        for (size_t i = 0; i < n; i++) {
            size_t sz = sg_round_up(sizes[i] ? sizes[i] : 1, cx->gran);
            if (sz < sizes[i] || span + sz < span) overflow = 1;
            g->s[i].size = sz;
            span += sz;
        }
        if (!overflow && (span == 0 || sg_slot_range_take(cx, span, resv_size, &g->base) == 0)) {
            CUdeviceptr at = g->base;
            for (size_t i = 0; i < n; i++) {
                g->s[i].base = at;
                at += g->s[i].size;
            }
            g->cx = cx;
            g->n = n;
            g->span = span;
            pthread_mutex_init(&g->lock, NULL);
            g->next = cx->gens;
            cx->gens = g;
            rc = 0;
        }
        pthread_mutex_unlock(&cx->lock);
    }
    pthread_mutex_unlock(&ctxs_lock);
    sg_vmm_unrelax();
    if (rc != 0) {
        free(g);
        return -1;
    }
    *out = g;
    return 0;
}

CUdeviceptr sg_slot_addr(const sg_slot_gen *g, size_t i) { return i < g->n ? g->s[i].base : 0; }

size_t sg_slot_gen_count(const sg_slot_gen *g) { return g->n; }

int sg_slot_gen_matches(const sg_slot_gen *cg, const sg_slot_bind *want)
{
    sg_slot_gen *g = (sg_slot_gen *)cg;        /* the lock only */
    pthread_mutex_lock(&g->lock);
    int all = !g->dead;
    for (size_t i = 0; i < g->n && all; i++) all = sg_slot_matches(&g->s[i], &want[i]);
    pthread_mutex_unlock(&g->lock);
    return all;
}

int sg_slot_gen_idle(sg_slot_gen *g)
{
    pthread_mutex_lock(&g->lock);
    int idle = g->dead || gen_idle_locked(g);
    pthread_mutex_unlock(&g->lock);
    sg_vmm_unrelax();
    return idle;
}

int sg_slot_gen_bind(sg_slot_gen *g, const sg_slot_bind *want, int wait)
{
    pthread_mutex_lock(&g->lock);
    size_t same = 0;
    for (size_t i = 0; i < g->n; i++) same += sg_slot_matches(&g->s[i], &want[i]);
    STAT_ADD(binds, g->n);
    STAT_ADD(binds_reused, same);
    int rc = 0;
    if (g->dead) {
        rc = -1;
    } else if (same < g->n) {
        if (!gen_idle_locked(g) && (!wait || gen_wait_locked(g) != 0))
            rc = wait ? -1 : SG_SLOTS_BUSY;
        if (rc == -1) goto out;
        CUcontext prev = NULL;
        int entered = 0;
        for (size_t i = 0; i < g->n && rc != SG_SLOTS_BUSY; i++) {
            if (sg_slot_matches(&g->s[i], &want[i])) continue;   /* also after a wait */
            if (!entered && sg_vmm_ctx_enter(g->cx->ctx, &prev) != 0) {
                rc = -1;
                break;
            }
            entered = 1;
            if (sg_slot_rebind(g->cx, &g->s[i], &want[i]) != 0) rc = -1;
        }
        if (entered) sg_vmm_ctx_leave(g->cx->ctx, prev);
    }
out:
    pthread_mutex_unlock(&g->lock);
    sg_vmm_unrelax();
    return rc;
}

int sg_slot_gen_launched(sg_slot_gen *g, CUstream stream, int per_thread)
{
    sg_stream_id key = sg_stream_id_of(stream, per_thread);
    pthread_mutex_lock(&g->lock);
    int rc = -1;
    if (!g->dead) {
        g->seq++;
        timeline *t = timeline_for(g, key);
        if (t && !t->ev) {
            CUcontext prev;
            sg_vmm_relax();
            if (sg_vmm_ctx_enter(g->cx->ctx, &prev) == 0) {
                if (SG_DRIVER_CALL(cuEventCreate, &t->ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
                    t->ev = NULL;
                sg_vmm_ctx_leave(g->cx->ctx, prev);
            }
        }
        if (!t || !t->ev) {
            g->unknown = 1;
        } else {
            sg_vmm_relax();
            CUresult cr = per_thread ? SG_DRIVER_CALL(cuEventRecord_ptsz, t->ev, stream)
                                     : SG_DRIVER_CALL(cuEventRecord, t->ev, stream);
            if (cr == CUDA_SUCCESS) {
                t->busy = 1;
                t->failed = 0;
                t->seq = g->seq;
                rc = 0;
            } else {
                t->failed = 1;
            }
        }
    }
    pthread_mutex_unlock(&g->lock);
    sg_vmm_unrelax();
    return rc;
}

/* Frees g's memory (it is unlinked from every list). */
static void gen_free(sg_slot_gen *g)
{
    for (size_t i = 0; i < g->n; i++) free(g->s[i].pieces);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/* Unlinks g from *head if it is there. 1 if it was. */
static int gen_unlink(sg_slot_gen **head, sg_slot_gen *g)
{
    for (sg_slot_gen **pp = head; *pp; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            return 1;
        }
    }
    return 0;
}

/* Unmaps g's slots, destroys its events, gives its range back and frees it
 * (ctxs_lock and cx->lock held; g unlinked from every list). */
static void gen_dispose(sg_slot_ctx *cx, sg_slot_gen *g)
{
    pthread_mutex_lock(&g->lock);
    sg_slot_orphans_retry(cx);
    int leaked = 0;
    for (size_t i = 0; i < g->n; i++) {
        slot *sl = &g->s[i];
        sl->id = 0;
        if (sg_slot_unmap(sl) == 0) continue;
        leaked = 1;
        SG_WARN("slots: cuMemUnmap failed destroying a slot at 0x%llx: retried later; its "
                "address range is not reused before the context goes", (unsigned long long)sl->base);
        for (size_t k = 0; k < sl->npieces; k++) {
            if (sg_grow((void **)&cx->orphans, &cx->caporphans, cx->norphans + 1,
                        sizeof *cx->orphans) != 0)
                break;                        /* out of memory: the context's teardown frees the range */
            cx->orphans[cx->norphans++] = (range){ sl->base + sl->pieces[k].off, sl->pieces[k].size };
        }
    }
    for (int i = 0; i < SG_SLOT_TIMELINES; i++) {
        if (!g->tl[i].ev) continue;
        sg_vmm_relax();
        SG_DRIVER_CALL(cuEventDestroy_v2, g->tl[i].ev);
    }
    pthread_mutex_unlock(&g->lock);
    if (g->span && !leaked) sg_slot_range_give(cx, g->base, g->span);
    gen_free(g);
}

/* Disposes of the retired generations that became idle (cx->lock held). */
static void retiring_reap(sg_slot_ctx *cx)
{
    sg_slot_gen **pp = &cx->retiring;
    while (*pp) {
        sg_slot_gen *g = *pp;
        pthread_mutex_lock(&g->lock);
        int idle = gen_idle_locked(g);
        pthread_mutex_unlock(&g->lock);
        if (!idle) {
            pp = &g->next;
            continue;
        }
        *pp = g->next;
        gen_dispose(cx, g);
    }
}

/* Takes g off its context's list of generations and returns the context with
 * ctxs_lock and its lock held; or, when the context was torn down meanwhile
 * (g is on dead_gens), frees g and returns NULL with no lock held. */
static sg_slot_ctx *gen_take(sg_slot_gen *g)
{
    pthread_mutex_lock(&ctxs_lock);
    if (gen_unlink(&dead_gens, g)) {
        pthread_mutex_unlock(&ctxs_lock);
        gen_free(g);
        return NULL;
    }
    sg_slot_ctx *cx = g->cx;
    pthread_mutex_lock(&cx->lock);
    gen_unlink(&cx->gens, g);
    return cx;
}

void sg_slot_gen_destroy(sg_slot_gen *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->lock);
    if (!g->dead && gen_wait_locked(g) != 0 && !g->dead)
        SG_WARN("slots: cannot tell whether the work of a generation completed; unmapping its "
                "slots anyway (the context is in error)");
    pthread_mutex_unlock(&g->lock);

    sg_slot_ctx *cx = gen_take(g);
    if (!cx) return;
    gen_dispose(cx, g);
    pthread_mutex_unlock(&cx->lock);
    pthread_mutex_unlock(&ctxs_lock);
    sg_vmm_unrelax();
}

void sg_slot_gen_retire(sg_slot_gen *g)
{
    if (!g) return;
    sg_slot_ctx *cx = gen_take(g);
    if (!cx) return;
    pthread_mutex_lock(&g->lock);
    int idle = gen_idle_locked(g);
    pthread_mutex_unlock(&g->lock);
    if (idle) {
        gen_dispose(cx, g);
    } else {
        g->next = cx->retiring;                /* its launches still run: later */
        cx->retiring = g;
    }
    retiring_reap(cx);
    pthread_mutex_unlock(&cx->lock);
    pthread_mutex_unlock(&ctxs_lock);
    sg_vmm_unrelax();
}

/* Marks the generations of list *head dead (their mappings went with the
 * context's teardown below) and moves them to dead_gens (ctxs_lock held). */
static void gens_kill(sg_slot_gen **head, int retired)
{
    while (*head) {
        sg_slot_gen *g = *head;
        *head = g->next;
        pthread_mutex_lock(&g->lock);
        for (size_t i = 0; i < g->n; i++) {
            g->s[i].id = 0;
            sg_slot_unmap(&g->s[i]);
            g->s[i].npieces = 0;             /* the context's mappings are gone anyway */
        }
        g->dead = 1;
        g->cx = NULL;
        pthread_mutex_unlock(&g->lock);
        if (retired) {
            gen_free(g);                     /* nobody holds a retired generation */
        } else {
            g->next = dead_gens;
            dead_gens = g;
        }
    }
}

/* Context teardown (contexts.h, step 1): unmaps every slot of the context
 * and frees its reservations; makes no event call (the context's events
 * went with it). A generation its owner still holds stays valid but dead
 * until sg_slot_gen_destroy / retire, which then only frees it. */
static void ctx_teardown(sg_ctx *c)
{
    pthread_mutex_lock(&ctxs_lock);
    pthread_mutex_lock(&c->lock);
    sg_slot_ctx *cx = c->part[SG_CTX_PART_SLOTS];
    c->part[SG_CTX_PART_SLOTS] = NULL;
    pthread_mutex_unlock(&c->lock);
    if (cx) {
        pthread_mutex_lock(&cx->lock);
        gens_kill(&cx->gens, 0);
        gens_kill(&cx->retiring, 1);
        sg_slot_orphans_retry(cx);
        free(cx->orphans);
        for (size_t k = 0; k < cx->nresvs; k++) {
            sg_vmm_unreserve(cx->resvs[k].base, cx->resvs[k].size);
            free(cx->resvs[k].free);
        }
        free(cx->resvs);
        pthread_mutex_unlock(&cx->lock);
        pthread_mutex_destroy(&cx->lock);
        free(cx);
    }
    pthread_mutex_unlock(&ctxs_lock);
    sg_vmm_unrelax();
}

/* Memory pressure in ctx (sg_ctx_foreach from slots_trim): retired
 * generations that became idle go; every idle generation's slots that still
 * map a block the program freed are emptied. *u += the bytes unmapped. */
static void ctx_trim(sg_ctx *c, void *u)
{
    pthread_mutex_lock(&ctxs_lock);
    pthread_mutex_lock(&c->lock);
    sg_slot_ctx *cx = c->part[SG_CTX_PART_SLOTS];
    pthread_mutex_unlock(&c->lock);
    if (cx) {
        pthread_mutex_lock(&cx->lock);
        retiring_reap(cx);
        for (sg_slot_gen *g = cx->gens; g; g = g->next) {
            pthread_mutex_lock(&g->lock);
            if (!g->dead && gen_idle_locked(g))
                for (size_t i = 0; i < g->n; i++) *(size_t *)u += sg_slot_drop_freed(&g->s[i]);
            pthread_mutex_unlock(&g->lock);
        }
        pthread_mutex_unlock(&cx->lock);
    }
    pthread_mutex_unlock(&ctxs_lock);
}

/* memory.h's sg_mem_trim_hook: a slot's mapping holds the physical memory of
 * the block it shows, also once the program freed it (cuMemRelease frees
 * memory when its last mapping goes), so that memory pressure would leave
 * the device short of what the program gave back. Never waits: a generation
 * still running keeps its slots. */
static size_t slots_trim(void)
{
    size_t bytes = 0;
    sg_ctx_foreach(ctx_trim, &bytes);
    sg_vmm_unrelax();
    return bytes;
}

void sg_slots_init(void)
{
    sg_ctx_on_teardown(SG_CTX_PART_SLOTS, ctx_teardown);
    sg_mem_trim_hook = slots_trim;
}

void sg_slots_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&ctxs_lock);
    else pthread_mutex_unlock(&ctxs_lock);
}

void sg_slots_set_reservation_size(size_t bytes)
{
    pthread_mutex_lock(&ctxs_lock);
    resv_size = bytes;
    pthread_mutex_unlock(&ctxs_lock);
}

void sg_slots_reset(void)
{
    sg_ctx_reset();                            /* tears every context's slots down */
    pthread_mutex_lock(&ctxs_lock);
    while (dead_gens) {
        sg_slot_gen *g = dead_gens;
        dead_gens = g->next;
        gen_free(g);
    }
    resv_size = 0;
    pthread_mutex_unlock(&ctxs_lock);
    sg_vmm_unrelax();
    memset(&sg_slot_stats_, 0, sizeof sg_slot_stats_);
}

sg_slot_stats sg_slots_stats(void)
{
    sg_slot_stats s;
#define LOAD_(f) s.f = __atomic_load_n(&sg_slot_stats_.f, __ATOMIC_RELAXED)
    LOAD_(maps); LOAD_(unmaps); LOAD_(set_access); LOAD_(waits);
    LOAD_(map_ns); LOAD_(unmap_ns); LOAD_(access_ns);
    LOAD_(binds); LOAD_(binds_reused);
#undef LOAD_
    return s;
}
