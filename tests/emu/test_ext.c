/*
 * test_ext.c: the emulated driver's external memory and external
 * semaphores (emu_ext.c; docs/emulator.md "External memory and
 * semaphores"): a memfd imported as OPAQUE_FD memory, buffers mapped onto it
 * (shared bytes with the file, what pointer queries answer, cuMemFree,
 * the documented refusals), destroyed with a buffer still mapped (a kernel
 * then reaching it is a violation); binary and timeline semaphores signaled
 * and waited on streams, captured into nodes, added as nodes, set and
 * updated in an exec, and a launch naming a destroyed semaphore refused.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

static CUcontext ctx;
static CUmodule mod;
static CUfunction fill;

/* A memfd of n bytes (the exporting API's memory), mapped here in *map. */
static int make_file(size_t n, void **map)
{
    int fd = memfd_create("ext", 0);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return -1;
    *map = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return *map == MAP_FAILED ? -1 : fd;
}

static CUresult launch_fill(CUdeviceptr p, uint32_t v, uint64_t n, CUstream s)
{
    void *args[] = { &p, &v, &n };
    return cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

TEST(memory_buffers)
{
    void *host;
    int fd = make_file(3 * 4096, &host);
    CHECK(fd >= 0);
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d = { .type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, .size = 3 * 4096 };
    d.handle.fd = fd;
    CUexternalMemory m;
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC big = d;
    big.size = 4 * 4096;
    CHECK_CU(cuImportExternalMemory(&m, &big), CUDA_ERROR_INVALID_VALUE);    /* larger than the file */
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC win = d;
    win.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32;
    CHECK_CU(cuImportExternalMemory(&m, &win), CUDA_ERROR_INVALID_VALUE);
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC bad = d;
    bad.handle.fd = -1;
    CHECK_CU(cuImportExternalMemory(&m, &bad), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuImportExternalMemory(&m, &d), CUDA_SUCCESS);

    CUDA_EXTERNAL_MEMORY_BUFFER_DESC b = { .offset = 4096 + 256, .size = 4096 };
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC past = { .offset = 2 * 4096 + 1, .size = 4096 };
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC flagged = { .offset = 0, .size = 4096, .flags = 1 };
    CUdeviceptr p, q;
    CHECK_CU(cuExternalMemoryGetMappedBuffer(&p, m, &past), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuExternalMemoryGetMappedBuffer(&p, m, &flagged), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuExternalMemoryGetMappedBuffer(&p, m, &b), CUDA_SUCCESS);
    CHECK_CU(cuExternalMemoryGetMappedBuffer(&q, m, &b), CUDA_SUCCESS);
    CHECK(p != q);                  /* two mappings of the same bytes */

    /* the bytes are the file's, both ways */
    CHECK_CU(launch_fill(p, 7, 1024, NULL), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
    CHECK_EQ(((uint32_t *)host)[(4096 + 256) / 4 + 1023], 7u);
    ((uint32_t *)host)[(4096 + 256) / 4] = 9;
    uint32_t got = 0;
    CHECK_CU(cuMemcpyDtoH(&got, q, 4), CUDA_SUCCESS);
    CHECK_EQ(got, 9u);

    /* what queries answer */
    CUdeviceptr base;
    size_t size;
    CHECK_CU(cuMemGetAddressRange(&base, &size, p + 100), CUDA_SUCCESS);
    CHECK(base == p && size == 4096);
    unsigned type = 0, ipc = 1;
    CUcontext c = NULL;
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_SUCCESS);
    CHECK_EQ(type, (unsigned)CU_MEMORYTYPE_DEVICE);
    CHECK_CU(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS);
    CHECK(c == ctx);
    CHECK_CU(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), CUDA_SUCCESS);
    CHECK_EQ(ipc, 0u);
    CUipcMemHandle ih;
    CHECK_CU(cuIpcGetMemHandle(&ih, p), CUDA_ERROR_INVALID_VALUE);

    /* freed by cuMemFree, once */
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(q), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p + 4), CUDA_ERROR_INVALID_VALUE);

    /* destroyed with p still mapped: p stays a range until cuMemFree, no
     * longer usable; a kernel reaching it is a violation */
    CHECK_CU(cuDestroyExternalMemory(m), CUDA_SUCCESS);
    CHECK_CU(cuDestroyExternalMemory(m), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuExternalMemoryGetMappedBuffer(&q, m, &b), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_SUCCESS);
    emu_test_stderr_begin();
    launch_fill(p, 1, 4, NULL);
    cuCtxSynchronize();
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
    munmap(host, 3 * 4096);
}

static CUexternalSemaphore import_sem(CUexternalSemaphoreHandleType type, uint64_t **value)
{
    void *map;
    int fd = make_file(4096, &map);
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d = { .type = type };
    d.handle.fd = fd;
    CUexternalSemaphore s = NULL;
    CHECK_CU(cuImportExternalSemaphore(&s, &d), CUDA_SUCCESS);
    *value = map;
    return s;
}

