/*
 * emu_mem.c: device memory of the emulated driver (the virtual memory
 * management API is in emu_vmm.c; the state both share is in emu_mem.h).
 *
 * Responsible for:
 *   - cuMemAlloc/cuMemAllocPitch/cuMemFree and the allocations behind
 *     cuMemAllocAsync (emu_mem_alloc_device / emu_mem_free_async_complete);
 *   - one memory budget per device (emu_cfg.device_memory, cuMemGetInfo)
 *     charged by every path ("Device memory accounting" below), the default
 *     pool's held memory, release threshold and trim (emu_mem_pool_*);
 *   - graph allocations of allocation and free nodes (emu_gmem_*, at the end);
 *   - pinned and registered host memory (cuMemHostAlloc, cuMemAllocHost,
 *     cuMemFreeHost, cuMemHostRegister/Unregister, cuMemHostGetDevicePointer);
 *   - address ranges and pointer attributes (legacy IPC is emu_ipc.c's);
 *   - the device-range registry: every live allocation, VMM mapping, graph
 *     allocation and pinned host block, findable by any interior address
 *     (emu_mem_find, emu_mem_accessible, emu_mem_extent_ok for the driver's
 *     range checks), used by streams and kernels.
 *
 * Device pointers are host addresses. Every block comes from mmap (never
 * malloc), so freed or unmapped device memory faults when touched.
 *
 * Locking: one mutex, emu_mem_lock, guards everything in `emu_memory` (emu_mem.h): the
 * range registry, the reservation list, the graph allocations, the handle
 * table, the per-device usage counters, the pools' state and the id
 * counters. It is a leaf lock: nothing that may take
 * another emulator lock (emu_inflight_check, emu_streams_sync_all,
 * emu_capture_check_unsafe, emu_violation) is called while it is held. Calls
 * that must check in-flight work validate under the lock, drop it, check,
 * then take it again and validate once more before changing anything.
 */
#include "emu_mem.h"
#include "emu_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

pthread_mutex_t emu_mem_lock = PTHREAD_MUTEX_INITIALIZER;
mem_state emu_memory = { .next_buffer_id = 1, .next_handle_id = 0x1000 };
int emu_mem_hash_oom;

void emu_mem_fork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&emu_mem_lock);
    else pthread_mutex_unlock(&emu_mem_lock);
}

size_t emu_page_size(void)
{
    static size_t ps;              /* atomic: threads may ask first at once (all get the same) */
    size_t v = __atomic_load_n(&ps, __ATOMIC_RELAXED);
    if (!v) {
        v = (size_t)sysconf(_SC_PAGESIZE);
        __atomic_store_n(&ps, v, __ATOMIC_RELAXED);
    }
    return v;
}

size_t emu_round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* ------------------------------------------------------------------------
 * Sorted span vectors (caller holds emu_mem_lock)
 * ---------------------------------------------------------------------- */

/* Index of the first span whose base is >= p. */
size_t emu_span_lower(const span_vec *sv, CUdeviceptr p)
{
    size_t lo = 0, hi = sv->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sv->v[mid]->base < p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The span containing p, or NULL. */
span *emu_span_find(const span_vec *sv, CUdeviceptr p)
{
    size_t i = emu_span_lower(sv, p + 1);
    if (i == 0) return NULL;
    span *s = sv->v[i - 1];
    return p - s->base < s->size ? s : NULL;
}

/* Some span overlapping [lo, hi), or NULL. */
span *emu_span_overlap(const span_vec *sv, CUdeviceptr lo, CUdeviceptr hi)
{
    size_t i = emu_span_lower(sv, lo);
    if (i > 0 && sv->v[i - 1]->base + sv->v[i - 1]->size > lo) return sv->v[i - 1];
    if (i < sv->n && sv->v[i]->base < hi) return sv->v[i];
    return NULL;
}

/* Returns 0, or -1 when out of memory (nothing changed). */
int emu_span_insert(span_vec *sv, span *s)
{
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        span **v = realloc(sv->v, cap * sizeof *v);
        if (!v) return -1;
        sv->v = v;
        sv->cap = cap;
    }
    size_t i = emu_span_lower(sv, s->base);
    memmove(&sv->v[i + 1], &sv->v[i], (sv->n - i) * sizeof *sv->v);
    sv->v[i] = s;
    sv->n++;
    return 0;
}

void emu_span_remove(span_vec *sv, span *s)
{
    size_t i = emu_span_lower(sv, s->base);
    if (i < sv->n && sv->v[i] == s) {
        memmove(&sv->v[i], &sv->v[i + 1], (sv->n - i - 1) * sizeof *sv->v);
        sv->n--;
    }
}

mem_range *emu_range_find(CUdeviceptr p) { return (mem_range *)emu_span_find(&emu_memory.ranges, p); }

/* ------------------------------------------------------------------------
 * Device accounting and plain blocks (caller holds emu_mem_lock where noted)
 * ---------------------------------------------------------------------- */

/* Takes `bytes` of device `dev` if available (emu_mem_lock held). */
int emu_usage_take(int dev, size_t bytes)
{
    if (emu_memory.used[dev] > emu_cfg.device_memory ||
        bytes > emu_cfg.device_memory - emu_memory.used[dev])
        return 0;
    emu_memory.used[dev] += bytes;
    return 1;
}

int emu_charge_take(int dev, size_t bytes)
{
    if (!bytes) return 1;
    pthread_mutex_lock(&emu_mem_lock);
    int ok = emu_usage_take(dev, bytes);
    pthread_mutex_unlock(&emu_mem_lock);
    return ok;
}

void emu_charge_give(int dev, size_t bytes)
{
    if (!bytes) return;
    pthread_mutex_lock(&emu_mem_lock);
    emu_memory.used[dev] -= bytes;
    pthread_mutex_unlock(&emu_mem_lock);
}

/* Device memory accounting (emu_mem_lock held). What each kind costs:
 *   cuMemAlloc, cuMemAllocPitch, cuMemAllocManaged: the bytes rounded up to
 *     whole pages (4 KiB), charged until freed;
 *   CUDA arrays: the bytes of their elements, rounded up the same way;
 *   stream-ordered: the same, from the pool (the device's current one, or
 *     the one named), which first reuses bytes it holds, and never reserves
 *     more than its maxSize; freed bytes stay held (charged) until a
 *     synchronize releases those above the release threshold, or
 *     cuMemPoolTrimTo; a destroyed pool holds nothing;
 *   cuMemCreate: its size (a multiple of the granularity), until released
 *     and unmapped; pinned host memory: nothing. */
static void pool_note_highs(pool_state *ps)
{
    if (ps->used > ps->used_high) ps->used_high = ps->used;
    if (ps->used + ps->held > ps->reserved_high) ps->reserved_high = ps->used + ps->held;
}

