/*
 * rt_common.cuh: what the CUDA runtime workloads (tests/workloads/rt_*.cu)
 * share: options, the error check, the kernel chain they capture, the
 * update-or-instantiate pattern and the final checksum.
 *
 * Each rt_ program is the twin of a driver-API workload (tests/workloads/*.c)
 * written against the CUDA runtime (cudaMalloc, <<<>>> launches, cudaGraph*)
 * and computes the same numbers: the chain is the one wl_common.h describes
 * (first layer of K = min(4, nodes - 1) wl_seed nodes, then alternating
 * wl_mix / wl_fscale, then one wl_stencil into out), with the kernels of
 * wl_kernels.cu, the same launch shapes, the same fill pattern and the same
 * FNV-1a checksum, so its "checksum:" line equals the twin's and
 * wl_reference.py's. The count line names the program.
 *
 * Streams: the work goes to one non-blocking stream created at start-up,
 * except when the program is built with --default-stream per-thread (nvcc
 * then defines CUDA_API_PER_THREAD_DEFAULT_STREAM): then it goes to the
 * per-thread default stream (stream 0), so the runtime reaches the driver's
 * _ptsz entry points.
 *
 * On the emulated driver the kernels run from the emulated module
 * wl_kernels.so, named in CUDAEMU_MODULES (the emulated driver looks each
 * kernel up by name there); on a GPU, from the program's own fat binary.
 */
#ifndef RT_COMMON_CUH
#define RT_COMMON_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#define RT_MAX_LANES 4

/* The kernels of wl_kernels.cu, compiled into rt_common.cu (whose host stubs
 * any rt_ program may launch). */
extern "C" {
__global__ void wl_seed(const unsigned *in, const unsigned *prev, unsigned *out, unsigned n, unsigned salt);
__global__ void wl_mix(const unsigned *x, unsigned *y, unsigned n, unsigned k);
__global__ void wl_fscale(const unsigned *x, unsigned *y, unsigned n, float a, float b);
__global__ void wl_stencil(const unsigned *x, unsigned *out, unsigned n);
}

/* Checks a runtime call; on error prints the call and the error's name and
 * exits 1. */
#define RT_CHECK(call) rt_check((call), #call, __FILE__, __LINE__)
void rt_check(cudaError_t e, const char *what, const char *file, int line);

/* Options a workload accepts besides --steps, --nodes, --elems. */
enum { RT_OPT_ASYNC_ALLOC = 1 };

struct rt_env {
    const char *name;
    int steps;              /* --steps N (default 30) */
    int nodes;              /* --nodes N (default 64) */
    unsigned elems;         /* --elems N (default 1024) */
    int async_alloc;        /* --async-alloc */
    cudaStream_t stream;    /* the workload's stream (0: per-thread default stream) */
    int instantiations, updates, update_failures, launches;
};

/* The buffers and scalars of one capture of the chain. */
struct rt_chain {
    unsigned *in, *prev, *out;
    unsigned *lanes[RT_MAX_LANES];
    unsigned salt;
};

/* Parses options (exits 2 on bad ones; default_opts: NULL-terminated options
 * applied before the caller's, may be NULL), creates the stream. */
void rt_init(rt_env *w, const char *name, int argc, char **argv, unsigned allowed_opts,
             const char *const *default_opts);

int rt_lanes(const rt_env *w);
size_t rt_buf_bytes(const rt_env *w);

/* The fill pattern for `seed` written into `bytes` at p (cudaMemcpy, or
 * cudaMemcpyAsync on w->stream when async), and cudaMalloc + fill. */
void rt_fill(const rt_env *w, unsigned *p, size_t bytes, uint32_t seed, bool async);
unsigned *rt_alloc_filled(const rt_env *w, size_t bytes, uint32_t seed);
void rt_alloc_lanes(const rt_env *w, rt_chain *c);
void rt_free_lanes(const rt_chain *c, int n);

/* Launches (or, while capturing, records) the chain on w->stream; when
 * seeds is not NULL the first-layer nodes are returned there (capturing). */
void rt_chain_enqueue(rt_env *w, const rt_chain *c, cudaGraphNode_t *seeds);
/* Points first-layer node j of exec at what `c` says
 * (cudaGraphExecKernelNodeSetParams). */
void rt_chain_set_seed(rt_env *w, cudaGraphExec_t exec, cudaGraphNode_t node, const rt_chain *c, int j);
/* One wl_mix launch (y = mix(x, y, k)) on w->stream. */
void rt_enqueue_mix(const rt_env *w, const unsigned *x, unsigned *y, unsigned k);

/* Captures the chain into a new graph (*g destroyed first if set). */
void rt_capture(rt_env *w, cudaGraph_t *g, const rt_chain *c, cudaGraphNode_t *seeds);
/* Instantiates if *exec is NULL, else cudaGraphExecUpdate, re-instantiating
 * if the update fails. Returns 1 if it instantiated. */
int rt_refresh_exec(rt_env *w, cudaGraphExec_t *exec, cudaGraph_t g);
void rt_launch(rt_env *w, cudaGraphExec_t exec);
void rt_launch_sync(rt_env *w, cudaGraphExec_t exec);

/* Waits for the device, copies the buffers back and prints the count line
 * and "checksum: %016llx" (FNV-1a 64 over their bytes, in order). */
void rt_report(rt_env *w, unsigned *const *bufs, const size_t *bytes, int n);
/* Destroys the stream; returns 0, the exit status for main. */
int rt_finish(rt_env *w);

#endif /* RT_COMMON_CUH */
