/*
 * rt_fresh_inputs: fresh_inputs (fresh_inputs.c) on the CUDA runtime, with
 * the stream-ordered allocator: each step takes a new input buffer from
 * cudaMallocAsync on the stream, fills it (cudaMemcpyAsync), re-captures the
 * chain, updates the exec (cudaGraphExecUpdate) and launches. Inputs go back
 * with cudaFreeAsync three steps later (a FIFO of 3), so each step's input
 * has an address the previous graphs never saw. Same checksum as
 * fresh_inputs.
 */
#include "rt_common.cuh"

#define FIFO 3

int main(int argc, char **argv)
{
    rt_env w;
    rt_init(&w, "rt_fresh_inputs", argc, argv, 0, NULL);
    size_t bytes = rt_buf_bytes(&w);
    unsigned *out = rt_alloc_filled(&w, bytes, 2), *fifo[FIFO];
    int nfifo = 0;
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    rt_chain c = { NULL, out, out, {}, 0x5eed };
    rt_alloc_lanes(&w, &c);

    for (int s = 0; s < w.steps; s++) {
        RT_CHECK(cudaMallocAsync((void **)&c.in, bytes, w.stream));
        rt_fill(&w, c.in, bytes, 100 + (unsigned)s, true);
        rt_capture(&w, &g, &c, NULL);
        rt_refresh_exec(&w, &exec, g);
        rt_launch_sync(&w, exec);
        if (nfifo == FIFO) {
            RT_CHECK(cudaFreeAsync(fifo[0], w.stream));
            for (int i = 1; i < FIFO; i++) fifo[i - 1] = fifo[i];
            nfifo--;
        }
        fifo[nfifo++] = c.in;
    }

    rt_report(&w, &out, &bytes, 1);
    RT_CHECK(cudaGraphExecDestroy(exec));
    RT_CHECK(cudaGraphDestroy(g));
    rt_free_lanes(&c, rt_lanes(&w));
    for (int i = 0; i < nfifo; i++) RT_CHECK(cudaFreeAsync(fifo[i], w.stream));
    RT_CHECK(cudaStreamSynchronize(w.stream));
    RT_CHECK(cudaFree(out));
    return rt_finish(&w);
}
