/*
 * adv_arrays.c: CUDA arrays as copy operands beside placed temporaries
 * (round 46, tests/e2e/test_correctness.sh). Every array's contents are
 * modelled on the host; every CUresult that is not a success is printed,
 * every result checked.
 *
 * Cases:
 *   recap    re-captured each step: fill(t) -> 2D copy of a box of the
 *            placed temporary t into an array at an offset -> 2D copy of
 *            the whole array into a placed temporary o; the exec updated
 *            from each step's graph. Steps: identical; another array of
 *            the same shape; one of another shape; other offsets; the
 *            array destroyed and a new one (same shape, then another
 *            shape) made at the same handle value between updates.
 *   setters  a graph built node by node (HtoA-like copies of 1D arrays:
 *            placed t -> array -> placed o): exec setters naming other
 *            1D arrays, a 2D array (refused: "must be 1-dimensional"),
 *            cuGraphMemcpyNodeSetParams + update, an array destroyed and
 *            made again at the same value between setter calls and
 *            between updates.
 *   child    the array copies inside a child graph node (captured into a
 *            graph, added as a child), updated each step as in recap.
 *   bounds   2D and 3D pitched copies between an array and a placed block
 *            whose last row ends at the block's end, and 4 bytes past it
 *            (the driver refuses those: the library must too, and must
 *            accept the others): synchronous, asynchronous, captured, as
 *            graph nodes and through cuGraphMemcpyNodeSetParams.
 *   fill     (CUDAEMU_DEVICE_MEMORY=256M) 128 MiB of placed temporaries
 *            used and freed, then arrays filling 224 MiB of the device,
 *            each written and read back, then temporaries again.
 *
 * Usage: adv_arrays CASE
 */
#include "adv_common.h"

#define TW 16u                  /* the temporary: TW x TH words, pitch TW * 4 */
#define TH 8u
#define OW 32u                  /* the output: OW x OH words, pitch OW * 4 */
#define OH 8u

static CUcontext ctx;
static CUmodule mod;
static CUfunction fill;
static CUstream st;

/* An array of 32-bit words, w x h (h 0: 1D), and its modelled contents. */
typedef struct arr {
    CUarray a;
    unsigned w, h;
    uint32_t m[OH][OW];
} arr;

static unsigned rows_of(const arr *x) { return x->h ? x->h : 1; }

/* Makes x (w x h words, zeroed through a synchronous 2D copy). */
static void arr_make(arr *x, unsigned w, unsigned h)
{
    CUDA_ARRAY_DESCRIPTOR d = { .Width = w, .Height = h, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1 };
    MUST(cuArrayCreate(&x->a, &d));
    x->w = w, x->h = h;
    memset(x->m, 0, sizeof x->m);
    CUDA_MEMCPY2D z = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = x->m, .srcPitch = sizeof x->m[0],
                        .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = x->a, .WidthInBytes = w * 4,
                        .Height = rows_of(x) };
    MUST(cuMemcpy2D(&z));
}

/* A 2D copy of bw x bh words: from t's element (1, 1) into x at (xo, yo). */
static CUDA_MEMCPY2D t_to_arr(CUdeviceptr t, const arr *x, unsigned xo, unsigned yo, unsigned bw, unsigned bh)
{
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = t, .srcPitch = TW * 4,
                        .srcXInBytes = 4, .srcY = 1, .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = x->a,
                        .dstXInBytes = xo * 4, .dstY = yo, .WidthInBytes = bw * 4, .Height = bh };
    return c;
}

/* A 2D copy of the whole of x into o (pitch OW * 4). */
static CUDA_MEMCPY2D arr_to_o(const arr *x, CUdeviceptr o)
{
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = x->a,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = o, .dstPitch = OW * 4,
                        .WidthInBytes = x->w * 4, .Height = rows_of(x) };
    return c;
}

