/*
 * core/mem_registry.c: the registry of the memory code (mem_internal.h): the live blocks the
 * library placed (sorted by base, found by any interior address), the
 * library's reservations, immutable snapshot views for many lookups in a
 * row, the allocations the driver made for the program (forwarded: counted
 * until freed; a policy that places nothing sees them in its views instead
 * of placed blocks), and the report's byte counts.
 *
 * Locks: reg_lock guards blocks, spans, view_cur / view_dirty, fwd_live and
 * the view reference counts; span_lo / span_hi are atomics (a lock-free
 * "certainly not ours" test); the byte counts are atomics.
 */
#include "mem_internal.h"

#include "blocked.h"
#include "stats.h"
#include "util.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* With HASH_NONFATAL_OOM a failed uthash allocation sets fwd_oom (reg_lock). */
static int fwd_oom;
#define uthash_nonfatal_oom(elt) (fwd_oom = 1)
#include "hash.h"

typedef struct sg_fwd {
    CUdeviceptr p;
    size_t size;
    uint64_t id;                   /* as a placed block's: never reused */
    UT_hash_handle hh;
} sg_fwd;

struct sg_mem_view {
    int refs;                      /* guarded by reg_lock */
    int live;                      /* live_view: no snapshot, lookups in the registry */
    size_t n;
    sg_alloc_info v[];
};

/* A snapshot costs a copy of every live block. A program that places or
 * frees a block between two updates dirtied the registry each time, so every
 * update of a skip_profiled exec (one finder: a few lookups) copied them all
 * (100,000 live blocks made such a step 6 times slower than the driver's,
 * and it grew with them: tests/stress/test_scale.sh, view). A dirty registry
 * of more than VIEW_LIVE_MIN blocks hands out live_view instead, whose
 * lookups take reg_lock and search the registry itself (counted in
 * live_lookups, an atomic); the snapshot is rebuilt once they reach
 * nblocks / VIEW_LIVE_RATIO, so each rebuild is paid for by that many lookups
 * (a kernel with many address words still looks up without a lock). */
#define VIEW_LIVE_MIN 256
#define VIEW_LIVE_RATIO 8
static sg_mem_view live_view = { .live = 1 };
static unsigned long live_lookups;

int sg_mem_placing;                /* set once by sg_mem_init */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* The live placed blocks (pointers), sorted by base, in a blocked sorted
 * array (blocked.h) of at most REG_CHUNK per block: an insertion or removal
 * moves the entries of one block, so that placing or freeing a block far
 * below the highest one costs the same as near it (a flat array moved every
 * entry above it: 100,000 live blocks below a loop that takes and gives
 * back the lowest hole, scale_prog lowhole). An insertion that needs memory
 * it cannot get is refused (sg_mem_reg_insert: -1). */
#define REG_CHUNK 256
static uint64_t reg_key(const void *e) { return (*(sg_block *const *)e)->base; }
static const sg_blocked_kind reg_kind = { .esize = sizeof(sg_block *), .cap = REG_CHUNK, .key = reg_key };
static sg_blocked reg = { .k = &reg_kind };
static struct span { CUdeviceptr base; size_t size; } *spans;
static size_t nspans, capspans;
static CUdeviceptr span_lo = UINTPTR_MAX, span_hi;   /* atomics: every span is inside */
static sg_mem_view *view_cur;
static int view_dirty = 1;
static sg_fwd *fwd_live;
static mem_arena **orphans;        /* orphan arenas (mem_arena.orphan), not yet ended */
static size_t norphans, caporphans;   /* norphans: written under reg_lock, read without it */

static uint64_t next_id;           /* atomic */
static unsigned long live_now, mapped_now;   /* atomics */
static sg_pool_use pool_use[SG_VMM_MAX_DEVICES];   /* placed stream-ordered blocks per device */
static int pool_used_ever;         /* atomic: a stream-ordered block was placed */

