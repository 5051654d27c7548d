/*
 * tests/unit/test_memory.c: core/memory.c against a fake driver table:
 * accounting under always_update, placement under skip_temp (same addresses
 * for the same pattern, no cuMemAlloc reaching the driver), the registry
 * (interior pointers, snapshot views), what the program observes (range,
 * attributes, IPC, double and foreign frees, alloc(0)), cuMemFree's
 * synchronization and its failure, relaxed capture mode around the
 * library's own calls, each fallback (no VMM, each VMM call failing: the
 * allocation is forwarded and nothing leaks), stream-ordered reuse, context
 * teardown, own-handle blocks and STABLEGRAPH_PLACE_MAX_BYTES.
 */
#include "check.h"
#include "core/capture.h"
#include "core/record.h"
#include "core/contexts.h"
#include "core/driver.h"
#include "core/memory.h"
#include "core/policy.h"
#include "core/stats.h"

#include <stdint.h>
#include <string.h>

#define G ((size_t)2 << 20)
#define CTX1 ((CUcontext)0x1111)
#define CTX2 ((CUcontext)0x2222)
#define STREAM_A ((CUstream)0xa)
#define STREAM_B ((CUstream)0xb)

/* ------------------------------------------------------------ the fake */

static struct fake {
    CUcontext cur;
    int vmm;
    CUstreamCaptureMode mode;
    int creates, releases, maps, unmaps, accesses, reserves, addr_frees;
    int syncs, syncs_relaxed, vmm_not_relaxed;
    int events_created, records, queries;
    int ev_done[64];
    int capturing;
    CUresult sync_rc;
    const char *fail;
    int fail_at, fail_calls;
    CUdeviceptr next_va;
    int fwd_allocs, fwd_frees, fwd_other;
    CUdeviceptr next_fwd;
    int primary_active;
    int fwd_oom;          /* forwarded allocations that fail with OUT_OF_MEMORY first */
    int create_oom_after; /* cuMemCreate fails with OUT_OF_MEMORY after this many live chunks */
    size_t drv_free;
    int ctx_get_fails;
    /* the driver's own cuMemAlloc/cuMemFree (the library's token) */
    CUresult token_free_rc;   /* in a non-relaxed mode */
    int token_allocs, token_frees, token_frees_program_mode, tokens_live;
    CUresult pool_set_rc;     /* cuDeviceSetMemPool / cuMemSetMemPool / cuMemPoolDestroy */
    CUmemoryPool cur_pool;    /* what cuDeviceGetMemPool answers (NULL: the default pool) */
    CUresult pool_attr_rc;    /* cuMemPoolGetAttribute / cuMemPoolSetAttribute */
    cuuint64_t pool_drv;      /* the driver's figure for every pool attribute */
    int launch_oom;           /* forwarded kernel launches that fail with OUT_OF_MEMORY first */
    int launches;
    void (*during_launch)(void);  /* called (once) while a kernel launch is forwarded */
    void (*during_destroy)(void); /* called (once) while a cuCtxDestroy is forwarded */
    int info_calls;           /* the library's own cuMemGetInfo (headroom, room before growing) */
    size_t info_free;         /* what it says is free (setup: plenty) */
    CUresult info_rc;
} F;

static size_t setup_headroom;  /* STABLEGRAPH_HEADROOM of the next setup (0: off) */

#define DEFAULT_POOL ((CUmemoryPool)0xd00)
#define OTHER_POOL ((CUmemoryPool)0x0e00)

static int failing(const char *name)
{
    if (F.mode != CU_STREAM_CAPTURE_MODE_RELAXED) F.vmm_not_relaxed++;
    return F.fail && strcmp(F.fail, name) == 0 && ++F.fail_calls >= F.fail_at;
}

