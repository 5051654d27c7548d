/*
 * test_early.c: synchronous memory operations that return before their work
 * is done (docs/emulator.md, "Synchronous operations that return early",
 * CUDAEMU_SYNC_EARLY_US): a copy from pageable host memory to device memory
 * (its source staged: the program may reuse it at once), device to device,
 * memsets of device memory; not a copy to host memory, nor one from pinned
 * host memory; none on memory given CU_POINTER_ATTRIBUTE_SYNC_MEMOPS or
 * from a context with CU_CTX_SYNC_MEMOPS; setting the attribute waits for
 * those pending; the capture rules of synchronous calls unchanged. The
 * device memory is read directly, as a NIC's DMA would (the emulator maps
 * it at its address).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

#define NW 4096u

static CUcontext ctx;
static CUmodule mod;
static const unsigned one = 1;

/* A NIC's read: unordered with the stream's work by design (ThreadSanitizer
 * would report the early operations' later writes). */
__attribute__((no_sanitize_thread)) static uint32_t word(CUdeviceptr p, size_t i)
{
    return ((const volatile uint32_t *)(uintptr_t)p)[i];
}

/* A NIC's write of v to every word at p: unordered with the stream's work
 * by design, as word(). */
__attribute__((no_sanitize_thread)) static void nic_write(CUdeviceptr p, uint32_t v)
{
    for (size_t i = 0; i < NW; i++) ((volatile uint32_t *)(uintptr_t)p)[i] = v;
}

/* Whether every word at p is v. */
static int all(CUdeviceptr p, uint32_t v)
{
    for (size_t i = 0; i < NW; i++)
        if (word(p, i) != v) return 0;
    return 1;
}

static CUdeviceptr zeroed(void)
{
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, NW * 4), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(p, 0, NW), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    return p;
}

TEST(returns_early)
{
    CUdeviceptr a = zeroed(), b = zeroed();
    uint32_t *h = malloc(NW * 4);
    for (size_t i = 0; i < NW; i++) h[i] = 5;
    CHECK_CU(cuMemcpyHtoD(a, h, NW * 4), CUDA_SUCCESS);
    CHECK(all(a, 0));                          /* not there yet */
    for (size_t i = 0; i < NW; i++) h[i] = 6;  /* the source reused at once */
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(all(a, 5));                          /* the staged bytes arrived */
    CHECK_CU(cuMemcpyDtoD(b, a, NW * 4), CUDA_SUCCESS);
    CHECK(all(b, 0));
    CHECK_CU(cuMemsetD32(a, 9, NW), CUDA_SUCCESS);
    CHECK(all(a, 5));
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(all(b, 5) && all(a, 9));
    /* later work on the stream is ordered after it: a copy back sees it */
    CHECK_CU(cuMemsetD32(a, 11, NW), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(h, a, NW * 4), CUDA_SUCCESS);
    CHECK(h[0] == 11 && h[NW - 1] == 11);
    free(h);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

TEST(completes)
{
    CUdeviceptr a = zeroed();
    uint32_t *h = malloc(NW * 4), *pinned = NULL;
    CHECK_CU(cuMemHostAlloc((void **)&pinned, NW * 4, 0), CUDA_SUCCESS);
    for (size_t i = 0; i < NW; i++) pinned[i] = 3;
    CHECK_CU(cuMemcpyHtoD(a, pinned, NW * 4), CUDA_SUCCESS);   /* from pinned memory */
    CHECK(all(a, 3));
    CHECK_CU(cuMemsetD32(a, 4, NW), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(h, a, NW * 4), CUDA_SUCCESS);        /* to host memory */
    CHECK(h[0] == 4 && h[NW - 1] == 4);
    CHECK_CU(cuMemFreeHost(pinned), CUDA_SUCCESS);
    free(h);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

TEST(sync_memops)
{
    CUdeviceptr a = zeroed(), b = zeroed();
    uint32_t *h = malloc(NW * 4);
    for (size_t i = 0; i < NW; i++) h[i] = 7;
    CHECK_CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, a), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyHtoD(a, h, NW * 4), CUDA_SUCCESS);
    CHECK(all(a, 7));
    CHECK_CU(cuMemsetD32(a, 8, NW), CUDA_SUCCESS);
    CHECK(all(a, 8));
    CHECK_CU(cuMemcpyDtoD(b, a, NW * 4), CUDA_SUCCESS);         /* the source flagged */
    CHECK(all(b, 8));
    /* pending when set: the set waits for it */
    CHECK_CU(cuMemsetD32(b, 12, NW), CUDA_SUCCESS);
    CHECK(all(b, 8));
    CHECK_CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b), CUDA_SUCCESS);
    CHECK(all(b, 12));
    free(h);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

