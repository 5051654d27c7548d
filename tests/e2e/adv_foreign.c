/*
 * adv_foreign.c: memory the library did not allocate, inside captured
 * graphs (round 41, tests/e2e/test_correctness.sh). Managed memory, pinned
 * and registered host memory (through its device pointer, and a host
 * pointer under unified addressing), the program's own VMM mappings, and a
 * cuMemAlloc block too large to be placed (STABLEGRAPH_PLACE_MAX_BYTES),
 * beside the placed temporaries of each step. Every result is checked on
 * the host; every CUresult and result info is printed.
 *
 * Cases:
 *   freed_<kind>  kind: managed, hostalloc, allochost, hostreg, unified,
 *                 vmm, big. A chain memset(f) -> mad(in, t) -> copy(out =
 *                 f) over the foreign buffer f and a placed temporary t,
 *                 instantiated and launched; then f is freed (cuMemFree,
 *                 cuMemFreeHost, cuMemHostUnregister, cuMemUnmap) and the
 *                 exec updated from its own graph (identical: skippable,
 *                 were it not for the freed operand; the driver refuses
 *                 it), an exec memset setter naming f with the parameters
 *                 the exec holds (the driver refuses it), then a new f
 *                 allocated, a graph over it built, the exec updated and
 *                 launched (accepted).
 *   rotate        re-captured each step: the chain's pointers change only
 *                 in foreign memory (three managed inputs in turn, a pinned
 *                 output), beside a placed temporary; updated and launched.
 *   remap         a VMM range of two granules remapped between launches (as
 *                 expandable segments do): new physical memory at the same
 *                 address (identical updates: accepted), a mapping one
 *                 granule long (the memset across the boundary runs past
 *                 it: refused), two mappings side by side (one buffer to
 *                 the driver: accepted).
 *   async         a block of the default pool (cuMemAllocFromPoolAsync, never
 *                 placed) freed by cuMemFreeAsync, the exec updated from its
 *                 own graph (refused), then over a new block (accepted).
 *   variants      an exec fed by three placed inputs in turn (exec variants
 *                 under skip_profiled) whose memset and copy name managed
 *                 memory, freed at step 34 under the step's graph.
 *   oom           (CUDAEMU_DEVICE_MEMORY=256M) 160 MiB of placed blocks freed,
 *                 then 200 MiB the library does not place: managed, the
 *                 program's VMM, the default pool, a large cuMemAlloc.
 *   hole          two created contexts' placed blocks end with them (their
 *                 reservations given back), then freed_<kind> for every kind:
 *                 the program's memory may lie where a reservation was.
 *   ctxgone       the foreign operand is managed or pinned memory of another
 *                 context, destroyed (with its memory) while the exec lives.
 *   hints         managed memory with cuMemAdvise, cuStreamAttachMemAsync and
 *                 cuMemPrefetchAsync around re-captured graphs; the same
 *                 hints on placed memory and during a capture.
 *
 * Usage: adv_foreign CASE
 */
#include "adv_common.h"

#define N 256u                  /* words per buffer */

static CUcontext ctx;
static CUmodule mod;
static CUfunction mad;
static CUstream st;
static CUdeviceptr in, out;
static uint32_t hin[N];

typedef enum { K_MANAGED, K_HOSTALLOC, K_ALLOCHOST, K_HOSTREG, K_UNIFIED, K_VMM, K_BIG, K_NKINDS } kind;
static const char *const kind_names[] = { "managed", "hostalloc", "allochost", "hostreg", "unified", "vmm",
                                          "big" };

/* A foreign buffer: its device address and what frees it. */
typedef struct foreign {
    kind k;
    CUdeviceptr d;
    void *host;                 /* host side (host kinds) */
    CUdeviceptr resv;           /* K_VMM: the reservation */
    CUmemGenericAllocationHandle h;
    size_t bytes;
} foreign;

static size_t granularity(void)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t g = 0;
    MUST(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return g;
}

/* A physical allocation of `bytes` mapped read-write at va. */
static CUmemGenericAllocationHandle vmm_map(CUdeviceptr va, size_t bytes)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    MUST(cuMemCreate(&h, bytes, &prop, 0));
    MUST(cuMemMap(va, bytes, 0, h, 0));
    CUmemAccessDesc a = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    MUST(cuMemSetAccess(va, bytes, &a, 1));
    return h;
}