static int charge_take(int dev, range_kind kind, size_t len, CUmemoryPool pool)
{
    if (kind == RK_HOST) return 1;
    if (kind == RK_GRAPH) {
        if (!emu_usage_take(dev, len)) return 0;
        emu_memory.graph_used[dev] += len;
        if (emu_memory.graph_used[dev] > emu_memory.graph_high[dev])
            emu_memory.graph_high[dev] = emu_memory.graph_used[dev];
        return 1;
    }
    if (kind != RK_ASYNC) return emu_usage_take(dev, len);
    pool_state *ps = &pool->st;
    size_t reuse = ps->held < len ? ps->held : len;
    if (pool->destroyed) return 0;             /* destroyed since the handle was checked */
    if (pool->max_size && ps->used + ps->held + (len - reuse) > pool->max_size) return 0;
    if (!emu_usage_take(dev, len - reuse)) return 0;
    ps->held -= reuse;
    ps->used += len;
    pool->blocks++;
    pool_note_highs(ps);
    return 1;
}

/* Gives back the len bytes of a block; a stream-ordered one's go to its pool
 * (or to the device if the pool was destroyed), but for `claim` bytes that
 * an allocation took over before the block's free was reached. */
static void charge_give(int dev, range_kind kind, size_t len, CUmemoryPool pool, size_t claim)
{
    if (kind == RK_HOST || kind == RK_IPC || kind == RK_EXT) return;
    if (kind == RK_GRAPH) emu_memory.graph_used[dev] -= len;
    if (kind != RK_ASYNC) { emu_memory.used[dev] -= len; return; }
    pool->st.used -= len;
    pool->blocks--;
    if (pool->destroyed) emu_memory.used[dev] -= len - claim;
    else pool->st.held += len - claim;     /* the pool keeps it */
}

/* Gives held pool bytes back to the device until the pool reserves at most
 * `keep` (it cannot give what is in use). */
static void pool_release(CUmemoryPool pool, uint64_t keep)
{
    pool_state *ps = &pool->st;
    uint64_t reserved = ps->used + ps->held;
    if (reserved <= keep) return;
    size_t rel = reserved - keep < ps->held ? (size_t)(reserved - keep) : ps->held;
    ps->held -= rel;
    emu_memory.used[pool->device] -= rel;
}

/* Unlinks a destroyed pool whose last allocation went (emu_mem_lock held):
 * the caller gives its handle memory back once the lock is dropped. */
static void pool_unlink(CUmemoryPool pool)
{
    for (CUmemoryPool *pp = &emu_memory.pools; *pp; pp = &(*pp)->next)
        if (*pp == pool) { *pp = pool->next; break; }
}