TEST(semaphores_on_streams)
{
    uint64_t *bv, *tv;
    CUexternalSemaphore bin = import_sem(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD, &bv);
    CUexternalSemaphore tl = import_sem(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &tv);
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC win = { .type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D12_FENCE };
    CUexternalSemaphore x;
    CHECK_CU(cuImportExternalSemaphore(&x, &win), CUDA_ERROR_INVALID_VALUE);

    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp;
    memset(&sp, 0, sizeof sp);
    memset(&wp, 0, sizeof wp);
    CHECK_CU(cuSignalExternalSemaphoresAsync(&bin, &sp, 0, s), CUDA_ERROR_INVALID_VALUE);
    sp.flags = 4;
    CHECK_CU(cuSignalExternalSemaphoresAsync(&bin, &sp, 1, s), CUDA_ERROR_INVALID_VALUE);
    sp.flags = 0;
    CHECK_CU(cuSignalExternalSemaphoresAsync(&bin, &sp, 1, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(*bv, 1u);
    CHECK_CU(cuWaitExternalSemaphoresAsync(&bin, &wp, 1, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(*bv, 0u);              /* the wait took the signal */

    /* a timeline wait holds the stream until the other side reaches it */
    wp.params.fence.value = 5;
    CHECK_CU(cuWaitExternalSemaphoresAsync(&tl, &wp, 1, s), CUDA_SUCCESS);
    usleep(20000);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    __atomic_store_n(tv, 5, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    sp.params.fence.value = 8;
    CHECK_CU(cuSignalExternalSemaphoresAsync(&tl, &sp, 1, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(*tv, 8u);
    emu_test_stderr_begin();        /* a timeline never goes down */
    sp.params.fence.value = 3;
    cuSignalExternalSemaphoresAsync(&tl, &sp, 1, s);
    cuStreamSynchronize(s);
    CHECK_EQ(emu_test_violations(), 1);

    /* destroyed while a wait is queued: a violation */
    wp.params.fence.value = 100;
    CHECK_CU(cuWaitExternalSemaphoresAsync(&tl, &wp, 1, s), CUDA_SUCCESS);
    usleep(10000);                  /* the wait is running */
    emu_test_stderr_begin();
    CHECK_CU(cuDestroyExternalSemaphore(tl), CUDA_SUCCESS);
    cuStreamSynchronize(s);         /* the waiter sees it gone */
    CHECK_EQ(emu_test_violations(), 2);
    CHECK_CU(cuDestroyExternalSemaphore(tl), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuDestroyExternalSemaphore(bin), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(semaphore_nodes)
{
    uint64_t *tv;
    CUexternalSemaphore tl = import_sem(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &tv);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
    memset(&sp, 0, sizeof sp);

    /* captured: one signal node, its parameters copied */
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    sp.params.fence.value = 2;
    CHECK_CU(cuSignalExternalSemaphoresAsync(&tl, &sp, 1, s), CUDA_SUCCESS);
    sp.params.fence.value = 99;
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    CHECK_EQ(*tv, 0u);              /* captured, not run */
    size_t n = 0;
    CUgraphNode nd;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, (size_t)1);
    CHECK_CU(cuGraphGetNodes(g, &nd, &n), CUDA_SUCCESS);
    CUgraphNodeType t;
    CHECK_CU(cuGraphNodeGetType(nd, &t), CUDA_SUCCESS);
    CHECK_EQ((int)t, (int)CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL);
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS np;
    CHECK_CU(cuGraphExternalSemaphoresSignalNodeGetParams(nd, &np), CUDA_SUCCESS);
    CHECK(np.numExtSems == 1 && np.extSemArray[0] == tl && np.paramsArray[0].params.fence.value == 2);
    CUDA_EXT_SEM_WAIT_NODE_PARAMS wn;
    CHECK_CU(cuGraphExternalSemaphoresWaitNodeGetParams(nd, &wn), CUDA_ERROR_INVALID_VALUE);

    CUgraphExec e;
    CHECK_CU(cuGraphInstantiate(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(*tv, 2u);

    /* the exec setter: the value may change, the count may not */
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS two[2];
    memset(two, 0, sizeof two);
    two[0].params.fence.value = 4;
    CUexternalSemaphore both[2] = { tl, tl };
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS set = { .extSemArray = both, .paramsArray = two, .numExtSems = 1 };
    CHECK_CU(cuGraphExecExternalSemaphoresSignalNodeSetParams(e, nd, &set), CUDA_SUCCESS);
    set.numExtSems = 2;
    CHECK_CU(cuGraphExecExternalSemaphoresSignalNodeSetParams(e, nd, &set), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(*tv, 4u);

    /* a whole update from a graph whose node signals 6 (added as a node) */
    CUgraph g2;
    CUgraphNode n2;
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    two[0].params.fence.value = 6;
    set.numExtSems = 1;
    CHECK_CU(cuGraphAddExternalSemaphoresSignalNode(&n2, g2, NULL, 0, &set), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(*tv, 6u);
    set.numExtSems = 2;
    CHECK_CU(cuGraphExternalSemaphoresSignalNodeSetParams(n2, &set), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);

    /* a launch naming a destroyed semaphore: refused, a violation */
    CHECK_CU(cuDestroyExternalSemaphore(tl), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuGraphAddExternalSemaphoresSignalNode(&n2, g2, NULL, 0, &set), CUDA_ERROR_INVALID_HANDLE);
    CUgraphExec e2;                 /* instantiated as it is; its launch is what is refused */
    CHECK_CU(cuGraphInstantiate(&e2, g, 0), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(e2, s), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuGraphExecDestroy(e2), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

int main(void)
{
    if (emu_test_open("mod_test.so", &ctx, &mod) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fill, mod, "fill_u32") != CUDA_SUCCESS) {
        printf("Bail out! emulator set-up failed\n");
        return 1;
    }
    RUN(memory_buffers);
    RUN(semaphores_on_streams);
    RUN(semaphore_nodes);
    return check_done();
}
