/*
 * tests/gpu/calibrate.c: measures, on the driver it runs on, the per-call
 * costs that the cost table of `make bench` and `make demo`
 * (core/costs.tsv) assumes, so that the table can be replaced by
 * measured figures (tests/gpu/run-all.sh converts the output with
 * `tests/bench/costmodel.py calibrated`).
 *
 *   calibrate [--sizes "16 64 256 1024 4096"] [--reps N] [--budget SECONDS] [--elems N]
 *
 * --budget: no new graph size is started after that many seconds (default
 * 120); --elems: 32-bit words per buffer (default 32: the kernels' own time
 * is not what is measured).
 *
 * For each graph size n: three graphs of n wl_mix kernel nodes are captured
 * (G0; G1, which differs from G0 in one node's scalar; Gall, which differs in
 * every node's) and an exec E is instantiated from G0. Timed, each call on
 * its own with CLOCK_MONOTONIC (the host time the call takes):
 *   instantiate          cuGraphInstantiateWithFlags of G0 (the exec destroyed untimed)
 *   instantiate_host_bytes  not a time: the growth of resident memory while
 *                        `reps` execs of G0 exist at once, per exec, in bytes
 *                        (the cost table's host_bytes_node figure)
 *   launch               cuGraphLaunch of E (the stream synchronized untimed)
 *   update_identical     cuGraphExecUpdate(E, G0) while E holds G0: nothing changes
 *   update_one           cuGraphExecUpdate to G1 and back to G0 in turn: one node changes
 *   update_all           cuGraphExecUpdate to Gall and back in turn: every node changes
 *   setparams_identical  cuGraphExecKernelNodeSetParams of E's first node, as it is
 *   setparams_changed    the same with the node's scalar changed and back in turn
 *   get_params           cuGraphKernelNodeGetParams of G0's nodes in turn
 *   get_attribute        cuGraphKernelNodeGetAttribute(priority) of G0's nodes in turn
 *   get_nodes            cuGraphGetNodes of G0, every node listed
 * Then, once, the VMM calls on one allocation granule (reported at n = 0):
 * address_reserve, mem_create, mem_map, mem_set_access, mem_unmap,
 * mem_release, address_free (cuMemAddressReserve ... cuMemAddressFree).
 *
 * Every measurement first makes 2 untimed calls, then `reps` timed ones
 * (fewer for large graphs: at least 3, and an even count, so that alternating
 * updates leave E holding G0). Output, one line each:
 *   calibrate: device="NAME" driver=MAJOR.MINOR date=ISO granularity=BYTES emulated=0|1 sizes="..." reps=R
 *   measure WHAT NODES MEDIAN_US MIN_US REPS
 *   calibrate: done (or: calibrate: budget of S s spent after N nodes)
 * On the emulated driver the figures are the emulation's CPU times, not a
 * GPU's; tests/gpu/test_gpu_kit.sh runs it there to test this program and
 * the conversion, and checks what the emulated driver counted.
 */
#include "wl_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CAL_WARMUP 2
#define CAL_MAX_SIZES 16

/* Prints "measure WHAT NODES MEDIAN MIN REPS" for the times in t[0..n). */
static void report(const char *what, int nodes, double *t, int n)
{
    double med = wl_median(t, n);
    printf("measure %s %d %.4f %.4f %d\n", what, nodes, med, t[0], n);
    fflush(stdout);
}

/* One timed call: `stmt` between two clock reads, its time into t[i]. */
#define TIMED(t, i, stmt) do { double t0_ = wl_now_us(); stmt; (t)[i] = wl_now_us() - t0_; } while (0)

typedef struct cal {
    wl_env w;
    CUdeviceptr x, y;
    int reps;
} cal;

/* G: n wl_mix nodes on x, y; node i's scalar is i, except where `which`
 * says: 1 changes node 0, 2 changes every node. */
