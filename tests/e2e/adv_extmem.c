/*
 * adv_extmem.c: round 50, memory and semaphores imported from outside CUDA
 * (what Vulkan / Direct3D interop and IPC by file descriptor do). The test
 * plays the other API: it makes memfds, imports them as OPAQUE_FD external
 * memory or as timeline semaphores, and reads and writes their bytes and
 * values through its own mappings.
 *
 *   timeline   each step re-captures the same work: wait for the "ready"
 *              semaphore to reach k, mad(in, t) on a placed temporary t, a
 *              copy of t into a buffer mapped onto external memory, signal
 *              "done" to k; the exec is updated from each new graph. Only the
 *              fence values change between steps: an update that the library
 *              skipped would leave the exec signaling an old value.
 *   nodes      the same built node by node (cuGraphAddExternalSemaphores*Node),
 *              the fence values then changed by the exec setters and by
 *              cuGraphExecUpdate from a graph with other values.
 *   buffers    each step imports a new memfd, maps a buffer onto it (often at
 *              the address of the previous step's, freed), re-captures a
 *              kernel writing it beside a placed temporary, updates, launches,
 *              reads the bytes from the file; the buffer's address range and
 *              pointer attributes; then destroys the object and frees the
 *              buffer (cuMemFree of memory the library did not place), and
 *              at the end an update naming a freed buffer by a memcpy node.
 *   swap       a swapchain of two images (two external memories) alternating
 *              as a re-captured graph's copy destination, the semaphores
 *              waited and signaled on the stream around each launch, the
 *              swapchain made again twice (new images imported and mapped,
 *              then the old ones destroyed and freed).
 *
 * Every line printed is computed on the host and must be the same with and
 * without the library.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "adv_common.h"

#define N 256u
#define STEPS 4

static CUcontext ctx;
static CUmodule mod;
static CUfunction mad;
static CUstream st;
static CUdeviceptr in;
static uint32_t hin[N];

/* A memfd of n bytes, mapped here (the other API's view) in *map. */
static int make_file(size_t n, void **map)
{
    int fd = memfd_create("adv_ext", 0);
    if (fd < 0 || ftruncate(fd, (off_t)n) != 0) exit(2);
    *map = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*map == MAP_FAILED) exit(2);
    return fd;
}

static CUexternalSemaphore timeline(uint64_t **value)
{
    void *map;
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d = { .type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD };
    d.handle.fd = make_file(4096, &map);
    CUexternalSemaphore s;
    MUST(cuImportExternalSemaphore(&s, &d));
    *value = map;
    return s;
}

static CUexternalMemory import_mem(size_t n, void **map)
{
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d = { .type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD, .size = n };
    d.handle.fd = make_file(n, map);
    CUexternalMemory m;
    MUST(cuImportExternalMemory(&m, &d));
    return m;
}

static CUdeviceptr map_buffer(CUexternalMemory m, size_t off, size_t n)
{
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC b = { .offset = off, .size = n };
    CUdeviceptr p;
    MUST(cuExternalMemoryGetMappedBuffer(&p, m, &b));
    return p;
}

/* The expected words of t after mad(in, t) from zeros, then the copy. */
static void want_mad(uint32_t *w)
{
    for (unsigned i = 0; i < N; i++) w[i] = hin[i];
}

static int words_ok(const uint32_t *got, const uint32_t *want) { return !memcmp(got, want, N * 4); }

/* ------------------------------------------------------------ timeline */

static void sem_signal(CUexternalSemaphore s, uint64_t v)
{
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS p;
    memset(&p, 0, sizeof p);
    p.params.fence.value = v;
    R(cuSignalExternalSemaphoresAsync(&s, &p, 1, st));
}

static void sem_wait(CUexternalSemaphore s, uint64_t v)
{
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS p;
    memset(&p, 0, sizeof p);
    p.params.fence.value = v;
    R(cuWaitExternalSemaphoresAsync(&s, &p, 1, st));
}

