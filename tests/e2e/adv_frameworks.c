/*
 * tests/e2e/adv_frameworks.c: what real frameworks do with the driver API
 * (round 23), each a valid program whose results are computed on the host.
 *   torch   PyTorch CUDA graphs: static input, weight and gradient buffers
 *           from cuMemAlloc (the caching allocator's segments); two eager
 *           warm-up iterations on a side stream with stream-ordered
 *           temporaries (cuMemAllocAsync / cuMemFreeAsync); then three graphs
 *           (forward, backward, optimizer) captured in thread-local mode
 *           (cuStreamBeginCapture_v2, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) on
 *           the side stream joined to the main one by events, the backward
 *           one forking to a third stream and joining back inside the
 *           capture; their temporaries come from one memory pool
 *           (cuMemPoolCreate; the device's default pool where the driver
 *           refuses it, as the emulated one does) by cuMemAllocFromPoolAsync:
 *           the forward graph's activation is not freed in it but read by
 *           the backward graph, each exec instantiated with
 *           CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH and uploaded
 *           (cuGraphUpload); cuStreamGetCaptureInfo must name one capture
 *           for the side stream and the forked one. While the
 *           forward graph is captured another thread (a data loader) makes
 *           cuMemAlloc, synchronous copies and memsets, cuMemFree and
 *           stream-ordered allocations of its own (allowed: the capture is
 *           thread-local). Then 8 replays of the three graphs in sequence on
 *           the main stream, each behind a copy of new input into the static
 *           input buffer, with eager allocations of other sizes between the
 *           replays; each replay's gradient and its sum, and the weights at
 *           the end, are checked;
 *   vllm    vLLM's start: weights loaded; cuMemGetInfo, a dummy run at the
 *           largest batch (activations from cuMemAlloc and cuMemAllocAsync,
 *           all freed, as torch.cuda.empty_cache), cuMemGetInfo again (the
 *           memory must read as free again), then the KV cache: one
 *           cuMemAlloc of what cuMemGetInfo reported free less a 16 MiB
 *           reserve (it must succeed); then one graph per batch size (8, 4,
 *           2, 1: largest first), its activations in one segment all share
 *           (cuMemAlloc, as torch's graph pool) for 8 and 2, graph memory
 *           from the default pool for 4 and 1, reading a static input
 *           buffer sized for the largest batch and updating the KV cache;
 *           then 12 batches of
 *           varying sizes, each served by the smallest graph that holds it
 *           (the input padded with zeros); outputs and the KV cache checked
 *           each step; last, cuMemGetInfo and one allocation of all but
 *           4 MiB of what it reports free. Meant for a 256 MiB device
 *           (CUDAEMU_DEVICE_MEMORY);
 *   vllm_tight  the same with a 2 MiB reserve, and the last allocation of
 *           all the free memory cuMemGetInfo reports;
 *   xla     XLA command buffers: an explicit graph (memset, memcpy and four
 *           kernel nodes; one node with two dependencies) over a parameter
 *           buffer (which changes every 4 executions), a temporary allocated
 *           by cuMemAlloc for each execution and freed after it (a spacer
 *           allocated before it every third execution, so that its address
 *           moves), an output buffer rotating between two (the same one for
 *           executions 4 and 5) and a scalar that changes every other
 *           execution; 16 executions: odd ones update the exec node by node
 *           (cuGraphExecMemsetNodeSetParams, cuGraphExecMemcpyNodeSetParams,
 *           cuGraphExecKernelNodeSetParams); k = 2, 6, 10, 14 set the source
 *           graph's nodes in place (cuGraphMemsetNodeSetParams, ...,
 *           cuGraphKernelNodeSetParams) and cuGraphExecUpdate the exec from
 *           it, as XLA updates its own graph; k = 4 and 12 update the exec
 *           from that graph unchanged since k - 2, while k - 1 set the exec's
 *           nodes to other operands (its temporary freed since): the exec
 *           must go back to k - 2's operands; k = 8 rebuilds the graph and
 *           updates from the new one; each execution's output and sum
 *           checked;
 *   xla_rebuild  the same with every graph update from a rebuilt graph
 *           (k = 4 and 12 rebuilt with k - 2's operands): the pointers vary
 *           among placed buffers, so skip_profiled serves the exec from
 *           variants;
 *   nccl    NCCL-like: buffers from cuMemCreate / cuMemAddressReserve /
 *           cuMemMap / cuMemSetAccess (two sets, used in turn, the same set
 *           twice now and then) passed to kernels inside captures; each step
 *           stream s0 waits (cuStreamWaitValue32) on a flag in pinned host
 *           memory that the host (the proxy) writes only after everything of
 *           the step was queued, fills the send buffer and writes a flag in
 *           VMM memory (cuStreamWriteValue32) that s1 waits on; the step's
 *           reduction is re-captured on a third stream and given to the exec
 *           by cuGraphExecUpdate (skipped where the set repeats), launched on
 *           s1, followed by a host function (cuLaunchHostFunc) and an exec
 *           holding a captured host function, and s1 writes a done flag the
 *           host polls (no driver call). A library that waits for the device
 *           in any of these calls hangs (the host releases s0 only after
 *           them). Captured stream memory operations are not in the case:
 *           the emulated driver has no batch memory operation nodes.
 *   stats   the memory statistics of PyTorch's cudaMallocAsync backend and
 *           of CuPy's MemoryAsyncPool: the current pool's
 *           CU_MEMPOOL_ATTR_USED_MEM_CURRENT, RESERVED_MEM_CURRENT,
 *           USED_MEM_HIGH and RESERVED_MEM_HIGH (cuMemPoolGetAttribute) read
 *           around an eager step of cuMemAllocAsync tensors (one by
 *           cuMemAllocFromPoolAsync) and a dummy run after the peaks were
 *           reset (cuMemPoolSetAttribute to 0), as a framework sizes its
 *           caches from the peak, the release threshold raised as PyTorch's
 *           backend does; asserted as ranges (a driver may round each block
 *           up to its granularity), in use back to the start exactly.
 *           Reserved memory after the frees is not asserted: a pool with a
 *           raised threshold keeps freed memory reserved (and cuMemGetInfo
 *           counts it used), where the library counts freed placed memory
 *           free in both. Before round 23's fix the library left its placed
 *           blocks out of these figures (in use and the peak read 0).
 *   torch_expandable  PyTorch's expandable segments (256 MiB device): after
 *           eager cuMemAlloc and cuMemAllocAsync blocks were freed, one
 *           reservation grown a granule at a time (cuMemCreate, cuMemMap,
 *           cuMemSetAccess) to what cuMemGetInfo reported free at the start,
 *           less 8 MiB (every piece must be had); a graph captured in
 *           thread-local mode over its first and last pieces, replayed;
 *           then the segment shrunk to one piece (cuMemUnmap, cuMemRelease)
 *           and a cuMemAlloc of what it gave back less 16 MiB.
 * Usage: adv_frameworks torch|vllm|vllm_tight|xla|xla_rebuild|nccl|stats|torch_expandable
 */
