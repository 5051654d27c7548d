/*
 * recapture_temps: each step allocates temporaries (the chain's lanes, of
 * different sizes), re-captures the chain, tries cuGraphExecUpdate on the
 * existing exec (instantiating on the first step or when the update fails:
 * NVIDIA's recommended pattern), launches, waits and frees the temporaries.
 * Only the temporaries' addresses differ between steps. With --async-alloc
 * the temporaries come from cuMemAllocAsync and go back with cuMemFreeAsync
 * on the stream, outside the capture; the results are the same.
 */
#include "wl_common.h"

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "recapture_temps", argc, argv, WL_OPT_ASYNC_ALLOC);
    size_t bytes = wl_buf_bytes(&w);
    int nl = wl_chain_lanes(&w);
    CUdeviceptr in = wl_alloc_filled(&w, bytes, 1), out = wl_alloc_filled(&w, bytes, 2);
    CUgraph g = NULL;
    CUgraphExec exec = NULL;

    for (int s = 0; s < w.steps; s++) {
        wl_chain c = { .in = in, .prev = out, .out = out, .salt = 0x5eed };
        for (int j = 0; j < nl; j++) {
            size_t sz = bytes + (size_t)j * (bytes / 2 + 256); /* different sizes */
            if (w.async_alloc)
                WL_CHECK(cuMemAllocAsync(&c.lanes[j], sz, w.stream));
            else
                WL_CHECK(cuMemAlloc(&c.lanes[j], sz));
        }
        wl_recapture(&w, &g, &exec, &c, NULL);
        wl_launch(&w, exec);
        for (int j = 0; j < nl; j++) {
            if (w.async_alloc)
                WL_CHECK(cuMemFreeAsync(c.lanes[j], w.stream));
        }
        WL_CHECK(cuStreamSynchronize(w.stream));
        if (!w.async_alloc)
            wl_free_lanes(&c, nl);
    }

    wl_report(&w, &out, &bytes, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    WL_CHECK(cuMemFree(in));
    WL_CHECK(cuMemFree(out));
    return wl_finish(&w);
}
