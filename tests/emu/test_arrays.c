/*
 * test_arrays.c: CUDA arrays as copy operands in the emulated driver
 * (docs/emulator.md "CUDA arrays"): contents that copies write and read
 * (1D copies at byte offsets of the first row, cuMemcpy2D/3D boxes with
 * srcXInBytes / srcY / srcZ), the documented refusals
 * (CUDA_ERROR_INVALID_VALUE: a box outside the array, an offset or width
 * that is not whole elements, cuMemcpyAtoA between element sizes), the
 * asynchronous forms and their capture, memcpy nodes naming arrays with
 * their setters and cuGraphExecUpdate's rules (memory type fixed, 1D
 * operands only for the exec setter), handle values given out again last
 * freed first, and the violation of an exec whose array was destroyed
 * (also when its handle value now names another array).
 */
#include "graph_util.h"

static CUarray mk2d(size_t w, size_t h, CUarray_format f, unsigned ch)
{
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR d = { .Width = w, .Height = h, .Format = f, .NumChannels = ch };
    CHECK_CU(cuArrayCreate(&a, &d), CUDA_SUCCESS);
    return a;
}

static CUarray mk3d(size_t w, size_t h, size_t dp)
{
    CUarray a = NULL;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = w, .Height = h, .Depth = dp, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
                                  .NumChannels = 1 };
    CHECK_CU(cuArray3DCreate(&a, &d), CUDA_SUCCESS);
    return a;
}

/* A host <-> array 3D copy of a box (w bytes, h rows, d layers) at (x, y, z)
 * of the array; the host side dense, pitch w, height h. */
static CUDA_MEMCPY3D box(CUarray a, int to_array, void *host, size_t x, size_t y, size_t z, size_t w, size_t h,
                         size_t d)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    if (to_array) {
        c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host, c.srcPitch = w, c.srcHeight = h;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a, c.dstXInBytes = x, c.dstY = y, c.dstZ = z;
    } else {
        c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstPitch = w, c.dstHeight = h;
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a, c.srcXInBytes = x, c.srcY = y, c.srcZ = z;
    }
    c.WidthInBytes = w, c.Height = h, c.Depth = d;
    return c;
}

/* 1D copies: HtoA, AtoH, DtoA, AtoD, AtoA at offsets; the refusals. */
TEST(copies_1d)
{
    CUarray a = mk2d(64, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1), b = mk2d(64, 0, CU_AD_FORMAT_FLOAT, 1);
    CUarray c8 = mk2d(64, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1);
    uint32_t in[64], out[64], dev_out[N_ELEMS];
    for (int i = 0; i < 64; i++) in[i] = 1000 + i;
    CHECK_CU(cuMemcpyHtoA(a, 0, in, sizeof in), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoA(b, 16, a, 0, 32), CUDA_SUCCESS);        /* same element size, other format */
    memset(out, 0, sizeof out);
    CHECK_CU(cuMemcpyAtoH(out, b, 16, 32), CUDA_SUCCESS);
    CHECK(out[0] == 1000 && out[7] == 1007);
    CUdeviceptr p = gu_alloc();
    CHECK_CU(cuMemcpyAtoD(p, a, 8, 16), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoA(a, 200, p, 16), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoH(out, a, 200, 16), CUDA_SUCCESS);
    CHECK(out[0] == 1002 && out[3] == 1005);
    gu_read(p, dev_out);
    CHECK(dev_out[0] == 1002);
    /* past the row, partial elements, element sizes that differ */
    CHECK_CU(cuMemcpyHtoA(a, 252, in, 8), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyHtoA(a, 2, in, 4), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyHtoA(a, 0, in, 6), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyAtoA(c8, 0, a, 0, 8), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyAtoD(p, a, 0, N_ELEMS * 4 + 4), CUDA_ERROR_INVALID_VALUE);  /* past the array */
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(c8), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(b), CUDA_SUCCESS);
    /* a destroyed array is no copy operand */
    CHECK_CU(cuArrayDestroy(a), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoH(out, a, 0, 4), CUDA_ERROR_INVALID_VALUE);
}

/* 2D and 3D boxes: written at an offset, read back whole, compared with a
 * host model; boxes that leave the array refused. */
