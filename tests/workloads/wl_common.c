/*
 * wl_common.c: helpers shared by the workload programs (see wl_common.h):
 * option parsing, driver and module set-up, the captured kernel chain,
 * update-or-instantiate, the FNV-1a checksum of the results, and the clock
 * and median of the programs that time themselves.
 */
#include "wl_common.h"
#include "wl_math.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WL_BLOCK 128u
#define WL_MAX_GRID 32u

void wl_check(CUresult r, const char *what, const char *file, int line)
{
    const char *name = NULL;
    if (r == CUDA_SUCCESS)
        return;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what, name, (int)r);
    exit(1);
}

static void usage(const char *name, unsigned allowed, FILE *f)
{
    fprintf(f, "usage: %s [--steps N] [--nodes N] [--elems N]%s\n"
               "  --steps N      steps to run (default 30)\n"
               "  --nodes N      kernel nodes in the graph, >= 2 (default 64)\n"
               "  --elems N      32-bit words per buffer (default 1024)\n",
            name, (allowed & WL_OPT_ASYNC_ALLOC) ? " [--async-alloc]" : "");
    if (allowed & WL_OPT_ASYNC_ALLOC)
        fprintf(f, "  --async-alloc  temporaries from cuMemAllocAsync/cuMemFreeAsync\n");
}

static long parse_num(const char *name, const char *opt, const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "%s: --%s wants an integer in [%ld, %ld], got '%s'\n", name, opt, lo, hi, s);
        exit(2);
    }
    return v;
}

static void parse_args(wl_env *w, int argc, char **argv, unsigned allowed)
{
    static const struct option opts[] = {
        { "steps", required_argument, 0, 's' },
        { "nodes", required_argument, 0, 'n' },
        { "elems", required_argument, 0, 'e' },
        { "async-alloc", no_argument, 0, 'a' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    int c;
    w->steps = 30;
    w->nodes = 64;
    w->elems = 1024;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 's': w->steps = (int)parse_num(w->name, "steps", optarg, 1, 1000000); break;
        case 'n': w->nodes = (int)parse_num(w->name, "nodes", optarg, 2, 1 << 20); break;
        case 'e': w->elems = (unsigned)parse_num(w->name, "elems", optarg, 1, 1 << 24); break;
        case 'a':
            if (!(allowed & WL_OPT_ASYNC_ALLOC)) {
                fprintf(stderr, "%s: --async-alloc is not an option of this workload\n", w->name);
                exit(2);
            }
            w->async_alloc = 1;
            break;
        case 'h': usage(w->name, allowed, stdout); exit(0);
        default: usage(w->name, allowed, stderr); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", w->name, argv[optind]);
        usage(w->name, allowed, stderr);
        exit(2);
    }
}

/* The module sits next to the executable: wl_kernels.so on cudaemu,
 * wl_kernels.fatbin on a real driver. */
static void load_module(wl_env *w)
{
    char path[PATH_MAX];
    const char *file = w->emulated ? "wl_kernels.so" : "wl_kernels.fatbin";
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    char *slash;
    if (n <= 0) {
        perror("readlink /proc/self/exe");
        exit(1);
    }
    path[n] = '\0';
    slash = strrchr(path, '/');
    if (!slash || (size_t)(slash + 1 - path) + strlen(file) + 1 > sizeof path) {
        fprintf(stderr, "%s: cannot place the module next to %s\n", w->name, path);
        exit(1);
    }
    strcpy(slash + 1, file);
    if (access(path, R_OK) != 0) {
        fprintf(stderr, "%s: module %s not found (%s driver)\n", w->name, path,
                w->emulated ? "emulated" : "real");
        exit(1);
    }
    WL_CHECK(cuModuleLoad(&w->mod, path));
    WL_CHECK(cuModuleGetFunction(&w->f_seed, w->mod, "wl_seed"));
    WL_CHECK(cuModuleGetFunction(&w->f_mix, w->mod, "wl_mix"));
    WL_CHECK(cuModuleGetFunction(&w->f_fscale, w->mod, "wl_fscale"));
    WL_CHECK(cuModuleGetFunction(&w->f_stencil, w->mod, "wl_stencil"));
}

void wl_init(wl_env *w, const char *name, int argc, char **argv, unsigned allowed_opts)
{
    char devname[256];
    memset(w, 0, sizeof *w);
    w->name = name;
    parse_args(w, argc, argv, allowed_opts);
    WL_CHECK(cuInit(0));
    WL_CHECK(cuDeviceGet(&w->dev, 0));
    WL_CHECK(cuDeviceGetName(devname, sizeof devname, w->dev));
    w->emulated = strncmp(devname, "cudaemu", 7) == 0;
    WL_CHECK(cuDevicePrimaryCtxRetain(&w->ctx, w->dev));
    WL_CHECK(cuCtxSetCurrent(w->ctx));
    load_module(w);
    WL_CHECK(cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING));
}