static void *map_anon(size_t bytes, int prot)
{
    void *p = mmap(NULL, bytes, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Allocates and registers a plain block (device memory or pinned host).
 * Device blocks count against dev's memory. Nothing changes on failure. */
static CUresult block_alloc(CUdeviceptr *out, size_t bytes, range_kind kind, int dev,
                            CUcontext ctx, unsigned host_flags, CUmemoryPool pool)
{
    size_t len = emu_round_up(bytes, emu_page_size());
    if (bytes == 0 || len < bytes) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= MEM_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;

    mem_range *r = calloc(1, sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    int ok = charge_take(dev, kind, len, pool);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!ok) { free(r); return CUDA_ERROR_OUT_OF_MEMORY; }

    void *p = map_anon(len, PROT_READ | PROT_WRITE);
    pthread_mutex_lock(&emu_mem_lock);
    if (p) {
        *r = (mem_range){ .s = { (CUdeviceptr)p, bytes }, .mapped = len, .kind = kind,
                          .device = dev, .ctx = ctx, .buffer_id = emu_memory.next_buffer_id++,
                          .host_flags = host_flags, .pool = pool };
        if (emu_span_insert(&emu_memory.ranges, &r->s) == 0) {
            pthread_mutex_unlock(&emu_mem_lock);
            *out = (CUdeviceptr)p;
            return CUDA_SUCCESS;
        }
    }
    charge_give(dev, kind, len, pool, 0);
    pthread_mutex_unlock(&emu_mem_lock);
    if (p) munmap(p, len);
    free(r);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void gmem_unback(gmem *g);

/* Unregisters r (emu_mem_lock held); the caller then calls block_release.
 * A graph allocation is unbacked here, under the lock, so a launch that
 * re-arms it (emu_gmem_arm) sees it either allocated or not, never a range
 * already detached but still marked allocated. */
static void block_detach(mem_range *r)
{
    emu_span_remove(&emu_memory.ranges, &r->s);
    charge_give(r->device, r->kind, r->mapped, r->pool, r->claim);   /* claimed bytes: the claimer's */
    if (r->kind == RK_GRAPH) gmem_unback(r->g);
    if (r->kind == RK_ASYNC && r->pool->destroyed && !r->pool->blocks) {
        pool_unlink(r->pool);
        r->pool_gone = 1;
    }
}

static void block_release(mem_range *r)
{
    if (r->free_stream) emu_stream_unref(r->free_stream);
    if (r->kind != RK_GRAPH && !r->registered)     /* a graph allocation: unbacked by block_detach */
        munmap((void *)(r->s.base - r->map_off), r->mapped);
    if (r->kind == RK_ALLOC) emu_ipc_alloc_gone(r->s.base, r->buffer_id);
    if (r->pool_gone) emu_handle_mem_put(EMU_K_POOL, r->pool);   /* a destroyed pool's last block */
    free(r);
}

void emu_mem_ctx_destroyed(CUcontext ctx)
{
    /* Collect under the lock, release (munmap) outside it. */
    mem_range **dead = NULL;
    size_t n = 0;
    pthread_mutex_lock(&emu_mem_lock);
    dead = calloc(emu_memory.ranges.n ? emu_memory.ranges.n : 1, sizeof *dead);
    for (size_t i = 0; dead && i < emu_memory.ranges.n;) {
        mem_range *r = (mem_range *)emu_memory.ranges.v[i];
        /* cuCtxDestroy: "will not destroy memory allocations by cuMemCreate(),
         * cuMemAllocAsync() and cuMemAllocFromPoolAsync()". */
        if (r->ctx == ctx && (r->kind == RK_ALLOC || r->kind == RK_MANAGED || r->kind == RK_HOST ||
                              r->kind == RK_IPC || r->kind == RK_EXT)) {
            block_detach(r);        /* removes entry i: do not advance */
            dead[n++] = r;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&emu_mem_lock);
    if (!dead) {
        emu_log("out of host memory: allocations of context %p are not freed", (void *)ctx);
        return;
    }
    for (size_t i = 0; i < n; i++) block_release(dead[i]);
    free(dead);
}

/* Which plain blocks a free call accepts: kinds, and for host memory whether
 * it was registered (FREE_REGISTERED: cuMemHostUnregister) or allocated. */
enum { FREE_DEVICE = 1 << RK_ALLOC | 1 << RK_MANAGED | 1 << RK_ASYNC | 1 << RK_GRAPH | 1 << RK_EXT, FREE_HOST = 1 << RK_HOST,
       FREE_REGISTERED = 1 << 16 };

/* Whether r was already freed in stream order (a graph allocation keeps
 * that flag in its gmem, across its incarnations) (emu_mem_lock held). */
static int block_free_pending(const mem_range *r)
{
    return r->kind == RK_GRAPH ? r->g->free_pending : r->free_pending;
}

/* The block starting exactly at p that `kinds` accepts (emu_mem_lock held). */
static mem_range *block_at(CUdeviceptr p, unsigned kinds)
{
    mem_range *r = emu_range_find(p);
    if (!r || r->s.base != p || !(kinds & (1u << r->kind))) return NULL;
    if (r->kind == RK_HOST && !r->registered != !(kinds & FREE_REGISTERED)) return NULL;
    return r;
}

/* Frees the block at p for `call`: validates, optionally waits for ctx's
 * streams (sync_kinds: kinds that get the driver's implicit synchronization),
 * checks in-flight work, then releases. */
static CUresult block_free(const char *call, CUdeviceptr p, unsigned kinds,
                           unsigned sync_kinds, CUcontext ctx)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = block_at(p, kinds);
    if (r && block_free_pending(r)) r = NULL;     /* already freed in stream order */
    range_kind kind = r ? r->kind : 0;
    size_t size = r ? r->s.size : 0;
    pthread_mutex_unlock(&emu_mem_lock);
    if (!r) return CUDA_ERROR_INVALID_VALUE;

    if (sync_kinds & (1u << kind)) {
        emu_streams_sync_all(ctx);
        CUresult sticky = emu_sticky_now(ctx);
        if (sticky != CUDA_SUCCESS) return sticky;    /* the synchronization failed: nothing freed */
    }
    emu_inflight_check(call, p, size);

    pthread_mutex_lock(&emu_mem_lock);
    r = block_at(p, kinds);     /* another thread may have freed it meanwhile */
    if (r) block_detach(r);
    pthread_mutex_unlock(&emu_mem_lock);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    block_release(r);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Internal interface (emu_internal.h)
 * ---------------------------------------------------------------------- */

/* A device range, or else a graph allocation's reservation: work may name
 * a graph allocation before a launch allocates it (emu_mem_accessible then
 * tells whether it is allocated). */
int emu_mem_find(CUdeviceptr p, emu_range *out)
{
    pthread_mutex_lock(&emu_mem_lock);
    span *r = (span *)emu_range_find(p);
    if (!r) r = emu_span_find(&emu_memory.gmems, p);
    if (r && out) *out = (emu_range){ r->base, r->size };
    pthread_mutex_unlock(&emu_mem_lock);
    return r != NULL;
}

CUcontext emu_mem_alloc_ctx(CUdeviceptr p)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    CUcontext c = r && (r->kind == RK_ALLOC || r->kind == RK_MANAGED || r->kind == RK_HOST) ? r->ctx : NULL;
    pthread_mutex_unlock(&emu_mem_lock);
    return c;
}

/* The device p's memory lives on (a VMM mapping: its handle's location; a
 * graph allocation: its pool's device); -1 for host memory or none. */
int emu_mem_operand_device(CUdeviceptr p)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    gmem *g = r ? NULL : (gmem *)emu_span_find(&emu_memory.gmems, p);
    int d = r ? (r->kind == RK_HOST ? -1 : r->device) : g ? g->device : -1;
    pthread_mutex_unlock(&emu_mem_lock);
    return d;
}

int emu_mem_accessible(CUdeviceptr p, size_t n, int dev)
{
    int ok = 1;
    CUdeviceptr end = p + n;
    if (end < p || dev < 0 || dev >= MEM_MAX_DEVICES) return 0;
    pthread_mutex_lock(&emu_mem_lock);
    for (CUdeviceptr pos = p; pos < end && ok;) {
        mem_range *r = emu_range_find(pos);
        if (!r || (r->kind == RK_MAP && r->access[dev] != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) ||
            (r->kind == RK_EXT && r->ext_gone))
            ok = 0;
        else
            pos = r->s.base + r->s.size;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return ok;
}

int emu_mem_pool_open(CUdeviceptr p, int dev)
{
    if (dev < 0 || dev >= MEM_MAX_DEVICES) return 0;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    int ok = !r || r->kind != RK_ASYNC || r->pool->access[dev] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    pthread_mutex_unlock(&emu_mem_lock);
    return ok;
}

int emu_mem_extent_ok(CUdeviceptr p, size_t n)
{
    CUdeviceptr end = p + n;
    if (end < p) return 0;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    span *g = r ? NULL : emu_span_find(&emu_memory.gmems, p);
    CUdeviceptr reach = r ? r->s.base + r->s.size : g ? g->base + g->size : 0;
    /* VMM: a mapping may be followed by another one right after it (memory
     * grown by mapping more of a reservation is one buffer). */
    while (r && r->kind == RK_MAP && reach < end) {
        mem_range *next = emu_range_find(reach);
        if (!next || next->kind != RK_MAP || next->s.base != reach) break;
        reach = next->s.base + next->s.size;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return (r || g) && end <= reach;
}

int emu_mem_managed_find(CUdeviceptr p, size_t n, emu_range *out)
{
    CUdeviceptr end = p + n;
    if (end < p) return 0;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    int ok = r && r->kind == RK_MANAGED && end <= r->s.base + emu_round_up(r->s.size, emu_page_size());
    if (ok && out) *out = (emu_range){ r->s.base, r->s.size };
    pthread_mutex_unlock(&emu_mem_lock);
    return ok;
}

void emu_mem_copy(void *dst, const void *src, size_t n)
{
    if (n) memmove(dst, src, n);
}

/* ------------------------------------------------------------------------
 * Claims. cuMemAllocAsync may take memory a cuMemFreeAsync on any stream
 * released but has not reached yet, by making the allocating stream wait
 * for that free: CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, "Allow
 * cuMemAllocAsync to insert new stream dependencies in order to establish
 * the stream ordering required to reuse a piece of memory released by
 * cuFreeAsync (default enabled)". Emulated only where the allocation would
 * otherwise fail for want of memory: the bytes missing are claimed from
 * pending frees (lowest address first, CLAIMS_MAX at most), the allocating stream waits for
 * each claimed free's work, and a claimed block's bytes go to the claimer,
 * not to the pool, when its free is reached (block_detach).
 * ---------------------------------------------------------------------- */

/* Bytes an allocation of len from pool lacks beyond the pool's held bytes
 * and what it may still take: the device's free memory, and below its
 * maxSize (emu_mem_lock held). */
static size_t claim_need(CUmemoryPool pool, size_t len)
{
    size_t held = pool->st.held, used = emu_memory.used[pool->device];
    size_t rest = len - (held < len ? held : len);
    size_t avail = used < emu_cfg.device_memory ? emu_cfg.device_memory - used : 0;
    if (pool->max_size) {
        size_t reserved = pool->st.used + held;
        size_t room = reserved < pool->max_size ? pool->max_size - reserved : 0;
        if (room < avail) avail = room;
    }
    return rest > avail ? rest - avail : 0;
}

/* A pending free of pool whose bytes are not all claimed (emu_mem_lock held). */
static int claimable(const mem_range *r, CUmemoryPool pool)
{
    return r->kind == RK_ASYNC && r->pool == pool && r->free_pending && r->free_stream &&
           r->claim < r->mapped;
}

#define CLAIMS_MAX 64

typedef struct claim_set {
    size_t n;
    CUdeviceptr base[CLAIMS_MAX];
    unsigned long long id[CLAIMS_MAX];
    dep deps[CLAIMS_MAX];
    size_t ndeps;
} claim_set;

/* Pass 1 (emu_mem_lock held): the pending frees that cover need, oldest
 * address first, with a referenced dependency on each free's work (none on
 * s itself, which runs them in order). 0 if they do not cover it. */
static int claims_find(claim_set *cs, CUmemoryPool pool, size_t need, emu_stream *s)
{
    size_t have = 0;
    cs->n = cs->ndeps = 0;
    for (size_t i = 0; i < emu_memory.ranges.n && have < need && cs->n < CLAIMS_MAX; i++) {
        mem_range *r = (mem_range *)emu_memory.ranges.v[i];
        if (!claimable(r, pool)) continue;
        have += r->mapped - r->claim;
        cs->base[cs->n] = r->s.base;
        cs->id[cs->n++] = r->buffer_id;
        if (r->free_stream != s) {
            emu_stream_ref(r->free_stream);
            cs->deps[cs->ndeps++] = (dep){ r->free_stream, r->free_seq };
        }
    }
    return have >= need;
}

/* Pass 2 (emu_mem_lock held): claims need bytes from the frees found in
 * pass 1 that are still pending (those reached since gave their bytes to
 * the pool: need was recomputed). 0 if they no longer cover it. */
static int claims_take(const claim_set *cs, CUmemoryPool pool, size_t need)
{
    size_t have = 0;
    for (size_t k = 0; k < cs->n; k++) {
        mem_range *r = emu_range_find(cs->base[k]);
        if (r && r->buffer_id == cs->id[k] && claimable(r, pool)) have += r->mapped - r->claim;
    }
    if (have < need) return 0;
    for (size_t k = 0; k < cs->n && need; k++) {
        mem_range *r = emu_range_find(cs->base[k]);
        if (!r || r->buffer_id != cs->id[k] || !claimable(r, pool)) continue;
        size_t take = r->mapped - r->claim < need ? r->mapped - r->claim : need;
        r->claim += take;
        need -= take;
    }
    return 1;
}

static CUresult alloc_claiming(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, CUcontext ctx,
                               emu_stream *s)
{
    int dev = pool->device;
    size_t len = emu_round_up(bytes, emu_page_size());
    claim_set *cs = calloc(1, sizeof *cs);
    if (!cs) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    size_t need = claim_need(pool, len);
    int found = pool->st.reuse[2] && need && claims_find(cs, pool, need, s);
    pthread_mutex_unlock(&emu_mem_lock);
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!found) {
        for (size_t k = 0; k < cs->ndeps; k++) emu_stream_unref(cs->deps[k].s);
        free(cs);
        return rc;
    }
    /* The wait first (it consumes the references): waiting for a free that
     * is then not claimed (reached meanwhile) only waits for queued work. */
    if ((rc = emu_stream_push_wait(s, cs->deps, cs->ndeps, "cuMemAllocAsync")) != CUDA_SUCCESS) {
        free(cs);
        return rc;
    }
    mem_range *r = calloc(1, sizeof *r);
    void *p = r ? map_anon(len, PROT_READ | PROT_WRITE) : NULL;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    pool_state *ps = &pool->st;
    need = claim_need(pool, len);
    if (p && !pool->destroyed && claims_take(cs, pool, need)) {
        size_t reuse = ps->held < len ? ps->held : len;
        *r = (mem_range){ .s = { (CUdeviceptr)p, bytes }, .mapped = len, .kind = RK_ASYNC,
                          .device = dev, .ctx = ctx, .buffer_id = emu_memory.next_buffer_id++,
                          .pool = pool };
        if (emu_span_insert(&emu_memory.ranges, &r->s) == 0) {
            emu_memory.used[dev] += len - reuse - need;
            ps->held -= reuse;
            ps->used += len;
            pool->blocks++;
            pool_note_highs(ps);
            *out = (CUdeviceptr)p;
            rc = CUDA_SUCCESS;
        }
        /* else: the claims stay (their bytes then go to no one: a leak of
         * the accounting, on out of host memory only) */
    }
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc != CUDA_SUCCESS) {
        if (p) munmap(p, len);
        free(r);
    }
    free(cs);
    return rc;
}

CUresult emu_mem_alloc_device(CUdeviceptr *out, size_t bytes, int device, CUmemoryPool pool,
                              emu_stream *s, const char *call)
{
    (void)call;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (device < 0 || device >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    if (!pool || pool->device != device) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = block_alloc(out, bytes, RK_ASYNC, device, emu_ctx_current(), 0, pool);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && s && bytes && emu_round_up(bytes, emu_page_size()) >= bytes)
        rc = alloc_claiming(out, bytes, pool, emu_ctx_current(), s);
    return rc;
}

CUresult emu_mem_free_async_begin(CUdeviceptr p, uint64_t *token)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = block_at(p, 1u << RK_ASYNC | 1u << RK_GRAPH);
    CUresult rc = r && !block_free_pending(r) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    *token = 0;
    if (rc == CUDA_SUCCESS && r->kind == RK_GRAPH) {
        r->g->free_pending = 1;
        *token = r->g->gen;
    } else if (rc == CUDA_SUCCESS) {
        r->free_pending = 1;
        *token = r->buffer_id;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return rc;
}

void emu_mem_free_async_queued(CUdeviceptr p, emu_stream *s, uint64_t token, uint64_t seq)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    /* the free may have been reached already (then r is gone, or another
     * block that took the address: the buffer id tells) */
    if (r && r->kind == RK_ASYNC && r->s.base == p && r->buffer_id == token && r->free_pending &&
        !r->free_stream) {
        emu_stream_ref(s);
        r->free_stream = s;
        r->free_seq = seq;
    }
    pthread_mutex_unlock(&emu_mem_lock);
}

void emu_mem_pools_sync(void)
{
    pthread_mutex_lock(&emu_mem_lock);
    for (CUmemoryPool p = emu_memory.pools; p; p = p->next) pool_release(p, p->st.threshold);
    pthread_mutex_unlock(&emu_mem_lock);
}

void emu_mem_pool_trim(CUmemoryPool pool, size_t keep)
{
    pthread_mutex_lock(&emu_mem_lock);
    pool_release(pool, keep);
    pthread_mutex_unlock(&emu_mem_lock);
}

void emu_mem_pool_add(CUmemoryPool pool, int device, int created, size_t max_size)
{
    pthread_mutex_lock(&emu_mem_lock);
    *pool = (struct CUmemPoolHandle_st){ .device = device, .created = created, .max_size = max_size,
                                         .st = { .reuse = { 1, 1, 1 } }, .next = emu_memory.pools };
    pool->access[device] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    emu_memory.pools = pool;
    pthread_mutex_unlock(&emu_mem_lock);
}

int emu_mem_pool_destroy(CUmemoryPool pool)
{
    pthread_mutex_lock(&emu_mem_lock);
    if (pool->destroyed) {                      /* destroyed meanwhile by another thread */
        pthread_mutex_unlock(&emu_mem_lock);
        return -1;
    }
    pool->destroyed = 1;
    pool_release(pool, 0);                      /* what it holds goes back now */
    if (emu_memory.current[pool->device] == pool) emu_memory.current[pool->device] = NULL;
    int gone = pool->blocks == 0;
    if (gone) pool_unlink(pool);
    pthread_mutex_unlock(&emu_mem_lock);
    return gone;
}

CUmemoryPool emu_mem_pool_current(int dev, CUmemoryPool set, int change)
{
    pthread_mutex_lock(&emu_mem_lock);
    if (change) emu_memory.current[dev] = set;
    CUmemoryPool p = emu_memory.current[dev];
    pthread_mutex_unlock(&emu_mem_lock);
    return p;
}

CUresult emu_mem_pool_access(CUmemoryPool pool, int dev, CUmemAccess_flags *flags, int set)
{
    pthread_mutex_lock(&emu_mem_lock);
    if (set) pool->access[dev] = *flags;
    else *flags = pool->access[dev];
    pthread_mutex_unlock(&emu_mem_lock);
    return CUDA_SUCCESS;
}

CUresult emu_mem_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, int set, void *value)
{
    CUresult rc = CUDA_SUCCESS;
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_mem_lock);
    pool_state *ps = &pool->st;
    cuuint64_t v64 = 0;
    if (set && attr >= CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) memcpy(&v64, value, sizeof v64);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
        int *slot = &ps->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        if (set) *slot = *(const int *)value != 0;
        else *(int *)value = *slot;
        break;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set) ps->threshold = v64;
        else v64 = ps->threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        if (set) rc = CUDA_ERROR_INVALID_VALUE;
        else v64 = attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? ps->used : ps->used + ps->held;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:    /* setting resets it; only 0 is legal */
        if (set && v64) rc = CUDA_ERROR_INVALID_VALUE;
        else if (set) ps->reserved_high = ps->used + ps->held;
        else v64 = ps->reserved_high;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (set && v64) rc = CUDA_ERROR_INVALID_VALUE;
        else if (set) ps->used_high = ps->used;
        else v64 = ps->used_high;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc == CUDA_SUCCESS && !set && attr >= CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) memcpy(value, &v64, sizeof v64);
    return rc;
}