#include "adv_common.h"

#define N 4096                  /* words of one tensor */
#define MiB ((size_t)1 << 20)

static CUcontext ctx;
static CUmodule mod;
static CUdevice dev;
static CUfunction f_fill, f_add, f_mad, f_sum;

/* Launches of the four kernels (grid and block 1x1x1) on s. */
static void k_fill(CUstream s, CUdeviceptr p, uint32_t v, uint64_t n)
{
    ADV_LAUNCH(f_fill, s, &p, &v, &n);
}

static void k_add(CUstream s, CUdeviceptr p, uint32_t v, uint64_t n)
{
    ADV_LAUNCH(f_add, s, &p, &v, &n);
}

/* acc[i] = acc[i] * 3 + in[i] */
static void k_mad(CUstream s, CUdeviceptr in, CUdeviceptr acc, uint64_t n)
{
    ADV_LAUNCH(f_mad, s, &in, &acc, &n);
}

/* *out = sum of in[i] * (i + 1) */
static void k_sum(CUstream s, CUdeviceptr in, uint64_t n, CUdeviceptr out)
{
    ADV_LAUNCH(f_sum, s, &in, &n, &out);
}

static uint64_t host_sum(const uint32_t *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += (uint64_t)v[i] * (i + 1);
    return s;
}

/* Compares the 64-bit word at d with want. */
static int check_u64(const char *name, CUdeviceptr d, uint64_t want)
{
    uint64_t got = 0;
    if (R(cuMemcpyDtoH(&got, d, 8)) != CUDA_SUCCESS) return adv_check(name, 0, "the copy back failed");
    return adv_check(name, got == want, "%016llx%s", (unsigned long long)got,
                     got == want ? "" : " (wrong)");
}

/* ------------------------------------------------------------------ torch */
static CUstream loader_stream;
static int loader_ok;

/* The data loader: allocations, synchronous copies and frees of its own
 * while the main thread captures in thread-local mode. */
static void *loader(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx));
    uint32_t h[N], back[N];
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        CUdeviceptr p, q;
        MUST(cuMemAlloc(&p, (size_t)(k + 1) * N * 4));
        for (int i = 0; i < N; i++) h[i] = 0x5000u + (uint32_t)(k * N + i);
        R(cuMemcpyHtoD(p, h, sizeof h));
        R(cuMemsetD32(p + (size_t)N * 4, 7, (size_t)k * N));
        R(cuMemcpyDtoH(back, p, sizeof back));
        ok &= memcmp(h, back, sizeof h) == 0;
        R(cuMemAllocAsync(&q, 64 * 1024, loader_stream));
        R(cuMemcpyHtoDAsync(q, h, sizeof h, loader_stream));
        R(cuMemcpyDtoHAsync(back, q, sizeof back, loader_stream));
        R(cuMemFreeAsync(q, loader_stream));
        R(cuStreamSynchronize(loader_stream));
        ok &= memcmp(h, back, sizeof h) == 0;
        R(cuMemFree(p));
    }
    loader_ok = ok;
    return NULL;
}

static uint32_t h_x[N], h_w[N], h_t[N], h_a[N], h_out[N];

/* One training step on the host: forward (t = x + 7, a = 3 t + w), backward
 * (t2 = a + 11, out = 3 out + t2), optimizer (w = 3 w + out). */
static void torch_host_step(void)
{
    for (int i = 0; i < N; i++) {
        h_t[i] = h_x[i] + 7;
        h_a[i] = h_t[i] * 3 + h_w[i];
        h_out[i] = h_out[i] * 3 + (h_a[i] + 11);
        h_w[i] = h_w[i] * 3 + h_out[i];
    }
}

static void torch_input(int step)
{
    for (int i = 0; i < N; i++) h_x[i] = (uint32_t)(step * 7919 + i * 31 + 1);
}

