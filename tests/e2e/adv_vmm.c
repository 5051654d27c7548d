/*
 * tests/e2e/adv_vmm.c: issue 10, class 16 (VMM queries on placed memory).
 * For cuMemAlloc memory the driver answers the VMM queries as for memory
 * that no VMM handle backs; NCCL's registration and IPC paths ask them. A
 * library that backs cuMemAlloc with its own VMM chunks must give the same
 * answers. For a small buffer (which a placing library puts in a shared
 * chunk) and a 4 MiB one (own handles), the program asks:
 *   cuMemRetainAllocationHandle       (if it succeeds: the handle's
 *                                      properties, and whether mapping it
 *                                      shows the buffer's bytes)
 *   cuMemGetAccess
 *   cuPointerGetAttribute: IS_LEGACY_CUDA_IPC_CAPABLE, ALLOWED_HANDLE_TYPES,
 *                          MAPPED, MEMORY_TYPE
 *   cuPointerGetAttributes with the same four
 *   cuIpcGetMemHandle
 * and prints each result and value.
 * Usage: adv_vmm
 */
#include "adv_common.h"

static void retain(CUdeviceptr p, size_t bytes)
{
    CUmemGenericAllocationHandle h = 0;
    CUresult r = R(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p));
    printf("cuMemRetainAllocationHandle: %s\n", adv_err(r));
    if (r == CUDA_SUCCESS) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        r = R(cuMemGetAllocationPropertiesFromHandle(&prop, h));
        printf("  properties: %s\n", adv_err(r));
        /* What a program that trusts the handle does: map it, read it. */
        size_t gran = 0;
        R(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        size_t size = (bytes + gran - 1) / gran * gran;
        CUdeviceptr va = 0;
        int same = 0;
        if (gran && R(cuMemAddressReserve(&va, size, 0, 0, 0)) == CUDA_SUCCESS) {
            if (R(cuMemMap(va, size, 0, h, 0)) == CUDA_SUCCESS) {
                CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                                       CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
                uint32_t a = 0, b = 1;
                R(cuMemSetAccess(va, size, &ad, 1));
                R(cuMemcpyDtoH(&a, va, 4));
                R(cuMemcpyDtoH(&b, p, 4));
                same = a == b;
                R(cuMemUnmap(va, size));
            }
            R(cuMemAddressFree(va, size));
        }
        printf("  mapping the handle shows the buffer: %s\n", same ? "yes" : "no");
        R(cuMemRelease(h));
    }
}

static void get_access(CUdeviceptr p)
{
    unsigned long long flags = 0;
    CUresult r;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    r = R(cuMemGetAccess(&flags, &loc, p));
    printf("cuMemGetAccess: %s", adv_err(r));
    if (r == CUDA_SUCCESS) printf(", flags %llu", flags);
    printf("\n");
}

static void attributes(CUdeviceptr p)
{
    CUresult r;
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                    CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                    CU_POINTER_ATTRIBUTE_MAPPED,
                                    CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
    const char *names[] = { "IS_LEGACY_CUDA_IPC_CAPABLE", "ALLOWED_HANDLE_TYPES", "MAPPED",
                            "MEMORY_TYPE" };
    unsigned long long vals[4] = { 0 };
    void *datas[4];
    for (int i = 0; i < 4; i++) {
        unsigned long long v = 0xdeadull;
        r = R(cuPointerGetAttribute(&v, attrs[i], p));
        printf("cuPointerGetAttribute %s: %s", names[i], adv_err(r));
        if (r == CUDA_SUCCESS)
            printf(", %llu", attrs[i] == CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES
                                 ? v : (unsigned long long)(unsigned)v);
        printf("\n");
        datas[i] = &vals[i];
    }
    r = R(cuPointerGetAttributes(4, attrs, datas, p));
    printf("cuPointerGetAttributes: %s", adv_err(r));
    if (r == CUDA_SUCCESS)
        printf(", %u %llu %u %u", (unsigned)vals[0], vals[1], (unsigned)vals[2], (unsigned)vals[3]);
    printf("\n");
}

static void ipc(CUdeviceptr p)
{
    CUipcMemHandle ih;
    CUresult r = R(cuIpcGetMemHandle(&ih, p));
    printf("cuIpcGetMemHandle: %s\n", adv_err(r));
}

static void query(int which, const char *label, CUdeviceptr p, size_t bytes)
{
    printf("-- %s\n", label);
    switch (which) {
    case 0: retain(p, bytes); break;
    case 1: get_access(p); break;
    case 2: attributes(p); break;
    default: ipc(p); break;
    }
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "retain", "access", "attributes", "ipc", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUdeviceptr small, big;
    adv_open(&ctx, NULL);
    MUST(cuMemAlloc(&small, 4096));
    MUST(cuMemAlloc(&big, 4u << 20));
    MUST(cuMemsetD32(small, 0x11111111u, 1024));
    MUST(cuMemsetD32(big, 0x22222222u, 1u << 20));
    query(which, "4 KiB cuMemAlloc buffer", small, 4096);
    query(which, "4 MiB cuMemAlloc buffer", big, 4u << 20);
    uint32_t a = 0, b = 0;
    R(cuMemcpyDtoH(&a, small, 4));
    R(cuMemcpyDtoH(&b, big, 4));
    adv_check("buffers unchanged by the queries", a == 0x11111111u && b == 0x22222222u,
              "%08x %08x", a, b);
    R(cuMemFree(small));
    R(cuMemFree(big));
    return adv_finish();
}
