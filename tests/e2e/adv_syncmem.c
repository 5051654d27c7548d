/*
 * tests/e2e/adv_syncmem.c: CU_POINTER_ATTRIBUTE_SYNC_MEMOPS and GPUDirect
 * RDMA over memory the library places (round 51). Communication libraries
 * (UCX, Open MPI, libfabric, GDRCopy, NIC drivers) set SYNC_MEMOPS on every
 * cuMemAlloc buffer they send from or pin, and many check that the call
 * succeeded; a NIC then reads the buffer by DMA, with no CUDA call between
 * the program's synchronous copy or memset and the read. The driver refuses
 * the attribute on VMM memory (CUDA_ERROR_NOT_SUPPORTED), which is what a
 * placed block is underneath, and a NIC can register VMM memory only if
 * cuMemCreate asked for GPUDirect RDMA.
 *
 *   attr  SYNC_MEMOPS set and unset on cuMemAlloc blocks of several sizes
 *         (through interior addresses too) and read back with
 *         cuPointerGetAttribute and cuPointerGetAttributes; the refusals:
 *         unallocated memory, a freed block, another attribute, a NULL
 *         value; a cuMemAllocAsync block (pool memory); a block freed and
 *         allocated again starts unset. Per block, IS_GPU_DIRECT_RDMA_CAPABLE
 *         and whether a NIC could really register it (the emulator's
 *         cudaemu_rdma_capable: the physical memory's truth, which a
 *         library's answer to the attribute does not change).
 *   nic   run with CUDAEMU_SYNC_EARLY_US (the emulator then lets every
 *         synchronous operation that the CUDA documentation allows to return
 *         early do so, its work delayed, unless its memory or the current
 *         context asks for synchronous memory operations): a NIC reads a
 *         flagged block right after each kind of synchronous operation on
 *         it (a copy from pageable host memory, device to device, cuMemcpy,
 *         a 2D copy, memsets of 8 / 16 / 32 bits and 2D, the per-thread
 *         default stream's forms) and must see the data; a block flagged
 *         after the copy (setting the attribute waits for the pending
 *         copy); a block the program unflags again is then read only after
 *         a synchronization.
 *
 * The NIC's read is a plain read of the device address (the emulated
 * driver's device memory is mapped in the process at that address).
 * Prints only lines that must be identical with and without the library.
 */
#include "adv_common.h"

#include "../emu/driver/emu_kernel.h"

/* The per-thread default stream's synchronous forms, which cuda.h declares
 * only for CUDA_API_PER_THREAD_DEFAULT_STREAM builds. */
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N);

static const unsigned one = 1, zero = 0;

/* The attribute as cuPointerGetAttribute reads it (-1: refused). */
static int get_sync(CUdeviceptr p)
{
    int v = -7;
    return R(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p)) == CUDA_SUCCESS ? v : -1;
}

/* The same through cuPointerGetAttributes, beside the buffer id (which
 * must stay that of the block). */
static int get_sync_many(CUdeviceptr p, unsigned long long *id)
{
    CUpointer_attribute a[2] = { CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, CU_POINTER_ATTRIBUTE_BUFFER_ID };
    int v = -7;
    void *data[2] = { &v, id };
    return R(cuPointerGetAttributes(2, a, data, p)) == CUDA_SUCCESS ? v : -1;
}

static void case_attr(void)
{
    static const size_t sizes[] = { 100, 4096, 70000, 1 << 20, 3000000 };
    enum { NB = sizeof sizes / sizeof sizes[0] };
    CUdeviceptr b[NB];
    for (int i = 0; i < NB; i++) MUST(cuMemAlloc(&b[i], sizes[i]));
    for (int i = 0; i < NB; i++) {
        CUdeviceptr mid = b[i] + sizes[i] / 2;
        int before = get_sync(b[i]);
        CUresult set = R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, mid));
        unsigned long long id0 = 0, id1 = 0;
        R(cuPointerGetAttribute(&id0, CU_POINTER_ATTRIBUTE_BUFFER_ID, b[i]));
        int after = get_sync(b[i]), after_end = get_sync(b[i] + sizes[i] - 1);
        int many = get_sync_many(b[i] + 1, &id1);
        adv_check("set", set == CUDA_SUCCESS && before == 0 && after == 1 && after_end == 1 && many == 1 &&
                  id0 == id1, "block %d of %zu bytes: before %d, set %s, after %d / %d / %d", i, sizes[i],
                  before, adv_err(set), after, after_end, many);
        int rdma = -1;
        R(cuPointerGetAttribute(&rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, b[i]));
        int nic = cudaemu_rdma_capable ? cudaemu_rdma_capable(b[i]) : -2;
        adv_check("rdma", rdma == nic, "block %d: attribute %d, a NIC can register it: %d", i, rdma, nic);
    }
    /* unset on one block leaves the others set */
    CUresult unset = R(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b[1]));
    adv_check("unset", unset == CUDA_SUCCESS && get_sync(b[1]) == 0 && get_sync(b[2]) == 1,
              "unset %s, then %d and %d", adv_err(unset), get_sync(b[1]), get_sync(b[2]));
    /* what the driver refuses */
    CUresult other = R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_BUFFER_ID, b[0]));
    CUresult null_value = R(cuPointerSetAttribute(NULL, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b[0]));
    CUresult past = R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b[0] + (1ull << 44)));
    adv_line("refused: another attribute %s, a NULL value %s, an address far past the blocks %s",
             adv_err(other), adv_err(null_value), adv_err(past));
    /* a freed block: refused, and a block made again starts unset */
    CUdeviceptr freed = b[3];
    MUST(cuMemFree(b[3]));
    CUresult on_freed = R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, freed));
    MUST(cuMemAlloc(&b[3], sizes[3]));
    adv_check("again", get_sync(b[3]) == 0, "set on the freed block: %s; the new block reads %d",
              adv_err(on_freed), get_sync(b[3]));
    /* pool memory: the driver's answer, whatever it is, with and without the library */
    CUstream s;
    CUdeviceptr a = 0;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&a, 8192, s));
    MUST(cuStreamSynchronize(s));
    CUresult on_pool = R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, a + 64));
    adv_line("pool memory: set %s, reads %d", adv_err(on_pool), get_sync(a));
    MUST(cuMemFreeAsync(a, s));
    MUST(cuStreamSynchronize(s));
    R(cuStreamDestroy(s));
    for (int i = 0; i < NB; i++) R(cuMemFree(b[i]));
}