static void torch_mode(void)
{
    CUstream ms, ss, s3;
    CUevent ev_fork, ev_join, ev_f3, ev_j3;
    CUdeviceptr x, w, seg;
    CUmemoryPool pool;
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    if (R(cuMemPoolCreate(&pool, &pp)) != CUDA_SUCCESS) MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    MUST(cuStreamCreate(&ms, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&ss, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&loader_stream, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&ev_fork, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ev_join, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ev_f3, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&ev_j3, CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&x, N * 4));
    MUST(cuMemAlloc(&w, N * 4));
    MUST(cuMemAlloc(&seg, 2 * MiB));              /* a segment: out at 0, its sum at N * 4 */
    CUdeviceptr out = seg, sum = seg + N * 4;
    for (int i = 0; i < N; i++) h_w[i] = (uint32_t)(i * 3 + 5);
    memset(h_out, 0, sizeof h_out);
    MUST(cuMemcpyHtoD(w, h_w, sizeof h_w));
    MUST(cuMemsetD32(out, 0, N));
    MUST(cuCtxSynchronize());

    /* Warm-up: the same step, eagerly, on the side stream. */
    for (int it = 0; it < 2; it++) {
        CUdeviceptr t, a, t2;
        torch_input(100 + it);
        MUST(cuMemcpyHtoDAsync(x, h_x, sizeof h_x, ms));
        MUST(cuEventRecord(ev_fork, ms));
        MUST(cuStreamWaitEvent(ss, ev_fork, 0));
        MUST(cuMemAllocAsync(&t, N * 4, ss));
        MUST(cuMemAllocAsync(&a, N * 4, ss));
        R(cuMemsetD32Async(t, 0, N, ss));
        k_mad(ss, x, t, N);
        k_add(ss, t, 7, N);
        R(cuMemsetD32Async(a, 0, N, ss));
        k_mad(ss, t, a, N);
        k_mad(ss, w, a, N);
        R(cuMemFreeAsync(t, ss));
        MUST(cuMemAllocAsync(&t2, N * 4, ss));
        R(cuMemsetD32Async(t2, 0, N, ss));
        k_mad(ss, a, t2, N);
        k_add(ss, t2, 11, N);
        k_mad(ss, t2, out, N);
        k_sum(ss, out, N, sum);
        k_mad(ss, out, w, N);
        R(cuMemFreeAsync(t2, ss));
        R(cuMemFreeAsync(a, ss));
        MUST(cuEventRecord(ev_join, ss));
        MUST(cuStreamWaitEvent(ms, ev_join, 0));
        MUST(cuStreamSynchronize(ms));
        torch_host_step();
        char name[64];
        snprintf(name, sizeof name, "torch warm-up %d: gradient", it);
        adv_check_words(name, out, h_out, N);
    }

    /* Capture: forward, backward, optimizer, each on ss joined to ms. */
    CUgraph g[3];
    CUgraphExec e[3];
    CUdeviceptr act = 0;
    for (int gi = 0; gi < 3; gi++) {
        MUST(cuCtxSynchronize());
        MUST(cuEventRecord(ev_fork, ms));
        MUST(cuStreamWaitEvent(ss, ev_fork, 0));
        MUST(cuStreamBeginCapture_v2(ss, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        if (gi == 0) {
            CUdeviceptr t;
            pthread_t th;
            MUST(cuMemAllocFromPoolAsync(&t, N * 4, pool, ss));
            MUST(cuMemAllocFromPoolAsync(&act, N * 4, pool, ss));
            if (pthread_create(&th, NULL, loader, NULL) != 0) exit(2);
            R(cuMemsetD32Async(t, 0, N, ss));
            k_mad(ss, x, t, N);
            k_add(ss, t, 7, N);
            R(cuMemsetD32Async(act, 0, N, ss));
            k_mad(ss, t, act, N);
            k_mad(ss, w, act, N);
            R(cuMemFreeAsync(t, ss));   /* act is not freed: AUTO_FREE_ON_LAUNCH */
            pthread_join(th, NULL);
        } else if (gi == 1) {
            CUdeviceptr t2;
            MUST(cuMemAllocFromPoolAsync(&t2, N * 4, pool, ss));
            R(cuMemsetD32Async(t2, 0, N, ss));
            k_mad(ss, act, t2, N);
            k_add(ss, t2, 11, N);
            k_mad(ss, t2, out, N);
            R(cuEventRecord(ev_f3, ss));
            R(cuStreamWaitEvent(s3, ev_f3, 0));
            /* the caching allocator asks which capture a stream is in */
            CUstreamCaptureStatus st2 = CU_STREAM_CAPTURE_STATUS_NONE, st3 = CU_STREAM_CAPTURE_STATUS_NONE;
            cuuint64_t id2 = 0, id3 = 1;
            R(cuStreamGetCaptureInfo(ss, &st2, &id2, NULL, NULL, NULL, NULL));
            R(cuStreamGetCaptureInfo(s3, &st3, &id3, NULL, NULL, NULL, NULL));
            adv_check("torch backward capture: the forked stream in the same capture",
                      st2 == CU_STREAM_CAPTURE_STATUS_ACTIVE && st3 == st2 && id2 == id3, "%s",
                      st2 == CU_STREAM_CAPTURE_STATUS_ACTIVE && st3 == st2 && id2 == id3 ? "yes" : "no");
            k_sum(s3, out, N, sum);
            R(cuMemFreeAsync(t2, ss));
            R(cuEventRecord(ev_j3, s3));
            R(cuStreamWaitEvent(ss, ev_j3, 0));
        } else {
            k_mad(ss, out, w, N);
        }
        MUST(cuStreamEndCapture(ss, &g[gi]));
        MUST(cuEventRecord(ev_join, ss));
        MUST(cuStreamWaitEvent(ms, ev_join, 0));
        MUST(cuGraphInstantiateWithFlags(&e[gi], g[gi], CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
        R(cuGraphUpload(e[gi], ms));
    }
    adv_check("torch data loader during the thread-local capture", loader_ok, "%s",
              loader_ok ? "its copies read back" : "its copies differ");

    /* Replays, with eager allocations between them. */
    for (int step = 0; step < 8; step++) {
        torch_input(step);
        R(cuMemcpyHtoDAsync(x, h_x, sizeof h_x, ms));
        for (int gi = 0; gi < 3; gi++) R(cuGraphLaunch(e[gi], ms));
        CUdeviceptr t, big = 0;
        R(cuMemAllocAsync(&t, (size_t)(step + 1) * 4096, ms));
        k_fill(ms, t, (uint32_t)step, (uint64_t)(step + 1) * 1024);
        R(cuMemFreeAsync(t, ms));
        if (step % 3 == 1) {
            R(cuStreamSynchronize(ms));
            if (R(cuMemAlloc(&big, MiB + (size_t)step * 4096)) == CUDA_SUCCESS) {
                R(cuMemsetD32(big, 0xffffffffu, (MiB + (size_t)step * 4096) / 4));
                R(cuMemFree(big));
            }
        }
        R(cuStreamSynchronize(ms));
        torch_host_step();
        char name[64];
        snprintf(name, sizeof name, "torch replay %d: gradient", step);
        adv_check_words(name, out, h_out, N);
        snprintf(name, sizeof name, "torch replay %d: gradient sum", step);
        check_u64(name, sum, host_sum(h_out, N));
    }
    adv_check_words("torch weights after the replays", w, h_w, N);
    R(cuMemFreeAsync(act, ms));
    R(cuStreamSynchronize(ms));
    for (int gi = 0; gi < 3; gi++) {
        R(cuGraphExecDestroy(e[gi]));
        R(cuGraphDestroy(g[gi]));
    }
    R(cuMemFree(x));
    R(cuMemFree(w));
    R(cuMemFree(seg));
}

/* ------------------------------------------------------------------- vllm */
#define VK 1024                 /* words per sequence */
#define VMAXB 8

static void vllm_mode(int tight)
{
    CUstream s;
    CUdeviceptr weights, ids, outb;
    size_t free0 = 0, free1 = 0, total = 0;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&weights, 16 * MiB));
    k_fill(s, weights, 3, 16 * MiB / 4);
    MUST(cuMemAlloc(&ids, VMAXB * VK * 4));
    MUST(cuMemAlloc(&outb, VMAXB * VK * 4));
    MUST(cuStreamSynchronize(s));

    /* Memory profiling: a dummy run at the largest batch. */
    MUST(cuMemGetInfo(&free0, &total));
    CUdeviceptr acts[4], aa;
    for (int i = 0; i < 4; i++) {
        MUST(cuMemAlloc(&acts[i], 16 * MiB));
        k_fill(s, acts[i], (uint32_t)i, 16 * MiB / 4);
    }
    MUST(cuMemAllocAsync(&aa, 32 * MiB, s));
    k_fill(s, aa, 9, 32 * MiB / 4);
    k_mad(s, acts[0], aa, VMAXB * VK);
    R(cuMemFreeAsync(aa, s));
    MUST(cuStreamSynchronize(s));
    for (int i = 0; i < 4; i++) R(cuMemFree(acts[i]));
    MUST(cuMemGetInfo(&free1, &total));
    adv_check("vllm profile: free memory after the dummy run", free1 + MiB >= free0, "%s",
              free1 + MiB >= free0 ? "back to before it, within 1 MiB" : "more than 1 MiB below");

    /* The KV cache: what cuMemGetInfo reports free, less a reserve. */
    size_t reserve = tight ? 2 * MiB : 16 * MiB, slack = tight ? 0 : 4 * MiB;
    size_t kv_bytes = free1 > reserve + 8 * MiB ? (free1 - reserve) / (2 * MiB) * (2 * MiB) : 2 * MiB;
    CUdeviceptr kv = 0;
    CUresult kr = R(cuMemAlloc(&kv, kv_bytes));
    adv_check("vllm KV cache of the free memory less the reserve", kr == CUDA_SUCCESS, "%s",
              kr == CUDA_SUCCESS ? "allocated" : "refused");
    if (kr != CUDA_SUCCESS) return;
    R(cuMemsetD32(kv, 0, kv_bytes / 4));
    MUST(cuCtxSynchronize());
    k_fill(s, kv + kv_bytes - 4 * VK, 77, VK);   /* the cache's last page */
    static uint32_t h_kv[VMAXB * VK], h_ids[VMAXB * VK], h_o[VMAXB * VK], h_last[VK];
    memset(h_kv, 0, sizeof h_kv);
    for (int i = 0; i < VK; i++) h_last[i] = 77u + (uint32_t)i;

    /* One graph per batch size, largest first, graph memory from one pool. */
    static const int sizes[4] = { 8, 4, 2, 1 };
    CUdeviceptr gpool;              /* the graphs' pool segment (torch's) */
    MUST(cuMemAlloc(&gpool, VMAXB * VK * 4));
    CUgraph g[4];
    CUgraphExec e[4];
    for (int gi = 0; gi < 4; gi++) {
        uint64_t n = (uint64_t)sizes[gi] * VK;
        CUdeviceptr act;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        if (gi % 2)
            MUST(cuMemAllocAsync(&act, n * 4, s));
        else
            act = gpool;
        R(cuMemsetD32Async(act, 0, n, s));
        k_mad(s, ids, act, n);
        k_add(s, act, (uint32_t)sizes[gi], n);
        k_mad(s, act, kv, n);
        R(cuMemsetD32Async(outb, 0, n, s));
        k_mad(s, act, outb, n);
        k_mad(s, weights, outb, n);
        if (gi % 2) R(cuMemFreeAsync(act, s));
        MUST(cuStreamEndCapture(s, &g[gi]));
        MUST(cuGraphInstantiateWithFlags(&e[gi], g[gi], 0));
    }

    /* Serving: each batch by the smallest graph that holds it. */
    static const int batches[12] = { 3, 1, 8, 5, 2, 7, 4, 6, 1, 8, 2, 3 };
    for (int step = 0; step < 12; step++) {
        int nb = batches[step], gi = 3;
        while (sizes[gi] < nb) gi--;
        int bs = sizes[gi];
        memset(h_ids, 0, sizeof h_ids);
        for (int i = 0; i < nb * VK; i++) h_ids[i] = (uint32_t)(step * 1009 + i * 7 + 1);
        R(cuMemcpyHtoDAsync(ids, h_ids, sizeof h_ids, s));
        R(cuGraphLaunch(e[gi], s));
        R(cuStreamSynchronize(s));
        for (int i = 0; i < bs * VK; i++) {
            uint32_t a = h_ids[i] + (uint32_t)bs;
            h_kv[i] = h_kv[i] * 3 + a;
            h_o[i] = a * 3 + (3u + (uint32_t)i);
        }
        char name[64];
        snprintf(name, sizeof name, "vllm batch %d (%d in graph %d): output", step, nb, bs);
        adv_check_words(name, outb, h_o, (size_t)bs * VK);
        snprintf(name, sizeof name, "vllm batch %d: KV cache", step);
        adv_check_words(name, kv, h_kv, VMAXB * VK);
    }
    adv_check_words("vllm KV cache's last page", kv + kv_bytes - 4 * VK, h_last, VK);

    /* What is left: cuMemGetInfo's free memory less 4 MiB, allocated. */
    size_t fr = 0;
    MUST(cuMemGetInfo(&fr, &total));
    CUdeviceptr rest = 0;
    CUresult rr = fr > slack ? R(cuMemAlloc(&rest, fr - slack)) : CUDA_SUCCESS;
    adv_check("vllm allocation of the free memory (less the slack) after serving", rr == CUDA_SUCCESS, "%s",
              rr == CUDA_SUCCESS ? "allocated" : "refused");
    if (rest) R(cuMemFree(rest));
    for (int gi = 0; gi < 4; gi++) {
        R(cuGraphExecDestroy(e[gi]));
        R(cuGraphDestroy(g[gi]));
    }
    R(cuMemFree(kv));
    R(cuMemFree(gpool));
    R(cuMemFree(weights));
    R(cuMemFree(ids));
    R(cuMemFree(outb));
}

/* -------------------------------------------------------------------- xla */
typedef struct xla_nodes {
    CUgraphNode set, copy, add, mad1, mad2, sum;
} xla_nodes;

typedef struct xla_args {
    CUdeviceptr in, tmp, out, w;
    uint32_t c;
    uint64_t n;
} xla_args;

static CUDA_MEMSET_NODE_PARAMS xla_memset(const xla_args *a)
{
    return (CUDA_MEMSET_NODE_PARAMS){ .dst = a->out, .value = 0, .elementSize = 4, .width = N,
                                      .height = 1 };
}

static CUDA_MEMCPY3D xla_copy(const xla_args *a)
{
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = a->in;
    cp.dstDevice = a->tmp;
    cp.WidthInBytes = N * 4;
    cp.Height = cp.Depth = 1;
    return cp;
}

/* Kernel node parameters of the four kernels; args must outlive their use. */
static void xla_kernels(xla_args *a, CUdeviceptr *sum_at, void *args[4][3],
                        CUDA_KERNEL_NODE_PARAMS kp[4])
{
    args[0][0] = &a->tmp, args[0][1] = &a->c, args[0][2] = &a->n;     /* tmp += c */
    args[1][0] = &a->tmp, args[1][1] = &a->out, args[1][2] = &a->n;   /* out = tmp */
    args[2][0] = &a->w, args[2][1] = &a->out, args[2][2] = &a->n;     /* out = 3 out + w */
    args[3][0] = &a->out, args[3][1] = &a->n, args[3][2] = sum_at;    /* sum */
    kp[0] = adv_kernel_params(f_add, args[0]);
    kp[1] = adv_kernel_params(f_mad, args[1]);
    kp[2] = adv_kernel_params(f_mad, args[2]);
    kp[3] = adv_kernel_params(f_sum, args[3]);
}

static void xla_build(CUgraph *g, xla_args *a, xla_nodes *nd)
{
    CUdeviceptr sum_at = a->out + N * 4;
    void *args[4][3];
    CUDA_KERNEL_NODE_PARAMS kp[4];
    CUDA_MEMSET_NODE_PARAMS mp = xla_memset(a);
    CUDA_MEMCPY3D cp = xla_copy(a);
    xla_kernels(a, &sum_at, args, kp);
    MUST(cuGraphCreate(g, 0));
    MUST(cuGraphAddMemsetNode(&nd->set, *g, NULL, 0, &mp, ctx));
    MUST(cuGraphAddMemcpyNode(&nd->copy, *g, NULL, 0, &cp, ctx));
    MUST(cuGraphAddKernelNode(&nd->add, *g, &nd->copy, 1, &kp[0]));
    CUgraphNode two[2] = { nd->set, nd->add };
    MUST(cuGraphAddKernelNode(&nd->mad1, *g, two, 2, &kp[1]));
    MUST(cuGraphAddKernelNode(&nd->mad2, *g, &nd->mad1, 1, &kp[2]));
    MUST(cuGraphAddKernelNode(&nd->sum, *g, &nd->mad2, 1, &kp[3]));
}

/* Sets the nodes of g (built by xla_build) to a's operands in place. */
static void xla_set_graph(const xla_nodes *nd, xla_args *a)
{
    CUdeviceptr sum_at = a->out + N * 4;
    void *args[4][3];
    CUDA_KERNEL_NODE_PARAMS kp[4];
    CUDA_MEMSET_NODE_PARAMS mp = xla_memset(a);
    CUDA_MEMCPY3D cp = xla_copy(a);
    xla_kernels(a, &sum_at, args, kp);
    R(cuGraphMemsetNodeSetParams(nd->set, &mp));
    R(cuGraphMemcpyNodeSetParams(nd->copy, &cp));
    R(cuGraphKernelNodeSetParams(nd->add, &kp[0]));
    R(cuGraphKernelNodeSetParams(nd->mad1, &kp[1]));
    R(cuGraphKernelNodeSetParams(nd->mad2, &kp[2]));
    R(cuGraphKernelNodeSetParams(nd->sum, &kp[3]));
}

/* Sets the exec's nodes (those of the graph it was instantiated from) to a's
 * operands. */
static void xla_set_exec(CUgraphExec exec, const xla_nodes *nd, xla_args *a)
{
    CUdeviceptr sum_at = a->out + N * 4;
    void *args[4][3];
    CUDA_KERNEL_NODE_PARAMS kp[4];
    CUDA_MEMSET_NODE_PARAMS mp = xla_memset(a);
    CUDA_MEMCPY3D cp = xla_copy(a);
    xla_kernels(a, &sum_at, args, kp);
    R(cuGraphExecMemsetNodeSetParams(exec, nd->set, &mp, ctx));
    R(cuGraphExecMemcpyNodeSetParams(exec, nd->copy, &cp, ctx));
    R(cuGraphExecKernelNodeSetParams(exec, nd->add, &kp[0]));
    R(cuGraphExecKernelNodeSetParams(exec, nd->mad1, &kp[1]));
    R(cuGraphExecKernelNodeSetParams(exec, nd->mad2, &kp[2]));
    R(cuGraphExecKernelNodeSetParams(exec, nd->sum, &kp[3]));
}

/* Executions k = 0..15 of one command buffer: 0 builds and instantiates g0;
 * odd ones set the exec node by node; k % 4 == 2 sets g0's nodes in place
 * and updates the exec from g0 (XLA's update of its own graph); k % 8 == 4
 * updates the exec from g0 unchanged since k - 2, so the exec must go back
 * from k - 1's operands to k - 2's (whose temporary was kept alive for it);
 * k % 8 == 0 (k > 0) rebuilds the graph and updates from the new one.
 * Without inplace (xla_rebuild) g0 is never set: those updates are from
 * rebuilt graphs too (k % 8 == 4 with k - 2's operands). */
static void xla_mode(int inplace)
{
    CUstream s;
    CUdeviceptr ins[2], outs[2], w;
    uint32_t h_in[2][N], hw[N], want[N];
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < 2; k++) {
        MUST(cuMemAlloc(&ins[k], N * 4));
        MUST(cuMemAlloc(&outs[k], N * 4 + 8));
    }
    MUST(cuMemAlloc(&w, N * 4));
    for (int i = 0; i < N; i++) hw[i] = (uint32_t)(i * 13 + 2);
    MUST(cuMemcpyHtoD(w, hw, sizeof hw));
    CUgraph g0;
    CUgraphExec exec = NULL;
    xla_nodes nd;
    xla_args g0_args = { 0 };
    CUdeviceptr kept = 0;           /* g0's temporary, kept for k % 8 == 4 */
    for (int k = 0; k < 16; k++) {
        xla_args a = { .w = w, .n = N };
        int back = k % 8 == 4;
        int pi = (k / 4) % 2;
        CUdeviceptr spacer = 0;
        if (back) {
            a = g0_args;
            pi = a.in == ins[1];
        } else {
            a.in = ins[pi];
            if (k % 3 == 2) R(cuMemAlloc(&spacer, N * 4 * (size_t)(k + 1)));
            MUST(cuMemAlloc(&a.tmp, N * 4));
            a.out = k == 5 ? outs[0] : outs[k % 2];
            a.c = 100u + (uint32_t)(k / 2);
        }
        for (int i = 0; i < N; i++) h_in[pi][i] = (uint32_t)(k * 4099 + i * 17);
        R(cuMemcpyHtoD(a.in, h_in[pi], N * 4));
        const char *how;
        if (k == 0) {
            how = "instantiated";
            xla_build(&g0, &a, &nd);
            MUST(cuGraphInstantiateWithFlags(&exec, g0, 0));
        } else if (k % 2) {
            how = "exec nodes set";
            xla_set_exec(exec, &nd, &a);
        } else if (inplace && (k % 4 == 2 || back)) {
            CUgraphExecUpdateResultInfo info;
            how = back ? "updated from the unchanged graph" : "graph set, updated from it";
            if (!back) xla_set_graph(&nd, &a);
            R(cuGraphExecUpdate(exec, g0, &info));
            if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                printf("execution %d: update result %d\n", k, (int)info.result);
        } else {
            CUgraph gk;
            xla_nodes nk;
            CUgraphExecUpdateResultInfo info;
            how = "updated from a rebuilt graph";
            xla_build(&gk, &a, &nk);
            R(cuGraphExecUpdate(exec, gk, &info));
            if (info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
                printf("execution %d: update result %d\n", k, (int)info.result);
            R(cuGraphDestroy(gk));
        }
        R(cuGraphLaunch(exec, s));
        R(cuStreamSynchronize(s));
        for (int i = 0; i < N; i++) want[i] = (h_in[pi][i] + a.c) * 3 + hw[i];
        char name[96];
        snprintf(name, sizeof name, "xla execution %d (%s): output", k, how);
        adv_check_words(name, a.out, want, N);
        snprintf(name, sizeof name, "xla execution %d: sum", k);
        check_u64(name, a.out + N * 4, host_sum(want, N));
        if (k == 0 || (k % 4 == 2 && !back)) {
            g0_args = a;            /* g0 holds these operands now */
            if (kept) R(cuMemFree(kept));
            kept = a.tmp;
        } else if (!back) {
            R(cuMemFree(a.tmp));
        }
        if (spacer) R(cuMemFree(spacer));
    }
    if (kept) R(cuMemFree(kept));
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g0));
    for (int k = 0; k < 2; k++) {
        R(cuMemFree(ins[k]));
        R(cuMemFree(outs[k]));
    }
    R(cuMemFree(w));
}

