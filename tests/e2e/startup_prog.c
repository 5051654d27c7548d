/*
 * tests/e2e/startup_prog.c: start-up races. libctor.so has already called
 * cuInit and cuMemAlloc from its constructor; main starts THREADS threads that
 * are released together and each call cuGetProcAddress_v2, cuInit and
 * cuGraphLaunch_ptsz (through the pointer it got) CALLS times. Prints the
 * results; test_startup.sh checks them against the report.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>

#define THREADS 16
#define CALLS 100

extern CUresult ctor_init_result, ctor_alloc_result;
static pthread_barrier_t go;
static int bad[THREADS];

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    pthread_barrier_wait(&go);
    for (int i = 0; i < CALLS; i++) {
        CUresult (*launch)(CUgraphExec, CUstream) = NULL;
        CUdriverProcAddressQueryResult st;
        if (cuGetProcAddress("cuGraphLaunch", (void **)&launch, 10000,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) != CUDA_SUCCESS
            || !launch)
            bad[id]++;
        if (cuInit(0) != CUDA_SUCCESS) bad[id]++;
        if (launch && launch(NULL, NULL) == CUDA_SUCCESS) bad[id]++;  /* NULL exec must fail */
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    pthread_barrier_init(&go, NULL, THREADS);
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    int nbad = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        nbad += bad[i];
    }
    printf("ctor_init=%d ctor_alloc=%d bad=%d threads=%d calls=%d\n", (int)ctor_init_result,
           (int)ctor_alloc_result, nbad, THREADS, CALLS);
    return 0;
}
