/*
 * rotating_inputs: the chain is captured and instantiated once, then fed from
 * three input buffers in turn: each step points the first-layer kernel nodes
 * at the step's input with cuGraphExecKernelNodeSetParams and launches. The
 * inputs hold different data, so the checksum depends on the rotation.
 */
#include "wl_common.h"

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "rotating_inputs", argc, argv, 0);
    size_t bytes = wl_buf_bytes(&w);
    int nl = wl_chain_lanes(&w);
    CUdeviceptr in[3], out = wl_alloc_filled(&w, bytes, 2);
    CUgraphNode seeds[WL_MAX_LANES];
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    for (int i = 0; i < 3; i++)
        in[i] = wl_alloc_filled(&w, bytes, 10 + (unsigned)i);
    wl_chain c = { .in = in[0], .prev = out, .out = out, .salt = 0x5eed };
    wl_alloc_lanes(&w, &c);
    wl_recapture(&w, &g, &exec, &c, seeds);

    for (int s = 0; s < w.steps; s++) {
        c.in = in[s % 3];
        for (int j = 0; j < nl; j++)
            wl_chain_set_seed(&w, exec, seeds[j], &c, j);
        wl_launch_sync(&w, exec);
    }

    wl_report(&w, &out, &bytes, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    wl_free_lanes(&c, nl);
    for (int i = 0; i < 3; i++)
        WL_CHECK(cuMemFree(in[i]));
    WL_CHECK(cuMemFree(out));
    return wl_finish(&w);
}
