/*
 * tests/unit/fake_vmm.h: an in-memory fake of the driver's VMM, event,
 * context and capture-mode calls for unit tests of core/ (header-only; each
 * test program includes it once). Single-threaded, like the tests.
 *
 * What it models (FV holds all state; fv_install() resets it and installs
 * the fakes as core/'s driver table):
 *   - reservations (address ranges handed out from FV_VA_BASE upwards),
 *     physical handles (numbered), mappings with the driver's rules: whole
 *     handles (offset 0, granularity FV_G), no mapping over a mapped range,
 *     unmap and set-access only over whole mappings; FV.live_maps counts
 *     mappings present, FV.maps_ok / FV.unmaps_ok successful calls;
 *   - events: cuEventRecord stamps the event with the device range the test
 *     declared as touched by the launch just queued (fv_touch); the event
 *     completes only when the test says so (fv_complete), on
 *     cuEventSynchronize, or on cuCtxSynchronize. Mapping or unmapping over
 *     a range that an uncompleted event still covers counts a violation,
 *     like the emulated driver;
 *   - capture mode: FV.not_relaxed counts VMM and event calls made while
 *     the thread is not in relaxed mode;
 *   - FV.ctx_sync_rc makes cuCtxSynchronize fail (besides fv_fail);
 *   - devices: FV.ndev devices, FV.peer[d] = device d can access device 0;
 *   - fault injection: fv_fail(name, n, every): the n-th call of that ELF
 *     name from now fails (and every later one if `every`), doing nothing.
 */
#ifndef FAKE_VMM_H
#define FAKE_VMM_H

#include <cuda.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "core/driver.h"

#define FV_G ((size_t)2 << 20)
#define FV_VA_BASE 0x7f0000000000ULL
#define FV_MAXMAP 64
#define FV_MAXEV 64
#define FV_CTX ((CUcontext)0x1111)

typedef struct fv_map {
    CUdeviceptr va;
    size_t size;
    CUmemGenericAllocationHandle h;
    int access;                        /* cuMemSetAccess covered it */
} fv_map;

static struct fv {
    CUcontext cur;
    CUstreamCaptureMode mode;
    int ndev, peer[8];
    int vmm;
    CUdeviceptr next_va;
    int reserves, addr_frees, creates, releases;
    int map_calls, maps_ok, unmap_calls, unmaps_ok, access_calls;
    int ev_creates, ev_destroys, records, queries, ev_syncs, ctx_syncs;
    int not_relaxed, violations;
    CUresult ctx_sync_rc;              /* non-zero: cuCtxSynchronize fails with it */
    fv_map map[FV_MAXMAP];
    int live_maps;
    CUmemAccessDesc desc[8];
    size_t ndesc;
    struct { int recorded, done; CUdeviceptr lo, hi; } ev[FV_MAXEV];
    CUdeviceptr touch_lo, touch_hi;
    const char *fail;
    int fail_at, fail_seen, fail_every;
} FV;

static inline void fv_fail(const char *name, int nth, int every)
{
    FV.fail = name;
    FV.fail_at = nth;
    FV.fail_seen = 0;
    FV.fail_every = every;
}

/* Every fake VMM / event call passes here: checks the mode, decides failure. */
static inline int fv_call(const char *name)
{
    if (FV.mode != CU_STREAM_CAPTURE_MODE_RELAXED) FV.not_relaxed++;
    if (!FV.fail || strcmp(FV.fail, name) != 0) return 0;
    FV.fail_seen++;
    return FV.fail_seen == FV.fail_at || (FV.fail_every && FV.fail_seen > FV.fail_at);
}

/* The next launch touches [lo, hi) until its event completes. */
static inline void fv_touch(CUdeviceptr lo, CUdeviceptr hi)
{
    FV.touch_lo = lo;
    FV.touch_hi = hi;
}

static inline void fv_complete_all(void)
{
    for (int i = 0; i < FV_MAXEV; i++) FV.ev[i].done = 1;
}

/* The event recorded most recently over [lo, hi) is completed. */
static inline void fv_complete(CUevent e) { FV.ev[(uintptr_t)e % FV_MAXEV].done = 1; }

static inline void fv_check_inflight(CUdeviceptr va, size_t size)
{
    for (int i = 0; i < FV_MAXEV; i++)
        if (FV.ev[i].recorded && !FV.ev[i].done && va < FV.ev[i].hi && FV.ev[i].lo < va + size)
            FV.violations++;
}