TEST(copies_2d_3d)
{
    enum { W = 8, H = 6, D = 4 };
    CUarray a = mk2d(W, H, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    uint32_t src[3 * 2], model[H][W], back[H][W];
    memset(model, 0, sizeof model);
    CHECK_CU(cuMemcpyHtoA(a, 0, model, sizeof model[0]), CUDA_SUCCESS);   /* row 0 */
    uint32_t zero_rows[H][W];
    memset(zero_rows, 0, sizeof zero_rows);
    CUDA_MEMCPY2D z2 = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = zero_rows, .srcPitch = W * 4,
                         .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a, .WidthInBytes = W * 4, .Height = H };
    CHECK_CU(cuMemcpy2D(&z2), CUDA_SUCCESS);
    for (int i = 0; i < 6; i++) src[i] = 70 + i;
    /* 3 elements x 2 rows at element (2, 3) */
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = 12,
                        .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a, .dstXInBytes = 8, .dstY = 3,
                        .WidthInBytes = 12, .Height = 2 };
    CHECK_CU(cuMemcpy2D(&c), CUDA_SUCCESS);
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++) model[3 + y][2 + x] = src[y * 3 + x];
    CUDA_MEMCPY2D r = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a, .dstMemoryType = CU_MEMORYTYPE_HOST,
                        .dstHost = back, .dstPitch = W * 4, .WidthInBytes = W * 4, .Height = H };
    CHECK_CU(cuMemcpy2DUnaligned(&r), CUDA_SUCCESS);
    CHECK(memcmp(back, model, sizeof model) == 0);
    c.dstY = 5;                                                    /* rows 5, 6 of 6 */
    CHECK_CU(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
    c.dstY = 0, c.dstXInBytes = 24;                                /* elements 6..8 of 8 */
    CHECK_CU(cuMemcpy2DAsync(&c, NULL), CUDA_ERROR_INVALID_VALUE);
    c.dstXInBytes = 6;                                             /* not whole elements */
    CHECK_CU(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuArrayDestroy(a), CUDA_SUCCESS);

    CUarray v = mk3d(W, H, D);
    static uint32_t vm[D][H][W], vb[D][H][W];
    memset(vm, 0, sizeof vm);
    CUDA_MEMCPY3D all = box(v, 1, vm, 0, 0, 0, W * 4, H, D);
    CHECK_CU(cuMemcpy3D(&all), CUDA_SUCCESS);
    uint32_t blk[2][2][2];
    for (int i = 0; i < 8; i++) ((uint32_t *)blk)[i] = 500 + i;
    CUDA_MEMCPY3D put = box(v, 1, blk, 4 * 5, 4, 2, 8, 2, 2);     /* at (5, 4, 2) */
    CHECK_CU(cuMemcpy3DAsync(&put, NULL), CUDA_SUCCESS);
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 2; x++) vm[2 + z][4 + y][5 + x] = blk[z][y][x];
    CUDA_MEMCPY3D get = box(v, 0, vb, 0, 0, 0, W * 4, H, D);
    CHECK_CU(cuMemcpy3D(&get), CUDA_SUCCESS);
    CHECK(memcmp(vb, vm, sizeof vm) == 0);
    put.dstZ = 3;                                                  /* layers 3, 4 of 4 */
    CHECK_CU(cuMemcpy3D(&put), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuArrayDestroy(v), CUDA_SUCCESS);
}

