// tests/gpu/rt_graphs.cu: a CUDA runtime program (nvcc, static cudart) that
// uses graphs the way applications do. Each step:
//   - allocates a temporary (cudaMalloc, or cudaMallocAsync on the stream
//     with --async-alloc, outside the capture),
//   - picks the step's input from three buffers in turn,
//   - captures a chain of --nodes kernels with cudaStreamBeginCapture,
//   - instantiates on the first step, otherwise cudaGraphExecUpdate (and
//     re-instantiates if the update is refused),
//   - launches, waits, frees the temporary.
// Every step's graph differs only in buffer addresses and a scalar, so every
// update should succeed. At the end it prints the counts and
// "checksum: <16 hex>" (FNV-1a 64 of the output buffer). Integer math only:
// the result does not depend on the GPU model or on the library.
//
// It also recomputes the whole run on the host and prints "reference: match"
// or the first mismatching word.
//
// Exit status: 0 done; 1 a CUDA error (printed with the call); 2 bad
// options; 3 the runtime did not start (its first call failed); 4 the GPU
// result differs from the host's. On the emulated driver it runs with its
// kernels from rt_graphs_kernels.so (CUDAEMU_MODULES=build/gpu/rt_graphs_kernels.so).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define RT_CHECK(call) rt_check((call), #call, __LINE__)

static void rt_check(cudaError_t e, const char *what, int line)
{
    if (e == cudaSuccess)
        return;
    std::fprintf(stderr, "rt_graphs:%d: %s failed: %s (%d): %s\n", line, what, cudaGetErrorName(e),
                 (int)e, cudaGetErrorString(e));
    std::exit(1);
}

#define RT_FN static __host__ __device__ __forceinline__

RT_FN unsigned rt_hash(unsigned x)
{
    x ^= x >> 16; x *= 0x85ebca6bu;
    x ^= x >> 13; x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}
// The per-element math, shared by the kernels and the host reference.
RT_FN unsigned rt_first_elem(unsigned in, unsigned prev, unsigned salt, unsigned e)
{
    return rt_hash(in + salt + e * 0x9e3779b9u) ^ prev;
}
RT_FN unsigned rt_middle_elem(unsigned v, unsigned k) { return ((v << 5) | (v >> 27)) * 33u + k; }
RT_FN unsigned rt_last_elem(unsigned v, unsigned next) { return v ^ (next >> 3); }
RT_FN unsigned rt_salt(int step) { return 0x5eedu + (unsigned)step; }
RT_FN unsigned rt_k(int step, int i) { return (unsigned)i * 0x01000193u + (unsigned)step; }

#define RT_FOR_EACH(e, n) \
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < (n); e += gridDim.x * blockDim.x)

// tmp = first(in, out): the previous result feeds in
__global__ void rt_first(const unsigned *in, const unsigned *out, unsigned *tmp, unsigned n, unsigned salt)
{
    RT_FOR_EACH(e, n) tmp[e] = rt_first_elem(in[e], out[e], salt, e);
}
__global__ void rt_middle(unsigned *tmp, unsigned n, unsigned k)
{
    RT_FOR_EACH(e, n) tmp[e] = rt_middle_elem(tmp[e], k);
}
__global__ void rt_last(const unsigned *tmp, unsigned *out, unsigned n)
{
    RT_FOR_EACH(e, n) out[e] = rt_last_elem(tmp[e], tmp[(e + 1) % n]);
}

