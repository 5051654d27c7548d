/*
 * test_vmmquery.c: the VMM and pointer queries answer for each kind of
 * memory as documented: cuMemAlloc memory, stream-ordered (pool) memory,
 * pinned host memory and cuMemCreate + cuMemMap memory.
 *
 *   cuMemRetainAllocationHandle: only mapped VMM memory has a handle ("If the
 *     address requested is not mapped, the function will fail"):
 *     CUDA_ERROR_INVALID_VALUE for the others;
 *   cuMemGetAccess: VMM memory only;
 *   cuPointerGetAttribute(s): ALLOWED_HANDLE_TYPES (cuMemCreate's
 *     requestedHandleTypes, else 0), IS_LEGACY_CUDA_IPC_CAPABLE (cuMemAlloc
 *     only), MAPPING_BASE_ADDR / MAPPING_SIZE (the mapping: one cuMemMap, or
 *     a plain block's whole pages), ACCESS_FLAGS, MEMPOOL_HANDLE (the pool of
 *     a stream-ordered allocation, else NULL), IS_GPU_DIRECT_RDMA_CAPABLE;
 *   cuMemExportToShareableHandle / cuMemImportFromShareableHandle and
 *   cuMemGetAllocationPropertiesFromHandle.
 */
#include "graph_util.h"

#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>

typedef struct answers {
    unsigned long long handle_types;
    int ipc, rdma;
    CUdeviceptr mbase;
    size_t msize;
    unsigned access;
    CUmemoryPool pool;
} answers;

/* Reads every attribute both ways (singular and plural) and checks they agree. */
static answers query(CUdeviceptr p)
{
    answers a, b;
    memset(&a, 0xee, sizeof a);
    memset(&b, 0xee, sizeof b);
    CHECK_CU(cuPointerGetAttribute(&a.handle_types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&a.ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&a.rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, p), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&a.mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&a.msize, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&a.access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&a.pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), CUDA_SUCCESS);
    CUpointer_attribute at[] = { CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                 CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR,
                                 CU_POINTER_ATTRIBUTE_MAPPING_SIZE, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
                                 CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE };
    void *data[] = { &b.handle_types, &b.ipc, &b.rdma, &b.mbase, &b.msize, &b.access, &b.pool };
    CHECK_CU(cuPointerGetAttributes(7, at, data, p), CUDA_SUCCESS);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    return a;
}

