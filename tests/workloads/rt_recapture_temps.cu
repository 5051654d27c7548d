/*
 * rt_recapture_temps: recapture_temps (recapture_temps.c) on the CUDA
 * runtime: each step allocates the chain's lanes as temporaries of different
 * sizes (cudaMalloc, or cudaMallocAsync on the stream with --async-alloc),
 * re-captures the chain (cudaStreamBeginCapture / EndCapture), refreshes the
 * exec with cudaGraphExecUpdate (instantiating on the first step or when the
 * update fails), launches, waits and frees the temporaries (cudaFree, or
 * cudaFreeAsync on the stream). Same checksum as recapture_temps.
 */
#include "rt_common.cuh"

int main(int argc, char **argv)
{
    rt_env w;
    rt_init(&w, "rt_recapture_temps", argc, argv, RT_OPT_ASYNC_ALLOC, NULL);
    size_t bytes = rt_buf_bytes(&w);
    int nl = rt_lanes(&w);
    unsigned *in = rt_alloc_filled(&w, bytes, 1), *out = rt_alloc_filled(&w, bytes, 2);
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;

    for (int s = 0; s < w.steps; s++) {
        rt_chain c = { in, out, out, {}, 0x5eed };
        for (int j = 0; j < nl; j++) {
            size_t sz = bytes + (size_t)j * (bytes / 2 + 256);
            if (w.async_alloc) RT_CHECK(cudaMallocAsync((void **)&c.lanes[j], sz, w.stream));
            else RT_CHECK(cudaMalloc(&c.lanes[j], sz));
        }
        rt_capture(&w, &g, &c, NULL);
        rt_refresh_exec(&w, &exec, g);
        rt_launch(&w, exec);
        for (int j = 0; j < nl && w.async_alloc; j++) RT_CHECK(cudaFreeAsync(c.lanes[j], w.stream));
        RT_CHECK(cudaStreamSynchronize(w.stream));
        if (!w.async_alloc) rt_free_lanes(&c, nl);
    }

    rt_report(&w, &out, &bytes, 1);
    RT_CHECK(cudaGraphExecDestroy(exec));
    RT_CHECK(cudaGraphDestroy(g));
    RT_CHECK(cudaFree(in));
    RT_CHECK(cudaFree(out));
    return rt_finish(&w);
}