static void run_timeline(void)
{
    uint64_t *ready_v, *done_v;
    CUexternalSemaphore ready = timeline(&ready_v), done = timeline(&done_v);
    void *host;
    CUexternalMemory m = import_mem(N * 4, &host);
    CUdeviceptr out = map_buffer(m, 0, N * 4);
    CUgraphExec e = NULL;
    uint32_t want[N];
    want_mad(want);
    uint64_t n = N;
    for (int k = 1; k <= STEPS; k++) {
        CUdeviceptr t;
        MUST(cuMemAlloc(&t, N * 4));
        R(cuMemsetD32Async(t, 0, N, st));
        CUgraph g;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        sem_wait(ready, (uint64_t)k);
        ADV_LAUNCH(mad, st, &in, &t, &n);
        R(cuMemcpyDtoDAsync(out, t, N * 4, st));
        sem_signal(done, (uint64_t)k * 10);
        MUST(cuStreamEndCapture(st, &g));
        if (!e) MUST(cuGraphInstantiate(&e, g, 0));
        else adv_update(e, g);
        memset(host, 0, N * 4);
        __atomic_store_n(ready_v, (uint64_t)k, __ATOMIC_RELEASE);   /* the other API is done */
        R(cuGraphLaunch(e, st));
        R(cuStreamSynchronize(st));
        char name[32];
        snprintf(name, sizeof name, "timeline_%d", k);
        adv_check(name, *done_v == (uint64_t)k * 10 && words_ok(host, want), "done %llu",
                  (unsigned long long)*done_v);
        R(cuGraphDestroy(g));
        R(cuMemFree(t));
    }
    R(cuGraphExecDestroy(e));
    R(cuMemFree(out));
    R(cuDestroyExternalMemory(m));
    R(cuDestroyExternalSemaphore(ready));
    R(cuDestroyExternalSemaphore(done));
}

/* ------------------------------------------------------------ nodes */

/* wait(ready >= k) -> mad(in, t) -> signal(done = 10 k), built node by node. */
static CUgraph build(CUexternalSemaphore ready, CUexternalSemaphore done, uint64_t k, CUdeviceptr t,
                     CUgraphNode *sig)
{
    static uint64_t n = N;
    CUgraph g;
    CUgraphNode w, kn;
    MUST(cuGraphCreate(&g, 0));
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp;
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
    memset(&wp, 0, sizeof wp);
    memset(&sp, 0, sizeof sp);
    wp.params.fence.value = k;
    sp.params.fence.value = 10 * k;
    CUDA_EXT_SEM_WAIT_NODE_PARAMS wn = { .extSemArray = &ready, .paramsArray = &wp, .numExtSems = 1 };
    CUDA_EXT_SEM_SIGNAL_NODE_PARAMS sn = { .extSemArray = &done, .paramsArray = &sp, .numExtSems = 1 };
    MUST(cuGraphAddExternalSemaphoresWaitNode(&w, g, NULL, 0, &wn));
    void *args[] = { &in, &t, &n };
    kn = adv_add_kernel(g, &w, 1, mad, args);
    MUST(cuGraphAddExternalSemaphoresSignalNode(sig, g, &kn, 1, &sn));
    return g;
}