int wl_chain_lanes(const wl_env *w)
{
    return w->nodes - 1 < WL_MAX_LANES ? w->nodes - 1 : WL_MAX_LANES;
}

size_t wl_buf_bytes(const wl_env *w)
{
    return (size_t)w->elems * sizeof(unsigned);
}

void wl_fill(const wl_env *w, CUdeviceptr p, size_t bytes, uint32_t seed)
{
    size_t n = bytes / sizeof(unsigned);
    unsigned *h = malloc(n * sizeof *h);
    (void)w;
    if (!h) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        h[i] = wl_hash(seed * 0x27d4eb2fu + (unsigned)i);
    WL_CHECK(cuMemcpyHtoD(p, h, n * sizeof *h));
    free(h);
}

CUdeviceptr wl_alloc_filled(const wl_env *w, size_t bytes, uint32_t seed)
{
    CUdeviceptr p;
    WL_CHECK(cuMemAlloc(&p, bytes));
    wl_fill(w, p, bytes, seed);
    return p;
}

/* One kernel launch: the function, its argument values and kernelParams. */
typedef struct wl_kargs {
    CUfunction f;
    CUdeviceptr p[3];
    unsigned u[2];
    float fl[2];
    void *argv[5];
} wl_kargs;

static void seed_args(const wl_env *w, const wl_chain *c, int j, wl_kargs *k)
{
    *k = (wl_kargs){ .f = w->f_seed, .p = { c->in, c->prev, c->lanes[j] },
                     .u = { w->elems, c->salt + (unsigned)j * 0x01000193u } };
    k->argv[0] = &k->p[0]; k->argv[1] = &k->p[1]; k->argv[2] = &k->p[2];
    k->argv[3] = &k->u[0]; k->argv[4] = &k->u[1];
}

/* Middle node i: wl_mix (odd i) or wl_fscale (even i) from lane i-1 into lane i. */
static void middle_args(const wl_env *w, const wl_chain *c, int i, wl_kargs *k)
{
    int nl = wl_chain_lanes(w);
    *k = (wl_kargs){ .p = { c->lanes[(i - 1) % nl], c->lanes[i % nl] }, .u = { w->elems } };
    k->argv[0] = &k->p[0]; k->argv[1] = &k->p[1]; k->argv[2] = &k->u[0];
    if (i % 2) {
        k->f = w->f_mix;
        k->u[1] = (unsigned)i * 0x3c6ef372u;
        k->argv[3] = &k->u[1];
    } else {
        k->f = w->f_fscale;
        k->fl[0] = 0.75f;
        k->fl[1] = (float)(i % 97) + 0.5f;
        k->argv[3] = &k->fl[0]; k->argv[4] = &k->fl[1];
    }
}

static void stencil_args(const wl_env *w, CUdeviceptr x, CUdeviceptr out, wl_kargs *k)
{
    *k = (wl_kargs){ .f = w->f_stencil, .p = { x, out }, .u = { w->elems } };
    k->argv[0] = &k->p[0]; k->argv[1] = &k->p[1]; k->argv[2] = &k->u[0];
}

static unsigned grid_x(const wl_env *w)
{
    unsigned g = (w->elems + WL_BLOCK - 1) / WL_BLOCK;
    return g < WL_MAX_GRID ? g : WL_MAX_GRID;
}

static void launch(const wl_env *w, CUstream s, wl_kargs *k)
{
    WL_CHECK(cuLaunchKernel(k->f, grid_x(w), 1, 1, WL_BLOCK, 1, 1, 0, s, k->argv, NULL));
}

void wl_chain_enqueue(wl_env *w, CUstream s, const wl_chain *c, CUgraphNode *seeds)
{
    int nl = wl_chain_lanes(w);
    wl_kargs k;
    for (int j = 0; j < nl; j++) {
        seed_args(w, c, j, &k);
        launch(w, s, &k);
        if (seeds) {
            CUstreamCaptureStatus st;
            const CUgraphNode *deps = NULL;
            size_t ndeps = 0;
            WL_CHECK(cuStreamGetCaptureInfo(s, &st, NULL, NULL, &deps, NULL, &ndeps));
            if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || ndeps != 1 || !deps) {
                fprintf(stderr, "%s: after seed %d the capture has status %d and %zu dependencies, "
                        "want an active capture with 1\n", w->name, j, (int)st, ndeps);
                exit(1);
            }
            seeds[j] = deps[0];
        }
    }
    for (int i = nl; i < w->nodes - 1; i++) {
        middle_args(w, c, i, &k);
        launch(w, s, &k);
    }
    stencil_args(w, c->lanes[w->nodes - 1 > nl ? (w->nodes - 2) % nl : nl - 1], c->out, &k);
    launch(w, s, &k);
}

