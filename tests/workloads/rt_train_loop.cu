/*
 * rt_train_loop: train_loop (train_loop.c, the workload `make demo` runs) on
 * the CUDA runtime. Defaults: --steps 50, --nodes 320 (an explicit option
 * overrides them).
 *
 * Persistent state: RT_LAYERS "weights" buffers (cudaMalloc, once). Each step:
 * a new input batch (cudaMalloc + cudaMemcpy, freed RT_BATCH_DEPTH steps
 * later), one activation and one gradient temporary per layer (cudaMalloc,
 * several sizes), a capture of `nodes` kernel nodes (forward, backward,
 * optimizer, as train_loop.c describes), cudaGraphExecUpdate of the exec
 * (instantiating only when it fails), launch, synchronize, free the
 * temporaries. Same checksum as train_loop (over the weights, in layer
 * order), then "rt_train_loop: allocations=N step_us_median=X".
 */
#include "rt_common.cuh"

#include <algorithm>
#include <stdio.h>
#include <time.h>
#include <vector>

#define RT_LAYERS 4
#define RT_BATCH_DEPTH 2
#define RT_MIN_NODES (3 * RT_LAYERS)

static const unsigned TL_BLOCK = 256, TL_MAX_GRID = 64;   /* train_loop.c's launch shape */

struct tl_step {
    unsigned *batch, *act[RT_LAYERS], *grad[RT_LAYERS];
};

struct tl_model {
    rt_env *w;
    unsigned *weights[RT_LAYERS];
    int fwd_extra[RT_LAYERS], bwd_extra[RT_LAYERS];
};

static dim3 tl_grid(const rt_env *w)
{
    unsigned g = (w->elems + TL_BLOCK - 1) / TL_BLOCK;
    return dim3(std::min(g, TL_MAX_GRID));
}

static void tl_fscale(const rt_env *w, const unsigned *x, unsigned *y, float a, float b)
{
    wl_fscale<<<tl_grid(w), TL_BLOCK, 0, w->stream>>>(x, y, w->elems, a, b);
    RT_CHECK(cudaGetLastError());
}

/* Extra node i of a layer: wl_mix of x into y (even i), else wl_fscale of z
 * into y; its scalars depend on the layer, the pass and i only. */
static void tl_extra(const rt_env *w, const unsigned *x, const unsigned *z, unsigned *y, int tag, int i)
{
    if (i % 2 == 0) rt_enqueue_mix(w, x, y, (unsigned)(tag * 1000 + i) * 0x3c6ef372u);
    else tl_fscale(w, z, y, 0.75f, (float)((tag * 7 + i) % 97) + 0.5f);
}

/* The nodes beyond a seed, a stencil and an optimizer node per layer, split
 * between forward and backward, then across the layers. */
static void tl_plan(tl_model *m, int nodes)
{
    int extra = nodes - RT_MIN_NODES, fwd = (extra + 1) / 2, bwd = extra - fwd;
    for (int l = 0; l < RT_LAYERS; l++) {
        m->fwd_extra[l] = fwd / RT_LAYERS + (l < fwd % RT_LAYERS);
        m->bwd_extra[l] = bwd / RT_LAYERS + (l < bwd % RT_LAYERS);
    }
}

static void tl_enqueue_step(const tl_model *m, const tl_step *st)
{
    const rt_env *w = m->w;
    for (int l = 0; l < RT_LAYERS; l++) {                  /* forward */
        wl_seed<<<tl_grid(w), TL_BLOCK, 0, w->stream>>>(l ? st->act[l - 1] : st->batch, m->weights[l], st->act[l],
                                                       w->elems, 0x7a110000u + (unsigned)l);
        RT_CHECK(cudaGetLastError());
        for (int i = 0; i < m->fwd_extra[l]; i++) tl_extra(w, m->weights[l], m->weights[l], st->act[l], l, i);
    }
    for (int l = RT_LAYERS - 1; l >= 0; l--) {             /* backward */
        wl_stencil<<<tl_grid(w), TL_BLOCK, 0, w->stream>>>(l == RT_LAYERS - 1 ? st->act[l] : st->grad[l + 1],
                                                           st->grad[l], w->elems);
        RT_CHECK(cudaGetLastError());
        for (int i = 0; i < m->bwd_extra[l]; i++)
            tl_extra(w, st->act[l], m->weights[l], st->grad[l], RT_LAYERS + l, i);
    }
    for (int l = 0; l < RT_LAYERS; l++)                    /* optimizer */
        tl_fscale(w, st->grad[l], m->weights[l], 0.5f, (float)l + 0.25f);
}