/* ------------------------------------------------------------------ nic */

#define NW 65536u                 /* words per block */

/* What the NIC reads by DMA: the words at p, now, with no CUDA call. */
static void nic_read(CUdeviceptr p, uint32_t *out, size_t n)
{
    memcpy(out, (const void *)(uintptr_t)p, n * sizeof *out);
}

/* Whether the NIC sees w[i] = f(i) for i < n; prints the check. */
static void nic_expect(const char *what, CUdeviceptr p, const uint32_t *want, size_t n)
{
    uint32_t *got = malloc(n * sizeof *got);
    nic_read(p, got, n);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ == 0) first = i;
    adv_check(what, bad == 0, "%zu of %zu words stale, first at %zu", bad, n, first);
    free(got);
}

static void fill(uint32_t *w, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) w[i] = seed * 2654435761u + (uint32_t)i * 40503u;
}

static void case_nic(void)
{
    CUdeviceptr x, y, late;
    MUST(cuMemAlloc(&x, NW * 4));
    MUST(cuMemAlloc(&y, NW * 4));
    MUST(cuMemAlloc(&late, NW * 4));
    MUST(cuMemsetD32(x, 0, NW));
    MUST(cuMemsetD32(y, 0, NW));
    MUST(cuMemsetD32(late, 0, NW));
    MUST(cuCtxSynchronize());
    R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, x));
    R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, y + 4));
    uint32_t *h = malloc(NW * 4), *want = malloc(NW * 4);

    fill(h, NW, 1);                                   /* pageable host to device */
    R(cuMemcpyHtoD(x, h, NW * 4));
    memset(h, 0xee, NW * 4);                          /* the source may be reused at once */
    fill(want, NW, 1);
    nic_expect("htod", x, want, NW);

    R(cuMemcpyDtoD(y, x, NW * 4));                    /* device to device */
    nic_expect("dtod", y, want, NW);

    fill(h, NW, 2);                                   /* cuMemcpy, unified addressing */
    R(cuMemcpy(y, (CUdeviceptr)(uintptr_t)h, NW * 4));
    fill(want, NW, 2);
    nic_expect("memcpy", y, want, NW);

    R(cuMemsetD8(x, 0x5a, NW * 4));                   /* memsets */
    for (size_t i = 0; i < NW; i++) want[i] = 0x5a5a5a5au;
    nic_expect("memset8", x, want, NW);
    R(cuMemsetD16(x, 0x1234, NW * 2));
    for (size_t i = 0; i < NW; i++) want[i] = 0x12341234u;
    nic_expect("memset16", x, want, NW);
    R(cuMemsetD32(x, 0xc0ffee, NW));
    for (size_t i = 0; i < NW; i++) want[i] = 0xc0ffeeu;
    nic_expect("memset32", x, want, NW);
    R(cuMemsetD2D32(y, 256 * 4, 77, 256, NW / 256));  /* 2D, whole rows */
    for (size_t i = 0; i < NW; i++) want[i] = 77;
    nic_expect("memset2d", y, want, NW);

    fill(h, NW, 3);                                   /* a 2D copy from pageable memory */
    CUDA_MEMCPY2D c2;
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = h;
    c2.srcPitch = 1024;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = x;
    c2.dstPitch = 1024;
    c2.WidthInBytes = 1024;
    c2.Height = NW * 4 / 1024;
    R(cuMemcpy2D(&c2));
    fill(want, NW, 3);
    nic_expect("copy2d", x, want, NW);

    fill(h, NW, 4);                                   /* the per-thread default stream */
    R(cuMemcpyHtoD_v2_ptds(y, h, NW * 4));
    fill(want, NW, 4);
    nic_expect("htod_ptds", y, want, NW);
    R(cuMemsetD32_v2_ptds(x, 99, NW));
    for (size_t i = 0; i < NW; i++) want[i] = 99;
    nic_expect("memset_ptds", x, want, NW);

    /* flagged after the copy: the set waits for it */
    fill(h, NW, 5);
    R(cuMemcpyHtoD(late, h, NW * 4));
    R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, late));
    fill(want, NW, 5);
    nic_expect("set_waits", late, want, NW);

    /* unflagged again: the program synchronizes before the NIC reads */
    R(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, x));
    R(cuMemsetD32(x, 7, NW));
    R(cuCtxSynchronize());
    for (size_t i = 0; i < NW; i++) want[i] = 7;
    nic_expect("unset_synced", x, want, NW);

    free(h);
    free(want);
    R(cuMemFree(x));
    R(cuMemFree(y));
    R(cuMemFree(late));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "attr", "nic", NULL };
    int c = adv_case(argc, argv, names);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    if (c == 0) case_attr();
    else case_nic();
    return adv_finish();
}
