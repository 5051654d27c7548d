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
 * and prints each result and value; and legacy IPC (case ipc), what PyTorch
 * multiprocessing, NCCL's P2P transport and weight-sharing servers do: the
 * program takes a handle of each buffer (twice: the same handle; from an
 * interior pointer), fails to open one itself (CUDA_ERROR_INVALID_CONTEXT),
 * then runs itself again (posix_spawn, case ipc_child) with both handles.
 * The child opens each (with LAZY_ENABLE_PEER_ACCESS), checks the parent's
 * words, prints what the opened pointer answers (address range, context,
 * attributes, VMM queries, cuMemFree, a copy past its end), opens it again (the same address),
 * closes once, writes its own words (a kernel into the small one, a memset
 * into the big one), closes, closes again (an error). The parent checks
 * the child's words, its exit status and, where CUDAEMU_STATS is set, its
 * violations (the child writes its own file, <CUDAEMU_STATS>.child).
 * ADV_IPC_CHILD_PLAIN=1: the child runs without LD_PRELOAD (an importer
 * without the library).
 * Usage: adv_vmm retain|access|attributes|ipc
 */
#include "adv_common.h"

#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

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

/* ------------------------------------------------------------ legacy IPC */

#define SMALL_WORD 0x11111111u
#define BIG_WORD 0x22222222u
#define CHILD_SMALL 0x33333333u
#define CHILD_BIG 0x44444444u

static void to_hex(const CUipcMemHandle *h, char *out)
{
    for (size_t i = 0; i < sizeof h->reserved; i++)
        sprintf(out + 2 * i, "%02x", (unsigned char)h->reserved[i]);
}

static void from_hex(const char *s, CUipcMemHandle *h)
{
    memset(h, 0, sizeof *h);
    for (size_t i = 0; i < sizeof h->reserved && s[2 * i] && s[2 * i + 1]; i++) {
        unsigned v = 0;
        sscanf(s + 2 * i, "%2x", &v);
        h->reserved[i] = (char)v;
    }
}

/* p[i] = v + i for n words (fill_u32): a kernel on a stream of its own,
 * synchronized. */
static void fill(CUmodule mod, CUdeviceptr p, uint32_t v, uint64_t n)
{
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ADV_LAUNCH(adv_fn(mod, "fill_u32"), s, &p, &v, &n);
    R(cuStreamSynchronize(s));
    R(cuStreamDestroy(s));
}

/* What an opened pointer answers. */
static void opened_queries(CUcontext ctx, CUdeviceptr p, size_t bytes)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = R(cuMemGetAddressRange(&base, &size, p + 100));
    printf("  cuMemGetAddressRange: %s", adv_err(r));
    if (r == CUDA_SUCCESS) printf(", base %s, size %s", base == p ? "the pointer" : "ELSEWHERE",
                                  size == bytes ? "the buffer's" : "OTHER");
    printf("\n");
    CUcontext c = NULL;
    r = R(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    printf("  CONTEXT: %s, %s\n", adv_err(r), c == ctx ? "the current one" : "another");
    attributes(p);
    get_access(p);
    static const unsigned one = 1;   /* round 51: kept for an opened block as for cuMemAlloc memory */
    int sm = -1;
    r = R(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + 8));
    R(cuPointerGetAttribute(&sm, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    printf("  SYNC_MEMOPS set: %s, reads %d\n", adv_err(r), sm);
    CUmemGenericAllocationHandle h;
    printf("  cuMemRetainAllocationHandle: %s\n",
           adv_err(R(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p))));
    CUipcMemHandle again;
    printf("  cuIpcGetMemHandle of the opened pointer: %s\n", adv_err(R(cuIpcGetMemHandle(&again, p))));
    printf("  cuMemFree of the opened pointer: %s\n", adv_err(R(cuMemFree(p))));
    uint32_t two[2];
    printf("  a copy running 4 bytes past its end: %s\n",
           adv_err(R(cuMemcpyDtoH(two, p + bytes - 4, sizeof two))));
}

