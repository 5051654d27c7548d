/*
 * tests/gpu/facts.c: asks the driver it runs on the questions the CUDA
 * documentation leaves open and the emulated driver (tests/emu/) answers
 * with its own readings (docs/emulator.md, "reading" / "unverified"), and
 * some the library's design relies on. Plain C, driver API only, no kernels.
 *
 *   facts
 *
 * Output: one line per fact, "fact NAME: VALUE", then "facts: N" (the number
 * of fact lines). VALUE is a CUresult name, a number, or a short word:
 *   absent            the call the fact asks about is not in this driver
 *                     (cuGetProcAddress does not find it)
 *   skip              the device says it does not support what the fact
 *                     needs (DMA-BUF, GPUDirect RDMA on VMM memory)
 *   setup-failed R    a call the fact needs before its question failed with R
 * Nothing printed varies between runs on one driver (no address, no time),
 * so two runs compare line by line: tests/gpu/run-all.sh's facts stage
 * compares this program without the library, through the library (the
 * library must not change a line) and on the emulated driver (every
 * difference is a reading of the emulator to fix).
 *
 * The facts, in order:
 *   tex_alignment, tex_pitch_alignment   the device attributes
 *   alloc_alignment        the largest power of two dividing the addresses of
 *                          64 cuMemAlloc blocks of 1..4096 bytes (sizes varied)
 *   async_alignment        the same for 16 cuMemAllocAsync blocks
 *   dev_rdma, dev_rdma_vmm, dev_dmabuf, dev_vmm, dev_posix_fd   device
 *                          attributes GPU_DIRECT_RDMA_SUPPORTED,
 *                          GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
 *                          DMA_BUF_SUPPORTED, VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
 *                          HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
 *   syncset_*              cuPointerSetAttribute(&one, SYNC_MEMOPS, p): on a
 *                          cuMemAlloc block (base, interior), cuMemAllocPitch,
 *                          a cuMemCreate mapping (without and with
 *                          gpuDirectRDMACapable), pool memory, graph memory
 *                          (an allocation node's), managed memory,
 *                          cuMemHostAlloc, cuMemHostRegister'ed memory, a
 *                          freed block's address; another attribute
 *                          (BUFFER_ID); a NULL value
 *   syncget_*              cuPointerGetAttribute(SYNC_MEMOPS): the bytes it
 *                          writes, the value never set, after set and unset,
 *                          on a mapping
 *   rdma_*                 IS_GPU_DIRECT_RDMA_CAPABLE by kind of memory
 *   ctx_*                  cuCtxSetFlags(CU_CTX_SYNC_MEMOPS) on the primary
 *                          context: the flags before, the result, cuCtxGetFlags
 *                          and cuDevicePrimaryCtxGetState after, the flags once
 *                          set back
 *   dmabuf_*               cuMemGetHandleForAddressRange(DMA_BUF_FD) on a 2 MiB
 *                          cuMemAlloc block (whole, a page-aligned interior
 *                          range, a size that is not a page multiple), on a
 *                          range spanning two mappings side by side, on 4 KiB
 *                          of one mapping
 *   p2p_*                  cuPointerGetAttribute(P2P_TOKENS) on a cuMemAlloc
 *                          block and on a mapping; SYNC_MEMOPS of the block
 *                          after it (the documentation: reading the tokens "has
 *                          a side effect of setting" SYNC_MEMOPS)
 */
#include <cuda.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int nfacts;
static CUdevice dev;
static CUstream stream;
static size_t host_page;

/* The calls the facts are about, looked up with cuGetProcAddress: NULL where
 * this driver does not have them (the fact prints "absent"). */
static CUresult (*p_set_attr)(const void *, CUpointer_attribute, CUdeviceptr);
static CUresult (*p_ctx_set_flags)(unsigned int);
static CUresult (*p_ctx_get_flags)(unsigned int *);
static CUresult (*p_range_handle)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);