#define BIG_BYTES (8u << 20)    /* above the PLACE_MAX_BYTES the case sets */

static foreign foreign_alloc(kind k)
{
    foreign f = { .k = k, .bytes = N * 4 };
    switch (k) {
    case K_MANAGED:
        MUST(cuMemAllocManaged(&f.d, f.bytes, CU_MEM_ATTACH_GLOBAL));
        break;
    case K_HOSTALLOC:
        MUST(cuMemHostAlloc(&f.host, f.bytes, CU_MEMHOSTALLOC_DEVICEMAP));
        MUST(cuMemHostGetDevicePointer(&f.d, f.host, 0));
        break;
    case K_ALLOCHOST:
        MUST(cuMemAllocHost(&f.host, f.bytes));
        MUST(cuMemHostGetDevicePointer(&f.d, f.host, 0));
        break;
    case K_HOSTREG:
    case K_UNIFIED:
        f.host = aligned_alloc(4096, 4096);
        if (!f.host) exit(2);
        MUST(cuMemHostRegister(f.host, 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
        if (k == K_HOSTREG) MUST(cuMemHostGetDevicePointer(&f.d, f.host, 0));
        else f.d = (CUdeviceptr)(uintptr_t)f.host;      /* unified addressing */
        break;
    case K_VMM:
        f.bytes = granularity();
        MUST(cuMemAddressReserve(&f.resv, f.bytes, 0, 0, 0));
        f.h = vmm_map(f.resv, f.bytes);
        f.d = f.resv;
        break;
    case K_BIG:
        f.bytes = BIG_BYTES;
        MUST(cuMemAlloc(&f.d, f.bytes));
        break;
    default:
        exit(4);
    }
    return f;
}

static void foreign_free(foreign *f)
{
    switch (f->k) {
    case K_MANAGED:
    case K_BIG:
        MUST(cuMemFree(f->d));
        break;
    case K_HOSTALLOC:
    case K_ALLOCHOST:
        MUST(cuMemFreeHost(f->host));
        break;
    case K_HOSTREG:
    case K_UNIFIED:
        MUST(cuMemHostUnregister(f->host));
        free(f->host);
        break;
    case K_VMM:
        MUST(cuMemUnmap(f->resv, f->bytes));
        MUST(cuMemRelease(f->h));
        MUST(cuMemAddressFree(f->resv, f->bytes));
        break;
    default:
        exit(4);
    }
}

/* The memset node's parameters: N words of v at d. */
static CUDA_MEMSET_NODE_PARAMS memset_of(CUdeviceptr d, uint32_t v)
{
    CUDA_MEMSET_NODE_PARAMS m = { .dst = d, .pitch = N * 4, .value = v, .elementSize = 4, .width = N,
                                  .height = 1 };
    return m;
}

/* The copy node's parameters (out = N words at src), src as a device
 * pointer, or as a host pointer under unified addressing where unified. */
static CUDA_MEMCPY3D copy_from(CUdeviceptr src, int unified)
{
    CUDA_MEMCPY3D c = adv_copy_1d(out, src, N * 4);
    if (unified) c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    return c;
}

/* Captures memset(f = v) -> mad(in, t) -> copy(out = f) on st; *nodes its
 * nodes (chain order). */
static CUgraph capture_chain(CUdeviceptr f, int unified, CUdeviceptr t, uint32_t v, CUgraphNode *nodes)
{
    CUgraph g;
    uint64_t n = N;
    MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuMemsetD32Async(f, v, N, st));
    void *args[] = { &in, &t, &n };
    MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
    if (unified) MUST(cuMemcpyAsync(out, f, N * 4, st));
    else MUST(cuMemcpyDtoDAsync(out, f, N * 4, st));
    MUST(cuStreamEndCapture(st, &g));
    if (nodes) adv_chain_nodes(g, nodes, 3);
    return g;
}

/* The same chain built node by node (the library knows every handle, so
 * its exec setters are compared on the record). */
static CUgraph build_chain(CUdeviceptr f, int unified, CUdeviceptr t, uint32_t v, CUgraphNode *nodes)
{
    CUgraph g;
    uint64_t n = N;
    MUST(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = memset_of(f, v);
    MUST(cuGraphAddMemsetNode(&nodes[0], g, NULL, 0, &m, ctx));
    void *args[] = { &in, &t, &n };
    nodes[1] = adv_add_kernel(g, &nodes[0], 1, mad, args);
    CUDA_MEMCPY3D c = copy_from(f, unified);
    MUST(cuGraphAddMemcpyNode(&nodes[2], g, &nodes[1], 1, &c, ctx));
    return g;
}

/* Launches e and checks out == v everywhere. */
static void run_check(CUgraphExec e, uint32_t v, const char *what)
{
    if (R(cuGraphLaunch(e, st)) != CUDA_SUCCESS) return;
    MUST(cuStreamSynchronize(st));
    uint32_t want[N];
    for (unsigned i = 0; i < N; i++) want[i] = v;
    char name[96];
    snprintf(name, sizeof name, "%s out", what);
    adv_check_words(name, out, want, N);
}

static void print_info(const char *what, CUresult r, const CUgraphExecUpdateResultInfo *info,
                       const CUgraphNode *nodes)
{
    int en = -1, ef = -1;
    for (int i = 0; i < 3; i++) {
        if (info->errorNode == nodes[i]) en = i;
        if (info->errorFromNode == nodes[i]) ef = i;
    }
    printf("%s: %s result %d errorNode %d errorFromNode %d\n", what, adv_err(r), (int)info->result,
           info->errorNode ? en : -9, info->errorFromNode ? ef : -9);
}

/* cuGraphExecUpdate_v2(e, g), its CUresult and result info printed under
 * the name fmt makes, also left in what (WHAT bytes; nodes as indices in
 * nd). Returns the CUresult. */
#define WHAT 96
static CUresult __attribute__((format(printf, 5, 6)))
update_as(CUgraphExec e, CUgraph g, const CUgraphNode *nd, char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, WHAT, fmt, ap);
    va_end(ap);
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult r = R(cuGraphExecUpdate_v2(e, g, &info));
    print_info(what, r, &info, nd);
    return r;
}

/* The end of a round: e updated from g2, a graph over the live foreign
 * buffer f2 (accepted), launched and checked against v; then e, g, g2 and
 * f2 go. */
static void new_buffer_end(CUgraphExec e, CUgraph g, CUgraph g2, foreign *f2, uint32_t v,
                           const CUgraphNode *nd, const char *name)
{
    char what[WHAT];
    update_as(e, g2, nd, what, "%s: new buffer", name);
    run_check(e, v, what);
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuGraphDestroy(g2));
    foreign_free(f2);
}

