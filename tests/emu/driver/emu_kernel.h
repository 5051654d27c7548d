/*
 * emu_kernel.h: the module ABI of the emulated CUDA driver (cudaemu).
 *
 * A module is a shared object that exports `const emu_kernel emu_module[]`,
 * terminated by an entry whose name is NULL. cuModuleLoad(path) loads such an
 * object; cuModuleLoadData accepts the same object's bytes.
 *
 * params[i] points to argument i, as in kernelParams. Argument i starts at the
 * end of argument i-1 rounded up to min(8, its size rounded up to a power of
 * two); cuFuncGetParamInfo reports those offsets and sizes, and `extra`
 * buffers use the same layout.
 *
 * Keep this header stable and self-contained: other programs build modules
 * against it.
 */
#ifndef EMU_KERNEL_H
#define EMU_KERNEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emu_dim3 { unsigned x, y, z; } emu_dim3;
typedef struct emu_launch { emu_dim3 grid, block; unsigned shared_bytes; } emu_launch;
typedef void (*emu_kernel_fn)(void **params, const emu_launch *launch); /* runs the whole launch */
typedef struct emu_kernel {
    const char *name;          /* name for cuModuleGetFunction; NULL ends the table */
    emu_kernel_fn fn;
    unsigned num_params;
    size_t param_sizes[32];    /* bytes of each argument */
} emu_kernel;

/* The symbol every module exports. */
#define EMU_MODULE_SYMBOL "emu_module"

/* A device-side fault, opt-in (docs/emulator.md, "Sticky errors"): a kernel
 * that calls cudaemu_fault(code) ends there, as a kernel whose assert fired
 * (code 710, CUDA_ERROR_ASSERT), that touched an illegal address (700,
 * CUDA_ERROR_ILLEGAL_ADDRESS) or trapped (719, CUDA_ERROR_LAUNCH_FAILED);
 * the launch fails with that sticky error. Defined by the emulated driver
 * (weak here, so a module links without it; the driver must be loaded
 * globally, as a program linked with -lcuda has it). Any other code, or a
 * call outside a kernel, aborts the process. */
void cudaemu_fault(int code) __attribute__((weak));

/* The device-side cudaGraphSetConditional(handle, value) of a conditional
 * node's handle (docs/emulator.md, "Conditional nodes"): a kernel, which
 * receives the handle (a CUgraphConditionalHandle, 8 bytes) as an argument,
 * sets the value the node reads when its turn comes (IF) or before each
 * iteration (WHILE). Defined by the emulated driver (weak here, as
 * cudaemu_fault); a handle never created aborts the process. */
void cudaemu_set_conditional(unsigned long long handle, unsigned int value) __attribute__((weak));

/* A fetch through a texture object (docs/emulator.md, "Texture objects"):
 * a kernel, which receives the handle (a CUtexObject, 8 bytes) as an
 * argument, reads element (x, y) into out (16 bytes: the element's bytes as
 * stored, no format conversion or filtering; the rest zero) and gets the
 * element's size. A linear resource is tex1Dfetch(x) (y must be 0; an index
 * past the end reads zeros); a pitch2D or array resource is tex2D at
 * unnormalized integer coordinates (outside: the border's zeros under
 * CU_TR_ADDRESS_MODE_BORDER, else clamped). A handle that names no live
 * texture, or an element in memory that was freed, is a violation: 0,
 * zeros read. Defined by the emulated driver (weak here, as cudaemu_fault). */
size_t cudaemu_tex_fetch(unsigned long long tex, long long x, long long y, void *out) __attribute__((weak));

/* What a NIC (GPUDirect RDMA) relying on the driver's guarantees sees
 * (docs/emulator.md, "Synchronous memory operations: SYNC_MEMOPS").
 * cudaemu_sync_memops: 1 if a synchronous memory operation initiated now on
 * ptr from the calling thread's current context is guaranteed to
 * synchronize (ptr's allocation has CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set, or
 * that context has CU_CTX_SYNC_MEMOPS in its flags), else 0.
 * cudaemu_rdma_capable: 1 if a NIC could register ptr for GPUDirect RDMA
 * (what CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE answers), else 0.
 * Both: -1 if ptr is in no allocation the emulator knows. Defined by the
 * emulated driver (weak here: NULL without it). */
int cudaemu_sync_memops(unsigned long long ptr) __attribute__((weak));
int cudaemu_rdma_capable(unsigned long long ptr) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* EMU_KERNEL_H */
