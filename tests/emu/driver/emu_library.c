/*
 * emu_library.c: CUDA images and where their kernels come from, libraries
 * and kernels (cuLibrary*, cuKernel*), function attributes, occupancy and the
 * module loading mode of the emulated CUDA driver.
 *
 * CUDA images. A fat binary (its __fatBinC_Wrapper_t, magic 0x466243b1, from
 * the toolkit's fatbinary_section.h, or its data, magic 0xba55ed50 [ZLUDA
 * zluda/src/impl/export_table.rs]), a cubin (an ELF object for EM_CUDA) or PTX
 * text holds code the emulation cannot run. Such an image loads (as a module,
 * cuModuleLoad / LoadData / LoadDataEx / LoadFatBinary, or as a library,
 * cuLibraryLoadData / LoadFromFile), and each kernel asked of it by name is
 * looked up by that exact name, usually a mangled one such as _Z3addPffi,
 * in the emulated modules listed in CUDAEMU_MODULES: colon-separated paths
 * of shared objects exporting emu_module[] (emu_kernel.h, the cuModuleLoad
 * ABI); the first module listed that has the name provides it. Every name is
 * accepted (the image's own list of kernels cannot be read); a kernel no
 * module provides fails its launch, and every other use of its code
 * (parameter info, attributes), with CUDA_ERROR_NO_BINARY_FOR_GPU and a
 * message naming it (once per name). The modules are loaded at the first
 * CUDA image; if one cannot be loaded or its table is invalid, a message
 * naming CUDAEMU_MODULES and the path is logged and every load of a CUDA
 * image fails with CUDA_ERROR_SHARED_OBJECT_INIT_FAILED (the driver does not
 * exit from within a call the CUDA runtime makes under its own locks). An emulated module's own ELF image loads as a library too: its
 * kernels are its table's, and other names are CUDA_ERROR_NOT_FOUND.
 *
 * Libraries are context-independent: a library has one module per context
 * it is used in and a kernel one function per context, made at first use
 * (cuLibraryGetModule, cuKernelGetFunction, a launch of the CUkernel), in
 * eager and lazy loading mode alike; the loading mode (CUDA_MODULE_LOADING,
 * default LAZY) is only reported. A CUkernel is accepted wherever CUDA
 * launches one in place of a CUfunction (cuLaunchKernel, graph kernel nodes)
 * and runs as its function in the stream's (else the current) context.
 * cuModuleUnload of a library's module is CUDA_ERROR_INVALID_HANDLE (the
 * library owns it); a module made from a CUDA image owns a hidden library.
 *
 * Function attributes: an emulated kernel has no registers, local or
 * constant memory; it reports 32 registers (so occupancy figures are those of
 * a small kernel), no static shared memory, PTX and binary version 90 (the
 * device's 9.0), 1024 threads per block, 48 KiB of dynamic shared memory by
 * default. The attributes cuFuncSetAttribute documents as settable are
 * stored per function (cuKernelSetAttribute: per kernel and device, and on
 * the kernel's existing functions in contexts of that device); a launch with
 * more dynamic shared memory than the function allows is
 * CUDA_ERROR_INVALID_VALUE, as on a GPU. Cache configuration is a preference
 * with no effect here: it is validated and accepted.
 *
 * Occupancy (cuOccupancy*, a CUkernel in the current context allowed): blocks
 * resident per SM are limited by warps (64 per SM), blocks (32), registers
 * (64 K per SM, allocated per warp in units of 256) and shared memory
 * (228 KiB per SM, 1 KiB reserved per block), the emulated device's figures;
 * a block with too many threads or too much dynamic shared memory for the
 * function gives 0. The suggested block size keeps the most threads
 * resident (the largest size on a tie), the grid fills every SM.
 *
 * Locks: lib_lock guards every library's kernel table and per-context
 * modules, and every kernel's per-context functions and per-device
 * attributes; it is never held while calling into streams. The provided-
 * kernel table (CUDAEMU_MODULES) is built once under pthread_once and
 * read-only afterwards; missing_lock guards the set of names already logged.
 * Function attributes are read and written with atomic accesses.
 */
#include "emu_internal.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uthash.h>

#define LIB_MAX_DEVICES 8              /* emu_core.c: CUDAEMU_DEVICES <= 8 */
#define EMU_FATBINC_MAGIC 0x466243b1u  /* __fatBinC_Wrapper_t, fatbinary_section.h */
#define EMU_FATBIN_MAGIC 0xba55ed50u   /* fat binary data header [ZLUDA] */