static void run_nodes(void)
{
    uint64_t *ready_v, *done_v;
    CUexternalSemaphore ready = timeline(&ready_v), done = timeline(&done_v);
    CUdeviceptr t;
    MUST(cuMemAlloc(&t, N * 4));
    CUgraphNode sig;
    CUgraph g0 = build(ready, done, 1, t, &sig);
    CUgraphExec e;
    MUST(cuGraphInstantiate(&e, g0, 0));
    for (int k = 1; k <= STEPS; k++) {
        if (k > 1 && k % 2 == 0) {          /* a whole update from a graph with the new values */
            CUgraphNode s2;
            CUgraph g = build(ready, done, (uint64_t)k, t, &s2);
            adv_update(e, g);
            R(cuGraphDestroy(g));
        } else if (k > 1) {                 /* the exec setter (the wait keeps an older value) */
            CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
            memset(&sp, 0, sizeof sp);
            sp.params.fence.value = 10 * (uint64_t)k;
            CUDA_EXT_SEM_SIGNAL_NODE_PARAMS sn = { .extSemArray = &done, .paramsArray = &sp, .numExtSems = 1 };
            R(cuGraphExecExternalSemaphoresSignalNodeSetParams(e, sig, &sn));
        }
        R(cuMemsetD32Async(t, 0, N, st));
        __atomic_store_n(ready_v, (uint64_t)k, __ATOMIC_RELEASE);
        R(cuGraphLaunch(e, st));
        R(cuStreamSynchronize(st));
        uint32_t *got = adv_read(t, N), want[N];
        want_mad(want);
        char name[32];
        snprintf(name, sizeof name, "nodes_%d", k);
        adv_check(name, got && words_ok(got, want) && *done_v == 10 * (uint64_t)k, "done %llu",
                  (unsigned long long)*done_v);
        free(got);
    }
    /* an update from the first graph would signal 10 below the current value:
     * the exec gets it (CUDA_SUCCESS) and is not launched */
    adv_update(e, g0);
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g0));
    R(cuMemFree(t));
    R(cuDestroyExternalSemaphore(ready));
    R(cuDestroyExternalSemaphore(done));
}

/* ------------------------------------------------------------ buffers */

static void run_buffers(void)
{
    CUgraphExec e = NULL;
    uint64_t n = N;
    uint32_t want[N];
    want_mad(want);
    for (int k = 1; k <= STEPS; k++) {
        void *host;
        CUexternalMemory m = import_mem(3 * 4096, &host);
        size_t off = (size_t)(k % 3) * 4096 + 64;
        CUdeviceptr b = map_buffer(m, off, N * 4);
        CUdeviceptr t;
        MUST(cuMemAlloc(&t, N * 4));
        R(cuMemsetD32Async(b, 0, N, st));
        CUgraph g;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        R(cuMemsetD32Async(t, 5, N, st));
        ADV_LAUNCH(mad, st, &in, &b, &n);
        MUST(cuStreamEndCapture(st, &g));
        if (!e) MUST(cuGraphInstantiate(&e, g, 0));
        else adv_update(e, g);
        R(cuGraphLaunch(e, st));
        R(cuStreamSynchronize(st));
        char name[32];
        snprintf(name, sizeof name, "buffers_%d", k);
        adv_check(name, words_ok((uint32_t *)((char *)host + off), want), "step %d", k);
        CUdeviceptr base = 0;
        size_t size = 0;
        unsigned type = 0, ipc = 9;
        CUcontext c = NULL;
        R(cuMemGetAddressRange(&base, &size, b + 100));
        R(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b));
        R(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, b));
        R(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, b));
        snprintf(name, sizeof name, "buffers_query_%d", k);
        adv_check(name, base == b && size == N * 4 && type == CU_MEMORYTYPE_DEVICE && c == ctx && ipc == 0,
                  "size %zu type %u ipc %u", size, type, ipc);
        R(cuGraphDestroy(g));
        R(cuDestroyExternalMemory(m));
        R(cuMemFree(b));
        R(cuMemFree(b));            /* once more: CUDA_ERROR_INVALID_VALUE */
        R(cuMemFree(t));
        munmap(host, 3 * 4096);
    }
    R(cuGraphExecDestroy(e));

    /* a memcpy node into a mapped buffer, freed since: an update of the
     * exec from its own graph names freed memory (the driver refuses) */
    void *host;
    CUexternalMemory m = import_mem(N * 4, &host);
    CUdeviceptr b = map_buffer(m, 0, N * 4);
    CUgraph g;
    MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    R(cuMemcpyDtoDAsync(b, in, N * 4, st));
    MUST(cuStreamEndCapture(st, &g));
    MUST(cuGraphInstantiate(&e, g, 0));
    R(cuGraphLaunch(e, st));
    R(cuStreamSynchronize(st));
    adv_check("buffers_copy", words_ok(host, hin), "copied");
    adv_update(e, g);               /* the same: accepted */
    R(cuDestroyExternalMemory(m));
    R(cuMemFree(b));
    CUgraphExecUpdateResultInfo info;
    CUresult r = R(cuGraphExecUpdate(e, g, &info));
    adv_check("buffers_freed_update", r != CUDA_SUCCESS, "result %d", (int)info.result);
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
    munmap(host, N * 4);
}

