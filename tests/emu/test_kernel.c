/*
 * test_kernel.c: modules, functions and kernel launches of the emulated
 * driver (emu_stream.c): cuModuleLoad/LoadData errors, cuFuncGetParamInfo's
 * ABI layout, kernelParams vs extra, launch validation, arguments copied at
 * launch, and the illegal-address fault handler. Kernels come from
 * mod_test.so next to the executable.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "emu_test.h"

typedef struct trio { int a, b, c; } trio;

static CUcontext ctx;
static CUmodule mod;
static char mod_path[PATH_MAX + 16];

static CUfunction func(CUmodule m, const char *name)
{
    CUfunction f = NULL;
    CHECK_CU(cuModuleGetFunction(&f, m, name), CUDA_SUCCESS);
    return f;
}

TEST(setup)
{
    CHECK_CU(emu_test_open("mod_test.so", &ctx, &mod), CUDA_SUCCESS);
    CHECK_EQ(emu_test_module_path("mod_test.so", mod_path, sizeof mod_path), 0);
}

TEST(module_load_errors)
{
    CUmodule m;
    CUfunction f;
    Dl_info info;
    char junk[] = "/tmp/emu_junk_XXXXXX";
    CHECK_CU(cuModuleLoad(&m, "/nonexistent/mod.so"), CUDA_ERROR_FILE_NOT_FOUND);
    int fd = mkstemp(junk);
    CHECK(fd >= 0);
    CHECK(write(fd, "not an object\n", 14) == 14);
    close(fd);
    CHECK_CU(cuModuleLoad(&m, junk), CUDA_ERROR_INVALID_IMAGE);
    unlink(junk);
    /* a shared object without an emu_module table */
    CHECK(dladdr((void *)&strlen, &info) != 0);
    CHECK_CU(cuModuleLoad(&m, info.dli_fname), CUDA_ERROR_INVALID_IMAGE);
    CHECK_CU(cuModuleLoad(NULL, mod_path), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuModuleGetFunction(&f, mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    CHECK_CU(cuModuleGetFunction(&f, (CUmodule)&f, "fill_u32"), CUDA_ERROR_INVALID_HANDLE);
}

TEST(module_load_data)
{
    CUmodule m;
    unsigned char *img = emu_test_read_file(mod_path, NULL);
    CHECK(img != NULL);
    if (!img) return;
    CHECK_CU(cuModuleLoadData(&m, img), CUDA_SUCCESS);
    CUfunction f = func(m, "fill_u32");
    uint32_t out[8] = { 0 }, v = 0x5a5a;
    uint64_t n = 8;
    void *p = out;
    void *args[] = { &p, &v, &n };
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(out[7], 0x5a5a);
    CHECK_CU(cuModuleUnload(m), CUDA_SUCCESS);
    CHECK_CU(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    /* CUDA images (fat binaries & co.): test_library.c */
    free(img);
}

TEST(param_info_layout)
{
    CUfunction f = func(mod, "mixed");
    size_t off = 99, size = 99;
    /* char, double, int, pointer, 12-byte struct */
    const size_t want_off[] = { 0, 8, 16, 24, 32 }, want_size[] = { 1, 8, 4, 8, 12 };
    for (size_t i = 0; i < 5; i++) {
        CHECK_CU(cuFuncGetParamInfo(f, i, &off, &size), CUDA_SUCCESS);
        CHECK_EQ(off, want_off[i]);
        CHECK_EQ(size, want_size[i]);
    }
    CHECK_CU(cuFuncGetParamInfo(f, 5, &off, &size), CUDA_ERROR_INVALID_VALUE);
    const char *name = NULL;
    CHECK_CU(cuFuncGetName(&name, f), CUDA_SUCCESS);
    CHECK(name && strcmp(name, "mixed") == 0);
}

TEST(kernel_params_and_extra_agree)
{
    CUfunction f = func(mod, "mixed");
    char c = -7;
    double d = 2.5;
    int i = 123456;
    trio t = { 1, -2, 3 };
    double out1[6] = { 0 }, out2[6] = { 0 };
    void *p = out1;
    void *params[] = { &c, &d, &i, &p, &t };
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_SUCCESS);

    /* the same arguments packed by cuFuncGetParamInfo's layout */
    unsigned char buf[64];
    size_t size = 0, end = 0;
    memset(buf, 0, sizeof buf);
    void *p2 = out2;
    void *vals[] = { &c, &d, &i, &p2, &t };
    for (size_t k = 0; k < 5; k++) {
        size_t off, sz;
        CHECK_CU(cuFuncGetParamInfo(f, k, &off, &sz), CUDA_SUCCESS);
        memcpy(buf + off, vals[k], sz);
        end = off + sz;
    }
    size = end;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END };
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK(memcmp(out1, out2, sizeof out1) == 0);
    CHECK(out1[0] == -7 && out1[1] == 2.5 && out1[2] == 123456);
    CHECK(out1[3] == 1 && out1[4] == -2 && out1[5] == 3);

    size = end + 4;                                     /* not the ABI size */
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_INVALID_VALUE);
    size = end;
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
}