static void *lib_alloc(size_t size)
{
    void *p = calloc(1, size);
    if (!p) {
        emu_log("out of host memory");
        abort();
    }
    return p;
}

/* ------------------------------------------------------------------ CUDA images */

int emu_image_is_cuda(const void *image)
{
    uint32_t magic;
    memcpy(&magic, image, sizeof magic);
    if (magic == EMU_FATBINC_MAGIC || magic == EMU_FATBIN_MAGIC) return 1;
    const Elf64_Ehdr *eh = image;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0) return eh->e_machine == EM_CUDA;
    const char *t = image;
    while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') t++;
    return strncmp(t, "//", 2) == 0 || strncmp(t, ".version", 8) == 0;
}

int emu_file_is_cuda_image(const char *path)
{
    char head[sizeof(Elf64_Ehdr) + 1] = { 0 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, head, sizeof head - 1);
    close(fd);
    return n >= 4 && emu_image_is_cuda(head);
}

/* ------------------------------------------------------------------ CUDAEMU_MODULES */

typedef struct emu_provided { const emu_kernel *k; UT_hash_handle hh; } emu_provided;
static emu_provided *provided;          /* by name; written once under modules_once */
static int modules_failed;              /* likewise */
static pthread_once_t modules_once = PTHREAD_ONCE_INIT;

/* Returns from within a driver call: the caller fails that call (exiting
 * here would run the program's exit handlers inside the CUDA runtime's
 * own locks). */
static void modules_bad(const char *path, const char *why)
{
    emu_log("bad value for CUDAEMU_MODULES: '%s': %s (expected colon-separated paths of emulated modules, "
            "see emu_kernel.h): no CUDA image can be loaded (CUDA_ERROR_SHARED_OBJECT_INIT_FAILED)", path, why);
    modules_failed = 1;
}

static void modules_load(void)
{
    const char *list = emu_cfg.modules;
    for (const char *p = list; p && *p && !modules_failed;) {
        size_t len = strcspn(p, ":");
        char path[4096];
        if (len >= sizeof path) {
            modules_bad(p, "path too long");
            break;
        }
        memcpy(path, p, len);
        path[len] = 0;
        p += len + (p[len] == ':');
        if (!len) continue;
        void *dl = access(path, R_OK) == 0 ? emu_module_dlopen_path(path) : NULL;
        const emu_kernel *table = dl ? dlsym(dl, EMU_MODULE_SYMBOL) : NULL;
        int n = table ? emu_kernel_table_count(table) : -1;
        if (n < 0) {
            modules_bad(path, access(path, R_OK) != 0 ? "cannot read it" : !dl ? dlerror() : "no valid emu_module[] table");
            break;
        }
        for (int i = 0; i < n; i++) {
            emu_provided *e;
            HASH_FIND_STR(provided, table[i].name, e);
            if (e) continue;                    /* the first module listed wins */
            e = lib_alloc(sizeof *e);
            e->k = &table[i];
            HASH_ADD_KEYPTR(hh, provided, e->k->name, strlen(e->k->name), e);
        }
    }
}

static const emu_kernel *provided_kernel(const char *name)
{
    pthread_once(&modules_once, modules_load);
    emu_provided *e;
    HASH_FIND_STR(provided, name, e);
    return e ? e->k : NULL;
}

typedef struct emu_logged { UT_hash_handle hh; char name[]; } emu_logged;
static emu_logged *missing_logged;      /* guarded by missing_lock */
static pthread_mutex_t missing_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult emu_kernel_missing(const char *name, const char *call)
{
    pthread_mutex_lock(&missing_lock);
    emu_logged *e;
    HASH_FIND_STR(missing_logged, name, e);
    if (!e && (e = calloc(1, sizeof *e + strlen(name) + 1))) {
        strcpy(e->name, name);
        HASH_ADD_STR(missing_logged, name, e);
        emu_log("%s: kernel '%s' is not provided by any module in CUDAEMU_MODULES (%s): "
                "CUDA_ERROR_NO_BINARY_FOR_GPU", call, name, emu_cfg.modules ? emu_cfg.modules : "unset");
    }
    pthread_mutex_unlock(&missing_lock);
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
}

/* ------------------------------------------------------------------ libraries and kernels */

/* One object per context: a library's modules, a kernel's functions. */
typedef struct emu_per_ctx { CUcontext ctx; void *obj; struct emu_per_ctx *next; } emu_per_ctx;

