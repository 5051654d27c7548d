/*
 * wl_common.h: what the workload programs share: options, the error-checking
 * macro, device and module set-up, the kernel chain they capture, the
 * update-or-instantiate pattern, and the final checksum.
 *
 * The graph every workload captures is a "chain" of `nodes` kernel nodes on
 * one stream, working on `elems` 32-bit words per buffer:
 *   first layer: K = min(4, nodes - 1) wl_seed nodes, lane[j] = f(in, prev, salt + j)
 *   middle:      nodes - 1 - K nodes, alternating wl_mix / wl_fscale, each
 *                folding the previous lane into the next one
 *   last:        one wl_stencil node, out = g(last lane written)
 * `prev` is normally `out` itself, so results accumulate across steps and the
 * checksum depends on every step.
 */
#ifndef WL_COMMON_H
#define WL_COMMON_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define WL_MAX_LANES 4

/* Calls a driver function; on error prints the call and the CUresult name and exits 1. */
#define WL_CHECK(call) wl_check((call), #call, __FILE__, __LINE__)
void wl_check(CUresult r, const char *what, const char *file, int line);

/* Options a workload accepts besides --steps, --nodes, --elems. */
enum { WL_OPT_ASYNC_ALLOC = 1 };

typedef struct wl_env {
    const char *name;
    int steps;          /* --steps N (default 30) */
    int nodes;          /* --nodes N (default 64): kernel nodes in the graph */
    unsigned elems;     /* --elems N (default 1024): 32-bit words per buffer */
    int async_alloc;    /* --async-alloc */
    int emulated;       /* running on cudaemu */
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction f_seed, f_mix, f_fscale, f_stencil;
    CUstream stream;
    /* counts, printed by wl_report */
    int instantiations, updates, update_failures, launches;
} wl_env;

/* The buffers and scalars of one capture of the chain. */
typedef struct wl_chain {
    CUdeviceptr in, prev, out;
    CUdeviceptr lanes[WL_MAX_LANES];
    unsigned salt;
} wl_chain;

/* Parses options (exits 2 on bad ones), initializes the driver, the primary
 * context, the module and one non-blocking stream. */
void wl_init(wl_env *w, const char *name, int argc, char **argv, unsigned allowed_opts);

/* Number of first-layer (seed) nodes and lanes the chain uses. */
int wl_chain_lanes(const wl_env *w);

/* Bytes of one buffer. */
size_t wl_buf_bytes(const wl_env *w);

/* cuMemAlloc of `bytes`, filled with a deterministic pattern from `seed`. */
CUdeviceptr wl_alloc_filled(const wl_env *w, size_t bytes, uint32_t seed);
/* Writes the pattern for `seed` into `bytes` of device memory at p (synchronous). */
void wl_fill(const wl_env *w, CUdeviceptr p, size_t bytes, uint32_t seed);

/* Launches (or, while capturing, records) the chain on stream s. If seeds is
 * not NULL, the first-layer nodes are returned there (s must be capturing). */
void wl_chain_enqueue(wl_env *w, CUstream s, const wl_chain *c, CUgraphNode *seeds);

/* Sets first-layer node j of exec to what the chain `c` says
 * (cuGraphExecKernelNodeSetParams). */
void wl_chain_set_seed(wl_env *w, CUgraphExec exec, CUgraphNode node, const wl_chain *c, int j);

/* Capture on w->stream: begin, then end, returning the graph. */
void wl_capture_begin(wl_env *w);
CUgraph wl_capture_end(wl_env *w);

/* NVIDIA's recommended pattern: instantiate if *exec is NULL, else try
 * cuGraphExecUpdate and re-instantiate if the update fails. Returns 1 if it
 * instantiated. */
int wl_refresh_exec(wl_env *w, CUgraphExec *exec, CUgraph g);

/* Captures the chain on w->stream into a new graph (the old *g, if any, is
 * destroyed first) and refreshes *exec from it with wl_refresh_exec. seeds:
 * as for wl_chain_enqueue. Returns 1 if it instantiated. */
int wl_recapture(wl_env *w, CUgraph *g, CUgraphExec *exec, const wl_chain *c, CUgraphNode *seeds);

/* Launches exec on w->stream; wl_launch_sync also waits for it. */
void wl_launch(wl_env *w, CUgraphExec exec);
void wl_launch_sync(wl_env *w, CUgraphExec exec);

/* Allocates the chain's lanes (persistent buffers of wl_buf_bytes each). */
void wl_alloc_lanes(const wl_env *w, wl_chain *c);
void wl_free_lanes(const wl_chain *c, int n);

/* Enqueues one wl_mix kernel (y = mix(x, y, k)) on stream s. */
void wl_enqueue_mix(const wl_env *w, CUstream s, CUdeviceptr x, CUdeviceptr y, unsigned k);

/* Waits for all work, copies the n result buffers back and prints
 * "checksum: %016llx" (FNV-1a 64 over their bytes, in order) and a line of
 * counts. */
void wl_report(wl_env *w, const CUdeviceptr *bufs, const size_t *bytes, int n);

/* Wall clock in microseconds (CLOCK_MONOTONIC), for timings. */
double wl_now_us(void);
/* Median of v[0..n), n >= 1; sorts v in place (v[0] is then the smallest). */
double wl_median(double *v, int n);

/* Releases the stream, module and context (the caller frees its own buffers,
 * graphs and execs first). Returns 0, the exit status for main. */
int wl_finish(wl_env *w);

#endif /* WL_COMMON_H */