static CUresult d_ctx_get(CUcontext *c)
{
    if (F.ctx_get_fails) return CUDA_ERROR_INVALID_CONTEXT;
    *c = F.cur;
    return CUDA_SUCCESS;
}
static CUresult d_ctx_set(CUcontext c) { F.cur = c; return CUDA_SUCCESS; }
static CUresult d_ctx_dev(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
static CUresult d_ctx_sync(void)
{
    F.syncs++;
    if (F.mode == CU_STREAM_CAPTURE_MODE_RELAXED) F.syncs_relaxed++;
    return F.sync_rc;
}
static CUresult d_dev_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? F.vmm : 0;
    return CUDA_SUCCESS;
}
static CUresult d_dev_count(int *n) { *n = 1; return CUDA_SUCCESS; }
static CUresult d_dev_get(CUdevice *d, int ord)
{
    *d = ord;
    return ord == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
static CUresult d_total(size_t *b, CUdevice d) { (void)d; *b = (size_t)16 << 30; return CUDA_SUCCESS; }
static CUresult d_meminfo(size_t *fr, size_t *total)
{
    F.info_calls++;
    *fr = F.info_free;
    *total = (size_t)16 << 30;
    return F.info_rc;
}
static CUresult d_primary_state(CUdevice d, unsigned *fl, int *active)
{
    (void)d;
    *fl = 0;
    *active = F.primary_active;
    return CUDA_SUCCESS;
}
static CUresult d_stream_ctx(CUstream s, CUcontext *c) { (void)s; *c = F.cur; return CUDA_SUCCESS; }
static CUresult d_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    *st = F.capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
static CUresult d_stream_sync(CUstream s) { (void)s; return CUDA_SUCCESS; }
static CUresult d_exchange(CUstreamCaptureMode *m)
{
    CUstreamCaptureMode old = F.mode;
    F.mode = *m;
    *m = old;
    return CUDA_SUCCESS;
}
static CUresult d_ev_create(CUevent *e, unsigned fl)
{
    (void)fl;
    failing("event");
    *e = (CUevent)(uintptr_t)++F.events_created;
    return CUDA_SUCCESS;
}
static CUresult d_ev_destroy(CUevent e) { (void)e; return CUDA_SUCCESS; }
static CUresult d_ev_record(CUevent e, CUstream s)
{
    (void)s;
    failing("record");
    F.records++;
    F.ev_done[(uintptr_t)e % 64] = 0;
    return CUDA_SUCCESS;
}
static CUresult d_ev_query(CUevent e)
{
    failing("query");
    F.queries++;
    return F.ev_done[(uintptr_t)e % 64] ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult d_reserve(CUdeviceptr *p, size_t size, size_t al, CUdeviceptr addr,
                          unsigned long long fl)
{
    (void)addr; (void)fl;
    if (failing("cuMemAddressReserve")) return CUDA_ERROR_OUT_OF_MEMORY;
    F.next_va = (F.next_va + al - 1) / al * al;
    *p = F.next_va;
    F.next_va += size;
    F.reserves++;
    return CUDA_SUCCESS;
}
static CUresult d_addr_free(CUdeviceptr p, size_t s) { (void)p; (void)s; failing(""); F.addr_frees++; return CUDA_SUCCESS; }
static CUresult d_create(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *p,
                         unsigned long long fl)
{
    (void)fl;
    if (failing("cuMemCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (F.create_oom_after && F.creates - F.releases >= F.create_oom_after) return CUDA_ERROR_OUT_OF_MEMORY;
    CHECK(s % G == 0);
    CHECK(p->type == CU_MEM_ALLOCATION_TYPE_PINNED && p->location.type == CU_MEM_LOCATION_TYPE_DEVICE);
    *h = (CUmemGenericAllocationHandle)++F.creates;
    return CUDA_SUCCESS;
}
static CUresult d_release(CUmemGenericAllocationHandle h) { (void)h; failing(""); F.releases++; return CUDA_SUCCESS; }
static CUresult d_map(CUdeviceptr p, size_t s, size_t off, CUmemGenericAllocationHandle h,
                      unsigned long long fl)
{
    (void)p; (void)s; (void)h; (void)fl;
    if (failing("cuMemMap")) return CUDA_ERROR_INVALID_VALUE;
    CHECK_EQ(off, 0);
    F.maps++;
    return CUDA_SUCCESS;
}
static CUresult d_unmap(CUdeviceptr p, size_t s) { (void)p; (void)s; failing(""); F.unmaps++; return CUDA_SUCCESS; }
static CUresult d_access(CUdeviceptr p, size_t s, const CUmemAccessDesc *d, size_t n)
{
    (void)p; (void)s;
    if (failing("cuMemSetAccess")) return CUDA_ERROR_INVALID_VALUE;
    CHECK(n >= 1 && d[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    F.accesses++;
    return CUDA_SUCCESS;
}
static CUresult d_gran(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags f)
{
    (void)p; (void)f;
    *g = G;
    return CUDA_SUCCESS;
}
static CUresult d_attrs(unsigned n, CUpointer_attribute *a, void **data, CUdeviceptr p)
{
    (void)a;
    CHECK_EQ(p, 0);   /* asked about "unallocated memory" */
    for (unsigned i = 0; i < n; i++) memset(data[i], 0, 8);
    return CUDA_SUCCESS;
}

static CUresult d_mem_alloc(CUdeviceptr *p, size_t n)
{
    (void)n;
    F.token_allocs++;
    F.tokens_live++;
    *p = 0x7000000;
    return CUDA_SUCCESS;
}
/* Refused (token_free_rc) unless relaxed, as the driver refuses an unsafe
 * call that the capture mode forbids. */
static CUresult d_mem_free(CUdeviceptr p)
{
    (void)p;
    F.token_frees++;
    if (F.mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
        F.token_frees_program_mode++;
        if (F.token_free_rc != CUDA_SUCCESS) return F.token_free_rc;
    }
    F.tokens_live--;
    return CUDA_SUCCESS;
}

static CUresult d_default_pool(CUmemoryPool *p, CUdevice d)
{
    *p = (CUmemoryPool)((uintptr_t)DEFAULT_POOL + (uintptr_t)d);
    return CUDA_SUCCESS;
}

static CUresult d_get_pool(CUmemoryPool *p, CUdevice d)
{
    if (F.cur_pool) *p = F.cur_pool;
    else d_default_pool(p, d);
    return CUDA_SUCCESS;
}

static void fake_install(void)
{
    sg_driver d;
    memset(&d, 0, sizeof d);
    d.cuCtxGetCurrent = d_ctx_get;
    d.cuCtxSetCurrent = d_ctx_set;
    d.cuCtxGetDevice = d_ctx_dev;
    d.cuCtxSynchronize = d_ctx_sync;
    d.cuDeviceGetAttribute = d_dev_attr;
    d.cuDeviceGetCount = d_dev_count;
    d.cuDeviceGet = d_dev_get;
    d.cuDeviceTotalMem_v2 = d_total;
    d.cuMemGetInfo_v2 = d_meminfo;
    d.cuDevicePrimaryCtxGetState = d_primary_state;
    d.cuStreamGetCtx = d.cuStreamGetCtx_ptsz = d_stream_ctx;
    d.cuStreamIsCapturing = d.cuStreamIsCapturing_ptsz = d_is_capturing;
    d.cuStreamSynchronize = d.cuStreamSynchronize_ptsz = d_stream_sync;
    d.cuThreadExchangeStreamCaptureMode = d_exchange;
    d.cuEventCreate = d_ev_create;
    d.cuEventDestroy_v2 = d_ev_destroy;
    d.cuEventRecord = d.cuEventRecord_ptsz = d_ev_record;
    d.cuEventQuery = d_ev_query;
    d.cuMemAddressReserve = d_reserve;
    d.cuMemAddressFree = d_addr_free;
    d.cuMemCreate = d_create;
    d.cuMemRelease = d_release;
    d.cuMemMap = d_map;
    d.cuMemUnmap = d_unmap;
    d.cuMemSetAccess = d_access;
    d.cuMemGetAllocationGranularity = d_gran;
    d.cuPointerGetAttributes = d_attrs;
    d.cuMemAlloc_v2 = d_mem_alloc;
    d.cuMemFree_v2 = d_mem_free;
    d.cuDeviceGetDefaultMemPool = d_default_pool;
    d.cuDeviceGetMemPool = d_get_pool;
    sg_driver_set(&d);
}

/* The program's calls: forward() is "the driver" for what is forwarded. */
static CUresult fwd(const void *args)
{
    const sg_call *c = args;
    if (c->kind == SG_CALL_ALLOC) {
        F.fwd_allocs++;
        if (c->u.alloc.bytes == 0) return CUDA_ERROR_INVALID_VALUE;
        if (F.fwd_oom && F.fwd_oom--) return CUDA_ERROR_OUT_OF_MEMORY;
        *c->u.alloc.out = F.next_fwd += 0x10000;
        return CUDA_SUCCESS;
    }
    if (c->kind == SG_CALL_DEV_ALLOC) {
        F.fwd_allocs++;
        return F.fwd_oom && F.fwd_oom-- ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    }
    if (c->kind == SG_CALL_FREE) {
        F.fwd_frees++;
        return c->u.free.ptr >= 0x50000000 && c->u.free.ptr < 0x60000000 ? CUDA_SUCCESS
                                                                          : CUDA_ERROR_INVALID_VALUE;
    }
    F.fwd_other++;
    if (c->kind == SG_CALL_KERNEL) {
        F.launches++;
        void (*during)(void) = F.during_launch;
        F.during_launch = NULL;
        if (during) during();
        return F.launch_oom && F.launch_oom-- ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    }
    if (c->kind == SG_CALL_CTX_DESTROY && F.during_destroy) {
        void (*during)(void) = F.during_destroy;
        F.during_destroy = NULL;
        during();
    }
    if (c->kind == SG_CALL_POOL_SET) return F.pool_set_rc;
    if (c->kind == SG_CALL_POOL_ATTR) {
        if (F.pool_attr_rc == CUDA_SUCCESS && !c->u.pattr.set)
            memcpy(c->u.pattr.value, &F.pool_drv, sizeof F.pool_drv);
        return F.pool_attr_rc;
    }
    if (c->kind == SG_CALL_PTR_ATTRS)
        for (unsigned i = 0; i < c->u.attrs.n; i++) memset(c->u.attrs.data[i], 0xee, 8);
    if (c->kind == SG_CALL_MEM_INFO) {
        *c->u.info.free = F.drv_free;
        *c->u.info.total = (size_t)16 << 30;
    }
    return CUDA_SUCCESS;
}

static CUresult route_fwd(const sg_call *c) { return c->forward(c->args); }

static CUresult call(sg_call c)
{
    sg_call cc = c;
    cc.forward = fwd;
    cc.args = &cc;
    if (c.kind == SG_CALL_CTX_DESTROY || c.kind == SG_CALL_PRIMARY_DROP) return sg_ctx_call(&cc);
    if (c.kind == SG_CALL_PRIMARY_RETAIN) return sg_ctx_primary_retained(&cc, sg_mem_retry(&cc, cc.forward(cc.args)));
    if (c.kind == SG_CALL_CAPTURE_BEGIN || c.kind == SG_CALL_CAPTURE_END) return sg_rec_call(&cc, route_fwd);
    switch (c.kind) {
    case SG_CALL_ALLOC: case SG_CALL_DEV_ALLOC: case SG_CALL_FREE: case SG_CALL_STREAM_DESTROY:
    case SG_CALL_POOL_SET: case SG_CALL_KERNEL: case SG_CALL_CTX_SWITCH:
        return sg_mem_call(&cc);
    default:
        return sg_mem_query(&cc);
    }
}

static CUresult alloc(CUdeviceptr *p, size_t n)
{
    return call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = p, .bytes = n } });
}
static CUresult alloc_async(CUdeviceptr *p, size_t n, CUstream s)
{
    return call((sg_call){ .kind = SG_CALL_ALLOC, .u.alloc = { .out = p, .bytes = n, .async = 1, .stream = s } });
}
static CUresult mfree(CUdeviceptr p) { return call((sg_call){ .kind = SG_CALL_FREE, .u.free = { .ptr = p } }); }
static CUresult mfree_async(CUdeviceptr p, CUstream s)
{
    return call((sg_call){ .kind = SG_CALL_FREE, .u.free = { .ptr = p, .async = 1, .stream = s } });
}

static void setup_own(sg_policy policy, size_t place_max, size_t own_min)
{
    sg_mem_reset();
    sg_capture_reset();
    sg_stats_reset();
    memset(&F, 0, sizeof F);
    F.cur = CTX1;
    F.vmm = 1;
    F.mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    F.sync_rc = CUDA_SUCCESS;
    F.next_va = 0x7f0000000000ULL;
    F.next_fwd = 0x50000000;
    F.primary_active = 1;
    F.info_free = (size_t)16 << 30;
    fake_install();
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = policy;
    cfg.place_max_bytes = place_max;
    cfg.headroom_bytes = setup_headroom;
    sg_caps caps = sg_policy_caps(&cfg);
    caps.own_handles_min = own_min;
    sg_mem_init(&caps);
}

static void setup(sg_policy policy, size_t place_max) { setup_own(policy, place_max, SIZE_MAX); }

/* After a teardown, everything the library made is gone. */
static void check_released(void)
{
    CHECK_EQ(F.creates, F.releases);
    CHECK_EQ(F.maps, F.unmaps);
    CHECK_EQ(F.reserves, F.addr_frees);
}

/* ------------------------------------------------------------- tests */

TEST(always_update_counts_peak)
{
    setup(SG_POLICY_ALWAYS_UPDATE, SIZE_MAX);
    CUdeviceptr a, b, c;
    CHECK_CU(alloc(&a, 100), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 200), CUDA_SUCCESS);
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_CU(alloc(&c, 50), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 3);
    CHECK_EQ(F.creates + F.reserves, 0);
    CHECK_EQ(sg_stats_totals().bytes_requested, 300);
    CHECK_EQ(sg_stats_totals().bytes_mapped, 0);
    CHECK(!sg_mem_find(b, NULL));
}

/* always_update places nothing: its views hold the allocations forwarded to
 * the driver (what its observer looks pointers up in, with no driver call),
 * each with a fresh id as a placed block would have; skip_temp's hold only
 * placed blocks. */
TEST(views_hold_forwarded_allocations_when_nothing_is_placed)
{
    setup(SG_POLICY_ALWAYS_UPDATE, SIZE_MAX);
    CUdeviceptr a, b;
    sg_alloc_info ia, ib;
    CHECK_CU(alloc(&b, 200), CUDA_SUCCESS);
    CHECK_CU(alloc(&a, 100), CUDA_SUCCESS);
    const sg_mem_view *v = sg_mem_view_acquire();
    CHECK(v != NULL);
    CHECK(sg_mem_view_find(v, a + 99, &ia) && ia.base == a && ia.size == 100);
    CHECK(sg_mem_view_find(v, b, &ib) && ib.base == b && ib.size == 200);
    CHECK(!sg_mem_view_find(v, a + 100, NULL));     /* past its end */
    CHECK(!sg_mem_view_find(v, a - 1, NULL));
    CHECK(ia.id >= SG_MEM_ID_BASE && ib.id >= SG_MEM_ID_BASE && ia.id != ib.id);
    CHECK(ia.ctx == NULL && !ia.own_handles);
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    const sg_mem_view *v2 = sg_mem_view_acquire();
    CHECK(sg_mem_view_find(v, a, NULL));            /* a snapshot: unchanged */
    CHECK(!sg_mem_view_find(v2, a, NULL));          /* a new one sees the free */
    CHECK(sg_mem_view_find(v2, b + 1, NULL));
    sg_mem_view_release(v);
    sg_mem_view_release(v2);
    F.next_fwd = a - 0x10000;                       /* the driver hands a out again */
    CUdeviceptr c;
    CHECK_CU(alloc(&c, 100), CUDA_SUCCESS);
    CHECK_EQ(c, a);
    v = sg_mem_view_acquire();
    CHECK(sg_mem_view_find(v, c, &ia) && ia.id != ib.id && ia.id > ib.id);   /* a new id */
    sg_mem_view_release(v);
    CHECK(!sg_mem_find(c, NULL));                   /* the registry of placed blocks: none */

    setup(SG_POLICY_SKIP_TEMP, 4096);
    CUdeviceptr big, small;
    CHECK_CU(alloc(&big, 8192), CUDA_SUCCESS);       /* over the placing limit: forwarded */
    CHECK_CU(alloc(&small, 100), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 1);
    v = sg_mem_view_acquire();
    CHECK(!sg_mem_view_find(v, big, NULL));
    CHECK(sg_mem_view_find(v, small, NULL));
    sg_mem_view_release(v);
}

TEST(skip_temp_places_deterministically)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a1, b1, a2, b2;
    CHECK_CU(alloc(&a1, 1000), CUDA_SUCCESS);
    CHECK_CU(alloc(&b1, 5000), CUDA_SUCCESS);
    CHECK_CU(mfree(a1), CUDA_SUCCESS);
    CHECK_CU(mfree(b1), CUDA_SUCCESS);
    CHECK_CU(alloc(&a2, 1000), CUDA_SUCCESS);
    CHECK_CU(alloc(&b2, 5000), CUDA_SUCCESS);
    CHECK_EQ(a2, a1);
    CHECK_EQ(b2, b1);
    CHECK_EQ(b1, a1 + 1024);
    CHECK_EQ(F.fwd_allocs, 0);
    CHECK_EQ(F.creates, 1);
    CHECK_EQ(F.reserves, 1);
    CHECK_EQ(sg_stats_totals().bytes_requested, 6000);
    CHECK_EQ(sg_stats_totals().bytes_mapped, G);
    CHECK_EQ(F.vmm_not_relaxed, 0);                 /* every VMM call in relaxed mode */
    CHECK_EQ(F.mode, CU_STREAM_CAPTURE_MODE_GLOBAL); /* and the program's mode restored */
}

TEST(registry_and_views)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b;
    sg_alloc_info info;
    CHECK_CU(alloc(&a, 1000), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 300), CUDA_SUCCESS);
    CHECK(sg_mem_find(a + 999, &info));
    CHECK_EQ(info.base, a);
    CHECK_EQ(info.size, 1000);
    CHECK(info.ctx == CTX1);
    CHECK(info.id >= SG_MEM_ID_BASE);
    CHECK(!sg_mem_find(a + 1000, NULL));            /* the padding belongs to nobody */
    CHECK(!sg_mem_find(a - 1, NULL));
    uint64_t id_a = info.id;
    const sg_mem_view *v = sg_mem_view_acquire();
    CHECK(v != NULL);
    CHECK(sg_mem_view_find(v, b + 299, &info) && info.base == b && info.id != id_a);
    CHECK_CU(mfree(b), CUDA_SUCCESS);
    CHECK(sg_mem_view_find(v, b, NULL));            /* a snapshot: unchanged */
    const sg_mem_view *v2 = sg_mem_view_acquire();
    CHECK(!sg_mem_view_find(v2, b, NULL));          /* a new one sees the free */
    CHECK(sg_mem_view_find(v2, a + 5, NULL));
    sg_mem_view_release(v);
    sg_mem_view_release(v2);
    CUdeviceptr c;
    CHECK_CU(alloc(&c, 300), CUDA_SUCCESS);
    CHECK_EQ(c, b);                                 /* same address, */
    CHECK(sg_mem_find(c, &info) && info.id > id_a + 1); /* new id */
}