static void *per_ctx_find(const emu_per_ctx *list, CUcontext ctx)
{
    for (; list; list = list->next)
        if (list->ctx == ctx) return list->obj;
    return NULL;
}

static void per_ctx_add(emu_per_ctx **list, CUcontext ctx, void *obj)
{
    emu_per_ctx *e = lib_alloc(sizeof *e);
    e->ctx = ctx;
    e->obj = obj;
    e->next = *list;
    *list = e;
}

/* Moves the entry of ctx (if any) from *from to *to; returns its object. */
static void *per_ctx_move(emu_per_ctx **from, CUcontext ctx, emu_per_ctx **to)
{
    for (emu_per_ctx **p = from; *p; p = &(*p)->next) {
        if ((*p)->ctx != ctx) continue;
        emu_per_ctx *e = *p;
        *p = e->next;
        e->next = *to;
        *to = e;
        return e->obj;
    }
    return NULL;
}

/* Gives a per-context list's objects back to the handle pool of `kind`
 * (their handles already gone) and frees the list. */
static void per_ctx_free(emu_per_ctx *list, emu_kind kind)
{
    for (emu_per_ctx *n; list; list = n) {
        n = list->next;
        if (kind == EMU_K_FUNC) emu_func_unload(list->obj);
        emu_handle_mem_put(kind, list->obj);
        free(list);
    }
}

struct CUkern_st {
    struct CUlib_st *lib;
    const emu_kernel *k;                /* the implementation, or &missing */
    emu_kernel missing;                 /* name only: no module provides it */
    size_t off[32], abi_size;           /* argument layout of k */
    int attr[LIB_MAX_DEVICES][CU_FUNC_ATTRIBUTE_MAX];
    emu_per_ctx *funcs;                 /* struct CUfunc_st */
    UT_hash_handle hh;                  /* lib->kernels, by k->name */
};

struct CUlib_st {
    int cuda;                           /* a CUDA image: kernels from CUDAEMU_MODULES */
    int hidden;                         /* made for one module: no CUlibrary handle */
    void *dl;                           /* an emulated module: its object and table */
    const emu_kernel *table;
    unsigned ntable;
    struct CUkern_st *kernels;
    emu_per_ctx *mods;                  /* struct CUmod_st */
    size_t charge;                      /* device memory the load took (CUDAEMU_MODULE_BYTES) */
    int charge_dev;                     /* of this device */
};

static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;

