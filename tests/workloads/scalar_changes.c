/*
 * scalar_changes: like rotating_inputs, but the buffers stay put and a scalar
 * argument (the first-layer nodes' salt) changes every step through
 * cuGraphExecKernelNodeSetParams. Every such update must reach the driver
 * for the result to be right: skipping one changes the checksum.
 */
#include "wl_common.h"

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "scalar_changes", argc, argv, 0);
    size_t bytes = wl_buf_bytes(&w);
    int nl = wl_chain_lanes(&w);
    CUdeviceptr in = wl_alloc_filled(&w, bytes, 1), out = wl_alloc_filled(&w, bytes, 2);
    CUgraphNode seeds[WL_MAX_LANES];
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    wl_chain c = { .in = in, .prev = out, .out = out, .salt = 0x5eed };
    wl_alloc_lanes(&w, &c);
    wl_recapture(&w, &g, &exec, &c, seeds);

    for (int s = 0; s < w.steps; s++) {
        c.salt = 0x5eed + (unsigned)s * 0x9e3779b9u;
        for (int j = 0; j < nl; j++)
            wl_chain_set_seed(&w, exec, seeds[j], &c, j);
        wl_launch_sync(&w, exec);
    }

    wl_report(&w, &out, &bytes, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    wl_free_lanes(&c, nl);
    WL_CHECK(cuMemFree(in));
    WL_CHECK(cuMemFree(out));
    return wl_finish(&w);
}