/* ---------------------------------------------------------------- freed */

static void freed(kind k)
{
    int unified = k == K_UNIFIED;
    for (int round = 0; round < 3; round++) {
        CUdeviceptr t;
        CUgraphNode nd[3];
        char what[WHAT];
        foreign f = foreign_alloc(k);
        MUST(cuMemAlloc(&t, N * 4));                      /* placed */
        /* rounds 0 and 1 captured, round 2 built node by node */
        CUgraph g = round < 2 ? capture_chain(f.d, unified, t, 5 + round, nd)
                              : build_chain(f.d, unified, t, 5 + round, nd);
        CUgraphExec e;
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        snprintf(what, sizeof what, "%s round %d: instantiated", kind_names[k], round);
        run_check(e, 5 + round, what);
        /* an identical update first (skippable: f is live) */
        update_as(e, g, nd, what, "%s round %d: identical, live", kind_names[k], round);
        run_check(e, 5 + round, what);
        /* f freed: the exec's own graph again, then a setter with what the
         * exec holds (round 1 only), both naming the freed operand */
        foreign_free(&f);
        update_as(e, g, nd, what, "%s round %d: identical, operand freed", kind_names[k], round);
        if (round >= 1) {
            CUDA_MEMSET_NODE_PARAMS m = memset_of(f.d, 5 + round);
            CUresult r = R(cuGraphExecMemsetNodeSetParams(e, nd[0], &m, ctx));
            printf("%s round %d: memset setter, freed operand: %s\n", kind_names[k], round, adv_err(r));
            CUDA_MEMCPY3D c = copy_from(f.d, unified);
            r = R(cuGraphExecMemcpyNodeSetParams(e, nd[2], &c, ctx));
            printf("%s round %d: memcpy setter, freed operand: %s\n", kind_names[k], round, adv_err(r));
        }
        /* a live buffer again: a new graph over it, accepted */
        foreign f2 = foreign_alloc(k);
        CUgraphNode nd2[3];
        CUgraph g2 = round < 2 ? capture_chain(f2.d, unified, t, 9 + round, NULL)
                               : build_chain(f2.d, unified, t, 9 + round, nd2);
        snprintf(what, sizeof what, "%s round %d", kind_names[k], round);
        new_buffer_end(e, g, g2, &f2, 9 + round, nd, what);
        MUST(cuMemFree(t));
    }
}

