/*
 * tests/launch_util.h: launch helpers shared by the emulator's tests
 * (tests/emu, through graph_util.h) and the adversarial programs
 * (tests/e2e, through adv_common.h).
 */
#ifndef LAUNCH_UTIL_H
#define LAUNCH_UTIL_H

#include <cuda.h>
#include <string.h>

/* A 1 x 1 block launch on s for cuLaunchKernelEx with attributes at[0..n). */
static inline CUlaunchConfig launch_config_1x1(CUstream s, CUlaunchAttribute *at, unsigned n)
{
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = at;
    cfg.numAttrs = n;
    return cfg;
}

#endif /* LAUNCH_UTIL_H */
