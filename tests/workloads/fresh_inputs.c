/*
 * fresh_inputs: each step allocates a new input buffer (cuMemAlloc), fills
 * it, re-captures the chain and updates the exec (cuGraphExecUpdate), then
 * launches. Old inputs are freed three steps later (a FIFO of 3), so each
 * step's input has an address the previous graphs never saw.
 */
#include "wl_common.h"

#define FIFO 3

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "fresh_inputs", argc, argv, 0);
    size_t bytes = wl_buf_bytes(&w);
    CUdeviceptr out = wl_alloc_filled(&w, bytes, 2), fifo[FIFO];
    int nfifo = 0;
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    wl_chain c = { .prev = out, .out = out, .salt = 0x5eed };
    wl_alloc_lanes(&w, &c);

    for (int s = 0; s < w.steps; s++) {
        c.in = wl_alloc_filled(&w, bytes, 100 + (unsigned)s);
        wl_recapture(&w, &g, &exec, &c, NULL);
        wl_launch_sync(&w, exec);
        if (nfifo == FIFO) {
            WL_CHECK(cuMemFree(fifo[0]));
            for (int i = 1; i < FIFO; i++)
                fifo[i - 1] = fifo[i];
            nfifo--;
        }
        fifo[nfifo++] = c.in;
    }

    wl_report(&w, &out, &bytes, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    wl_free_lanes(&c, wl_chain_lanes(&w));
    for (int i = 0; i < nfifo; i++)
        WL_CHECK(cuMemFree(fifo[i]));
    WL_CHECK(cuMemFree(out));
    return wl_finish(&w);
}
