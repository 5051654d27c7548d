/*
 * rt_common.cu: helpers shared by the CUDA runtime workloads (see
 * rt_common.cuh): options, the stream, buffers, the captured kernel chain,
 * update-or-instantiate and the checksum. The kernels are wl_kernels.cu's,
 * compiled into each program.
 */
#include "rt_common.cuh"
#include "wl_kernels.cu"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static const unsigned RT_BLOCK = 128, RT_MAX_GRID = 32;   /* wl_common.c's launch shape */

void rt_check(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what, cudaGetErrorName(e), (int)e);
    exit(1);
}

static long rt_number(const rt_env *w, const char *opt, const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: --%s wants an integer in [%ld, %ld], got '%s'\n", w->name, opt, lo, hi, s);
        exit(2);
    }
    return v;
}

static void rt_options(rt_env *w, int argc, char **argv, unsigned allowed)
{
    static const struct option opts[] = {
        { "steps", required_argument, 0, 's' }, { "nodes", required_argument, 0, 'n' },
        { "elems", required_argument, 0, 'e' }, { "async-alloc", no_argument, 0, 'a' },
        { 0, 0, 0, 0 },
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 's') w->steps = (int)rt_number(w, "steps", optarg, 1, 1000000);
        else if (c == 'n') w->nodes = (int)rt_number(w, "nodes", optarg, 2, 1 << 20);
        else if (c == 'e') w->elems = (unsigned)rt_number(w, "elems", optarg, 1, 1 << 24);
        else if (c == 'a' && (allowed & RT_OPT_ASYNC_ALLOC)) w->async_alloc = 1;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--nodes N] [--elems N]%s\n", w->name,
                    (allowed & RT_OPT_ASYNC_ALLOC) ? " [--async-alloc]" : "");
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", w->name, argv[optind]);
        exit(2);
    }
}

void rt_init(rt_env *w, const char *name, int argc, char **argv, unsigned allowed_opts,
             const char *const *default_opts)
{
    memset(w, 0, sizeof *w);
    w->name = name;
    w->steps = 30;
    w->nodes = 64;
    w->elems = 1024;
    std::vector<char *> args(1, argv[0]);
    for (const char *const *o = default_opts; o && *o; o++) args.push_back(const_cast<char *>(*o));
    args.insert(args.end(), argv + 1, argv + argc);
    args.push_back(NULL);
    rt_options(w, (int)args.size() - 1, args.data(), allowed_opts);
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    w->stream = 0;        /* the per-thread default stream */
#else
    RT_CHECK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
#endif
}

int rt_lanes(const rt_env *w) { return w->nodes - 1 < RT_MAX_LANES ? w->nodes - 1 : RT_MAX_LANES; }

size_t rt_buf_bytes(const rt_env *w) { return (size_t)w->elems * sizeof(unsigned); }

void rt_fill(const rt_env *w, unsigned *p, size_t bytes, uint32_t seed, bool async)
{
    std::vector<unsigned> h(bytes / sizeof(unsigned));
    for (size_t i = 0; i < h.size(); i++) h[i] = wl_hash(seed * 0x27d4eb2fu + (unsigned)i);
    if (async) {
        RT_CHECK(cudaMemcpyAsync(p, h.data(), h.size() * sizeof h[0], cudaMemcpyHostToDevice, w->stream));
        RT_CHECK(cudaStreamSynchronize(w->stream));   /* h goes out of scope */
    } else {
        RT_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof h[0], cudaMemcpyHostToDevice));
    }
}

unsigned *rt_alloc_filled(const rt_env *w, size_t bytes, uint32_t seed)
{
    unsigned *p;
    RT_CHECK(cudaMalloc(&p, bytes));
    rt_fill(w, p, bytes, seed, false);
    return p;
}

void rt_alloc_lanes(const rt_env *w, rt_chain *c)
{
    for (int j = 0; j < rt_lanes(w); j++) c->lanes[j] = rt_alloc_filled(w, rt_buf_bytes(w), 0x1a9e0000u + (unsigned)j);
}

void rt_free_lanes(const rt_chain *c, int n)
{
    for (int j = 0; j < n; j++) RT_CHECK(cudaFree(c->lanes[j]));
}

static dim3 rt_grid(const rt_env *w)
{
    unsigned g = (w->elems + RT_BLOCK - 1) / RT_BLOCK;
    return dim3(g < RT_MAX_GRID ? g : RT_MAX_GRID);
}

/* The scalars of first-layer node j. */
static unsigned rt_seed_salt(const rt_chain *c, int j) { return c->salt + (unsigned)j * 0x01000193u; }

