/*
 * core/contexts.c: context records and the ordered teardown (contexts.h).
 */
#include "contexts.h"

#include "driver.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define SG_CTX_MAX_DEVICES 64

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static sg_ctx *table;                              /* live records */
/* A device's primary context, once retained: written under table_lock, read
 * without it by sg_ctx_owner (every placed allocation), which looks at the
 * devices below primary_top only (atomic: the highest device retained + 1). */
static CUcontext primary[SG_CTX_MAX_DEVICES];
static int primary_top;
static void (*teardown_fn[SG_CTX_PARTS])(sg_ctx *c);
static void *(*take_fn[SG_CTX_PARTS])(CUcontext ctx);
static void (*give_back_fn[SG_CTX_PARTS])(void *taken);

/* What sg_ctx_owner learned from the driver. A context's owner does not
 * change while the context lives (a green context's converted context has
 * its device's primary context, any other context itself), so each is asked
 * once: before, every placed allocation and instantiation under a context
 * the library had not seen retained as a primary one (cuCtxCreate's) made a
 * cuStreamGetCtx_v2 call. An entry goes with the teardown of its context or
 * of its owner and with the destruction of the green context it was
 * converted from (a handle value may come back for another context);
 * owners_gen counts those, so that an answer the driver gave before one is
 * not kept. More than OWNERS such contexts at once: the others are asked
 * each time. The driver frees a handle before its destroy call returns, and
 * another thread may get the value for a new context at once: so
 * cuCtxDestroy and cuGreenCtxDestroy forget before they forward too, and
 * while one is in flight (owners_busy) no answer is kept (else an entry
 * for the dying context, learned or kept until the forget after the call,
 * would answer for the new one: a cuCtxCreate context taken for a green
 * one's converted context, or the reverse). table_lock guards all four. */
#define OWNERS 32
static struct { CUcontext ctx, owner; } owners[OWNERS];
static int nowners;
static unsigned long owners_gen;
static int owners_busy;

/* Forgets ctx's entry and those it owns; ctx NULL: every entry. */
static void owners_forget_locked(CUcontext ctx)
{
    owners_gen++;
    if (!ctx) nowners = 0;
    for (int i = 0; i < nowners;)
        if (owners[i].ctx == ctx || owners[i].owner == ctx) owners[i] = owners[--nowners];
        else i++;
}

/* Around the forward of cuCtxDestroy (ctx) or cuGreenCtxDestroy (ctx NULL:
 * the converted context's handle is not asked for, every owner goes):
 * begin forgets and holds the cache shut, end opens it (owners_busy). */
static void owners_destroy_around(CUcontext ctx, int busy)
{
    pthread_mutex_lock(&table_lock);
    owners_forget_locked(ctx);
    owners_busy += busy;
    pthread_mutex_unlock(&table_lock);
}
static void owners_destroy_begin(CUcontext ctx) { owners_destroy_around(ctx, 1); }
static void owners_destroy_end(CUcontext ctx) { owners_destroy_around(ctx, -1); }

static sg_ctx *find_locked(CUcontext ctx)
{
    sg_ctx *c = table;
    while (c && c->ctx != ctx) c = c->next;
    return c;
}

sg_ctx *sg_ctx_find(CUcontext ctx)
{
    if (!ctx) return NULL;
    pthread_mutex_lock(&table_lock);
    sg_ctx *c = find_locked(ctx);
    if (c) __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&table_lock);
    return c;
}

sg_ctx *sg_ctx_get(CUcontext ctx)
{
    if (!ctx) return NULL;
    pthread_mutex_lock(&table_lock);
    sg_ctx *c = find_locked(ctx);
    if (!c && (c = calloc(1, sizeof *c))) {
        c->ctx = ctx;
        c->refs = 1;                /* the table's */
        pthread_mutex_init(&c->lock, NULL);
        c->next = table;
        table = c;
    }
    if (c) __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&table_lock);
    return c;
}