static void fact(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("fact %s: ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);   /* a driver crash later keeps what was learnt */
    nfacts++;
}

/* The CUresult's name, e.g. CUDA_ERROR_NOT_SUPPORTED. */
static const char *rname(CUresult r)
{
    static char buf[32];
    const char *s = NULL;
    if (cuGetErrorName(r, &s) == CUDA_SUCCESS && s) return s;
    snprintf(buf, sizeof buf, "CUresult_%d", (int)r);
    return buf;
}

static void fact_rc(const char *name, CUresult r) { fact(name, "%s", rname(r)); }
static void fact_num(const char *name, unsigned long long v) { fact(name, "%llu", v); }
static void fact_hex(const char *name, unsigned int v) { fact(name, "0x%x", v); }
static void setup_failed(const char *name, CUresult r) { fact(name, "setup-failed %s", rname(r)); }

/* A set-up call of fact `name`: on failure prints setup-failed and jumps to
 * the function's `out` (its clean-up). */
#define SETUP(name, call)                                                                            \
    do {                                                                                             \
        CUresult r_ = (call);                                                                        \
        if (r_ != CUDA_SUCCESS) {                                                                    \
            setup_failed(name, r_);                                                                  \
            goto out;                                                                                \
        }                                                                                            \
    } while (0)

static void *resolve(const char *sym, int version)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (cuGetProcAddress(sym, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
        st != CU_GET_PROC_ADDRESS_SUCCESS)
        return NULL;
    return p;
}

static int dev_attr(CUdevice_attribute a)
{
    int v = 0;
    return cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : -1;
}

/* ------------------------------------------------------------- memory */

/* The kinds of memory the pointer facts are asked about. */
typedef enum { K_ALLOC, K_PITCH, K_VMM, K_VMM_RDMA, K_POOL, K_MANAGED, K_HOSTALLOC, K_HOSTREG } kind;

typedef struct mem {
    kind k;
    CUdeviceptr p;   /* the address the facts ask about (host memory: its address) */
    size_t size, gran;
    void *host;
    CUmemGenericAllocationHandle h[2];
    int nh, nmapped, reserved;
} mem;

static CUresult vmm_granularity(int rdma, CUmemAllocationProp *prop, size_t *gran)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
    prop->allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
    return cuMemGetAllocationGranularity(gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}

static void mem_free(mem *m);

/* n cuMemCreate allocations of one granule each, mapped side by side in one
 * reservation, read-write for the device. */
static CUresult vmm_make(mem *m, int n, int rdma)
{
    CUmemAllocationProp prop;
    CUresult r = vmm_granularity(rdma, &prop, &m->gran);
    if (r != CUDA_SUCCESS) return r;
    m->size = m->gran * (size_t)n;
    if ((r = cuMemAddressReserve(&m->p, m->size, 0, 0, 0)) != CUDA_SUCCESS) return r;
    m->reserved = 1;
    for (int i = 0; i < n; i++) {
        if ((r = cuMemCreate(&m->h[i], m->gran, &prop, 0)) != CUDA_SUCCESS) return r;
        m->nh++;
        if ((r = cuMemMap(m->p + m->gran * (size_t)i, m->gran, 0, m->h[i], 0)) != CUDA_SUCCESS) return r;
        m->nmapped++;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(m->p, m->size, &acc, 1);
}

/* Makes memory of kind k (4 KiB, or one granule for a mapping). On failure
 * what was made is given back. */
static CUresult mem_make(mem *m, kind k)
{
    CUresult r = CUDA_SUCCESS;
    size_t pitch = 0;
    memset(m, 0, sizeof *m);
    m->k = k;
    m->size = 4096;
    switch (k) {
    case K_ALLOC: r = cuMemAlloc(&m->p, m->size); break;
    case K_PITCH: r = cuMemAllocPitch(&m->p, &pitch, 1000, 4, 4); break;
    case K_VMM: r = vmm_make(m, 1, 0); break;
    case K_VMM_RDMA: r = vmm_make(m, 1, 1); break;
    case K_POOL:
        r = cuMemAllocAsync(&m->p, m->size, stream);
        if (r == CUDA_SUCCESS) r = cuStreamSynchronize(stream);
        break;
    case K_MANAGED: r = cuMemAllocManaged(&m->p, m->size, CU_MEM_ATTACH_GLOBAL); break;
    case K_HOSTALLOC:
        r = cuMemHostAlloc(&m->host, m->size, 0);
        m->p = (CUdeviceptr)(uintptr_t)m->host;
        break;
    case K_HOSTREG:
        m->host = aligned_alloc(host_page, host_page);
        if (!m->host) return CUDA_ERROR_OUT_OF_MEMORY;
        memset(m->host, 0, host_page);
        r = cuMemHostRegister(m->host, host_page, 0);
        if (r != CUDA_SUCCESS) {
            free(m->host);
            m->host = NULL;
            return r;
        }
        m->p = (CUdeviceptr)(uintptr_t)m->host;
        break;
    }
    if (r != CUDA_SUCCESS) mem_free(m);
    return r;
}

static void mem_free(mem *m)
{
    switch (m->k) {
    case K_ALLOC:
    case K_PITCH:
    case K_MANAGED:
        if (m->p) cuMemFree(m->p);
        break;
    case K_POOL:
        if (m->p) {
            cuMemFreeAsync(m->p, stream);
            cuStreamSynchronize(stream);
        }
        break;
    case K_HOSTALLOC:
        if (m->host) cuMemFreeHost(m->host);
        break;
    case K_HOSTREG:
        if (m->host) {
            cuMemHostUnregister(m->host);
            free(m->host);
        }
        break;
    case K_VMM:
    case K_VMM_RDMA:
        for (int i = 0; i < m->nmapped; i++) cuMemUnmap(m->p + m->gran * (size_t)i, m->gran);
        for (int i = 0; i < m->nh; i++) cuMemRelease(m->h[i]);
        if (m->reserved) cuMemAddressFree(m->p, m->size);
        break;
    }
    memset(m, 0, sizeof *m);
}

/* Whether kind k can be made on this device: "skip" is printed where not. */
static int kind_supported(kind k) { return k != K_VMM_RDMA || dev_attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) == 1; }

/* ------------------------------------------------------------- alignment */

static void fact_alignment(const char *name, int n, int async)
{
    CUdeviceptr p[64] = { 0 };
    unsigned long long all = 0;
    int made = 0;
    for (; made < n; made++) {
        size_t size = 1 + ((size_t)made * (async ? 1237u : 613u)) % 4096;
        SETUP(name, async ? cuMemAllocAsync(&p[made], size, stream) : cuMemAlloc(&p[made], size));
        all |= p[made];
    }
    if (async) SETUP(name, cuStreamSynchronize(stream));
    fact_num(name, all & (~all + 1));
out:
    for (int i = 0; i < made; i++) {
        if (async) cuMemFreeAsync(p[i], stream);
        else cuMemFree(p[i]);
    }
    if (async) cuStreamSynchronize(stream);
}

/* ------------------------------------------------------------- SYNC_MEMOPS */

static const unsigned int ONE = 1, ZERO = 0;

/* cuPointerSetAttribute(&one, attr, p + offset) on memory of kind k, or with
 * a NULL value. */
static void fact_syncset(const char *name, kind k, size_t offset, CUpointer_attribute attr, int null_value)
{
    mem m;
    if (!p_set_attr) { fact(name, "absent"); return; }
    if (!kind_supported(k)) { fact(name, "skip"); return; }
    SETUP(name, mem_make(&m, k));
    fact_rc(name, p_set_attr(null_value ? NULL : &ONE, attr, m.p + offset));
    mem_free(&m);
out:
    return;
}

/* A freed cuMemAlloc block's address, asked at once. */
static void fact_syncset_freed(const char *name)
{
    CUdeviceptr p = 0;
    if (!p_set_attr) { fact(name, "absent"); return; }
    SETUP(name, cuMemAlloc(&p, 4096));
    SETUP(name, cuMemFree(p));
    fact_rc(name, p_set_attr(&ONE, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
out:
    return;
}

/* Graph memory: the address a graph's allocation node gave (the graph
 * launched once), freed on the stream afterwards. */
static void fact_syncset_graph(const char *name)
{
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    CUgraphNode n;
    CUDA_MEM_ALLOC_NODE_PARAMS prm;
    int launched = 0;
    if (!p_set_attr) { fact(name, "absent"); return; }
    memset(&prm, 0, sizeof prm);
    prm.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    prm.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prm.poolProps.location.id = dev;
    prm.bytesize = 4096;
    SETUP(name, cuGraphCreate(&g, 0));
    SETUP(name, cuGraphAddMemAllocNode(&n, g, NULL, 0, &prm));
    SETUP(name, cuGraphInstantiateWithFlags(&e, g, 0));
    SETUP(name, cuGraphLaunch(e, stream));
    launched = 1;
    SETUP(name, cuStreamSynchronize(stream));
    fact_rc(name, p_set_attr(&ONE, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, prm.dptr));
out:
    if (launched) {
        cuMemFreeAsync(prm.dptr, stream);
        cuStreamSynchronize(stream);
    }
    if (e) cuGraphExecDestroy(e);
    if (g) cuGraphDestroy(g);
}

/* Reads attribute a of p into an 8-byte buffer prefilled with `fill`. */
static CUresult get8(CUpointer_attribute a, CUdeviceptr p, unsigned char fill, unsigned char buf[8])
{
    memset(buf, fill, 8);
    return cuPointerGetAttribute(buf, a, p);
}

/* How many bytes of an 8-byte buffer of 0xAA the SYNC_MEMOPS getter changes
 * (a fresh cuMemAlloc block: the value is 0). */
static void fact_syncget_bytes(const char *name)
{
    mem m;
    unsigned char buf[8];
    SETUP(name, mem_make(&m, K_ALLOC));
    CUresult r = get8(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, m.p, 0xAA, buf);
    if (r != CUDA_SUCCESS) {
        fact_rc(name, r);
    } else {
        int n = 0;
        for (int i = 0; i < 8; i++) n += buf[i] != 0xAA;
        fact_num(name, (unsigned long long)n);
    }
    mem_free(&m);
out:
    return;
}

/* The SYNC_MEMOPS value read on memory of kind k after setting it to `set`
 * (-1: never set); the getter's error if it fails. */
static void fact_syncget(const char *name, kind k, int set)
{
    mem m;
    unsigned char buf[8];
    unsigned long long v = 0;
    if (set >= 0 && !p_set_attr) { fact(name, "absent"); return; }
    SETUP(name, mem_make(&m, k));
    if (set == 0) SETUP(name, p_set_attr(&ONE, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, m.p));
    if (set >= 0) SETUP(name, p_set_attr(set ? &ONE : &ZERO, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, m.p));
    CUresult r = get8(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, m.p, 0, buf);
    memcpy(&v, buf, 8);
    if (r != CUDA_SUCCESS) fact_rc(name, r);
    else fact_num(name, v);
out:
    mem_free(&m);
}

/* IS_GPU_DIRECT_RDMA_CAPABLE on memory of kind k. */
static void fact_rdma(const char *name, kind k)
{
    mem m;
    unsigned char buf[8];
    unsigned long long v = 0;
    if (!kind_supported(k)) { fact(name, "skip"); return; }
    SETUP(name, mem_make(&m, k));
    CUresult r = get8(CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, m.p, 0, buf);
    memcpy(&v, buf, 8);
    if (r != CUDA_SUCCESS) fact_rc(name, r);
    else fact_num(name, v);
    mem_free(&m);
out:
    return;
}

/* ------------------------------------------------------------- context flags */

/* cuCtxSetFlags(CU_CTX_SYNC_MEMOPS) on the primary context (current): five
 * facts, then the flags are set back. */
static void facts_ctx_flags(void)
{
    static const char *names[] = { "ctx_flags_before", "ctx_set_sync_memops", "ctx_flags_after",
                                   "ctx_primary_state_flags_after", "ctx_flags_restored" };
    unsigned int before = 0, after = 0, pflags = 0, restored = 0;
    int active = 0;
    CUresult r;
    if (!p_ctx_set_flags || !p_ctx_get_flags) {
        for (int i = 0; i < 5; i++) fact(names[i], "absent");
        return;
    }
    if ((r = p_ctx_get_flags(&before)) != CUDA_SUCCESS) {
        for (int i = 0; i < 5; i++) setup_failed(names[i], r);
        return;
    }
    fact_hex(names[0], before);
    r = p_ctx_set_flags(CU_CTX_SYNC_MEMOPS);
    fact_rc(names[1], r);
    if ((r = p_ctx_get_flags(&after)) == CUDA_SUCCESS) fact_hex(names[2], after);
    else fact_rc(names[2], r);
    if ((r = cuDevicePrimaryCtxGetState(dev, &pflags, &active)) == CUDA_SUCCESS) fact_hex(names[3], pflags);
    else fact_rc(names[3], r);
    r = p_ctx_set_flags(before);
    if (r == CUDA_SUCCESS) r = p_ctx_get_flags(&restored);
    if (r == CUDA_SUCCESS) fact_hex(names[4], restored);
    else fact_rc(names[4], r);
}

/* ------------------------------------------------------------- DMA-BUF */

/* cuMemGetHandleForAddressRange(DMA_BUF_FD) of [p + off, + size); the fd it
 * gives is closed. */
static void dmabuf_ask(const char *name, CUdeviceptr p, size_t size)
{
    int fd[2] = { -1, -1 };   /* "a pointer to an integer"; room for a wider write */
    CUresult r = p_range_handle(fd, p, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r == CUDA_SUCCESS && fd[0] >= 0) close(fd[0]);
    fact_rc(name, r);
}

/* Prints "absent" or "skip" for fact `name` where it cannot be asked. */
static int dmabuf_unaskable(const char *name)
{
    if (!p_range_handle) fact(name, "absent");
    else if (dev_attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 1) fact(name, "skip");
    else return 0;
    return 1;
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* which: 0 the whole 2 MiB block, 1 a page-aligned interior range, 2 the base
 * with a size that is not a page multiple. */
static void fact_dmabuf_alloc(const char *name, int which)
{
    CUdeviceptr p = 0;
    size_t size = 2u << 20;
    if (dmabuf_unaskable(name)) return;
    SETUP(name, cuMemAlloc(&p, size));
    if (which == 0) {
        dmabuf_ask(name, p, size);
    } else if (which == 1) {
        CUdeviceptr in = round_up(p, host_page) + host_page;
        dmabuf_ask(name, in, 4 * host_page);
    } else {
        dmabuf_ask(name, p, host_page + host_page / 2);
    }
out:
    if (p) cuMemFree(p);
}

/* maps = 2: a range spanning two allocations mapped side by side; maps = 1:
 * 4 KiB inside one mapping (at 64 KiB, or the host page if larger). */
static void fact_dmabuf_vmm(const char *name, int maps)
{
    mem m;
    memset(&m, 0, sizeof m);
    m.k = K_VMM;
    if (dmabuf_unaskable(name)) return;
    SETUP(name, vmm_make(&m, maps, 0));
    if (maps == 2) dmabuf_ask(name, m.p, m.size);
    else dmabuf_ask(name, m.p + round_up(65536, host_page), 4096);
out:
    mem_free(&m);
}

/* ------------------------------------------------------------- P2P tokens */

static void fact_p2p(const char *name, kind k, const char *sync_name)
{
    mem m;
    CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tok;
    unsigned char buf[8];
    unsigned long long v = 0;
    CUresult r = mem_make(&m, k);
    if (r != CUDA_SUCCESS) {
        setup_failed(name, r);
        if (sync_name) setup_failed(sync_name, r);   /* one line per fact, even so */
        return;
    }
    fact_rc(name, cuPointerGetAttribute(&tok, CU_POINTER_ATTRIBUTE_P2P_TOKENS, m.p));
    if (sync_name) {
        r = get8(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, m.p, 0, buf);
        memcpy(&v, buf, 8);
        if (r != CUDA_SUCCESS) fact_rc(sync_name, r);
        else fact_num(sync_name, v);
    }
    mem_free(&m);
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: facts (no arguments)\n");
        return 2;
    }
    CUcontext ctx;
    int drv = 0;
    CUresult r = cuInit(0);
    if (r == CUDA_SUCCESS) r = cuDriverGetVersion(&drv);
    if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS) r = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        printf("facts: setup-failed %s\n", rname(r));
        return 1;
    }
    host_page = (size_t)sysconf(_SC_PAGESIZE);
    int ver = drv < CUDA_VERSION ? drv : CUDA_VERSION;
    p_set_attr = resolve("cuPointerSetAttribute", ver);
    p_ctx_set_flags = resolve("cuCtxSetFlags", ver);
    p_ctx_get_flags = resolve("cuCtxGetFlags", ver);
    p_range_handle = resolve("cuMemGetHandleForAddressRange", ver);

    fact_num("tex_alignment", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT));
    fact_num("tex_pitch_alignment", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT));
    fact_alignment("alloc_alignment", 64, 0);
    fact_alignment("async_alignment", 16, 1);
    fact_num("dev_rdma", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED));
    fact_num("dev_rdma_vmm", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED));
    fact_num("dev_dmabuf", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED));
    fact_num("dev_vmm", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED));
    fact_num("dev_posix_fd", (unsigned long long)dev_attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED));

    const CUpointer_attribute SM = CU_POINTER_ATTRIBUTE_SYNC_MEMOPS;
    fact_syncset("syncset_alloc", K_ALLOC, 0, SM, 0);
    fact_syncset("syncset_alloc_interior", K_ALLOC, 1000, SM, 0);
    fact_syncset("syncset_pitch", K_PITCH, 0, SM, 0);
    fact_syncset("syncset_vmm", K_VMM, 0, SM, 0);
    fact_syncset("syncset_vmm_rdma", K_VMM_RDMA, 0, SM, 0);
    fact_syncset("syncset_pool", K_POOL, 0, SM, 0);
    fact_syncset_graph("syncset_graph");
    fact_syncset("syncset_managed", K_MANAGED, 0, SM, 0);
    fact_syncset("syncset_hostalloc", K_HOSTALLOC, 0, SM, 0);
    fact_syncset("syncset_hostregister", K_HOSTREG, 0, SM, 0);
    fact_syncset_freed("syncset_freed");
    fact_syncset("syncset_buffer_id", K_ALLOC, 0, CU_POINTER_ATTRIBUTE_BUFFER_ID, 0);
    fact_syncset("syncset_null_value", K_ALLOC, 0, SM, 1);

    fact_syncget_bytes("syncget_bytes");
    fact_syncget("syncget_default", K_ALLOC, -1);
    fact_syncget("syncget_after_set", K_ALLOC, 1);
    fact_syncget("syncget_after_unset", K_ALLOC, 0);
    fact_syncget("syncget_vmm", K_VMM, -1);

    fact_rdma("rdma_alloc", K_ALLOC);
    fact_rdma("rdma_vmm", K_VMM);
    fact_rdma("rdma_vmm_rdma", K_VMM_RDMA);
    fact_rdma("rdma_pool", K_POOL);

    facts_ctx_flags();

    fact_dmabuf_alloc("dmabuf_alloc_whole", 0);
    fact_dmabuf_alloc("dmabuf_alloc_interior", 1);
    fact_dmabuf_alloc("dmabuf_alloc_partial_page", 2);
    fact_dmabuf_vmm("dmabuf_vmm_two_mappings", 2);
    fact_dmabuf_vmm("dmabuf_vmm_4k", 1);

    fact_p2p("p2p_alloc", K_ALLOC, "p2p_alloc_syncget_after");
    fact_p2p("p2p_vmm", K_VMM, NULL);

    printf("facts: %d\n", nfacts);
    cuStreamDestroy(stream);
    cuDevicePrimaryCtxRelease(dev);
    return 0;
}