TEST(launch_validation)
{
    CUfunction f = func(mod, "dims");
    uint32_t out[7] = { 0 };
    void *p = out;
    void *params[] = { &p };
    CHECK_CU(cuLaunchKernel(f, 3, 2, 1, 32, 4, 2, 256, NULL, params, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(out[0], 3);
    CHECK_EQ(out[1], 2);
    CHECK_EQ(out[3], 32);
    CHECK_EQ(out[5], 2);
    CHECK_EQ(out[6], 256);
    CHECK_CU(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 0, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 32, 32, 2, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuLaunchKernel((CUfunction)out, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_HANDLE);
    CHECK_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)out, params, NULL), CUDA_ERROR_INVALID_HANDLE);
}

/* Arguments are copied at launch: changing them afterwards changes nothing. */
TEST(arguments_copied_at_launch)
{
    CUstream s;
    CUfunction slow = func(mod, "sleep_fill_u32"), fill = func(mod, "fill_u32");
    uint32_t a[4] = { 0 }, b[4] = { 0 }, v = 1, us = 100000;
    uint64_t n = 4;
    void *pa = a, *pb = b;
    void *sargs[] = { &pa, &v, &n, &us };
    void *fargs[] = { &pb, &v, &n };
    CHECK_CU(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CHECK_CU(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, s, sargs, NULL), CUDA_SUCCESS);
    v = 2;
    CHECK_CU(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fargs, NULL), CUDA_SUCCESS);
    v = 3;
    pb = a;
    CHECK_CU(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(a[3], 1);
    CHECK_EQ(b[3], 2);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

static void fault_in_kernel(void)
{
    CUstream s;
    CUfunction f = func(mod, "poke");
    void *bad = (void *)16;                             /* unmapped, not a device range */
    void *params[] = { &bad };
    cuCtxSetCurrent(ctx);
    cuStreamCreate(&s, 0);
    cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    cuStreamSynchronize(s);
}

TEST(fault_handler)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fault_in_kernel();
        _exit(0);
    }
    close(fds[1]);
    char err[2048];
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof err && (r = read(fds[0], err + len, sizeof err - 1 - len)) > 0) len += (size_t)r;
    err[len] = 0;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(strstr(err, "cudaemu: illegal address fault in kernel poke on stream 0x") != NULL);
    if (!strstr(err, "illegal address")) printf("#   child stderr: %s\n", err);
}

int main(void)
{
    RUN(setup);
    RUN(module_load_errors);
    RUN(module_load_data);
    RUN(param_info_layout);
    RUN(kernel_params_and_extra_agree);
    RUN(launch_validation);
    RUN(arguments_copied_at_launch);
    RUN(fault_handler);
    return check_done();
}
