/*
 * tests/e2e/adv_arrcopy.c: the copies with a device-pointer operand that
 * the library did not hook before round 52: cuMemcpyDtoA / cuMemcpyAtoD
 * (1D copies between a CUDA array and device memory) and cuMemcpy3DPeer /
 * cuMemcpy3DPeerAsync (a 3D copy between contexts), with their per-thread
 * forms.
 *
 *   nic     run with CUDAEMU_SYNC_EARLY_US: placed blocks given
 *           CU_POINTER_ATTRIBUTE_SYNC_MEMOPS written by cuMemcpyAtoD and
 *           cuMemcpy3DPeer (and their _ptds forms) are read by a NIC (a plain
 *           read of the device address) right after; a flagged block read by
 *           cuMemcpyDtoA is overwritten by the NIC right after, and the
 *           array must hold what the block held before.
 *   ranges  copies into and out of placed blocks of several sizes, at several
 *           offsets, ending exactly at the block's end (accepted) and one
 *           byte past it (the driver refuses: a cuMemAlloc block ends
 *           there), with each call; then the blocks freed and others made
 *           in their place, and the same again.
 *   graph   cuMemcpy3DPeerAsync captured between kernels on placed
 *           temporaries, re-captured every step with a copy that moves,
 *           the executable graph updated, the results compared with the
 *           host's.
 *
 * Prints only lines that must be identical with and without the library.
 */
#include "adv_common.h"

CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount);
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy);

static const unsigned one = 1;

static CUarray mk_array(size_t width, CUarray_format f)
{
    CUDA_ARRAY_DESCRIPTOR d = { .Width = width, .Height = 0, .Format = f, .NumChannels = 1 };
    CUarray a;
    MUST(cuArrayCreate(&a, &d));
    return a;
}

/* A device-to-device CUDA_MEMCPY3D_PEER of h rows of w bytes, pitch apart,
 * both sides in context ctx. */
static CUDA_MEMCPY3D_PEER peer_copy(CUcontext ctx, CUdeviceptr dst, CUdeviceptr src, size_t w, size_t h,
                                    size_t pitch)
{
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = src, c.srcContext = ctx, c.srcPitch = pitch;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dst, c.dstContext = ctx, c.dstPitch = pitch;
    c.srcHeight = c.dstHeight = h;
    c.WidthInBytes = w, c.Height = h, c.Depth = 1;
    return c;
}

/* ------------------------------------------------------------------ nic */

#define NW 16384u                 /* words per block */

static void fill(uint32_t *w, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) w[i] = seed * 2654435761u + (uint32_t)i * 40503u;
}

/* What the NIC reads by DMA right now, with no CUDA call, compared. */
static void nic_expect(const char *what, CUdeviceptr p, const uint32_t *want, size_t n)
{
    const uint32_t *got = (const uint32_t *)(uintptr_t)p;
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] && bad++ == 0) first = i;
    adv_check(what, bad == 0, "%zu of %zu words stale, first at %zu", bad, n, first);
}