static CUDA_MEMCPY3D as3d(const CUDA_MEMCPY2D *c)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.srcXInBytes = c->srcXInBytes, p.srcY = c->srcY, p.srcMemoryType = c->srcMemoryType;
    p.srcHost = c->srcHost, p.srcDevice = c->srcDevice, p.srcArray = c->srcArray, p.srcPitch = c->srcPitch;
    p.dstXInBytes = c->dstXInBytes, p.dstY = c->dstY, p.dstMemoryType = c->dstMemoryType;
    p.dstHost = c->dstHost, p.dstDevice = c->dstDevice, p.dstArray = c->dstArray, p.dstPitch = c->dstPitch;
    p.WidthInBytes = c->WidthInBytes, p.Height = c->Height, p.Depth = 1;
    return p;
}

/* The model of fill(t, v): t[i] = v + i over TW x TH words. */
static uint32_t t_word(uint32_t v, unsigned x, unsigned y) { return v + y * TW + x; }

/* The box copy's effect on x's model. */
static void model_box(arr *x, uint32_t v, unsigned xo, unsigned yo, unsigned bw, unsigned bh)
{
    for (unsigned y = 0; y < bh; y++)
        for (unsigned i = 0; i < bw; i++) x->m[yo + y][xo + i] = t_word(v, 1 + i, 1 + y);
}

/* Checks o (OW x OH words) holds x's model in its first rows. */
static void check_o(const char *name, CUdeviceptr o, const arr *x)
{
    uint32_t want[OH * OW];
    uint32_t *got = adv_read(o, OH * OW);
    if (!got) {
        adv_check(name, 0, "read failed");
        return;
    }
    for (unsigned y = 0; y < OH; y++)
        for (unsigned i = 0; i < OW; i++)
            want[y * OW + i] = y < rows_of(x) && i < x->w ? x->m[y][i] : got[y * OW + i];
    free(got);
    adv_check_words(name, o, want, OH * OW);
}

static void update_print(const char *what, CUgraphExec e, CUgraph g)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult r = R(cuGraphExecUpdate_v2(e, g, &info));
    printf("%s: update %s result %d\n", what, adv_err(r), (int)info.result);
}

/* Captures fill(t, v) -> t box -> x at (xo, yo) -> o whole, on st. */
static CUgraph capture_step(CUdeviceptr t, CUdeviceptr o, const arr *x, uint32_t v, unsigned xo, unsigned yo,
                            unsigned bw, unsigned bh)
{
    CUgraph g;
    uint64_t n = TW * TH;
    MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ADV_LAUNCH(fill, st, &t, &v, &n);
    CUDA_MEMCPY2D c1 = t_to_arr(t, x, xo, yo, bw, bh), c2 = arr_to_o(x, o);
    R(cuMemcpy2DAsync(&c1, st));
    R(cuMemcpy2DAsync(&c2, st));
    MUST(cuStreamEndCapture(st, &g));
    return g;
}

/* ---------------------------------------------------------------- recap */

/* One step's plan: which array (index in the pool), offsets, box. */
typedef struct plan {
    int which;
    unsigned xo, yo, bw, bh;
    int remake;                 /* destroy the array and make one (w, h) at the same value first */
    unsigned rw, rh;
} plan;

static const plan recap_plan[] = {
    { 0, 2, 1, 4, 3, 0, 0, 0 },  { 0, 2, 1, 4, 3, 0, 0, 0 },     /* identical */
    { 1, 2, 1, 4, 3, 0, 0, 0 },                                    /* another array, same shape */
    { 2, 20, 2, 8, 2, 0, 0, 0 },                                   /* another shape */
    { 2, 3, 0, 8, 2, 0, 0, 0 },                                    /* other offsets */
    { 2, 3, 0, 8, 2, 1, 32, 4 },                                   /* remade: same shape, same value */
    { 2, 3, 0, 8, 2, 0, 0, 0 },
    { 2, 3, 0, 8, 2, 1, 24, 5 },                                   /* remade: another shape, same value */
    { 0, 5, 4, 6, 2, 0, 0, 0 },  { 0, 5, 4, 6, 2, 1, 16, 6 },
};

