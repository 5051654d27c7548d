/*
 * rt_rotating_inputs: rotating_inputs (rotating_inputs.c) on the CUDA
 * runtime: the chain is captured and instantiated once, then fed from three
 * input buffers in turn: each step points the first-layer kernel nodes at
 * the step's input with cudaGraphExecKernelNodeSetParams and launches. Same
 * checksum as rotating_inputs.
 */
#include "rt_common.cuh"

int main(int argc, char **argv)
{
    rt_env w;
    rt_init(&w, "rt_rotating_inputs", argc, argv, 0, NULL);
    size_t bytes = rt_buf_bytes(&w);
    int nl = rt_lanes(&w);
    unsigned *in[3], *out = rt_alloc_filled(&w, bytes, 2);
    cudaGraphNode_t seeds[RT_MAX_LANES];
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    for (int i = 0; i < 3; i++) in[i] = rt_alloc_filled(&w, bytes, 10 + (unsigned)i);
    rt_chain c = { in[0], out, out, {}, 0x5eed };
    rt_alloc_lanes(&w, &c);
    rt_capture(&w, &g, &c, seeds);
    rt_refresh_exec(&w, &exec, g);

    for (int s = 0; s < w.steps; s++) {
        c.in = in[s % 3];
        for (int j = 0; j < nl; j++) rt_chain_set_seed(&w, exec, seeds[j], &c, j);
        rt_launch_sync(&w, exec);
    }

    rt_report(&w, &out, &bytes, 1);
    RT_CHECK(cudaGraphExecDestroy(exec));
    RT_CHECK(cudaGraphDestroy(g));
    rt_free_lanes(&c, nl);
    for (int i = 0; i < 3; i++) RT_CHECK(cudaFree(in[i]));
    RT_CHECK(cudaFree(out));
    return rt_finish(&w);
}