static CUgraph capture(cal *c, int n, int which)
{
    wl_capture_begin(&c->w);
    for (int i = 0; i < n; i++) {
        unsigned k = (unsigned)i;
        if (which == 2 || (which == 1 && i == 0))
            k += 1000003u;
        wl_enqueue_mix(&c->w, c->w.stream, c->x, c->y, k);
    }
    return wl_capture_end(&c->w);
}

/* Repetitions for a graph of n nodes: fewer for large graphs, at least 3, even. */
static int reps_for(const cal *c, int n)
{
    int r = c->reps;
    if (n > 1024 && r > 6)
        r = r * 1024 / n > 6 ? r * 1024 / n : 6;
    if (r < 3)
        r = 3;
    return r + (r + CAL_WARMUP) % 2;
}

/* Resident memory of this process in bytes (/proc/self/statm), or -1. */
static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = -1;
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
        fclose(f);
    }
    return res < 0 ? -1.0 : (double)res * (double)sysconf(_SC_PAGESIZE);
}

/* The growth of resident memory per exec while `reps` execs of g exist at
 * once: "measure instantiate_host_bytes N BYTES BYTES REPS". */
static void measure_exec_bytes(CUgraph g, int n, int reps)
{
    CUgraphExec *ex = calloc((size_t)reps, sizeof *ex);
    if (!ex) {
        fprintf(stderr, "calibrate: out of host memory\n");
        exit(1);
    }
    double before = resident_bytes();
    for (int i = 0; i < reps; i++)
        WL_CHECK(cuGraphInstantiateWithFlags(&ex[i], g, 0));
    double after = resident_bytes();
    for (int i = 0; i < reps; i++)
        WL_CHECK(cuGraphExecDestroy(ex[i]));
    free(ex);
    if (before < 0 || after < 0)
        return;                      /* no /proc: the figure is left out */
    double per = after > before ? (after - before) / reps : 0.0;
    printf("measure instantiate_host_bytes %d %.0f %.0f %d\n", n, per, per, reps);
    fflush(stdout);
}

static void update(CUgraphExec e, CUgraph g)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    WL_CHECK(cuGraphExecUpdate(e, g, &info));
}

