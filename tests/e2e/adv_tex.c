/*
 * tests/e2e/adv_tex.c: texture objects over memory the library places
 * (round 49). A valid program may make a linear or pitch2D texture over any
 * pointer cuMemAlloc or cuMemAllocAsync gave it: the driver's pointers are
 * on the device's texture alignment (CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT,
 * which cuTexObjectCreate demands of devPtr), and a kernel then reads the
 * memory through the handle, which it receives as an 8-byte argument.
 *
 *   linear  blocks of many sizes (cuMemAlloc and cuMemAllocAsync, some
 *           freed and made again, so that placed blocks land at many
 *           offsets), a linear texture over each and a pitch2D texture over
 *           a block of pitch-aligned rows; every texture created and read
 *           back through a kernel (a placed block off the texture alignment
 *           gets CUDA_ERROR_INVALID_VALUE where the driver alone succeeds).
 *   graph   a kernel reading a texture into a placed buffer, captured and
 *           re-captured every step with temporaries allocated and freed
 *           around it; between steps the texture is destroyed and made
 *           again (its handle value given out again) over a new block of
 *           another size, or over the same block, or a second texture is
 *           made (another handle value), or the exec is relaunched without
 *           a new capture: each launch must read what the texture names at
 *           that moment, as without the library (an update whose arguments
 *           are the same bytes, handle included, may be skipped: the handle
 *           is resolved when the kernel runs).
 *
 * Prints only lines that must be identical with and without the library.
 */
#include "adv_common.h"

static CUfunction k_read;
static int tex_align, pitch_align;

static CUtexObject make_linear(CUdeviceptr p, size_t bytes)
{
    CUDA_RESOURCE_DESC r;
    CUDA_TEXTURE_DESC t;
    memset(&r, 0, sizeof r);
    memset(&t, 0, sizeof t);
    r.resType = CU_RESOURCE_TYPE_LINEAR;
    r.res.linear.devPtr = p;
    r.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
    r.res.linear.numChannels = 1;
    r.res.linear.sizeInBytes = bytes;
    t.flags = CU_TRSF_READ_AS_INTEGER;
    CUtexObject tex = 0;
    return R(cuTexObjectCreate(&tex, &r, &t, NULL)) == CUDA_SUCCESS ? tex : 0;
}

static CUtexObject make_pitch2d(CUdeviceptr p, uint32_t w, uint32_t h, size_t pitch)
{
    CUDA_RESOURCE_DESC r;
    CUDA_TEXTURE_DESC t;
    memset(&r, 0, sizeof r);
    memset(&t, 0, sizeof t);
    r.resType = CU_RESOURCE_TYPE_PITCH2D;
    r.res.pitch2D.devPtr = p;
    r.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT32;
    r.res.pitch2D.numChannels = 1;
    r.res.pitch2D.width = w;
    r.res.pitch2D.height = h;
    r.res.pitch2D.pitchInBytes = pitch;
    t.addressMode[0] = t.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
    t.flags = CU_TRSF_READ_AS_INTEGER;
    CUtexObject tex = 0;
    return R(cuTexObjectCreate(&tex, &r, &t, NULL)) == CUDA_SUCCESS ? tex : 0;
}

/* n words v + i at p (synchronous). */
static void upload(CUdeviceptr p, uint32_t v, size_t n)
{
    uint32_t *h = malloc(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = v + (uint32_t)i * 7u;
    R(cuMemcpyHtoD(p, h, n * 4));
    free(h);
}

/* What tex_read(w, h) of a texture over words v + 7i, rows `pitch` words
 * apart, writes: w*h elements, then 0 failed fetches. */
static void expect(uint32_t *want, uint32_t v, uint32_t w, uint32_t h, size_t pitch)
{
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) want[y * w + x] = v + (uint32_t)(y * pitch + x) * 7u;
    want[w * h] = 0;
}

