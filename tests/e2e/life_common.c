/*
 * tests/e2e/life_common.c: the shared part of the life-cycle and bad-handle
 * programs (see life_common.h).
 */
#include "life_common.h"

#include <stdlib.h>
#include <string.h>

life_drv life;

#define LIFE_STR2_(x) #x
#define LIFE_STR_(x) LIFE_STR2_(x)

int life_drv_dlsym(void *handle, void *(*sym)(void *, const char *))
{
#define LIFE_SYM_(n)                                                          \
    if (!(*(void **)&life.n = sym(handle, LIFE_STR_(n)))) {                   \
        printf("missing %s\n", LIFE_STR_(n));                                 \
        return -1;                                                            \
    }
    LIFE_DRV_LIST(LIFE_SYM_)
    return 0;
}

const char *life_err(CUresult r)
{
    const char *s = NULL;
    if (!life.cuGetErrorName || life.cuGetErrorName(r, &s) != CUDA_SUCCESS || !s) return "?";
    return s;
}

CUresult life_print(CUresult r, const char *what)
{
    printf("%s = %s\n", what, life_err(r));
    fflush(stdout);
    return r;
}

int life_setup(life_work *w, const char *module, uint64_t n)
{
    CUmodule mod;
    memset(w, 0, sizeof *w);
    w->n = n;
    if (LIFE_R(life.cuModuleLoad(&mod, module)) ||
        LIFE_R(life.cuModuleGetFunction(&w->inc, mod, "inc_u32")) ||
        LIFE_R(life.cuStreamCreate(&w->stream, CU_STREAM_NON_BLOCKING)) ||
        LIFE_R(life.cuMemAlloc(&w->buf, n * 4)) ||
        LIFE_R(life.cuMemsetD32(w->buf, 0, n)))
        return -1;
    return 0;
}

int life_graph(life_work *w, int kernels)
{
    void *args[] = { &w->buf, &w->n };
    if (LIFE_R(life.cuStreamBeginCapture(w->stream, CU_STREAM_CAPTURE_MODE_GLOBAL))) return -1;
    for (int i = 0; i < kernels; i++)
        life.cuLaunchKernel(w->inc, 1, 1, 1, 1, 1, 1, 0, w->stream, args, NULL);
    if (LIFE_R(life.cuStreamEndCapture(w->stream, &w->graph)) ||
        LIFE_R(life.cuGraphInstantiateWithFlags(&w->exec, w->graph, 0)))
        return -1;
    return 0;
}

void life_launch(life_work *w, int times)
{
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < times && r == CUDA_SUCCESS; i++) r = life.cuGraphLaunch(w->exec, w->stream);
    printf("%d launches = %s\n", times, life_err(r));
}

void life_checksum(life_work *w, const char *label)
{
    uint32_t *host = calloc(w->n, 4);
    uint64_t h = 1469598103934665603ull;
    LIFE_R(life.cuStreamSynchronize(w->stream));
    if (host && LIFE_R(life.cuMemcpyDtoH(host, w->buf, w->n * 4)) == CUDA_SUCCESS) {
        for (size_t i = 0; i < w->n * 4; i++) h = (h ^ ((uint8_t *)host)[i]) * 1099511628211ull;
        printf("%s checksum: %016llx\n", label, (unsigned long long)h);
    }
    fflush(stdout);
    free(host);
}

void life_teardown(life_work *w)
{
    LIFE_R(life.cuGraphExecDestroy(w->exec));
    LIFE_R(life.cuGraphDestroy(w->graph));
    LIFE_R(life.cuMemFree(w->buf));
    LIFE_R(life.cuStreamDestroy(w->stream));
}
