/*
 * test_copy.c: copies between contexts (cuMemcpyPeer, cuMemcpyPeerAsync and
 * their per-thread flavours; cuMemcpyPeer serialized with the work pending in
 * both contexts) and cuMemcpy2DUnaligned next to cuMemcpy2D's
 * pitch limit (CU_DEVICE_ATTRIBUTE_MAX_PITCH), in the emulated driver
 * (emu_copy.c). Runs with two devices (CUDAEMU_DEVICES=2; main re-executes
 * the program to set it).
 */
#include <cuda.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

/* The per-thread flavours (cuda.h declares them only for its own build). */
CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *);
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *);
CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *, CUstream);

#define N 4096

static CUcontext c0, c1;

static void fill_host(uint8_t *h, uint8_t seed)
{
    for (int i = 0; i < N; i++) h[i] = (uint8_t)(seed + i * 7);
}

/* 1 if device memory p holds what fill_host(seed) wrote. */
static int holds(CUdeviceptr p, uint8_t seed)
{
    uint8_t want[N], got[N];
    fill_host(want, seed);
    CHECK_CU(cuMemcpyDtoH(got, p, N), CUDA_SUCCESS);
    return memcmp(want, got, N) == 0;
}

static void put(CUdeviceptr p, uint8_t seed)
{
    uint8_t h[N];
    fill_host(h, seed);
    CHECK_CU(cuMemcpyHtoD(p, h, N), CUDA_SUCCESS);
}

