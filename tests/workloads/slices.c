/*
 * slices: every buffer is a slice of one big allocation (8 slots of --elems
 * words), so kernels receive interior pointers (base + offset). Slot 7 holds
 * the accumulated output; slots 0-6 rotate: at step s, with r = s % 7, the
 * input is slot r, the lanes are slots r+1..r+4, and the captured graph also
 * has a memset node (cuMemsetD32Async over the upper half of slot r+5) and a
 * memcpy node (cuMemcpyDtoDAsync of the output into slot r+6), both of which
 * feed later steps. Each step re-captures and updates the exec. The checksum
 * covers the whole big buffer.
 */
#include "wl_common.h"

#define SLOTS 8
#define ROTATING 7

int main(int argc, char **argv)
{
    wl_env w;
    wl_init(&w, "slices", argc, argv, 0);
    size_t bytes = wl_buf_bytes(&w), total = SLOTS * bytes;
    int nl = wl_chain_lanes(&w);
    size_t half = w.elems / 2; /* memset covers words [half, elems) of its slot */
    CUdeviceptr base = wl_alloc_filled(&w, total, 3);
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
#define SLOT(i) (base + (CUdeviceptr)((i) % ROTATING) * bytes)
    CUdeviceptr out = base + (CUdeviceptr)ROTATING * bytes;

    for (int s = 0; s < w.steps; s++) {
        int r = s % ROTATING;
        wl_chain c = { .in = SLOT(r), .prev = out, .out = out, .salt = 0x5eed };
        for (int j = 0; j < nl; j++)
            c.lanes[j] = SLOT(r + 1 + j);
        if (g)
            WL_CHECK(cuGraphDestroy(g));
        wl_capture_begin(&w);
        WL_CHECK(cuMemsetD32Async(SLOT(r + 5) + half * sizeof(unsigned), 0xa5a5f00du,
                                  w.elems - half, w.stream));
        wl_chain_enqueue(&w, w.stream, &c, NULL);
        WL_CHECK(cuMemcpyDtoDAsync(SLOT(r + 6), out, bytes, w.stream));
        g = wl_capture_end(&w);
        wl_refresh_exec(&w, &exec, g);
        wl_launch_sync(&w, exec);
    }
#undef SLOT

    wl_report(&w, &base, &total, 1);
    WL_CHECK(cuGraphExecDestroy(exec));
    WL_CHECK(cuGraphDestroy(g));
    WL_CHECK(cuMemFree(base));
    return wl_finish(&w);
}
