/*
 * emu_module.c: modules and functions of the emulated CUDA driver (loading
 * emulated modules from a file or an ELF image, unloading, functions and
 * their argument layout, parameter info), kernel argument blocks
 * (emu_args_*) and kernel launches.
 *
 * Module handles (CUmod_st, CUfunc_st, emu_internal.h) are immutable once
 * published, but for a function's attributes (emu_library.c); the handle
 * registry (emu_core.c) says whether they are alive. Modules made from CUDA
 * images (fat binaries, cubins, PTX) belong to a library (emu_library.c),
 * which finds their functions. Modules and functions come from the handle
 * pools (emu_core.c), so freed handle values are reused last-freed first, as
 * a driver's are.
 *
 * Locks: none of its own. Module and function handles are immutable once
 * published (but for attributes, atomics); the handle registry and pools
 * (emu_core.c) have their own locks; unloading waits for every stream
 * (emu_streams_sync_all) before the code goes.
 */
#include "emu_stream.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Modules
 * ---------------------------------------------------------------------- */
static size_t abi_align(size_t size)
{
    size_t a = 1;
    while (a < size && a < 8) a <<= 1;
    return a;
}

int emu_kernel_table_count(const emu_kernel *table)
{
    int n = 0;
    for (; table[n].name; n++)
        if (!table[n].fn || table[n].num_params > 32) return -1;
    return n;
}

void emu_kernel_layout(const emu_kernel *k, size_t off[32], size_t *abi_size)
{
    size_t end = 0;
    for (unsigned j = 0; j < k->num_params; j++) {
        size_t a = abi_align(k->param_sizes[j]);
        off[j] = (end + a - 1) / a * a;
        end = off[j] + k->param_sizes[j];
    }
    *abi_size = end;
}

CUmodule emu_module_new(CUcontext ctx)
{
    CUmodule m = emu_handle_mem_get(EMU_K_MODULE, sizeof *m);
    m->ctx = ctx;
    return m;
}

/* Lazy loading (CUDA_MODULE_LOADING other than EAGER: the default since
 * CUDA 12.2): a kernel's code reaches a context when a function handle of
 * it is first taken there (cuModuleGetFunction, cuKernelGetFunction, a
 * launch or a node of a CUkernel in that context), and takes
 * CUDAEMU_FUNC_BYTES of the context's device (0 by default) until the
 * function ends; beyond what is left the call fails with
 * CUDA_ERROR_OUT_OF_MEMORY and loads nothing (the CUDA programming guide,
 * "Lazy Loading": loading code onto the GPU needs device memory, which an
 * allocator holding the device's memory leaves none of). EAGER: the code
 * came with the module's load (CUDAEMU_MODULE_BYTES). */
