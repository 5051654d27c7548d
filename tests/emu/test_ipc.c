/*
 * test_ipc.c: the emulated driver's IPC between processes (emu_ipc.c):
 * legacy IPC of cuMemAlloc memory (cuIpcGetMemHandle in one process,
 * cuIpcOpenMemHandle / cuIpcCloseMemHandle in another: shared bytes both
 * ways, reference counting, the documented errors, what the opened pointer
 * answers, SYNC_MEMOPS of an opened block, an exporter or block that is
 * gone, a context destroyed with an opened block) and
 * cuMemImportFromShareableHandle of a descriptor that another process
 * exported (properties, shared bytes, charged to the exporter only).
 *
 * Other processes are this program run again (posix_spawn of
 * /proc/self/exe with a mode argument: the driver is not usable in a forked
 * child without exec); a child's exit status says whether its checks held.
 */
#include <cuda.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

extern char **environ;

#define SMALL 4096u
#define BIG ((size_t)4 << 20)

static CUcontext ctx;
static CUmodule mod;
static CUfunction fill;

static void open_driver(void)
{
    if (emu_test_open("mod_test.so", &ctx, &mod) != CUDA_SUCCESS ||
        cuModuleGetFunction(&fill, mod, "fill_u32") != CUDA_SUCCESS) {
        printf("Bail out! emulator set-up failed\n");
        exit(1);
    }
}

/* ------------------------------------------------------------ helpers */

static void to_hex(const CUipcMemHandle *h, char *out)
{
    for (size_t i = 0; i < sizeof h->reserved; i++)
        sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static int from_hex(const char *s, CUipcMemHandle *h)
{
    if (strlen(s) != 2 * sizeof h->reserved) return -1;
    for (size_t i = 0; i < sizeof h->reserved; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1) return -1;
        h->reserved[i] = (char)v;
    }
    return 0;
}

/* Runs this program with argv[1..] = args; its stdout goes to *out_fd (a
 * pipe's read end) when out_fd is not NULL. Returns the child's pid. */
static pid_t spawn_self(char *const *args, int *out_fd)
{
    char *argv[8] = { "/proc/self/exe" };
    for (int i = 0; args[i] && i < 6; i++) argv[i + 1] = args[i];
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int p[2] = { -1, -1 };
    if (out_fd) {
        if (pipe(p) != 0) return -1;
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        posix_spawn_file_actions_addclose(&fa, p[0]);
    }
    fflush(stdout);
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out_fd) {
        close(p[1]);
        *out_fd = p[0];
    }
    return rc == 0 ? pid : -1;
}