void rt_chain_enqueue(rt_env *w, const rt_chain *c, cudaGraphNode_t *seeds)
{
    int nl = rt_lanes(w);
    unsigned n = w->elems;
    for (int j = 0; j < nl; j++) {
        wl_seed<<<rt_grid(w), RT_BLOCK, 0, w->stream>>>(c->in, c->prev, c->lanes[j], n, rt_seed_salt(c, j));
        RT_CHECK(cudaGetLastError());
        if (!seeds) continue;
        cudaStreamCaptureStatus st;
        const cudaGraphNode_t *deps = NULL;
        size_t ndeps = 0;
        RT_CHECK(cudaStreamGetCaptureInfo(w->stream, &st, NULL, NULL, &deps, NULL, &ndeps));
        if (st != cudaStreamCaptureStatusActive || ndeps != 1 || !deps) {
            fprintf(stderr, "%s: after seed %d the capture has status %d and %zu dependencies, want an active "
                    "capture with 1\n", w->name, j, (int)st, ndeps);
            exit(1);
        }
        seeds[j] = deps[0];
    }
    for (int i = nl; i < w->nodes - 1; i++) {     /* lane i-1 folded into lane i */
        const unsigned *x = c->lanes[(i - 1) % nl];
        unsigned *y = c->lanes[i % nl];
        if (i % 2) wl_mix<<<rt_grid(w), RT_BLOCK, 0, w->stream>>>(x, y, n, (unsigned)i * 0x3c6ef372u);
        else wl_fscale<<<rt_grid(w), RT_BLOCK, 0, w->stream>>>(x, y, n, 0.75f, (float)(i % 97) + 0.5f);
        RT_CHECK(cudaGetLastError());
    }
    const unsigned *last = c->lanes[w->nodes - 1 > nl ? (w->nodes - 2) % nl : nl - 1];
    wl_stencil<<<rt_grid(w), RT_BLOCK, 0, w->stream>>>(last, c->out, n);
    RT_CHECK(cudaGetLastError());
}

void rt_chain_set_seed(rt_env *w, cudaGraphExec_t exec, cudaGraphNode_t node, const rt_chain *c, int j)
{
    const unsigned *in = c->in, *prev = c->prev;
    unsigned *lane = c->lanes[j], n = w->elems, salt = rt_seed_salt(c, j);
    void *args[] = { &in, &prev, &lane, &n, &salt };
    cudaKernelNodeParams p = {};
    p.func = (void *)wl_seed;
    p.gridDim = rt_grid(w);
    p.blockDim = dim3(RT_BLOCK);
    p.kernelParams = args;
    RT_CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &p));
}

void rt_enqueue_mix(const rt_env *w, const unsigned *x, unsigned *y, unsigned k)
{
    wl_mix<<<rt_grid(w), RT_BLOCK, 0, w->stream>>>(x, y, w->elems, k);
    RT_CHECK(cudaGetLastError());
}

void rt_capture(rt_env *w, cudaGraph_t *g, const rt_chain *c, cudaGraphNode_t *seeds)
{
    if (*g) RT_CHECK(cudaGraphDestroy(*g));
    RT_CHECK(cudaStreamBeginCapture(w->stream, cudaStreamCaptureModeGlobal));
    rt_chain_enqueue(w, c, seeds);
    RT_CHECK(cudaStreamEndCapture(w->stream, g));
}

int rt_refresh_exec(rt_env *w, cudaGraphExec_t *exec, cudaGraph_t g)
{
    if (*exec) {
        cudaGraphExecUpdateResultInfo info;
        cudaError_t e = cudaGraphExecUpdate(*exec, g, &info);
        w->updates++;
        if (e == cudaSuccess) return 0;
        if (e != cudaErrorGraphExecUpdateFailure) rt_check(e, "cudaGraphExecUpdate(*exec, g, &info)", __FILE__, __LINE__);
        (void)cudaGetLastError();   /* the failed update is expected: clear it */
        w->update_failures++;
        RT_CHECK(cudaGraphExecDestroy(*exec));
    }
    RT_CHECK(cudaGraphInstantiate(exec, g, 0));
    w->instantiations++;
    return 1;
}

void rt_launch(rt_env *w, cudaGraphExec_t exec)
{
    RT_CHECK(cudaGraphLaunch(exec, w->stream));
    w->launches++;
}

void rt_launch_sync(rt_env *w, cudaGraphExec_t exec)
{
    rt_launch(w, exec);
    RT_CHECK(cudaStreamSynchronize(w->stream));
}

void rt_report(rt_env *w, unsigned *const *bufs, const size_t *bytes, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    RT_CHECK(cudaDeviceSynchronize());
    for (int b = 0; b < n; b++) {
        std::vector<unsigned char> host(bytes[b]);
        RT_CHECK(cudaMemcpy(host.data(), bufs[b], bytes[b], cudaMemcpyDeviceToHost));
        for (unsigned char byte : host) h = (h ^ byte) * 0x100000001b3ull;
    }
    printf("%s: steps=%d nodes=%d elems=%u instantiations=%d updates=%d update_failures=%d launches=%d\n",
           w->name, w->steps, w->nodes, w->elems, w->instantiations, w->updates, w->update_failures, w->launches);
    printf("checksum: %016llx\n", (unsigned long long)h);
    fflush(stdout);
}

int rt_finish(rt_env *w)
{
#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
    RT_CHECK(cudaStreamDestroy(w->stream));
#endif
    (void)w;
    return 0;
}
