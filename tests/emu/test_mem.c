/*
 * test_mem.c: device memory, pinned host memory, address ranges, pointer
 * attributes, legacy IPC and managed memory of the emulated driver
 * (emu_mem.c). VMM and everything that needs page faults is in test_vmm.c.
 *
 * Runs with CUDAEMU_DEVICE_MEMORY=256 MiB so the out-of-memory cases are
 * exact and cheap. The emulator reads its knobs when it is loaded, so main
 * re-executes the program with the variable set.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define DEVICE_MEMORY (256ull << 20)

static CUcontext ctx;

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CHECK_CU(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    CHECK_EQ(t, DEVICE_MEMORY);
    return f;
}

TEST(setup)
{
    CUdevice dev;
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    CHECK_CU(cuInit(0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);   /* no current context */
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

TEST(alloc_free_errors)
{
    CUdeviceptr p = 0, q = 0;
    CHECK_CU(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    CHECK(p != 0);
    CHECK_EQ(p % 256, 0);
    memset((void *)p, 0xab, 1000);                      /* device pointers are host addresses */
    CHECK_EQ(((unsigned char *)p)[999], 0xab);
    CHECK_CU(cuMemAlloc(&q, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(q, 0);
    CHECK_CU(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE);  /* not the base */
    int local;
    CHECK_CU(cuMemFree((CUdeviceptr)&local), CUDA_ERROR_INVALID_VALUE);
    void *heap = malloc(64);
    CHECK_CU(cuMemFree((CUdeviceptr)heap), CUDA_ERROR_INVALID_VALUE);
    free(heap);
    CHECK_CU(cuMemFree(0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);      /* double free */
}

TEST(meminfo_and_oom)
{
    size_t f0 = free_mem();
    CHECK_EQ(f0, DEVICE_MEMORY);
    CUdeviceptr a, b = 0;
    CHECK_CU(cuMemAlloc(&a, 1 << 20), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), f0 - (1 << 20));
    CHECK_CU(cuMemAlloc(&b, DEVICE_MEMORY), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(b, 0);
    CHECK_CU(cuMemAlloc(&b, f0 - (1 << 20) + 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(free_mem(), f0 - (1 << 20));                /* nothing leaked */
    CHECK_CU(cuMemAlloc(&b, f0 - (1 << 20)), CUDA_SUCCESS); /* exactly what is left */
    CHECK_EQ(free_mem(), 0);
    CUdeviceptr c;
    CHECK_CU(cuMemAlloc(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), f0);
    size_t f, t;
    CHECK_CU(cuMemGetInfo(NULL, &t), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemGetInfo(&f, NULL), CUDA_ERROR_INVALID_VALUE);
}

TEST(address_range)
{
    CUdeviceptr p, base = 0;
    size_t size = 0;
    CHECK_CU(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p + 999), CUDA_SUCCESS);
    CHECK_EQ(base, p);
    CHECK_EQ(size, 1000);                                /* the requested size */
    base = 0;
    CHECK_CU(cuMemGetAddressRange(&base, NULL, p + 500), CUDA_SUCCESS);
    CHECK_EQ(base, p);
    CHECK_CU(cuMemGetAddressRange(NULL, &size, p), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p + 1000), CUDA_ERROR_NOT_FOUND);
    int local;
    CHECK_CU(cuMemGetAddressRange(&base, &size, (CUdeviceptr)&local), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
}

/* Many live blocks: every interior pointer finds its own block, freed ones
 * are gone, in any order. */
TEST(registry_many_blocks)
{
    enum { N = 300 };
    CUdeviceptr p[N];
    size_t sz[N];
    srand(7);
    for (int i = 0; i < N; i++) {
        sz[i] = 1 + (size_t)rand() % 20000;
        CHECK_CU(cuMemAlloc(&p[i], sz[i]), CUDA_SUCCESS);
    }
    for (int round = 0; round < 2; round++) {
        for (int i = round; i < N; i += 2) {
            CUdeviceptr base = 0;
            size_t size = 0;
            CHECK_CU(cuMemGetAddressRange(&base, &size, p[i] + (size_t)rand() % sz[i]), CUDA_SUCCESS);
            CHECK_EQ(base, p[i]);
            CHECK_EQ(size, sz[i]);
        }
        for (int i = round; i < N; i += 2) CHECK_CU(cuMemFree(p[i]), CUDA_SUCCESS);
        for (int i = round; i < N; i += 2)
            CHECK_CU(cuMemGetAddressRange(NULL, NULL, p[i]), CUDA_ERROR_NOT_FOUND);
    }
    CHECK_EQ(free_mem(), DEVICE_MEMORY);
}

/* Threads allocating, querying and freeing at once: every thread always
 * finds its own live blocks with their own sizes. */
static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    int bad = cuCtxSetCurrent(ctx) != CUDA_SUCCESS;
    CUdeviceptr p[8] = { 0 };
    size_t sz[8] = { 0 };
    for (int it = 0; it < 2000 && !bad; it++) {
        int i = rand_r(&seed) % 8;
        if (p[i]) {
            CUdeviceptr base = 0;
            size_t size = 0;
            bad |= cuMemGetAddressRange(&base, &size, p[i] + sz[i] - 1) != CUDA_SUCCESS;
            bad |= base != p[i] || size != sz[i];
            bad |= ((unsigned char *)p[i])[0] != (unsigned char)sz[i];
            bad |= cuMemFree(p[i]) != CUDA_SUCCESS;
            p[i] = 0;
        } else {
            sz[i] = 1 + (size_t)rand_r(&seed) % 50000;
            bad |= cuMemAlloc(&p[i], sz[i]) != CUDA_SUCCESS;
            if (!bad) ((unsigned char *)p[i])[0] = (unsigned char)sz[i];
        }
    }
    for (int i = 0; i < 8; i++)
        if (p[i]) bad |= cuMemFree(p[i]) != CUDA_SUCCESS;
    return (void *)(uintptr_t)bad;
}

TEST(registry_threads)
{
    pthread_t t[4];
    for (uintptr_t i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, churn, (void *)(i + 1)) == 0);
    for (int i = 0; i < 4; i++) {
        void *bad = (void *)1;
        pthread_join(t[i], &bad);
        CHECK(bad == NULL);
    }
    CHECK_EQ(free_mem(), DEVICE_MEMORY);
}

TEST(pointer_attributes_device)
{
    CUdeviceptr p, q;
    CHECK_CU(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&q, 1000), CUDA_SUCCESS);
    CUcontext c = NULL;
    unsigned type = 0;
    CUdeviceptr dp = 0, start = 0;
    void *hp = NULL;
    size_t rsize = 0;
    int mapped = -1, ordinal = -1, ipc = -1, managed = -1;
    unsigned long long id_p = 0, id_q = 0, handles = 99;
    CHECK_CU(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p + 8), CUDA_SUCCESS);
    CHECK(c == ctx);
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_SUCCESS);
    CHECK_EQ(type, CU_MEMORYTYPE_DEVICE);
    CHECK_CU(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 8), CUDA_SUCCESS);
    CHECK_EQ(dp, p + 8);
    CHECK_CU(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 999), CUDA_SUCCESS);
    CHECK_EQ(start, p);
    CHECK_CU(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 999), CUDA_SUCCESS);
    CHECK_EQ(rsize, 1000);
    CHECK_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, p), CUDA_SUCCESS);
    CHECK_EQ(mapped, 1);
    CHECK_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), CUDA_SUCCESS);
    CHECK_EQ(ordinal, 0);
    CHECK_CU(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), CUDA_SUCCESS);
    CHECK_EQ(ipc, 1);
    CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p), CUDA_SUCCESS);
    CHECK_EQ(managed, 0);
    CHECK_CU(cuPointerGetAttribute(&handles, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p), CUDA_SUCCESS);
    CHECK_EQ(handles, 0);
    CHECK_CU(cuPointerGetAttribute(&id_p, CU_POINTER_ATTRIBUTE_BUFFER_ID, p + 3), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&id_q, CU_POINTER_ATTRIBUTE_BUFFER_ID, q), CUDA_SUCCESS);
    CHECK(id_p != 0 && id_q != 0 && id_p != id_q);
    CHECK_CU(cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_BUFFER_ID, p), CUDA_ERROR_INVALID_VALUE);

    /* Buffer ids are never reused, even for a block at the same address. */
    unsigned long long seen[20];
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    for (int i = 0; i < 20; i++) {
        CUdeviceptr r;
        CHECK_CU(cuMemAlloc(&r, 1000), CUDA_SUCCESS);
        CHECK_CU(cuPointerGetAttribute(&seen[i], CU_POINTER_ATTRIBUTE_BUFFER_ID, r), CUDA_SUCCESS);
        CHECK(seen[i] != id_p && seen[i] != id_q);
        for (int j = 0; j < i; j++) CHECK(seen[i] != seen[j]);
        CHECK_CU(cuMemFree(r), CUDA_SUCCESS);
    }

    /* The plural form reads several at once. */
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                    CU_POINTER_ATTRIBUTE_HOST_POINTER };
    type = 0; rsize = 0; hp = (void *)1;
    void *data[] = { &type, &rsize, &hp };
    CHECK_CU(cuPointerGetAttributes(3, attrs, data, q + 1), CUDA_SUCCESS);
    CHECK_EQ(type, CU_MEMORYTYPE_DEVICE);
    CHECK_EQ(rsize, 1000);
    CHECK(hp == NULL);                                   /* device memory: no host pointer */
    CHECK_CU(cuPointerGetAttributes(0, attrs, data, q), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
}