static void measure_size(cal *c, int n, double *t)
{
    int reps = reps_for(c, n), total = CAL_WARMUP + reps;
    CUgraph g0 = capture(c, n, 0), g1 = capture(c, n, 1), gall = capture(c, n, 2);
    CUgraphExec e, tmp;
    CUgraphNode *nodes = malloc((size_t)n * sizeof *nodes);
    size_t count = (size_t)n;
    if (!nodes) {
        fprintf(stderr, "calibrate: out of host memory\n");
        exit(1);
    }
    WL_CHECK(cuGraphGetNodes(g0, nodes, &count));
    WL_CHECK(cuGraphInstantiateWithFlags(&e, g0, 0));

    for (int i = 0; i < total; i++) {
        TIMED(t, i, WL_CHECK(cuGraphInstantiateWithFlags(&tmp, g0, 0)));
        WL_CHECK(cuGraphExecDestroy(tmp));
    }
    report("instantiate", n, t + CAL_WARMUP, reps);
    measure_exec_bytes(g0, n, reps);
    for (int i = 0; i < total; i++) {
        TIMED(t, i, WL_CHECK(cuGraphLaunch(e, c->w.stream)));
        WL_CHECK(cuStreamSynchronize(c->w.stream));
    }
    report("launch", n, t + CAL_WARMUP, reps);
    for (int i = 0; i < total; i++)
        TIMED(t, i, update(e, g0));
    report("update_identical", n, t + CAL_WARMUP, reps);
    for (int i = 0; i < total; i++)        /* total is even: E ends holding G0 */
        TIMED(t, i, update(e, i % 2 ? g0 : g1));
    report("update_one", n, t + CAL_WARMUP, reps);
    for (int i = 0; i < total; i++)
        TIMED(t, i, update(e, i % 2 ? g0 : gall));
    report("update_all", n, t + CAL_WARMUP, reps);

    /* Per-node set params on E's first node: as it is, then changed and back. */
    CUDA_KERNEL_NODE_PARAMS p;
    WL_CHECK(cuGraphKernelNodeGetParams(nodes[0], &p));
    void *args[4];
    CUdeviceptr ax, ay;
    unsigned an, ak, ak2;
    memcpy(&ax, p.kernelParams[0], sizeof ax);
    memcpy(&ay, p.kernelParams[1], sizeof ay);
    memcpy(&an, p.kernelParams[2], sizeof an);
    memcpy(&ak, p.kernelParams[3], sizeof ak);
    ak2 = ak + 1000003u;
    args[0] = &ax; args[1] = &ay; args[2] = &an; args[3] = &ak;
    p.kernelParams = args;
    p.extra = NULL;
    for (int i = 0; i < total; i++)
        TIMED(t, i, WL_CHECK(cuGraphExecKernelNodeSetParams(e, nodes[0], &p)));
    report("setparams_identical", n, t + CAL_WARMUP, reps);
    for (int i = 0; i < total; i++) {
        args[3] = i % 2 ? (void *)&ak : (void *)&ak2;
        TIMED(t, i, WL_CHECK(cuGraphExecKernelNodeSetParams(e, nodes[0], &p)));
    }
    report("setparams_changed", n, t + CAL_WARMUP, reps);

    for (int i = 0; i < total; i++) {
        CUDA_KERNEL_NODE_PARAMS q;
        TIMED(t, i, WL_CHECK(cuGraphKernelNodeGetParams(nodes[i % n], &q)));
    }
    report("get_params", n, t + CAL_WARMUP, reps);
    for (int i = 0; i < total; i++) {
        CUkernelNodeAttrValue v;
        TIMED(t, i, WL_CHECK(cuGraphKernelNodeGetAttribute(nodes[i % n], CU_LAUNCH_ATTRIBUTE_PRIORITY, &v)));
    }
    report("get_attribute", n, t + CAL_WARMUP, reps);
    for (int i = 0; i < total; i++) {
        count = (size_t)n;
        TIMED(t, i, WL_CHECK(cuGraphGetNodes(g0, nodes, &count)));
    }
    report("get_nodes", n, t + CAL_WARMUP, reps);

    WL_CHECK(cuGraphExecDestroy(e));
    WL_CHECK(cuGraphDestroy(g0));
    WL_CHECK(cuGraphDestroy(g1));
    WL_CHECK(cuGraphDestroy(gall));
    free(nodes);
}

/* The VMM calls on one granule, `reps` times each (after the warm-up). */
static void measure_vmm(cal *c, size_t gran, double *t)
{
    int total = CAL_WARMUP + c->reps;
    double *tt[7];
    static const char *what[7] = { "address_reserve", "mem_create", "mem_map", "mem_set_access",
                                   "mem_unmap", "mem_release", "address_free" };
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = c->w.dev;
    memset(&acc, 0, sizeof acc);
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int k = 0; k < 7; k++)
        tt[k] = t + (size_t)k * (size_t)total;
    for (int i = 0; i < total; i++) {
        CUdeviceptr va;
        CUmemGenericAllocationHandle h;
        TIMED(tt[0], i, WL_CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0)));
        TIMED(tt[1], i, WL_CHECK(cuMemCreate(&h, gran, &prop, 0)));
        TIMED(tt[2], i, WL_CHECK(cuMemMap(va, gran, 0, h, 0)));
        TIMED(tt[3], i, WL_CHECK(cuMemSetAccess(va, gran, &acc, 1)));
        TIMED(tt[4], i, WL_CHECK(cuMemUnmap(va, gran)));
        TIMED(tt[5], i, WL_CHECK(cuMemRelease(h)));
        TIMED(tt[6], i, WL_CHECK(cuMemAddressFree(va, gran)));
    }
    for (int k = 0; k < 7; k++)
        report(what[k], 0, tt[k] + CAL_WARMUP, c->reps);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: calibrate [--sizes \"16 64 256 1024 4096\"] [--reps N] [--budget SECONDS] [--elems N]\n");
}