static arr pool[3];

/* Destroys pool[i] and makes one w x h; prints whether the value came back. */
static void remake(int i, unsigned w, unsigned h, const char *what)
{
    CUarray was = pool[i].a;
    MUST(cuArrayDestroy(pool[i].a));
    arr_make(&pool[i], w, h);
    printf("%s: array remade %ux%u, same value: %s\n", what, w, h, pool[i].a == was ? "yes" : "no");
}

/* Runs the plan, each step's graph made by mk (captured, or in a child). */
static void run_plan(CUgraph (*mk)(CUdeviceptr, CUdeviceptr, const arr *, uint32_t, unsigned, unsigned, unsigned,
                                   unsigned),
                     const char *name)
{
    arr_make(&pool[0], 16, 6);
    arr_make(&pool[1], 16, 6);
    arr_make(&pool[2], 32, 4);
    CUgraphExec e = NULL;
    for (unsigned k = 0; k < sizeof recap_plan / sizeof *recap_plan; k++) {
        const plan *p = &recap_plan[k];
        char what[64];
        snprintf(what, sizeof what, "%s step %u", name, k);
        if (p->remake) remake(p->which, p->rw, p->rh, what);
        arr *x = &pool[p->which];
        CUdeviceptr t, o;
        MUST(cuMemAlloc(&t, TW * TH * 4));               /* placed */
        MUST(cuMemAlloc(&o, OW * OH * 4));
        MUST(cuMemsetD32(o, 0xdead, OW * OH));
        uint32_t v = 1000;                               /* the same kernel each step */
        CUgraph g = mk(t, o, x, v, p->xo, p->yo, p->bw, p->bh);
        if (!e) MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        else update_print(what, e, g);
        if (R(cuGraphLaunch(e, st)) == CUDA_SUCCESS) {
            MUST(cuStreamSynchronize(st));
            model_box(x, v, p->xo, p->yo, p->bw, p->bh);
            check_o(what, o, x);
        }
        MUST(cuGraphDestroy(g));
        MUST(cuMemFree(t));
        MUST(cuMemFree(o));
    }
    MUST(cuGraphExecDestroy(e));
    for (int i = 0; i < 3; i++) MUST(cuArrayDestroy(pool[i].a));
}

static void recap(void) { run_plan(capture_step, "recap"); }

/* ---------------------------------------------------------------- child */

/* capture_step's graph as the child of a graph that holds one more node. */
static CUgraph child_step(CUdeviceptr t, CUdeviceptr o, const arr *x, uint32_t v, unsigned xo, unsigned yo,
                          unsigned bw, unsigned bh)
{
    CUgraph inner = capture_step(t, o, x, v, xo, yo, bw, bh), g;
    CUgraphNode cn, en;
    MUST(cuGraphCreate(&g, 0));
    MUST(cuGraphAddEmptyNode(&en, g, NULL, 0));
    MUST(cuGraphAddChildGraphNode(&cn, g, &en, 1, inner));
    MUST(cuGraphDestroy(inner));
    return g;
}

static void child(void) { run_plan(child_step, "child"); }

/* -------------------------------------------------------------- setters */

#define LW 64u                  /* 1D arrays of LW words */

/* A 1D copy of LW words: placed t -> array (at element off) or array -> o. */
static CUDA_MEMCPY3D lin(CUmemorytype st_, CUdeviceptr dev, CUarray a, unsigned off, unsigned words)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    if (st_ == CU_MEMORYTYPE_ARRAY) {                      /* array -> dev */
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a, c.srcXInBytes = off * 4;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dev;
    } else {                                               /* dev -> array */
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = dev;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a, c.dstXInBytes = off * 4;
    }
    c.WidthInBytes = words * 4, c.Height = c.Depth = 1;
    return c;
}

static CUarray mk1d(unsigned w)
{
    CUarray a;
    CUDA_ARRAY_DESCRIPTOR d = { .Width = w, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1 };
    MUST(cuArrayCreate(&a, &d));
    uint32_t z[LW] = { 0 };
    MUST(cuMemcpyHtoA(a, 0, z, w * 4));
    return a;
}