static void case_nic(CUcontext ctx)
{
    CUdeviceptr x, y, src;
    MUST(cuMemAlloc(&x, NW * 4));
    MUST(cuMemAlloc(&y, NW * 4));
    MUST(cuMemAlloc(&src, NW * 4));
    CUarray a = mk_array(NW, CU_AD_FORMAT_UNSIGNED_INT32);
    uint32_t *h = malloc(NW * 4), *want = malloc(NW * 4);
    memset(h, 0, NW * 4);
    MUST(cuMemcpyHtoD(x, h, NW * 4));
    MUST(cuMemcpyHtoD(y, h, NW * 4));
    MUST(cuCtxSynchronize());
    R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, x));
    R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, y + 8));

    fill(want, NW, 1);                                /* array to a flagged block */
    MUST(cuMemcpyHtoA(a, 0, want, NW * 4));
    MUST(cuCtxSynchronize());
    R(cuMemcpyAtoD(x, a, 0, NW * 4));
    nic_expect("atod", x, want, NW);
    fill(want, NW, 2);
    MUST(cuMemcpyHtoA(a, 0, want, NW * 4));
    MUST(cuCtxSynchronize());
    R(cuMemcpyAtoD_v2_ptds(y, a, 0, NW * 4));
    nic_expect("atod_ptds", y, want, NW);

    fill(want, NW, 3);                                /* 3D peer copy into a flagged block */
    MUST(cuMemcpyHtoD(src, want, NW * 4));
    MUST(cuCtxSynchronize());
    CUDA_MEMCPY3D_PEER c = peer_copy(ctx, x, src, 1024, NW * 4 / 1024, 1024);
    R(cuMemcpy3DPeer(&c));
    nic_expect("peer3d", x, want, NW);
    fill(want, NW, 4);
    MUST(cuMemcpyHtoD(src, want, NW * 4));
    MUST(cuCtxSynchronize());
    c = peer_copy(ctx, y, src, NW * 4, 1, NW * 4);
    R(cuMemcpy3DPeer_ptds(&c));
    nic_expect("peer3d_ptds", y, want, NW);

    /* a flagged block read into an array, then written by the NIC: the
     * array holds what the block held when the copy was made */
    fill(want, NW, 5);
    MUST(cuMemcpyHtoD(x, want, NW * 4));
    MUST(cuCtxSynchronize());
    R(cuMemcpyDtoA(a, 0, x, NW * 4));
    memset((void *)(uintptr_t)x, 0xee, NW * 4);      /* the NIC writes */
    MUST(cuCtxSynchronize());
    MUST(cuMemcpyAtoH(h, a, 0, NW * 4));
    size_t bad = 0;
    for (size_t i = 0; i < NW; i++) bad += h[i] != want[i];
    adv_check("dtoa", bad == 0, "%zu of %u words of the array not the block's", bad, NW);

    free(h);
    free(want);
    R(cuArrayDestroy(a));
    R(cuMemFree(x));
    R(cuMemFree(y));
    R(cuMemFree(src));
}

/* --------------------------------------------------------------- ranges */

static int ranges_bad;            /* blocks where a copy was not answered as the driver answers */

/* Copies ending at block b's end (size bytes) from offset off, then one
 * byte past it, with each call; prints the answers. */
static void ranges_block(CUcontext ctx, CUdeviceptr b, size_t size, size_t off, CUarray a, CUdeviceptr big)
{
    size_t n = size - off;
    CUresult atod = R(cuMemcpyAtoD(b + off, a, 0, n)), atod1 = R(cuMemcpyAtoD(b + off, a, 0, n + 1));
    CUresult dtoa = R(cuMemcpyDtoA(a, 0, b + off, n)), dtoa1 = R(cuMemcpyDtoA(a, 0, b + off, n + 1));
    CUresult atodp = R(cuMemcpyAtoD_v2_ptds(b + off, a, 0, n + 1));
    CUDA_MEMCPY3D_PEER to = peer_copy(ctx, b + off, big, n, 1, n), to1 = peer_copy(ctx, b + off, big, n + 1, 1, n + 1);
    CUDA_MEMCPY3D_PEER from1 = peer_copy(ctx, big, b + off, n + 1, 1, n + 1);
    CUresult p = R(cuMemcpy3DPeer(&to)), p1 = R(cuMemcpy3DPeer(&to1)), pf1 = R(cuMemcpy3DPeer(&from1));
    CUresult pp1 = R(cuMemcpy3DPeer_ptds(&to1));
    /* two rows whose second ends at the block's end, then one byte past */
    CUresult p2 = CUDA_SUCCESS, p21 = CUDA_SUCCESS, pa1 = CUDA_SUCCESS;
    if (n >= 4) {
        size_t w = n / 4, pitch = n - w;
        CUDA_MEMCPY3D_PEER r = peer_copy(ctx, b + off, big, w, 2, pitch);
        p2 = R(cuMemcpy3DPeer(&r));
        r.dstPitch += 1;
        p21 = R(cuMemcpy3DPeer(&r));
        CUstream s = NULL;
        pa1 = R(cuMemcpy3DPeerAsync(&to1, s));
    }
    int ok = atod == CUDA_SUCCESS && dtoa == CUDA_SUCCESS && p == CUDA_SUCCESS && p2 == CUDA_SUCCESS;
    CUresult past[] = { atod1, atodp, dtoa1, p1, pp1, pf1, p21, pa1 };
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) ok &= past[i] == CUDA_ERROR_INVALID_VALUE;
    ranges_bad += !ok;
    adv_line("block %zu off %zu: AtoD %s / %s (ptds %s), DtoA %s / %s, 3DPeer to %s / %s (ptds %s), from %s, "
             "rows %s / %s, async %s", size, off, adv_err(atod), adv_err(atod1), adv_err(atodp), adv_err(dtoa),
             adv_err(dtoa1), adv_err(p), adv_err(p1), adv_err(pp1), adv_err(pf1), adv_err(p2), adv_err(p21),
             adv_err(pa1));
}