/* Many live blocks (the registry keeps them in chunks of 256): blocks freed
 * and placed in a scrambled order, low and high, and every lookup (a
 * block's first and last byte, the padding after it, a snapshot and a
 * live view) agrees with the list kept here; a context destroyed with a
 * thousand of them leaves none. */
TEST(registry_of_many_blocks)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    enum { N = 1500 };
    static CUdeviceptr p[N];
    static int live[N];
    for (int i = 0; i < N; i++) {
        CHECK_CU(alloc(&p[i], 300), CUDA_SUCCESS);
        live[i] = 1;
    }
    uint64_t x = 88172645463325252ull;
    for (int step = 0; step < 6000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int i = (int)(x % N);
        if (live[i]) {
            CHECK_CU(mfree(p[i]), CUDA_SUCCESS);
        } else {
            CUdeviceptr q;
            CHECK_CU(alloc(&q, 300), CUDA_SUCCESS);
            int k = 0;   /* first fit: the lowest free slot of the row */
            while (k < N && (live[k] || p[k] < q)) k++;
            CHECK(k < N && p[k] == q);
            if (k < N && p[k] == q) i = k;
        }
        live[i] = !live[i];
        if (step % 500) continue;
        const sg_mem_view *v = sg_mem_view_acquire();
        for (int j = 0; j < N; j++) {
            sg_alloc_info info;
            int f = sg_mem_find(p[j] + 299, &info);
            CHECK_EQ(f, live[j]);
            if (f) CHECK_EQ(info.base, p[j]);
            CHECK_EQ(sg_mem_find(p[j], NULL), live[j]);
            CHECK(!sg_mem_find(p[j] + 300, NULL));   /* the padding */
            CHECK_EQ(sg_mem_view_find(v, p[j] + 1, NULL), live[j]);
            CHECK_EQ(sg_mem_view_find_end(v, p[j] + 300, NULL), live[j]);
        }
        sg_mem_view_release(v);
    }
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_DESTROY, .u.ctx = { .ctx = CTX1 } }), CUDA_SUCCESS);
    for (int j = 0; j < N; j++) CHECK(!sg_mem_find(p[j], NULL));
    check_released();
}