int emu_func_load(CUfunction f)
{
    if (__atomic_load_n(&f->loaded, __ATOMIC_ACQUIRE)) return 1;
    size_t bytes = emu_cfg.eager ? 0 : emu_cfg.func_bytes;
    int dev = f->mod->ctx->device;
    if (!emu_charge_take(dev, bytes)) return 0;
    int want = 0;
    if (__atomic_compare_exchange_n(&f->loaded, &want, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        __atomic_store_n(&f->charge, bytes, __ATOMIC_RELEASE);
    else
        emu_charge_give(dev, bytes);   /* another thread loaded it first */
    return 1;
}

void emu_func_unload(CUfunction f)
{
    emu_charge_give(f->mod->ctx->device, __atomic_load_n(&f->charge, __ATOMIC_ACQUIRE));
}

CUfunction emu_func_new(const emu_kernel *k, CUmodule m)
{
    static uint64_t func_gens;      /* atomic */
    CUfunction f = emu_handle_mem_get(EMU_K_FUNC, sizeof *f);
    f->k = k;
    f->mod = m;
    f->gen = __atomic_add_fetch(&func_gens, 1, __ATOMIC_RELAXED);
    emu_kernel_layout(k, f->off, &f->abi_size);
    emu_func_attr_init(f->attr, k, m->ctx ? m->ctx->device : 0);
    emu_handle_add_ctx(f, EMU_K_FUNC, m->ctx);
    return f;
}

/* Builds a module from a dlopen()ed object; closes it on failure. */
static CUresult module_from_dl(void *dl, CUcontext ctx, CUmodule *out)
{
    const emu_kernel *table = dlsym(dl, EMU_MODULE_SYMBOL);
    int n = table ? emu_kernel_table_count(table) : -1;
    if (n < 0) {
        dlclose(dl);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    CUmodule m = emu_module_new(ctx);
    m->dl = dl;
    m->nfuncs = (unsigned)n;
    m->funcs = emu_xcalloc(n ? (size_t)n : 1, sizeof *m->funcs);
    for (int i = 0; i < n; i++) m->funcs[i] = emu_func_new(&table[i], m);
    emu_handle_add_ctx(m, EMU_K_MODULE, ctx);
    *out = m;
    return CUDA_SUCCESS;
}

void *emu_module_dlopen_path(const char *fname)
{
    /* A path without a slash would make dlopen search the library path. */
    char path[4096];
    if (!strchr(fname, '/')) {
        if (snprintf(path, sizeof path, "./%s", fname) >= (int)sizeof path) return NULL;
        fname = path;
    }
    return dlopen(fname, RTLD_NOW | RTLD_LOCAL);
}

/* A load takes CUDAEMU_MODULE_BYTES of the context's device (its code and
 * data; 0 by default) for the module's life: beyond what is left the load
 * is CUDA_ERROR_OUT_OF_MEMORY and does nothing. module_charge takes it
 * first, module_charged keeps it with the loaded module or gives it back. */
static int module_charge(CUcontext ctx) { return emu_charge_take(ctx->device, emu_cfg.module_bytes); }

static CUresult module_charged(CUcontext ctx, CUresult r, CUmodule *module)
{
    if (r == CUDA_SUCCESS) (*module)->charge = emu_cfg.module_bytes;
    else emu_charge_give(ctx->device, emu_cfg.module_bytes);
    return r;
}

EMU_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    EMU_ENTRY_INIT();
    CUcontext ctx;
    if (!module || !fname) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (access(fname, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    if (!module_charge(ctx)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (emu_file_is_cuda_image(fname)) return module_charged(ctx, emu_lib_module_load(ctx, module), module);
    void *dl = emu_module_dlopen_path(fname);
    if (!dl) return module_charged(ctx, CUDA_ERROR_INVALID_IMAGE, module);
    return module_charged(ctx, module_from_dl(dl, ctx, module), module);
}

/* Size of an ELF image held in memory: the furthest of its section headers
 * and loadable contents; 0 if the bytes are not a 64-bit ELF object. */
static size_t elf_image_size(const void *image)
{
    const Elf64_Ehdr *eh = image;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return 0;
    if (eh->e_type != ET_DYN) return 0;
    size_t end = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    size_t ph_end = eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
    if (ph_end > end) end = ph_end;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)image + eh->e_phoff);
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        size_t e = ph[i].p_offset + ph[i].p_filesz;
        if (e > end) end = e;
    }
    return end;
}

void *emu_module_dlopen_image(const void *image, CUresult *err)
{
    size_t size = elf_image_size(image);
    *err = CUDA_ERROR_INVALID_IMAGE;
    if (!size) return NULL;
    int fd = memfd_create("cudaemu-module", MFD_CLOEXEC);
    *err = CUDA_ERROR_OUT_OF_MEMORY;
    if (fd < 0) return NULL;
    const char *p = image;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, p + done, size - done);
        if (n <= 0) {
            close(fd);
            return NULL;
        }
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    close(fd);
    *err = dl ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
    return dl;
}

/* An emulated module's ELF image, or a CUDA image (emu_library.c). */
static CUresult module_load_data(CUmodule *module, const void *image)
{
    CUcontext ctx;
    if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = emu_ctx_require(&ctx);
    if (r != CUDA_SUCCESS) return r;
    if (!module_charge(ctx)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (emu_image_is_cuda(image)) return module_charged(ctx, emu_lib_module_load(ctx, module), module);
    void *dl = emu_module_dlopen_image(image, &r);
    if (!dl) return module_charged(ctx, r, module);
    return module_charged(ctx, module_from_dl(dl, ctx, module), module);
}

EMU_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    EMU_ENTRY_INIT();
    return module_load_data(module, image);
}

/* JIT options have nothing to act on: there is no JIT. */
EMU_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                       CUjit_option *options, void **optionValues)
{
    EMU_ENTRY_INIT();
    if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
    return module_load_data(module, image);
}