/* Asynchronous copies captured: memcpy nodes naming the array, run at launch. */
TEST(captured_copies)
{
    CUarray a = mk2d(16, 0, CU_AD_FORMAT_SIGNED_INT32, 1);
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    uint32_t in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = 7 * i;
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyHtoAAsync(a, 16, in, 32, s), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyAtoHAsync(out, a, 16, 32, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 2);
    CUgraphNode nodes[2];
    CHECK_CU(cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    CUDA_MEMCPY3D got;
    CHECK_CU(cuGraphMemcpyNodeGetParams(nodes[0], &got), CUDA_SUCCESS);
    CHECK(got.dstMemoryType == CU_MEMORYTYPE_ARRAY && got.dstArray == a && got.dstXInBytes == 16);
    CUgraphExec e;
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    memset(out, 0, sizeof out);
    CHECK_CU(cuGraphLaunch(e, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(out[0] == 0 && out[7] == 49);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(a), CUDA_SUCCESS);
}

/* Node setters and updates: another array of the same type is accepted,
 * a change of memory type refused (cuGraphExecUpdate: PARAMETERS_CHANGED);
 * the exec setter takes 1D arrays only ("must be 1-dimensional"). */
TEST(node_params_and_updates)
{
    CUarray a = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1), b = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    CUarray m2 = mk2d(N_ELEMS, 2, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    CUdeviceptr p = gu_alloc(), q = gu_alloc();
    uint32_t va[N_ELEMS], vb[N_ELEMS], out[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++) va[i] = 1, vb[i] = 2;
    CHECK_CU(cuMemcpyHtoA(a, 0, va, sizeof va), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyHtoA(b, 0, vb, sizeof vb), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyHtoA(m2, 0, vb, sizeof vb), CUDA_SUCCESS);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = p;
    c.WidthInBytes = sizeof va, c.Height = c.Depth = 1;
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    gu_read(p, out);
    CHECK(out[0] == 1 && out[N_ELEMS - 1] == 1);
    /* exec setter: another 1D array, another destination */
    c.srcArray = b, c.dstDevice = q;
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, n, &c, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    gu_read(q, out);
    CHECK(out[0] == 2);
    /* a 2D array is a multidimensional operand, whatever the copy's shape */
    c.srcArray = m2;
    CHECK_CU(cuGraphExecMemcpyNodeSetParams(e, n, &c, g_ctx), CUDA_ERROR_INVALID_VALUE);
    /* cuGraphExecUpdate: a 2D array of the same type is fine */
    CHECK_CU(cuGraphMemcpyNodeSetParams(n, &c), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g, &info), CUDA_SUCCESS);
    /* a device source instead of an array: refused */
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = p;
    CHECK_CU(cuGraphMemcpyNodeSetParams(n, &c), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecUpdate(e, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(a), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(b), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(m2), CUDA_SUCCESS);
}

/* Freed array handle values come back last freed first; an exec that
 * names a destroyed array is a violation at launch, also when the value
 * names a new array, and runs again once updated to the new array. */
TEST(reuse_and_stale_exec)
{
    CUarray a = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1), b = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    CHECK_CU(cuArrayDestroy(a), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(b), CUDA_SUCCESS);
    CUarray x = mk2d(4, 4, CU_AD_FORMAT_UNSIGNED_INT8, 4), y = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    CHECK(x == b && y == a);
    CHECK_CU(cuArrayDestroy(x), CUDA_SUCCESS);

    uint32_t v[N_ELEMS], out[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++) v[i] = 5;
    CHECK_CU(cuMemcpyHtoA(y, 0, v, sizeof v), CUDA_SUCCESS);
    CUdeviceptr p = gu_alloc();
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = y;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = p;
    c.WidthInBytes = sizeof v, c.Height = c.Depth = 1;
    CUgraph g;
    CUgraphNode n;
    CUgraphExec e;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(y), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(p, 0, N_ELEMS), CUDA_SUCCESS);
    /* destroyed, value not reused */
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 1);
    /* the value given to a new array: still the destroyed one to the exec */
    CUarray z = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    CHECK(z == y);
    for (int i = 0; i < N_ELEMS; i++) v[i] = 9;
    CHECK_CU(cuMemcpyHtoA(z, 0, v, sizeof v), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 1);
    gu_read(p, out);
    CHECK(out[0] == 0);                                           /* nothing copied */
    /* the graph's node names the destroyed one too; set anew, it names z */
    CHECK_CU(cuGraphMemcpyNodeSetParams(n, &c), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g, &info), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 0);
    gu_read(p, out);
    CHECK(out[0] == 9 && out[N_ELEMS - 1] == 9);
    /* a queued stream copy binds the same way */
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuStreamWaitValue32(s, p, 1, CU_STREAM_WAIT_VALUE_EQ), CUDA_SUCCESS);   /* held until p[0] == 1 */
    CHECK_CU(cuMemcpyAtoHAsync(out, z, 0, 16, s), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(z), CUDA_SUCCESS);
    CUarray z2 = mk2d(N_ELEMS, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1);
    CHECK(z2 == z);
    emu_test_stderr_begin();
    CHECK_CU(cuStreamWriteValue32(NULL, p, 1, 0), CUDA_SUCCESS);   /* atomic, as the wait reads */
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuArrayDestroy(z2), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

int main(void)
{
    gu_setup();
    RUN(copies_1d);
    RUN(copies_2d_3d);
    RUN(captured_copies);
    RUN(node_params_and_updates);
    RUN(reuse_and_stale_exec);
    return check_done();
}
