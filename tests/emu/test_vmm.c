/*
 * test_vmm.c: the emulated driver's virtual memory management (emu_mem.c):
 * reservations, memfd handles, mappings and aliasing, access protection with
 * real page faults, the documented errors, and the CUDAEMU_GRANULARITY and
 * CUDAEMU_NO_VMM knobs.
 *
 * Faults are observed in forked children that must die with SIGSEGV. The
 * knobs are read when the emulator is loaded, so knob cases re-execute this
 * program with the variable set and a mode argument; the child's exit status
 * says whether its checks passed.
 */
#include <cuda.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static size_t G;                  /* granularity */
static char **self_argv;

static CUmemAllocationProp device_prop(void)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

static CUmemAccessDesc access_desc(CUmemAccess_flags flags)
{
    CUmemAccessDesc d = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, flags };
    return d;
}

static size_t free_mem(void)
{
    size_t f = 0, t = 0;
    CHECK_CU(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    return f;
}

static void init_ctx(void)
{
    CUdevice dev;
    CUcontext ctx;
    CHECK_CU(cuInit(0), CUDA_SUCCESS);
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
}

/* Reserve n granules, create one handle of m granules and map it at the
 * start with read/write access. */
static CUmemGenericAllocationHandle map_rw(CUdeviceptr *resv, size_t n, size_t m)
{
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h = 0;
    CUmemAccessDesc rw = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemAddressReserve(resv, n * G, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h, m * G, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(*resv, m * G, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(*resv, m * G, &rw, 1), CUDA_SUCCESS);
    return h;
}

/* Runs a read (write = 0) or write of one byte at p in a forked child;
 * returns the signal that killed it, 0 if it survived, -1 if it exited
 * otherwise. The default SIGSEGV action is restored first (sanitizers
 * install their own handler). */
static int touch_in_child(CUdeviceptr p, int write)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = { 0, 0 };
        setrlimit(RLIMIT_CORE, &no_core);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &dfl, NULL);
        volatile unsigned char *b = (volatile unsigned char *)p;
        if (write) *b = 1; else (void)*b;
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    if (WIFSIGNALED(st)) return WTERMSIG(st);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Runs this program again with `env` (NAME=VALUE) and `mode` as argv[1];
 * returns its exit status (-1 if it did not exit normally). */
static int run_self(const char *env, const char *mode)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        putenv((char *)env);
        char *args[] = { self_argv[0], (char *)mode, NULL };
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(setup)
{
    init_ctx();
    int v = -1;
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
    CHECK_EQ(v, 1);
}

TEST(granularity)
{
    CUmemAllocationProp prop = device_prop();
    size_t min = 0, rec = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&min, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
    CHECK_EQ(min, 2u << 20);                             /* the default */
    CHECK_EQ(rec, min);
    G = min ? min : 2u << 20;
    CHECK_CU(cuMemGetAllocationGranularity(&min, &prop, (CUmemAllocationGranularity_flags)7), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemGetAllocationGranularity(NULL, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 5;
    CHECK_CU(cuMemGetAllocationGranularity(&min, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_DEVICE);
    prop = device_prop();
    prop.type = CU_MEM_ALLOCATION_TYPE_INVALID;
    CHECK_CU(cuMemGetAllocationGranularity(&min, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_INVALID_VALUE);
}

TEST(reserve_and_free)
{
    CUdeviceptr a = 0, b = 0;
    CHECK_CU(cuMemAddressReserve(&a, 4 * G, 0, 0, 0), CUDA_SUCCESS);
    CHECK(a != 0);
    CHECK_EQ(a % G, 0);
    CHECK_EQ(touch_in_child(a, 0), SIGSEGV);             /* reservations have no pages */
    CHECK_CU(cuMemAddressReserve(&b, 3 * G, 16 * G, 0, 0), CUDA_SUCCESS);
    CHECK_EQ(b % (16 * G), 0);                           /* explicit alignment */
    CHECK_CU(cuMemAddressReserve(&b, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAddressReserve(&b, 4 * G, 3 * G, 0, 0), CUDA_ERROR_INVALID_VALUE); /* not a power of two */
    CHECK_CU(cuMemAddressReserve(&b, 4 * G, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);     /* flags */
    CHECK_CU(cuMemAddressFree(a, 2 * G), CUDA_ERROR_INVALID_VALUE);  /* not the whole reservation */
    CHECK_CU(cuMemAddressFree(a + G, 3 * G), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAddressFree(a, 4 * G), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(a, 4 * G), CUDA_ERROR_INVALID_VALUE);  /* twice */
    /* A free, aligned hint is honoured. */
    CUdeviceptr c = 0;
    CHECK_CU(cuMemAddressReserve(&c, 4 * G, 0, a, 0), CUDA_SUCCESS);
    CHECK_EQ(c, a);
    CHECK_CU(cuMemAddressFree(c, 4 * G), CUDA_SUCCESS);
}

TEST(create_release)
{
    CUmemAllocationProp prop = device_prop(), got;
    CUmemGenericAllocationHandle h = 0;
    size_t f0 = free_mem();
    CHECK_CU(cuMemCreate(&h, G + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);   /* not a multiple */
    CHECK_CU(cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemCreate(&h, G, &prop, 1), CUDA_ERROR_INVALID_VALUE);          /* flags */
    CHECK_CU(cuMemCreate(&h, G, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 3;
    CHECK_CU(cuMemCreate(&h, G, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    prop = device_prop();
    CHECK_EQ(free_mem(), f0);
    CHECK_CU(cuMemCreate(&h, 2 * G, &prop, 0), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), f0 - 2 * G);                    /* counts against device memory */
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
    CHECK_EQ(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    CHECK_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(free_mem(), f0);
    CHECK_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);  /* twice */
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_ERROR_INVALID_VALUE);
}

TEST(create_out_of_memory)
{
    CUmemAllocationProp prop = device_prop();
    size_t f0 = free_mem(), total = 0, f;
    CHECK_CU(cuMemGetInfo(&f, &total), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0;
    CHECK_CU(cuMemCreate(&h, (total / G + 1) * G, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(h, 0);
    CHECK_EQ(free_mem(), f0);
}

TEST(aliasing_two_addresses)
{
    CUmemAllocationProp prop = device_prop();
    CUmemAccessDesc rw = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUmemGenericAllocationHandle h;
    CUdeviceptr a, b;
    CHECK_CU(cuMemCreate(&h, G, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&a, G, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&b, 2 * G, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(a, G, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(b + G, G, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(a, G, &rw, 1), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(b + G, G, &rw, 1), CUDA_SUCCESS);
    uint64_t *pa = (uint64_t *)a, *pb = (uint64_t *)(b + G);
    pa[0] = 0x1122334455667788ull;
    pa[G / 8 - 1] = 42;
    CHECK_EQ(pb[0], 0x1122334455667788ull);
    CHECK_EQ(pb[G / 8 - 1], 42);
    pb[7] = 99;
    CHECK_EQ(pa[7], 99);
    CHECK_CU(cuMemUnmap(a, G), CUDA_SUCCESS);
    CHECK_EQ(pb[7], 99);                                 /* the other mapping still works */
    CHECK_CU(cuMemUnmap(b + G, G), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(a, G), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(b, 2 * G), CUDA_SUCCESS);
}

TEST(map_errors)
{
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr r;
    CHECK_CU(cuMemAddressReserve(&r, 4 * G, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h, 2 * G, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h2, G, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(r, 2 * G, G, h, 0), CUDA_ERROR_INVALID_VALUE);         /* offset != 0 */
    CHECK_CU(cuMemMap(r + 4096, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);      /* unaligned address */
    CHECK_CU(cuMemMap(r, G + 4096, 0, h, 0), CUDA_ERROR_INVALID_VALUE);      /* unaligned size */
    CHECK_CU(cuMemMap(r, 4 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);         /* larger than the handle */
    CHECK_CU(cuMemMap(r + 3 * G, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* past the reservation */
    CHECK_CU(cuMemMap(r, 2 * G, 0, h, 1), CUDA_ERROR_INVALID_VALUE);         /* flags */
    CHECK_CU(cuMemMap(r, 2 * G, 0, 0xdeadbeef, 0), CUDA_ERROR_INVALID_VALUE); /* no such handle */
    CHECK_CU(cuMemMap(r, 2 * G, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(r, G, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);            /* over a mapping */
    CHECK_CU(cuMemMap(r + G, G, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);        /* over its tail */
    CHECK_CU(cuMemUnmap(r, G), CUDA_ERROR_INVALID_VALUE);                     /* partial unmap */
    CHECK_CU(cuMemUnmap(r + G, G), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemUnmap(r, 3 * G), CUDA_ERROR_INVALID_VALUE);                 /* beyond the mapping */
    CHECK_CU(cuMemAddressFree(r, 4 * G), CUDA_ERROR_INVALID_VALUE);           /* still mapped */
    CHECK_CU(cuMemMap(r + 3 * G, G, 0, h2, 0), CUDA_SUCCESS);                 /* leaves a gap */
    CUmemAccessDesc ro = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK_CU(cuMemSetAccess(r, 4 * G, &ro, 1), CUDA_ERROR_INVALID_VALUE);     /* across the gap */
    CHECK_CU(cuMemUnmap(r, 4 * G), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemSetAccess(r, 3 * G, &ro, 1), CUDA_ERROR_INVALID_VALUE);     /* sizes add up, */
    CHECK_CU(cuMemUnmap(r, 3 * G), CUDA_ERROR_INVALID_VALUE);                 /* addresses do not */
    CHECK_CU(cuMemUnmap(r + 3 * G, G), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(r + 2 * G, G, 0, h2, 0), CUDA_SUCCESS);                 /* adjacent is fine */
    /* Adjacent whole mappings may be handled in one call. */
    CUmemAccessDesc rw = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemSetAccess(r, 3 * G, &rw, 1), CUDA_SUCCESS);
    ((char *)r)[3 * G - 1] = 1;
    CHECK_CU(cuMemUnmap(r, 3 * G), CUDA_SUCCESS);
    CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_ERROR_INVALID_VALUE);                 /* already unmapped */
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(r, 4 * G), CUDA_SUCCESS);
}

TEST(access_protection)
{
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    unsigned long long flags = 99;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CHECK_CU(cuMemAddressReserve(&r, 2 * G, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemCreate(&h, 2 * G, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(r, 2 * G, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAccess(&flags, &loc, r + 5), CUDA_SUCCESS);
    CHECK_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CHECK_EQ(touch_in_child(r, 0), SIGSEGV);             /* mapped, but no access yet */

    CUmemAccessDesc ro = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK_CU(cuMemSetAccess(r, 2 * G, &ro, 1), CUDA_SUCCESS);
    CHECK_EQ(touch_in_child(r + G, 0), 0);
    CHECK_EQ(touch_in_child(r + G, 1), SIGSEGV);         /* read-only */
    CHECK_CU(cuMemGetAccess(&flags, &loc, r + G), CUDA_SUCCESS);
    CHECK_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READ);

    CUmemAccessDesc rw = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemSetAccess(r, G, &rw, 1), CUDA_ERROR_INVALID_VALUE);      /* part of a mapping */
    CHECK_CU(cuMemSetAccess(r, 2 * G, &rw, 0), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc bad = access_desc((CUmemAccess_flags)2);
    CHECK_CU(cuMemSetAccess(r, 2 * G, &bad, 1), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc other = { { CU_MEM_LOCATION_TYPE_DEVICE, 4 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemSetAccess(r, 2 * G, &other, 1), CUDA_ERROR_INVALID_DEVICE);
    CHECK_EQ(touch_in_child(r, 1), SIGSEGV);             /* failed calls changed nothing */
    CHECK_CU(cuMemSetAccess(r, 2 * G, &rw, 1), CUDA_SUCCESS);
    CHECK_EQ(touch_in_child(r, 1), 0);
    ((char *)r)[2 * G - 1] = 7;
    CHECK_CU(cuMemGetAccess(&flags, &loc, r), CUDA_SUCCESS);
    CHECK_EQ(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemGetAccess(&flags, NULL, r), CUDA_ERROR_INVALID_VALUE);

    /* Unmapping turns the range back into a reservation: it faults, and a
     * new mapping starts without access. */
    CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_SUCCESS);
    CHECK_EQ(touch_in_child(r, 0), SIGSEGV);
    CHECK_CU(cuMemGetAccess(&flags, &loc, r), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemMap(r, 2 * G, 0, h, 0), CUDA_SUCCESS);
    CHECK_EQ(touch_in_child(r, 0), SIGSEGV);
    CHECK_CU(cuMemSetAccess(r, 2 * G, &rw, 1), CUDA_SUCCESS);
    CHECK_EQ(((char *)r)[2 * G - 1], 7);                 /* same physical memory */
    CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(r, 2 * G), CUDA_SUCCESS);
}

TEST(release_while_mapped)
{
    size_t f0 = free_mem();
    CUdeviceptr r;
    CUmemGenericAllocationHandle h = map_rw(&r, 1, 1), h2 = 0;
    memset((void *)r, 0x3c, G);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_EQ(((unsigned char *)r)[G - 1], 0x3c);         /* still alive */
    CHECK_EQ(free_mem(), f0 - G);
    CHECK_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE); /* already released */
    CHECK_CU(cuMemRetainAllocationHandle(&h2, (void *)(r + 100)), CUDA_SUCCESS);
    CHECK_EQ(h2, h);
    CHECK_CU(cuMemRelease(h2), CUDA_SUCCESS);
    CHECK_CU(cuMemUnmap(r, G), CUDA_SUCCESS);            /* last mapping: memory goes */
    CHECK_EQ(free_mem(), f0);
    CHECK_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemAddressFree(r, G), CUDA_SUCCESS);
}

TEST(retain_handle)
{
    CUdeviceptr r, d;
    CUmemGenericAllocationHandle h = map_rw(&r, 2, 1), got = 0;
    CHECK_CU(cuMemRetainAllocationHandle(&got, (void *)(r + G - 1)), CUDA_SUCCESS);
    CHECK_EQ(got, h);
    CHECK_CU(cuMemRetainAllocationHandle(&got, (void *)(r + G)), CUDA_ERROR_INVALID_VALUE); /* unmapped */
    CHECK_CU(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
    CHECK_CU(cuMemRetainAllocationHandle(&got, (void *)d), CUDA_ERROR_INVALID_VALUE);        /* not VMM */
    int local;
    CHECK_CU(cuMemRetainAllocationHandle(&got, &local), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
    /* Two references: the creation and the retain. */
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemUnmap(r, G), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(r, 2 * G), CUDA_SUCCESS);
}

TEST(ranges_attributes_ipc)
{
    CUdeviceptr r, base = 0, start = 0, mbase = 0, d;
    size_t size = 0, rsize = 0;
    int ipc = -1, mapped = -1, ordinal = -1;
    unsigned long long types = 0, id1 = 0, id2 = 0;
    CUmemGenericAllocationHandle h = map_rw(&r, 3, 2);
    CHECK_CU(cuMemGetAddressRange(&base, &size, r + G + 5), CUDA_SUCCESS);
    CHECK_EQ(base, r);
    CHECK_EQ(size, 2 * G);                               /* the mapping */
    CHECK_CU(cuMemGetAddressRange(&base, &size, r + 2 * G), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuPointerGetAttribute(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, r), CUDA_SUCCESS);
    CHECK_EQ(ipc, 0);
    CHECK_CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, r + G), CUDA_SUCCESS);
    CHECK_EQ(start, r);
    CHECK_CU(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, r + G), CUDA_SUCCESS);
    CHECK_EQ(rsize, 3 * G);                              /* the reservation, as documented */
    CHECK_CU(cuPointerGetAttribute(&mbase, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, r + G), CUDA_SUCCESS);
    CHECK_EQ(mbase, r);
    CHECK_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, r), CUDA_SUCCESS);
    CHECK_EQ(mapped, 1);
    CHECK_CU(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, r + 2 * G), CUDA_SUCCESS);
    CHECK_EQ(mapped, 0);                                 /* reserved, not mapped */
    CHECK_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, r), CUDA_SUCCESS);
    CHECK_EQ(ordinal, 0);
    CHECK_CU(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, r), CUDA_SUCCESS);
    CHECK_EQ(types, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_CU(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, r), CUDA_SUCCESS);

    CUipcMemHandle ih;
    CHECK_CU(cuIpcGetMemHandle(&ih, r), CUDA_ERROR_INVALID_VALUE);  /* VMM memory: no legacy IPC */
    CHECK_CU(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ih, d), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d), CUDA_SUCCESS);

    /* A new mapping is a new buffer. */
    CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(r, 2 * G, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, r), CUDA_SUCCESS);
    CHECK(id1 != id2);
    CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(r, 3 * G), CUDA_SUCCESS);
}

TEST(freed_device_memory_faults)
{
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 1 << 20), CUDA_SUCCESS);
    CHECK_EQ(touch_in_child(p, 1), 0);
    CHECK_CU(cuMemFree(p), CUDA_SUCCESS);
    CHECK_EQ(touch_in_child(p, 0), SIGSEGV);
}

TEST(knob_granularity)
{
    CHECK_EQ(run_self("CUDAEMU_GRANULARITY=65536", "--child-granularity"), 0);
}

TEST(knob_no_vmm)
{
    CHECK_EQ(run_self("CUDAEMU_NO_VMM=1", "--child-no-vmm"), 0);
}

/* Child of knob_granularity: 64 KiB granules. */
static void child_granularity(void)
{
    CUmemAllocationProp prop = device_prop();
    size_t g = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK_EQ(g, 65536);
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
    CHECK_EQ(g, 65536);
    G = 65536;
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemCreate(&h, G / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr r;
    h = map_rw(&r, 2, 1);
    CHECK_CU(cuMemMap(r + G, G, 0, h, 0), CUDA_SUCCESS);  /* aliasing at 64 KiB granularity */
    CUmemAccessDesc rw = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemSetAccess(r + G, G, &rw, 1), CUDA_SUCCESS);
    ((char *)r)[10] = 'x';
    CHECK_EQ(((char *)r)[G + 10], 'x');
    CHECK_CU(cuMemUnmap(r, 2 * G), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(r, 2 * G), CUDA_SUCCESS);
}

/* Child of knob_no_vmm: every VMM call answers NOT_SUPPORTED. */
static void child_no_vmm(void)
{
    int v = -1;
    CHECK_CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0), CUDA_SUCCESS);
    CHECK_EQ(v, 0);
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    CUdeviceptr r;
    size_t g;
    unsigned long long fl;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CUmemAccessDesc rw = access_desc(CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemAddressReserve(&r, 2u << 20, 0, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemCreate(&h, 2u << 20, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemMap(0, 2u << 20, 0, 1, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemSetAccess(0, 2u << 20, &rw, 1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemGetAccess(&fl, &loc, 0), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemUnmap(0, 2u << 20), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemRelease(1), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemAddressFree(0, 2u << 20), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemRetainAllocationHandle(&h, NULL), CUDA_ERROR_NOT_SUPPORTED);
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&prop, 1), CUDA_ERROR_NOT_SUPPORTED);
    /* Ordinary device memory still works. */
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, 100), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(d), CUDA_SUCCESS);
}

int main(int argc, char **argv)
{
    self_argv = argv;
    if (argc == 2) {            /* a knob child: report through the exit status */
        init_ctx();
        if (strcmp(argv[1], "--child-granularity") == 0) child_granularity();
        else if (strcmp(argv[1], "--child-no-vmm") == 0) child_no_vmm();
        else return 2;
        return check_case_failed ? 1 : 0;
    }
    RUN(setup);
    RUN(granularity);
    RUN(reserve_and_free);
    RUN(create_release);
    RUN(create_out_of_memory);
    RUN(aliasing_two_addresses);
    RUN(map_errors);
    RUN(access_protection);
    RUN(release_while_mapped);
    RUN(retain_handle);
    RUN(ranges_attributes_ipc);
    RUN(freed_device_memory_faults);
    RUN(knob_granularity);
    RUN(knob_no_vmm);
    return check_done();
}
