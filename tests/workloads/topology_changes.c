/*
 * topology_changes: re-captures the chain every step; on every 4th step
 * (s % 4 == 3) the captured topology differs: alternately one extra wl_mix
 * node at the end of the chain, or a wl_mix node on a forked second stream
 * (event fork and join inside the capture), a different dependency
 * structure. cuGraphExecUpdate then fails on that step and on the next one
 * (back to the usual topology), and the program re-instantiates. Both extra
 * nodes write an auxiliary buffer that the checksum covers with the output.
 */
#include "wl_common.h"

enum shape { SHAPE_CHAIN, SHAPE_EXTRA, SHAPE_FORK };

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "topology_changes", argc, argv, 0);
    size_t bytes = wl_buf_bytes(&w);
    CUdeviceptr in = wl_alloc_filled(&w, bytes, 1), out = wl_alloc_filled(&w, bytes, 2);
    CUdeviceptr aux = wl_alloc_filled(&w, bytes, 4);
    CUstream side;
    CUevent fork_ev, join_ev;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    wl_chain c = { .in = in, .prev = out, .out = out, .salt = 0x5eed };
    wl_alloc_lanes(&w, &c);
    WL_CHECK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    WL_CHECK(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    WL_CHECK(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));

    for (int s = 0; s < w.steps; s++) {
        enum shape shape = s % 4 != 3 ? SHAPE_CHAIN : (s / 4) % 2 ? SHAPE_FORK : SHAPE_EXTRA;
        if (g)
            WL_CHECK(cuGraphDestroy(g));
        wl_capture_begin(&w);
        if (shape == SHAPE_FORK) {
            WL_CHECK(cuEventRecord(fork_ev, w.stream));
            WL_CHECK(cuStreamWaitEvent(side, fork_ev, 0));
            wl_enqueue_mix(&w, side, in, aux, 0xf0f0u);
            WL_CHECK(cuEventRecord(join_ev, side));
        }
        wl_chain_enqueue(&w, w.stream, &c, NULL);
        if (shape == SHAPE_EXTRA)
            wl_enqueue_mix(&w, w.stream, c.lanes[0], aux, 0xe0e0u);
        if (shape == SHAPE_FORK)
            WL_CHECK(cuStreamWaitEvent(w.stream, join_ev, 0));
        g = wl_capture_end(&w);
        wl_refresh_exec(&w, &exec, g);
        wl_launch_sync(&w, exec);
    }

    CUdeviceptr bufs[2] = { out, aux };
    size_t sizes[2] = { bytes, bytes };
    wl_report(&w, bufs, sizes, 2);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    WL_CHECK(cuEventDestroy(fork_ev));
    WL_CHECK(cuEventDestroy(join_ev));
    WL_CHECK(cuStreamDestroy(side));
    wl_free_lanes(&c, wl_chain_lanes(&w));
    WL_CHECK(cuMemFree(in));
    WL_CHECK(cuMemFree(out));
    WL_CHECK(cuMemFree(aux));
    return wl_finish(&w);
}