static size_t act_bytes(const rt_env *w, int l) { return rt_buf_bytes(w) + (size_t)l * (rt_buf_bytes(w) / 4 + 256); }

static size_t grad_bytes(const rt_env *w, int l)
{
    return rt_buf_bytes(w) + (size_t)(RT_LAYERS - 1 - l) * (rt_buf_bytes(w) / 2) + 128;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    static const char *const defaults[] = { "--steps", "50", "--nodes", "320", NULL };
    rt_env w;
    tl_model m = {};
    m.w = &w;
    rt_init(&w, "rt_train_loop", argc, argv, 0, defaults);
    if (w.nodes < RT_MIN_NODES) {
        fprintf(stderr, "rt_train_loop: --nodes must be at least %d (%d layers)\n", RT_MIN_NODES, RT_LAYERS);
        return 2;
    }
    tl_plan(&m, w.nodes);

    size_t wbytes[RT_LAYERS];
    int allocs = 0;
    for (int l = 0; l < RT_LAYERS; l++) {
        wbytes[l] = rt_buf_bytes(&w);
        m.weights[l] = rt_alloc_filled(&w, wbytes[l], 0x3e170000u + (unsigned)l);
        allocs++;
    }

    std::vector<unsigned *> batches;
    std::vector<double> step_us;
    cudaGraphExec_t exec = NULL;
    for (int s = 0; s < w.steps; s++) {
        double t0 = now_us();
        tl_step st;
        st.batch = rt_alloc_filled(&w, rt_buf_bytes(&w), 1000u + (unsigned)s);
        batches.push_back(st.batch);
        allocs++;
        for (int l = 0; l < RT_LAYERS; l++) {
            RT_CHECK(cudaMalloc(&st.act[l], act_bytes(&w, l)));
            RT_CHECK(cudaMalloc(&st.grad[l], grad_bytes(&w, l)));
            allocs += 2;
        }
        cudaGraph_t g;
        RT_CHECK(cudaStreamBeginCapture(w.stream, cudaStreamCaptureModeGlobal));
        tl_enqueue_step(&m, &st);
        RT_CHECK(cudaStreamEndCapture(w.stream, &g));
        rt_refresh_exec(&w, &exec, g);
        rt_launch_sync(&w, exec);
        RT_CHECK(cudaGraphDestroy(g));
        for (int l = 0; l < RT_LAYERS; l++) {
            RT_CHECK(cudaFree(st.act[l]));
            RT_CHECK(cudaFree(st.grad[l]));
        }
        if (batches.size() > RT_BATCH_DEPTH) {
            RT_CHECK(cudaFree(batches.front()));
            batches.erase(batches.begin());
        }
        step_us.push_back(now_us() - t0);
    }

    rt_report(&w, m.weights, wbytes, RT_LAYERS);
    std::sort(step_us.begin(), step_us.end());
    size_t n = step_us.size();
    double median = n % 2 ? step_us[n / 2] : (step_us[n / 2 - 1] + step_us[n / 2]) / 2;
    printf("rt_train_loop: allocations=%d step_us_median=%.1f\n", allocs, median);
    fflush(stdout);

    RT_CHECK(cudaGraphExecDestroy(exec));
    for (unsigned *b : batches) RT_CHECK(cudaFree(b));
    for (int l = 0; l < RT_LAYERS; l++) RT_CHECK(cudaFree(m.weights[l]));
    return rt_finish(&w);
}
