/*
 * tests/e2e/slots_prog.c: core/slots.c on the emulated driver's real VMM,
 * for tests/e2e/test_slots.sh. No interposer: the program fills core/'s
 * driver table with the driver's own functions (dlsym of each ELF name of
 * core/driver.h) and calls the slots API directly, with two buffers it backs
 * with its own physical handles (cuMemCreate + cuMemMap) and binds through
 * explicit handle lists. Kernels come from mod_test.so. Prints one
 * "name=value" line per observation; the script compares them.
 *
 *   slots_prog alias MOD   aliasing (a kernel writing through the slot
 *                          changes the buffer seen at its own address),
 *                          rebinding redirects writes, SG_SLOTS_BUSY while a
 *                          launch is in flight and a wait that lets it
 *                          finish first, back-to-back launches and rebinds,
 *                          two generations rotating with no VMM call
 *   slots_prog peer MOD    access of the slot for every device (run with
 *                          CUDAEMU_DEVICES=2)
 *   slots_prog fault MOD   binds under CUDAEMU_FAIL: a failed bind leaves the
 *                          slot empty, a later one works and writes land
 *   slots_prog broken MOD  negative control: unmaps a slot under a running
 *                          kernel behind the library's back (then maps it
 *                          again before the kernel writes): the emulated
 *                          driver must count that as a violation
 */
#include <cuda.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/contexts.h"
#include "core/core.h"
#include "core/driver.h"
#include "core/slots.h"

#define CK(call)                                                              \
    do {                                                                      \
        CUresult ck_ = (call);                                                \
        if (ck_ != CUDA_SUCCESS) {                                            \
            printf("error=%s:%d:%d\n", #call, __LINE__, (int)ck_);            \
            return 1;                                                         \
        }                                                                     \
    } while (0)

#define N 4096                      /* u32 elements the kernels touch */

static CUcontext ctx;
static CUstream stream;
static CUfunction k_fill, k_inc, k_sleep_fill;
static size_t gran;
static CUdeviceptr last_slot;       /* the slot a mode used, checked after teardown */

typedef struct buf {
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    sg_mem_handle mh;
    sg_slot_bind bind;
} buf;

static void fill_driver_table(void)
{
    sg_driver d;
    memset(&d, 0, sizeof d);
#define FILL_(name, ret, params) d.name = (ret(*) params)dlsym(RTLD_DEFAULT, #name);
    SG_DRIVER_LIST(FILL_)
#undef FILL_
    sg_driver_set(&d);
    sg_slots_init();
}

/* One granule of device memory on its own handle, as the library's
 * own-handle allocations are; id names it for the slots. */
static int buf_make(buf *b, uint64_t id)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(cuMemAddressReserve(&b->va, gran, gran, 0, 0));
    CK(cuMemCreate(&b->h, gran, &prop, 0));
    CK(cuMemMap(b->va, gran, 0, b->h, 0));
    CK(cuMemSetAccess(b->va, gran, &acc, 1));
    memset((void *)(uintptr_t)b->va, 0, N * 4);
    b->mh = (sg_mem_handle){ b->h, b->va, gran, 0 };
    b->bind = (sg_slot_bind){ id, b->va, &b->mh, 1 };
    return 0;
}

static int buf_free(buf *b)
{
    CK(cuMemUnmap(b->va, gran));
    CK(cuMemRelease(b->h));
    CK(cuMemAddressFree(b->va, gran));
    return 0;
}

/* 1 if the first and last of the N elements of p hold v (the host sees
 * emulated device memory directly). */
static int holds(CUdeviceptr p, uint32_t v)
{
    const volatile uint32_t *q = (const uint32_t *)(uintptr_t)p;
    return q[0] == v && q[N / 2] == v && q[N - 1] == v;
}

