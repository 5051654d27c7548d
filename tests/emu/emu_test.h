/*
 * emu_test.h: the set-up every emulator test starts with: the driver
 * initialised, device 0's primary context current, and one of the test
 * modules (built next to the test program) loaded; and the count of the
 * violations the emulator reports while a piece of a test runs.
 */
#ifndef EMU_TEST_H
#define EMU_TEST_H

#include <cuda.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes "<directory of this program>/<name>" into out (n bytes); 0, or -1
 * if the program's path cannot be read or does not fit. */
static inline int emu_test_module_path(const char *name, char *out, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = 0;
    int w = snprintf(out, n, "%s/%s", dirname(exe), name);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* The whole file at path (a module's image for cuModuleLoadData and the
 * like), malloc'd, its size in *len if len; NULL if it cannot be read. */
static inline void *emu_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *p = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)n)) &&
        fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p && len) *len = (size_t)n;
    return p;
}

/* cuInit, device 0's primary context made current (*ctx), then the module
 * `name` next to this program loaded (*mod). Returns the first failing
 * result (CUDA_ERROR_FILE_NOT_FOUND if the path cannot be made). */
static inline CUresult emu_test_open(const char *name, CUcontext *ctx, CUmodule *mod)
{
    CUdevice dev;
    char path[PATH_MAX + 64];
    CUresult r;
    if ((r = cuInit(0)) != CUDA_SUCCESS || (r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS ||
        (r = cuDevicePrimaryCtxRetain(ctx, dev)) != CUDA_SUCCESS ||
        (r = cuCtxSetCurrent(*ctx)) != CUDA_SUCCESS)
        return r;
    if (emu_test_module_path(name, path, sizeof path)) return CUDA_ERROR_FILE_NOT_FOUND;
    return cuModuleLoad(mod, path);
}

/* Violation counting: emu_test_stderr_begin() sends fd 2 (where the emulator
 * reports) to a temporary file; emu_test_violations() restores it, echoes
 * what was written as TAP comments and returns the number of
 * "cudaemu: VIOLATION:" lines (-1 if the file could not be made). One at a
 * time, from one thread. */
static int emu_test_saved_stderr = -1;
static char emu_test_err_path[64];

static inline void emu_test_stderr_begin(void)
{
    fflush(stderr);
    snprintf(emu_test_err_path, sizeof emu_test_err_path, "/tmp/emu_test.%d.XXXXXX", (int)getpid());
    int fd = mkstemp(emu_test_err_path);
    if (fd < 0) { emu_test_err_path[0] = 0; return; }
    emu_test_saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
}

static inline int emu_test_violations(void)
{
    if (!emu_test_err_path[0]) return -1;
    fflush(stderr);
    dup2(emu_test_saved_stderr, 2);
    close(emu_test_saved_stderr);
    FILE *f = fopen(emu_test_err_path, "r");
    int n = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "cudaemu: VIOLATION:")) n++;
        printf("#   stderr: %s", line);
    }
    if (f) fclose(f);
    unlink(emu_test_err_path);
    return n;
}

#endif /* EMU_TEST_H */