/* A library of an emulated module's object (closed on failure). */
static CUresult lib_from_dl(void *dl, struct CUlib_st **out)
{
    const emu_kernel *table = dlsym(dl, EMU_MODULE_SYMBOL);
    int n = table ? emu_kernel_table_count(table) : -1;
    if (n < 0) {
        dlclose(dl);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    struct CUlib_st *lib = emu_handle_mem_get(EMU_K_LIBRARY, sizeof *lib);
    lib->dl = dl;
    lib->table = table;
    lib->ntable = (unsigned)n;
    *out = lib;
    return CUDA_SUCCESS;
}

/* A library for a CUDA image; NULL if CUDAEMU_MODULES could not be loaded. */
static struct CUlib_st *lib_cuda(int hidden)
{
    pthread_once(&modules_once, modules_load);
    if (modules_failed) return NULL;
    struct CUlib_st *lib = emu_handle_mem_get(EMU_K_LIBRARY, sizeof *lib);
    lib->cuda = 1;
    lib->hidden = hidden;
    return lib;
}

/* The library's module in ctx, made if needed. lib_lock held. */
static CUmodule lib_module_locked(struct CUlib_st *lib, CUcontext ctx)
{
    CUmodule m = per_ctx_find(lib->mods, ctx);
    if (m) return m;
    m = emu_module_new(ctx);
    m->lib = lib;
    per_ctx_add(&lib->mods, ctx, m);
    emu_handle_add_ctx(m, EMU_K_MODULE, ctx);
    return m;
}

/* The kernel `name` of lib, made if needed; NULL if an emulated module's
 * library has no such kernel. lib_lock held. */
static struct CUkern_st *lib_kernel_locked(struct CUlib_st *lib, const char *name)
{
    struct CUkern_st *kern;
    HASH_FIND_STR(lib->kernels, name, kern);
    if (kern) return kern;
    const emu_kernel *k = NULL;
    if (lib->cuda) {
        k = provided_kernel(name);
    } else {
        for (unsigned i = 0; i < lib->ntable && !k; i++)
            if (strcmp(lib->table[i].name, name) == 0) k = &lib->table[i];
        if (!k) return NULL;
    }
    kern = emu_handle_mem_get(EMU_K_KERNEL, sizeof *kern);
    kern->lib = lib;
    if (!k) {
        kern->missing.name = strdup(name);
        if (!kern->missing.name) abort();
        k = &kern->missing;
    }
    kern->k = k;
    emu_kernel_layout(k, kern->off, &kern->abi_size);
    for (int d = 0; d < LIB_MAX_DEVICES; d++) emu_func_attr_init(kern->attr[d], k, d);
    HASH_ADD_KEYPTR(hh, lib->kernels, k->name, strlen(k->name), kern);
    emu_handle_add(kern, EMU_K_KERNEL);
    return kern;
}

/* The kernel's function in ctx, made if needed. lib_lock held. */
static CUfunction kern_function_locked(struct CUkern_st *kern, CUcontext ctx)
{
    CUfunction f = per_ctx_find(kern->funcs, ctx);
    if (f) return f;
    f = emu_func_new(kern->k, lib_module_locked(kern->lib, ctx));
    memcpy(f->attr, kern->attr[ctx->device], sizeof f->attr);
    per_ctx_add(&kern->funcs, ctx, f);
    return f;
}

/* Frees a library whose handle (if any) is already gone: its kernels'
 * handles are deleted; its modules' and functions' handles are deleted, or
 * ended when a context teardown frees the library (a hidden one). */
static void lib_free(struct CUlib_st *lib, int teardown)
{
    void (*end)(const void *) = teardown ? emu_handle_end : emu_handle_del;
    pthread_mutex_lock(&lib_lock);
    struct CUkern_st *kern, *tmp;
    HASH_ITER(hh, lib->kernels, kern, tmp) {
        emu_handle_del(kern);
        for (emu_per_ctx *f = kern->funcs; f; f = f->next) end(f->obj);
    }
    for (emu_per_ctx *m = lib->mods; m; m = m->next) end(m->obj);
    pthread_mutex_unlock(&lib_lock);
    emu_streams_sync_all(NULL);         /* no kernel of the library still runs */
    HASH_ITER(hh, lib->kernels, kern, tmp) {
        HASH_DEL(lib->kernels, kern);
        per_ctx_free(kern->funcs, EMU_K_FUNC);
        free((char *)kern->missing.name);
        emu_handle_mem_put(EMU_K_KERNEL, kern);
    }
    per_ctx_free(lib->mods, EMU_K_MODULE);
    if (lib->dl) dlclose(lib->dl);
    emu_handle_mem_put(EMU_K_LIBRARY, lib);
}

void emu_lib_module_ctx_destroyed(CUmodule m)
{
    struct CUlib_st *lib = m->lib;
    if (lib->hidden) {
        lib_free(lib, 1);
        return;
    }
    emu_per_ctx *gone_funcs = NULL, *gone_mod = NULL;
    pthread_mutex_lock(&lib_lock);
    emu_handle_end(m);
    per_ctx_move(&lib->mods, m->ctx, &gone_mod);
    struct CUkern_st *kern, *tmp;
    HASH_ITER(hh, lib->kernels, kern, tmp) {
        CUfunction f = per_ctx_move(&kern->funcs, m->ctx, &gone_funcs);
        if (f) emu_handle_end(f);
    }
    pthread_mutex_unlock(&lib_lock);
    emu_streams_sync_all(NULL);         /* no kernel of the module still runs */
    per_ctx_free(gone_funcs, EMU_K_FUNC);
    per_ctx_free(gone_mod, EMU_K_MODULE);
}

CUresult emu_lib_module_load(CUcontext ctx, CUmodule *out)
{
    struct CUlib_st *lib = lib_cuda(1);
    if (!lib) return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    pthread_mutex_lock(&lib_lock);
    *out = lib_module_locked(lib, ctx);
    pthread_mutex_unlock(&lib_lock);
    return CUDA_SUCCESS;
}

CUresult emu_lib_module_unload(CUmodule m)
{
    if (!m->lib->hidden) return CUDA_ERROR_INVALID_HANDLE;
    lib_free(m->lib, 0);
    return CUDA_SUCCESS;
}

CUresult emu_lib_function(struct CUlib_st *lib, CUcontext ctx, const char *name, CUfunction *out)
{
    pthread_mutex_lock(&lib_lock);
    struct CUkern_st *kern = lib_kernel_locked(lib, name);
    CUfunction f = kern ? kern_function_locked(kern, ctx) : NULL;
    pthread_mutex_unlock(&lib_lock);
    if (!f) return CUDA_ERROR_NOT_FOUND;
    if (!emu_func_load(f)) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = f;
    return CUDA_SUCCESS;
}

CUresult emu_func_resolve(CUfunction f, CUcontext ctx, CUfunction *out)
{
    if (f && emu_handle_ok(f, EMU_K_FUNC)) {
        *out = f;
        return CUDA_SUCCESS;
    }
    if (!f || !emu_handle_ok(f, EMU_K_KERNEL)) return CUDA_ERROR_INVALID_HANDLE;
    if (!ctx) {
        CUresult r = emu_ctx_require(&ctx);
        if (r != CUDA_SUCCESS) return r;
    }
    pthread_mutex_lock(&lib_lock);
    CUfunction kf = kern_function_locked((struct CUkern_st *)(void *)f, ctx);
    pthread_mutex_unlock(&lib_lock);
    if (!emu_func_load(kf)) return CUDA_ERROR_OUT_OF_MEMORY;   /* lazy loading, emu_module.c */
    *out = kf;
    return CUDA_SUCCESS;
}

static int lib_ok(CUlibrary lib) { return lib && emu_handle_ok(lib, EMU_K_LIBRARY); }
static int kern_ok(CUkernel k) { return k && emu_handle_ok(k, EMU_K_KERNEL); }

/* Checks the option arrays of cuLibraryLoad*: JIT options have nothing to
 * act on (there is no JIT), library options are accepted as hints. */
static CUresult lib_options(unsigned njit, CUjit_option *jit, void **jitv, unsigned nlib, CUlibraryOption *opts,
                            void **optv)
{
    if ((njit && (!jit || !jitv)) || (nlib && (!opts || !optv))) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < nlib; i++)
        if ((unsigned)opts[i] >= CU_LIBRARY_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* cuLibraryLoadData (path NULL) and cuLibraryLoadFromFile (image NULL). */
static CUresult lib_load(CUlibrary *library, const void *image, const char *path, unsigned njit, CUjit_option *jit,
                         void **jitv, unsigned nlib, CUlibraryOption *opts, void **optv)
{
    if (!library || (!image && !path)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = lib_options(njit, jit, jitv, nlib, opts, optv);
    if (r != CUDA_SUCCESS) return r;
    if (path && access(path, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    /* the load takes CUDAEMU_MODULE_BYTES of the current context's device
     * (device 0 with none: a library belongs to no context) until unloaded;
     * beyond what is left, OUT_OF_MEMORY and nothing loaded */
    CUcontext cur = emu_ctx_current();
    int dev = cur && emu_ctx_live(cur) ? cur->device : 0;
    if (!emu_charge_take(dev, emu_cfg.module_bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    struct CUlib_st *lib = NULL;
    if (path ? emu_file_is_cuda_image(path) : emu_image_is_cuda(image)) {
        lib = lib_cuda(0);
        r = lib ? CUDA_SUCCESS : CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    } else {
        void *dl = path ? emu_module_dlopen_path(path) : emu_module_dlopen_image(image, &r);
        r = dl ? lib_from_dl(dl, &lib) : path ? CUDA_ERROR_INVALID_IMAGE : r;
    }
    if (r != CUDA_SUCCESS) {
        emu_charge_give(dev, emu_cfg.module_bytes);
        return r;
    }
    lib->charge = emu_cfg.module_bytes;
    lib->charge_dev = dev;
    emu_handle_add(lib, EMU_K_LIBRARY);
    *library = lib;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                      void **jitOptionsValues, unsigned int numJitOptions,
                                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                      unsigned int numLibraryOptions)
{
    EMU_ENTRY_INIT();
    if (!code) return CUDA_ERROR_INVALID_VALUE;
    return lib_load(library, code, NULL, numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions,
                    libraryOptions, libraryOptionValues);
}

EMU_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                          void **jitOptionsValues, unsigned int numJitOptions,
                                          CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                          unsigned int numLibraryOptions)
{
    EMU_ENTRY_INIT();
    if (!fileName) return CUDA_ERROR_INVALID_VALUE;
    return lib_load(library, NULL, fileName, numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions,
                    libraryOptions, libraryOptionValues);
}

EMU_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    EMU_ENTRY_INIT();
    if (!lib_ok(library)) return CUDA_ERROR_INVALID_HANDLE;
    emu_handle_del(library);
    int dev = library->charge_dev;
    size_t charge = library->charge;
    lib_free(library, 0);
    emu_charge_give(dev, charge);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    EMU_ENTRY_INIT();
    if (!pKernel || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!lib_ok(library)) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lib_lock);
    struct CUkern_st *kern = lib_kernel_locked(library, name);
    pthread_mutex_unlock(&lib_lock);
    if (!kern) return CUDA_ERROR_NOT_FOUND;
    *pKernel = kern;
    return CUDA_SUCCESS;
}

/* A CUDA image's kernels cannot be listed: they are what it is asked for. */
static CUresult lib_table(CUlibrary lib, const char *call)
{
    if (!lib_ok(lib)) return CUDA_ERROR_INVALID_HANDLE;
    if (!lib->cuda) return CUDA_SUCCESS;
    emu_log("%s: the kernels of a CUDA image cannot be listed by the emulation: CUDA_ERROR_NOT_SUPPORTED", call);
    return CUDA_ERROR_NOT_SUPPORTED;
}

EMU_EXPORT CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    EMU_ENTRY_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = lib_table(lib, __func__);
    if (r == CUDA_SUCCESS) *count = lib->ntable;
    return r;
}

EMU_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    EMU_ENTRY_INIT();
    if (!kernels) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = lib_table(lib, __func__);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lib_lock);
    for (unsigned i = 0; i < numKernels && i < lib->ntable; i++)
        kernels[i] = lib_kernel_locked(lib, lib->table[i].name);
    pthread_mutex_unlock(&lib_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    EMU_ENTRY_INIT();
    if (!pMod) return CUDA_ERROR_INVALID_VALUE;
    if (!lib_ok(library)) return CUDA_ERROR_INVALID_HANDLE;
    CUcontext ctx;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lib_lock);
    *pMod = lib_module_locked(library, ctx);
    pthread_mutex_unlock(&lib_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    EMU_ENTRY_INIT();
    if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
    if (!kern_ok(kernel)) return CUDA_ERROR_INVALID_HANDLE;
    return emu_func_resolve((CUfunction)(void *)kernel, NULL, pFunc);
}

EMU_EXPORT CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    EMU_ENTRY_INIT();
    if (!pLib) return CUDA_ERROR_INVALID_VALUE;
    if (!kern_ok(kernel)) return CUDA_ERROR_INVALID_HANDLE;
    *pLib = kernel->lib;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    EMU_ENTRY_INIT();
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!kern_ok(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    *name = hfunc->k->name;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                         size_t *paramSize)
{
    EMU_ENTRY_INIT();
    if (!kern_ok(kernel)) return CUDA_ERROR_INVALID_HANDLE;
    return emu_param_info(kernel->k, kernel->off, paramIndex, paramOffset, paramSize, __func__);
}

/* CUDA_MODULE_LOADING=EAGER or LAZY (the default since CUDA 12.2), as
 * read when the driver started. */
EMU_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    EMU_ENTRY_INIT();
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    *mode = emu_cfg.eager ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ function attributes */

void emu_func_attr_init(int attr[CU_FUNC_ATTRIBUTE_MAX], const emu_kernel *k, int dev)
{
    (void)k;
    memset(attr, 0, sizeof(int) * CU_FUNC_ATTRIBUTE_MAX);
    attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev);
    attr[CU_FUNC_ATTRIBUTE_NUM_REGS] = 32;
    attr[CU_FUNC_ATTRIBUTE_PTX_VERSION] = 90;
    attr[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90;
    attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] =
        emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev);
    attr[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
}

int emu_func_attr(CUfunction f, CUfunction_attribute a)
{
    return __atomic_load_n(&f->attr[a], __ATOMIC_RELAXED);
}

/* Whether `value` may be set for attribute a on device dev (cuFuncSetAttribute's
 * documented settable attributes and ranges). */
static CUresult attr_settable(CUfunction_attribute a, int value, const int *attr, int dev)
{
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        return value >= 0 && value <= emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) -
                                           attr[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES]
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        return value >= -1 && value <= 100 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
        return value >= 0 && value <= 16 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        return value == 0 || value == 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        return value >= CU_CLUSTER_SCHEDULING_POLICY_DEFAULT && value <= CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING
                   ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static int func_ok(CUfunction f) { return f && emu_handle_ok(f, EMU_K_FUNC); }

EMU_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    EMU_ENTRY_INIT();
    if (!pi || (unsigned)attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (!func_ok(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    if (!hfunc->k->fn) return emu_kernel_missing(hfunc->k->name, __func__);
    *pi = emu_func_attr(hfunc, attrib);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    EMU_ENTRY_INIT();
    if ((unsigned)attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (!func_ok(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    if (!hfunc->k->fn) return emu_kernel_missing(hfunc->k->name, __func__);
    CUresult r = attr_settable(attrib, value, hfunc->attr, hfunc->mod->ctx->device);
    if (r == CUDA_SUCCESS) __atomic_store_n(&hfunc->attr[attrib], value, __ATOMIC_RELAXED);
    return r;
}

static CUresult cache_config_ok(CUfunc_cache config)
{
    return (unsigned)config <= CU_FUNC_CACHE_PREFER_EQUAL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EMU_EXPORT CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    EMU_ENTRY_INIT();
    if (!func_ok(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    return cache_config_ok(config);
}

EMU_EXPORT CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    EMU_ENTRY_INIT();
    if (!hmod) return CUDA_ERROR_INVALID_VALUE;
    if (!func_ok(hfunc)) return CUDA_ERROR_INVALID_HANDLE;
    *hmod = hfunc->mod;
    return CUDA_SUCCESS;
}

/* A function handle is given out once loaded (emu_func_load), so these see
 * loaded functions only. */
EMU_EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    EMU_ENTRY_INIT();
    if (!state) return CUDA_ERROR_INVALID_VALUE;
    if (!func_ok(function)) return CUDA_ERROR_INVALID_HANDLE;
    *state = __atomic_load_n(&function->loaded, __ATOMIC_ACQUIRE) ? CU_FUNCTION_LOADING_STATE_LOADED
                                                                   : CU_FUNCTION_LOADING_STATE_UNLOADED;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuFuncLoad(CUfunction function)
{
    EMU_ENTRY_INIT();
    if (!func_ok(function)) return CUDA_ERROR_INVALID_HANDLE;
    return emu_func_load(function) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult kern_dev_check(CUkernel kernel, CUdevice dev)
{
    if (!kern_ok(kernel)) return CUDA_ERROR_INVALID_HANDLE;
    if (dev < 0 || dev >= emu_device_count()) return CUDA_ERROR_INVALID_DEVICE;
    return kernel->k->fn ? CUDA_SUCCESS : CUDA_ERROR_NO_BINARY_FOR_GPU;
}

EMU_EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    EMU_ENTRY_INIT();
    if (!pi || (unsigned)attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = kern_dev_check(kernel, dev);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) return emu_kernel_missing(kernel->k->name, __func__);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lib_lock);
    *pi = kernel->attr[dev][attrib];
    pthread_mutex_unlock(&lib_lock);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    EMU_ENTRY_INIT();
    if ((unsigned)attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = kern_dev_check(kernel, dev);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) return emu_kernel_missing(kernel->k->name, __func__);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lib_lock);
    r = attr_settable(attrib, val, kernel->attr[dev], dev);
    if (r == CUDA_SUCCESS) {
        kernel->attr[dev][attrib] = val;
        for (emu_per_ctx *f = kernel->funcs; f; f = f->next)
            if (f->ctx->device == dev) __atomic_store_n(&((CUfunction)f->obj)->attr[attrib], val, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&lib_lock);
    return r;
}

EMU_EXPORT CUresult cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    EMU_ENTRY_INIT();
    CUresult r = kern_dev_check(kernel, dev);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) r = CUDA_SUCCESS;   /* a preference, no code needed */
    return r != CUDA_SUCCESS ? r : cache_config_ok(config);
}

/* ------------------------------------------------------------------ occupancy */

/* Resident blocks of f per SM for `block` threads and `dyn` bytes of dynamic
 * shared memory, on the emulated device's limits (emu_core.c): warps (64 per
 * SM), blocks (32), registers (64 K per SM, allocated per warp in units of
 * 256) and shared memory (228 KiB per SM, 1 KiB reserved per block); 0 if a
 * block cannot run at all (too many threads, too much shared memory). */
static int occ_blocks(CUfunction f, int block, size_t dyn)
{
    int dev = f->mod->ctx ? f->mod->ctx->device : 0;
    if (block > emu_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK) ||
        dyn > (size_t)emu_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))
        return 0;
    int warp = emu_device_attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev);
    int warps = (block + warp - 1) / warp;
    int sm_warps = emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) / warp;
    int regs_per_warp = (emu_func_attr(f, CU_FUNC_ATTRIBUTE_NUM_REGS) * warp + 255) / 256 * 256;
    int n = emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, dev);
    int by_warps = sm_warps / warps;
    int by_regs = regs_per_warp ? emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, dev) /
                                  regs_per_warp / warps : n;
    size_t smem = (size_t)emu_func_attr(f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) + dyn +
                  (size_t)emu_device_attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev);
    size_t by_smem = (size_t)emu_device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev) / smem;
    if (by_warps < n) n = by_warps;
    if (by_regs < n) n = by_regs;
    if (by_smem < (size_t)n) n = (int)by_smem;
    return n;
}