/* The mapping starting at va, or -1. */
static inline int fv_map_at(CUdeviceptr va)
{
    for (int i = 0; i < FV.live_maps; i++)
        if (FV.map[i].va == va) return i;
    return -1;
}

/* 1 if [va, va+size) is exactly a run of whole mappings; applies f to each. */
static inline int fv_whole_run(CUdeviceptr va, size_t size, void (*f)(int))
{
    CUdeviceptr pos = va;
    int idx[FV_MAXMAP], n = 0, i;
    while (pos < va + size && (i = fv_map_at(pos)) >= 0) {
        idx[n++] = i;
        pos += FV.map[i].size;
    }
    if (pos != va + size || size == 0) return 0;
    for (int a = 0; a < n; a++)  /* highest index first: f may remove (swap with the last) */
        for (int b = a + 1; b < n; b++)
            if (idx[b] > idx[a]) { int t = idx[a]; idx[a] = idx[b]; idx[b] = t; }
    for (int a = 0; a < n; a++) f(idx[a]);
    return 1;
}

static inline void fv_grant(int i) { FV.map[i].access = 1; }
static inline void fv_drop(int i)
{
    FV.map[i] = FV.map[--FV.live_maps];
    FV.unmaps_ok++;
}

static CUresult fv_ctx_get(CUcontext *c) { *c = FV.cur; return CUDA_SUCCESS; }
static CUresult fv_ctx_set(CUcontext c) { FV.cur = c; return CUDA_SUCCESS; }
static CUresult fv_ctx_dev(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
static CUresult fv_ctx_sync(void)
{
    FV.ctx_syncs++;
    if (fv_call("cuCtxSynchronize")) return CUDA_ERROR_UNKNOWN;
    if (FV.ctx_sync_rc) return FV.ctx_sync_rc;
    fv_complete_all();
    return CUDA_SUCCESS;
}
static CUresult fv_dev_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)d;
    *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? FV.vmm : 0;
    return CUDA_SUCCESS;
}
static CUresult fv_dev_count(int *n) { *n = FV.ndev; return CUDA_SUCCESS; }
static CUresult fv_can_peer(int *can, CUdevice d, CUdevice peer)
{
    *can = peer == 0 && d >= 0 && d < 8 && FV.peer[d];
    return CUDA_SUCCESS;
}
static CUresult fv_total(size_t *b, CUdevice d) { (void)d; *b = (size_t)16 << 30; return CUDA_SUCCESS; }
static CUresult fv_exchange(CUstreamCaptureMode *m)
{
    CUstreamCaptureMode old = FV.mode;
    FV.mode = *m;
    *m = old;
    return CUDA_SUCCESS;
}
static CUresult fv_ev_create(CUevent *e, unsigned fl)
{
    (void)fl;
    if (fv_call("cuEventCreate")) return CUDA_ERROR_OUT_OF_MEMORY;
    *e = (CUevent)(uintptr_t)++FV.ev_creates;
    return CUDA_SUCCESS;
}
static CUresult fv_ev_destroy(CUevent e) { (void)e; fv_call("cuEventDestroy_v2"); FV.ev_destroys++; return CUDA_SUCCESS; }
static CUresult fv_ev_record(CUevent e, CUstream s)
{
    (void)s;
    if (fv_call("cuEventRecord")) return CUDA_ERROR_INVALID_HANDLE;
    FV.records++;
    int i = (int)((uintptr_t)e % FV_MAXEV);
    FV.ev[i].recorded = 1;
    FV.ev[i].done = 0;
    FV.ev[i].lo = FV.touch_lo;
    FV.ev[i].hi = FV.touch_hi;
    return CUDA_SUCCESS;
}
static CUresult fv_ev_query(CUevent e)
{
    if (fv_call("cuEventQuery")) return CUDA_ERROR_INVALID_HANDLE;
    FV.queries++;
    return FV.ev[(uintptr_t)e % FV_MAXEV].done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
static CUresult fv_ev_sync(CUevent e)
{
    FV.ev_syncs++;
    if (fv_call("cuEventSynchronize")) return CUDA_ERROR_UNKNOWN;
    fv_complete(e);
    return CUDA_SUCCESS;
}
static CUresult fv_reserve(CUdeviceptr *p, size_t size, size_t al, CUdeviceptr addr,
                           unsigned long long fl)
{
    (void)addr; (void)fl;
    if (fv_call("cuMemAddressReserve")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (al < FV_G) al = FV_G;
    FV.next_va = (FV.next_va + al - 1) / al * al;
    *p = FV.next_va;
    FV.next_va += size;
    FV.reserves++;
    return CUDA_SUCCESS;
}
static CUresult fv_addr_free(CUdeviceptr p, size_t s)
{
    (void)p; (void)s;
    if (fv_call("cuMemAddressFree")) return CUDA_ERROR_INVALID_VALUE;
    FV.addr_frees++;
    return CUDA_SUCCESS;
}
static CUresult fv_create(CUmemGenericAllocationHandle *h, size_t s, const CUmemAllocationProp *p,
                          unsigned long long fl)
{
    (void)p; (void)fl;
    if (fv_call("cuMemCreate") || s % FV_G) return CUDA_ERROR_OUT_OF_MEMORY;
    *h = (CUmemGenericAllocationHandle)(0x100 + ++FV.creates);
    return CUDA_SUCCESS;
}
static CUresult fv_release(CUmemGenericAllocationHandle h) { (void)h; fv_call("cuMemRelease"); FV.releases++; return CUDA_SUCCESS; }
static CUresult fv_mem_map(CUdeviceptr p, size_t s, size_t off, CUmemGenericAllocationHandle h,
                       unsigned long long fl)
{
    FV.map_calls++;
    if (fv_call("cuMemMap")) return CUDA_ERROR_OUT_OF_MEMORY;
    if (off || fl || s == 0 || s % FV_G || p % FV_G || FV.live_maps == FV_MAXMAP)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < FV.live_maps; i++)
        if (p < FV.map[i].va + FV.map[i].size && FV.map[i].va < p + s) return CUDA_ERROR_INVALID_VALUE;
    fv_check_inflight(p, s);
    FV.map[FV.live_maps++] = (fv_map){ p, s, h, 0 };
    FV.maps_ok++;
    return CUDA_SUCCESS;
}
static CUresult fv_unmap(CUdeviceptr p, size_t s)
{
    FV.unmap_calls++;
    if (fv_call("cuMemUnmap")) return CUDA_ERROR_UNKNOWN;
    fv_check_inflight(p, s);
    return fv_whole_run(p, s, fv_drop) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static CUresult fv_access(CUdeviceptr p, size_t s, const CUmemAccessDesc *d, size_t n)
{
    FV.access_calls++;
    if (fv_call("cuMemSetAccess")) return CUDA_ERROR_INVALID_VALUE;
    if (n == 0 || n > 8) return CUDA_ERROR_INVALID_VALUE;
    if (!fv_whole_run(p, s, fv_grant)) return CUDA_ERROR_INVALID_VALUE;
    memcpy(FV.desc, d, n * sizeof *d);
    FV.ndesc = n;
    return CUDA_SUCCESS;
}
static CUresult fv_gran(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags f)
{
    (void)p; (void)f;
    *g = FV_G;
    return CUDA_SUCCESS;
}

/* Resets FV (one device, VMM on, GLOBAL capture mode) and installs the fakes. */
static inline void fv_install(void)
{
    memset(&FV, 0, sizeof FV);
    FV.cur = FV_CTX;
    FV.mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    FV.ndev = 1;
    FV.vmm = 1;
    FV.next_va = FV_VA_BASE;
    sg_driver d;
    memset(&d, 0, sizeof d);
    d.cuCtxGetCurrent = fv_ctx_get;
    d.cuCtxSetCurrent = fv_ctx_set;
    d.cuCtxGetDevice = fv_ctx_dev;
    d.cuCtxSynchronize = fv_ctx_sync;
    d.cuDeviceGetAttribute = fv_dev_attr;
    d.cuDeviceGetCount = fv_dev_count;
    d.cuDeviceCanAccessPeer = fv_can_peer;
    d.cuDeviceTotalMem_v2 = fv_total;
    d.cuThreadExchangeStreamCaptureMode = fv_exchange;
    d.cuEventCreate = fv_ev_create;
    d.cuEventDestroy_v2 = fv_ev_destroy;
    d.cuEventRecord = d.cuEventRecord_ptsz = fv_ev_record;
    d.cuEventQuery = fv_ev_query;
    d.cuEventSynchronize = fv_ev_sync;
    d.cuMemAddressReserve = fv_reserve;
    d.cuMemAddressFree = fv_addr_free;
    d.cuMemCreate = fv_create;
    d.cuMemRelease = fv_release;
    d.cuMemMap = fv_mem_map;
    d.cuMemUnmap = fv_unmap;
    d.cuMemSetAccess = fv_access;
    d.cuMemGetAllocationGranularity = fv_gran;
    sg_driver_set(&d);
}

#endif /* FAKE_VMM_H */
