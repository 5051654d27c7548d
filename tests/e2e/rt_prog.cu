// tests/e2e/rt_prog.cu: a CUDA runtime program (nvcc, static runtime). Its
// first runtime call makes the runtime load libcuda.so.1 and resolve its
// driver table through cuGetProcAddress_v2; on the emulated driver it stops
// there (cuGetExportTable is not supported), which test_runtime.sh expects.
#include <cstdio>
#include <cuda_runtime.h>

int main()
{
    int n = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    std::printf("cudaGetDeviceCount: %d (%s), devices %d\n", (int)e, cudaGetErrorName(e), n);
    return 0;
}
