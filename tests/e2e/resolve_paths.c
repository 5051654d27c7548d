/*
 * tests/e2e/resolve_paths.c: obtains every hooked entry point through one
 * path (argv[1]) and calls it once with zero arguments (invalid handles and
 * NULL pointers: the driver answers with an error). For each name it prints
 *   got <path> <asked> -> <ELF name the pointer is> <object> <same-as-direct>
 *   call <ELF name>
 * which test_resolve.sh compares with and without the library and with the
 * report's counts. Paths: direct, dlopen, default, next_lib, next_exe, gpa,
 * gpa_legacy, unhooked.
 *
 * Calling every entry through one 6-argument integer signature relies on the
 * x86-64 SysV convention (every parameter of these functions is an integer
 * or a pointer; extra arguments are ignored).
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void *next_lookup(const char *name);   /* libnext.so */

typedef CUresult (*any_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);

/* The hooked names and their cuGetProcAddress names, from the one list. */
#define SG_HOOK(name, base, ...) { #name, base, (void *)name },
#define SG_RESOLVER SG_HOOK
static const struct { const char *name, *base; void *direct; } hooks[] = {
#include "../../interpose/hooks.def"
};
#define NHOOKS (sizeof hooks / sizeof hooks[0])

static void report(const char *path, const char *asked, void *p, void *direct)
{
    Dl_info di;
    if (!p) {
        printf("got %s %s -> null\n", path, asked);
        return;
    }
    const char *obj = "?", *sym = "?";
    if (dladdr(p, &di)) {
        obj = strstr(di.dli_fname, "libstablegraph") ? "lib" : strstr(di.dli_fname, "libcuda") ? "driver" : "other";
        if (di.dli_sname && di.dli_saddr == p) sym = di.dli_sname;
    }
    printf("got %s %s -> %s %s %s\n", path, asked, sym, obj, p == direct ? "same" : "differs");
    if (strcmp(obj, "other") != 0) {
        ((any_fn)p)(0, 0, 0, 0, 0, 0);
        printf("call %s\n", sym);
    }
}

/* cuGetProcAddress requests: the versions the CUDA 13 runtime asks for, and
 * every hooked name at 13000, each with flags 0 and 2 (per-thread stream). */
static const struct { const char *name; int version; } gpa_asks[] = {
    { "cuMemAlloc", 3020 }, { "cuGraphExecUpdate", 12000 }, { "cuGraphExecUpdate", 10020 },
    { "cuGraphLaunch", 10000 }, { "cuStreamBeginCapture", 10000 },
    { "cuStreamBeginCapture", 10010 }, { "cuGraphInstantiate", 10000 },
    { "cuGraphInstantiate", 11000 }, { "cuGraphInstantiateWithFlags", 11040 },
    { "cuGraphInstantiateWithParams", 12000 }, { "cuGraphExecKernelNodeSetParams", 10000 },
    { "cuGraphExecKernelNodeSetParams", 12000 },
};

static void gpa_one(int legacy, const char *name, int version, cuuint64_t flags)
{
    void *p = NULL;
    char asked[160];
    CUdriverProcAddressQueryResult st;
    CUresult rc = legacy ? cuGetProcAddress(name, &p, version, flags)
                         : cuGetProcAddress_v2(name, &p, version, flags, &st);
    snprintf(asked, sizeof asked, "%s@%d/%llu", name, version, (unsigned long long)flags);
    report(legacy ? "gpa_legacy" : "gpa", asked, rc == CUDA_SUCCESS ? p : NULL, NULL);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "direct";
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("# no libcuda.so.1: %s\n", dlerror()); return 1; }
    if (strcmp(path, "unhooked") == 0) {
        static const char *const names[] = { "cuDeviceGet", "cudnnCreate", "cuNoSuchFunction" };
        for (int i = 0; i < 3; i++) {
            void *direct = i == 0 ? (void *)cuDeviceGet : NULL;
            char asked[80];
            snprintf(asked, sizeof asked, "dlopen:%s", names[i]);
            report(path, asked, dlsym(h, names[i]), direct);
            snprintf(asked, sizeof asked, "default:%s", names[i]);
            report(path, asked, dlsym(RTLD_DEFAULT, names[i]), direct);
            snprintf(asked, sizeof asked, "next_lib:%s", names[i]);
            report(path, asked, next_lookup(names[i]), direct);
            void *p = NULL;
            CUdriverProcAddressQueryResult st;
            snprintf(asked, sizeof asked, "gpa:%s", names[i]);
            CUresult rc = cuGetProcAddress_v2(names[i], &p, 13000, 0, &st);
            report(path, asked, rc == CUDA_SUCCESS ? p : NULL, direct);
        }
        return 0;
    }
    if (strncmp(path, "gpa", 3) == 0) {
        int legacy = strcmp(path, "gpa_legacy") == 0;
        for (size_t i = 0; i < sizeof gpa_asks / sizeof gpa_asks[0]; i++)
            for (cuuint64_t f = 0; f <= 2; f += 2) gpa_one(legacy, gpa_asks[i].name, gpa_asks[i].version, f);
        for (size_t i = 0; i < NHOOKS; i++)
            if (i == 0 || strcmp(hooks[i].base, hooks[i - 1].base) != 0)
                for (cuuint64_t f = 0; f <= 2; f += 2) gpa_one(legacy, hooks[i].base, 13000, f);
        return 0;
    }
    for (size_t i = 0; i < NHOOKS; i++) {
        void *p;
        if (strcmp(path, "direct") == 0) p = hooks[i].direct;
        else if (strcmp(path, "dlopen") == 0) p = dlsym(h, hooks[i].name);
        else if (strcmp(path, "default") == 0) p = dlsym(RTLD_DEFAULT, hooks[i].name);
        else if (strcmp(path, "next_lib") == 0) p = next_lookup(hooks[i].name);
        else if (strcmp(path, "next_exe") == 0) p = dlsym(RTLD_NEXT, hooks[i].name);
        else { printf("# unknown path %s\n", path); return 2; }
        report(path, hooks[i].name, p, hooks[i].direct);
    }
    return 0;
}