static int wait_status(pid_t pid)
{
    int st = 0;
    if (pid <= 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int read_line(int fd, char *buf, size_t n)
{
    size_t k = 0;
    while (k + 1 < n && read(fd, buf + k, 1) == 1 && buf[k] != '\n') k++;
    buf[k] = 0;
    return (int)k;
}

static uint32_t word_at(CUdeviceptr p)
{
    uint32_t v = 0;
    CHECK_CU(cuMemcpyDtoH(&v, p, 4), CUDA_SUCCESS);
    return v;
}

static void fill_kernel(CUdeviceptr p, uint32_t v, uint64_t n)
{
    void *args[] = { &p, &v, &n };
    CHECK_CU(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    CHECK_CU(cuCtxSynchronize(), CUDA_SUCCESS);
}

/* ------------------------------------------------------------ children */

/* "open HEX_SMALL HEX_BIG": opens both, checks the parent's words, writes
 * its own (a kernel and a memset), checks reference counting and what the
 * opened pointers answer. */
static int child_open(const char *hs, const char *hb)
{
    CUipcMemHandle h[2];
    CHECK(from_hex(hs, &h[0]) == 0 && from_hex(hb, &h[1]) == 0);
    const size_t sizes[2] = { SMALL, BIG };
    CUdeviceptr p[2] = { 0, 0 };
    for (int i = 0; i < 2; i++) {
        CHECK_CU(cuIpcOpenMemHandle(&p[i], h[i], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
        CHECK_EQ(word_at(p[i]), 0xa0a0a0a0u + (unsigned)i);
        CHECK_EQ(word_at(p[i] + sizes[i] - 4), 0xa0a0a0a0u + (unsigned)i);
        /* what the opened pointer answers */
        CUdeviceptr base = 0;
        size_t size = 0;
        CHECK_CU(cuMemGetAddressRange(&base, &size, p[i] + 12), CUDA_SUCCESS);
        CHECK(base == p[i]);
        CHECK_EQ(size, sizes[i]);
        CUcontext c = NULL;
        int legacy = -1, mt = -1;
        CHECK_CU(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p[i]), CUDA_SUCCESS);
        CHECK(c == ctx);
        CHECK_CU(cuPointerGetAttribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p[i]),
                 CUDA_SUCCESS);
        CHECK_EQ(legacy, 0);
        /* SYNC_MEMOPS: an opened block takes it, for the whole block */
        unsigned one = 1, sm = 9;
        CHECK_CU(cuPointerGetAttribute(&sm, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p[i]), CUDA_SUCCESS);
        CHECK_EQ(sm, 0);
        CHECK_CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p[i] + 4), CUDA_SUCCESS);
        CHECK_CU(cuPointerGetAttribute(&sm, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p[i]), CUDA_SUCCESS);
        CHECK_EQ(sm, 1);
        CHECK_CU(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p[i]), CUDA_SUCCESS);
        CHECK_EQ(mt, CU_MEMORYTYPE_DEVICE);
        CUmemGenericAllocationHandle vh;
        CHECK_CU(cuMemRetainAllocationHandle(&vh, (void *)(uintptr_t)p[i]), CUDA_ERROR_INVALID_VALUE);
        CUipcMemHandle again;
        CHECK_CU(cuIpcGetMemHandle(&again, p[i]), CUDA_ERROR_INVALID_VALUE);   /* not cuMemAlloc memory */
        CHECK_CU(cuMemFree(p[i]), CUDA_ERROR_INVALID_VALUE);
        /* the range check of copies: the opened block, not more */
        uint32_t tmp[2];
        CHECK_CU(cuMemcpyDtoH(tmp, p[i] + sizes[i] - 4, 8), CUDA_ERROR_INVALID_VALUE);
    }
    /* opened twice in this context: the same address, one more reference */
    CUdeviceptr q = 0;
    CHECK_CU(cuIpcOpenMemHandle(&q, h[0], 0), CUDA_SUCCESS);
    CHECK(q == p[0]);
    unsigned sm = 9;
    CHECK_CU(cuPointerGetAttribute(&sm, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q), CUDA_SUCCESS);
    CHECK_EQ(sm, 1);                            /* the same mapping: its flag */
    CHECK_CU(cuIpcCloseMemHandle(q), CUDA_SUCCESS);
    CHECK_EQ(word_at(p[0]), 0xa0a0a0a0u);       /* still mapped: one reference left */
    /* the child's words, through a kernel and a memset */
    fill_kernel(p[0], 0xc0c0c0c0u, SMALL / 4);
    CHECK_CU(cuMemsetD32(p[1], 0xc1c1c1c1u, BIG / 4), CUDA_SUCCESS);
    CHECK_CU(cuIpcCloseMemHandle(p[1] + 4), CUDA_ERROR_INVALID_VALUE);    /* not what open returned */
    for (int i = 0; i < 2; i++) CHECK_CU(cuIpcCloseMemHandle(p[i]), CUDA_SUCCESS);
    CHECK_CU(cuIpcCloseMemHandle(p[0]), CUDA_ERROR_INVALID_VALUE);        /* closed twice */
    CUdeviceptr b;
    size_t s;
    CHECK_CU(cuMemGetAddressRange(&b, &s, p[0]), CUDA_ERROR_NOT_FOUND);
    /* opened again after the last close: a new mapping of the same bytes */
    CHECK_CU(cuIpcOpenMemHandle_v2(&q, h[0], 0), CUDA_SUCCESS);
    CHECK_EQ(word_at(q), 0xc0c0c0c0u);
    CHECK_CU(cuPointerGetAttribute(&sm, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, q), CUDA_SUCCESS);
    CHECK_EQ(sm, 0);                            /* a new mapping: a new flag */
    /* a context destroyed with the block open: the mapping goes with it */
    CUcontext c2;
    CUdevice dev;
    CHECK_CU(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    CHECK_CU(cuCtxCreate(&c2, NULL, 0, dev), CUDA_SUCCESS);
    CUdeviceptr r = 0;
    CHECK_CU(cuIpcOpenMemHandle(&r, h[1], 0), CUDA_SUCCESS);
    CHECK_EQ(word_at(r), 0xc1c1c1c1u);
    CHECK_CU(cuCtxDestroy(c2), CUDA_SUCCESS);
    CHECK_CU(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    CHECK_CU(cuMemGetAddressRange(&b, &s, r), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuIpcCloseMemHandle(r), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuIpcCloseMemHandle(q), CUDA_SUCCESS);
    return check_case_failed;
}

/* "export": allocates a block, prints its handle and the handle of a second
 * block it frees at once, then exits (the parent opens both afterwards). */
static int child_export(void)
{
    CUdeviceptr a, b;
    CUipcMemHandle ha, hb;
    char xa[2 * CU_IPC_HANDLE_SIZE + 1], xb[2 * CU_IPC_HANDLE_SIZE + 1];
    CHECK_CU(cuMemAlloc(&a, SMALL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, SMALL), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha, a), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&hb, b), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    to_hex(&ha, xa);
    to_hex(&hb, xb);
    printf("%s\n%s\n", xa, xb);
    fflush(stdout);
    char c;
    return read(0, &c, 1) < 0 || check_case_failed;   /* lives until the parent says */
}

/* "vmm SOCKFD": cuMemCreate memory exported as a descriptor, sent to the
 * parent over the socket (SCM_RIGHTS); waits for the parent's byte, checks
 * what the parent wrote, exits. */
static int child_vmm(int sock)
{
    size_t g = 0;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemCreate(&h, g, &prop, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(va, g, &ad, 1), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(va, 0x5a5a5a5au, g / 4), CUDA_SUCCESS);
    int fd = -1;
    CHECK_CU(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
    char byte = 'x', cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { &byte, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    CHECK(sendmsg(sock, &m, 0) == 1);
    close(fd);
    CHECK(read(sock, &byte, 1) == 1);
    CHECK_EQ(word_at(va + g - 4), 0x6b6b6b6bu);   /* the parent's write */
    CHECK_CU(cuMemUnmap(va, g), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(va, g), CUDA_SUCCESS);
    return check_case_failed;
}

/* ------------------------------------------------------------ cases */

TEST(handles_in_one_process)
{
    CUdeviceptr a, b;
    CUipcMemHandle ha, ha2, hb, bad;
    CHECK_CU(cuMemAlloc(&a, SMALL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, SMALL), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 0x11111111u, SMALL / 4), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha, a), CUDA_SUCCESS);
    CHECK_EQ(word_at(a + SMALL - 4), 0x11111111u);      /* the bytes moved with the block */
    CHECK_CU(cuMemsetD32(a, 0x22222222u, SMALL / 4), CUDA_SUCCESS);
    CHECK_EQ(word_at(a + 8), 0x22222222u);
    CHECK_CU(cuIpcGetMemHandle(&ha2, a + 100), CUDA_SUCCESS);
    CHECK(memcmp(&ha, &ha2, sizeof ha) == 0);           /* the same handle */
    CHECK_CU(cuIpcGetMemHandle(&hb, b), CUDA_SUCCESS);
    CHECK(memcmp(&ha, &hb, sizeof ha) != 0);
    CUdeviceptr p = 0;
    CHECK_CU(cuIpcOpenMemHandle(&p, ha, 0), CUDA_ERROR_INVALID_CONTEXT);   /* the exporter itself */
    CHECK_CU(cuIpcOpenMemHandle(&p, ha, 2), CUDA_ERROR_INVALID_VALUE);     /* unknown flag */
    CHECK_CU(cuIpcOpenMemHandle(NULL, ha, 0), CUDA_ERROR_INVALID_VALUE);
    memset(&bad, 0x5c, sizeof bad);
    CHECK_CU(cuIpcOpenMemHandle_v2(&p, bad, 0), CUDA_ERROR_INVALID_VALUE); /* not a handle */
    CHECK_CU(cuIpcCloseMemHandle(a), CUDA_ERROR_INVALID_VALUE);            /* never opened */
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha, a), CUDA_ERROR_INVALID_VALUE);
}

