/*
 * tests/e2e/mem_prog.c: what a program can observe of its allocations,
 * for tests/e2e/test_skip_temp_mem.sh, which runs it with and without the
 * library and compares. Prints one "name=value" line per observation.
 *
 *   mem_prog observe    address range, pointer attributes (singular and
 *                       plural), alloc(0), free, double free, interior and
 *                       foreign frees, queries after free, legacy IPC
 *   mem_prog sync MOD   cuMemFree's implicit synchronization: a kernel from
 *                       module MOD (mod_test.so) sleeps then fills buffer A;
 *                       cuMemFree(B) must wait for it, so the host (emulated
 *                       device memory is host memory) then reads A filled
 *   mem_prog capture MOD  a thread captures in GLOBAL mode while another
 *                       thread (GLOBAL mode too) creates a context and
 *                       allocates in it (arena set-up and growth); the
 *                       capture must still end, and its graph must run
 */
#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CK(call)                                                              \
    do {                                                                      \
        CUresult ck_ = (call);                                                \
        if (ck_ != CUDA_SUCCESS) {                                            \
            printf("error=%s:%d:%d\n", #call, __LINE__, (int)ck_);            \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static CUcontext ctx;

static int observe(void)
{
    CUdeviceptr p, q, base = 0, z = 1;
    size_t size = 0;
    printf("alloc0=%d\n", (int)cuMemAlloc(&z, 0));
    CK(cuMemAlloc(&p, 1000));
    CK(cuMemAlloc(&q, 5000));
    printf("range=%d\n", (int)cuMemGetAddressRange(&base, &size, p + 10));
    printf("range_ok=%d\n", base == p && size == 1000);
    CUdeviceptr start = 0;
    size_t rsize = 0;
    CUcontext actx = NULL;
    unsigned long long id_p = 0, id_q = 0, id_p2 = 0;
    int ipc_capable = -1;
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, q + 4999));
    CK(cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, q + 4999));
    printf("attr_range_ok=%d\n", start == q && rsize == 5000);
    CK(cuPointerGetAttribute(&actx, CU_POINTER_ATTRIBUTE_CONTEXT, q));
    printf("attr_ctx_ok=%d\n", actx == ctx);
    CK(cuPointerGetAttribute(&id_p, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
    CK(cuPointerGetAttribute(&id_q, CU_POINTER_ATTRIBUTE_BUFFER_ID, q + 8));
    CK(cuPointerGetAttribute(&id_p2, CU_POINTER_ATTRIBUTE_BUFFER_ID, p + 999));
    printf("buffer_ids_ok=%d\n", id_p != id_q && id_p == id_p2 && id_p != 0);
    CK(cuPointerGetAttribute(&ipc_capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
    printf("ipc_capable=%d\n", ipc_capable);
    printf("outside=%d\n", (int)cuMemGetAddressRange(&base, &size, p + 1000));

    CUpointer_attribute attrs[3] = { CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
    unsigned mtype = 0;
    void *data[3] = { &start, &rsize, &mtype };
    start = 0;
    rsize = 0;
    CK(cuPointerGetAttributes(3, attrs, data, p + 1));
    printf("attrs_ok=%d\n", start == p && rsize == 1000 && mtype == CU_MEMORYTYPE_DEVICE);

    CUipcMemHandle h;
    printf("ipc=%d\n", (int)cuIpcGetMemHandle(&h, q));

    printf("free_interior=%d\n", (int)cuMemFree(p + 256));
    int local = 0;
    printf("free_foreign=%d\n", (int)cuMemFree((CUdeviceptr)(uintptr_t)&local));
    printf("free=%d\n", (int)cuMemFree(p));
    printf("double_free=%d\n", (int)cuMemFree(p));
    printf("range_after_free=%d\n", (int)cuMemGetAddressRange(&base, &size, p));
    printf("attr_after_free=%d\n", (int)cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
    start = 1;
    CUresult arc = cuPointerGetAttributes(1, attrs, data, p);
    printf("attrs_after_free=%d start=%llu\n", (int)arc, (unsigned long long)start);
    /* A new allocation gets a new buffer id, even at the same address. */
    CUdeviceptr r;
    unsigned long long id_r = 0;
    CK(cuMemAlloc(&r, 1000));
    CK(cuPointerGetAttribute(&id_r, CU_POINTER_ATTRIBUTE_BUFFER_ID, r));
    printf("new_id=%d\n", id_r != id_p && id_r != id_q);
    CK(cuMemFree(r));
    CK(cuMemFree(q));
    return 0;
}

static CUfunction load(const char *mod_path, const char *name)
{
    CUmodule m;
    CUfunction f = NULL;
    if (cuModuleLoad(&m, mod_path) == CUDA_SUCCESS) cuModuleGetFunction(&f, m, name);
    return f;
}

static int free_sync(const char *mod_path)
{
    CUfunction f = load(mod_path, "sleep_fill_u32");
    if (!f) { printf("error=module\n"); return 1; }
    CUstream s;
    CUdeviceptr a, b;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&a, 4096));
    CK(cuMemAlloc(&b, 4096));
    CK(cuMemsetD32(a, 0, 1024));
    unsigned v = 0x1234, us = 200000;
    unsigned long long n = 1024;
    void *args[] = { &a, &v, &n, &us };
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    CK(cuMemFree(b));
    /* The kernel must have run: cuMemFree waited for the context's work. */
    printf("free_waited=%d\n", ((volatile unsigned *)(uintptr_t)a)[1023] == 0x1234);
    CK(cuStreamSynchronize(s));
    CK(cuMemFree(a));
    CK(cuStreamDestroy(s));
    return 0;
}

/* The other thread: its own context, allocations that set up an arena and
 * grow it, all while the main thread captures in GLOBAL mode. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static CUresult thread_rc[3];
static void *allocator(void *arg)
{
    (void)arg;
    CUcontext c2;
    CUdevice dev;
    CUdeviceptr x = 0, y = 0;
    pthread_mutex_lock(&mu);
    cuDeviceGet(&dev, 0);
    thread_rc[0] = cuCtxCreate(&c2, NULL, 0, dev);
    if (thread_rc[0] == CUDA_SUCCESS) {
        thread_rc[1] = cuMemAlloc(&x, 4096);             /* arena set-up, first chunk */
        thread_rc[2] = cuMemAlloc(&y, (size_t)5 << 20);  /* growth */
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static int capture(const char *mod_path)
{
    CUfunction f = load(mod_path, "fill_u32");
    if (!f) { printf("error=module\n"); return 1; }
    CUstream s;
    CUdeviceptr a;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&a, 4096));
    CK(cuMemsetD32(a, 0, 1024));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    unsigned v = 77;
    unsigned long long n = 1024;
    void *args[] = { &a, &v, &n };
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
    pthread_t t;
    pthread_create(&t, NULL, allocator, NULL);
    pthread_join(t, NULL);
    printf("thread_ctx=%d thread_alloc=%d thread_grow=%d\n", (int)thread_rc[0], (int)thread_rc[1],
           (int)thread_rc[2]);
    CUgraph g = NULL;
    CUresult rc = cuStreamEndCapture(s, &g);
    printf("end_capture=%d\n", (int)rc);
    if (rc == CUDA_SUCCESS) {
        CUgraphExec e;
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        printf("graph_ran=%d\n", ((volatile unsigned *)(uintptr_t)a)[1023] == 77);
    }
    return 0;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    if (argc < 2) return 2;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    int rc = 2;
    if (strcmp(argv[1], "observe") == 0) rc = observe();
    else if (strcmp(argv[1], "sync") == 0 && argc > 2) rc = free_sync(argv[2]);
    else if (strcmp(argv[1], "capture") == 0 && argc > 2) rc = capture(argv[2]);
    fflush(stdout);
    return rc;
}