uint64_t sg_mem_next_id(void) { return SG_MEM_ID_BASE + __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------- byte counts */

void sg_mem_live_add(size_t n)
{
    unsigned long now = __atomic_add_fetch(&live_now, n, __ATOMIC_RELAXED);
    SG_TOTAL_MAX(bytes_requested, now);
}

void sg_mem_live_sub(size_t n) { __atomic_sub_fetch(&live_now, n, __ATOMIC_RELAXED); }

void sg_mem_mapped_delta(size_t before, size_t after)
{
    if (after > before) {
        unsigned long now = __atomic_add_fetch(&mapped_now, after - before, __ATOMIC_RELAXED);
        SG_TOTAL_MAX(bytes_mapped, now);
    } else if (before > after) {
        __atomic_sub_fetch(&mapped_now, before - after, __ATOMIC_RELAXED);
    }
}

/* ----------------------------------------------- the default pools' figures */

/* A stream-ordered block comes (add) or goes (reg_lock held). */
static void pool_account_locked(const sg_block *b, int add)
{
    CUdevice dev = b->owner ? b->owner->vmm.dev : -1;
    if (!b->stream_ordered || dev < 0 || dev >= SG_VMM_MAX_DEVICES) return;
    sg_pool_use *u = &pool_use[dev];
    if (!add) {
        u->used -= u->used >= b->size ? b->size : u->used;
        return;
    }
    __atomic_store_n(&pool_used_ever, 1, __ATOMIC_RELAXED);
    u->used += b->size;
    if (u->used > u->used_high) u->used_high = u->used;
    if (u->used > u->reserved_high) u->reserved_high = u->used;
}

int sg_mem_reg_pool_any(void) { return __atomic_load_n(&pool_used_ever, __ATOMIC_RELAXED); }

sg_pool_use sg_mem_reg_pool_use(CUdevice dev)
{
    sg_pool_use u = { 0, 0, 0 };
    if (dev < 0 || dev >= SG_VMM_MAX_DEVICES) return u;
    pthread_mutex_lock(&reg_lock);
    u = pool_use[dev];
    pthread_mutex_unlock(&reg_lock);
    return u;
}

void sg_mem_reg_pool_reset(CUdevice dev, CUmemPool_attribute attr)
{
    if (dev < 0 || dev >= SG_VMM_MAX_DEVICES) return;
    pthread_mutex_lock(&reg_lock);
    if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) pool_use[dev].used_high = pool_use[dev].used;
    else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) pool_use[dev].reserved_high = pool_use[dev].used;
    pthread_mutex_unlock(&reg_lock);
}

/* --------------------------------------------------------------- registry */

/* 0 if p cannot be the library's (outside every reservation): no lock. */
int sg_mem_maybe_ours(CUdeviceptr p)
{
    return p >= __atomic_load_n(&span_lo, __ATOMIC_ACQUIRE) &&
           p < __atomic_load_n(&span_hi, __ATOMIC_ACQUIRE);
}

/* The block at q (not the end). */
static sg_block *reg_at(sg_bpos q) { return ((sg_block **)sg_blocked_elems(&reg, q.b))[q.o]; }

/* The first block whose base is > p (reg_lock held). */
static sg_bpos reg_upper(CUdeviceptr p) { return sg_blocked_upper_by(&reg, p, reg_key, sizeof(sg_block *)); }

/* The place of the live block containing p, or the end (reg_lock held). */
static sg_bpos reg_containing_at(CUdeviceptr p)
{
    sg_bpos q = reg_upper(p);
    if (sg_blocked_is_first(q)) return sg_blocked_end(&reg);
    q = sg_blocked_prev(&reg, q);
    const sg_block *b = reg_at(q);
    return p - b->base < b->size ? q : sg_blocked_end(&reg);
}

/* The live block containing p, or NULL (reg_lock held). */
static sg_block *reg_containing(CUdeviceptr p)
{
    sg_bpos q = reg_containing_at(p);
    return sg_blocked_is_end(&reg, q) ? NULL : reg_at(q);
}

/* 1 if p lies in one of the library's reservations (reg_lock held). */
static int reg_in_spans(CUdeviceptr p)
{
    for (size_t i = 0; i < nspans; i++)
        if (p >= spans[i].base && p - spans[i].base < spans[i].size) return 1;
    return 0;
}