void wl_chain_set_seed(wl_env *w, CUgraphExec exec, CUgraphNode node, const wl_chain *c, int j)
{
    wl_kargs k;
    CUDA_KERNEL_NODE_PARAMS p;
    seed_args(w, c, j, &k);
    memset(&p, 0, sizeof p);
    p.func = k.f;
    p.gridDimX = grid_x(w); p.gridDimY = 1; p.gridDimZ = 1;
    p.blockDimX = WL_BLOCK; p.blockDimY = 1; p.blockDimZ = 1;
    p.kernelParams = k.argv;
    WL_CHECK(cuGraphExecKernelNodeSetParams(exec, node, &p));
}

void wl_capture_begin(wl_env *w)
{
    WL_CHECK(cuStreamBeginCapture(w->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
}

CUgraph wl_capture_end(wl_env *w)
{
    CUgraph g = NULL;
    WL_CHECK(cuStreamEndCapture(w->stream, &g));
    return g;
}

int wl_refresh_exec(wl_env *w, CUgraphExec *exec, CUgraph g)
{
    if (*exec) {
        CUgraphExecUpdateResultInfo info;
        CUresult r;
        memset(&info, 0, sizeof info);
        r = cuGraphExecUpdate(*exec, g, &info);
        w->updates++;
        if (r == CUDA_SUCCESS)
            return 0;
        if (r != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
            wl_check(r, "cuGraphExecUpdate(*exec, g, &info)", __FILE__, __LINE__);
        w->update_failures++;
        WL_CHECK(cuGraphExecDestroy(*exec));
        *exec = NULL;
    }
    WL_CHECK(cuGraphInstantiate(exec, g, 0));
    w->instantiations++;
    return 1;
}

int wl_recapture(wl_env *w, CUgraph *g, CUgraphExec *exec, const wl_chain *c, CUgraphNode *seeds)
{
    if (*g)
        WL_CHECK(cuGraphDestroy(*g));
    wl_capture_begin(w);
    wl_chain_enqueue(w, w->stream, c, seeds);
    *g = wl_capture_end(w);
    return wl_refresh_exec(w, exec, *g);
}

void wl_launch(wl_env *w, CUgraphExec exec)
{
    WL_CHECK(cuGraphLaunch(exec, w->stream));
    w->launches++;
}

void wl_launch_sync(wl_env *w, CUgraphExec exec)
{
    wl_launch(w, exec);
    WL_CHECK(cuStreamSynchronize(w->stream));
}

void wl_alloc_lanes(const wl_env *w, wl_chain *c)
{
    for (int j = 0; j < wl_chain_lanes(w); j++)
        c->lanes[j] = wl_alloc_filled(w, wl_buf_bytes(w), 0x1a9e0000u + (unsigned)j);
}

void wl_free_lanes(const wl_chain *c, int n)
{
    for (int j = 0; j < n; j++)
        WL_CHECK(cuMemFree(c->lanes[j]));
}

void wl_enqueue_mix(const wl_env *w, CUstream s, CUdeviceptr x, CUdeviceptr y, unsigned k)
{
    wl_kargs a = { .f = w->f_mix, .p = { x, y }, .u = { w->elems, k } };
    a.argv[0] = &a.p[0]; a.argv[1] = &a.p[1]; a.argv[2] = &a.u[0]; a.argv[3] = &a.u[1];
    launch(w, s, &a);
}

void wl_report(wl_env *w, const CUdeviceptr *bufs, const size_t *bytes, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    WL_CHECK(cuCtxSynchronize());
    for (int b = 0; b < n; b++) {
        unsigned char *host = malloc(bytes[b]);
        if (!host) {
            fprintf(stderr, "out of host memory\n");
            exit(1);
        }
        WL_CHECK(cuMemcpyDtoH(host, bufs[b], bytes[b]));
        for (size_t i = 0; i < bytes[b]; i++) {
            h ^= host[i];
            h *= 0x100000001b3ull;
        }
        free(host);
    }
    printf("%s: steps=%d nodes=%d elems=%u instantiations=%d updates=%d update_failures=%d launches=%d\n",
           w->name, w->steps, w->nodes, w->elems, w->instantiations, w->updates,
           w->update_failures, w->launches);
    printf("checksum: %016llx\n", (unsigned long long)h);
    fflush(stdout);
}

double wl_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double wl_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int wl_finish(wl_env *w)
{
    WL_CHECK(cuStreamDestroy(w->stream));
    WL_CHECK(cuModuleUnload(w->mod));
    WL_CHECK(cuDevicePrimaryCtxRelease(w->dev));
    return 0;
}