int main(int argc, char **argv)
{
    int sizes[CAL_MAX_SIZES], nsizes = 0;
    double budget = 120;
    const char *size_list = "16 64 256 1024 4096", *elems = "32";
    cal c;
    memset(&c, 0, sizeof c);
    c.reps = 20;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long n = v ? strtol(v, &end, 10) : 0;
        int num_ok = v && *v && end && !*end;
        if (!strcmp(argv[i], "--sizes") && v) size_list = v;
        else if (!strcmp(argv[i], "--reps") && num_ok && n >= 1 && n <= 100000) c.reps = (int)n;
        else if (!strcmp(argv[i], "--budget") && v && (budget = strtod(v, &end)) > 0 && !*end && budget <= 86400) {}
        else if (!strcmp(argv[i], "--elems") && num_ok && n >= 1 && n <= (1 << 24)) elems = v;
        else if (!strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
        i++;
    }
    for (const char *s = size_list; *s;) {
        char *end;
        long n = strtol(s, &end, 10);
        if (end == s || n < 1 || n > (1 << 20) || nsizes == CAL_MAX_SIZES) {
            fprintf(stderr, "calibrate: --sizes wants up to %d sizes in [1, %d], got '%s'\n", CAL_MAX_SIZES,
                    1 << 20, size_list);
            return 2;
        }
        sizes[nsizes++] = (int)n;
        for (s = end; *s == ' ' || *s == ','; s++) {}
    }
    if (!nsizes) { usage(stderr); return 2; }

    char *wargv[] = { (char *)"calibrate", (char *)"--elems", (char *)elems, NULL };
    wl_init(&c.w, "calibrate", 3, wargv, 0);
    WL_CHECK(cuMemAlloc(&c.x, wl_buf_bytes(&c.w)));
    WL_CHECK(cuMemAlloc(&c.y, wl_buf_bytes(&c.w)));
    WL_CHECK(cuMemsetD32(c.x, 1, c.w.elems));
    WL_CHECK(cuMemsetD32(c.y, 2, c.w.elems));

    char name[256], date[64];
    int ver = 0;
    size_t gran = 0;
    CUmemAllocationProp prop;
    time_t now = time(NULL);
    WL_CHECK(cuDeviceGetName(name, sizeof name, c.w.dev));
    WL_CHECK(cuDriverGetVersion(&ver));
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = c.w.dev;
    WL_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    for (char *p = name; *p; p++)
        if (*p == '"') *p = '\'';
    printf("calibrate: device=\"%s\" driver=%d.%d date=%s granularity=%zu emulated=%d sizes=\"%s\" reps=%d\n",
           name, ver / 1000, ver % 1000 / 10, date, gran, c.w.emulated, size_list, c.reps);

    int most = c.reps > 3 ? c.reps : 3;
    double *t = malloc((size_t)(7 * (most + CAL_WARMUP + 1)) * sizeof *t);
    if (!t) {
        fprintf(stderr, "calibrate: out of host memory\n");
        return 1;
    }
    double start = wl_now_us();
    int k = 0;
    measure_vmm(&c, gran, t);
    for (; k < nsizes && wl_now_us() - start <= budget * 1e6; k++)
        measure_size(&c, sizes[k], t);
    if (k == nsizes)
        printf("calibrate: done\n");
    else if (k == 0)
        printf("calibrate: budget of %g s spent after the VMM calls\n", budget);
    else
        printf("calibrate: budget of %g s spent after %d nodes\n", budget, sizes[k - 1]);
    free(t);
    WL_CHECK(cuMemFree(c.x));
    WL_CHECK(cuMemFree(c.y));
    return wl_finish(&c.w);
}