TEST(what_the_program_observes)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, z = 0, base = 0;
    size_t size = 0;
    CHECK_CU(alloc(&z, 0), CUDA_ERROR_INVALID_VALUE);   /* the driver's answer */
    CHECK_EQ(F.fwd_allocs, 1);
    CHECK_CU(alloc(&a, 1000), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ADDR_RANGE, .u.range = { .base = &base, .size = &size,
                             .ptr = a + 10 } }), CUDA_SUCCESS);
    CHECK(base == a && size == 1000);
    CUdeviceptr start = 0;
    unsigned long long id = 0;
    CUcontext ctx = NULL;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &start,
                             .attr = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, .ptr = a + 5 } }), CUDA_SUCCESS);
    CHECK_EQ(start, a);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &id,
                             .attr = CU_POINTER_ATTRIBUTE_BUFFER_ID, .ptr = a } }), CUDA_SUCCESS);
    CHECK(id >= SG_MEM_ID_BASE);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &ctx,
                             .attr = CU_POINTER_ATTRIBUTE_CONTEXT, .ptr = a } }), CUDA_SUCCESS);
    CHECK(ctx == CTX1);
    int other = F.fwd_other;
    unsigned mt = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &mt,
                             .attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE, .ptr = a } }), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_other, other + 1);                   /* not overridden: the driver answers */
    /* plural: the driver's answers, then the overrides */
    CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
    size_t rs = 0;
    unsigned long long mt8 = 0;
    void *data[2] = { &rs, &mt8 };
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTRS, .u.attrs = { .n = 2, .attrs = at, .data = data,
                             .ptr = a + 1 } }), CUDA_SUCCESS);
    CHECK_EQ(rs, 1000);
    CHECK(mt8 == 0xeeeeeeeeeeeeeeeeULL);
    CUipcMemHandle h;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { .out = &h, .ptr = a } }),
             CUDA_ERROR_INVALID_VALUE);
    /* frees */
    CHECK_CU(mfree(a + 256), CUDA_ERROR_INVALID_VALUE);  /* interior: ours, not a base */
    CHECK_EQ(F.fwd_frees, 0);
    CHECK_CU(mfree(0x50000000 + 0x10000), CUDA_SUCCESS); /* foreign: forwarded */
    CHECK_EQ(F.fwd_frees, 1);
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_CU(mfree(a), CUDA_ERROR_INVALID_VALUE);        /* double free */
    CHECK_EQ(F.fwd_frees, 1);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ADDR_RANGE, .u.range = { .base = &base, .size = &size,
                             .ptr = a } }), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &start,
                             .attr = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, .ptr = a } }),
             CUDA_ERROR_INVALID_VALUE);
    rs = 7;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTRS, .u.attrs = { .n = 2, .attrs = at, .data = data,
                             .ptr = a } }), CUDA_SUCCESS);
    CHECK_EQ(rs, 0);                                     /* as for unallocated memory */
}

/* cuMemFree of a placed block: the driver's own cuMemFree (of a one-page
 * block the library allocates in relaxed mode) runs in the program's mode
 * and gives the answer and the implicit synchronization, in or out of a
 * capture; the library never calls cuCtxSynchronize (which a capture on any
 * stream of the context refuses, and which would invalidate it). */
TEST(free_asks_the_driver)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b, c, d;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    F.token_free_rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;   /* e.g. during a global capture */
    CHECK_CU(mfree(a), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(sg_mem_find(a, NULL));                                /* nothing freed */
    CHECK_EQ(F.tokens_live, 0);                                 /* the token went anyway */
    CHECK_CU(alloc(&b, 4096), CUDA_SUCCESS);
    CHECK(b != a);
    F.token_free_rc = CUDA_SUCCESS;
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK(!sg_mem_find(a, NULL));
    CHECK_CU(alloc(&c, 4096), CUDA_SUCCESS);
    CHECK_EQ(c, a);                                             /* synchronized: reused at once */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_BEGIN }), CUDA_SUCCESS);
    CHECK_CU(mfree(c), CUDA_SUCCESS);                           /* allowed during a capture too */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_END }), CUDA_SUCCESS);
    CHECK_CU(alloc(&d, 4096), CUDA_SUCCESS);
    CHECK_EQ(d, a);
    CHECK_EQ(F.syncs, 0);                                       /* never cuCtxSynchronize */
    CHECK_EQ(F.token_frees_program_mode, 3);                    /* each in the program's mode */
    CHECK_EQ(F.token_allocs, 3);
    CHECK_EQ(F.tokens_live, 0);
    sg_mem_reset();
    check_released();
}

/* Each VMM call failing: the allocation is forwarded, nothing leaks, and
 * the next allocation is placed again. */
TEST(vmm_failures_fall_back)
{
    static const char *calls[] = { "cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess" };
    for (int i = 0; i < 4; i++) {
        setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
        F.fail = calls[i];
        F.fail_at = 1;
        CUdeviceptr a, b;
        CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
        CHECK_EQ(F.fwd_allocs, 1);
        CHECK(!sg_mem_find(a, NULL));
        CHECK_EQ(F.creates - F.releases, 0);
        CHECK_EQ(F.maps - F.unmaps, 0);
        CHECK_EQ(F.reserves - F.addr_frees, 0);          /* a fresh reservation is given back */
        F.fail = NULL;
        CHECK_CU(alloc(&b, 4096), CUDA_SUCCESS);
        CHECK_EQ(F.fwd_allocs, 1);
        CHECK(sg_mem_find(b, NULL));
        CHECK_CU(mfree(a), CUDA_SUCCESS);                 /* the forwarded one: to the driver */
        CHECK_EQ(F.fwd_frees, 1);
        sg_mem_reset();
        check_released();
    }
}

TEST(no_vmm_forwards_everything)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    F.vmm = 0;
    CUdeviceptr a, b;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 1 << 20), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 2);
    CHECK_EQ(F.creates + F.reserves, 0);
    CHECK_EQ(sg_stats_totals().bytes_requested, 4096 + (1 << 20));
}

TEST(stream_ordered_reuse)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b, c, d;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_BEGIN }), CUDA_SUCCESS);
    F.capturing = 1;                                     /* a graph memory node: forwarded */
    CHECK_CU(alloc_async(&a, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 1);
    CHECK(!sg_mem_find(a, NULL));
    F.capturing = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_END }), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&a, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK(sg_mem_find(a, NULL));
    CHECK_CU(mfree_async(a, STREAM_A), CUDA_SUCCESS);
    CHECK_EQ(F.records, 1);
    CHECK_EQ(F.syncs, 0);                                /* no host wait */
    CHECK_CU(alloc_async(&b, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK_EQ(b, a);                                      /* same stream: at once */
    CHECK_CU(mfree_async(b, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&c, 4096, STREAM_B), CUDA_SUCCESS);
    CHECK(c != a);                                       /* other stream: not yet */
    CHECK_CU(alloc(&d, 256), CUDA_SUCCESS);
    CHECK(d < a || d >= a + 4096);                       /* nor a synchronous one */
    for (int i = 0; i < 64; i++) F.ev_done[i] = 1;
    CUdeviceptr e;
    CHECK_CU(alloc_async(&e, 4096, STREAM_B), CUDA_SUCCESS);
    CHECK_EQ(e, a);                                      /* after the event completed */
    CHECK_EQ(F.events_created, 1);                       /* events come back to the pool */
    CHECK_EQ(F.vmm_not_relaxed, 0);
    CHECK_EQ(F.mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    /* freeing it on a capturing stream: the driver decides (it refuses and
     * invalidates the capture); the block stays */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_BEGIN }), CUDA_SUCCESS);
    F.capturing = 1;
    int ff = F.fwd_frees;
    CHECK_CU(mfree_async(e, STREAM_B), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(F.fwd_frees, ff + 1);
    CHECK(sg_mem_find(e, NULL));
    F.capturing = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_END }), CUDA_SUCCESS);
}