int sg_mem_reg_insert(sg_block *b)
{
    pthread_mutex_lock(&reg_lock);
    int ok = sg_blocked_insert(&reg, reg_upper(b->base), &b) == 0;
    if (ok) {
        view_dirty = 1;
        pool_account_locked(b, 1);
    }
    pthread_mutex_unlock(&reg_lock);
    return ok ? 0 : -1;
}

sg_block *sg_mem_reg_take(CUdeviceptr p)
{
    pthread_mutex_lock(&reg_lock);
    sg_bpos q = reg_containing_at(p);
    sg_block *b = sg_blocked_is_end(&reg, q) ? NULL : reg_at(q);
    if (b && b->base == p) {
        pool_account_locked(b, 0);
        sg_blocked_erase(&reg, q);
        view_dirty = 1;
    } else {
        b = NULL;
    }
    pthread_mutex_unlock(&reg_lock);
    return b;
}

void sg_mem_span_add(CUdeviceptr base, size_t size)
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

void sg_mem_span_del(CUdeviceptr base)
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
    *out = (sg_alloc_info){ .base = b->base, .size = b->size, .id = b->id, .ctx = b->ctx,
                            .dev = b->owner->vmm.dev, .own_handles = b->own,
                            .stream_ordered = b->stream_ordered, .sync_memops = b->sync_memops };
}