/* ------------------------------------------------------------------- nccl */
typedef struct vmm_buf {
    CUdeviceptr ptr;
    size_t size;
    CUmemGenericAllocationHandle h;
} vmm_buf;

static void vmm_alloc(vmm_buf *b, size_t bytes)
{
    CUmemAllocationProp prop;
    size_t gran = 0;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    MUST(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    b->size = (bytes + gran - 1) / gran * gran;
    MUST(cuMemCreate(&b->h, b->size, &prop, 0));
    MUST(cuMemAddressReserve(&b->ptr, b->size, 0, 0, 0));
    MUST(cuMemMap(b->ptr, b->size, 0, b->h, 0));
    CUmemAccessDesc ad = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    MUST(cuMemSetAccess(b->ptr, b->size, &ad, 1));
}

static void vmm_free(vmm_buf *b)
{
    R(cuMemUnmap(b->ptr, b->size));
    R(cuMemAddressFree(b->ptr, b->size));
    R(cuMemRelease(b->h));
}

static unsigned proxy_count, graph_count;

static void CUDA_CB proxy_cb(void *arg)
{
    __atomic_add_fetch((unsigned *)arg, 1, __ATOMIC_RELAXED);
}

/* Waits (no driver call) until *p == v, at most 5 s; 1 if it came. */
static int poll_word(volatile uint32_t *p, uint32_t v)
{
    for (int i = 0; i < 50000; i++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == v) return 1;
        adv_sleep_us(100);
    }
    return 0;
}