TEST(context_teardown)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b, p;
    CHECK_CU(alloc(&a, 3 << 20), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 4096), CUDA_SUCCESS);
    CUcontext out = CTX2;  /* the fake forward leaves it: device 0's primary context is CTX2 */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PRIMARY_RETAIN, .u.primary = { .out = &out, .dev = 0 } }), CUDA_SUCCESS);
    F.cur = CTX2;
    CHECK_CU(alloc(&p, 4096), CUDA_SUCCESS);
    CHECK_EQ(F.reserves, 2);                             /* one arena per context */
    int creates = F.creates;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_DESTROY, .u.ctx = { .ctx = CTX1 } }), CUDA_SUCCESS);
    CHECK(!sg_mem_find(a, NULL) && !sg_mem_find(b, NULL));
    CHECK(sg_mem_find(p, NULL));
    CHECK_EQ(F.releases, creates - 1);                   /* CTX1's chunks, not CTX2's */
    CHECK_EQ(F.addr_frees, 1);
    int ff = F.fwd_frees;
    CHECK_CU(mfree(a), CUDA_ERROR_INVALID_VALUE);        /* not ours any more: the driver's answer */
    CHECK_EQ(F.fwd_frees, ff + 1);
    F.primary_active = 1;                                /* still retained elsewhere: kept */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PRIMARY_DROP, .u.primary = { .dev = 0 } }), CUDA_SUCCESS);
    CHECK(sg_mem_find(p, NULL));
    F.primary_active = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PRIMARY_DROP, .u.primary = { .dev = 0 } }), CUDA_SUCCESS);
    CHECK(!sg_mem_find(p, NULL));
    check_released();
    CHECK_EQ(F.vmm_not_relaxed, 0);
}

TEST(own_handle_blocks)
{
    setup_own(SG_POLICY_SKIP_TEMP, SIZE_MAX, 1 << 20);
    CUdeviceptr small, big;
    sg_mem_handle h[4];
    sg_alloc_info info;
    CHECK_CU(alloc(&small, 4096), CUDA_SUCCESS);
    CHECK_EQ(sg_mem_block_handles(small, h, 4), 1);
    CHECK(h[0].va == small && h[0].offset == 0 && h[0].size == G);   /* shared chunk */
    CHECK(!sg_mem_find(small, &info) || !info.own_handles);
    CHECK_CU(alloc(&big, 3 << 20), CUDA_SUCCESS);
    CHECK_EQ(big % G, 0);
    CHECK(sg_mem_find(big, &info) && info.own_handles);
    CHECK_EQ(sg_mem_block_handles(big, h, 4), 2);        /* a handle per granule, its own */
    CHECK(h[0].va == big && h[0].offset == 0 && h[0].size == G);
    CHECK(h[1].va == big + G && h[1].offset == (long long)G && h[1].size == G);
    CHECK(h[0].handle != 0 && h[1].handle != h[0].handle);
    CUdeviceptr s2;
    CHECK_CU(alloc(&s2, 4096), CUDA_SUCCESS);            /* small: back in the shared chunk */
    CHECK_EQ(s2, small + 4096);
    CHECK_EQ(sg_mem_block_handles(s2, h, 4), 1);
    CHECK_EQ(h[0].offset, -4096);
    CHECK_EQ(sg_mem_block_handles(big + 8, h, 4), 0);    /* not a base */
}

TEST(place_max_bytes)
{
    setup(SG_POLICY_SKIP_TEMP, 4096);
    CUdeviceptr a, b;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 4097), CUDA_SUCCESS);
    CHECK(sg_mem_find(a, NULL));
    CHECK(!sg_mem_find(b, NULL));
    CHECK_EQ(F.fwd_allocs, 1);
    CUipcMemHandle h;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_IPC_HANDLE, .u.ipc = { .out = &h, .ptr = b } }), CUDA_SUCCESS);
    CHECK_EQ(sg_stats_totals().bytes_requested, 8193);
}

/* Memory pressure (issue 10, classes 6, 12, 18): freed placed memory is
 * given back when the driver runs short, and the call is tried again. */
TEST(pressure_gives_memory_back)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b, c;
    CHECK_CU(alloc(&a, 5 << 20), CUDA_SUCCESS);          /* 3 granules */
    CHECK_EQ(F.creates, 3);
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_EQ(F.releases, 0);                              /* kept mapped: the next step reuses it */
    /* the program's cuMemCreate runs short: the library gives back, retries */
    F.fwd_oom = 1;
    int before = F.fwd_allocs;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_DEV_ALLOC }), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, before + 2);
    CHECK_EQ(F.releases, 3);
    CHECK_EQ(F.unmaps, 3);
    /* placing itself runs short: give back, retry, then place */
    CHECK_CU(alloc(&b, 4096), CUDA_SUCCESS);              /* one granule, live */
    CHECK_CU(alloc(&c, 2 << 20), CUDA_SUCCESS);           /* two more */
    CHECK_CU(mfree(c), CUDA_SUCCESS);
    int creates = F.creates;
    F.create_oom_after = 3;                               /* the device holds 3 granules */
    CUdeviceptr d;
    CHECK_CU(alloc(&d, 4 << 20), CUDA_SUCCESS);           /* needs 2 new: c's go first */
    CHECK(sg_mem_find(d, NULL));
    CHECK(F.creates > creates);
    CHECK_EQ(F.creates - F.releases, 3);
    /* nothing left to give back: the driver's allocator */
    CUdeviceptr e;
    int fa = F.fwd_allocs;
    CHECK_CU(alloc(&e, 4 << 20), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, fa + 1);
    CHECK(!sg_mem_find(e, NULL));
    CHECK(sg_mem_find(b, NULL));                          /* live blocks were never touched */
}

/* Headroom (STABLEGRAPH_HEADROOM, mem_arena.c): after a placed free the
 * library asks the driver how much of the device is free (cuMemGetInfo,
 * which does not count the arenas' unused chunks) and, below the headroom,
 * gives back unused chunks, the highest first, until it is restored: the
 * driver may need memory where no call of the program says so (a kernel
 * loaded or its local memory grown at an uncaptured launch). With room it
 * asks once per 64 frees; 0 turns it off. */
TEST(frees_keep_the_device_headroom)
{
    setup_headroom = 3 * G;
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    setup_headroom = 0;
    CUdeviceptr a, b, c;
    CHECK_CU(alloc(&a, 4 * G), CUDA_SUCCESS);             /* granules 0-3 (room asked first) */
    CHECK_CU(alloc(&b, G), CUDA_SUCCESS);                 /* granule 4, live throughout */
    int q = F.info_calls;
    F.info_free = 100 * G;
    CHECK_CU(mfree(a), CUDA_SUCCESS);                     /* the device's first free: asked */
    CHECK_EQ(F.info_calls, q + 1);
    CHECK_EQ(F.releases, 0);                              /* room: kept mapped */
    for (int i = 0; i < 64; i++) {
        CHECK_CU(alloc(&c, 4096), CUDA_SUCCESS);
        CHECK_EQ(c, a);                                   /* the same place each time */
        CHECK_CU(mfree(c), CUDA_SUCCESS);
    }
    CHECK_EQ(F.info_calls, q + 2);                        /* once more, at the 64th */
    CHECK_EQ(F.releases, 0);
    F.info_free = G;                                      /* short of the headroom by 2 granules */
    for (int i = 0; i < 64 && F.info_calls == q + 2; i++) {
        CHECK_CU(alloc(&c, 4096), CUDA_SUCCESS);
        CHECK_CU(mfree(c), CUDA_SUCCESS);
    }
    CHECK_EQ(F.info_calls, q + 3);
    CHECK_EQ(F.releases, 2);                              /* granules 3 and 2; b's 4 is live */
    CHECK_EQ(F.unmaps, 2);
    CHECK_EQ(sg_stats_totals().headroom_trims, 1);        /* in the report */
    CHECK_EQ(sg_stats_totals().bytes_given_back, 2 * G);
    CHECK_CU(alloc(&c, 2 * G), CUDA_SUCCESS);             /* granules 0-1, still mapped */
    CHECK_EQ(c, a);
    CHECK_EQ(F.creates, 5);
    CHECK_CU(mfree(c), CUDA_SUCCESS);                     /* below 2 headrooms: asked at each free */
    CHECK_EQ(F.info_calls, q + 4);
    CHECK_EQ(F.releases, 4);                              /* 1 and 0 too: the device is still short */
    F.info_rc = CUDA_ERROR_INVALID_CONTEXT;               /* the driver cannot say: nothing given back */
    CHECK_CU(alloc(&c, G), CUDA_SUCCESS);                 /* one granule: no room asked */
    CHECK_CU(mfree(c), CUDA_SUCCESS);
    CHECK_EQ(F.info_calls, q + 5);
    CHECK_EQ(F.releases, 4);
    F.info_rc = CUDA_SUCCESS;
    CHECK_CU(mfree(b), CUDA_SUCCESS);
    CHECK_EQ(F.releases, 6);                              /* b's granule and the one below */

    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);                 /* headroom 0: never asked */
    F.info_free = 0;
    CHECK_CU(alloc(&a, G), CUDA_SUCCESS);
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_EQ(F.info_calls, 0);
    CHECK_EQ(F.releases, 0);
}