static CUresult fill(CUdeviceptr p, uint32_t v)
{
    uint64_t n = N;
    void *args[] = { &p, &v, &n };
    return cuLaunchKernel(k_fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

static CUresult inc(CUdeviceptr p)
{
    uint64_t n = N;
    void *args[] = { &p, &n };
    return cuLaunchKernel(k_inc, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

static CUresult sleep_fill(CUdeviceptr p, uint32_t v, uint32_t us)
{
    uint64_t n = N;
    void *args[] = { &p, &v, &n, &us };
    return cuLaunchKernel(k_sleep_fill, 1, 1, 1, 1, 1, 1, 0, stream, args, NULL);
}

/* 1 if nothing is mapped at p (the driver knows no access for it). */
static int unmapped(CUdeviceptr p)
{
    unsigned long long fl = 0;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    return cuMemGetAccess(&fl, &loc, p) != CUDA_SUCCESS;
}

static int run_alias(void)
{
    buf a, b;
    if (buf_make(&a, 1) || buf_make(&b, 2)) return 1;
    size_t size = N * 4;
    sg_slot_gen *g, *ga, *gb;
    if (sg_slot_gen_create(ctx, 0, &size, 1, &g) != 0) { printf("error=create\n"); return 1; }
    CUdeviceptr slot = sg_slot_addr(g, 0);
    printf("slot_differs=%d\n", slot != a.va && slot != b.va);

    printf("bind_a=%d\n", sg_slot_gen_bind(g, &a.bind, 1));
    CK(fill(slot, 0xa1));
    sg_slot_gen_launched(g, stream, 0);
    CK(cuStreamSynchronize(stream));
    printf("alias_a=%d\n", holds(a.va, 0xa1) && holds(b.va, 0));

    printf("bind_b=%d\n", sg_slot_gen_bind(g, &b.bind, 1));
    CK(fill(slot, 0xb2));
    sg_slot_gen_launched(g, stream, 0);
    CK(cuStreamSynchronize(stream));
    printf("redirect=%d\n", holds(b.va, 0xb2) && holds(a.va, 0xa1));

    /* a launch in flight (it sleeps 200 ms first): no remap without a wait */
    CK(sleep_fill(slot, 0xb3, 200000));
    printf("launched=%d\n", sg_slot_gen_launched(g, stream, 0));
    printf("idle_in_flight=%d\n", sg_slot_gen_idle(g));
    printf("busy=%d\n", sg_slot_gen_bind(g, &a.bind, 0));
    printf("bind_wait=%d\n", sg_slot_gen_bind(g, &a.bind, 1));
    printf("waited=%d\n", holds(b.va, 0xb3) && holds(a.va, 0xa1));

    /* back-to-back: rebind between launches, never a stream sync */
    for (int k = 0; k < 40; k++) {
        if (sg_slot_gen_bind(g, k % 2 ? &b.bind : &a.bind, 1) != 0) { printf("error=b2b\n"); return 1; }
        CK(inc(slot));
        sg_slot_gen_launched(g, stream, 0);
    }
    CK(cuStreamSynchronize(stream));
    printf("b2b=%d\n", holds(a.va, 0xa1 + 20) && holds(b.va, 0xb3 + 20));

    /* rotation: one generation per buffer, so no VMM call in steady state */
    if (sg_slot_gen_create(ctx, 0, &size, 1, &ga) || sg_slot_gen_create(ctx, 0, &size, 1, &gb)) {
        printf("error=create2\n");
        return 1;
    }
    sg_slot_stats s0 = sg_slots_stats(), s1 = s0;
    for (int k = 0; k < 20; k++) {
        sg_slot_gen *x = k % 2 ? gb : ga;
        if (sg_slot_gen_bind(x, k % 2 ? &b.bind : &a.bind, 0) != 0) { printf("error=rot\n"); return 1; }
        CK(inc(sg_slot_addr(x, 0)));
        sg_slot_gen_launched(x, stream, 0);
        if (k == 1) s1 = sg_slots_stats();
    }
    CK(cuStreamSynchronize(stream));
    sg_slot_stats s2 = sg_slots_stats();
    printf("rotation_first_maps=%lu\n", s1.maps - s0.maps);
    printf("rotation_steady_vmm=%lu\n", (s2.maps - s1.maps) + (s2.unmaps - s1.unmaps) +
                                            (s2.set_access - s1.set_access) + (s2.waits - s1.waits));
    printf("rotation=%d\n", holds(a.va, 0xa1 + 30) && holds(b.va, 0xb3 + 30));

    sg_slot_gen_destroy(g);
    sg_slot_gen_destroy(ga);
    sg_slot_gen_destroy(gb);
    printf("unmapped_after_destroy=%d\n", unmapped(slot));
    sg_slot_stats st = sg_slots_stats();
    printf("stats: maps %lu unmaps %lu set_access %lu waits %lu binds %lu reused %lu; "
           "ns per map %llu unmap %llu access %llu\n", st.maps, st.unmaps, st.set_access, st.waits,
           st.binds, st.binds_reused, st.maps ? st.map_ns / st.maps : 0,
           st.unmaps ? st.unmap_ns / st.unmaps : 0, st.set_access ? st.access_ns / st.set_access : 0);
    printf("balanced=%d\n", st.maps == st.unmaps);
    return buf_free(&a) || buf_free(&b);
}

static int run_peer(void)
{
    buf a;
    if (buf_make(&a, 1)) return 1;
    size_t size = N * 4;
    sg_slot_gen *g;
    if (sg_slot_gen_create(ctx, 0, &size, 1, &g) != 0) { printf("error=create\n"); return 1; }
    printf("bind=%d\n", sg_slot_gen_bind(g, &a.bind, 1));
    int ndev = 0;
    CK(cuDeviceGetCount(&ndev));
    for (int d = 0; d < ndev; d++) {
        unsigned long long fl = 0;
        CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, d };
        CK(cuMemGetAccess(&fl, &loc, sg_slot_addr(g, 0)));
        printf("access_dev%d=%llu\n", d, fl);
    }
    sg_slot_gen_destroy(g);
    return buf_free(&a);
}

static int run_fault(void)
{
    buf a, b;
    if (buf_make(&a, 1) || buf_make(&b, 2)) return 1;
    size_t size = N * 4;
    sg_slot_gen *g;
    if (sg_slot_gen_create(ctx, 0, &size, 1, &g) != 0) {
        printf("create=-1\n");                /* the reservation failed: nothing else to do */
        return buf_free(&a) || buf_free(&b);
    }
    CUdeviceptr slot = last_slot = sg_slot_addr(g, 0);
    int r1 = sg_slot_gen_bind(g, &a.bind, 1);
    int empty1 = r1 == 0 || unmapped(slot);
    int r2 = sg_slot_gen_bind(g, &b.bind, 1);
    int r3 = sg_slot_gen_bind(g, &b.bind, 1);
    printf("any_failed=%d\n", r1 == -1 || r2 == -1);
    printf("failed_left_empty=%d\n", empty1);
    printf("final=%d\n", r3);
    CK(fill(slot, 0xc3));
    sg_slot_gen_launched(g, stream, 0);
    CK(cuStreamSynchronize(stream));
    printf("lands_in_b=%d\n", holds(b.va, 0xc3) && !holds(a.va, 0xc3));
    sg_slot_gen_destroy(g);
    printf("unmapped_after_destroy=%d\n", unmapped(slot));
    return buf_free(&a) || buf_free(&b);
}

static int run_broken(void)
{
    buf a;
    if (buf_make(&a, 1)) return 1;
    size_t size = N * 4;
    sg_slot_gen *g;
    if (sg_slot_gen_create(ctx, 0, &size, 1, &g) != 0) { printf("error=create\n"); return 1; }
    CUdeviceptr slot = sg_slot_addr(g, 0);
    printf("bind=%d\n", sg_slot_gen_bind(g, &a.bind, 1));
    CK(sleep_fill(slot, 7, 200000));
    sg_slot_gen_launched(g, stream, 0);
    /* what the library must never do: change the mapping under the kernel */
    CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(cuMemUnmap(slot, gran));
    CK(cuMemMap(slot, gran, 0, a.h, 0));
    CK(cuMemSetAccess(slot, gran, &acc, 1));
    CK(cuStreamSynchronize(stream));
    printf("wrote=%d\n", holds(a.va, 7));
    sg_slot_gen_destroy(g);
    return buf_free(&a);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: slots_prog alias|peer|fault|broken MOD\n");
        return 2;
    }
    CUdevice dev;
    CUmodule mod;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuModuleLoad(&mod, argv[2]));
    CK(cuModuleGetFunction(&k_fill, mod, "fill_u32"));
    CK(cuModuleGetFunction(&k_inc, mod, "inc_u32"));
    CK(cuModuleGetFunction(&k_sleep_fill, mod, "sleep_fill_u32"));
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    fill_driver_table();

    int rc = 2;
    if (strcmp(argv[1], "alias") == 0) rc = run_alias();
    else if (strcmp(argv[1], "peer") == 0) rc = run_peer();
    else if (strcmp(argv[1], "fault") == 0) rc = run_fault();
    else if (strcmp(argv[1], "broken") == 0) rc = run_broken();
    sg_ctx_teardown(ctx);
    if (last_slot) printf("unmapped_after_teardown=%d\n", unmapped(last_slot));
    CK(cuStreamDestroy(stream));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));
    return rc;
}