/* f (a CUfunction, or a CUkernel in the current context) with code. */
static CUresult occ_func(CUfunction f, CUfunction *out, const char *call)
{
    CUresult r = emu_func_resolve(f, NULL, out);
    if (r == CUDA_SUCCESS && !(*out)->k->fn) r = emu_kernel_missing((*out)->k->name, call);
    return r;
}

static CUresult occ_active(int *numBlocks, CUfunction func, int blockSize, size_t dyn, unsigned flags,
                           const char *call)
{
    if (!numBlocks || blockSize <= 0 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = occ_func(func, &func, call);
    if (r == CUDA_SUCCESS) *numBlocks = occ_blocks(func, blockSize, dyn);
    return r;
}

EMU_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                                                size_t dynamicSMemSize)
{
    EMU_ENTRY_INIT();
    return occ_active(numBlocks, func, blockSize, dynamicSMemSize, 0, __func__);
}

EMU_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                         int blockSize, size_t dynamicSMemSize,
                                                                         unsigned int flags)
{
    EMU_ENTRY_INIT();
    return occ_active(numBlocks, func, blockSize, dynamicSMemSize, flags, __func__);
}

/* The block size (a multiple of the warp size, or the limit itself when it is
 * smaller) that keeps the most threads resident, the largest on a tie, and
 * the grid that fills every SM with it. */
