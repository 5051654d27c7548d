/*
 * test_export.c: the emulated driver's side of the CUDA runtime's private
 * interface (emu_runtime.c): cuGetExportTable for every table the CUDA 13
 * runtime asks for, their sizes and slots, context-local storage (put, get,
 * delete, the destroy callback at context teardown), the context checks, the
 * integrity check's fixed answers and inputs, traps for slots the runtime has
 * not been seen to call; and the driver entries the runtime asks for besides
 * (cuDeviceGetUuid, cuDevicePrimaryCtxRelease/Reset, cuCtxGetDevice_v2,
 * cuCtxSynchronize_v2). That the integrity hash is the one the runtime
 * expects is checked by the runtime itself (tests/e2e/test_runtime.sh).
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

/* The 7.0 and 9.2 entries: cuda.h maps these names to _v2. */
extern CUresult legacy_cuDevicePrimaryCtxRelease(CUdevice) __asm__("cuDevicePrimaryCtxRelease");
extern CUresult legacy_cuDevicePrimaryCtxReset(CUdevice) __asm__("cuDevicePrimaryCtxReset");
extern CUresult legacy_cuDeviceGetUuid(CUuuid *, CUdevice) __asm__("cuDeviceGetUuid");

typedef const void *slot;
static const CUuuid CUDART = { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd,
                                 0x9d, 0xf9 } };
static const CUuuid TOOLS_TLS = { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a,
                                    0x3a, 0xec, 0xdc } };
static const CUuuid HOOKS = { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c,
                                0x0a, 0x66 } };
static const CUuuid CLS = { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8,
                              0x95, 0x93 } };
static const CUuuid CHECKS = { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d,
                                 0xfa, 0x7e } };
static const CUuuid INTEGRITY = { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c,
                                    0x66, 0xe1, 0xf2 } };
static const CUuuid BOOTSTRAP = { { 0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e, 0xb9, 0xe2, 0xfb, 0x46, 0x9e,
                                    0x7c, 0x0d, 0xd9 } };

static const slot *table(const CUuuid *id)
{
    const void *t = NULL;
    CHECK_CU(cuGetExportTable(&t, id), CUDA_SUCCESS);
    CHECK(t != NULL);
    return t;
}

typedef void (*cls_dtor)(CUcontext, void *, void *);
typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, cls_dtor);
typedef CUresult (*cls_del_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);
typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t *);

TEST(tables_and_sizes)
{
    /* slot 0: the table's size in bytes (not in CONTEXT_STORAGE) */
    CHECK_EQ((uintptr_t)table(&CUDART)[0], 13 * sizeof(slot));
    CHECK_EQ((uintptr_t)table(&TOOLS_TLS)[0], 4 * sizeof(slot));
    CHECK_EQ((uintptr_t)table(&HOOKS)[0], 7 * sizeof(slot));
    CHECK_EQ((uintptr_t)table(&CHECKS)[0], 4 * sizeof(slot));
    CHECK_EQ((uintptr_t)table(&INTEGRITY)[0], 3 * sizeof(slot));
    CHECK_EQ((uintptr_t)table(&BOOTSTRAP)[0], 3 * sizeof(slot));
    const slot *cls = table(&CLS);
    CHECK(cls[0] && cls[1] && cls[2] && !cls[3]);
    /* the same table every time */
    CHECK(table(&CUDART) == table(&CUDART));

    const void *t = (const void *)1;
    CUuuid unknown = CUDART;
    unknown.bytes[15] ^= 1;
    CHECK_CU(cuGetExportTable(&t, &unknown), CUDA_ERROR_NOT_SUPPORTED);
    CHECK(t == NULL);
    CHECK_CU(cuGetExportTable(NULL, &CUDART), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGetExportTable(&t, NULL), CUDA_ERROR_INVALID_VALUE);
}

TEST(traps_fail_loudly)
{
    /* a slot the runtime was never seen to call answers NOT_SUPPORTED */
    CUresult (*trap)(void) = (CUresult (*)(void))table(&CUDART)[1];
    CHECK_CU(trap(), CUDA_ERROR_NOT_SUPPORTED);
    trap = (CUresult (*)(void))table(&BOOTSTRAP)[2];
    CHECK_CU(trap(), CUDA_ERROR_NOT_SUPPORTED);
}