TEST(pointer_attributes_foreign)
{
    int local;
    CUdeviceptr f = (CUdeviceptr)&local;
    CUcontext c;
    unsigned type;
    unsigned long long id;
    CHECK_CU(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, f), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, f), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuPointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, f), CUDA_ERROR_INVALID_VALUE);
    /* cuPointerGetAttributes: success with default values. */
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_DEVICE_POINTER };
    CUdeviceptr dp = 5;
    c = (CUcontext)1; type = 7;
    void *data[] = { &c, &type, &dp };
    CHECK_CU(cuPointerGetAttributes(3, attrs, data, f), CUDA_SUCCESS);
    CHECK(c == NULL);
    CHECK_EQ(type, 0);
    CHECK_EQ(dp, 0);
    CUpointer_attribute bad[] = { CU_POINTER_ATTRIBUTE_P2P_TOKENS };
    CHECK_CU(cuPointerGetAttributes(1, bad, data, f), CUDA_ERROR_INVALID_VALUE);
}

TEST(host_memory)
{
    size_t f0 = free_mem();
    void *h = NULL, *h2 = NULL;
    CHECK_CU(cuMemHostAlloc(&h, 5000, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    CHECK(h != NULL);
    CHECK_EQ(free_mem(), f0);                            /* host memory is not device memory */
    memset(h, 0x5a, 5000);
    CUdeviceptr d = 0;
    CHECK_CU(cuMemHostGetDevicePointer(&d, h, 0), CUDA_SUCCESS);
    CHECK_EQ(d, (CUdeviceptr)h);
    CHECK_CU(cuMemHostGetDevicePointer(&d, (char *)h + 4999, 0), CUDA_SUCCESS);
    CHECK_EQ(d, (CUdeviceptr)h + 4999);
    CHECK_CU(cuMemHostGetDevicePointer(&d, h, 1), CUDA_ERROR_INVALID_VALUE);
    void *heap = malloc(64);
    CHECK_CU(cuMemHostGetDevicePointer(&d, heap, 0), CUDA_ERROR_INVALID_VALUE);
    free(heap);

    unsigned type = 0;
    void *hp = NULL;
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h + 10), CUDA_SUCCESS);
    CHECK_EQ(type, CU_MEMORYTYPE_HOST);
    CHECK_CU(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, (CUdeviceptr)h + 10), CUDA_SUCCESS);
    CHECK(hp == (char *)h + 10);
    CHECK_CU(cuMemGetAddressRange(NULL, NULL, (CUdeviceptr)h), CUDA_ERROR_NOT_FOUND);

    CHECK_CU(cuMemHostAlloc(&h2, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemHostAlloc(&h2, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocHost(&h2, 100), CUDA_SUCCESS);
    CHECK_CU(cuMemFree((CUdeviceptr)h2), CUDA_ERROR_INVALID_VALUE);   /* wrong free */
    CHECK_CU(cuMemFreeHost((char *)h2 + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeHost(h2), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost(h2), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr dev;
    CHECK_CU(cuMemAlloc(&dev, 64), CUDA_SUCCESS);
    CHECK_CU(cuMemFreeHost((void *)dev), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(dev), CUDA_SUCCESS);
    CHECK_EQ(((unsigned char *)h)[4999], 0x5a);
    CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
    CHECK_CU(cuMemHostGetDevicePointer(&d, h, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST(ipc_handles)
{
    CUdeviceptr a, b;
    CUipcMemHandle ha, ha2, hb;
    CHECK_CU(cuMemAlloc(&a, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, 4096), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha, a), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha2, a + 100), CUDA_SUCCESS);   /* names the same allocation */
    CHECK_CU(cuIpcGetMemHandle(&hb, b), CUDA_SUCCESS);
    CHECK(memcmp(&ha, &ha2, sizeof ha) == 0);
    CHECK(memcmp(&ha, &hb, sizeof ha) != 0);
    CHECK_CU(cuIpcGetMemHandle(NULL, a), CUDA_ERROR_INVALID_VALUE);
    void *h;
    CHECK_CU(cuMemHostAlloc(&h, 4096, 0), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&hb, (CUdeviceptr)h), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha, a), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

/* cuMemAllocManaged: memory the host and every device use through one
 * pointer; flags CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST only, size 0
 * refused; charged to the device like cuMemAlloc; IS_MANAGED, a host
 * pointer, device memory type; freed by cuMemFree and with its context; not
 * legacy-IPC capable. */
TEST(managed_memory)
{
    CUdeviceptr p = 0, q = 0, base = 0;
    int v = 0;
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0), CUDA_SUCCESS);
    CHECK_EQ(v, 1);
    CHECK_CU(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocManaged(&p, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocManaged(&p, 4096, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocManaged(NULL, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAllocManaged(&p, DEVICE_MEMORY + 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);

    size_t before = free_mem();
    CHECK_CU(cuMemAllocManaged(&p, (1 << 20) + 1, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), before - (1 << 20) - 4096);            /* whole pages */
    CHECK_CU(cuMemAllocManaged(&q, 4096, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), before - (1 << 20) - 2 * 4096);
    /* the host writes it, the device copies it, the host reads the copy */
    uint32_t *h = (uint32_t *)(uintptr_t)p;
    for (int i = 0; i < 1024; i++) h[i] = (uint32_t)i * 7;
    CHECK_CU(cuMemcpyDtoD(q, p, 4096), CUDA_SUCCESS);
    CHECK_EQ(((uint32_t *)(uintptr_t)q)[1023], 1023 * 7);
    CHECK_CU(cuMemsetD32(p, 5, 1024), CUDA_SUCCESS);
    CHECK_EQ(h[1023], 5);

    CUcontext c = NULL;
    unsigned type = 0;
    void *hp = NULL;
    CUdeviceptr dp = 0;
    size_t rsize = 0, size = 0;
    int managed = -1, ipc = -1;
    CHECK_CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p + 9), CUDA_SUCCESS);
    CHECK_EQ(managed, 1);
    CHECK_CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_SUCCESS);
    CHECK_EQ(type, CU_MEMORYTYPE_DEVICE);
    CHECK_CU(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, p + 9), CUDA_SUCCESS);
    CHECK(hp == (void *)(uintptr_t)(p + 9));
    CHECK_CU(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 9), CUDA_SUCCESS);
    CHECK_EQ(dp, p + 9);
    CHECK_CU(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p), CUDA_SUCCESS);
    CHECK(c == ctx);
    CHECK_CU(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 9), CUDA_SUCCESS);
    CHECK_EQ(rsize, (1 << 20) + 1);
    CHECK_CU(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), CUDA_SUCCESS);
    CHECK_EQ(ipc, 0);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p + 100), CUDA_SUCCESS);
    CHECK(base == p && size == (1 << 20) + 1);
    CUipcMemHandle ih;
    CHECK_CU(cuIpcGetMemHandle(&ih, p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFreeHost((void *)(uintptr_t)p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(q), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), before);

    /* with its context */
    CUcontext c2;
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocManaged(&p, 8192, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), before - 8192);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), before);
    CHECK_CU(cuMemGetAddressRange(&base, &size, p), CUDA_ERROR_NOT_FOUND);
}

