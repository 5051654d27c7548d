// tests/e2e/rt_prog.cu: a CUDA runtime program (nvcc, static runtime) that
// goes through the runtime's start-up and the calls tests/e2e/test_runtime.sh
// checks one by one on the emulated driver, with and without the library.
// Its kernels are C++ functions: on the emulated driver they come, by
// mangled name, from the modules in CUDAEMU_MODULES (tests/emu/mod_cxx.c
// provides _Z3addPffi and _Z5scalePfif; nothing provides _Z7missingPf).
//
//   rt_prog               prints one "key=value" line per check (see main)
//   rt_prog missing       launches `missing` and prints the runtime's error
//   rt_prog reset N MB    N times: cudaMalloc MB MiB, leave it to cudaDeviceReset
//   rt_prog squeeze       all but 8 MiB of the device allocated in 4 MiB blocks and
//                         freed, then a kernel's first launch (lazy loading takes its
//                         code's device memory then)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

__global__ void add(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += a;
}

__global__ void scale(float *x, int n, float a)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void missing(float *x) { x[0] = 1; }

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            std::printf("error=%s at %s\n", cudaGetErrorName(e_), #call);                        \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

static const int N = 256;

static float first(const float *d)
{
    float v = -1;
    cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost);
    return v;
}

int main(int argc, char **argv)
{
    int n = -1;
    CK(cudaGetDeviceCount(&n));
    std::printf("devices=%d\n", n);
    float *d;
    CK(cudaMalloc(&d, N * sizeof(float)));
    CK(cudaMemset(d, 0, N * sizeof(float)));
    if (argc > 3 && std::strcmp(argv[1], "reset") == 0) {
        int rounds = std::atoi(argv[2]);
        size_t bytes = (size_t)std::atoi(argv[3]) << 20;
        for (int i = 0; i < rounds; i++) {
            void *p;
            CK(cudaMalloc(&p, bytes));
            CK(cudaMemset(p, 1, bytes));
            CK(cudaDeviceReset());
        }
        std::printf("reset=ok\n");
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "squeeze") == 0) {
        static void *b[512];
        size_t fr = 0, total = 0, mib = (size_t)1 << 20;
        CK(cudaMemGetInfo(&fr, &total));
        size_t nb = fr > 8 * mib ? (fr - 8 * mib) / (4 * mib) : 0;
        if (nb > 512) nb = 512;
        for (size_t i = 0; i < nb; i++) CK(cudaMalloc(&b[i], 4 * mib));
        for (size_t i = 0; i < nb; i++) CK(cudaFree(b[i]));
        add<<<1, N>>>(d, 2.5f, N);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::printf("squeeze=%g\n", first(d));
        return 0;
    }
    if (argc > 1 && std::strcmp(argv[1], "missing") == 0) {
        missing<<<1, 1>>>(d);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        std::printf("missing=%s\n", cudaGetErrorName(e));
        return 0;
    }

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("name=%s cc=%d.%d sms=%d\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    // kernels by mangled name
    add<<<1, N>>>(d, 1.5f, N);
    CK(cudaGetLastError());
    scale<<<2, 128>>>(d, N, 2.0f);
    CK(cudaDeviceSynchronize());
    std::printf("launch=%g\n", first(d));                          // (0 + 1.5) * 2

    // function attributes, occupancy, the dynamic shared memory limit
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, add));
    std::printf("attr_regs=%d attr_max_threads=%d attr_max_dyn=%d\n", fa.numRegs, fa.maxThreadsPerBlock,
                fa.maxDynamicSharedSizeBytes);
    int blocks = -1;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, add, 128, 0));
    std::printf("occupancy=%d\n", blocks);
    add<<<1, N, 65536>>>(d, 1.0f, N);
    std::printf("big_smem=%s\n", cudaGetErrorName(cudaGetLastError()));
    CK(cudaFuncSetAttribute(add, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536));
    add<<<1, N, 65536>>>(d, 1.0f, N);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::printf("big_smem_allowed=%g\n", first(d));                // 3 + 1

    // a captured graph, updated two ways
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t g, g2;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add<<<1, N, 0, s>>>(d, 10.0f, N);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    std::printf("graph=%g\n", first(d));                            // 4 + 10
    float *e;
    CK(cudaMallocAsync(&e, N * sizeof(float), s));
    CK(cudaMemsetAsync(e, 0, N * sizeof(float), s));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    add<<<1, N, 0, s>>>(e, 5.0f, N);
    CK(cudaStreamEndCapture(s, &g2));
    cudaGraphExecUpdateResultInfo info;
    CK(cudaGraphExecUpdate(ge, g2, &info));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    std::printf("graph_update=%g,%g\n", first(d), first(e));       // 14, 5
    cudaGraphNode_t nodes[1];
    size_t nn = 1;
    CK(cudaGraphGetNodes(g, nodes, &nn));
    float a = 100.0f;
    int cnt = N;
    void *args[] = { &d, &a, &cnt };
    cudaKernelNodeParams kp = {};
    kp.func = (void *)add;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(N);
    kp.kernelParams = args;
    CK(cudaGraphExecKernelNodeSetParams(ge, nodes[0], &kp));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    std::printf("graph_set_params=%g,%g\n", first(d), first(e));   // 114, 5
    CK(cudaFreeAsync(e, s));
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphDestroy(g2));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));

    // the primary context reset (the runtime's context state goes with it), then a fresh start
    CK(cudaDeviceReset());
    CK(cudaMalloc(&d, N * sizeof(float)));
    CK(cudaMemset(d, 0, N * sizeof(float)));
    add<<<1, N>>>(d, 7.0f, N);
    CK(cudaDeviceSynchronize());
    std::printf("after_reset=%g\n", first(d));
    CK(cudaFree(d));
    return 0;
}