static void setters(void)
{
    CUdeviceptr t, o;
    MUST(cuMemAlloc(&t, LW * 4));
    MUST(cuMemAlloc(&o, LW * 4));
    CUarray a = mk1d(LW), b = mk1d(LW), m2;
    CUDA_ARRAY_DESCRIPTOR d2 = { .Width = LW, .Height = 2, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1 };
    MUST(cuArrayCreate(&m2, &d2));
    uint64_t n = LW;
    uint32_t v = 7;
    void *args[] = { &t, &v, &n };
    CUgraph g;
    CUgraphNode nd[3];
    MUST(cuGraphCreate(&g, 0));
    nd[0] = adv_add_kernel(g, NULL, 0, fill, args);
    CUDA_MEMCPY3D in = lin(CU_MEMORYTYPE_DEVICE, t, a, 0, LW), outc = lin(CU_MEMORYTYPE_ARRAY, o, a, 0, LW);
    MUST(cuGraphAddMemcpyNode(&nd[1], g, &nd[0], 1, &in, ctx));
    MUST(cuGraphAddMemcpyNode(&nd[2], g, &nd[1], 1, &outc, ctx));
    CUgraphExec e;
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    uint32_t want[LW];
    /* each step: the array (a or b), its offset window, whether it is
     * destroyed and made again (same value) first: then with the
     * parameters the exec already holds. Steps 0, 1, 4, 5: exec setters;
     * 2, 3, 6, 7: node setters and an update. The model of o is the
     * window's words of fill(t, 7). */
    static const int which[8] = { 0, 1, 1, 0, 0, 1, 1, 0 }, again[8] = { 0, 0, 1, 0, 1, 0, 1, 0 };
    static const unsigned offs[8] = { 0, 8, 8, 16, 16, 0, 0, 8 };
    for (int k = 0; k < 8; k++) {
        char what[48];
        snprintf(what, sizeof what, "setters step %d", k);
        CUarray *cur = which[k] ? &b : &a;
        unsigned off = offs[k], words = LW - off;
        if (again[k]) {
            CUarray was = *cur;
            MUST(cuArrayDestroy(*cur));
            *cur = mk1d(LW);
            printf("%s: array remade, same value: %s\n", what, *cur == was ? "yes" : "no");
        }
        in = lin(CU_MEMORYTYPE_DEVICE, t, *cur, off, words);
        outc = lin(CU_MEMORYTYPE_ARRAY, o, *cur, off, words);
        if (k % 4 < 2) {
            R(cuGraphExecMemcpyNodeSetParams(e, nd[1], &in, ctx));
            R(cuGraphExecMemcpyNodeSetParams(e, nd[2], &outc, ctx));
        } else {
            MUST(cuGraphMemcpyNodeSetParams(nd[1], &in));
            MUST(cuGraphMemcpyNodeSetParams(nd[2], &outc));
            update_print(what, e, g);
        }
        MUST(cuMemsetD32(o, 0xdead, LW));
        if (R(cuGraphLaunch(e, st)) == CUDA_SUCCESS) {
            MUST(cuStreamSynchronize(st));
            for (unsigned i = 0; i < LW; i++) want[i] = i < words ? 7 + i : 0xdead;
            adv_check_words(what, o, want, LW);
        }
    }
    /* a 2D array is not a 1-dimensional operand: the setter is refused */
    in = lin(CU_MEMORYTYPE_DEVICE, t, m2, 0, LW);
    CUresult r = R(cuGraphExecMemcpyNodeSetParams(e, nd[1], &in, ctx));
    printf("setters: 2D array in the exec setter: %s\n", adv_err(r));
    /* the same setter again after the array it names is destroyed: refused */
    in = lin(CU_MEMORYTYPE_DEVICE, t, b, 0, LW);
    MUST(cuArrayDestroy(b));
    r = R(cuGraphExecMemcpyNodeSetParams(e, nd[1], &in, ctx));
    printf("setters: destroyed array in the exec setter: %s\n", adv_err(r));
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    /* an exec whose node copies one row of the 2D array: the setter with the
     * parameters it holds is refused too (the instantiation-time operand is
     * multidimensional), however identical */
    MUST(cuGraphCreate(&g, 0));
    nd[0] = adv_add_kernel(g, NULL, 0, fill, args);
    in = lin(CU_MEMORYTYPE_DEVICE, t, m2, 0, LW);
    MUST(cuGraphAddMemcpyNode(&nd[1], g, &nd[0], 1, &in, ctx));
    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
    r = R(cuGraphExecMemcpyNodeSetParams(e, nd[1], &in, ctx));
    printf("setters: identical setter, 2D array at instantiation: %s\n", adv_err(r));
    update_print("setters: identical update, 2D array", e, g);
    MUST(cuGraphLaunch(e, st));
    MUST(cuStreamSynchronize(st));
    uint32_t row[LW];
    MUST(cuMemcpyAtoH(row, m2, 0, sizeof row));
    for (unsigned i = 0; i < LW; i++) want[i] = 7 + i;
    adv_check("setters 2D array row", memcmp(row, want, sizeof row) == 0, "row 0 of the 2D array");
    MUST(cuGraphExecDestroy(e));
    MUST(cuGraphDestroy(g));
    MUST(cuArrayDestroy(a));
    MUST(cuArrayDestroy(m2));
    MUST(cuMemFree(t));
    MUST(cuMemFree(o));
}