/* --------------------------------------------------------------- rotate */

/* Re-captured each step: copy t <- src[k % 3] (managed), mad(in, t), copy
 * out <- t, and a copy of t to pinned host memory (through its device
 * pointer on odd steps, as a host pointer under unified addressing on even
 * ones); the pointers change between steps only in foreign memory. Every
 * fourth step one managed source is freed and allocated again (the driver
 * may give the same address: an update naming it is then accepted). */
static void rotate(void)
{
    CUdeviceptr src[3], t, hd;
    uint32_t hsrc[3][N];
    void *host;
    MUST(cuMemHostAlloc(&host, N * 4, CU_MEMHOSTALLOC_DEVICEMAP));
    MUST(cuMemHostGetDevicePointer(&hd, host, 0));
    for (int j = 0; j < 3; j++) {
        MUST(cuMemAllocManaged(&src[j], N * 4, CU_MEM_ATTACH_GLOBAL));
        for (unsigned i = 0; i < N; i++) hsrc[j][i] = (uint32_t)(j * 1000 + i);
        memcpy((void *)(uintptr_t)src[j], hsrc[j], N * 4);      /* managed: host-accessible */
    }
    CUgraphExec e = NULL;
    uint64_t n = N;
    for (int k = 0; k < 24; k++) {
        int j = k % 3;
        if (k % 4 == 3) {
            int r = (k / 4) % 3;
            MUST(cuMemFree(src[r]));
            MUST(cuMemAllocManaged(&src[r], N * 4, CU_MEM_ATTACH_GLOBAL));
            for (unsigned i = 0; i < N; i++) hsrc[r][i] = (uint32_t)(r * 1000 + i + k);
            memcpy((void *)(uintptr_t)src[r], hsrc[r], N * 4);
        }
        MUST(cuMemAlloc(&t, N * 4));                      /* placed */
        CUgraph g;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemcpyDtoDAsync(t, src[j], N * 4, st));
        void *args[] = { &in, &t, &n };
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
        MUST(cuMemcpyDtoDAsync(out, t, N * 4, st));
        if (k % 2) MUST(cuMemcpyDtoDAsync(hd, t, N * 4, st));
        else MUST(cuMemcpyAsync((CUdeviceptr)(uintptr_t)host, t, N * 4, st));
        MUST(cuStreamEndCapture(st, &g));
        if (!e) {
            MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        } else {
            CUgraphExecUpdateResultInfo info;
            if (R(cuGraphExecUpdate_v2(e, g, &info)) != CUDA_SUCCESS) {
                printf("step %d: update refused, result %d\n", k, (int)info.result);
                MUST(cuGraphExecDestroy(e));
                MUST(cuGraphInstantiateWithFlags(&e, g, 0));
            }
        }
        MUST(cuGraphDestroy(g));
        MUST(cuGraphLaunch(e, st));
        MUST(cuStreamSynchronize(st));
        uint32_t want[N];
        for (unsigned i = 0; i < N; i++) want[i] = hsrc[j][i] * 3u + hin[i];
        char name[64];
        snprintf(name, sizeof name, "rotate step %d out", k);
        adv_check_words(name, out, want, N);
        snprintf(name, sizeof name, "rotate step %d pinned", k);
        adv_check(name, memcmp(host, want, N * 4) == 0, "%u words", N);
        MUST(cuMemFree(t));
    }
    MUST(cuGraphExecDestroy(e));
    for (int j = 0; j < 3; j++) MUST(cuMemFree(src[j]));
    MUST(cuMemFreeHost(host));
}

/* ---------------------------------------------------------------- remap */