/* Reads tex (w x h) into out on s and checks it against words v + 7i. */
static void read_check(const char *name, CUstream s, CUtexObject tex, uint32_t w, uint32_t h, size_t pitch,
                       uint32_t v, CUdeviceptr out)
{
    uint32_t want[1025];
    if (!tex) {
        adv_check(name, 0, "no texture");
        return;
    }
    ADV_LAUNCH(k_read, s, &tex, &w, &h, &out);
    R(cuStreamSynchronize(s));
    expect(want, v, w, h, pitch);
    adv_check_words(name, out, want, w * h + 1);
}

static void case_linear(CUstream s, CUdeviceptr out)
{
    static const size_t sizes[] = { 100, 300, 700, 256, 1000, 1536, 4100, 260, 768, 2048, 36, 5000 };
    enum { N = sizeof sizes / sizeof sizes[0] };
    CUdeviceptr p[N];
    char name[64];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            if (round && i % 3) continue;        /* round 1: every third made again, of another size */
            size_t bytes = sizes[(i + round * 5) % N];
            if (i % 2) MUST(cuMemAllocAsync(&p[i], bytes, s));
            else MUST(cuMemAlloc(&p[i], bytes));
            MUST(cuStreamSynchronize(s));
            size_t words = bytes / 4 < 256 ? bytes / 4 : 256;
            upload(p[i], 1000u * (uint32_t)(i + 1) + 100u * (uint32_t)round, words);
            snprintf(name, sizeof name, "linear_r%d_b%d_aligned", round, i);
            adv_check(name, p[i] % (CUdeviceptr)tex_align == 0, "on the texture alignment");
            CUtexObject t = make_linear(p[i], words * 4);
            snprintf(name, sizeof name, "linear_r%d_b%d", round, i);
            read_check(name, s, t, (uint32_t)words, 1, 0, 1000u * (uint32_t)(i + 1) + 100u * (uint32_t)round, out);
            if (t) R(cuTexObjectDestroy(t));
        }
        for (int i = 0; i < N; i++) {
            if (round == 0 && i % 3) continue;   /* round 0: free every third, keep the others */
            if (i % 2) R(cuMemFreeAsync(p[i], s));
            else R(cuMemFree(p[i]));
        }
        R(cuStreamSynchronize(s));
    }
    /* pitch2D over placed blocks of pitch-aligned rows (cuMemAllocAsync and
     * cuMemAlloc), and over cuMemAllocPitch's */
    static const uint32_t ws[] = { 5, 130, 17 }, hs[] = { 3, 2, 6 };
    for (int i = 0; i < 3; i++) {
        size_t pitch = (ws[i] * 4 + (size_t)pitch_align - 1) / (size_t)pitch_align * (size_t)pitch_align;
        CUdeviceptr q, pad;
        MUST(cuMemAlloc(&pad, 256 * (size_t)(i + 1)));   /* shifts the next block's offset */
        if (i == 2) MUST(cuMemAllocPitch(&q, &pitch, ws[i] * 4, hs[i], 4));
        else if (i) MUST(cuMemAllocAsync(&q, pitch * hs[i], s));
        else MUST(cuMemAlloc(&q, pitch * hs[i]));
        MUST(cuStreamSynchronize(s));
        upload(q, 50000u * (uint32_t)(i + 1), pitch / 4 * hs[i]);
        snprintf(name, sizeof name, "pitch2d_%d", i);
        CUtexObject t = make_pitch2d(q, ws[i], hs[i], pitch);
        read_check(name, s, t, ws[i], hs[i], pitch / 4, 50000u * (uint32_t)(i + 1), out);
        if (t) R(cuTexObjectDestroy(t));
        R(cuMemFree(pad));
        if (i == 1) R(cuMemFreeAsync(q, s));
        else R(cuMemFree(q));
    }
    R(cuStreamSynchronize(s));
}