/* --------------------------------------------------------------- bounds */

#define BB 1244u                /* the placed block's bytes: 9 rows of BP, then 92 */
#define BP 128u                 /* its rows' pitch */
#define LAST 9u                 /* the copies' last row in the block */

/* Whether the block's bytes (host) hold, at row r0 + row (+ layer z's
 * rows), byte xo, the 8 words of src rows sy.. from word 2, for h rows. */
static int block_holds(const unsigned char *host, unsigned r0, unsigned h, size_t xo, const uint32_t *src,
                       unsigned src_pitch_words, unsigned sy)
{
    for (unsigned row = 0; row < h; row++)
        for (unsigned i = 0; i < 8; i++) {
            uint32_t got;
            memcpy(&got, host + (r0 + row) * BP + xo + 4 * i, 4);
            if (got != src[(sy + row) * src_pitch_words + 2 + i]) return 0;
        }
    return 1;
}

/* Copies of 8 words x 3 rows (x 2 layers in 3D) from an array into the
 * block, the last row's end at BB + past (past 4: the driver refuses). */
static void bounds(void)
{
    arr x;
    arr_make(&x, 16, 6);
    for (unsigned y = 0; y < 6; y++)
        for (unsigned i = 0; i < 16; i++) x.m[y][i] = 100 * y + i;
    CUDA_MEMCPY2D w = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = x.m, .srcPitch = sizeof x.m[0],
                        .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = x.a, .WidthInBytes = 64, .Height = 6 };
    MUST(cuMemcpy2D(&w));
    CUarray v3;
    static uint32_t m3[2][6][16];
    CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 16, .Height = 6, .Depth = 2, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
                                   .NumChannels = 1 };
    MUST(cuArray3DCreate(&v3, &d3));
    for (unsigned z = 0; z < 2; z++)
        for (unsigned y = 0; y < 6; y++)
            for (unsigned i = 0; i < 16; i++) m3[z][y][i] = 10000 * (z + 1) + 100 * y + i;
    CUDA_MEMCPY3D w3;
    memset(&w3, 0, sizeof w3);
    w3.srcMemoryType = CU_MEMORYTYPE_HOST, w3.srcHost = m3, w3.srcPitch = 64, w3.srcHeight = 6;
    w3.dstMemoryType = CU_MEMORYTYPE_ARRAY, w3.dstArray = v3;
    w3.WidthInBytes = 64, w3.Height = 6, w3.Depth = 2;
    MUST(cuMemcpy3D(&w3));
    CUdeviceptr b, b2;
    MUST(cuMemAlloc(&b, BB));
    MUST(cuMemAlloc(&b2, BB));                          /* placed after b: mapped bytes past b's end */
    static unsigned char host[BB];
    for (unsigned past = 0; past <= 4; past += 4) {
        unsigned h = 3, y = LAST - h + 1, xb = BB + past - 32 - LAST * BP;   /* 60 + past */
        for (int form = 0; form < 6; form++) {
            MUST(cuMemsetD8(b, 0, BB));
            CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = x.a, .srcXInBytes = 8,
                                .srcY = 1, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b,
                                .dstXInBytes = xb, .dstY = y, .dstPitch = BP, .WidthInBytes = 32, .Height = h };
            CUDA_MEMCPY3D c3 = as3d(&c), p3 = c3;
            /* 3D: layers of 6 rows from row 1: layer 1's last row is 6 + 1 + 2 = LAST */
            p3.srcArray = v3, p3.dstY = 1, p3.dstHeight = 6, p3.Depth = 2;
            CUresult r = CUDA_SUCCESS;
            CUgraph g = NULL;
            CUgraphExec e = NULL;
            CUgraphNode node;
            switch (form) {
            case 0: r = R(cuMemcpy2D(&c)); break;
            case 1: r = R(cuMemcpy2DUnaligned(&c)); break;
            case 2: r = R(cuMemcpy2DAsync(&c, st)); break;
            case 3: r = R(cuMemcpy3DAsync(&p3, st)); break;
            case 4:                                      /* a graph node */
                MUST(cuGraphCreate(&g, 0));
                r = R(cuGraphAddMemcpyNode(&node, g, NULL, 0, &c3, ctx));
                if (r == CUDA_SUCCESS) {
                    MUST(cuGraphInstantiateWithFlags(&e, g, 0));
                    r = R(cuGraphLaunch(e, st));
                }
                break;
            case 5: {                                    /* a node set to it, the exec updated */
                CUDA_MEMCPY3D ok3 = c3;
                ok3.dstXInBytes = 0;
                MUST(cuGraphCreate(&g, 0));
                MUST(cuGraphAddMemcpyNode(&node, g, NULL, 0, &ok3, ctx));
                MUST(cuGraphInstantiateWithFlags(&e, g, 0));
                r = R(cuGraphMemcpyNodeSetParams(node, &c3));
                if (r == CUDA_SUCCESS) {
                    CUgraphExecUpdateResultInfo info;
                    r = R(cuGraphExecUpdate_v2(e, g, &info));
                    if (r == CUDA_SUCCESS) r = R(cuGraphLaunch(e, st));
                }
                break;
            }
            }
            MUST(cuStreamSynchronize(st));
            printf("bounds past %u form %d: %s\n", past, form, adv_err(r));
            if (e) MUST(cuGraphExecDestroy(e));
            if (g) MUST(cuGraphDestroy(g));
            char name[48];
            snprintf(name, sizeof name, "bounds past %u form %d", past, form);
            MUST(cuMemcpyDtoH(host, b, BB));
            int ok = 1;
            if (r != CUDA_SUCCESS)
                for (unsigned i = 0; i < BB; i++) ok &= host[i] == 0;
            else if (form == 3)
                ok = block_holds(host, 1, h, xb, &m3[0][0][0], 16, 1) && block_holds(host, 7, h, xb, &m3[1][0][0], 16, 1);
            else
                ok = block_holds(host, y, h, xb, &x.m[0][0], OW, 1);
            adv_check(name, ok && (r == CUDA_SUCCESS) == (past == 0), "%s", r == CUDA_SUCCESS ? "copied" : "untouched");
        }
    }
    /* the other way: the block's last rows into the array (sync and async) */
    for (unsigned past = 0; past <= 4; past += 4) {
        unsigned h = 2, y = LAST - h + 1, xb = BB + past - 32 - LAST * BP;
        CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = b, .srcXInBytes = xb, .srcY = y,
                            .srcPitch = BP, .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = x.a,
                            .dstXInBytes = 16, .dstY = 4, .WidthInBytes = 32, .Height = h };
        CUresult r1 = R(cuMemcpy2D(&c)), r2 = R(cuMemcpy2DAsync(&c, st));
        MUST(cuStreamSynchronize(st));
        printf("bounds to array past %u: %s %s\n", past, adv_err(r1), adv_err(r2));
        adv_check("bounds to array", (r1 == CUDA_SUCCESS) == (past == 0) && r1 == r2, "%s", adv_err(r1));
    }
    MUST(cuMemFree(b));
    MUST(cuMemFree(b2));
    MUST(cuArrayDestroy(x.a));
    MUST(cuArrayDestroy(v3));
}