static void nccl_mode(void)
{
    CUstream s0, s1, sc;
    vmm_buf set[2][2], flags;       /* set[k][0] send, [1] recv (+ the sum at N * 4) */
    uint32_t *hflags;
    CUdeviceptr dflags;
    MUST(cuStreamCreate(&s0, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&sc, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) {
            vmm_alloc(&set[k][j], N * 4 + 64);
            MUST(cuMemsetD32(set[k][j].ptr, 0, N + 2));
        }
    vmm_alloc(&flags, 64);
    MUST(cuMemsetD32(flags.ptr, 0, 16));
    MUST(cuMemHostAlloc((void **)&hflags, 4096, CU_MEMHOSTALLOC_PORTABLE));
    memset(hflags, 0, 4096);
    MUST(cuMemHostGetDevicePointer(&dflags, hflags, 0));
    MUST(cuCtxSynchronize());
    volatile uint32_t *go = &hflags[0], *done = &hflags[16];

    /* An exec holding a captured host function (the proxy's progress). */
    CUgraph hg;
    CUgraphExec hexec;
    MUST(cuStreamBeginCapture(sc, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchHostFunc(sc, proxy_cb, &graph_count));
    MUST(cuStreamEndCapture(sc, &hg));
    MUST(cuGraphInstantiateWithFlags(&hexec, hg, 0));

    static uint32_t h_recv[2][N], h_send[N];
    memset(h_recv, 0, sizeof h_recv);
    static const int order[12] = { 0, 1, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0 };
    CUgraphExec exec = NULL;
    int hung = 0;
    for (int step = 0; step < 12 && !hung; step++) {
        int k = order[step];
        CUdeviceptr send = set[k][0].ptr, recv = set[k][1].ptr;
        uint32_t v = (uint32_t)step + 1;
        R(cuStreamWaitValue32(s0, dflags, v, CU_STREAM_WAIT_VALUE_GEQ));
        k_fill(s0, send, 1000u * v, N);
        R(cuStreamWriteValue32(s0, flags.ptr, v, 0));
        R(cuStreamWaitValue32(s1, flags.ptr, v, CU_STREAM_WAIT_VALUE_GEQ));
        CUgraph g;
        MUST(cuStreamBeginCapture(sc, CU_STREAM_CAPTURE_MODE_GLOBAL));
        k_mad(sc, send, recv, N);
        k_sum(sc, recv, N, recv + N * 4);
        MUST(cuStreamEndCapture(sc, &g));
        if (!exec) {
            MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            R(cuGraphExecUpdate(exec, g, &info));
        }
        R(cuGraphDestroy(g));
        R(cuGraphLaunch(exec, s1));
        R(cuLaunchHostFunc(s1, proxy_cb, &proxy_count));
        R(cuGraphLaunch(hexec, s1));
        R(cuStreamWriteValue32(s1, dflags + 16 * 4, v, 0));
        /* The proxy releases the step only now. */
        adv_sleep_us(1000);
        __atomic_store_n(go, v, __ATOMIC_RELEASE);
        if (!poll_word(done, v)) {
            adv_check("nccl step done", 0, "step %d not done after 5 s", step);
            hung = 1;
            break;
        }
        R(cuStreamSynchronize(s1));
        for (int i = 0; i < N; i++) {
            h_send[i] = 1000u * v + (uint32_t)i;
            h_recv[k][i] = h_recv[k][i] * 3 + h_send[i];
        }
        char name[64];
        snprintf(name, sizeof name, "nccl step %d (set %d): received", step, k);
        adv_check_words(name, recv, h_recv[k], N);
        snprintf(name, sizeof name, "nccl step %d: sum", step);
        check_u64(name, recv + N * 4, host_sum(h_recv[k], N));
        unsigned pc = __atomic_load_n(&proxy_count, __ATOMIC_RELAXED);
        unsigned gc = __atomic_load_n(&graph_count, __ATOMIC_RELAXED);
        snprintf(name, sizeof name, "nccl step %d: host functions", step);
        adv_check(name, pc == v && gc == v, "%u and %u", pc, gc);
    }
    if (hung) __atomic_store_n(go, 1000, __ATOMIC_RELEASE);
    R(cuCtxSynchronize());
    if (exec) R(cuGraphExecDestroy(exec));
    R(cuGraphExecDestroy(hexec));
    R(cuGraphDestroy(hg));
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 2; j++) vmm_free(&set[k][j]);
    vmm_free(&flags);
    R(cuMemFreeHost(hflags));
}

/* ------------------------------------------------------ torch_expandable */
#define SEG_PIECES 128

static void expandable_mode(void)
{
    CUstream s;
    CUmemAllocationProp prop;
    size_t gran = 0, fr = 0, total = 0;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    if (gran < 2 * MiB) gran = 2 * MiB;
    MUST(cuMemGetInfo(&fr, &total));

    /* Eager churn first: the caching allocator's blocks, stream-ordered ones. */
    CUdeviceptr blk[8], aa;
    for (int i = 0; i < 8; i++) {
        MUST(cuMemAlloc(&blk[i], 16 * MiB));
        k_fill(s, blk[i], (uint32_t)i, 1024);
    }
    MUST(cuMemAllocAsync(&aa, 64 * MiB, s));
    k_fill(s, aa, 9, 1024);
    R(cuMemFreeAsync(aa, s));
    MUST(cuStreamSynchronize(s));
    for (int i = 0; i < 8; i++) R(cuMemFree(blk[i]));

    /* The expandable segment: one reservation, grown a piece at a time to
     * what cuMemGetInfo reported free at the start, less 8 MiB. */
    size_t want = fr > 16 * MiB ? (fr - 8 * MiB) / gran : 1;
    if (want > SEG_PIECES) want = SEG_PIECES;
    CUdeviceptr seg;
    CUmemGenericAllocationHandle h[SEG_PIECES];
    MUST(cuMemAddressReserve(&seg, SEG_PIECES * gran, 0, 0, 0));
    CUmemAccessDesc ad = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    size_t got = 0;
    while (got < want) {
        if (R(cuMemCreate(&h[got], gran, &prop, 0)) != CUDA_SUCCESS) break;
        if (R(cuMemMap(seg + got * gran, gran, 0, h[got], 0)) != CUDA_SUCCESS ||
            R(cuMemSetAccess(seg + got * gran, gran, &ad, 1)) != CUDA_SUCCESS) {
            R(cuMemRelease(h[got]));
            break;
        }
        got++;
    }
    adv_check("expandable segment grown to the free memory less 8 MiB", got == want, "%s",
              got == want ? "every piece mapped" : "a piece refused");

    /* A graph over the segment (its first and last pieces), replayed. */
    CUdeviceptr lo = seg, hi = seg + (got ? got - 1 : 0) * gran;
    uint64_t n = N;
    static uint32_t h_lo[N], h_hi[N];
    CUgraph g;
    CUgraphExec e;
    MUST(cuMemsetD32(lo, 0, N));
    MUST(cuMemsetD32(hi, 0, N));
    MUST(cuCtxSynchronize());
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    k_add(s, lo, 5, n);
    k_mad(s, lo, hi, n);
    MUST(cuStreamEndCapture(s, &g));
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    memset(h_lo, 0, sizeof h_lo);
    memset(h_hi, 0, sizeof h_hi);
    for (int r = 0; r < 3; r++) {
        R(cuGraphLaunch(e, s));
        for (int i = 0; i < N; i++) {
            h_lo[i] += 5;
            h_hi[i] = h_hi[i] * 3 + h_lo[i];
        }
    }
    R(cuStreamSynchronize(s));
    adv_check_words("expandable segment: the graph's result", hi, h_hi, N);

    /* empty_cache: the segment shrinks to one piece; a big block then. */
    for (size_t i = got; i-- > 1;) {
        R(cuMemUnmap(seg + i * gran, gran));
        R(cuMemRelease(h[i]));
    }
    CUdeviceptr big = 0;
    size_t big_bytes = got > 8 ? (got - 8) * gran : gran;
    CUresult br = R(cuMemAlloc(&big, big_bytes));
    adv_check("a block of the memory the segment gave back", br == CUDA_SUCCESS, "%s",
              br == CUDA_SUCCESS ? "allocated" : "refused");
    if (big) {
        R(cuMemsetD32(big + big_bytes - 4 * N, 7, N));
        R(cuMemFree(big));
    }
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
    if (got) {
        R(cuMemUnmap(seg, gran));
        R(cuMemRelease(h[0]));
    }
    R(cuMemAddressFree(seg, SEG_PIECES * gran));
}

/* ------------------------------------------------------------------ stats */
typedef struct pool_stats {
    cuuint64_t used, reserved, used_high, reserved_high;
} pool_stats;

static pool_stats stats_of(CUmemoryPool pool)
{
    pool_stats st = { 0 };
    R(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &st.used));
    R(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &st.reserved));
    R(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &st.used_high));
    R(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &st.reserved_high));
    return st;
}

