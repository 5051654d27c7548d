/*
 * train_loop: a training-style loop, the workload `make demo` runs
 * (scripts/demo.sh). Defaults differ from the other workloads: --steps 50,
 * --nodes 320 (an explicit option overrides them).
 *
 * Persistent state: TL_LAYERS "weights" buffers, allocated once. Each step:
 *   1. data loader: a new input batch (cuMemAlloc + cuMemcpyHtoD); batches
 *      are freed TL_BATCH_DEPTH steps later, so the batch address the graph
 *      sees changes every step;
 *   2. temporaries: one activation and one gradient buffer per layer
 *      (cuMemAlloc, several sizes);
 *   3. capture of `nodes` kernel nodes: forward (per layer a wl_seed from the
 *      previous activation and the layer's weights, then wl_mix / wl_fscale
 *      against the weights), backward (per layer a wl_stencil from the next
 *      gradient, then wl_mix / wl_fscale against the activation and the
 *      weights), optimizer (one wl_fscale per layer folding its gradient into
 *      its weights);
 *   4. cuGraphExecUpdate on the existing exec, re-instantiating only when the
 *      update fails (wl_refresh_exec: NVIDIA's recommended pattern);
 *   5. launch, synchronize, free the temporaries.
 * Kernel scalars do not depend on the step: only the buffers' addresses
 * differ between the graphs of two steps.
 *
 * Output: wl_report's count line and "checksum: ..." (FNV-1a over the
 * weights, in layer order), then one line
 *   train_loop: allocations=N step_us_median=X
 * (cuMemAlloc calls made by the program; median wall time of one step).
 */
#include "wl_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TL_LAYERS 4
#define TL_BATCH_DEPTH 2           /* a batch is freed this many steps after its own */
#define TL_MIN_NODES (3 * TL_LAYERS)
#define TL_BLOCK 256u
#define TL_MAX_GRID 64u

typedef struct tl_step {
    CUdeviceptr batch;
    CUdeviceptr act[TL_LAYERS], grad[TL_LAYERS];
} tl_step;

typedef struct tl_model {
    wl_env *w;
    CUdeviceptr weights[TL_LAYERS];
    int fwd_extra[TL_LAYERS], bwd_extra[TL_LAYERS]; /* nodes after each layer's first */
} tl_model;

/* ------------------------------------------------------------ kernel nodes */

static void tl_launch(const wl_env *w, CUfunction f, void **args)
{
    unsigned grid = (w->elems + TL_BLOCK - 1) / TL_BLOCK;
    if (grid > TL_MAX_GRID) grid = TL_MAX_GRID;
    WL_CHECK(cuLaunchKernel(f, grid, 1, 1, TL_BLOCK, 1, 1, 0, w->stream, args, NULL));
}

static void tl_seed(const wl_env *w, CUdeviceptr in, CUdeviceptr prev, CUdeviceptr out, unsigned salt)
{
    unsigned n = w->elems;
    void *args[] = { &in, &prev, &out, &n, &salt };
    tl_launch(w, w->f_seed, args);
}

static void tl_fscale(const wl_env *w, CUdeviceptr x, CUdeviceptr y, float a, float b)
{
    unsigned n = w->elems;
    void *args[] = { &x, &y, &n, &a, &b };
    tl_launch(w, w->f_fscale, args);
}

static void tl_stencil(const wl_env *w, CUdeviceptr x, CUdeviceptr out)
{
    unsigned n = w->elems;
    void *args[] = { &x, &out, &n };
    tl_launch(w, w->f_stencil, args);
}

/* The i-th extra node of a layer: wl_mix of x into y (even i) or wl_fscale
 * of z into y (odd i); the scalars depend on the layer, the pass and i only. */
static void tl_extra(const wl_env *w, CUdeviceptr x, CUdeviceptr z, CUdeviceptr y, int tag, int i)
{
    if (i % 2 == 0)
        wl_enqueue_mix(w, w->stream, x, y, (unsigned)(tag * 1000 + i) * 0x3c6ef372u);
    else
        tl_fscale(w, z, y, 0.75f, (float)((tag * 7 + i) % 97) + 0.5f);
}

/* Splits the nodes beyond the minimum (a seed, a stencil and an optimizer
 * node per layer) between forward and backward, then across the layers. */
static void tl_plan(tl_model *m, int nodes)
{
    int extra = nodes - TL_MIN_NODES, fwd = (extra + 1) / 2, bwd = extra - fwd;
    for (int l = 0; l < TL_LAYERS; l++) {
        m->fwd_extra[l] = fwd / TL_LAYERS + (l < fwd % TL_LAYERS);
        m->bwd_extra[l] = bwd / TL_LAYERS + (l < bwd % TL_LAYERS);
    }
}

