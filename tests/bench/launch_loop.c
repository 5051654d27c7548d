/*
 * launch_loop: kernels launched outside any stream capture, for `make bench`'s
 * figure "library instructions added per non-captured cuLaunchKernel"
 * (tests/bench/targets.py). Each step launches the workloads' kernel chain
 * (wl_chain_enqueue: `nodes` cuLaunchKernel calls on one stream, no graph),
 * then synchronizes the stream. No capture, no graph, no allocation after
 * set-up: what the library adds to such a program is its cost on calls that
 * are not captured.
 *
 *   launch_loop [--steps N] [--nodes N] [--elems N]
 *
 * Prints wl_report's count line and "checksum: <hex>" (FNV-1a over the
 * chain's output buffer), the same with and without the library.
 */
#include "wl_common.h"

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "launch_loop", argc, argv, 0);
    size_t bytes = wl_buf_bytes(&w);
    CUdeviceptr in = wl_alloc_filled(&w, bytes, 11), out = wl_alloc_filled(&w, bytes, 12);
    wl_chain c = { .in = in, .prev = out, .out = out, .salt = 0x1a57 };
    wl_alloc_lanes(&w, &c);

    for (int s = 0; s < w.steps; s++) {
        wl_chain_enqueue(&w, w.stream, &c, NULL);
        WL_CHECK(cuStreamSynchronize(w.stream));
    }

    wl_report(&w, &out, &bytes, 1);
    wl_free_lanes(&c, wl_chain_lanes(&w));
    WL_CHECK(cuMemFree(in));
    WL_CHECK(cuMemFree(out));
    return wl_finish(&w);
}