TEST(setup)
{
    int n = 0;
    CHECK_CU(cuInit(0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetCount(&n), CUDA_SUCCESS);
    CHECK_EQ(n, 2);
    CHECK_CU(cuDevicePrimaryCtxRetain(&c0, 0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
}

TEST(peer_copies)
{
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, N), CUDA_SUCCESS);                 /* device 0 */
    CHECK_CU(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, N), CUDA_SUCCESS);                 /* device 1 */
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    int can = -1;
    CHECK_CU(cuDeviceCanAccessPeer(&can, 0, 1), CUDA_SUCCESS);

    put(a, 1);
    CHECK_CU(cuMemcpyPeer(b, c1, a, c0, N), CUDA_SUCCESS);     /* no peer access enabled */
    CHECK(holds(b, 1));
    put(a, 2);
    CHECK_CU(cuMemcpyPeer_ptds(b, c1, a, c0, N), CUDA_SUCCESS);
    CHECK(holds(b, 2));

    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    put(b, 3);
    CHECK_CU(cuMemcpyPeerAsync(a, c0, b, c1, N, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(holds(a, 3));
    put(b, 4);
    CHECK_CU(cuMemcpyPeerAsync_ptsz(a, c0, b, c1, N, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK(holds(a, 4));

    /* the checks of any copy, and live contexts */
    CUcontext dead;
    CHECK_CU(cuCtxCreate(&dead, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(dead), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyPeer(b, NULL, a, c0, N), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuMemcpyPeer(b, c1, a, dead, N), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuMemcpyPeerAsync(b, dead, a, c0, N, s), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuMemcpyPeer(b, c1, a, c0, N + 1), CUDA_ERROR_INVALID_VALUE);     /* past the end */
    CHECK_CU(cuMemcpyPeer(b + 1, c1, a, c0, N), CUDA_ERROR_INVALID_VALUE);
    uint8_t host[N];
    CHECK_CU(cuMemcpyPeer(b, c1, (CUdeviceptr)(uintptr_t)host, c0, N), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyPeerAsync(b, c1, a, c0, N, (CUstream)(uintptr_t)host), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuMemcpyPeer(b, c1, a, c0, 0), CUDA_SUCCESS);
    CHECK(holds(b, 4));                                         /* nothing changed */

    /* captured as a memcpy node, like cuMemcpyAsync */
    CUgraph g;
    CUgraphExec e;
    CUgraphNode nodes[2];
    size_t nn = 2;
    CUgraphNodeType type;
    CUDA_MEMCPY3D cp;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyPeerAsync(b, c1, a, c0, N, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphGetNodes(g, nodes, &nn), CUDA_SUCCESS);
    CHECK_EQ(nn, 1);
    CHECK_CU(cuGraphNodeGetType(nodes[0], &type), CUDA_SUCCESS);
    CHECK_EQ(type, CU_GRAPH_NODE_TYPE_MEMCPY);
    CHECK_CU(cuGraphMemcpyNodeGetParams(nodes[0], &cp), CUDA_SUCCESS);
    CHECK(cp.srcDevice == a && cp.dstDevice == b && cp.WidthInBytes == N);
    CHECK(holds(b, 4));                                         /* captured, not run */
    put(a, 5);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(holds(b, 5));
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

/* cuMemcpy3DPeer(Async) (round 52): a 3D copy between contexts; a device
 * side's context must be live, an array side's is ignored; the checks of
 * cuMemcpy3D; the Async form captured as a memcpy node. */
static CUDA_MEMCPY3D_PEER peer3d(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t w, size_t h)
{
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = src, c.srcContext = sc, c.srcPitch = w;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dst, c.dstContext = dc, c.dstPitch = w;
    c.WidthInBytes = w, c.Height = h, c.Depth = 1;
    return c;
}

TEST(peer_3d)
{
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc(&a, N), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, N), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    put(a, 11);
    CUDA_MEMCPY3D_PEER c = peer3d(b, c1, a, c0, 256, N / 256);
    CHECK_CU(cuMemcpy3DPeer(&c), CUDA_SUCCESS);
    CHECK(holds(b, 11));
    put(a, 12);
    CHECK_CU(cuMemcpy3DPeer_ptds(&c), CUDA_SUCCESS);
    CHECK(holds(b, 12));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    put(a, 13);
    CHECK_CU(cuMemcpy3DPeerAsync(&c, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(holds(b, 13));
    put(a, 14);
    CHECK_CU(cuMemcpy3DPeerAsync_ptsz(&c, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    CHECK(holds(b, 14));
    /* refusals: NULL, dead or missing contexts, past either end */
    CUcontext dead;
    CHECK_CU(cuCtxCreate(&dead, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxDestroy(dead), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy3DPeer(NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D_PEER bad = peer3d(b, dead, a, c0, 256, 1);
    CHECK_CU(cuMemcpy3DPeer(&bad), CUDA_ERROR_INVALID_CONTEXT);
    bad = peer3d(b, c1, a, NULL, 256, 1);
    CHECK_CU(cuMemcpy3DPeerAsync(&bad, s), CUDA_ERROR_INVALID_CONTEXT);
    bad = peer3d(b, c1, a, c0, 256, N / 256);
    bad.dstXInBytes = 1;
    CHECK_CU(cuMemcpy3DPeer(&bad), CUDA_ERROR_INVALID_VALUE);
    bad = peer3d(b, c1, a + 1, c0, N, 1);
    CHECK_CU(cuMemcpy3DPeer(&bad), CUDA_ERROR_INVALID_VALUE);
    CHECK(holds(b, 14));                                        /* nothing changed */
    /* an array side: its context ignored */
    CUDA_ARRAY_DESCRIPTOR d = { .Width = N, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1 };
    CUarray arr;
    CHECK_CU(cuArrayCreate(&arr, &d), CUDA_SUCCESS);
    CUDA_MEMCPY3D_PEER ta = peer3d(0, dead, a, c0, N, 1);
    ta.dstMemoryType = CU_MEMORYTYPE_ARRAY, ta.dstArray = arr;
    CHECK_CU(cuMemcpy3DPeer(&ta), CUDA_SUCCESS);
    uint8_t h[N], want[N];
    fill_host(want, 14);
    CHECK_CU(cuMemcpyAtoH(h, arr, 0, N), CUDA_SUCCESS);
    CHECK(memcmp(h, want, N) == 0);
    CHECK_CU(cuArrayDestroy(arr), CUDA_SUCCESS);
    /* captured: one memcpy node; the synchronous form refused */
    CUgraph g;
    CUgraphNode nodes[2];
    size_t nn = 2;
    CUgraphNodeType type;
    CUDA_MEMCPY3D cp;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy3DPeerAsync(&c, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_CU(cuGraphGetNodes(g, nodes, &nn), CUDA_SUCCESS);
    CHECK_EQ(nn, 1);
    CHECK_CU(cuGraphNodeGetType(nodes[0], &type), CUDA_SUCCESS);
    CHECK_EQ(type, CU_GRAPH_NODE_TYPE_MEMCPY);
    CHECK_CU(cuGraphMemcpyNodeGetParams(nodes[0], &cp), CUDA_SUCCESS);
    CHECK(cp.srcDevice == a && cp.dstDevice == b && cp.WidthInBytes == 256 && cp.Height == N / 256);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy3DPeer(&c), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

/* cuGetProcAddress finds both flavours under their CUDA 4.0 / 7.0 rows. */
TEST(peer_copies_resolve)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK_CU(cuGetProcAddress("cuMemcpyPeer", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st), CUDA_SUCCESS);
    CHECK(fn == (void *)cuMemcpyPeer);
    CHECK_CU(cuGetProcAddress("cuMemcpyPeer", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
             CUDA_SUCCESS);
    CHECK(fn == (void *)cuMemcpyPeer_ptds);
    CHECK_CU(cuGetProcAddress("cuMemcpyPeerAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
             CUDA_SUCCESS);
    CHECK(fn == (void *)cuMemcpyPeerAsync_ptsz);
    CHECK_CU(cuGetProcAddress("cuMemcpy2DUnaligned", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st), CUDA_SUCCESS);
    CHECK(fn == (void *)cuMemcpy2DUnaligned_v2);
}

/* Two rows 2^31 bytes apart in host memory (a reserved, mostly untouched
 * mapping) copied to two rows of device memory. */
TEST(copy_2d_pitch_limit)
{
    const size_t big = (size_t)1 << 31, w = 64;
    int maxp = 0;
    CHECK_CU(cuDeviceGetAttribute(&maxp, CU_DEVICE_ATTRIBUTE_MAX_PITCH, 0), CUDA_SUCCESS);
    CHECK_EQ(maxp, 2147483647);
    uint8_t *h = mmap(NULL, big + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(h != MAP_FAILED);
    if (h == MAP_FAILED) return;
    h[big - 1] = 200;                              /* where a pitch of MAX_PITCH starts row 1 */
    for (size_t i = 0; i < w; i++) {
        h[i] = (uint8_t)i;
        h[big + i] = (uint8_t)(100 + i);
    }
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 2 * w), CUDA_SUCCESS);
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = h;
    c.srcPitch = big;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = d;
    c.dstPitch = w;
    c.WidthInBytes = w;
    c.Height = 2;
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);        /* pitch above MAX_PITCH */
    CHECK_CU(cuMemcpy2DAsync(&c, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemsetD8(d, 0, 2 * w), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy2DUnaligned(&c), CUDA_SUCCESS);           /* "does not have this restriction" */
    uint8_t got[128];
    CHECK_CU(cuMemcpyDtoH(got, d, 2 * w), CUDA_SUCCESS);
    CHECK(got[0] == 0 && got[w - 1] == w - 1 && got[w] == 100 && got[2 * w - 1] == 100 + w - 1);
    CHECK_CU(cuMemsetD8(d, 0, 2 * w), CUDA_SUCCESS);
    CHECK_CU(cuMemcpy2DUnaligned_v2_ptds(&c), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, d, 2 * w), CUDA_SUCCESS);
    CHECK(got[w] == 100);
    /* MAX_PITCH itself is allowed; one row ignores the pitch */
    c.srcPitch = big - 1;
    CHECK_CU(cuMemcpy2D(&c), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, d, 2 * w), CUDA_SUCCESS);
    CHECK(got[0] == 0 && got[w] == 200 && got[w + 1] == 100);
    c.srcPitch = big;
    c.Height = 1;
    CHECK_CU(cuMemcpy2D(&c), CUDA_SUCCESS);
    /* the unaligned copy keeps the other checks */
    c.Height = 2;
    c.dstPitch = w - 1;
    CHECK_CU(cuMemcpy2DUnaligned(&c), CUDA_ERROR_INVALID_VALUE);
    c.dstPitch = w;
    c.dstDevice = d + 1;                                       /* last row leaves the allocation */
    CHECK_CU(cuMemcpy2DUnaligned(&c), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
    munmap(h, big + 4096);
}

/* cuMemcpyPeer "is asynchronous with respect to the host, but serialized
 * with respect all pending and future asynchronous work in to the current
 * context, srcContext, and dstContext": a kernel still running on a
 * non-blocking stream of the source context is done before the copy reads,
 * one of the destination context before it writes (each kernel sleeps 100 ms
 * first). Its Async form is ordered on its stream only (not checked: the
 * absence of a wait). */
TEST(peer_copy_serialized)
{
    char path[PATH_MAX + 64];
    CHECK(emu_test_module_path("mod_test.so", path, sizeof path) == 0);
    CUmodule m0, m1;
    CUfunction slow0, slow1;
    CUdeviceptr a, b;
    CUstream s0, s1;
    uint32_t words = N / 4, us = 100000, got[N / 4];
    uint64_t n = words;
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_CU(cuModuleLoad(&m0, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&slow0, m0, "sleep_fill_u32"), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&a, N), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_CU(cuModuleLoad(&m1, path), CUDA_SUCCESS);
    CHECK_CU(cuModuleGetFunction(&slow1, m1, "sleep_fill_u32"), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, N), CUDA_SUCCESS);
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 1, words), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(b, 1, words), CUDA_SUCCESS);

    /* source side: the kernel writing a (context 0) comes first; device 1 current */
    uint32_t v = 7;
    void *pa = (void *)(uintptr_t)a, *pb = (void *)(uintptr_t)b;
    void *args_a[] = { &pa, &v, &n, &us };
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernel(slow0, 1, 1, 1, 1, 1, 1, 0, s0, args_a, NULL), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyPeer(b, c1, a, c0, N), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, b, N), CUDA_SUCCESS);
    CHECK_EQ(got[0], 7);
    CHECK_EQ(got[words - 1], 7);

    /* destination side: the kernel writing b (context 1) comes first, the
     * copy's bytes last; device 0 current */
    uint32_t w = 8;
    void *args_b[] = { &pb, &w, &n, &us };
    CHECK_CU(cuMemsetD32(a, 9, words), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernel(slow1, 1, 1, 1, 1, 1, 1, 0, s1, args_b, NULL), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyPeer(b, c1, a, c0, N), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c1), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s1), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(got, b, N), CUDA_SUCCESS);
    CHECK_EQ(got[0], 9);
    CHECK_EQ(got[words - 1], 9);

    CHECK_CU(cuStreamDestroy(s1), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m1), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s0), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m0), CUDA_SUCCESS);
}

/* VMM memory of device d (one granule, mapped, both devices granted access). */
static CUdeviceptr vmm_on(int d, CUmemGenericAllocationHandle *h, size_t *g)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, d } };
    CUmemAccessDesc acc[2] = { { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
                               { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE } };
    CUdeviceptr va = 0;
    CHECK_CU(cuMemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(h, *g, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&va, *g, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va, *g, 0, *h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(va, *g, acc, 2), CUDA_SUCCESS);
    return va;
}

/* Round 31: "The CUDA device(s) to which the operand(s) was allocated/mapped
 * cannot change" (cuGraphExecUpdate) holds for VMM memory too, which has no
 * allocating context: a memcpy node from device 0's mapping to device 1's,
 * turned around, is refused; another pair on the same devices is accepted;
 * a memset node moved to the other device's mapping is refused. */
TEST(update_operand_device_vmm)
{
    CUmemGenericAllocationHandle h[4];
    size_t g = 0;
    CUdeviceptr a0 = vmm_on(0, &h[0], &g), b1 = vmm_on(1, &h[1], &g);
    CUdeviceptr x0 = vmm_on(0, &h[2], &g), y1 = vmm_on(1, &h[3], &g);
    CHECK_CU(cuCtxSetCurrent(c0), CUDA_SUCCESS);
    for (int copy = 0; copy < 2; copy++) {
        CUgraph g0, same, back;
        CUgraphNode n;
        CUgraphExec e;
        CUgraphExecUpdateResultInfo info;
        CHECK_CU(cuGraphCreate(&g0, 0), CUDA_SUCCESS);
        CHECK_CU(cuGraphCreate(&same, 0), CUDA_SUCCESS);
        CHECK_CU(cuGraphCreate(&back, 0), CUDA_SUCCESS);
        if (copy) {
            CUDA_MEMCPY3D cp = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a0,
                                 .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b1,
                                 .WidthInBytes = N, .Height = 1, .Depth = 1 };
            CHECK_CU(cuGraphAddMemcpyNode(&n, g0, NULL, 0, &cp, c0), CUDA_SUCCESS);
            cp.srcDevice = x0, cp.dstDevice = y1;
            CHECK_CU(cuGraphAddMemcpyNode(&n, same, NULL, 0, &cp, c0), CUDA_SUCCESS);
            cp.srcDevice = b1, cp.dstDevice = a0;
            CHECK_CU(cuGraphAddMemcpyNode(&n, back, NULL, 0, &cp, c0), CUDA_SUCCESS);
        } else {
            CUDA_MEMSET_NODE_PARAMS m = { .dst = a0, .value = 5, .elementSize = 4, .width = N / 4, .height = 1 };
            CHECK_CU(cuGraphAddMemsetNode(&n, g0, NULL, 0, &m, c0), CUDA_SUCCESS);
            m.dst = x0;
            CHECK_CU(cuGraphAddMemsetNode(&n, same, NULL, 0, &m, c0), CUDA_SUCCESS);
            m.dst = b1;
            CHECK_CU(cuGraphAddMemsetNode(&n, back, NULL, 0, &m, c0), CUDA_SUCCESS);
        }
        CHECK_CU(cuGraphInstantiateWithFlags(&e, g0, 0), CUDA_SUCCESS);
        CHECK_CU(cuGraphExecUpdate_v2(e, back, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
        CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
        CHECK_CU(cuGraphExecUpdate_v2(e, same, &info), CUDA_SUCCESS);
        CHECK_CU(cuGraphLaunch(e, 0), CUDA_SUCCESS);
        CHECK_CU(cuStreamSynchronize(0), CUDA_SUCCESS);
        CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(g0), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(same), CUDA_SUCCESS);
        CHECK_CU(cuGraphDestroy(back), CUDA_SUCCESS);
    }
    CUdeviceptr vas[4] = { a0, b1, x0, y1 };
    for (int i = 0; i < 4; i++) {
        CHECK_CU(cuMemUnmap(vas[i], g), CUDA_SUCCESS);
        CHECK_CU(cuMemAddressFree(vas[i], g), CUDA_SUCCESS);
        CHECK_CU(cuMemRelease(h[i]), CUDA_SUCCESS);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *have = getenv("CUDAEMU_DEVICES");
    if (!have || strcmp(have, "2") != 0) {
        setenv("CUDAEMU_DEVICES", "2", 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    RUN(setup);
    RUN(peer_copies);
    RUN(peer_copies_resolve);
    RUN(peer_3d);
    RUN(peer_copy_serialized);
    RUN(copy_2d_pitch_limit);
    RUN(update_operand_device_vmm);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(1), CUDA_SUCCESS);
    return check_done();
}