/* The launch filter (memory.h): an uncaptured launch of a function the
 * thread has not launched from its current context comes to the general
 * path, which retries it after a trim if it got CUDA_ERROR_OUT_OF_MEMORY
 * (lazy loading takes memory at a first launch) and then marks the function
 * in the context's table, so that its next launches go direct; a context
 * switch starts the thread again; not placing, every launch goes direct. */
TEST(launch_filter)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUfunction f = (CUfunction)0x7000, g = (CUfunction)0x7010;
    sg_call k = { .kind = SG_CALL_KERNEL, .u.kernel = { .f = f } };
    CUdeviceptr a;
    CHECK_CU(alloc(&a, G), CUDA_SUCCESS);
    CHECK_CU(mfree(a), CUDA_SUCCESS);                     /* the arena keeps its granule */
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 0);      /* a first launch: general path */
    F.launch_oom = 1;
    CHECK_CU(call(k), CUDA_SUCCESS);                      /* refused for want of memory, retried */
    CHECK_EQ(F.launches, 2);
    CHECK_EQ(F.releases, 1);                              /* after the granule went back */
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 1);      /* next time direct */
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(g)], 0);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_SWITCH }), CUDA_SUCCESS);
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 0);      /* another context may be current */
    CHECK_CU(call(k), CUDA_SUCCESS);
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 1);      /* the same context's table again */
    F.launch_oom = 2;                                     /* nothing left to give back: the driver's error */
    k.u.kernel.f = g;
    CHECK_CU(call(k), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(g)], 0);      /* not marked: not launched */
    sg_launch_filter_forget();                            /* a context destroyed: every table cleared */
    F.launch_oom = 0;
    k.u.kernel.f = f;
    CHECK_CU(call(k), CUDA_SUCCESS);
    sg_launch_filter_switched();
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 0);

    setup(SG_POLICY_ALWAYS_UPDATE, SIZE_MAX);             /* not placing: every launch direct */
    CHECK_CU(call(k), CUDA_SUCCESS);
    CHECK(sg_launch_known == sg_launch_all);
    sg_launch_filter_switched();
}

/* Another thread's cuCtxDestroy of the context current here, between a
 * first launch's forward and its mark: the launch ran in the context while
 * it lived, but the mark would land in a table made for the dead value,
 * which a context made later on that value finds (its first launch of the
 * function direct, without the retry). Not marked; nor while any destroy
 * is in flight; marked again once none is. */
static void destroy_current(void)
{
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_DESTROY, .u.ctx = { .ctx = F.cur } }), CUDA_SUCCESS);
}

static void launch_first(void)
{
    F.cur = CTX2;                 /* this thread's context, alive */
    sg_launch_filter_switched();
    CHECK_CU(call((sg_call){ .kind = SG_CALL_KERNEL, .u.kernel = { .f = (CUfunction)0x7100 } }),
             CUDA_SUCCESS);
}

TEST(launch_filter_context_destroyed_meanwhile)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUfunction f = (CUfunction)0x7000;
    sg_call k = { .kind = SG_CALL_KERNEL, .u.kernel = { .f = f } };
    F.cur = CTX2;
    F.during_launch = destroy_current;
    CHECK_CU(call(k), CUDA_SUCCESS);
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 0);      /* not marked for the dead value */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_SWITCH }), CUDA_SUCCESS);
    CHECK_CU(call(k), CUDA_SUCCESS);                      /* a new context on the value: */
    CHECK_EQ(F.launches, 2);                              /* its first launch took the general path */
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(f)], 1);      /* and is marked now */
    CUfunction g = (CUfunction)0x7100;
    F.cur = CTX1;                                         /* another thread's context ends */
    F.during_destroy = launch_first;                      /* while this one launches g */
    destroy_current();
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(g)], 0);      /* not marked while it is in flight */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_SWITCH }), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_KERNEL, .u.kernel = { .f = g } }), CUDA_SUCCESS);
    CHECK_EQ(sg_launch_known[SG_LAUNCH_SLOT(g)], 1);      /* no destroy in flight: marked */
    sg_launch_filter_switched();
}

/* cuMemGetInfo counts as free the placed memory a new allocation could get:
 * wholly free granules, not holes beside live blocks. */
TEST(memory_info_counts_freed_placed_memory)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b;
    CHECK_CU(alloc(&a, 1 << 20), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 1 << 20), CUDA_SUCCESS);
    F.drv_free = 1000;
    size_t fr = 0, tot = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEM_INFO, .u.info = { &fr, &tot } }), CUDA_SUCCESS);
    CHECK_EQ(fr, 1000);                                   /* one granule, all of it live */
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEM_INFO, .u.info = { &fr, &tot } }), CUDA_SUCCESS);
    CHECK_EQ(fr, 1000);                                   /* a hole beside b: no use to more */
    CHECK_CU(mfree(b), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEM_INFO, .u.info = { &fr, &tot } }), CUDA_SUCCESS);
    CHECK_EQ(fr, 1000 + G);                               /* the granule, wholly free */
}

/* The driver's range checks over placed blocks (issue 10, class 17). */
TEST(range_checks)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b;
    CHECK_CU(alloc(&a, 1000), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 1000), CUDA_SUCCESS);              /* right after a, same chunk */
    int other = F.fwd_other;
#define MEMSET(p, n) call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_RANGES, .dst = (p), .dst_bytes = (n) } })
    CHECK_CU(MEMSET(a, 1000), CUDA_SUCCESS);
    CHECK_CU(MEMSET(a + 996, 4), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_other, other + 2);
    CHECK_CU(MEMSET(a, 1004), CUDA_ERROR_INVALID_VALUE);  /* past a's end, into b */
    CHECK_CU(MEMSET(a + 999, 2), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(F.fwd_other, other + 2);                     /* refused: the driver never saw it */
    CHECK_CU(MEMSET(0x50000000, 1 << 30), CUDA_SUCCESS);  /* not ours: the driver checks */
    CHECK_CU(mfree(b), CUDA_SUCCESS);
    CHECK_CU(MEMSET(b, 4), CUDA_ERROR_INVALID_VALUE);     /* freed placed memory */
    CUDA_MEMSET_NODE_PARAMS m = { .dst = a, .pitch = 0, .value = 0, .elementSize = 4, .width = 251, .height = 1 };
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_MEMSET_NODE, .desc = &m } }),
             CUDA_ERROR_INVALID_VALUE);
    m.width = 250;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_MEMSET_NODE, .desc = &m } }),
             CUDA_SUCCESS);
    CUDA_MEMCPY2D c2 = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a, .srcPitch = 500,
                         .dstMemoryType = CU_MEMORYTYPE_HOST, .WidthInBytes = 500, .Height = 2 };
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_COPY2D, .desc = &c2 } }),
             CUDA_SUCCESS);
    c2.srcY = 1;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_COPY2D, .desc = &c2 } }),
             CUDA_ERROR_INVALID_VALUE);
#undef MEMSET
}

/* VMM queries on placed memory answer as for cuMemAlloc memory (class 16). */
TEST(vmm_queries_see_a_cumemalloc_block)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0;
    int other = F.fwd_other;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_RETAIN_HANDLE, .u.retain = { &h, (void *)(uintptr_t)a } }),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(h, 0);
    unsigned long long flags = 0;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CHECK_CU(call((sg_call){ .kind = SG_CALL_MEM_ACCESS, .u.access = { &flags, &loc, a } }),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(F.fwd_other, other);
    unsigned long long types = 99;
    int ipc = -1;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { &types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, a } }),
             CUDA_SUCCESS);
    CHECK_EQ(types, CU_MEM_HANDLE_TYPE_NONE);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { &ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a } }),
             CUDA_SUCCESS);
    CHECK_EQ(ipc, 1);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_RETAIN_HANDLE, .u.retain = { &h, (void *)(uintptr_t)0x50010000 } }),
             CUDA_SUCCESS);                               /* not ours: the driver's answer */
    CHECK_EQ(F.fwd_other, other + 1);
}