EMU_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    EMU_ENTRY_INIT();
    return module_load_data(module, fatCubin);
}

/* Unloads an emulated module: its handles end (deleted, or ended by its
 * context's teardown), its code goes once no stream runs it, and the handle
 * values go back to the pools, the functions so that a module loaded next
 * gets this module's function values in the same order. */
static void module_unload(CUmodule m, int teardown)
{
    void (*end)(const void *) = teardown ? emu_handle_end : emu_handle_del;
    end(m);
    for (unsigned i = 0; i < m->nfuncs; i++) end(m->funcs[i]);
    emu_streams_sync_all(NULL);
    dlclose(m->dl);
    for (unsigned i = m->nfuncs; i-- > 0;) {
        emu_func_unload(m->funcs[i]);
        emu_handle_mem_put(EMU_K_FUNC, m->funcs[i]);
    }
    free(m->funcs);
    emu_handle_mem_put(EMU_K_MODULE, m);
}

/* Waits for every stream first, so no kernel of the module is still running
 * when its code goes away. */
EMU_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    EMU_ENTRY_INIT();
    if (!hmod || !emu_handle_ok(hmod, EMU_K_MODULE)) return CUDA_ERROR_INVALID_HANDLE;
    int dev = hmod->ctx->device;
    size_t charge = hmod->charge;
    CUresult r = CUDA_SUCCESS;
    if (hmod->lib) r = emu_lib_module_unload(hmod);
    else module_unload(hmod, 0);
    if (r == CUDA_SUCCESS) emu_charge_give(dev, charge);
    return r;
}

static void module_ctx_end(void *h)
{
    CUmodule m = h;
    int dev = m->ctx->device;
    size_t charge = m->charge;
    if (m->lib) emu_lib_module_ctx_destroyed(m);
    else module_unload(m, 1);
    emu_charge_give(dev, charge);
}

void emu_modules_ctx_destroyed(CUcontext ctx)
{
    emu_handles_end_ctx(ctx, EMU_K_MODULE, module_ctx_end);
}