void emu_mem_free_async_complete(CUdeviceptr p, uint64_t token)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = block_at(p, 1u << RK_ASYNC | 1u << RK_GRAPH);
    if (r && r->kind == RK_GRAPH && r->g->gen != token) {   /* reallocated since: not ours */
        pthread_mutex_unlock(&emu_mem_lock);
        return;
    }
    if (r) block_detach(r);
    pthread_mutex_unlock(&emu_mem_lock);
    if (r)
        block_release(r);
    else
        emu_violation("cuMemFreeAsync", "0x%llx is not a live stream-ordered allocation "
                      "(double free?)", (unsigned long long)p);
}

/* ------------------------------------------------------------------------
 * Device memory
 * ---------------------------------------------------------------------- */

EMU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    EMU_ENTRY_INIT();
    CUresult rc = emu_capture_check_unsafe(__func__);
    if (rc != CUDA_SUCCESS) return rc;
    CUcontext ctx;
    if ((rc = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return rc;
    if (!dptr) return CUDA_ERROR_INVALID_VALUE;
    return block_alloc(dptr, bytesize, RK_ALLOC, ctx->device, ctx, 0, NULL);
}

/* cuMemAllocPitch: the pitch is the width rounded up to EMU_PITCH_ALIGN bytes
 * (which matches the device's texture pitch alignment, as documented);
 * ElementSizeBytes must be 4, 8 or 16; a zero width or height is refused.
 * Charged like cuMemAlloc(pitch * height). */
#define EMU_PITCH_ALIGN 512
EMU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                       unsigned int ElementSizeBytes)
{
    EMU_ENTRY_INIT();
    CUresult rc = emu_capture_check_unsafe(__func__);
    if (rc != CUDA_SUCCESS) return rc;
    CUcontext ctx;
    if ((rc = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return rc;
    if (!dptr || !pPitch || !WidthInBytes || !Height ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = emu_round_up(WidthInBytes, EMU_PITCH_ALIGN);
    if (pitch < WidthInBytes || Height > SIZE_MAX / pitch) return CUDA_ERROR_INVALID_VALUE;
    if ((rc = block_alloc(dptr, pitch * Height, RK_ALLOC, ctx->device, ctx, 0, NULL)) == CUDA_SUCCESS) *pPitch = pitch;
    return rc;
}

/* cuMemAllocManaged: "Allocates bytesize bytes of managed memory on the
 * device ... If bytesize is 0, cuMemAllocManaged returns
 * CUDA_ERROR_INVALID_VALUE ... flags must be one of CU_MEM_ATTACH_GLOBAL or
 * CU_MEM_ATTACH_HOST ... Memory allocated with cuMemAllocManaged should be
 * released with cuMemFree." All emulated memory is host memory, so managed
 * memory is a block like cuMemAlloc's that the host may also use: it lives
 * on the current context's device, is charged to its budget (no
 * oversubscription, no migration), is reachable from every device and
 * stream whatever the flag (the device reports CONCURRENT_MANAGED_ACCESS),
 * and goes with its context (cuCtxDestroy lists cuMemAllocManaged memory
 * among the context's resources). */
EMU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    EMU_ENTRY_INIT();
    CUresult rc = emu_capture_check_unsafe(__func__);
    if (rc != CUDA_SUCCESS) return rc;
    CUcontext ctx;
    if ((rc = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return rc;
    if (!dptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) return CUDA_ERROR_INVALID_VALUE;
    return block_alloc(dptr, bytesize, RK_MANAGED, ctx->device, ctx, 0, NULL);
}

/* cuMemAlloc and managed memory get the driver's implicit synchronization;
 * stream-ordered allocations are freed at once (the driver documents no
 * synchronization). */
EMU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    EMU_ENTRY_INIT();
    CUresult rc = emu_capture_check_unsafe(__func__);
    if (rc != CUDA_SUCCESS) return rc;
    CUcontext ctx;
    if ((rc = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return rc;
    return block_free(__func__, dptr, FREE_DEVICE, 1u << RK_ALLOC | 1u << RK_MANAGED | 1u << RK_EXT, ctx);
}

EMU_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(dptr);
    if (r && r->kind == RK_HOST) r = NULL;
    if (r) {
        if (pbase) *pbase = r->s.base;
        if (psize) *psize = r->s.size;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EMU_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_mem_lock);
    *free_bytes = emu_cfg.device_memory - emu_memory.used[ctx->device];
    pthread_mutex_unlock(&emu_mem_lock);
    *total = emu_cfg.device_memory;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------------
 * Pinned host memory
 * ---------------------------------------------------------------------- */

static CUresult host_alloc(const char *call, void **pp, size_t bytesize, unsigned flags)
{
    CUresult rc = emu_capture_check_unsafe(call);
    if (rc != CUDA_SUCCESS) return rc;
    CUcontext ctx;
    if ((rc = emu_ctx_require(&ctx)) != CUDA_SUCCESS) return rc;
    if (!pp || (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                                    CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p;
    if ((rc = block_alloc(&p, bytesize, RK_HOST, ctx->device, ctx, flags, NULL)) == CUDA_SUCCESS)
        *pp = (void *)p;
    return rc;
}

EMU_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return host_alloc(__func__, pp, bytesize, Flags);
}

EMU_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    EMU_ENTRY_INIT();
    return host_alloc(__func__, pp, bytesize, 0);
}

/* Like cudaFreeHost, waits for the current context's work first; like
 * cuMemFree, it is a potentially unsafe call during capture. */
EMU_EXPORT CUresult cuMemFreeHost(void *p)
{
    EMU_ENTRY_INIT();
    CUresult rc = emu_capture_check_unsafe(__func__);
    if (rc != CUDA_SUCCESS) return rc;
    CUcontext ctx = emu_ctx_current();
    return block_free(__func__, (CUdeviceptr)p, FREE_HOST, FREE_HOST, ctx);
}

EMU_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    if (!pdptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find((CUdeviceptr)p);
    int ok = r && r->kind == RK_HOST;
    pthread_mutex_unlock(&emu_mem_lock);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    /* unified addressing and CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: the
     * device pointer is the host pointer (an interior pointer stays one) */
    *pdptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

/* cuMemHostRegister (driver API, Memory Management): page-locks an existing
 * host range and maps it for the device; the device pointer equals the host
 * pointer (the emulated device reports
 * CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM). A range that
 * overlaps registered or pinned memory: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED.
 * READ_ONLY (the device does not report READ_ONLY_HOST_REGISTER_SUPPORTED) and
 * IOMEMORY: CUDA_ERROR_NOT_SUPPORTED. The memory stays the program's: it is
 * never unmapped by the emulator. */
static CUresult host_register(void *p, size_t bytesize, unsigned flags)
{
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    const unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    CUdeviceptr b = (CUdeviceptr)p;
    if (!p || !bytesize || (flags & ~known) || b + bytesize < b) return CUDA_ERROR_INVALID_VALUE;
    if (flags & (CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)) return CUDA_ERROR_NOT_SUPPORTED;
    mem_range *r = calloc(1, sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    *r = (mem_range){ .s = { b, bytesize }, .mapped = bytesize, .kind = RK_HOST, .device = ctx->device,
                      .ctx = ctx, .host_flags = flags, .registered = 1 };
    pthread_mutex_lock(&emu_mem_lock);
    if (emu_span_overlap(&emu_memory.ranges, b, b + bytesize)) rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    else if (emu_span_insert(&emu_memory.ranges, &r->s) != 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else r->buffer_id = emu_memory.next_buffer_id++;
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc != CUDA_SUCCESS) free(r);
    return rc;
}

EMU_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return host_register(p, bytesize, Flags);
}

EMU_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    EMU_ENTRY_INIT();
    return host_register(p, bytesize, Flags);
}

/* The base address given to cuMemHostRegister; anything else:
 * CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED. Waits for the context's work, like
 * cuMemFreeHost, and reports queued work that still uses the range. */
EMU_EXPORT CUresult cuMemHostUnregister(void *p)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    CUresult rc = emu_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    rc = block_free(__func__, (CUdeviceptr)p, FREE_HOST | FREE_REGISTERED, FREE_HOST, ctx);
    return rc == CUDA_ERROR_INVALID_VALUE ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED : rc;
}

/* ------------------------------------------------------------------------
 * Legacy IPC support (emu_ipc.c owns legacy IPC; emu_internal.h)
 * ---------------------------------------------------------------------- */

int emu_mem_alloc_with(CUdeviceptr p, int (*fn)(const emu_alloc_view *, void *), void *u,
                       emu_alloc_view *out)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    int rc = r && r->kind == RK_ALLOC ? 0 : -1;
    if (rc == 0) {
        *out = (emu_alloc_view){ r->s.base, r->s.size, r->mapped, r->device, r->buffer_id };
        if (fn) rc = fn(out, u);
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return rc;
}

CUresult emu_mem_ipc_add(const emu_alloc_view *v, CUcontext ctx, unsigned long long *id)
{
    mem_range *r = calloc(1, sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    *r = (mem_range){ .s = { v->base, v->size }, .mapped = v->mapped, .kind = RK_IPC,
                      .device = v->device, .ctx = ctx, .buffer_id = emu_memory.next_buffer_id++ };
    int bad = emu_span_insert(&emu_memory.ranges, &r->s);
    if (!bad) *id = r->buffer_id;
    pthread_mutex_unlock(&emu_mem_lock);
    if (bad) free(r);
    return bad ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

int emu_mem_ipc_find(CUdeviceptr base, unsigned long long id, int remove)
{
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(base);
    int ok = r && r->kind == RK_IPC && r->s.base == base && r->buffer_id == id;
    if (ok && remove) block_detach(r);
    pthread_mutex_unlock(&emu_mem_lock);
    if (ok && remove) block_release(r);
    return ok;
}

/* ------------------------------------------------------------------------
 * Pointer attributes
 * ---------------------------------------------------------------------- */

/* What is known about a pointer, copied out under emu_mem_lock. */
typedef struct ptr_info {
    CUdeviceptr p;              /* the pointer asked about */
    int in_range;               /* r holds the device range containing p */
    int in_resv;                /* p lies in a VMM reservation (mapped or not) */
    mem_range r;
    span resv;
    unsigned long long allowed_types;
    unsigned long long block_id;
    int rdma;                   /* VMM: allocFlags.gpuDirectRDMACapable */
} ptr_info;

static void ptr_lookup(CUdeviceptr p, ptr_info *pi)
{
    memset(pi, 0, sizeof *pi);
    pi->p = p;
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(p);
    if (r) {
        pi->in_range = 1;
        pi->r = *r;
        pi->block_id = r->kind == RK_MAP ? r->handle->block_id : r->buffer_id;
        if (r->kind == RK_MAP) pi->allowed_types = r->handle->prop.requestedHandleTypes;
        if (r->kind == RK_MAP) pi->rdma = r->handle->prop.allocFlags.gpuDirectRDMACapable != 0;
    }
    span *rs = emu_span_find(&emu_memory.resvs, p);
    if (rs) { pi->in_resv = 1; pi->resv = *rs; }
    pthread_mutex_unlock(&emu_mem_lock);
}

/* Whether a NIC could register the memory for GPUDirect RDMA
 * (IS_GPU_DIRECT_RDMA_CAPABLE, cudaemu_rdma_capable). The device reports
 * GPU_DIRECT_RDMA_SUPPORTED: cuMemAlloc memory is capable; VMM memory if
 * cuMemCreate asked for it (allocFlags); pool and host memory are not. */
static int ptr_rdma(const ptr_info *pi)
{
    const mem_range *r = &pi->r;
    return pi->in_range && (r->kind == RK_ALLOC || r->kind == RK_IPC || (r->kind == RK_MAP && pi->rdma));
}

/* Evaluates attribute `a` for pi: sets *size (bytes the caller's data holds:
 * 4 or 8) and *val. Returns 1 if the pointer has the attribute, 0 if it does
 * not (foreign pointer, host pointer of device memory, ...), -1 if the
 * attribute is unknown to the emulator. */
static int ptr_attr(const ptr_info *pi, CUpointer_attribute a, size_t *size,
                    unsigned long long *val)
{
    const mem_range *r = &pi->r;
    int in = pi->in_range, map = in && r->kind == RK_MAP;
    int in_any = in || pi->in_resv;
    *size = 4;
    *val = 0;
    switch (a) {
    /* VMM and stream-ordered memory have no context: NULL (Programming
     * Guide, Stream-Ordered Memory Allocator, "Pointer Attributes"). */
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *size = sizeof(CUcontext); *val = r->kind == RK_ASYNC || r->kind == RK_GRAPH ? 0 : (uintptr_t)r->ctx;
        return in;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *val = r->kind == RK_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE; return in;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *size = sizeof(CUdeviceptr); *val = pi->p; return in;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *size = sizeof(void *); *val = pi->p; return in && (r->kind == RK_HOST || r->kind == RK_MANAGED);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *size = 8; *val = r->buffer_id; return in;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *val = r->kind == RK_MANAGED; return in;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return in;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *val = ptr_rdma(pi); return in;
    /* 0 where never set, and always for memory that refuses the setter
     * (VMM, pool, graph, external: cuPointerSetAttribute). */
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *val = r->sync_memops != 0; return in;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:   /* NULL unless from a pool */
        *size = sizeof(CUmemoryPool); *val = r->kind == RK_ASYNC ? (uintptr_t)r->pool : 0; return in;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *val = (unsigned)r->device; return in;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *val = r->kind == RK_ALLOC; return in;
    /* For VMM memory the driver reports the reservation here. */
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *size = sizeof(CUdeviceptr); *val = pi->in_resv ? pi->resv.base : r->s.base; return in_any;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *size = sizeof(size_t); *val = pi->in_resv ? pi->resv.size : r->s.size; return in_any;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *val = in; return in_any;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *size = 8; *val = pi->allowed_types; return in;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
        CUcontext cur = emu_ctx_current();
        int dev = cur ? cur->device : r->device;
        *val = map ? (unsigned)r->access[dev] : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        return in;
    }
    /* "the actual underlying mapping": a plain block is mapped whole pages
     * (the size its memory is charged, block_alloc). */
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *size = sizeof(size_t); *val = r->mapped; return in;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *size = sizeof(void *); *val = r->s.base; return in;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *size = 8; *val = pi->block_id; return in;
    default:
        return -1;
    }
}

static void attr_store(void *data, size_t size, unsigned long long val)
{
    if (size == 4) {
        uint32_t v = (uint32_t)val;
        memcpy(data, &v, 4);
    } else {
        memcpy(data, &val, 8);
    }
}

EMU_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    EMU_ENTRY_INIT();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    ptr_info pi;
    ptr_lookup(ptr, &pi);
    size_t size;
    unsigned long long val;
    if (ptr_attr(&pi, attribute, &size, &val) != 1) return CUDA_ERROR_INVALID_VALUE;
    attr_store(data, size, val);
    return CUDA_SUCCESS;
}

/* Unlike the singular call, a pointer lacking an attribute gets its default
 * (zero / NULL) and the call succeeds; only unknown attributes fail. */
EMU_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                           void **data, CUdeviceptr ptr)
{
    EMU_ENTRY_INIT();
    if (numAttributes == 0 || !attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    ptr_info pi;
    ptr_lookup(ptr, &pi);
    size_t size;
    unsigned long long val;
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i] || ptr_attr(&pi, attributes[i], &size, &val) < 0)
            return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++) {
        int have = ptr_attr(&pi, attributes[i], &size, &val);
        attr_store(data[i], size, have ? val : 0);
    }
    return CUDA_SUCCESS;
}

/* The memory whose SYNC_MEMOPS the driver sets: cuMemAlloc(Pitch) blocks,
 * blocks opened by cuIpcOpenMemHandle, managed memory and (the emulator's
 * reading: cuPointerSetAttribute names them in its "see also") pinned host
 * memory. VMM mappings refuse it (CUDA_ERROR_NOT_SUPPORTED, UCX issue 9895,
 * libfabric issue 12853); pool and graph memory too (the emulator's reading:
 * the driver backs them with VMM), and buffers mapped onto external memory
 * (the emulator's reading). */
static int sync_memops_settable(range_kind k)
{
    return k == RK_ALLOC || k == RK_IPC || k == RK_MANAGED || k == RK_HOST;
}

/* "When set, the region of memory that ptr points to is guaranteed to always
 * synchronize memory operations that are synchronous. If there are some
 * previously initiated synchronous memory operations that are pending when
 * this attribute is set, the function does not return until those memory
 * operations are complete": those that returned early
 * (CUDAEMU_SYNC_EARLY_US, emu_copy.c) are waited for, all of them. The flag
 * is the whole allocation's and goes with it (cuMemFree). */
EMU_EXPORT CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    EMU_ENTRY_INIT();
    if (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
    unsigned int v;
    memcpy(&v, value, sizeof v);        /* "a pointer to an unsigned integer" */
    pthread_mutex_lock(&emu_mem_lock);
    mem_range *r = emu_range_find(ptr);
    CUresult rc = !r ? CUDA_ERROR_INVALID_VALUE
                : !sync_memops_settable(r->kind) ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) r->sync_memops = v != 0;
    pthread_mutex_unlock(&emu_mem_lock);
    if (rc == CUDA_SUCCESS && v) emu_sync_early_drain();
    return rc;
}