/* The managed-memory hints (emu_managed.c): cuMemPrefetchAsync,
 * cuMemAdvise, cuStreamAttachMemAsync accept managed memory only, check
 * their flags, locations and lengths as cuda.h says, keep stream order
 * (a kernel-free check: the hint is queued behind a host function that
 * has not run yet), move nothing, and on a capturing stream return
 * CUDA_ERROR_NOT_SUPPORTED, leaving the capture as it was. */
static volatile int hint_gate;
static void CUDA_CB hint_wait(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&hint_gate, __ATOMIC_ACQUIRE)) usleep(100);
}

TEST(managed_hints)
{
    CUdeviceptr p, d;
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocManaged(&p, 10000, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
    memset((void *)(uintptr_t)p, 0x5a, 10000);
    CUmemLocation dev0 = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    CUmemLocation dev9 = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 9 };
    CUmemLocation host = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
    CUmemLocation bad = { .type = CU_MEM_LOCATION_TYPE_INVALID, .id = 0 };
    /* prefetch: managed memory only, the whole range in it (its pages), flags 0 */
    CHECK_CU(cuMemPrefetchAsync(p, 10000, dev0, 0, s), CUDA_SUCCESS);
    CHECK_CU(cuMemPrefetchAsync(p + 100, 12188, host, 0, s), CUDA_SUCCESS);  /* to the end of its last page */
    CHECK_CU(cuMemPrefetchAsync(p, 12289, dev0, 0, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPrefetchAsync(p, 0, dev0, 0, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPrefetchAsync(p, 4096, dev0, 1, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPrefetchAsync(d, 4096, dev0, 0, s), CUDA_ERROR_INVALID_VALUE);   /* cuMemAlloc memory */
    CHECK_CU(cuMemPrefetchAsync(p, 4096, dev9, 0, s), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cuMemPrefetchAsync(p, 4096, bad, 0, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemPrefetchAsync(p, 4096, dev0, 0, NULL), CUDA_SUCCESS);            /* legacy stream */
    /* the legacy form (a CUdevice, CU_DEVICE_CPU the host) */
    CUresult (*pf1)(CUdeviceptr, size_t, CUdevice, CUstream) = NULL;
    CUdriverProcAddressQueryResult q;
    CHECK_CU(cuGetProcAddress("cuMemPrefetchAsync", (void **)&pf1, 8000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
             CUDA_SUCCESS);
    CHECK(pf1 != NULL);
    CHECK_CU(pf1(p, 4096, CU_DEVICE_CPU, s), CUDA_SUCCESS);
    CHECK_CU(pf1(p, 4096, 3, s), CUDA_ERROR_INVALID_DEVICE);
    /* advise: the six advices; the location checked but for READ_MOSTLY */
    CHECK_CU(cuMemAdvise(p, 10000, CU_MEM_ADVISE_SET_READ_MOSTLY, bad), CUDA_SUCCESS);
    CHECK_CU(cuMemAdvise(p, 10000, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, dev0), CUDA_SUCCESS);
    CHECK_CU(cuMemAdvise(p, 10000, CU_MEM_ADVISE_SET_ACCESSED_BY, host), CUDA_SUCCESS);
    CHECK_CU(cuMemAdvise(p, 10000, CU_MEM_ADVISE_SET_ACCESSED_BY, dev9), CUDA_ERROR_INVALID_DEVICE);
    CHECK_CU(cuMemAdvise(p, 10000, (CUmem_advise)7, dev0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAdvise(d, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0), CUDA_ERROR_INVALID_VALUE);
    /* attach: the whole allocation (0 or its size) from its start, one of the three flags,
     * SINGLE never to the NULL stream */
    CHECK_CU(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_SUCCESS);
    CHECK_CU(cuStreamAttachMemAsync(s, p, 10000, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);
    CHECK_CU(cuStreamAttachMemAsync(s, p, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAttachMemAsync(s, p + 8, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAttachMemAsync(s, p, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAttachMemAsync(NULL, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAttachMemAsync(CU_STREAM_LEGACY, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamAttachMemAsync(CU_STREAM_PER_THREAD, p, 0, CU_MEM_ATTACH_SINGLE), CUDA_SUCCESS);
    CHECK_CU(cuStreamAttachMemAsync(NULL, p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuStreamAttachMemAsync(s, d, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    /* stream order: behind a host function that waits, the hints are queued, not done */
    CHECK_CU(cuLaunchHostFunc(s, hint_wait, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemPrefetchAsync(p, 10000, dev0, 0, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    __atomic_store_n(&hint_gate, 1, __ATOMIC_RELEASE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(((unsigned char *)(uintptr_t)p)[9999], 0x5a);                       /* nothing moved */
    /* during a capture: not emulated, the capture goes on */
    CUgraph g;
    CUstreamCaptureStatus cs;
    CHECK_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    CHECK_CU(cuMemPrefetchAsync(p, 10000, dev0, 0, s), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuStreamAttachMemAsync(s, p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuStreamIsCapturing(s, &cs), CUDA_SUCCESS);
    CHECK_EQ(cs, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK_CU(cuMemsetD8Async(p, 1, 16, s), CUDA_SUCCESS);
    CHECK_CU(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    size_t n = 0;
    CHECK_CU(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_CU(cuMemPrefetchAsync(p, 4096, dev0, 0, s), CUDA_ERROR_INVALID_VALUE);  /* freed */
    CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Large memsets (the executor prefaults ranges of 1 MiB and more, on huge
 * pages where they cover whole 2 MiB blocks, emu_copy.c): every element of
 * the span holds the value and nothing around it changes, for a start that is
 * not page-aligned, 8/16/32-bit elements and a 2D memset whose rows are
 * large and whose gaps between rows must stay as they were. */
TEST(large_memsets)
{
    const size_t bytes = (9u << 20) + 12288;
    CUdeviceptr p = 0;
    CHECK_CU(cuMemAlloc(&p, bytes), CUDA_SUCCESS);
    unsigned char *b = (unsigned char *)(uintptr_t)p;
    memset(b, 0x5a, bytes);
    const size_t off = 4 + 4096 * 3, n32 = (5u << 20) / 4 + 3;   /* elements */
    CHECK_CU(cuMemsetD32(p + off, 0xa1b2c3d4u, n32), CUDA_SUCCESS);
    size_t bad = 0;
    for (size_t i = 0; i < n32; i++) {
        uint32_t v;
        memcpy(&v, b + off + 4 * i, 4);
        bad += v != 0xa1b2c3d4u;
    }
    CHECK_EQ(bad, 0);
    for (size_t i = 0; i < off; i++) bad += b[i] != 0x5a;
    for (size_t i = off + 4 * n32; i < bytes; i++) bad += b[i] != 0x5a;
    CHECK_EQ(bad, 0);

    const size_t n16 = (3u << 20) / 2 + 1;
    CHECK_CU(cuMemsetD16(p + 2, 0x1234, n16), CUDA_SUCCESS);
    for (size_t i = 0; i < n16; i++) {
        uint16_t v;
        memcpy(&v, b + 2 + 2 * i, 2);
        bad += v != 0x1234;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(b[0], 0x5a);
    CHECK_EQ(b[1], 0x5a);

    /* 2D: 3 rows of 2 MiB + 8 bytes, pitch 3 MiB, from offset 8 */
    memset(b, 0x5a, bytes);
    const size_t width = (2u << 20) + 8, pitch = 3u << 20;
    CHECK_CU(cuMemsetD2D8(p + 8, pitch, 0x77, width, 3), CUDA_SUCCESS);
    for (size_t i = 0; i < bytes; i++) {
        size_t rel = i - 8;
        int in = i >= 8 && rel / pitch < 3 && rel % pitch < width;
        bad += b[i] != (in ? 0x77 : 0x5a);
    }
    CHECK_EQ(bad, 0);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *want = "268435456";                      /* DEVICE_MEMORY */
    const char *have = getenv("CUDAEMU_DEVICE_MEMORY");
    if (!have || strcmp(have, want) != 0) {
        setenv("CUDAEMU_DEVICE_MEMORY", want, 1);
        execv("/proc/self/exe", argv);
        perror("execv /proc/self/exe");
        return 1;
    }
    RUN(setup);
    RUN(alloc_free_errors);
    RUN(meminfo_and_oom);
    RUN(address_range);
    RUN(registry_many_blocks);
    RUN(registry_threads);
    RUN(pointer_attributes_device);
    RUN(pointer_attributes_foreign);
    RUN(host_memory);
    RUN(ipc_handles);
    RUN(managed_memory);
    RUN(managed_hints);
    RUN(large_memsets);
    return check_done();
}
