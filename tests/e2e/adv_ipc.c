/*
 * tests/e2e/adv_ipc.c: round 7, legacy IPC (cuIpcGetMemHandle) of
 * cuMemAlloc memory, which a placing library backs with its own VMM chunks
 * (core/ipc.c), where the driver's rules are not those of the open and
 * close paths that tests/e2e/adv_vmm.c covers:
 *   no_context  cuIpcGetMemHandle of a 4 KiB and a 4 MiB cuMemAlloc buffer
 *               and a 4 KiB cuMemAllocAsync one with no context current
 *               (cuCtxSetCurrent(NULL)): the driver asks for one
 *               (CUDA_ERROR_INVALID_CONTEXT); then, with the context
 *               current again, the handles are taken as usual (the
 *               stream-ordered one: CUDA_ERROR_INVALID_VALUE, pool memory).
 * Checks: the buffers' words afterwards.
 * Usage: adv_ipc no_context
 */
#include "adv_common.h"

#define SMALL 4096u
#define BIG (4u << 20)

int main(int argc, char **argv)
{
    static const char *const cases[] = { "no_context", NULL };
    (void)adv_case(argc, argv, cases);
    CUcontext ctx;
    CUdeviceptr p[2];
    const size_t bytes[2] = { SMALL, BIG };
    adv_open(&ctx, NULL);
    for (int i = 0; i < 2; i++) {
        MUST(cuMemAlloc(&p[i], bytes[i]));
        MUST(cuMemsetD32(p[i], 0x5a5a0000u + (uint32_t)i, bytes[i] / 4));
    }
    CUstream s;
    CUdeviceptr q;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocAsync(&q, SMALL, s));
    MUST(cuStreamSynchronize(s));
    CUipcMemHandle h;
    MUST(cuCtxSetCurrent(NULL));
    for (int i = 0; i < 2; i++) {
        CUresult r = R(cuIpcGetMemHandle(&h, p[i]));
        printf("cuIpcGetMemHandle of the %s buffer, no context current: %s\n",
               i ? "4 MiB" : "4 KiB", adv_err(r));
    }
    printf("cuIpcGetMemHandle of the cuMemAllocAsync buffer, no context current: %s\n",
           adv_err(R(cuIpcGetMemHandle(&h, q))));
    MUST(cuCtxSetCurrent(ctx));
    printf("cuIpcGetMemHandle of the cuMemAllocAsync buffer, its context current: %s\n",
           adv_err(R(cuIpcGetMemHandle(&h, q))));
    R(cuMemFreeAsync(q, s));
    R(cuStreamSynchronize(s));
    R(cuStreamDestroy(s));
    for (int i = 0; i < 2; i++) {
        CUresult r = R(cuIpcGetMemHandle(&h, p[i]));
        printf("cuIpcGetMemHandle of the %s buffer, its context current: %s\n",
               i ? "4 MiB" : "4 KiB", adv_err(r));
        uint32_t w[2] = { 0, 0 };
        R(cuMemcpyDtoH(&w[0], p[i], 4));
        R(cuMemcpyDtoH(&w[1], p[i] + bytes[i] - 4, 4));
        uint32_t want = 0x5a5a0000u + (uint32_t)i;
        adv_check(i ? "4 MiB buffer unchanged" : "4 KiB buffer unchanged",
                  w[0] == want && w[1] == want, "%08x %08x", w[0], w[1]);
        R(cuMemFree(p[i]));
    }
    return adv_finish();
}
