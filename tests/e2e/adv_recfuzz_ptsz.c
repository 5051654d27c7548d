/*
 * tests/e2e/adv_recfuzz_ptsz.c: the random record programs of adv_recfuzz.c
 * built for the per-thread default stream (CUDA_API_PER_THREAD_DEFAULT_STREAM:
 * every stream call goes to its _ptsz / _ptds entry point), each program's
 * stream 0, where its captures begin, being the calling thread's default
 * stream (CU_STREAM_PER_THREAD): the recorder must tell the threads' default
 * streams apart (mode threads) and follow the per-thread entry points. Same
 * modes and output as adv_recfuzz.
 * Usage: adv_recfuzz_ptsz SEED [capture|explicit|temps|rotate|threads|wild|extra|threads_tl|unhooked]
 */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#define ADV_RECFUZZ_PTDS 1
#include "adv_recfuzz.c"