// The whole run on the host, for the same inputs: ins[3] of n words, out
// starts at 0. Returns the final output in out (n words).
static void rt_reference(unsigned *const ins[3], unsigned *out, unsigned n, int steps, int nodes)
{
    unsigned *tmp = (unsigned *)std::malloc((size_t)n * sizeof(unsigned));
    if (!tmp) {
        std::fprintf(stderr, "rt_graphs: out of host memory\n");
        std::exit(1);
    }
    std::memset(out, 0, (size_t)n * sizeof(unsigned));
    for (int step = 0; step < steps; step++) {
        for (unsigned e = 0; e < n; e++)
            tmp[e] = rt_first_elem(ins[step % 3][e], out[e], rt_salt(step), e);
        for (int i = 0; i < nodes - 2; i++)
            for (unsigned e = 0; e < n; e++)
                tmp[e] = rt_middle_elem(tmp[e], rt_k(step, i));
        for (unsigned e = 0; e < n; e++)
            out[e] = rt_last_elem(tmp[e], tmp[(e + 1) % n]);
    }
    std::free(tmp);
}

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
    char *end;
    long v = std::strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        std::fprintf(stderr, "rt_graphs: %s wants an integer in [%d, %d], got '%s'\n", opt, lo, hi, s);
        std::exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    int steps = 30, nodes = 64, async_alloc = 0;
    unsigned n = 1u << 16;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = parse_int("--steps", argv[++i], 1, 1000000);
        else if (!std::strcmp(argv[i], "--nodes") && i + 1 < argc)
            nodes = parse_int("--nodes", argv[++i], 2, 100000);
        else if (!std::strcmp(argv[i], "--elems") && i + 1 < argc)
            n = (unsigned)parse_int("--elems", argv[++i], 1, 1 << 26);
        else if (!std::strcmp(argv[i], "--async-alloc"))
            async_alloc = 1;
        else {
            std::fprintf(stderr, "usage: rt_graphs [--steps N] [--nodes N>=2] [--elems N] [--async-alloc]\n");
            return 2;
        }
    }

    int devices = 0;
    cudaError_t first = cudaGetDeviceCount(&devices);
    if (first != cudaSuccess || devices < 1) {
        std::printf("rt_graphs: the CUDA runtime did not start (cudaGetDeviceCount: %s, %d devices)\n",
                    cudaGetErrorName(first), devices);
        return 3;
    }
    cudaDeviceProp prop;
    RT_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("rt_graphs: device %s, steps=%d nodes=%d elems=%u temps=%s\n", prop.name, steps, nodes, n,
                async_alloc ? "cudaMallocAsync" : "cudaMalloc");

    const size_t bytes = (size_t)n * sizeof(unsigned);
    const unsigned block = 128, grid = (n + block - 1) / block < 64 ? (n + block - 1) / block : 64;
    cudaStream_t s;
    RT_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *in[3], *out, *host_in[3];
    unsigned *host = (unsigned *)std::malloc(bytes), *expect = (unsigned *)std::malloc(bytes);
    if (!host || !expect) {
        std::fprintf(stderr, "rt_graphs: out of host memory\n");
        return 1;
    }
    for (int b = 0; b < 3; b++) {
        host_in[b] = (unsigned *)std::malloc(bytes);
        if (!host_in[b]) {
            std::fprintf(stderr, "rt_graphs: out of host memory\n");
            return 1;
        }
        for (unsigned e = 0; e < n; e++)
            host_in[b][e] = e * 2654435761u + (unsigned)b * 0x9e3779b9u + 1u;
        RT_CHECK(cudaMalloc(&in[b], bytes));
        RT_CHECK(cudaMemcpy(in[b], host_in[b], bytes, cudaMemcpyHostToDevice));
    }
    RT_CHECK(cudaMalloc(&out, bytes));
    RT_CHECK(cudaMemset(out, 0, bytes));

    cudaGraphExec_t exec = nullptr;
    int instantiations = 0, updates = 0, update_failures = 0, launches = 0;
    for (int step = 0; step < steps; step++) {
        unsigned *tmp;
        if (async_alloc)
            RT_CHECK(cudaMallocAsync((void **)&tmp, bytes, s));
        else
            RT_CHECK(cudaMalloc(&tmp, bytes));

        cudaGraph_t g;
        RT_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        rt_first<<<grid, block, 0, s>>>(in[step % 3], out, tmp, n, rt_salt(step));
        for (int i = 0; i < nodes - 2; i++)
            rt_middle<<<grid, block, 0, s>>>(tmp, n, rt_k(step, i));
        rt_last<<<grid, block, 0, s>>>(tmp, out, n);
        RT_CHECK(cudaGetLastError());
        RT_CHECK(cudaStreamEndCapture(s, &g));

        if (exec) {
            cudaGraphExecUpdateResultInfo info;
            std::memset(&info, 0, sizeof info);
            cudaError_t e = cudaGraphExecUpdate(exec, g, &info);
            updates++;
            if (e == cudaErrorGraphExecUpdateFailure) {
                (void)cudaGetLastError(); // the failure is sticky in cudaGetLastError only
                update_failures++;
                RT_CHECK(cudaGraphExecDestroy(exec));
                exec = nullptr;
            } else {
                RT_CHECK(e);
            }
        }
        if (!exec) {
            RT_CHECK(cudaGraphInstantiate(&exec, g, 0));
            instantiations++;
        }
        RT_CHECK(cudaGraphLaunch(exec, s));
        launches++;
        if (async_alloc)
            RT_CHECK(cudaFreeAsync(tmp, s));
        RT_CHECK(cudaStreamSynchronize(s));
        if (!async_alloc)
            RT_CHECK(cudaFree(tmp));
        RT_CHECK(cudaGraphDestroy(g));
    }

    RT_CHECK(cudaMemcpy(host, out, bytes, cudaMemcpyDeviceToHost));
    unsigned long long h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)host;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    rt_reference(host_in, expect, n, steps, nodes);
    unsigned bad = n;
    for (unsigned e = 0; e < n && bad == n; e++)
        if (host[e] != expect[e])
            bad = e;
    std::printf("rt_graphs: instantiations=%d updates=%d update_failures=%d launches=%d\n", instantiations,
                updates, update_failures, launches);
    if (bad != n)
        std::printf("reference: MISMATCH at element %u: GPU %08x, host %08x\n", bad, host[bad], expect[bad]);
    else
        std::printf("reference: match (host recomputation of all %u words)\n", n);
    std::printf("checksum: %016llx\n", h);
    RT_CHECK(cudaGraphExecDestroy(exec));
    for (int b = 0; b < 3; b++)
        RT_CHECK(cudaFree(in[b]));
    RT_CHECK(cudaFree(out));
    RT_CHECK(cudaStreamDestroy(s));
    for (int b = 0; b < 3; b++)
        std::free(host_in[b]);
    std::free(host);
    std::free(expect);
    return bad == n ? 0 : 4;
}