/* cuMemAlloc while a capture is in progress goes to the driver, which
 * decides (class 7); outside it is placed again. */
TEST(alloc_during_capture_goes_to_the_driver)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_BEGIN }), CUDA_SUCCESS);
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 1);
    CHECK(!sg_mem_find(a, NULL));
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CAPTURE_END }), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 4096), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 1);
    CHECK(sg_mem_find(b, NULL));
}

/* A free whose context cannot be made current (cuCtxGetCurrent failing,
 * issue 14): the program gets success, nothing leaks, and the range is
 * reused only after the next synchronization of that context. */
TEST(free_without_context_quarantines)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b, c;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(alloc(&b, 4096), CUDA_SUCCESS);
    F.ctx_get_fails = 1;
    int frees = F.token_frees;
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_EQ(F.token_frees, frees);                        /* could not synchronize */
    CHECK(!sg_mem_find(a, NULL));
    F.ctx_get_fails = 0;
    CHECK_CU(alloc(&c, 4096), CUDA_SUCCESS);
    CHECK(c != a);                                         /* quarantined */
    CHECK_CU(mfree(b), CUDA_SUCCESS);                      /* synchronizes: a is free now */
    CUdeviceptr d;
    CHECK_CU(alloc(&d, 4096), CUDA_SUCCESS);
    CHECK_EQ(d, a);
    sg_mem_reset();
    check_released();
}

/* A destroyed stream's handle may come back: its pending frees wait for
 * their events only (class 10). */
TEST(destroyed_stream_pending_frees)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, b;
    CHECK_CU(alloc_async(&a, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(mfree_async(a, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_STREAM_DESTROY, .u.stream = { STREAM_A } }), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&b, 4096, STREAM_A), CUDA_SUCCESS);   /* a new stream, same handle */
    CHECK(b != a);
    for (int i = 0; i < 64; i++) F.ev_done[i] = 1;
    CUdeviceptr c;
    CHECK_CU(alloc_async(&c, 4096, STREAM_B), CUDA_SUCCESS);
    CHECK_EQ(c, a);
}

/* A placed cuMemAllocAsync block answers as memory of the device's default
 * pool: no context, that pool, no legacy IPC, no GPUDirect RDMA. */
TEST(stream_ordered_blocks_answer_as_default_pool_memory)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, s;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&s, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, 0);
    struct { CUdeviceptr p; CUcontext ctx; CUmemoryPool pool; int ipc; } want[] = {
        { a + 8, CTX1, NULL, 1 }, { s + 8, NULL, DEFAULT_POOL, 0 },
    };
    for (int i = 0; i < 2; i++) {
        CUcontext ctx = (CUcontext)1;
        CUmemoryPool pool = (CUmemoryPool)1;
        int ipc = -1, rdma = -1;
        CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &ctx,
                                 .attr = CU_POINTER_ATTRIBUTE_CONTEXT, .ptr = want[i].p } }), CUDA_SUCCESS);
        CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &pool,
                                 .attr = CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, .ptr = want[i].p } }),
                 CUDA_SUCCESS);
        CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &ipc,
                                 .attr = CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, .ptr = want[i].p } }),
                 CUDA_SUCCESS);
        CHECK_CU(call((sg_call){ .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = &rdma,
                                 .attr = CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, .ptr = want[i].p } }),
                 CUDA_SUCCESS);
        CHECK(ctx == want[i].ctx);
        CHECK(pool == want[i].pool);
        CHECK_EQ(ipc, want[i].ipc);
        CHECK_EQ(rdma, 0);           /* the fake device reports no RDMA support */
    }
}

static CUresult set_pool(CUdevice dev, CUmemoryPool pool)
{
    return call((sg_call){ .kind = SG_CALL_POOL_SET, .u.pool = { .dev = dev, .pool = pool } });
}

static CUresult set_pool_at(CUmemLocationType t, int id, CUmemAllocationType type, CUmemoryPool pool)
{
    CUmemLocation loc = { t, id };
    return call((sg_call){ .kind = SG_CALL_POOL_SET,
                           .u.pool = { .loc = &loc, .type = type, .pool = pool, .by_location = 1 } });
}

/* Whether cuMemAllocAsync on STREAM_A is placed now (the forwarded count
 * unchanged); frees what it got. */
static int async_placed(void)
{
    CUdeviceptr p;
    int before = F.fwd_allocs;
    CHECK_CU(alloc_async(&p, 4096, STREAM_A), CUDA_SUCCESS);
    int placed = F.fwd_allocs == before;
    CHECK_CU(mfree_async(p, STREAM_A), CUDA_SUCCESS);
    return placed;
}

/* Another pool made current (cuDeviceSetMemPool, cuMemSetMemPool): the
 * device's cuMemAllocAsync comes from it, the driver's; the default one
 * again places again; cuMemAlloc is placed throughout. */
TEST(a_replaced_current_pool_gets_the_allocations)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a;
    CHECK(async_placed());
    CHECK_CU(set_pool(1, OTHER_POOL), CUDA_SUCCESS);              /* another device's */
    CHECK(async_placed());
    CHECK_CU(set_pool(0, OTHER_POOL), CUDA_SUCCESS);
    CHECK(!async_placed());
    int before = F.fwd_allocs;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_EQ(F.fwd_allocs, before);                               /* cuMemAlloc: placed */
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_CU(set_pool(0, DEFAULT_POOL), CUDA_SUCCESS);
    CHECK(async_placed());
    F.pool_set_rc = CUDA_ERROR_INVALID_VALUE;                     /* refused: nothing changes */
    CHECK_CU(set_pool(0, OTHER_POOL), CUDA_ERROR_INVALID_VALUE);
    CHECK(async_placed());
    F.pool_set_rc = CUDA_SUCCESS;
    /* by location: the host's pool and managed memory leave the device's
     * pinned pool alone; the device's pinned pool replaces it */
    CHECK_CU(set_pool_at(CU_MEM_LOCATION_TYPE_HOST, 0, CU_MEM_ALLOCATION_TYPE_PINNED, OTHER_POOL),
             CUDA_SUCCESS);
    CHECK_CU(set_pool_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ALLOCATION_TYPE_MANAGED, OTHER_POOL),
             CUDA_SUCCESS);
    CHECK(async_placed());
    CHECK_CU(set_pool_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ALLOCATION_TYPE_PINNED, OTHER_POOL),
             CUDA_SUCCESS);
    CHECK(!async_placed());
    CHECK_CU(set_pool_at(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ALLOCATION_TYPE_PINNED, DEFAULT_POOL),
             CUDA_SUCCESS);
    CHECK(async_placed());
    /* a location the library does not model: every device forwarded */
    CHECK_CU(set_pool_at(CU_MEM_LOCATION_TYPE_INVALID, 0, CU_MEM_ALLOCATION_TYPE_PINNED, OTHER_POOL),
             CUDA_SUCCESS);
    CHECK(!async_placed());
}

static CUresult destroy_pool(CUmemoryPool pool)
{
    return call((sg_call){ .kind = SG_CALL_POOL_SET, .u.pool = { .pool = pool, .destroyed = 1 } });
}

/* cuMemPoolDestroy of the current pool makes the device's default pool
 * current again: the library asks the driver after each destroy and places
 * again where the default pool is current. */
TEST(a_destroyed_current_pool_gives_the_default_one_back)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CHECK_CU(set_pool(0, OTHER_POOL), CUDA_SUCCESS);
    CHECK(!async_placed());
    F.cur_pool = OTHER_POOL;                        /* another pool destroyed: still current */
    CHECK_CU(destroy_pool((CUmemoryPool)0x9999), CUDA_SUCCESS);
    CHECK(!async_placed());
    F.cur_pool = NULL;
    F.pool_set_rc = CUDA_ERROR_INVALID_VALUE;       /* refused: nothing changes */
    CHECK_CU(destroy_pool(OTHER_POOL), CUDA_ERROR_INVALID_VALUE);
    CHECK(!async_placed());
    F.pool_set_rc = CUDA_SUCCESS;
    CHECK_CU(destroy_pool(OTHER_POOL), CUDA_SUCCESS);
    CHECK(async_placed());
}

/* cuCtxDestroy leaves cuMemAllocAsync memory alone: the arena outlives its
 * context while such blocks live (orphaned), serves their frees, and goes
 * with the last one; cuMemAlloc blocks go with the context. */