TEST(primary_context_slot)
{
    CUresult (*primary)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))table(&CUDART)[2];
    CUcontext c = NULL, r = NULL;
    unsigned flags;
    int active = -1;
    CHECK_CU(primary(&c, 0), CUDA_SUCCESS);
    CHECK(c != NULL);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 0);                       /* handed out, not retained */
    CHECK_CU(cuDevicePrimaryCtxRetain(&r, 0), CUDA_SUCCESS);
    CHECK(r == c);                             /* the device's primary context */
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_CU(primary(&c, 7), CUDA_ERROR_INVALID_DEVICE);
}

TEST(callback_buffers)
{
    void (*buf2)(void **, size_t *) = (void (*)(void **, size_t *))table(&HOOKS)[2];
    void (*buf6)(void **, size_t *) = (void (*)(void **, size_t *))table(&HOOKS)[6];
    void *p = NULL, *q = NULL;
    size_t n = 0, m = 0;
    buf2(&p, &n);
    buf6(&q, &m);
    CHECK(p && q && p != q);
    CHECK_EQ(n, 1024);
    CHECK_EQ(m, 14);
    memset(p, 0xab, 1024 * sizeof(uint64_t));  /* writable over the whole size */
    memset(q, 0xcd, 14);
    void *again = NULL;
    buf2(&again, &n);
    CHECK(again == p);
}

static struct { CUcontext ctx; void *key, *value; } dtor_calls[8];
static int ndtor;
static void record_dtor(CUcontext ctx, void *key, void *value)
{
    if (ndtor < 8) dtor_calls[ndtor] = (typeof(dtor_calls[0])){ ctx, key, value };
    ndtor++;
}