/* 1 if v - base lies in [want, want + slack]. */
static int within(cuuint64_t v, cuuint64_t base, size_t want, size_t slack)
{
    return v >= base && v - base >= want && v - base <= want + slack;
}

static void stats_mode(void)
{
    CUstream s;
    CUmemoryPool pool;
    CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    cuuint64_t zero = 0;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemGetMemPool(&pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
    /* PyTorch's backend keeps freed memory in the pool (its figures of
     * reserved memory after frees then differ with the library: not asserted) */
    cuuint64_t keep = ~0ull;
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    pool_stats st0 = stats_of(pool);

    /* An eager step: stream-ordered tensors, one from the pool by handle. */
    static const size_t sizes[4] = { MiB + 1000, 2 * MiB + 24, 3 * MiB, 512 * 1024 };
    CUdeviceptr p[4];
    size_t sum = 0;
    for (int i = 0; i < 4; i++) {
        if (i == 3) MUST(cuMemAllocFromPoolAsync(&p[i], sizes[i], pool, s));
        else MUST(cuMemAllocAsync(&p[i], sizes[i], s));
        k_fill(s, p[i], (uint32_t)i, 1024);
        sum += sizes[i];
    }
    MUST(cuStreamSynchronize(s));
    pool_stats st1 = stats_of(pool);
    size_t slack = 4 * 2 * MiB;    /* a driver may round each block up */
    adv_check("stats: memory in use counts the step's tensors", within(st1.used, st0.used, sum, slack),
              "%s", within(st1.used, st0.used, sum, slack) ? "yes" : "no");
    adv_check("stats: reserved at least in use", st1.reserved >= st1.used, "%s",
              st1.reserved >= st1.used ? "yes" : "no");
    adv_check("stats: peak in use at least in use", st1.used_high >= st1.used, "%s",
              st1.used_high >= st1.used ? "yes" : "no");
    adv_check("stats: peak reserved at least reserved", st1.reserved_high >= st1.reserved, "%s",
              st1.reserved_high >= st1.reserved ? "yes" : "no");
    for (int i = 0; i < 4; i++) R(cuMemFreeAsync(p[i], s));
    MUST(cuStreamSynchronize(s));
    pool_stats st2 = stats_of(pool);
    adv_check("stats: in use back to the start after the frees", st2.used == st0.used, "%s",
              st2.used == st0.used ? "yes" : "no");
    adv_check("stats: the peak kept after the frees", st2.used_high == st1.used_high, "%s",
              st2.used_high == st1.used_high ? "yes" : "no");

    /* A memory profile (vLLM's, through torch.cuda.max_memory_allocated with
     * the cudaMallocAsync backend): peaks reset, a dummy run, the peak read. */
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    pool_stats st3 = stats_of(pool);
    adv_check("stats: the peak reset to what is in use", st3.used_high == st3.used, "%s",
              st3.used_high == st3.used ? "yes" : "no");
    CUdeviceptr a, b, c;
    MUST(cuMemAllocAsync(&a, 4 * MiB, s));
    MUST(cuMemAllocAsync(&b, 6 * MiB, s));
    R(cuMemFreeAsync(a, s));
    MUST(cuMemAllocAsync(&c, 2 * MiB, s));
    k_fill(s, b, 1, 1024);
    k_fill(s, c, 2, 1024);
    R(cuMemFreeAsync(b, s));
    R(cuMemFreeAsync(c, s));
    MUST(cuStreamSynchronize(s));
    pool_stats st4 = stats_of(pool);
    adv_check("stats: the dummy run's peak (10 MiB at once)",
              within(st4.used_high, st3.used, 10 * MiB, 3 * 2 * MiB), "%s",
              within(st4.used_high, st3.used, 10 * MiB, 3 * 2 * MiB) ? "10 to 16 MiB" : "not");
    adv_check("stats: the dummy run's reserved peak at least its peak",
              st4.reserved_high >= st4.used_high, "%s",
              st4.reserved_high >= st4.used_high ? "yes" : "no");
    adv_check("stats: in use back to the start after the dummy run", st4.used == st0.used, "%s",
              st4.used == st0.used ? "yes" : "no");
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "torch", "vllm", "xla", "nccl", "vllm_tight", "xla_rebuild",
                                         "stats", "torch_expandable", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    MUST(cuCtxGetDevice(&dev));
    f_fill = adv_fn(mod, "fill_u32");
    f_add = adv_fn(mod, "add_u32");
    f_mad = adv_fn(mod, "mad_u32");
    f_sum = adv_fn(mod, "sum_u32");
    switch (c) {
    case 0: torch_mode(); break;
    case 1: vllm_mode(0); break;
    case 2: xla_mode(1); break;
    case 3: nccl_mode(); break;
    case 4: vllm_mode(1); break;
    case 5: xla_mode(0); break;
    case 6: stats_mode(); break;
    case 7: expandable_mode(); break;
    }
    return adv_finish();
}
