/*
 * test_tex.c: texture objects of the emulated driver (docs/emulator.md,
 * "Texture objects"): the device's texture alignment (512) and that
 * cuMemAlloc, cuMemAllocAsync, created pools and cuMemAllocPitch give
 * pointers aligned to it; cuTexObjectCreate's documented refusals
 * (CUDA_ERROR_INVALID_VALUE: a devPtr off the texture alignment, a pitch off
 * the pitch alignment, resource flags, a view for linear memory, sizes past
 * the limits); kernels reading linear, pitch2D and array resources through
 * the handle (mod_test.so's tex_read: out-of-range reads, clamp and
 * border); the resource descriptor given back; a destroyed handle's value
 * given to the next texture; and the violations of a fetch through a
 * destroyed handle and through a texture whose memory was freed.
 */
#include <stdint.h>

#include "check.h"
#include "emu_test.h"

static CUcontext ctx;
static CUmodule mod;
static CUfunction k_read;

/* tex_read(tex, x0, y0, w, h, out) on the default stream, synchronized;
 * returns the count of fetches that failed (out[w*h]). */
static uint32_t tex_read(CUtexObject t, int32_t x0, int32_t y0, uint32_t w, uint32_t h, CUdeviceptr out,
                         uint32_t *host)
{
    void *kp[] = { &t, &x0, &y0, &w, &h, &out };
    CHECK_CU(cuLaunchKernel(k_read, 1, 1, 1, 1, 1, 1, 0, NULL, kp, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyDtoH(host, out, (w * h + 1) * 4), CUDA_SUCCESS);
    return host[w * h];
}

static CUDA_RESOURCE_DESC linear(CUdeviceptr p, size_t bytes)
{
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_LINEAR;
    r.res.linear.devPtr = p;
    r.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
    r.res.linear.numChannels = 1;
    r.res.linear.sizeInBytes = bytes;
    return r;
}

static CUDA_RESOURCE_DESC pitch2d(CUdeviceptr p, size_t w, size_t h, size_t pitch)
{
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_PITCH2D;
    r.res.pitch2D.devPtr = p;
    r.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT32;
    r.res.pitch2D.numChannels = 1;
    r.res.pitch2D.width = w;
    r.res.pitch2D.height = h;
    r.res.pitch2D.pitchInBytes = pitch;
    return r;
}

static CUDA_TEXTURE_DESC td(CUaddress_mode m)
{
    CUDA_TEXTURE_DESC t;
    memset(&t, 0, sizeof t);
    t.addressMode[0] = t.addressMode[1] = m;
    t.flags = CU_TRSF_READ_AS_INTEGER;
    return t;
}

TEST(alignment)
{
    int a = 0, pa = 0;
    CHECK_CU(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetAttribute(&pa, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 0), CUDA_SUCCESS);
    CHECK_EQ(a, 512);
    CHECK_EQ(pa, 512);
    CUdeviceptr p[6];
    size_t pitch = 0;
    CUmemoryPool pool;
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CHECK_CU(cuMemPoolCreate(&pool, &pp), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p[0], 100), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p[1], 300), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p[2], 700, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p[3], 256, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&p[4], 768, pool, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocPitch(&p[5], &pitch, 100, 3, 4), CUDA_SUCCESS);
    for (int i = 0; i < 6; i++) CHECK_EQ(p[i] % (CUdeviceptr)a, 0);
    CHECK_EQ(pitch % (size_t)pa, 0);
    for (int i = 2; i < 5; i++) CHECK_CU(cuMemFreeAsync(p[i], NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    for (int i = 0; i < 6; i += (i == 1 ? 4 : 1)) CHECK_CU(cuMemFree(p[i]), CUDA_SUCCESS);
    CHECK_CU(cuMemPoolDestroy(pool), CUDA_SUCCESS);
}

TEST(refusals)
{
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 8192), CUDA_SUCCESS);
    CUtexObject t = 0;
    CUDA_TEXTURE_DESC d = td(CU_TR_ADDRESS_MODE_CLAMP);
    CUDA_RESOURCE_DESC r = linear(p + 256, 1024);
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);   /* off the alignment */
    r = linear(p + 512, 1024);
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_SUCCESS);              /* on it */
    CHECK_CU(cuTexObjectDestroy(t), CUDA_SUCCESS);
    r.flags = 1;
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    r = linear(p, 0);
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    r = linear(p, 1024);
    r.res.linear.numChannels = 3;
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    r = linear(p, 1024);
    CUDA_RESOURCE_VIEW_DESC v;
    memset(&v, 0, sizeof v);
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, &v), CUDA_ERROR_INVALID_VALUE);    /* views: arrays only */
    CHECK_CU(cuTexObjectCreate(&t, &r, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    r = pitch2d(p + 256, 4, 4, 512);
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    r = pitch2d(p, 4, 4, 256);                                                  /* pitch off its alignment */
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    r = pitch2d(p, 200, 4, 512);                                                /* a row wider than the pitch */
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    r = pitch2d(p, 4, 70000, 512);                                              /* past the height limit */
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuTexObjectDestroy(12345), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuTexObjectDestroy(0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

/* Linear and pitch2D reads through the handle, descriptors, handle reuse. */
TEST(reads)
{
    CUdeviceptr buf, pb, out;
    size_t pitch = 0;
    uint32_t host[4096], got[64];
    for (uint32_t i = 0; i < 4096; i++) host[i] = 1000 + i;
    CHECK_CU(cuMemAlloc(&buf, 16 * 4), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocPitch(&pb, &pitch, 4 * 4, 3, 4), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&out, 64 * 4), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyHtoD(buf, host, 16 * 4), CUDA_SUCCESS);
    CHECK_CU(cuMemcpyHtoD(pb, host, pitch * 3), CUDA_SUCCESS);

    CUtexObject t1 = 0, t2 = 0;
    CUDA_TEXTURE_DESC d = td(CU_TR_ADDRESS_MODE_CLAMP);
    CUDA_RESOURCE_DESC r = linear(buf, 16 * 4), back;
    CHECK_CU(cuTexObjectCreate(&t1, &r, &d, NULL), CUDA_SUCCESS);
    CHECK(t1 != 0);
    CHECK_CU(cuTexObjectGetResourceDesc(&back, t1), CUDA_SUCCESS);
    CHECK_EQ(back.resType, CU_RESOURCE_TYPE_LINEAR);
    CHECK_EQ(back.res.linear.devPtr, buf);
    CHECK_EQ(back.res.linear.sizeInBytes, 64);
    CHECK_EQ(tex_read(t1, -2, 0, 20, 1, out, got), 0);
    CHECK_EQ(got[0], 0);                     /* before the start: zeros (tex1Dfetch) */
    CHECK_EQ(got[2], 1000);
    CHECK_EQ(got[17], 1015);
    CHECK_EQ(got[18], 0);                    /* past the end */

    r = pitch2d(pb, 4, 3, pitch);
    CHECK_CU(cuTexObjectCreate(&t2, &r, &d, NULL), CUDA_SUCCESS);
    CHECK(t2 != t1);
    CHECK_EQ(tex_read(t2, 0, 0, 4, 3, out, got), 0);
    for (uint32_t y = 0; y < 3; y++)
        for (uint32_t x = 0; x < 4; x++) CHECK_EQ(got[y * 4 + x], 1000 + y * (pitch / 4) + x);
    CHECK_EQ(tex_read(t2, -1, 2, 6, 2, out, got), 0);   /* clamped: row 2 twice, columns 0..3 */
    CHECK_EQ(got[0], 1000 + 2 * (pitch / 4));
    CHECK_EQ(got[5], 1000 + 2 * (pitch / 4) + 3);
    CHECK_EQ(got[6], got[0]);
    CHECK_CU(cuTexObjectDestroy(t2), CUDA_SUCCESS);
    d = td(CU_TR_ADDRESS_MODE_BORDER);
    CUtexObject t3 = 0;
    CHECK_CU(cuTexObjectCreate(&t3, &r, &d, NULL), CUDA_SUCCESS);
    CHECK_EQ(t3, t2);                        /* the freed value given out again */
    CHECK_EQ(tex_read(t3, -1, 0, 6, 1, out, got), 0);
    CHECK_EQ(got[0], 0);                     /* the border */
    CHECK_EQ(got[1], 1000);
    CHECK_EQ(got[5], 0);
    CHECK_CU(cuTexObjectDestroy(t3), CUDA_SUCCESS);
    CHECK_CU(cuTexObjectDestroy(t1), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(buf), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(pb), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
}

/* A 2D array as the resource. */
TEST(array)
{
    CUarray a = NULL;
    CUDA_ARRAY_DESCRIPTOR ad = { .Width = 3, .Height = 2, .Format = CU_AD_FORMAT_UNSIGNED_INT16, .NumChannels = 1 };
    CHECK_CU(cuArrayCreate(&a, &ad), CUDA_SUCCESS);
    uint16_t v[6] = { 1, 2, 3, 4, 5, 6 };
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = v, c.srcPitch = 6;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a;
    c.WidthInBytes = 6, c.Height = 2;
    CHECK_CU(cuMemcpy2D(&c), CUDA_SUCCESS);
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = a;
    CUDA_TEXTURE_DESC d = td(CU_TR_ADDRESS_MODE_CLAMP);
    CUtexObject t = 0;
    CUdeviceptr out;
    uint32_t got[8];
    CHECK_CU(cuMemAlloc(&out, 64), CUDA_SUCCESS);
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_SUCCESS);
    CHECK_EQ(tex_read(t, 0, 0, 3, 2, out, got), 0);
    for (int i = 0; i < 6; i++) CHECK_EQ(got[i], (uint32_t)v[i]);
    CHECK_CU(cuArrayDestroy(a), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_EQ(tex_read(t, 0, 0, 1, 1, out, got), 1);    /* the array is gone */
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuTexObjectDestroy(t), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
}

/* The violations: a destroyed handle, memory freed under a texture. */
TEST(violations)
{
    CUdeviceptr buf, out;
    uint32_t got[8];
    CHECK_CU(cuMemAlloc(&buf, 4096 * 16), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&out, 64), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(buf, 7, 4096 * 4), CUDA_SUCCESS);
    CUDA_RESOURCE_DESC r = linear(buf, 4096 * 16);
    CUDA_TEXTURE_DESC d = td(CU_TR_ADDRESS_MODE_CLAMP);
    CUtexObject t = 0;
    CHECK_CU(cuTexObjectCreate(&t, &r, &d, NULL), CUDA_SUCCESS);
    CHECK_EQ(tex_read(t, 0, 0, 2, 1, out, got), 0);
    CHECK_EQ(got[1], 7);
    CHECK_CU(cuMemFree(buf), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_EQ(tex_read(t, 0, 0, 2, 1, out, got), 2);    /* freed under the texture */
    CHECK_EQ(emu_test_violations(), 2);
    CHECK_CU(cuTexObjectDestroy(t), CUDA_SUCCESS);
    emu_test_stderr_begin();
    CHECK_EQ(tex_read(t, 0, 0, 1, 1, out, got), 1);    /* a destroyed handle */
    CHECK_EQ(emu_test_violations(), 1);
    CHECK_CU(cuMemFree(out), CUDA_SUCCESS);
}

int main(void)
{
    if (emu_test_open("mod_test.so", &ctx, &mod) != CUDA_SUCCESS) return 1;
    if (cuModuleGetFunction(&k_read, mod, "tex_read") != CUDA_SUCCESS) return 1;
    RUN(alignment);
    RUN(refusals);
    RUN(reads);
    RUN(array);
    RUN(violations);
    return check_done();
}