void sg_ctx_put(sg_ctx *c)
{
    if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

int sg_ctx_vmm_locked(sg_ctx *c)
{
    if (c->vmm_state == 0) {
        const char *why = NULL;
        c->vmm_state = sg_vmm_dev_setup(c->ctx, &c->vmm, &why) == 0 ? 1 : -1;
        if (c->vmm_state < 0)
            SG_WARN_ONCE("context %p: %s: its allocations go to the driver unchanged (no stable "
                         "addresses for temporaries)", (void *)c->ctx, why);
    }
    return c->vmm_state == 1 && !__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE);
}

void sg_ctx_on_teardown(sg_ctx_part part, void (*fn)(sg_ctx *c)) { teardown_fn[part] = fn; }

void sg_ctx_on_take(sg_ctx_part part, void *(*take)(CUcontext ctx), void (*give_back)(void *taken))
{
    take_fn[part] = take;
    give_back_fn[part] = give_back;
}

/* Sets of parts: every one; those that may hold state of a context without
 * a record (captures, exec records, launch tables); those a green
 * context's converted context has (what is made with it is the primary
 * context's). */
#define PARTS_ALL ((1u << SG_CTX_PARTS) - 1)
#define PARTS_UNRECORDED                                                      \
    (1u << SG_CTX_PART_CAPTURES | 1u << SG_CTX_PART_GRAPHS | 1u << SG_CTX_PART_LAUNCH)
#define PARTS_CONVERTED (1u << SG_CTX_PART_CAPTURES | 1u << SG_CTX_PART_LAUNCH)

/* What the parts of `parts` take of ctx before its destroy is forwarded,
 * into early (each part's token, NULL: nothing). */
static void parts_take(CUcontext ctx, unsigned parts, void **early)
{
    for (int p = 0; p < SG_CTX_PARTS; p++)
        if ((parts >> p & 1) && take_fn[p]) early[p] = take_fn[p](ctx);
}

/* The destroy was refused: each part gets what it took back. */
static void parts_give_back(void *const *early)
{
    for (int p = 0; p < SG_CTX_PARTS; p++)
        if (early[p] && give_back_fn[p]) give_back_fn[p](early[p]);
}

/* The teardown of the parts of `parts`, in their order. */
static void parts_teardown(sg_ctx *c, unsigned parts)
{
    for (int p = 0; p < SG_CTX_PARTS; p++)
        if ((parts >> p & 1) && teardown_fn[p]) teardown_fn[p](c);
}

void sg_ctx_foreach(void (*fn)(sg_ctx *c, void *u), void *u)
{
    size_t n = 0, cap = 0;
    sg_ctx **v = NULL;
    pthread_mutex_lock(&table_lock);
    for (sg_ctx *c = table; c; c = c->next) {
        if (sg_grow((void **)&v, &cap, n + 1, sizeof *v) != 0) break;
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
        v[n++] = c;
    }
    pthread_mutex_unlock(&table_lock);
    for (size_t i = 0; i < n; i++) {
        fn(v[i], u);
        sg_ctx_put(v[i]);
    }
    free(v);
}

/* Unlinks ctx's record from the table and returns it (the table's
 * reference now belongs to the caller); NULL if none (table_lock held). */
static sg_ctx *take_locked(CUcontext ctx)
{
    sg_ctx **pp = &table;
    while (*pp && (*pp)->ctx != ctx) pp = &(*pp)->next;
    sg_ctx *c = *pp;
    if (c) *pp = c->next;
    return c;
}

/* Tears down c, the record of ctx already taken from the table (NULL: none
 * was); early: what the parts took before the destroy (NULL: nothing). */
static void teardown_taken(CUcontext ctx, sg_ctx *c, void *const *early);

void sg_ctx_teardown(CUcontext ctx)
{
    if (!ctx) return;
    pthread_mutex_lock(&table_lock);
    sg_ctx *c = take_locked(ctx);
    pthread_mutex_unlock(&table_lock);
    teardown_taken(ctx, c, NULL);
}