/* A VMM range of two granules, the chain's operand 512 bytes before their
 * boundary (its 1 KiB memset spans both). Between launches the range is
 * unmapped and mapped again, as expandable segments do: one allocation of
 * two granules, another of two (new physical memory at the same address:
 * the identical update is accepted), one granule only (the memset runs
 * past the mapping: refused), then a second granule mapped beside it (two
 * mappings side by side are one buffer to the driver: accepted). */
static void remap(void)
{
    size_t gr = granularity();
    CUdeviceptr va, t;
    MUST(cuMemAddressReserve(&va, 2 * gr, 0, 0, 0));
    CUdeviceptr f = va + gr - 512;
    MUST(cuMemAlloc(&t, N * 4));                          /* placed */
    CUmemGenericAllocationHandle h[2] = { vmm_map(va, 2 * gr), 0 };
    CUgraphNode nd[3];
    CUgraph g = capture_chain(f, 0, t, 3, nd);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    run_check(e, 3, "remap mapped");
    int layout = 0;
    for (int phase = 0; phase < 4; phase++) {
        /* unmap (the launch above was synchronized), then map anew;
         * layout: 0 one mapping of two granules, 1 one of a granule, 2 two
         * of a granule side by side */
        MUST(cuMemUnmap(va, layout ? gr : 2 * gr));
        if (layout == 2) MUST(cuMemUnmap(va + gr, gr));
        MUST(cuMemRelease(h[0]));
        if (layout == 2) MUST(cuMemRelease(h[1]));
        layout = phase == 2 ? 1 : phase == 3 ? 2 : 0;
        h[0] = vmm_map(va, layout ? gr : 2 * gr);
        if (layout == 2) h[1] = vmm_map(va + gr, gr);
        /* the same graph, and a graph captured again over the same address
         * (not in phase 2: the capture of a memset past the mapping fails) */
        for (int again = 0; again < (phase == 2 ? 1 : 2); again++) {
            CUgraph g2 = again ? capture_chain(f, 0, t, 3, NULL) : g;
            char what[WHAT];
            update_as(e, g2, nd, what, "remap phase %d%s", phase, again ? " recaptured" : "");
            if (again) MUST(cuGraphDestroy(g2));
            if (phase != 2) run_check(e, 3, what);
        }
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuMemUnmap(va, gr));
    MUST(cuMemUnmap(va + gr, gr));
    MUST(cuMemRelease(h[0]));
    MUST(cuMemRelease(h[1]));
    MUST(cuMemAddressFree(va, 2 * gr));
    MUST(cuMemFree(t));
}

/* ---------------------------------------------------------------- async */

/* A block from the device's default pool by cuMemAllocFromPoolAsync (never
 * placed) as the chain's operand, freed by cuMemFreeAsync (it ends when the
 * stream reaches the free, at no call the library sees), then the exec
 * updated from its own graph (refused), then from a graph over a new
 * block (accepted). */
static void async(void)
{
    CUmemoryPool pool;
    CUdevice dev;
    MUST(cuCtxGetDevice(&dev));
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    CUdeviceptr t, f, f2;
    MUST(cuMemAlloc(&t, N * 4));
    MUST(cuMemAllocFromPoolAsync(&f, N * 4, pool, st));
    CUgraphNode nd[3];
    CUgraph g = capture_chain(f, 0, t, 4, nd);
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    run_check(e, 4, "async live");
    for (int k = 0; k < 3; k++) {
        char what[WHAT];
        update_as(e, g, nd, what, "async %d: identical, live", k);
        MUST(cuMemFreeAsync(f, st));
        MUST(cuStreamSynchronize(st));
        update_as(e, g, nd, what, "async %d: identical, freed", k);
        MUST(cuMemAllocFromPoolAsync(&f2, N * 4, pool, st));
        CUgraph g2 = capture_chain(f2, 0, t, 5 + k, NULL);
        update_as(e, g2, nd, what, "async %d: new block", k);
        run_check(e, 5 + k, what);
        MUST(cuGraphDestroy(g));
        g = g2;
        f = f2;
    }
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuMemFreeAsync(f, st));
    MUST(cuStreamSynchronize(st));
    MUST(cuMemFree(t));
}

/* ---------------------------------------------------------------- hints */