TEST(ctx_flag)
{
    CUdeviceptr a = zeroed();
    unsigned flags = 0;
    CHECK_CU(cuCtxGetFlags(&flags), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 13, NW), CUDA_SUCCESS);
    CHECK(all(a, 13));
    CHECK_CU(cuCtxSetFlags(flags), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 14, NW), CUDA_SUCCESS);
    CHECK(all(a, 13));
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(all(a, 14));
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

TEST(capture_unchanged)
{
    CUdeviceptr a = zeroed();
    CUstream s;
    CUgraph g = NULL;
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 1, NW), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(all(a, 0));
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
}

/* Array copies (round 52): an array is device memory, so cuMemcpyAtoD and
 * cuMemcpyDtoA are device-to-device transfers and return early; not on a
 * block with SYNC_MEMOPS, nor under CU_CTX_SYNC_MEMOPS (an array has no
 * pointer attribute); cuMemcpy3DPeer returns early as cuMemcpy3D. */
TEST(arrays_and_peer)
{
    CUdeviceptr a = zeroed(), b = zeroed(), f = zeroed();
    CUDA_ARRAY_DESCRIPTOR d = { .Width = NW, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1 };
    CUarray arr;
    CHECK_CU(cuArrayCreate(&arr, &d), CUDA_SUCCESS);
    uint32_t *h = malloc(NW * 4);
    for (size_t i = 0; i < NW; i++) h[i] = 21;
    CHECK_CU(cuMemcpyHtoA(arr, 0, h, NW * 4), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoD(a, arr, 0, NW * 4), CUDA_SUCCESS);
    CHECK(all(a, 0));                          /* array to device: early */
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(all(a, 21));
    CHECK_CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, f), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoD(f, arr, 0, NW * 4), CUDA_SUCCESS);
    CHECK(all(f, 21));                         /* a flagged block: complete */
    CHECK_CU(cuMemsetD32(a, 22, NW), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoA(arr, 0, a, NW * 4), CUDA_SUCCESS);
    nic_write(a, 23);                          /* written at once */
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoH(h, arr, 0, NW * 4), CUDA_SUCCESS);
    CHECK(h[0] == 23 && h[NW - 1] == 23);      /* the early copy read the later bytes */
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = a, c.srcContext = ctx;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = b, c.dstContext = ctx;
    c.WidthInBytes = NW * 4, c.Height = 1, c.Depth = 1;
    CHECK_CU(cuMemcpy3DPeer(&c), CUDA_SUCCESS);
    CHECK(all(b, 0));                          /* device to device: early */
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK(all(b, 23));
    c.dstDevice = f;
    CHECK_CU(cuMemcpy3DPeer(&c), CUDA_SUCCESS);
    CHECK(all(f, 23));                         /* a flagged block: complete */
    unsigned flags = 0;
    CHECK_CU(cuCtxGetFlags(&flags), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetFlags(flags | CU_CTX_SYNC_MEMOPS), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoD(b, arr, 0, NW * 4), CUDA_SUCCESS);
    CHECK(all(b, 23) && word(b, 0) == 23);
    CHECK_CU(cuMemsetD32(a, 24, NW), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoA(arr, 0, a, NW * 4), CUDA_SUCCESS);
    nic_write(a, 25);
    CHECK_CU(cuMemcpyAtoH(h, arr, 0, NW * 4), CUDA_SUCCESS);
    CHECK(h[0] == 24 && h[NW - 1] == 24);      /* under the context's flag: complete */
    CHECK_CU(cuCtxSetFlags(flags), CUDA_SUCCESS);
    free(h);
    CHECK_CU(cuArrayDestroy(arr), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(f), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    /* the emulator reads its knobs when it loads: run again with it set */
    if (argc > 0 && !getenv("CUDAEMU_SYNC_EARLY_US")) {
        setenv("CUDAEMU_SYNC_EARLY_US", "150000", 1);
        execv("/proc/self/exe", argv);
        return 1;
    }
    if (emu_test_open("mod_test.so", &ctx, &mod) != CUDA_SUCCESS) return 1;
    RUN(returns_early);
    RUN(completes);
    RUN(sync_memops);
    RUN(ctx_flag);
    RUN(capture_unchanged);
    RUN(arrays_and_peer);
    return check_done();
}