static void teardown_taken(CUcontext ctx, sg_ctx *c, void *const *early)
{
    pthread_mutex_lock(&table_lock);
    for (int d = 0; d < SG_CTX_MAX_DEVICES; d++)
        if (primary[d] == ctx) __atomic_store_n(&primary[d], NULL, __ATOMIC_RELAXED);
    owners_forget_locked(ctx);
    pthread_mutex_unlock(&table_lock);
    if (!c) {
        /* no record, but captures and graph records may still name the context */
        sg_ctx tmp = { .ctx = ctx, .dead = 1 };
        if (early) memcpy(tmp.early, early, sizeof tmp.early);
        parts_teardown(&tmp, PARTS_UNRECORDED);
        return;
    }
    __atomic_store_n(&c->dead, 1, __ATOMIC_RELEASE);
    if (early) memcpy(c->early, early, sizeof c->early);
    parts_teardown(c, PARTS_ALL);
    sg_ctx_put(c);
}

CUcontext sg_ctx_owner(CUcontext ctx, CUstream s, int per_thread)
{
    if (!ctx) return ctx;
    /* a primary context (the common case) without the lock: a stale read
     * can only be of a context being torn down, whose owner it is anyway */
    for (int d = 0, top = __atomic_load_n(&primary_top, __ATOMIC_ACQUIRE); d < top; d++)
        if (__atomic_load_n(&primary[d], __ATOMIC_RELAXED) == ctx) return ctx;
    CUcontext found = NULL;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < nowners && !found; i++)
        if (owners[i].ctx == ctx) found = owners[i].owner;
    unsigned long gen = owners_gen;
    pthread_mutex_unlock(&table_lock);
    if (found) return found;
    CUcontext owner = NULL;
    CUgreenCtx green = NULL;
    CUresult rc = per_thread ? (sg_drv.cuStreamGetCtx_v2_ptsz
                                    ? SG_DRIVER_CALL(cuStreamGetCtx_v2_ptsz, s, &owner, &green)
                                    : CUDA_ERROR_NOT_SUPPORTED)
                             : (sg_drv.cuStreamGetCtx_v2 ? SG_DRIVER_CALL(cuStreamGetCtx_v2, s, &owner, &green)
                                                         : CUDA_ERROR_NOT_SUPPORTED);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_SUPPORTED) return ctx;   /* not kept: asked again */
    found = rc == CUDA_SUCCESS && green && owner ? owner : ctx;
    pthread_mutex_lock(&table_lock);
    int have = 0;
    for (int i = 0; i < nowners && !have; i++) have = owners[i].ctx == ctx;
    if (!have && gen == owners_gen && !owners_busy && nowners < OWNERS) {
        owners[nowners].ctx = ctx;
        owners[nowners++].owner = found;
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

CUresult sg_ctx_primary_retained(const sg_call *c, CUresult rc)
{
    CUdevice d = c->u.primary.dev;
    if (rc == CUDA_SUCCESS && c->u.primary.out && d >= 0 && d < SG_CTX_MAX_DEVICES) {
        pthread_mutex_lock(&table_lock);
        __atomic_store_n(&primary[d], *c->u.primary.out, __ATOMIC_RELAXED);
        if (d >= primary_top) __atomic_store_n(&primary_top, d + 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&table_lock);
    }
    return rc;
}

/* Device d's primary context is gone if the driver now says it is inactive. */
static void drop_if_inactive(CUdevice d, int known_only)
{
    pthread_mutex_lock(&table_lock);
    CUcontext ctx = primary[d];
    pthread_mutex_unlock(&table_lock);
    if (known_only && !ctx) return;
    unsigned flags;
    int active = 1;
    if (!sg_drv.cuDevicePrimaryCtxGetState ||
        SG_DRIVER_CALL(cuDevicePrimaryCtxGetState, d, &flags, &active) != CUDA_SUCCESS || active)
        return;
    sg_ctx_teardown(ctx);
}

/* After cuDevicePrimaryCtxRelease / Reset of a device, or cuGreenCtxDestroy (dev -1),
 * which releases the primary context its green context retained ("This API will retain
 * the primary context on device dev, which will is released when the green context is
 * destroyed"): the library is not told which device, so every primary context it saw
 * retained is asked (a green context is destroyed seldom). Before, the end of a primary
 * context by the destruction of the green context that held it last went unnoticed: its
 * arena kept the memory the driver's teardown frees (round 38). */
static CUresult primary_drop(const sg_call *c)
{
    CUdevice d = c->u.primary.dev;
    /* cuGreenCtxDestroy: the captures its streams began end with it (the driver's streams
     * of a destroyed green context answer CUDA_ERROR_CONTEXT_IS_DESTROYED, even
     * cuStreamEndCapture): forgotten as a context teardown forgets its captures, so that
     * they no longer count as in progress. Nothing else is torn down for the converted
     * context: what was made with it current is the primary context's. */
    CUcontext converted = NULL;
    if (d == -1 && c->u.primary.green && sg_drv.cuCtxFromGreenCtx &&
        SG_DRIVER_CALL(cuCtxFromGreenCtx, &converted, c->u.primary.green) != CUDA_SUCCESS)
        converted = NULL;
    if (d == -1) owners_destroy_begin(NULL);   /* (rare) every owner asked again: the converted handle goes */
    /* the converted context's captures and launch tables taken before the
     * driver frees the value, as cuCtxDestroy's parts are */
    sg_ctx tmp = { .ctx = converted, .dead = 1 };
    if (converted) parts_take(converted, PARTS_CONVERTED, tmp.early);
    CUresult rc = c->forward(c->args);
    if (d == -1) owners_destroy_end(NULL);
    if (converted && rc == CUDA_SUCCESS) parts_teardown(&tmp, PARTS_CONVERTED);
    else if (converted) parts_give_back(tmp.early);
    if (rc != CUDA_SUCCESS || d >= SG_CTX_MAX_DEVICES) return rc;
    if (d >= 0) drop_if_inactive(d, 0);
    else if (d == -1)
        for (CUdevice x = 0; x < SG_CTX_MAX_DEVICES; x++) drop_if_inactive(x, 1);
    return rc;
}

CUresult sg_ctx_call(const sg_call *c)
{
    CUresult rc;
    switch (c->kind) {
    case SG_CALL_CTX_DESTROY: {
        /* The record is taken from the table before the driver frees the
         * handle, and that record is torn down after: once the driver has
         * freed it, another thread's cuCtxCreate may get the value and place
         * memory in a record made for it, which a teardown by value would
         * take (its blocks unmapped under its kernels; round 40, windowctx).
         * Not a primary context's (cuCtxDestroy refuses one); a destroy
         * refused otherwise gives the record back. */
        CUcontext ctx = c->u.ctx.ctx;
        owners_destroy_begin(ctx);
        pthread_mutex_lock(&table_lock);
        int prim = 0;
        for (int d = 0; d < SG_CTX_MAX_DEVICES; d++) prim |= primary[d] == ctx;
        sg_ctx *taken = ctx && !prim ? take_locked(ctx) : NULL;
        pthread_mutex_unlock(&table_lock);
        void *early[SG_CTX_PARTS] = { 0 };
        if (ctx && !prim) parts_take(ctx, PARTS_ALL, early);
        rc = c->forward(c->args);
        owners_destroy_end(ctx);
        if (rc == CUDA_SUCCESS) {
            teardown_taken(ctx, taken, early);
            return rc;
        }
        parts_give_back(early);
        if (taken) {
            pthread_mutex_lock(&table_lock);
            taken->next = table;        /* ahead of one made meanwhile, if any */
            table = taken;
            pthread_mutex_unlock(&table_lock);
        }
        return rc;
    }
    case SG_CALL_PRIMARY_DROP:
        return primary_drop(c);
    default:
        return c->forward(c->args);
    }
}

void sg_ctx_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&table_lock);
    else pthread_mutex_unlock(&table_lock);
}

void sg_ctx_reset(void)
{
    for (;;) {
        pthread_mutex_lock(&table_lock);
        CUcontext ctx = table ? table->ctx : NULL;
        pthread_mutex_unlock(&table_lock);
        if (!ctx) break;
        sg_ctx_teardown(ctx);
    }
    pthread_mutex_lock(&table_lock);
    for (int d = 0; d < SG_CTX_MAX_DEVICES; d++) __atomic_store_n(&primary[d], NULL, __ATOMIC_RELAXED);
    owners_forget_locked(NULL);
    pthread_mutex_unlock(&table_lock);
}