/* Neither a VMM handle nor VMM access for memory that is not VMM-mapped. */
static void not_vmm(CUdeviceptr p)
{
    CUmemGenericAllocationHandle h = 77;
    CHECK_CU(cuMemRetainAllocationHandle(&h, (void *)p), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(h, 77);
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    unsigned long long fl = 99;
    CHECK_CU(cuMemGetAccess(&fl, &loc, p), CUDA_ERROR_INVALID_VALUE);
}

TEST(cumemalloc_memory)
{
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    not_vmm(p);
    not_vmm(p + 500);
    answers a = query(p + 10);
    CHECK_EQ(a.handle_types, 0);
    CHECK_EQ(a.ipc, 1);
    CHECK_EQ(a.rdma, 1);
    CHECK_EQ(a.mbase, p);
    CHECK_EQ(a.msize, 4096);            /* the block's page */
    CHECK_EQ(a.access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
    CHECK(a.pool == NULL);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
}

TEST(stream_ordered_memory)
{
    CUdeviceptr p;
    CUmemoryPool pool;
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocAsync(&p, 10000, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    not_vmm(p);
    answers a = query(p);
    CHECK_EQ(a.handle_types, 0);
    CHECK_EQ(a.ipc, 0);
    CHECK_EQ(a.rdma, 0);
    CHECK(a.pool == pool);
    CHECK_EQ(a.access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
    CHECK_CU(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    CHECK_CU(cuMemAllocFromPoolAsync(&p, 100, pool, NULL), CUDA_SUCCESS);
    a = query(p);
    CHECK(a.pool == pool);
    CHECK_CU(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
}

TEST(pinned_host_memory)
{
    void *h;
    CHECK_CU(cuMemAllocHost(&h, 100), CUDA_SUCCESS);
    not_vmm((CUdeviceptr)h);
    answers a = query((CUdeviceptr)h);
    CHECK_EQ(a.ipc, 0);
    CHECK_EQ(a.rdma, 0);
    CHECK(a.pool == NULL);
    CHECK_CU(cuMemFreeHost(h), CUDA_SUCCESS);
}

TEST(vmm_memory)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                                 .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR };
    prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t g;
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h, plain, r;
    CUdeviceptr va;
    CHECK_CU(cuMemCreate(&h, 2 * g, &prop, 0), CUDA_SUCCESS);
    CUmemAllocationProp plain_prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                       .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CHECK_CU(cuMemCreate(&plain, g, &plain_prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&va, 4 * g, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va, 2 * g, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va + 2 * g, g, 0, plain, 0), CUDA_SUCCESS);
    CUmemAccessDesc rw = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemAccessDesc ro = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READ };
    CHECK_CU(cuMemSetAccess(va, 2 * g, &rw, 1), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(va + 2 * g, g, &ro, 1), CUDA_SUCCESS);
    /* The handle, from any address of the mapping; properties as created. */
    CHECK_CU(cuMemRetainAllocationHandle(&r, (void *)(va + g + 5)), CUDA_SUCCESS);
    CHECK_EQ(r, h);
    CUmemAllocationProp got;
    memset(&got, 0, sizeof got);
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, r), CUDA_SUCCESS);
    CHECK_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_EQ(got.allocFlags.gpuDirectRDMACapable, 1);
    CHECK_CU(cuMemRelease(r), CUDA_SUCCESS);
    CHECK_CU(cuMemRetainAllocationHandle(&r, (void *)(va + 3 * g)), CUDA_ERROR_INVALID_VALUE);  /* reserved only */
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    unsigned long long fl = 0;
    CHECK_CU(cuMemGetAccess(&fl, &loc, va + 1), CUDA_SUCCESS);
    CHECK_EQ(fl, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemGetAccess(&fl, &loc, va + 2 * g), CUDA_SUCCESS);
    CHECK_EQ(fl, CU_MEM_ACCESS_FLAGS_PROT_READ);
    answers a = query(va + g);
    CHECK_EQ(a.handle_types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_EQ(a.ipc, 0);
    CHECK_EQ(a.rdma, 1);
    CHECK_EQ(a.mbase, va);
    CHECK_EQ(a.msize, 2 * g);
    CHECK_EQ(a.access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
    CHECK(a.pool == NULL);
    a = query(va + 2 * g + 1);
    CHECK_EQ(a.handle_types, 0);
    CHECK_EQ(a.rdma, 0);
    CHECK_EQ(a.mbase, va + 2 * g);
    CHECK_EQ(a.msize, g);
    CHECK_EQ(a.access, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ);

    /* Export: a descriptor of the same memory; only the requested type. */
    int fd = -1;
    CHECK_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && (size_t)st.st_size == 2 * g);
    CHECK_CU(cuMemExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemExportToShareableHandle(&fd, 12345, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_ERROR_INVALID_VALUE);
    /* Import it and map it elsewhere: the same bytes, memory charged once. */
    size_t free0, total, free1;
    CHECK_CU(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    CUmemGenericAllocationHandle imp;
    CHECK_CU(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), CUDA_SUCCESS);
    CHECK_CU(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
    CHECK_EQ(free1, free0);
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, imp), CUDA_SUCCESS);
    CHECK_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUdeviceptr va2;
    CHECK_CU(cuMemAddressReserve(&va2, 2 * g, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va2, 2 * g, 0, imp, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(va2, 2 * g, &rw, 1), CUDA_SUCCESS);
    ((volatile uint32_t *)va)[3] = 0xfeed;
    CHECK_EQ(((volatile uint32_t *)va2)[3], 0xfeed);
    unsigned long long id1 = 0, id2 = 1;
    CHECK_CU(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, va), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, va2), CUDA_SUCCESS);
    CHECK_EQ(id1, id2);
    int other = open("/dev/null", O_RDONLY);
    CHECK_CU(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)other, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             CUDA_ERROR_INVALID_VALUE);
    close(other);
    CHECK_CU(cuMemUnmap(va2, 2 * g), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(imp), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(va2, 2 * g), CUDA_SUCCESS);
    close(fd);

    CHECK_CU(cuMemUnmap(va, 3 * g), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(va, 4 * g), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(plain), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_ERROR_INVALID_VALUE);  /* gone */
}

int main(void)
{
    gu_setup();
    RUN(cumemalloc_memory);
    RUN(stream_ordered_memory);
    RUN(pinned_host_memory);
    RUN(vmm_memory);
    return check_done();
}