static CUresult occ_potential(int *minGridSize, int *blockSize, CUfunction func, CUoccupancyB2DSize b2d, size_t dyn,
                              int limit, unsigned flags, const char *call)
{
    if (!minGridSize || !blockSize || limit < 0 || flags > CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = occ_func(func, &func, call);
    if (r != CUDA_SUCCESS) return r;
    int dev = func->mod->ctx ? func->mod->ctx->device : 0;
    int warp = emu_device_attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE, dev);
    int max = emu_func_attr(func, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    if (limit && limit < max) max = limit;
    int best = 0, best_block = 0, best_blocks = 0;
    for (int b = max; b > 0; b = (b - 1) / warp * warp) {
        int n = occ_blocks(func, b, b2d ? b2d(b) : dyn);
        if (n * b > best) {
            best = n * b;
            best_block = b;
            best_blocks = n;
        }
    }
    *blockSize = best_block;
    *minGridSize = best_blocks * emu_device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                     CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                     size_t dynamicSMemSize, int blockSizeLimit)
{
    EMU_ENTRY_INIT();
    return occ_potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit,
                         0, __func__);
}

EMU_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction func,
                                                              CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                              size_t dynamicSMemSize, int blockSizeLimit,
                                                              unsigned int flags)
{
    EMU_ENTRY_INIT();
    return occ_potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize, blockSizeLimit,
                         flags, __func__);
}

/* The most dynamic shared memory per block with which numBlocks blocks of
 * blockSize threads stay resident together (0 if they never do). */
EMU_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction func, int numBlocks,
                                                            int blockSize)
{
    EMU_ENTRY_INIT();
    if (!dynamicSmemSize || numBlocks <= 0 || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = occ_func(func, &func, __func__);
    if (r != CUDA_SUCCESS) return r;
    size_t lo = 0, hi = (size_t)emu_func_attr(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    if (occ_blocks(func, blockSize, 0) < numBlocks) {
        *dynamicSmemSize = 0;
        return CUDA_SUCCESS;
    }
    while (lo < hi) {                   /* the largest size that still fits numBlocks */
        size_t mid = lo + (hi - lo + 1) / 2;
        if (occ_blocks(func, blockSize, mid) >= numBlocks) lo = mid;
        else hi = mid - 1;
    }
    *dynamicSmemSize = lo;
    return CUDA_SUCCESS;
}