/* Backdoors (emu_kernel.h): what a NIC relying on the guarantee sees. -1:
 * ptr is in no device range. */
EMU_EXPORT int cudaemu_sync_memops(unsigned long long ptr)
{
    unsigned ctx_flags = emu_ctx_current_flags();   /* emu_ctx_lock before emu_mem_lock */
    ptr_info pi;
    ptr_lookup((CUdeviceptr)ptr, &pi);
    if (!pi.in_range) return -1;
    return pi.r.sync_memops || (ctx_flags & CU_CTX_SYNC_MEMOPS) ? 1 : 0;
}

int emu_mem_class(CUdeviceptr p)
{
    pthread_mutex_lock(&emu_mem_lock);
    const mem_range *r = emu_range_find(p);
    int c = !r ? 0 : r->kind == RK_HOST || r->kind == RK_MANAGED ? 1 : 2;
    pthread_mutex_unlock(&emu_mem_lock);
    return c;
}

int emu_sync_guaranteed(CUdeviceptr p) { return cudaemu_sync_memops(p) == 1; }

EMU_EXPORT int cudaemu_rdma_capable(unsigned long long ptr)
{
    ptr_info pi;
    ptr_lookup((CUdeviceptr)ptr, &pi);
    return pi.in_range ? ptr_rdma(&pi) : -1;
}

