/*
 * test_resolve.c: cuGetProcAddress_v2 and the legacy cuGetProcAddress of the
 * emulated driver: version selection, per-thread variants, unknown names, the
 * empty-name probe, calls before cuInit, bad arguments.
 */
#include <cuda.h>
#include <string.h>

#include "check.h"

/* The legacy resolver: cuda.h renames cuGetProcAddress to _v2. */
extern CUresult legacy_cuGetProcAddress(const char *, void **, int, cuuint64_t) __asm__("cuGetProcAddress");
/* Entries cuda.h does not declare under these names without per-thread mode. */
extern CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
extern CUresult cuStreamBeginCapture_ptsz(CUstream);
extern CUresult cuStreamBeginCapture_v2_ptsz(CUstream, CUstreamCaptureMode);
extern CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr, const void *, size_t);
extern CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
extern CUresult legacy_cuStreamBeginCapture(CUstream) __asm__("cuStreamBeginCapture");
extern CUresult cuMemcpyPeer_ptds(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
extern CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
extern CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *);
extern CUresult legacy_cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *)
    __asm__("cuGraphExecUpdate");

static void *get(const char *sym, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult want_status)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CHECK_CU(cuGetProcAddress_v2(sym, &p, ver, flags, &st), CUDA_SUCCESS);
    if (st != want_status) printf("#   %s@%d flags %llu: status %d, want %d\n", sym, ver, (unsigned long long)flags, (int)st, (int)want_status);
    CHECK_EQ(st, want_status);
    return p;
}
#define FOUND CU_GET_PROC_ADDRESS_SUCCESS

TEST(before_init_and_probe)
{
    /* The CUDA runtime resolves its whole table before cuInit, starting with
     * an empty name. */
    CHECK(get("", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) == NULL);
    CHECK(get("cuInit", 2000, 0, FOUND) == (void *)cuInit);
    CHECK(get("cuDriverGetVersion", 13000, 0, FOUND) == (void *)cuDriverGetVersion);
}

TEST(versions)
{
    CHECK(get("cuGetProcAddress", 12000, 0, FOUND) == (void *)cuGetProcAddress_v2);
    CHECK(get("cuGetProcAddress", 11030, 0, FOUND) == (void *)legacy_cuGetProcAddress);
    CHECK(get("cuDevicePrimaryCtxRelease", 11000, 0, FOUND) == (void *)cuDevicePrimaryCtxRelease_v2);
    CHECK(get("cuCtxCreate", 12050, 0, FOUND) == (void *)cuCtxCreate_v4);
    CHECK(get("cuCtxCreate", 3020, 0, FOUND) == (void *)cuCtxCreate_v2);
    CHECK(get("cuGraphExecUpdate", 12000, 0, FOUND) == (void *)cuGraphExecUpdate_v2);
    CHECK(get("cuGraphExecUpdate", 11000, 0, FOUND) == (void *)legacy_cuGraphExecUpdate);
    CHECK(get("cuMemAlloc", 3020, 0, FOUND) == (void *)cuMemAlloc_v2);
    CHECK(get("cuGraphLaunch", 9000, 0, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) == NULL);
}

TEST(per_thread_variants)
{
    CHECK(get("cuGraphLaunch", 10000, 0, FOUND) == (void *)cuGraphLaunch);
    CHECK(get("cuGraphLaunch", 10000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, FOUND) == (void *)cuGraphLaunch);
    CHECK(get("cuGraphLaunch", 10000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, FOUND) == (void *)cuGraphLaunch_ptsz);
    CHECK(get("cuStreamBeginCapture", 10000, 2, FOUND) == (void *)cuStreamBeginCapture_ptsz);
    CHECK(get("cuStreamBeginCapture", 10010, 2, FOUND) == (void *)cuStreamBeginCapture_v2_ptsz);
    CHECK(get("cuStreamBeginCapture", 10000, 0, FOUND) == (void *)legacy_cuStreamBeginCapture);
    CHECK(get("cuMemcpyHtoD", 12000, 2, FOUND) == (void *)cuMemcpyHtoD_v2_ptds);
    /* No per-thread flavour: the legacy one comes back. */
    CHECK(get("cuMemAlloc", 12000, 2, FOUND) == (void *)cuMemAlloc_v2);
}

TEST(unknown_and_bad)
{
    CHECK(get("cudnnCreate", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) == NULL);
    CHECK(get("cuNoSuchFunction", 13000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) == NULL);
    void *p;
    CHECK_CU(cuGetProcAddress_v2("cuInit", &p, 13010, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGetProcAddress_v2("cuInit", &p, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGetProcAddress_v2(NULL, &p, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(legacy_cuGetProcAddress("cuInit", &p, 13000, 0), CUDA_SUCCESS);
    CHECK(p == (void *)cuInit);
}

/* The entry points the library's hook list resolves against the driver
 * (added for it), under the versions the CUDA 13 runtime asks for; the
 * legacy 32-bit ones are not provided. */
TEST(library_hook_entries)
{
    CHECK(get("cuMemAllocManaged", 13000, 0, FOUND) == (void *)cuMemAllocManaged);
    CHECK(get("cuMemcpyPeer", 13000, 0, FOUND) == (void *)cuMemcpyPeer);
    CHECK(get("cuMemcpyPeer", 13000, 2, FOUND) == (void *)cuMemcpyPeer_ptds);
    CHECK(get("cuMemcpyPeerAsync", 13000, 0, FOUND) == (void *)cuMemcpyPeerAsync);
    CHECK(get("cuMemcpyPeerAsync", 13000, 2, FOUND) == (void *)cuMemcpyPeerAsync_ptsz);
    CHECK(get("cuMemcpy2DUnaligned", 13000, 0, FOUND) == (void *)cuMemcpy2DUnaligned_v2);
    CHECK(get("cuMemcpy2DUnaligned", 13000, 2, FOUND) == (void *)cuMemcpy2DUnaligned_v2_ptds);
    CHECK(get("cuArrayCreate", 13000, 0, FOUND) == (void *)cuArrayCreate_v2);
    CHECK(get("cuArray3DCreate", 13000, 0, FOUND) == (void *)cuArray3DCreate_v2);
    CHECK(get("cuArrayGetDescriptor", 13000, 0, FOUND) == (void *)cuArrayGetDescriptor_v2);
    CHECK(get("cuArray3DGetDescriptor", 13000, 0, FOUND) == (void *)cuArray3DGetDescriptor_v2);
    CHECK(get("cuArrayDestroy", 13000, 0, FOUND) == (void *)cuArrayDestroy);
    CHECK(get("cuGraphDestroyNode", 13000, 0, FOUND) == (void *)cuGraphDestroyNode);
    CHECK(get("cuCtxDestroy", 13000, 0, FOUND) == (void *)cuCtxDestroy_v2);
    CHECK(get("cuLibraryUnload", 13000, 0, FOUND) == (void *)cuLibraryUnload);
    CHECK(get("cuArrayCreate", 2000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) == NULL);
    CHECK(get("cuMemcpy2DUnaligned", 2000, 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) == NULL);
}

int main(void)
{
    RUN(before_init_and_probe);
    CHECK_CU(cuInit(0), CUDA_SUCCESS);
    RUN(versions);
    RUN(per_thread_variants);
    RUN(unknown_and_bad);
    RUN(library_hook_entries);
    return check_done();
}