/* Captures: a temporary allocated and freed around tex_read(tex) into out. */
static CUgraph capture(CUstream s, CUtexObject tex, uint32_t w, CUdeviceptr out, CUdeviceptr *tmp)
{
    CUgraph g = NULL;
    uint32_t h = 1;
    MUST(cuMemAllocAsync(tmp, 4096, s));      /* placed before the capture: a temporary of the step */
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ADV_LAUNCH(k_read, s, &tex, &w, &h, &out);
    R(cuMemcpyDtoDAsync(*tmp, out, (size_t)(w + 1) * 4, s));
    MUST(cuStreamEndCapture(s, &g));
    return g;
}

static void case_graph(CUstream s, CUdeviceptr out)
{
    enum { STEPS = 9, W = 64 };
    static const size_t sizes[] = { 512, 300, 1000, 700, 256, 4100 };
    CUdeviceptr in, tmp;
    uint32_t v = 7000, want[W + 1];
    MUST(cuMemAllocAsync(&in, sizes[0], s));
    MUST(cuStreamSynchronize(s));
    upload(in, v, W);
    CUtexObject tex = make_linear(in, W * 4), other = 0;
    CUgraph g = capture(s, tex, W, out, &tmp);
    CUgraphExec e = NULL;
    MUST(cuGraphInstantiate(&e, g, 0));
    char name[64];
    for (int k = 0; k < STEPS; k++) {
        R(cuGraphLaunch(e, s));
        R(cuStreamSynchronize(s));
        expect(want, v, W, 1, 0);
        snprintf(name, sizeof name, "graph_step%d", k);
        adv_check_words(name, out, want, W + 1);
        /* what changes before the next step */
        int what = k % 4;
        v += 1000;
        if (what == 0 || what == 2) {            /* a new block, the handle made again */
            CUtexObject old = tex;
            CUdeviceptr in2;                     /* made while the old one lives: another address */
            MUST(cuMemAllocAsync(&in2, sizes[(k + 1) % 6] < W * 4 ? W * 4 : sizes[(k + 1) % 6], s));
            R(cuTexObjectDestroy(tex));
            R(cuMemFreeAsync(in, s));
            MUST(cuStreamSynchronize(s));
            in = in2;
            upload(in, v, W);
            tex = make_linear(in, W * 4);
            adv_line("step %d: handle value given again: %s", k, tex == old ? "yes" : "no");
        } else if (what == 1) {                  /* a second texture (another handle) over new contents */
            upload(in, v, W);
            other = make_linear(in, W * 4);
            R(cuTexObjectDestroy(tex));
            tex = other;
        } else {                                 /* new contents only */
            upload(in, v, W);
        }
        if (what == 3 && k % 8 == 7) continue;   /* relaunched as it is: no new capture, no update */
        R(cuMemFreeAsync(tmp, s));               /* the next capture's temporary takes its place */
        CUgraph g2 = capture(s, tex, W, out, &tmp);
        CUgraphExecUpdateResultInfo info;
        if (R(cuGraphExecUpdate(e, g2, &info)) != CUDA_SUCCESS) adv_line("update refused: %d", (int)info.result);
        R(cuGraphDestroy(g));
        g = g2;
    }
    R(cuMemFreeAsync(tmp, s));
    R(cuStreamSynchronize(s));
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(g));
    R(cuTexObjectDestroy(tex));
    R(cuMemFree(in));
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "linear", "graph", NULL };
    int c = adv_case(argc, argv, names);
    CUcontext ctx;
    CUmodule mod;
    CUstream s;
    CUdeviceptr out;
    adv_open(&ctx, &mod);
    k_read = adv_fn(mod, "tex_read");
    MUST(cuDeviceGetAttribute(&tex_align, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 0));
    MUST(cuDeviceGetAttribute(&pitch_align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 0));
    adv_line("texture alignment %d, pitch alignment %d", tex_align, pitch_align);
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&out, 1025 * 4));
    if (c == 0) case_linear(s, out);
    else case_graph(s, out);
    R(cuMemFree(out));
    R(cuStreamDestroy(s));
    return adv_finish();
}