/* Enqueues one training step on w->stream (capturing). */
static void tl_enqueue_step(const tl_model *m, const tl_step *st)
{
    const wl_env *w = m->w;
    for (int l = 0; l < TL_LAYERS; l++) {               /* forward */
        tl_seed(w, l ? st->act[l - 1] : st->batch, m->weights[l], st->act[l],
                0x7a110000u + (unsigned)l);
        for (int i = 0; i < m->fwd_extra[l]; i++)
            tl_extra(w, m->weights[l], m->weights[l], st->act[l], l, i);
    }
    for (int l = TL_LAYERS - 1; l >= 0; l--) {          /* backward */
        tl_stencil(w, l == TL_LAYERS - 1 ? st->act[l] : st->grad[l + 1], st->grad[l]);
        for (int i = 0; i < m->bwd_extra[l]; i++)
            tl_extra(w, st->act[l], m->weights[l], st->grad[l], TL_LAYERS + l, i);
    }
    for (int l = 0; l < TL_LAYERS; l++)                 /* optimizer */
        tl_fscale(w, st->grad[l], m->weights[l], 0.5f, (float)l + 0.25f);
}

/* ------------------------------------------------------------ buffers */

static size_t act_bytes(const wl_env *w, int l)
{
    return wl_buf_bytes(w) + (size_t)l * (wl_buf_bytes(w) / 4 + 256);
}

static size_t grad_bytes(const wl_env *w, int l)
{
    return wl_buf_bytes(w) + (size_t)(TL_LAYERS - 1 - l) * (wl_buf_bytes(w) / 2) + 128;
}

static void tl_alloc_temps(const wl_env *w, tl_step *st, int *allocs)
{
    for (int l = 0; l < TL_LAYERS; l++) {
        WL_CHECK(cuMemAlloc(&st->act[l], act_bytes(w, l)));
        WL_CHECK(cuMemAlloc(&st->grad[l], grad_bytes(w, l)));
        *allocs += 2;
    }
}

static void tl_free_temps(const tl_step *st)
{
    for (int l = 0; l < TL_LAYERS; l++) {
        WL_CHECK(cuMemFree(st->act[l]));
        WL_CHECK(cuMemFree(st->grad[l]));
    }
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    /* This workload's defaults go first, so that the caller's options win. */
    char *args[argc + 5];
    args[0] = argv[0];
    args[1] = "--steps"; args[2] = "50";
    args[3] = "--nodes"; args[4] = "320";
    memcpy(args + 5, argv + 1, sizeof *argv * (size_t)argc); /* with the final NULL */

    wl_env w;
    tl_model m = { .w = &w };
    wl_init(&w, "train_loop", argc + 4, args, 0);
    if (w.nodes < TL_MIN_NODES) {
        fprintf(stderr, "train_loop: --nodes must be at least %d (%d layers)\n", TL_MIN_NODES,
                TL_LAYERS);
        return 2;
    }
    tl_plan(&m, w.nodes);

    size_t wbytes[TL_LAYERS];
    int allocs = 0;
    for (int l = 0; l < TL_LAYERS; l++) {
        wbytes[l] = wl_buf_bytes(&w);
        m.weights[l] = wl_alloc_filled(&w, wbytes[l], 0x3e170000u + (unsigned)l);
        allocs++;
    }

    CUdeviceptr batches[TL_BATCH_DEPTH + 1];
    int nbatches = 0;
    CUgraphExec exec = NULL;
    double *step_us = malloc(sizeof *step_us * (size_t)w.steps);
    if (!step_us) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }

    for (int s = 0; s < w.steps; s++) {
        double t0 = wl_now_us();
        tl_step st;
        st.batch = wl_alloc_filled(&w, wl_buf_bytes(&w), 1000u + (unsigned)s);
        batches[nbatches++] = st.batch;
        allocs++;
        tl_alloc_temps(&w, &st, &allocs);

        wl_capture_begin(&w);
        tl_enqueue_step(&m, &st);
        CUgraph g = wl_capture_end(&w);
        wl_refresh_exec(&w, &exec, g);
        wl_launch_sync(&w, exec);
        WL_CHECK(cuGraphDestroy(g));

        tl_free_temps(&st);
        if (nbatches > TL_BATCH_DEPTH) {
            WL_CHECK(cuMemFree(batches[0]));
            memmove(batches, batches + 1, sizeof *batches * (size_t)--nbatches);
        }
        step_us[s] = wl_now_us() - t0;
    }

    wl_report(&w, m.weights, wbytes, TL_LAYERS);
    printf("train_loop: allocations=%d step_us_median=%.1f\n", allocs, wl_median(step_us, w.steps));
    fflush(stdout);

    free(step_us);
    WL_CHECK(cuGraphExecDestroy(exec));
    for (int i = 0; i < nbatches; i++)
        WL_CHECK(cuMemFree(batches[i]));
    for (int l = 0; l < TL_LAYERS; l++)
        WL_CHECK(cuMemFree(m.weights[l]));
    return wl_finish(&w);
}