static void case_ranges(CUcontext ctx)
{
    static const size_t sizes[] = { 100, 256, 1000, 4100, 9000 };
    static const size_t offs[] = { 0, 1, 37 };
    enum { NB = sizeof sizes / sizeof sizes[0] };
    CUarray a = mk_array(16384, CU_AD_FORMAT_UNSIGNED_INT8);
    CUdeviceptr big, b[NB];
    MUST(cuMemAlloc(&big, 16384));
    for (int round = 0; round < 2; round++) {
        /* the second round: the blocks freed and made again, in the other order */
        for (int i = 0; i < NB; i++) MUST(cuMemAlloc(&b[round ? NB - 1 - i : i], sizes[round ? NB - 1 - i : i]));
        for (int i = 0; i < NB; i++)
            for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) ranges_block(ctx, b[i], sizes[i], offs[k], a, big);
        MUST(cuCtxSynchronize());
        for (int i = 0; i < NB; i++) MUST(cuMemFree(b[i]));
    }
    adv_check("ranges", ranges_bad == 0, "%d block / offset pairs answered otherwise than: at the end "
              "accepted, one byte past it refused (CUDA_ERROR_INVALID_VALUE)", ranges_bad);
    R(cuMemFree(big));
    R(cuArrayDestroy(a));
}

/* ---------------------------------------------------------------- graph */

#define GN 512u

static void case_graph(CUcontext ctx, CUmodule mod)
{
    CUfunction fill_f = adv_fn(mod, "fill_u32"), add_f = adv_fn(mod, "add_u32"), mad_f = adv_fn(mod, "mad_u32");
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr out;
    MUST(cuMemAlloc(&out, GN * 4));
    MUST(cuMemsetD32(out, 0, GN));
    uint32_t want[GN], t1[GN], t2[GN];
    memset(want, 0, sizeof want);
    CUgraphExec e = NULL;
    for (uint32_t step = 0; step < 8; step++) {
        CUdeviceptr a, b;
        MUST(cuMemAlloc(&a, (GN + 64) * 4));
        MUST(cuMemAlloc(&b, GN * 4));
        uint64_t n = GN, n_src = GN + 64;
        uint32_t v = 10 * step, inc = step + 1;
        size_t shift = (step % 3) * 16;                /* the copy reads from a moving offset */
        CUDA_MEMCPY3D_PEER c = peer_copy(ctx, b, a, GN * 4, 1, GN * 4);
        c.srcXInBytes = shift * 4;
        CUgraph g;
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        void *fa[] = { &a, &v, &n_src };
        R(cuLaunchKernel(fill_f, 1, 1, 1, 1, 1, 1, 0, s, fa, NULL));
        R(cuMemcpy3DPeerAsync(&c, s));
        void *aa[] = { &b, &inc, &n };
        R(cuLaunchKernel(add_f, 1, 1, 1, 1, 1, 1, 0, s, aa, NULL));
        void *ma[] = { &b, &out, &n };
        R(cuLaunchKernel(mad_f, 1, 1, 1, 1, 1, 1, 0, s, ma, NULL));
        MUST(cuStreamEndCapture(s, &g));
        if (!e) MUST(cuGraphInstantiate(&e, g, 0));
        else adv_update(e, g);
        R(cuGraphLaunch(e, s));
        MUST(cuStreamSynchronize(s));
        R(cuGraphDestroy(g));
        R(cuMemFree(a));
        R(cuMemFree(b));
        for (uint32_t i = 0; i < GN + 0; i++) t1[i] = v + (uint32_t)(i + shift);
        for (uint32_t i = 0; i < GN; i++) t2[i] = t1[i] + inc, want[i] = want[i] * 3u + t2[i];
    }
    adv_check_words("graph", out, want, GN);
    R(cuGraphExecDestroy(e));
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "nic", "ranges", "graph", NULL };
    int c = adv_case(argc, argv, names);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    if (c == 0) case_nic(ctx);
    else if (c == 1) case_ranges(ctx);
    else case_graph(ctx, mod);
    return adv_finish();
}