/* Managed memory with its hints around re-captured graphs: advice on the
 * inputs, stream attachment, prefetches to the device before each launch
 * and to the host after; each step captures copy t <- m[k % 2] (managed),
 * mad(in, t), copy m[2] <- t (managed), with t placed; the host reads m[2]
 * directly. The same hints on placed memory and on a capturing stream get
 * what the driver answers without the library. */
static void hints(void)
{
    CUdeviceptr m[3], t;
    CUmemLocation dev0 = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
    for (int j = 0; j < 3; j++) {
        MUST(cuMemAllocManaged(&m[j], N * 4, CU_MEM_ATTACH_GLOBAL));
        uint32_t *h = (uint32_t *)(uintptr_t)m[j];
        for (unsigned i = 0; i < N; i++) h[i] = (uint32_t)(j * 77 + i);
        MUST(cuMemAdvise(m[j], N * 4, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev0));
        MUST(cuStreamAttachMemAsync(st, m[j], 0, CU_MEM_ATTACH_SINGLE));
    }
    MUST(cuMemAdvise(m[0], N * 4, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
    CUgraphExec e = NULL;
    uint64_t n = N;
    for (int k = 0; k < 12; k++) {
        MUST(cuMemAlloc(&t, N * 4));                      /* placed */
        /* hints on placed memory: not managed memory, to the driver as to the library */
        R(cuMemPrefetchAsync(t, N * 4, dev0, 0, st));
        R(cuMemAdvise(t, N * 4, CU_MEM_ADVISE_SET_ACCESSED_BY, dev0));
        R(cuStreamAttachMemAsync(st, t, 0, CU_MEM_ATTACH_GLOBAL));
        MUST(cuMemPrefetchAsync(m[k % 2], N * 4, dev0, 0, st));
        CUgraph g;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemcpyDtoDAsync(t, m[k % 2], N * 4, st));
        if (k % 4 == 1) R(cuMemPrefetchAsync(m[2], N * 4, dev0, 0, st));   /* during the capture */
        void *args[] = { &in, &t, &n };
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
        MUST(cuMemcpyDtoDAsync(m[2], t, N * 4, st));
        MUST(cuStreamEndCapture(st, &g));
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else adv_update(e, g);
        MUST(cuGraphDestroy(g));
        MUST(cuGraphLaunch(e, st));
        MUST(cuMemPrefetchAsync(m[2], N * 4, host, 0, st));
        MUST(cuStreamSynchronize(st));
        const uint32_t *src = (const uint32_t *)(uintptr_t)m[k % 2], *got = (const uint32_t *)(uintptr_t)m[2];
        unsigned bad = 0;
        for (unsigned i = 0; i < N; i++) bad += got[i] != src[i] * 3u + hin[i];
        char name[64];
        snprintf(name, sizeof name, "hints step %d", k);
        adv_check(name, bad == 0, "%u of %u words wrong", bad, N);
        MUST(cuMemFree(t));
    }
    MUST(cuGraphExecDestroy(e));
    for (int j = 0; j < 3; j++) MUST(cuMemFree(m[j]));
}

/* --------------------------------------------------------------- ctxgone */

/* The chain's foreign operand is managed memory (round 0) or pinned host
 * memory (round 1) of another context, which is destroyed, freeing it,
 * while the exec (of the primary context) lives: the exec updated from its
 * own graph (refused), then over a live VMM buffer (accepted). */
static void ctxgone(void)
{
    CUdevice dev;
    MUST(cuCtxGetDevice(&dev));
    CUdeviceptr t;
    MUST(cuMemAlloc(&t, N * 4));                          /* placed */
    for (int round = 0; round < 2; round++) {
        CUcontext c2;
        CUdeviceptr f;
        void *host = NULL;
        MUST(cuCtxCreate(&c2, NULL, 0, dev));
        if (round == 0) {
            MUST(cuMemAllocManaged(&f, N * 4, CU_MEM_ATTACH_GLOBAL));
        } else {
            MUST(cuMemHostAlloc(&host, N * 4, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
            MUST(cuMemHostGetDevicePointer(&f, host, 0));
        }
        MUST(cuCtxSetCurrent(ctx));
        CUgraphNode nd[3];
        CUgraph g = capture_chain(f, 0, t, 21 + round, nd);
        CUgraphExec e;
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        char what[WHAT];
        snprintf(what, sizeof what, "ctxgone %d: live", round);
        run_check(e, 21 + round, what);
        update_as(e, g, nd, what, "ctxgone %d: live", round);
        MUST(cuCtxDestroy(c2));                           /* its memory goes with it */
        MUST(cuCtxSetCurrent(ctx));
        update_as(e, g, nd, what, "ctxgone %d: context destroyed", round);
        /* (a VMM mapping: the memory of no context, which an update may
         * name in place of another context's memory) */
        foreign f2 = foreign_alloc(K_VMM);
        CUgraph g2 = capture_chain(f2.d, 0, t, 23 + round, NULL);
        snprintf(what, sizeof what, "ctxgone %d", round);
        new_buffer_end(e, g, g2, &f2, 23 + round, nd, what);
    }
    MUST(cuMemFree(t));
}

/* ------------------------------------------------------------- variants */

/* An exec fed by three placed inputs in turn (re-captured each step: exec
 * variants under skip_profiled) whose chain also sets and copies out a
 * managed buffer f: memset(f = 7) -> mad(x[k % 3], t) -> copy(out = f).
 * At step 34 f is freed: the step's graph, captured before the free, names
 * it (refused: the exec keeps what it held); a new f follows and the
 * rotation goes on. */
static void variants(void)
{
    CUdeviceptr x[3], t, f;
    uint64_t n = N;
    for (int j = 0; j < 3; j++) {
        MUST(cuMemAlloc(&x[j], N * 4));
        MUST(cuMemsetD32(x[j], (unsigned)j + 1, N));
    }
    MUST(cuMemAlloc(&t, N * 4));
    MUST(cuMemAllocManaged(&f, N * 4, CU_MEM_ATTACH_GLOBAL));
    CUgraphExec e = NULL;
    uint32_t held = 0;                  /* the value the exec's memset holds */
    for (int k = 0; k < 40; k++) {
        uint32_t v = k <= 34 ? 7 : 9;
        CUgraph g;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemsetD32Async(f, v, N, st));
        void *args[] = { &x[k % 3], &t, &n };
        MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
        MUST(cuMemcpyDtoDAsync(out, f, N * 4, st));
        MUST(cuStreamEndCapture(st, &g));
        if (k == 34) {
            CUdeviceptr old = f;
            MUST(cuMemAllocManaged(&f, N * 4, CU_MEM_ATTACH_GLOBAL));       /* elsewhere */
            MUST(cuMemFree(old));
        }
        if (!e) {
            MUST(cuGraphInstantiateWithFlags(&e, g, 0));
            held = v;
        } else {
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            CUresult r = R(cuGraphExecUpdate_v2(e, g, &info));
            if (r == CUDA_SUCCESS) held = v;
            else printf("variants step %d: %s result %d\n", k, adv_err(r), (int)info.result);
        }
        MUST(cuGraphDestroy(g));
        if (k == 34) continue;          /* the exec holds the freed block: not launched */
        char what[48];
        snprintf(what, sizeof what, "variants step %d", k);
        run_check(e, held, what);
    }
    MUST(cuGraphExecDestroy(e));
    for (int j = 0; j < 3; j++) MUST(cuMemFree(x[j]));
    MUST(cuMemFree(t));
    MUST(cuMemFree(f));
}

/* ------------------------------------------------------------------ oom */

/* Run with CUDAEMU_DEVICE_MEMORY=256M. 160 MiB of placed blocks used by a
 * captured graph and freed (the library may keep their chunks mapped);
 * then memory the library does not place, 200 MiB each, in turn: managed,
 * a VMM allocation mapped by the program, a block of the default pool, a
 * cuMemAlloc block above STABLEGRAPH_PLACE_MAX_BYTES; each used by a
 * captured memset and copy, checked, and freed; the placed blocks
 * allocated again between them. The driver alone has room for each. */
static void oom(void)
{
    enum { NB = 40 };
    const size_t blk = 4u << 20, big = 200u << 20;
    CUdeviceptr b[NB];
    CUmemoryPool pool;
    CUdevice dev;
    MUST(cuCtxGetDevice(&dev));
    MUST(cuDeviceGetDefaultMemPool(&pool, dev));
    for (int kind = 0; kind < 4; kind++) {
        for (int i = 0; i < NB; i++) MUST(cuMemAlloc(&b[i], blk - 4096));       /* placed */
        CUgraph g;
        CUgraphExec e;
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < NB; i++) MUST(cuMemsetD32Async(b[i], (unsigned)i, N, st));
        MUST(cuMemcpyDtoDAsync(out, b[NB - 1], N * 4, st));
        MUST(cuStreamEndCapture(st, &g));
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        run_check(e, NB - 1, "oom placed");
        MUST(cuGraphExecDestroy(e));
        MUST(cuGraphDestroy(g));
        for (int i = 0; i < NB; i++) MUST(cuMemFree(b[i]));
        CUdeviceptr f = 0, va = 0;
        CUmemGenericAllocationHandle h = 0;
        switch (kind) {
        case 0: MUST(cuMemAllocManaged(&f, big, CU_MEM_ATTACH_GLOBAL)); break;
        case 1:
            MUST(cuMemAddressReserve(&va, big, 0, 0, 0));
            h = vmm_map(va, big);
            f = va;
            break;
        case 2:
            MUST(cuMemAllocFromPoolAsync(&f, big, pool, st));
            break;
        default: MUST(cuMemAlloc(&f, big)); break;
        }
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        MUST(cuMemsetD32Async(f + big - N * 4, 31u + (unsigned)kind, N, st));
        MUST(cuMemcpyDtoDAsync(out, f + big - N * 4, N * 4, st));
        MUST(cuStreamEndCapture(st, &g));
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        char what[32];
        snprintf(what, sizeof what, "oom kind %d", kind);
        run_check(e, 31u + (unsigned)kind, what);
        MUST(cuGraphExecDestroy(e));
        MUST(cuGraphDestroy(g));
        switch (kind) {
        case 1:
            MUST(cuMemUnmap(va, big));
            MUST(cuMemRelease(h));
            MUST(cuMemAddressFree(va, big));
            break;
        case 2:
            MUST(cuMemFreeAsync(f, st));
            MUST(cuStreamSynchronize(st));
            MUST(cuMemPoolTrimTo(pool, 0));
            break;
        default: MUST(cuMemFree(f)); break;
        }
    }
}

/* ----------------------------------------------------------------- hole */

/* Memory the library does not place at addresses where it once had a
 * reservation: a created context's placed blocks (its own reservation)
 * end with the context, then each kind of foreign memory is taken (the
 * system may hand out the released addresses) and freed_<kind>'s rounds
 * run over it. */
static void freed(kind k);
static void hole(void)
{
    CUdevice dev;
    MUST(cuCtxGetDevice(&dev));
    for (int i = 0; i < 2; i++) {
        CUcontext c2;
        CUdeviceptr p[4];
        MUST(cuCtxCreate(&c2, NULL, 0, dev));
        for (int j = 0; j < 4; j++) MUST(cuMemAlloc(&p[j], (size_t)(j + 1) << 20));   /* placed in c2 */
        MUST(cuCtxDestroy(c2));
        MUST(cuCtxSetCurrent(ctx));
    }
    for (int k = 0; k < K_NKINDS; k++) freed((kind)k);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: adv_foreign CASE\n");
        return 4;
    }
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&in, N * 4));
    MUST(cuMemAlloc(&out, N * 4));
    for (unsigned i = 0; i < N; i++) hin[i] = i * 3 + 1;
    MUST(cuMemcpyHtoD(in, hin, N * 4));
    const char *c = argv[1];
    if (!strncmp(c, "freed_", 6)) {
        int k = 0;
        while (k < K_NKINDS && strcmp(c + 6, kind_names[k])) k++;
        if (k == K_NKINDS) return 4;
        freed((kind)k);
    } else {
        static const struct { const char *name; void (*run)(void); } cases[] = {
            { "rotate", rotate }, { "remap", remap },     { "async", async }, { "hints", hints },
            { "ctxgone", ctxgone }, { "variants", variants }, { "oom", oom },
            { "hole", hole },
        };
        size_t i = 0, n = sizeof cases / sizeof cases[0];
        while (i < n && strcmp(c, cases[i].name)) i++;
        if (i == n) {
            fprintf(stderr, "unknown case %s\n", c);
            return 4;
        }
        cases[i].run();
    }
    MUST(cuStreamDestroy(st));
    return adv_finish();
}