static int ipc_child(const char *hs, const char *hb)
{
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    const char *hex[2] = { hs, hb };
    const size_t bytes[2] = { 4096, 4u << 20 };
    const uint32_t want[2] = { SMALL_WORD, BIG_WORD };
    const char *names[2] = { "child reads the 4 KiB buffer", "child reads the 4 MiB buffer" };
    CUdeviceptr p[2] = { 0, 0 };
    for (int i = 0; i < 2; i++) {
        CUipcMemHandle h;
        from_hex(hex[i], &h);
        CUresult r = R(cuIpcOpenMemHandle(&p[i], h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        printf("child: cuIpcOpenMemHandle of the %s buffer: %s\n", i ? "4 MiB" : "4 KiB", adv_err(r));
        if (r != CUDA_SUCCESS) continue;
        uint32_t *w = malloc(bytes[i]);
        for (size_t k = 0; w && k < bytes[i] / 4; k++) w[k] = want[i];
        if (w) adv_check_words(names[i], p[i], w, bytes[i] / 4);
        free(w);
        opened_queries(ctx, p[i], bytes[i]);
        CUdeviceptr q = 0;
        R(cuIpcOpenMemHandle(&q, h, 0));
        printf("  opened again: %s\n", q == p[i] ? "the same address" : "ANOTHER address");
        R(cuIpcCloseMemHandle(q));
    }
    if (p[0]) fill(mod, p[0], CHILD_SMALL, 1024);
    if (p[1]) R(cuMemsetD32(p[1], CHILD_BIG, (4u << 20) / 4));
    for (int i = 0; i < 2; i++) {
        if (!p[i]) continue;
        R(cuIpcCloseMemHandle(p[i]));
        printf("child: closed again: %s\n", adv_err(R(cuIpcCloseMemHandle(p[i]))));
    }
    return adv_finish();
}

/* The child's violations, from its CUDAEMU_STATS file (-1: none read). */
static long child_violations(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    const char *v = strstr(buf, "\"violations\":");
    return v ? strtol(v + strlen("\"violations\":"), NULL, 10) : -1;
}

/* Runs this program as "ipc_child HEX HEX"; returns its exit status. */
static int spawn_child(const CUipcMemHandle *h)
{
    char hex[2][2 * CU_IPC_HANDLE_SIZE + 1], exe[PATH_MAX], stats[PATH_MAX + 16];
    to_hex(&h[0], hex[0]);
    to_hex(&h[1], hex[1]);
    adv_path("adv_vmm", exe, sizeof exe);
    const char *st = getenv("CUDAEMU_STATS");
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return -1;
    size_t k = 0;
    int plain = getenv("ADV_IPC_CHILD_PLAIN") != NULL;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "CUDAEMU_STATS=", 14) == 0) continue;
        if (plain && strncmp(environ[i], "LD_PRELOAD=", 11) == 0) continue;
        env[k++] = environ[i];
    }
    if (st) {
        snprintf(stats, sizeof stats, "CUDAEMU_STATS=%s.child", st);
        env[k++] = stats;
    }
    char *argv[] = { exe, "ipc_child", hex[0], hex[1], NULL };
    pid_t pid;
    fflush(stdout);
    int rc = posix_spawn(&pid, exe, NULL, NULL, argv, env);
    free(env);
    int status = 0;
    if (rc != 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void ipc(CUdeviceptr small, CUdeviceptr big)
{
    CUdeviceptr p[2] = { small, big };
    CUipcMemHandle h[2], again;
    for (int i = 0; i < 2; i++) {
        printf("-- %s cuMemAlloc buffer\n", i ? "4 MiB" : "4 KiB");
        CUresult r = R(cuIpcGetMemHandle(&h[i], p[i] + 64));
        printf("cuIpcGetMemHandle (interior pointer): %s\n", adv_err(r));
        if (r != CUDA_SUCCESS) return;
        r = R(cuIpcGetMemHandle(&again, p[i]));
        printf("cuIpcGetMemHandle again: %s, %s\n", adv_err(r),
               memcmp(&again, &h[i], sizeof again) == 0 ? "the same handle" : "ANOTHER handle");
    }
    CUdeviceptr q = 0;
    printf("cuIpcOpenMemHandle in the exporting process: %s\n",
           adv_err(R(cuIpcOpenMemHandle(&q, h[0], 0))));
    int status = spawn_child(h);
    printf("child exit status: %d\n", status);
    const char *st = getenv("CUDAEMU_STATS");
    if (st) {
        char path[PATH_MAX + 8];
        snprintf(path, sizeof path, "%s.child", st);
        long v = child_violations(path);
        adv_check("child's violations", v == 0, "%ld", v);
    }
    uint32_t *w = malloc((size_t)4 << 20);
    if (!w) return;
    for (size_t k = 0; k < 1024; k++) w[k] = CHILD_SMALL + (uint32_t)k;   /* fill_u32: v + i */
    adv_check_words("the child's kernel wrote the 4 KiB buffer", small, w, 1024);
    for (size_t k = 0; k < (1u << 20); k++) w[k] = CHILD_BIG;
    adv_check_words("the child's memset wrote the 4 MiB buffer", big, w, 1u << 20);
    free(w);
}

static void query(int which, const char *label, CUdeviceptr p, size_t bytes)
{
    printf("-- %s\n", label);
    switch (which) {
    case 0: retain(p, bytes); break;
    case 1: get_access(p); break;
    case 2: attributes(p); break;
    }
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "retain", "access", "attributes", "ipc", "ipc_child", NULL };
    int which = adv_case(argc, argv, cases);
    if (which == 4) {
        if (argc != 4) return 4;
        return ipc_child(argv[2], argv[3]);
    }
    CUcontext ctx;
    CUdeviceptr small, big;
    adv_open(&ctx, NULL);
    MUST(cuMemAlloc(&small, 4096));
    MUST(cuMemAlloc(&big, 4u << 20));
    MUST(cuMemsetD32(small, SMALL_WORD, 1024));
    MUST(cuMemsetD32(big, BIG_WORD, 1u << 20));
    if (which == 3) {
        ipc(small, big);
    } else {
        query(which, "4 KiB cuMemAlloc buffer", small, 4096);
        query(which, "4 MiB cuMemAlloc buffer", big, 4u << 20);
        uint32_t a = 0, b = 0;
        R(cuMemcpyDtoH(&a, small, 4));
        R(cuMemcpyDtoH(&b, big, 4));
        adv_check("buffers unchanged by the queries", a == SMALL_WORD && b == BIG_WORD,
                  "%08x %08x", a, b);
    }
    R(cuMemFree(small));
    R(cuMemFree(big));
    return adv_finish();
}