/* ----------------------------------------------------------------- fill */

#define MIB (1u << 20)

static void fill_case(void)
{
    CUdeviceptr tmp[8];
    for (int round = 0; round < 2; round++) {
        /* 128 MiB of temporaries, used in a captured graph, freed */
        CUgraph g;
        CUgraphExec e;
        uint64_t n = 1024;
        uint32_t v = 3 + round;
        for (int i = 0; i < 8; i++) MUST(cuMemAlloc(&tmp[i], 16 * MIB));
        MUST(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        for (int i = 0; i < 8; i++) ADV_LAUNCH(fill, st, &tmp[i], &v, &n);
        MUST(cuStreamEndCapture(st, &g));
        MUST(cuGraphInstantiateWithFlags(&e, g, 0));
        MUST(cuGraphLaunch(e, st));
        MUST(cuStreamSynchronize(st));
        uint32_t want[1024];
        for (unsigned i = 0; i < 1024; i++) want[i] = v + i;
        adv_check_words("fill temporaries", tmp[7], want, 1024);
        MUST(cuGraphExecDestroy(e));
        MUST(cuGraphDestroy(g));
        for (int i = 0; i < 8; i++) MUST(cuMemFree(tmp[i]));
        /* arrays: 14 of 16 MiB (1024 x 1024 float4) */
        CUarray a[14];
        CUDA_ARRAY_DESCRIPTOR d = { .Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 };
        int made = 0;
        for (int i = 0; i < 14; i++) {
            if (R(cuArrayCreate(&a[i], &d)) != CUDA_SUCCESS) break;
            made++;
        }
        printf("fill round %d: %d arrays of 16 MiB\n", round, made);
        int ok = 1;
        for (int i = 0; i < made; i++) {
            uint32_t w4[4] = { i, i + 1, i + 2, i + 3 }, r4[4] = { 0 };
            CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = w4, .srcPitch = 16,
                                .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a[i], .dstXInBytes = 16 * 1023,
                                .dstY = 1023, .WidthInBytes = 16, .Height = 1 };
            R(cuMemcpy2D(&c));
            CUDA_MEMCPY2D back = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a[i], .srcXInBytes = 16 * 1023,
                                   .srcY = 1023, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = r4, .dstPitch = 16,
                                   .WidthInBytes = 16, .Height = 1 };
            R(cuMemcpy2D(&back));
            ok &= memcmp(w4, r4, 16) == 0;
        }
        adv_check("fill arrays", ok && made == 14, "%d arrays written and read", made);
        for (int i = 0; i < made; i++) MUST(cuArrayDestroy(a[i]));
    }
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "recap", "setters", "child", "bounds", "fill", NULL };
    int c = adv_case(argc, argv, names);
    adv_open(&ctx, &mod);
    fill = adv_fn(mod, "fill_u32");
    MUST(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    switch (c) {
    case 0: recap(); break;
    case 1: setters(); break;
    case 2: child(); break;
    case 3: bounds(); break;
    case 4: fill_case(); break;
    }
    MUST(cuStreamDestroy(st));
    return adv_finish();
}