EMU_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    EMU_ENTRY_INIT();
    if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!hmod || !emu_handle_ok(hmod, EMU_K_MODULE)) return CUDA_ERROR_INVALID_HANDLE;
    if (hmod->lib) return emu_lib_function(hmod->lib, hmod->ctx, name, hfunc);
    for (unsigned i = 0; i < hmod->nfuncs; i++) {
        if (strcmp(hmod->funcs[i]->k->name, name) == 0) {
            if (!emu_func_load(hmod->funcs[i])) return CUDA_ERROR_OUT_OF_MEMORY;
            *hfunc = hmod->funcs[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

EMU_EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    EMU_ENTRY_INIT();
    if (!func || !emu_handle_ok(func, EMU_K_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
    return emu_param_info(func->k, func->off, paramIndex, paramOffset, paramSize, __func__);
}

CUresult emu_param_info(const emu_kernel *k, const size_t *off, size_t index, size_t *offset, size_t *size,
                        const char *call)
{
    if (!k->fn) return emu_kernel_missing(k->name, call);
    if (!offset || index >= k->num_params) return CUDA_ERROR_INVALID_VALUE;
    *offset = off[index];
    if (size) *size = k->param_sizes[index];
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    EMU_ENTRY_INIT();
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!hfunc || !emu_handle_ok(hfunc, EMU_K_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
    *name = hfunc->k->name;
    return CUDA_SUCCESS;
}

CUcontext emu_func_ctx(CUfunction f)
{
    return f && emu_handle_alive(f, EMU_K_FUNC) ? f->mod->ctx : NULL;
}

const char *emu_func_name(CUfunction f)
{
    return f && emu_handle_alive(f, EMU_K_FUNC) ? f->k->name : "<unloaded function>";
}

int emu_args_func_loaded(const emu_args *a)
{
    /* Pool memory is never unmapped: reading a stale function's gen is safe. */
    return emu_handle_alive(a->func, EMU_K_FUNC) && a->func->gen == a->func_gen;
}

/* ------------------------------------------------------------------------
 * Kernel arguments and launches
 * ---------------------------------------------------------------------- */
static emu_args *args_alloc(CUfunction f, size_t size)
{
    emu_args *a = calloc(1, sizeof *a + size);
    if (!a) return NULL;
    a->func = f;
    a->func_gen = f->gen;
    a->size = size;
    a->num_params = f->k->num_params;
    for (unsigned i = 0; i < a->num_params; i++) a->params[i] = a->data + f->off[i];
    return a;
}

/* Reads an `extra` array: the buffer and its size. */
static CUresult extra_buffer(void **extra, const void **buf, size_t *size)
{
    int have_size = 0;
    *buf = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            if (!extra[i + 1]) return CUDA_ERROR_INVALID_VALUE;
            *size = *(const size_t *)extra[i + 1];
            have_size = 1;
        } else {
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return *buf && have_size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult emu_args_pack(CUfunction f, void **kernelParams, void **extra, emu_args **out)
{
    CUresult r = emu_func_resolve(f, NULL, &f);
    if (r != CUDA_SUCCESS) return r;
    if (!f->k->fn) return emu_kernel_missing(f->k->name, "a kernel node or launch");
    if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
    unsigned n = f->k->num_params;
    const void *buf = NULL;
    size_t size = 0;
    if (extra) {
        r = extra_buffer(extra, &buf, &size);
        if (r != CUDA_SUCCESS) return r;
        if (size != f->abi_size) return CUDA_ERROR_INVALID_VALUE;
    } else if (n) {
        if (!kernelParams) return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < n; i++) {
            if (!kernelParams[i]) return CUDA_ERROR_INVALID_VALUE;
        }
    }
    emu_args *a = args_alloc(f, f->abi_size);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    if (buf) memcpy(a->data, buf, a->size);
    for (unsigned i = 0; !buf && i < n; i++) memcpy(a->params[i], kernelParams[i], f->k->param_sizes[i]);
    *out = a;
    return CUDA_SUCCESS;
}

emu_args *emu_args_clone(const emu_args *a)
{
    emu_args *c = malloc(sizeof *c + a->size);
    if (!c) return NULL;
    memcpy(c, a, sizeof *c + a->size);
    for (unsigned i = 0; i < c->num_params; i++)
        c->params[i] = c->data + ((const unsigned char *)a->params[i] - a->data);
    return c;
}

/* Where cudaemu_fault returns to (the kernel this worker runs), and its code. */
static __thread jmp_buf *tls_fault_jmp;
static __thread CUresult tls_fault_code;

void emu_kernel_run(const emu_args *a, const emu_launch *launch, int dev, const char *call)
{
    if (emu_cfg.kernel_delay_us) {
        struct timespec ts = { emu_cfg.kernel_delay_us / 1000000, (emu_cfg.kernel_delay_us % 1000000) * 1000L };
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    if (!emu_args_func_loaded(a)) {
        emu_violation(call, "launch of a function whose module was unloaded");
        return;
    }
    const char *name = a->func->k->name;
    for (size_t i = 0; i + 8 <= a->size; i += 8) {
        CUdeviceptr v;
        emu_range r;
        memcpy(&v, a->data + i, 8);
        if (!v || !emu_mem_find(v, &r)) continue;
        if (!emu_mem_accessible(v, 1, dev) || !emu_mem_pool_open(v, dev)) {
            emu_violation(call, "illegal address 0x%llx in the arguments of kernel %s (not accessible to device %d)",
                          (unsigned long long)v, name, dev);
            return;
        }
    }
    jmp_buf here;
    if (setjmp(here) == 0) {
        tls_fault_jmp = &here;
        emu_tls_kernel = name;
        a->func->k->fn((void **)a->params, launch);
    } else {
        emu_sticky_set(emu_worker_ctx(), tls_fault_code);
    }
    tls_fault_jmp = NULL;
    emu_tls_kernel = NULL;
}

/* The device-side fault of emu_kernel.h: ends the running kernel (back to
 * emu_kernel_run, which poisons its context). Outside a kernel, or with a
 * code that is not one of the three: a usage error, the process aborts. */
EMU_EXPORT void cudaemu_fault(int code)
{
    if (!tls_fault_jmp) {
        emu_log("cudaemu_fault(%d) called outside a kernel", code);
        abort();
    }
    if (code != CUDA_ERROR_ASSERT && code != CUDA_ERROR_ILLEGAL_ADDRESS && code != CUDA_ERROR_LAUNCH_FAILED) {
        emu_log("cudaemu_fault(%d) in kernel %s: the code must be CUDA_ERROR_ASSERT (710), "
                "CUDA_ERROR_ILLEGAL_ADDRESS (700) or CUDA_ERROR_LAUNCH_FAILED (719)", code, emu_tls_kernel);
        abort();
    }
    tls_fault_code = (CUresult)code;
    longjmp(*tls_fault_jmp, 1);
}

typedef struct kernel_work {
    emu_work w;
    emu_args *args;
    emu_launch launch;
} kernel_work;

static void kernel_run(emu_work *w, emu_stream *s)
{
    kernel_work *kw = (kernel_work *)w;
    emu_kernel_run(kw->args, &kw->launch, s->device, w->what);
}

static void kernel_release(emu_work *w)
{
    free(((kernel_work *)w)->args);
    free(w);
}

/* f may be a CUkernel: launched as its function in the stream's context. */
static CUresult launch_kernel(const char *call, CUfunction f, emu_launch l, CUstream h, int pt,
                              void **kernelParams, void **extra, const CUlaunchAttribute *attrs,
                              unsigned nattrs)
{
    if (!f || (!emu_handle_ok(f, EMU_K_FUNC) && !emu_handle_ok(f, EMU_K_KERNEL))) return CUDA_ERROR_INVALID_HANDLE;
    if (!l.grid.x || !l.grid.y || !l.grid.z || !l.block.x || !l.block.y || !l.block.z)
        return CUDA_ERROR_INVALID_VALUE;
    if (l.grid.x > 0x7fffffffu || l.grid.y > 65535 || l.grid.z > 65535) return CUDA_ERROR_INVALID_VALUE;
    if (l.block.x > 1024 || l.block.y > 1024 || l.block.z > 64 ||
        (unsigned long long)l.block.x * l.block.y * l.block.z > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    emu_stream *s;
    CUresult r = emu_stream_get(h, pt, &s);
    if (r == CUDA_SUCCESS) r = emu_func_resolve(f, emu_stream_ctx(s), &f);
    if (r != CUDA_SUCCESS) return r;
    if (!f->k->fn) return emu_kernel_missing(f->k->name, call);
    if ((r = emu_launch_attrs_check(attrs, nattrs)) != CUDA_SUCCESS) return r;
    if (l.shared_bytes > (unsigned)emu_func_attr(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES))
        return CUDA_ERROR_INVALID_VALUE;
    emu_args *a;
    if ((r = emu_args_pack(f, kernelParams, extra, &a)) != CUDA_SUCCESS) return r;
    kernel_work *kw = (kernel_work *)emu_work_new(sizeof *kw, call, kernel_run);
    kw->w.release = kernel_release;
    kw->args = a;
    kw->launch = l;
    emu_work_touch_words(&kw->w, a->data, a->size);
    /* emu_capture_add copies what it keeps. */
    emu_capture_op op = { .type = CU_GRAPH_NODE_TYPE_KERNEL, .args = a, .launch = l, .attrs = attrs,
                          .nattrs = nattrs };
    if (emu_stream_capture(s)) {
        r = emu_capture_add(s, &op);
        emu_work_release(&kw->w);
        return r;
    }
    return emu_stream_submit(call, s, 0, &op, &kw->w);
}

EMU_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    EMU_ENTRY_INIT();
    emu_launch l = { { gridDimX, gridDimY, gridDimZ }, { blockDimX, blockDimY, blockDimZ }, sharedMemBytes };
    return launch_kernel(__func__, f, l, hStream, 0, kernelParams, extra, NULL, 0);
}

EMU_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams, void **extra)
{
    EMU_ENTRY_INIT();
    emu_launch l = { { gridDimX, gridDimY, gridDimZ }, { blockDimX, blockDimY, blockDimZ }, sharedMemBytes };
    return launch_kernel(__func__, f, l, hStream, 1, kernelParams, extra, NULL, 0);
}

/* cuLaunchKernelEx: the configuration's dimensions, shared memory, stream
 * and attributes (emu_launch_attrs_check: which ones are emulated). */
static CUresult launch_ex(const char *call, const CUlaunchConfig *c, CUfunction f, void **kernelParams,
                          void **extra, int pt)
{
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    emu_launch l = { { c->gridDimX, c->gridDimY, c->gridDimZ }, { c->blockDimX, c->blockDimY, c->blockDimZ },
                     c->sharedMemBytes };
    return launch_kernel(call, f, l, c->hStream, pt, kernelParams, extra, c->attrs, c->numAttrs);
}

EMU_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    EMU_ENTRY_INIT();
    return launch_ex(__func__, config, f, kernelParams, extra, 0);
}

EMU_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                          void **extra)
{
    EMU_ENTRY_INIT();
    return launch_ex(__func__, config, f, kernelParams, extra, 1);
}

/* cuLaunchCooperativeKernel: a launch with the cooperative attribute (its
 * blocks run as the emulation runs every launch: one host call). */
static CUresult launch_coop(const char *call, CUfunction f, emu_launch l, CUstream h, int pt, void **kernelParams)
{
    CUlaunchAttribute coop;
    memset(&coop, 0, sizeof coop);
    coop.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    coop.value.cooperative = 1;
    return launch_kernel(call, f, l, h, pt, kernelParams, NULL, &coop, 1);
}

EMU_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                              unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                              unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                              void **kernelParams)
{
    EMU_ENTRY_INIT();
    emu_launch l = { { gridDimX, gridDimY, gridDimZ }, { blockDimX, blockDimY, blockDimZ }, sharedMemBytes };
    return launch_coop(__func__, f, l, hStream, 0, kernelParams);
}

EMU_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                   unsigned int gridDimZ, unsigned int blockDimX,
                                                   unsigned int blockDimY, unsigned int blockDimZ,
                                                   unsigned int sharedMemBytes, CUstream hStream,
                                                   void **kernelParams)
{
    EMU_ENTRY_INIT();
    emu_launch l = { { gridDimX, gridDimY, gridDimZ }, { blockDimX, blockDimY, blockDimZ }, sharedMemBytes };
    return launch_coop(__func__, f, l, hStream, 1, kernelParams);
}
