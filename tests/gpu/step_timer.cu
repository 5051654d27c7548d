// tests/gpu/step_timer.cu: per-step time of the recapture_temps and
// rotating_inputs loops, measured with CUDA events.
//
//   step_timer recapture_temps|rotating_inputs [--steps N] [--nodes N] [--elems N]
//
// Host code only, driver API. It runs the same loop as the workload of that
// name (tests/workloads/*.c) with the workloads' own helpers (wl_common.c:
// same kernels, same chain, same buffers and seeds), so it prints the same
// counts line and the same "checksum: <hex>" as the workload; the kit checks
// that. The workloads themselves are not changed.
//
// What is measured: a CUDA event (cuEventRecord on the workload's stream) at
// every step boundary. The stream is idle at each boundary (every step ends
// with a synchronization), so the interval between two consecutive events,
// cuEventElapsedTime, is the whole step as the GPU timeline sees it: the
// host's driver calls (allocation, capture, update or parameter setting,
// launch, free) plus the graph's execution. The host's own clock
// (CLOCK_MONOTONIC) at the same boundaries is printed beside it. Statistics
// leave out the first fifth of the steps (at least the first one, which
// instantiates). Lines:
//   step_ms_events: median=M mean=A min=L max=H steps=K     (CUDA events)
//   step_ms_host:   median=M mean=A min=L max=H steps=K     (CLOCK_MONOTONIC)
// On the emulated driver the same program runs (the module comes from
// wl_kernels.so) but the times are CPU times: the kit labels them so.
#include <cuda.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>
extern "C" {
#include "wl_common.h"
}

static double now_ms()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void print_stats(const char *label, std::vector<double> v, const char *what)
{
    double sum = 0;
    for (double x : v)
        sum += x;
    std::sort(v.begin(), v.end());
    size_t k = v.size();
    double median = k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
    std::printf("%s median=%.4f mean=%.4f min=%.4f max=%.4f steps=%zu (%s)\n", label, median, sum / (double)k,
                v.front(), v.back(), k, what);
}

struct timer {
    std::vector<CUevent> ev;
    std::vector<double> host;
    void mark(wl_env *w)
    {
        CUevent e;
        WL_CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
        WL_CHECK(cuEventRecord(e, w->stream));
        ev.push_back(e);
        host.push_back(now_ms());
    }
    void report(int skip)
    {
        std::vector<double> dev, hst;
        WL_CHECK(cuEventSynchronize(ev.back()));
        for (size_t i = (size_t)skip; i + 1 < ev.size(); i++) {
            float ms = 0;
            WL_CHECK(cuEventElapsedTime(&ms, ev[i], ev[i + 1]));
            dev.push_back(ms);
            hst.push_back(host[i + 1] - host[i]);
        }
        print_stats("step_ms_events:", dev, "cuEventElapsedTime between step boundaries");
        print_stats("step_ms_host:  ", hst, "CLOCK_MONOTONIC between step boundaries");
        for (CUevent e : ev)
            WL_CHECK(cuEventDestroy(e));
    }
};

// recapture_temps: temporaries allocated, chain re-captured and updated, launched, freed.
static void run_recapture_temps(wl_env *w, timer *t)
{
    size_t bytes = wl_buf_bytes(w);
    int nl = wl_chain_lanes(w);
    CUdeviceptr in = wl_alloc_filled(w, bytes, 1), out = wl_alloc_filled(w, bytes, 2);
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    for (int s = 0; s < w->steps; s++) {
        wl_chain c;
        std::memset(&c, 0, sizeof c);
        c.in = in; c.prev = out; c.out = out; c.salt = 0x5eed;
        t->mark(w);
        for (int j = 0; j < nl; j++)
            WL_CHECK(cuMemAlloc(&c.lanes[j], bytes + (size_t)j * (bytes / 2 + 256)));
        wl_recapture(w, &g, &exec, &c, NULL);
        wl_launch(w, exec);
        WL_CHECK(cuStreamSynchronize(w->stream));
        wl_free_lanes(&c, nl);
    }
    t->mark(w);
    wl_report(w, &out, &bytes, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    WL_CHECK(cuMemFree(in));
    WL_CHECK(cuMemFree(out));
}

// rotating_inputs: captured once, first-layer nodes repointed at one of three inputs each step.
static void run_rotating_inputs(wl_env *w, timer *t)
{
    size_t bytes = wl_buf_bytes(w);
    int nl = wl_chain_lanes(w);
    CUdeviceptr in[3], out = wl_alloc_filled(w, bytes, 2);
    CUgraphNode seeds[WL_MAX_LANES];
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    for (int i = 0; i < 3; i++)
        in[i] = wl_alloc_filled(w, bytes, 10 + (unsigned)i);
    wl_chain c;
    std::memset(&c, 0, sizeof c);
    c.in = in[0]; c.prev = out; c.out = out; c.salt = 0x5eed;
    wl_alloc_lanes(w, &c);
    wl_recapture(w, &g, &exec, &c, seeds);
    for (int s = 0; s < w->steps; s++) {
        t->mark(w);
        c.in = in[s % 3];
        for (int j = 0; j < nl; j++)
            wl_chain_set_seed(w, exec, seeds[j], &c, j);
        wl_launch_sync(w, exec);
    }
    t->mark(w);
    wl_report(w, &out, &bytes, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    wl_free_lanes(&c, nl);
    for (int i = 0; i < 3; i++)
        WL_CHECK(cuMemFree(in[i]));
    WL_CHECK(cuMemFree(out));
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(wl_env *, timer *);
    } loops[] = { { "recapture_temps", run_recapture_temps }, { "rotating_inputs", run_rotating_inputs } };
    if (argc < 2) {
        std::fprintf(stderr, "usage: step_timer recapture_temps|rotating_inputs [--steps N] [--nodes N] [--elems N]\n");
        return 2;
    }
    for (const auto &l : loops) {
        if (std::strcmp(argv[1], l.name) != 0)
            continue;
        wl_env w;
        timer t;
        // wl_init parses the options after the loop's name (argv[1] stands as the program name).
        wl_init(&w, l.name, argc - 1, argv + 1, 0);
        std::printf("step_timer: %s steps=%d nodes=%d elems=%u driver=%s\n", l.name, w.steps, w.nodes, w.elems,
                    w.emulated ? "emulated" : "real");
        l.run(&w, &t);
        t.report(w.steps > 1 ? std::max(1, w.steps / 5) : 0);
        return wl_finish(&w);
    }
    std::fprintf(stderr, "step_timer: unknown loop '%s' (want recapture_temps or rotating_inputs)\n", argv[1]);
    return 2;
}