/* ------------------------------------------------------------------------
 * Graph allocations (allocation and free nodes)
 * ---------------------------------------------------------------------- */

static gmem *gmem_at(CUdeviceptr p)
{
    span *s = emu_span_find(&emu_memory.gmems, p);
    return s && s->base == p ? (gmem *)s : NULL;
}

/* Gives the reservation back once no node refers to it and it is not
 * allocated (emu_mem_lock held). */
static void gmem_maybe_destroy(gmem *g)
{
    if (g->refs || g->live) return;
    emu_span_remove(&emu_memory.gmems, &g->s);
    munmap((void *)g->s.base, g->len);
    free(g);
}

/* A graph allocation's range is being detached (block_detach, emu_mem_lock
 * held): drop its contents and make it inaccessible again. */
static void gmem_unback(gmem *g)
{
    madvise((void *)g->s.base, g->len, MADV_DONTNEED);
    mprotect((void *)g->s.base, g->len, PROT_NONE);
    g->live = 0;
    g->free_pending = 0;
    gmem_maybe_destroy(g);
}

CUresult emu_gmem_create(size_t bytes, int dev, uint64_t graph_uid, CUdeviceptr *out)
{
    size_t len = emu_round_up(bytes, emu_page_size());
    if (!bytes || len < bytes) return CUDA_ERROR_INVALID_VALUE;
    gmem *g = calloc(1, sizeof *g);
    void *p = g ? emu_va_reserve(len, emu_page_size(), 0) : NULL;
    if (!p) { free(g); return CUDA_ERROR_OUT_OF_MEMORY; }
    *g = (gmem){ .s = { (CUdeviceptr)p, bytes }, .len = len, .device = dev, .refs = 1, .owner_graph = graph_uid };
    pthread_mutex_lock(&emu_mem_lock);
    int bad = emu_span_insert(&emu_memory.gmems, &g->s);
    pthread_mutex_unlock(&emu_mem_lock);
    if (bad) { munmap(p, len); free(g); return CUDA_ERROR_OUT_OF_MEMORY; }
    *out = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

void emu_gmem_ref(CUdeviceptr p, int delta)
{
    pthread_mutex_lock(&emu_mem_lock);
    gmem *g = gmem_at(p);
    if (g) {
        g->refs += delta;
        gmem_maybe_destroy(g);
    }
    pthread_mutex_unlock(&emu_mem_lock);
}

int emu_gmem_info(CUdeviceptr p, uint64_t *owner_graph, uint64_t *freed_in)
{
    pthread_mutex_lock(&emu_mem_lock);
    gmem *g = gmem_at(p);
    if (g) {
        if (owner_graph) *owner_graph = g->owner_graph;
        if (freed_in) *freed_in = g->freed_in;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return g != NULL;
}

void emu_gmem_set_freed_in(CUdeviceptr p, uint64_t graph_uid, int set)
{
    pthread_mutex_lock(&emu_mem_lock);
    gmem *g = gmem_at(p);
    if (g && (set || g->freed_in == graph_uid)) g->freed_in = set ? graph_uid : 0;
    pthread_mutex_unlock(&emu_mem_lock);
}

CUresult emu_gmem_arm(const CUdeviceptr *v, size_t n, int auto_free)
{
    size_t need[MEM_MAX_DEVICES] = { 0 };
    mem_range **rs = calloc(n ? n : 1, sizeof *rs);
    if (!rs) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&emu_mem_lock);
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        gmem *g = gmem_at(v[i]);
        if (!g) rc = CUDA_ERROR_INVALID_VALUE;
        else if (g->live && !g->free_pending && !auto_free) rc = CUDA_ERROR_INVALID_VALUE;  /* still allocated */
        else if (!g->live) need[g->device] += g->len;
    }
    for (int d = 0; d < MEM_MAX_DEVICES && rc == CUDA_SUCCESS; d++)
        if (need[d] > emu_cfg.device_memory - emu_memory.used[d]) rc = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        gmem *g = gmem_at(v[i]);
        g->gen++;                        /* a new incarnation: earlier frees no longer apply */
        g->free_pending = 0;
        if (g->live) continue;           /* reallocated in place (auto-free, or a free still queued) */
        if (!(rs[i] = calloc(1, sizeof *rs[i])) ||
            mprotect((void *)g->s.base, g->len, PROT_READ | PROT_WRITE) != 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;   /* host trouble: the ones armed stay armed */
            break;
        }
        *rs[i] = (mem_range){ .s = g->s, .mapped = g->len, .kind = RK_GRAPH, .device = g->device,
                              .buffer_id = emu_memory.next_buffer_id++, .g = g };
        if (emu_span_insert(&emu_memory.ranges, &rs[i]->s) != 0) {
            mprotect((void *)g->s.base, g->len, PROT_NONE);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        charge_take(g->device, RK_GRAPH, g->len, NULL);   /* room checked above */
        g->live = 1;
        rs[i] = NULL;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    for (size_t i = 0; i < n; i++) free(rs[i]);
    free(rs);
    return rc;
}

uint64_t emu_gmem_request_free(CUdeviceptr p)
{
    pthread_mutex_lock(&emu_mem_lock);
    gmem *g = gmem_at(p);
    uint64_t gen = g && g->live && !g->free_pending ? g->gen : 0;
    if (gen) g->free_pending = 1;
    pthread_mutex_unlock(&emu_mem_lock);
    return gen;
}

void emu_gmem_graph_attr(int dev, int current, int high, uint64_t *out_current, uint64_t *out_high)
{
    pthread_mutex_lock(&emu_mem_lock);
    if (current) *out_current = emu_memory.graph_used[dev];
    if (high == 1) *out_high = emu_memory.graph_high[dev];
    if (high == 2) emu_memory.graph_high[dev] = emu_memory.graph_used[dev];   /* reset */
    pthread_mutex_unlock(&emu_mem_lock);
}

/* The live device objects for cuemuLive and the CUDAEMU_STATS file: device
 * ranges (allocations and mappings), VMM reservations, VMM physical handles,
 * and the bytes charged to every device together. */
void emu_mem_live(unsigned long long out[4])
{
    pthread_mutex_lock(&emu_mem_lock);
    out[0] = emu_memory.ranges.n;
    out[1] = emu_memory.resvs.n;
    out[2] = HASH_COUNT(emu_memory.handles);
    out[3] = 0;
    for (int d = 0; d < MEM_MAX_DEVICES; d++) out[3] += emu_memory.used[d];
    pthread_mutex_unlock(&emu_mem_lock);
}

/* ------------------------------------------------------------------------
 * Buffers mapped onto external memory (emu_ext.c owns the objects)
 * ---------------------------------------------------------------------- */

CUresult emu_mem_ext_add(void *map, size_t mapped, size_t off, size_t size, int dev, CUcontext ctx,
                         const void *ext)
{
    mem_range *r = calloc(1, sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&emu_mem_lock);
    *r = (mem_range){ .s = { (CUdeviceptr)map + off, size }, .mapped = mapped, .kind = RK_EXT,
                      .device = dev, .ctx = ctx, .buffer_id = emu_memory.next_buffer_id++,
                      .ext = ext, .map_off = off };
    int bad = emu_span_insert(&emu_memory.ranges, &r->s);
    pthread_mutex_unlock(&emu_mem_lock);
    if (bad) free(r);
    return bad ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

size_t emu_mem_ext_gone(const void *ext, emu_range *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&emu_mem_lock);
    for (size_t i = 0; i < emu_memory.ranges.n; i++) {
        mem_range *r = (mem_range *)emu_memory.ranges.v[i];
        if (r->kind != RK_EXT || r->ext != ext || r->ext_gone) continue;
        r->ext_gone = 1;
        if (n < max) out[n] = (emu_range){ r->s.base, r->s.size };
        n++;
    }
    pthread_mutex_unlock(&emu_mem_lock);
    return n;
}