int sg_mem_reg_set_sync(CUdeviceptr p, uint64_t id, int on)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    int found = b && b->id == id;
    if (found && b->sync_memops != on) {
        b->sync_memops = on;
        view_dirty = 1;
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

int sg_mem_find(CUdeviceptr p, sg_alloc_info *out)
{
    if (!sg_mem_maybe_ours(p)) return 0;
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    if (b && out) info_of(b, out);
    pthread_mutex_unlock(&reg_lock);
    return b != NULL;
}

int sg_mem_lookup(CUdeviceptr p, sg_alloc_info *out)
{
    if (!sg_mem_maybe_ours(p)) return -1;
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
    if (len == 0 || !sg_mem_placing) return CUDA_SUCCESS;
    int r = sg_mem_lookup(p, &b);
    if (r < 0) return CUDA_SUCCESS;
    if (r == 0) return CUDA_ERROR_INVALID_VALUE;            /* freed placed memory */
    return len <= b.size - (size_t)(p - b.base) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static void view_unref_locked(sg_mem_view *v)
{
    if (v && --v->refs == 0) free(v);
}

static int info_base_cmp(const void *a, const void *b)
{
    CUdeviceptr x = ((const sg_alloc_info *)a)->base, y = ((const sg_alloc_info *)b)->base;
    return x < y ? -1 : x > y;
}

/* The forwarded allocations as view entries, sorted by base (reg_lock held):
 * what a policy that places nothing observes in place of placed blocks. The
 * context is unknown (no driver call was made for it) and the handles are not
 * the library's. */
static void fwd_infos(sg_alloc_info *out)
{
    size_t i = 0;
    for (const sg_fwd *e = fwd_live; e; e = e->hh.next)
        out[i++] = (sg_alloc_info){ .base = e->p, .size = e->size, .id = e->id };
    qsort(out, i, sizeof *out, info_base_cmp);
}

const sg_mem_view *sg_mem_view_acquire(void)
{
    pthread_mutex_lock(&reg_lock);
    size_t nblocks = sg_blocked_count(&reg);
    if ((view_dirty || !view_cur) && sg_mem_placing && nblocks > VIEW_LIVE_MIN &&
        __atomic_load_n(&live_lookups, __ATOMIC_RELAXED) < nblocks / VIEW_LIVE_RATIO) {
        pthread_mutex_unlock(&reg_lock);
        return &live_view;
    }
    if (view_dirty || !view_cur) {
        size_t n = sg_mem_placing ? nblocks : HASH_COUNT(fwd_live);
        sg_mem_view *v = malloc(sizeof *v + n * sizeof v->v[0]);
        if (!v) {
            pthread_mutex_unlock(&reg_lock);
            return NULL;
        }
        v->refs = 1;                  /* the reference of view_cur itself */
        v->live = 0;
        v->n = n;
        if (sg_mem_placing) {
            size_t i = 0;
            for (size_t c = 0; c < reg.nbk; c++) {
                size_t n;
                sg_block **k = sg_blocked_block(&reg, c, &n);
                for (size_t j = 0; j < n; j++) info_of(k[j], &v->v[i++]);
            }
        } else {
            fwd_infos(v->v);
        }
        view_unref_locked(view_cur);
        view_cur = v;
        view_dirty = 0;
        __atomic_store_n(&live_lookups, 0, __ATOMIC_RELAXED);
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

/* A lookup of live_view: the block containing p (end: the block ending
 * exactly at p) in the registry as it is now. */
static int live_find(CUdeviceptr p, int end, sg_alloc_info *out)
{
    __atomic_add_fetch(&live_lookups, 1, __ATOMIC_RELAXED);
    if (!sg_mem_maybe_ours(end ? p - 1 : p)) return 0;
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(end ? p - 1 : p);
    if (b && end && b->base + b->size != p) b = NULL;
    if (b && out) info_of(b, out);
    pthread_mutex_unlock(&reg_lock);
    return b != NULL;
}

int sg_mem_view_find(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out)
{
    if (v->live) return live_find(p, 0, out);
    size_t i = view_upper(v, p);
    if (i == 0 || p - v->v[i - 1].base >= v->v[i - 1].size) return 0;
    if (out) *out = v->v[i - 1];
    return 1;
}

int sg_mem_view_find_end(const sg_mem_view *v, CUdeviceptr p, sg_alloc_info *out)
{
    if (v->live) return live_find(p, 1, out);
    size_t i = view_upper(v, p - 1);
    if (i == 0 || v->v[i - 1].base + v->v[i - 1].size != p) return 0;
    if (out) *out = v->v[i - 1];
    return 1;
}

void sg_mem_view_release(const sg_mem_view *cv)
{
    sg_mem_view *v = (sg_mem_view *)cv;
    if (!v || v->live) return;
    pthread_mutex_lock(&reg_lock);
    view_unref_locked(v);
    pthread_mutex_unlock(&reg_lock);
}

/* ----------------------------------------------- forwarded allocations */

void sg_mem_fwd_track(CUdeviceptr p, size_t size)
{
    sg_fwd *e = calloc(1, sizeof *e);
    if (!e) return;
    e->p = p;
    e->size = size;
    e->id = sg_mem_next_id();
    pthread_mutex_lock(&reg_lock);
    sg_fwd *old;
    HASH_FIND(hh, fwd_live, &p, sizeof p, old);
    if (old) {
        HASH_DEL(fwd_live, old);
        sg_mem_live_sub(old->size);
        free(old);
    }
    fwd_oom = 0;
    HASH_ADD(hh, fwd_live, p, sizeof e->p, e);
    if (fwd_oom) {
        free(e);
        e = NULL;
    }
    if (!sg_mem_placing) view_dirty = 1;
    pthread_mutex_unlock(&reg_lock);
    if (e) sg_mem_live_add(size);
}

void sg_mem_fwd_untrack(CUdeviceptr p)
{
    sg_fwd *e;
    pthread_mutex_lock(&reg_lock);
    HASH_FIND(hh, fwd_live, &p, sizeof p, e);
    if (e) HASH_DEL(fwd_live, e);
    if (e && !sg_mem_placing) view_dirty = 1;
    pthread_mutex_unlock(&reg_lock);
    if (e) {
        sg_mem_live_sub(e->size);
        free(e);
    }
}

sg_block *sg_mem_reg_exact(CUdeviceptr p, int *ours, void (*hold)(mem_arena *))
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    if (b && b->base != p) b = NULL;
    *ours = b ? 1 + (b->stream_ordered != 0) : reg_in_spans(p);
    if (b && hold) hold(b->owner);
    pthread_mutex_unlock(&reg_lock);
    return b;
}

size_t sg_mem_reg_drop_owner(const mem_arena *owner, int keep_ordered, size_t *kept)
{
    size_t freed = 0, left = 0;
    pthread_mutex_lock(&reg_lock);
    for (size_t c = 0; c < reg.nbk; c++) {   /* each block of entries in place; the emptied ones go */
        size_t n, out = 0;
        sg_block **k = sg_blocked_block(&reg, c, &n);
        for (size_t j = 0; j < n; j++) {
            sg_block *b = k[j];
            if (b->owner != owner || (keep_ordered && b->stream_ordered)) {
                left += b->owner == owner;
                k[out++] = b;
                continue;
            }
            freed += b->size;
            pool_account_locked(b, 0);
            free(b);
            view_dirty = 1;
        }
        sg_blocked_set_count(&reg, c, out);
    }
    sg_blocked_drop_empty(&reg);
    pthread_mutex_unlock(&reg_lock);
    if (kept) *kept = left;
    return freed;
}

size_t sg_mem_reg_owned(const mem_arena *owner)
{
    size_t n = 0;
    pthread_mutex_lock(&reg_lock);
    for (size_t c = 0; c < reg.nbk; c++) {
        size_t nk;
        sg_block **k = sg_blocked_block(&reg, c, &nk);
        for (size_t j = 0; j < nk; j++) n += k[j]->owner == owner;
    }
    pthread_mutex_unlock(&reg_lock);
    return n;
}

int sg_mem_reg_orphan_add(mem_arena *ar)
{
    pthread_mutex_lock(&reg_lock);
    int ok = sg_grow((void **)&orphans, &caporphans, norphans + 1, sizeof *orphans) == 0;
    if (ok) {
        orphans[norphans] = ar;
        __atomic_store_n(&norphans, norphans + 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&reg_lock);
    return ok ? 0 : -1;
}

void sg_mem_reg_orphan_del(mem_arena *ar)
{
    pthread_mutex_lock(&reg_lock);
    for (size_t i = 0; i < norphans; i++)
        if (orphans[i] == ar) {
            orphans[i] = orphans[norphans - 1];
            __atomic_store_n(&norphans, norphans - 1, __ATOMIC_RELAXED);
            break;
        }
    pthread_mutex_unlock(&reg_lock);
}

size_t sg_mem_reg_orphans(mem_arena **out, size_t max)
{
    if (!__atomic_load_n(&norphans, __ATOMIC_RELAXED)) return 0;   /* the common case: no lock */
    pthread_mutex_lock(&reg_lock);
    size_t n = norphans;
    for (size_t i = 0; i < n && i < max; i++) {
        out[i] = orphans[i];
        __atomic_add_fetch(&out[i]->refs, 1, __ATOMIC_RELAXED);   /* as sg_marena_hold */
    }
    pthread_mutex_unlock(&reg_lock);
    return n;
}

int sg_mem_reg_ipc(CUdeviceptr p, sg_alloc_info *out, int *first)
{
    pthread_mutex_lock(&reg_lock);
    sg_block *b = reg_containing(p);
    int r = b ? 1 + (b->stream_ordered != 0) : reg_in_spans(p) ? 0 : -1;
    if (b) {
        info_of(b, out);
        *first = !b->ipc_warned;
        b->ipc_warned = 1;
    }
    pthread_mutex_unlock(&reg_lock);
    return r;
}

void sg_mem_reg_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&reg_lock);
    else pthread_mutex_unlock(&reg_lock);
}

void sg_mem_reg_reset(void)
{
    pthread_mutex_lock(&reg_lock);
    sg_fwd *e, *tmp;
    HASH_ITER(hh, fwd_live, e, tmp) {
        HASH_DEL(fwd_live, e);
        free(e);
    }
    for (size_t c = 0; c < reg.nbk; c++) {
        size_t n;
        sg_block **k = sg_blocked_block(&reg, c, &n);
        for (size_t j = 0; j < n; j++) free(k[j]);
    }
    sg_blocked_free(&reg);
    view_unref_locked(view_cur);
    view_cur = NULL;
    view_dirty = 1;
    __atomic_store_n(&norphans, 0, __ATOMIC_RELAXED);   /* sg_marena_orphans_drop ended them */
    nspans = 0;
    __atomic_store_n(&span_lo, UINTPTR_MAX, __ATOMIC_RELAXED);
    __atomic_store_n(&span_hi, 0, __ATOMIC_RELAXED);
    memset(pool_use, 0, sizeof pool_use);
    pthread_mutex_unlock(&reg_lock);
    __atomic_store_n(&live_now, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mapped_now, 0, __ATOMIC_RELAXED);
}