TEST(open_in_another_process)
{
    CUdeviceptr a, b;
    CUipcMemHandle ha, hb;
    char xa[2 * CU_IPC_HANDLE_SIZE + 1], xb[2 * CU_IPC_HANDLE_SIZE + 1];
    size_t free0, free1, total;
    CHECK_CU(cuMemAlloc(&a, SMALL), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&b, BIG), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(a, 0xa0a0a0a0u, SMALL / 4), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD32(b, 0xa0a0a0a1u, BIG / 4), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&ha, a), CUDA_SUCCESS);
    CHECK_CU(cuIpcGetMemHandle(&hb, b + 4096), CUDA_SUCCESS);
    to_hex(&ha, xa);
    to_hex(&hb, xb);
    CHECK_CU(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    char *args[] = { "open", xa, xb, NULL };
    CHECK_EQ(wait_status(spawn_self(args, NULL)), 0);
    CHECK_CU(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
    CHECK_EQ(free1, free0);
    CHECK_EQ(word_at(a), 0xc0c0c0c0u);                  /* the child's kernel */
    CHECK_EQ(word_at(a + SMALL - 4), 0xc0c0c0c0u);
    CHECK_EQ(word_at(b + BIG - 4), 0xc1c1c1c1u);        /* the child's memset */
    CHECK_CU(cuMemFree(a), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(b), CUDA_SUCCESS);
}

TEST(exporter_or_block_gone)
{
    int out = -1;
    char *args[] = { "export", NULL };
    int in[2];
    CHECK(pipe2(in, O_CLOEXEC) == 0);
    /* the child's stdin: the pipe's read end, so that it lives until we close */
    int saved = dup(0);
    dup2(in[0], 0);
    pid_t pid = spawn_self(args, &out);
    dup2(saved, 0);
    close(saved);
    close(in[0]);
    char la[256], lb[256];
    CUipcMemHandle ha, hb;
    CHECK(read_line(out, la, sizeof la) > 0 && read_line(out, lb, sizeof lb) > 0);
    CHECK(from_hex(la, &ha) == 0 && from_hex(lb, &hb) == 0);
    CUdeviceptr p = 0;
    CHECK_CU(cuIpcOpenMemHandle(&p, hb, 0), CUDA_ERROR_INVALID_VALUE);    /* its block was freed */
    CHECK_CU(cuIpcOpenMemHandle(&p, ha, 0), CUDA_SUCCESS);                /* exporter alive */
    CHECK_CU(cuIpcCloseMemHandle(p), CUDA_SUCCESS);
    close(in[1]);                                                          /* the child ends */
    close(out);
    CHECK_EQ(wait_status(pid), 0);
    CHECK_CU(cuIpcOpenMemHandle(&p, ha, 0), CUDA_ERROR_INVALID_VALUE);    /* exporter gone */
}

TEST(vmm_descriptor_from_another_process)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *args[] = { "vmm", num, NULL };
    size_t free0, free1, total;
    CHECK_CU(cuMemGetInfo(&free0, &total), CUDA_SUCCESS);
    pid_t pid = spawn_self(args, NULL);
    close(sv[1]);
    char byte, cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { &byte, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf };
    int fd = -1;
    if (recvmsg(sv[0], &m, 0) == 1 && CMSG_FIRSTHDR(&m)) memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
    CHECK(fd >= 0);
    CUmemGenericAllocationHandle h = 0;
    CHECK_CU(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             CUDA_SUCCESS);
    close(fd);
    CUmemAllocationProp prop;
    CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&prop, h), CUDA_SUCCESS);
    CHECK_EQ(prop.location.id, 0);
    CHECK_EQ(prop.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_EQ(prop.allocFlags.gpuDirectRDMACapable, 1);
    size_t g = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CUdeviceptr va;
    CUmemAccessDesc ad = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
    CHECK_CU(cuMemSetAccess(va, g, &ad, 1), CUDA_SUCCESS);
    CHECK_CU(cuMemGetInfo(&free1, &total), CUDA_SUCCESS);
    CHECK_EQ(free1, free0);                              /* charged to the exporter */
    CHECK_EQ(word_at(va), 0x5a5a5a5au);
    CHECK_CU(cuMemsetD32(va + g - 4, 0x6b6b6b6bu, 1), CUDA_SUCCESS);
    CHECK(write(sv[0], "k", 1) == 1);
    CHECK_EQ(wait_status(pid), 0);
    CHECK_EQ(word_at(va), 0x5a5a5a5au);                  /* still mapped after the exporter left */
    CHECK_CU(cuMemUnmap(va, g), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(h), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(va, g), CUDA_SUCCESS);
    close(sv[0]);
    /* a descriptor of anything else */
    int other = memfd_create("not-cudaemu", MFD_CLOEXEC);
    CHECK(other >= 0 && ftruncate(other, (off_t)g) == 0);
    CHECK_CU(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)other, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
             CUDA_ERROR_INVALID_VALUE);
    close(other);
}

int main(int argc, char **argv)
{
    open_driver();
    if (argc == 4 && strcmp(argv[1], "open") == 0) return child_open(argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "export") == 0) return child_export();
    if (argc == 3 && strcmp(argv[1], "vmm") == 0) return child_vmm(atoi(argv[2]));
    RUN(handles_in_one_process);
    RUN(open_in_another_process);
    RUN(exporter_or_block_gone);
    RUN(vmm_descriptor_from_another_process);
    return check_done();
}