/* ------------------------------------------------------------ swap */

/* A swapchain of two images, each its own external memory: each frame waits
 * (on the stream, outside the graph) for the other API's "frame" timeline,
 * launches the frame's graph, re-captured each frame (a placed temporary,
 * mad into it, mad of it into the frame's image: the image pointer alternates,
 * which skip_profiled may serve by variants), and signals "shown". At frames
 * 7 and 10 the swapchain is made again (a window resize): two new images
 * imported and mapped, then the old ones destroyed and freed (so the new
 * images take other addresses at 7, and may take the first ones at 10). */
static void run_swap(void)
{
    uint64_t *frame_v, *shown_v;
    CUexternalSemaphore frame = timeline(&frame_v), shown = timeline(&shown_v);
    CUexternalMemory m[2];
    void *host[2];
    CUdeviceptr img[2];
    for (int i = 0; i < 2; i++) {
        m[i] = import_mem(N * 4, &host[i]);
        img[i] = map_buffer(m[i], 0, N * 4);
    }
    CUgraphExec e = NULL;
    uint64_t n = N;
    uint32_t want[N];
    want_mad(want);
    for (int k = 1; k <= 12; k++) {
        int i = k % 2;
        if (k == 7 || k == 10) {    /* the new swapchain made before the old one goes */
            CUexternalMemory om[2] = { m[0], m[1] };
            CUdeviceptr oimg[2] = { img[0], img[1] };
            void *ohost[2] = { host[0], host[1] };
            for (int j = 0; j < 2; j++) {
                m[j] = import_mem(N * 4, &host[j]);
                img[j] = map_buffer(m[j], 0, N * 4);
            }
            for (int j = 0; j < 2; j++) {
                R(cuDestroyExternalMemory(om[j]));
                R(cuMemFree(oimg[j]));
                munmap(ohost[j], N * 4);
            }
        }
        CUdeviceptr tt[2];          /* the frame's temporary alternates too */
        MUST(cuMemAlloc(&tt[0], N * 4));
        MUST(cuMemAlloc(&tt[1], N * 4));
        CUdeviceptr t = tt[i];
        CUgraph g;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        R(cuMemsetD32Async(t, 0, N, st));
        ADV_LAUNCH(mad, st, &in, &t, &n);
        ADV_LAUNCH(mad, st, &t, &img[i], &n);
        MUST(cuStreamEndCapture(st, &g));
        if (!e) MUST(cuGraphInstantiate(&e, g, 0));
        else adv_update(e, g);
        memset(host[i], 0, N * 4);
        sem_wait(frame, (uint64_t)k);
        R(cuGraphLaunch(e, st));
        sem_signal(shown, (uint64_t)k);
        __atomic_store_n(frame_v, (uint64_t)k, __ATOMIC_RELEASE);   /* the other API's frame k */
        R(cuStreamSynchronize(st));
        char name[32];
        snprintf(name, sizeof name, "swap_%d", k);
        adv_check(name, *shown_v == (uint64_t)k && words_ok(host[i], want), "shown %llu",
                  (unsigned long long)*shown_v);
        R(cuGraphDestroy(g));
        R(cuMemFree(tt[0]));
        R(cuMemFree(tt[1]));
    }
    R(cuGraphExecDestroy(e));
    for (int j = 0; j < 2; j++) {
        R(cuMemFree(img[j]));
        R(cuDestroyExternalMemory(m[j]));
        munmap(host[j], N * 4);
    }
    R(cuDestroyExternalSemaphore(frame));
    R(cuDestroyExternalSemaphore(shown));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "timeline", "nodes", "buffers", "swap", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&in, N * 4));
    for (unsigned i = 0; i < N; i++) hin[i] = i * 3 + 1;
    MUST(cuMemcpyHtoD(in, hin, N * 4));
    if (c == 0) run_timeline();
    else if (c == 1) run_nodes();
    else if (c == 2) run_buffers();
    else run_swap();
    R(cuMemFree(in));
    return adv_finish();
}