TEST(stream_ordered_blocks_outlive_their_context)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, s1, s2, p;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&s1, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&s2, 3 << 20, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_DESTROY, .u.ctx = { .ctx = CTX1 } }), CUDA_SUCCESS);
    CHECK(!sg_mem_find(a, NULL));
    CHECK(sg_mem_find(s1, NULL) && sg_mem_find(s2 + 100, NULL));
    CHECK_EQ(F.releases, 0);                             /* their chunks stay mapped */
    F.cur = CTX2;                                        /* a new context: a new arena */
    CHECK_CU(alloc(&p, 4096), CUDA_SUCCESS);
    CHECK(p != s1);
    CHECK_CU(mfree_async(s1, STREAM_B), CUDA_SUCCESS);
    CHECK_EQ(F.releases, 0);
    int syncs = F.token_frees;
    CHECK_CU(mfree(s2), CUDA_SUCCESS);                   /* the last one: the orphan goes */
    CHECK_EQ(F.token_frees, syncs);                      /* no synchronization */
    CHECK_CU(mfree(s2), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(F.addr_frees, 1);                           /* CTX1's reservation, not CTX2's */
    CHECK_CU(mfree(p), CUDA_SUCCESS);
    sg_mem_reset();
    check_released();
    /* a reset ends orphans too */
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CHECK_CU(alloc_async(&s1, 4096, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(call((sg_call){ .kind = SG_CALL_CTX_DESTROY, .u.ctx = { .ctx = CTX1 } }), CUDA_SUCCESS);
    CHECK(sg_mem_find(s1, NULL));
    sg_mem_reset();
    CHECK(!sg_mem_find(s1, NULL));
    check_released();
}

/* cuMemFree of a cuMemAllocAsync block synchronizes nothing (no token, the
 * range reusable at once); with no context current it is refused, as are
 * cuMemGetAddressRange and the free of a cuMemAlloc block. */
TEST(frees_without_synchronization_or_context)
{
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    CUdeviceptr a, s, t, base;
    size_t size;
    CHECK_CU(alloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&s, 4096, STREAM_A), CUDA_SUCCESS);
    F.cur = NULL;
    CHECK_CU(mfree(a), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(mfree(s), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(mfree_async(s, NULL), CUDA_ERROR_INVALID_CONTEXT);   /* the legacy stream of no context */
    CHECK_CU(call((sg_call){ .kind = SG_CALL_ADDR_RANGE, .u.range = { .base = &base, .size = &size,
                             .ptr = a } }), CUDA_ERROR_INVALID_CONTEXT);
    CHECK(sg_mem_find(a, NULL) && sg_mem_find(s, NULL));
    F.cur = CTX1;
    int tokens = F.token_frees;
    CHECK_CU(mfree(s), CUDA_SUCCESS);
    CHECK_EQ(F.token_frees, tokens);
    CHECK_CU(alloc_async(&t, 4096, STREAM_B), CUDA_SUCCESS);
    CHECK_EQ(t, s);                                      /* reusable at once, on any stream */
    CHECK_CU(mfree(a), CUDA_SUCCESS);
    CHECK_EQ(F.token_frees, tokens + 1);                 /* cuMemAlloc memory: synchronized */
}

static cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_POOL_ATTR, .u.pattr = { pool, a, &v, 0 } }), CUDA_SUCCESS);
    return v;
}

static CUresult pool_reset(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t zero = 0;
    return call((sg_call){ .kind = SG_CALL_POOL_ATTR, .u.pattr = { pool, a, &zero, 1 } });
}

/* The default pool's memory figures (cuMemPoolGetAttribute) count the
 * stream-ordered blocks the library placed, which the driver's pool never
 * saw: in use, reserved, their peaks and the reset of a peak; cuMemAlloc
 * blocks, another pool and the other attributes are the driver's alone, and
 * an error is the driver's (round 23: the figures read 0 for placed memory,
 * and a framework sizing a cache from the peak saw none). */
TEST(default_pool_figures_count_placed_stream_ordered_memory)
{
    const CUmemPool_attribute used = CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                              res = CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                              used_high = CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                              res_high = CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH;
    setup(SG_POLICY_SKIP_TEMP, SIZE_MAX);
    F.pool_drv = 100;
    CHECK_EQ(pool_attr(DEFAULT_POOL, used), 100);            /* nothing placed yet */
    CUdeviceptr a, b, c;
    CHECK_CU(alloc(&c, 5000), CUDA_SUCCESS);                 /* not the pool's */
    CHECK_CU(alloc_async(&a, 3000, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(alloc_async(&b, 1 << 20, STREAM_B), CUDA_SUCCESS);
    CHECK(sg_mem_find(a, NULL) && sg_mem_find(b, NULL));     /* both placed */
    const cuuint64_t both = 100 + 3000 + (1 << 20);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used), both);
    CHECK_EQ(pool_attr(DEFAULT_POOL, res), both);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used_high), both);
    CHECK_EQ(pool_attr(DEFAULT_POOL, res_high), both);
    CHECK_EQ(pool_attr(OTHER_POOL, used), 100);              /* not a default pool */
    CHECK_EQ(pool_attr(DEFAULT_POOL, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 100);
    CHECK_CU(mfree_async(b, STREAM_B), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used), 100 + 3000);
    CHECK_EQ(pool_attr(DEFAULT_POOL, res), 100 + 3000);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used_high), both);      /* the peak stays */
    CHECK_CU(pool_reset(DEFAULT_POOL, used_high), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used_high), 100 + 3000);
    CHECK_EQ(pool_attr(DEFAULT_POOL, res_high), both);       /* reset apart */
    CHECK_CU(pool_reset(DEFAULT_POOL, res_high), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(DEFAULT_POOL, res_high), 100 + 3000);
    F.pool_attr_rc = CUDA_ERROR_INVALID_VALUE;               /* the driver refuses: untouched */
    cuuint64_t v = 7;
    CHECK_CU(call((sg_call){ .kind = SG_CALL_POOL_ATTR, .u.pattr = { DEFAULT_POOL, used, &v, 0 } }),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(v, 7);
    CHECK_CU(pool_reset(DEFAULT_POOL, used_high), CUDA_ERROR_INVALID_VALUE);
    F.pool_attr_rc = CUDA_SUCCESS;
    CHECK_CU(mfree_async(a, STREAM_A), CUDA_SUCCESS);
    CHECK_CU(mfree(c), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used), 100);
    CHECK_EQ(pool_attr(DEFAULT_POOL, res_high), 100 + 3000);

    setup(SG_POLICY_ALWAYS_UPDATE, SIZE_MAX);                /* nothing placed: the driver's */
    F.pool_drv = 100;
    CHECK_CU(alloc_async(&a, 3000, STREAM_A), CUDA_SUCCESS);
    CHECK_EQ(pool_attr(DEFAULT_POOL, used), 100);
    CHECK_CU(mfree_async(a, STREAM_A), CUDA_SUCCESS);
}

int main(void)
{
    RUN(always_update_counts_peak);
    RUN(views_hold_forwarded_allocations_when_nothing_is_placed);
    RUN(skip_temp_places_deterministically);
    RUN(registry_and_views);
    RUN(registry_of_many_blocks);
    RUN(what_the_program_observes);
    RUN(free_asks_the_driver);
    RUN(vmm_failures_fall_back);
    RUN(no_vmm_forwards_everything);
    RUN(stream_ordered_reuse);
    RUN(context_teardown);
    RUN(own_handle_blocks);
    RUN(place_max_bytes);
    RUN(pressure_gives_memory_back);
    RUN(memory_info_counts_freed_placed_memory);
    RUN(range_checks);
    RUN(vmm_queries_see_a_cumemalloc_block);
    RUN(alloc_during_capture_goes_to_the_driver);
    RUN(free_without_context_quarantines);
    RUN(destroyed_stream_pending_frees);
    RUN(stream_ordered_blocks_answer_as_default_pool_memory);
    RUN(a_replaced_current_pool_gets_the_allocations);
    RUN(a_destroyed_current_pool_gives_the_default_one_back);
    RUN(stream_ordered_blocks_outlive_their_context);
    RUN(frees_without_synchronization_or_context);
    RUN(default_pool_figures_count_placed_stream_ordered_memory);
    RUN(frees_keep_the_device_headroom);
    RUN(launch_filter);
    RUN(launch_filter_context_destroyed_meanwhile);
    sg_mem_reset();
    return check_done();
}
