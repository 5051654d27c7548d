/*
 * rt_instantiate_loop: the recapture_temps pattern (recapture_temps.c) with
 * a new exec every step, as programs that never update do: each step
 * allocates the lanes as temporaries (cudaMalloc), captures the chain
 * (cudaStreamBeginCapture / EndCapture), instantiates it (cudaGraphInstantiate),
 * launches, waits, then destroys the exec and the graph and frees the
 * temporaries. Computes what recapture_temps computes: same checksum.
 */
#include "rt_common.cuh"

int main(int argc, char **argv)
{
    rt_env w;
    rt_init(&w, "rt_instantiate_loop", argc, argv, 0, NULL);
    size_t bytes = rt_buf_bytes(&w);
    int nl = rt_lanes(&w);
    unsigned *in = rt_alloc_filled(&w, bytes, 1), *out = rt_alloc_filled(&w, bytes, 2);

    for (int s = 0; s < w.steps; s++) {
        rt_chain c = { in, out, out, {}, 0x5eed };
        for (int j = 0; j < nl; j++) RT_CHECK(cudaMalloc(&c.lanes[j], bytes + (size_t)j * (bytes / 2 + 256)));
        cudaGraph_t g = NULL;
        cudaGraphExec_t exec = NULL;
        rt_capture(&w, &g, &c, NULL);
        rt_refresh_exec(&w, &exec, g);
        rt_launch_sync(&w, exec);
        RT_CHECK(cudaGraphExecDestroy(exec));
        RT_CHECK(cudaGraphDestroy(g));
        rt_free_lanes(&c, nl);
    }

    rt_report(&w, &out, &bytes, 1);
    RT_CHECK(cudaFree(in));
    RT_CHECK(cudaFree(out));
    return rt_finish(&w);
}