TEST(context_local_storage)
{
    const slot *t = table(&CLS);
    cls_put_fn put = (cls_put_fn)t[0];
    cls_del_fn del = (cls_del_fn)t[1];
    cls_get_fn get = (cls_get_fn)t[2];
    int k1, k2, v1, v2, v3;
    void *v = NULL;
    CUcontext ctx, other;

    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(put(NULL, &k1, &v1, record_dtor), CUDA_ERROR_INVALID_CONTEXT);   /* no current context */
    CHECK_CU(cuCtxCreate(&ctx, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(put(NULL, &k1, &v1, record_dtor), CUDA_SUCCESS);               /* NULL: the current one */
    CHECK_CU(get(&v, ctx, &k1), CUDA_SUCCESS);
    CHECK(v == &v1);
    CHECK_CU(put(ctx, &k1, &v2, record_dtor), CUDA_SUCCESS);                /* replaces */
    CHECK_CU(get(&v, NULL, &k1), CUDA_SUCCESS);
    CHECK(v == &v2);
    CHECK_CU(get(&v, ctx, &k2), CUDA_ERROR_INVALID_HANDLE);                 /* no such key */
    CHECK_CU(get(NULL, ctx, &k1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(put(ctx, &k2, &v3, record_dtor), CUDA_SUCCESS);

    /* per context */
    CHECK_CU(cuCtxCreate(&other, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(get(&v, other, &k1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(put(other, &k1, &v3, NULL), CUDA_SUCCESS);
    CHECK_CU(get(&v, ctx, &k1), CUDA_SUCCESS);
    CHECK(v == &v2);

    /* delete: gone, and no destroy callback for it */
    CHECK_CU(del(ctx, &k2), CUDA_SUCCESS);
    CHECK_CU(get(&v, ctx, &k2), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(del(ctx, &k2), CUDA_SUCCESS);

    /* destroying the context runs the callback of what it still holds */
    ndtor = 0;
    CHECK_CU(cuCtxDestroy(ctx), CUDA_SUCCESS);
    CHECK_EQ(ndtor, 1);
    CHECK(dtor_calls[0].ctx == ctx && dtor_calls[0].key == &k1 && dtor_calls[0].value == &v2);
    CHECK_CU(get(&v, ctx, &k1), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(put(ctx, &k1, &v1, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxDestroy(other), CUDA_SUCCESS);                            /* NULL callback: none */
    CHECK_EQ(ndtor, 1);

    /* the primary context: on reset, and on the last release */
    CUcontext p;
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CHECK_CU(put(p, &k1, &v1, record_dtor), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    CHECK_EQ(ndtor, 2);
    CHECK(dtor_calls[1].ctx == p && dtor_calls[1].value == &v1);
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CHECK_CU(get(&v, p, &k1), CUDA_ERROR_INVALID_HANDLE);                   /* storage went with it */
    CHECK_CU(put(p, &k2, &v2, record_dtor), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_EQ(ndtor, 2);                                                     /* still retained once */
    CHECK_CU(cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_EQ(ndtor, 3);
    CHECK(dtor_calls[2].key == &k2 && dtor_calls[2].value == &v2);
}

TEST(context_checks)
{
    const slot *t = table(&CHECKS);
    CUresult (*check2)(CUcontext, uint32_t *, const void **) = (CUresult (*)(CUcontext, uint32_t *, const void **))t[2];
    uint32_t (*check3)(void) = (uint32_t (*)(void))t[3];
    uint32_t flag = 7;
    const void *extra = &flag;
    CHECK_CU(check2(NULL, &flag, &extra), CUDA_SUCCESS);
    CHECK_EQ(flag, 0);
    CHECK(extra == NULL);
    CHECK_EQ(check3(), 0);
}

static integrity_fn integrity(void) { return (integrity_fn)table(&INTEGRITY)[1]; }

static void *other_thread_hash(void *arg)
{
    integrity()(13002, 1700000000, arg);
    return NULL;
}

TEST(integrity_check)
{
    uint64_t out[2] = { 0, 0 }, a[2], b[2], c[2];
    /* fixed answers for version % 10 of 0 and 1 */
    CHECK_CU(integrity()(13000, 1700000000, out), CUDA_SUCCESS);
    CHECK(out[0] == 0x3341181c03cb675cull && out[1] == 0x8ed383aa1f4cd1e8ull);
    CHECK_CU(integrity()(13001, 1700000000, out), CUDA_SUCCESS);
    CHECK(out[0] == 0x1841181c03cb675cull && out[1] == 0x8ed383aa1f4cd1e8ull);
    CHECK_CU(integrity()(13002, 1700000000, NULL), CUDA_ERROR_INVALID_VALUE);
    /* else a hash of the version, the time, the process and the thread */
    CHECK_CU(integrity()(13002, 1700000000, a), CUDA_SUCCESS);
    CHECK_CU(integrity()(13002, 1700000000, b), CUDA_SUCCESS);
    CHECK(a[0] == b[0] && a[1] == b[1]);
    CHECK_CU(integrity()(13002, 1700000001, b), CUDA_SUCCESS);
    CHECK(a[0] != b[0] || a[1] != b[1]);
    CHECK_CU(integrity()(12082, 1700000000, b), CUDA_SUCCESS);
    CHECK(a[0] != b[0] || a[1] != b[1]);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, other_thread_hash, c) == 0);
    pthread_join(th, NULL);
    CHECK(a[0] != c[0] || a[1] != c[1]);
}

TEST(runtime_entries)
{
    CUuuid u1, u2;
    CHECK_CU(legacy_cuDeviceGetUuid(&u1, 0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGetUuid(&u2, 0), CUDA_SUCCESS);            /* _v2 */
    CHECK(memcmp(&u1, &u2, sizeof u1) == 0);
    CHECK_CU(legacy_cuDeviceGetUuid(&u1, 3), CUDA_ERROR_INVALID_DEVICE);

    CUcontext p, c;
    unsigned flags;
    int active;
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    CHECK_CU(legacy_cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 1);
    CHECK_CU(legacy_cuDevicePrimaryCtxReset(0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    CHECK_EQ(active, 0);
    CHECK_CU(legacy_cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);

    CUdevice d = -1;
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetDevice_v2(&d, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxSynchronize_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxCreate(&c, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetDevice_v2(&d, NULL), CUDA_SUCCESS);
    CHECK_EQ(d, 0);
    CHECK_CU(cuCtxSetCurrent(NULL), CUDA_SUCCESS);
    d = -1;
    CHECK_CU(cuCtxGetDevice_v2(&d, c), CUDA_SUCCESS);       /* a named context needs no current one */
    CHECK_EQ(d, 0);
    CHECK_CU(cuCtxSynchronize_v2(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetDevice_v2(NULL, c), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuCtxDestroy(c), CUDA_SUCCESS);
    CHECK_CU(cuCtxGetDevice_v2(&d, c), CUDA_ERROR_INVALID_CONTEXT);
    CHECK_CU(cuCtxSynchronize_v2(c), CUDA_ERROR_INVALID_CONTEXT);
}

int main(void)
{
    /* The runtime asks for the tables before cuInit. */
    const void *t = NULL;
    CHECK_CU(cuGetExportTable(&t, &CUDART), CUDA_SUCCESS);
    CHECK_CU(cuInit(0), CUDA_SUCCESS);
    RUN(tables_and_sizes);
    RUN(traps_fail_loudly);
    RUN(primary_context_slot);
    RUN(callback_buffers);
    RUN(context_local_storage);
    RUN(context_checks);
    RUN(integrity_check);
    RUN(runtime_entries);
    return check_done();
}
