/*
 * interpose/hooks.c: everything generated from hooks.def. The exported
 * wrappers, their forward functions, the hook table, names and counters.
 *
 * A wrapper: ensure init, count the call, then either forward straight to the
 * real function (policy off, bad configuration, or a call made while this
 * thread is already inside core/) or hand one sg_call to core/ and return its
 * result. Globals and their guards are listed in hooks.h.
 */
#include "hooks.h"

#include "../core/capture.h"
#include "../core/core.h"
#include "../core/memory.h"

#include <string.h>

sg_real_table sg_real;
sg_hook_counter sg_hook_counters[SG_HOOK_COUNT];

/* What each hooks.def `call` column tells core/ (core/call.h). */
#define SG_FWD .kind = SG_CALL_FORWARD
#define SG_ALLOC(o, n) .kind = SG_CALL_ALLOC, .u.alloc = { .out = (o), .bytes = (n) }
#define SG_ALLOC_ASYNC(o, n, s) .kind = SG_CALL_ALLOC, \
    .u.alloc = { .out = (o), .bytes = (n), .stream = (s), .async = 1 }
#define SG_ALLOC_POOL(o, n, p, s) .kind = SG_CALL_ALLOC, \
    .u.alloc = { .out = (o), .bytes = (n), .stream = (s), .pool = (p), .async = 1 }
#define SG_DEV_ALLOC .kind = SG_CALL_DEV_ALLOC
#define SG_CTX_CREATE .kind = SG_CALL_CTX_CREATE
#define SG_KERNEL_LOOKUP(o) .kind = SG_CALL_KERNEL_LOOKUP, .u.lookup = { .out = (o) }
#define SG_FREE(p) .kind = SG_CALL_FREE, .u.free = { .ptr = (p) }
#define SG_FOREIGN_FREE .kind = SG_CALL_FOREIGN_FREE
#define SG_POOL_SET_DEV(d, p) .kind = SG_CALL_POOL_SET, .u.pool = { .dev = (d), .pool = (p) }
#define SG_POOL_SET_LOC(l, t, p) .kind = SG_CALL_POOL_SET, \
    .u.pool = { .loc = (l), .type = (t), .pool = (p), .by_location = 1 }
#define SG_POOL_DESTROY(p) .kind = SG_CALL_POOL_SET, .u.pool = { .pool = (p), .destroyed = 1 }
#define SG_FREE_ASYNC(p, s) .kind = SG_CALL_FREE, .u.free = { .ptr = (p), .stream = (s), .async = 1 }
#define SG_ADDR_RANGE(b, sz, p) .kind = SG_CALL_ADDR_RANGE, \
    .u.range = { .base = (b), .size = (sz), .ptr = (p) }
#define SG_PTR_ATTR(d, a, p) .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = (d), .attr = (a), .ptr = (p) }
#define SG_PTR_SET(v, a, p) .kind = SG_CALL_PTR_SET, \
    .u.attr = { .data = (void *)(uintptr_t)(v), .attr = (a), .ptr = (p) }
#define SG_PTR_ATTRS(n_, a, d, p) .kind = SG_CALL_PTR_ATTRS, \
    .u.attrs = { .n = (n_), .attrs = (a), .data = (d), .ptr = (p) }
#define SG_IPC_HANDLE(h, p) .kind = SG_CALL_IPC_HANDLE, .u.ipc = { .out = (h), .ptr = (p) }
#define SG_IPC_OPEN(o, h, f) .kind = SG_CALL_IPC_OPEN, .u.ipc_open = { .out = (o), .handle = (h), .flags = (f) }
#define SG_IPC_CLOSE(p) .kind = SG_CALL_IPC_CLOSE, .u.ipc_close = { .ptr = (p) }
#define SG_RETAIN_HANDLE(h, a) .kind = SG_CALL_RETAIN_HANDLE, .u.retain = { .out = (h), .addr = (a) }
#define SG_MEM_ACCESS(f, l, p) .kind = SG_CALL_MEM_ACCESS, \
    .u.access = { .flags = (f), .loc = (l), .ptr = (p) }
#define SG_MEM_INFO(f, t) .kind = SG_CALL_MEM_INFO, .u.info = { .free = (f), .total = (t) }
#define SG_POOL_ATTR(p, a, v, s) .kind = SG_CALL_POOL_ATTR, \
    .u.pattr = { .pool = (p), .attr = (a), .value = (v), .set = (s) }
#define SG_MEMSET(d, n, es) .kind = SG_CALL_MEMOP, \
    .u.memop = { .kind = SG_OP_RANGES, .dst = (d), .dst_bytes = (size_t)(n) * (es) }
#define SG_MEMSET2D(d, pitch, w, h, es) .kind = SG_CALL_MEMOP, \
    .u.memop = { .kind = SG_OP_RANGES, .dst = (d), \
                 .dst_bytes = (h) ? ((size_t)(h) - 1) * (pitch) + (size_t)(w) * (es) : 0 }
#define SG_COPY(d, dn, s, sn) .kind = SG_CALL_MEMOP, \
    .u.memop = { .kind = SG_OP_RANGES, .dst = (d), .dst_bytes = (dn), .src = (s), .src_bytes = (sn) }
#define SG_COPY2D(p) .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_COPY2D, .desc = (p) }
#define SG_COPY3D(p) .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_COPY3D, .desc = (p) }
#define SG_MEMSET_NODE(p) .kind = SG_CALL_MEMOP, \
    .u.memop = { .kind = SG_OP_MEMSET_NODE, .desc = (p), .node_update = 1 }
#define SG_MEMCPY_NODE(p) .kind = SG_CALL_MEMOP, \
    .u.memop = { .kind = SG_OP_COPY3D, .desc = (p), .node_update = 1 }
#define SG_NODE_PARAMS(p) .kind = SG_CALL_MEMOP, \
    .u.memop = { .kind = SG_OP_NODE_PARAMS, .desc = (p), .node_update = 1 }
#define SG_STREAM_DESTROY(s) .kind = SG_CALL_STREAM_DESTROY, .u.stream = { .stream = (s) }
#define SG_CTX_DESTROY(c) .kind = SG_CALL_CTX_DESTROY, .u.ctx = { .ctx = (c) }
#define SG_CTX_SWITCH .kind = SG_CALL_CTX_SWITCH
#define SG_PRIMARY_RETAIN(o, d) .kind = SG_CALL_PRIMARY_RETAIN, .u.primary = { .out = (o), .dev = (d) }
#define SG_PRIMARY_DROP(d) .kind = SG_CALL_PRIMARY_DROP, .u.primary = { .dev = (d) }
#define SG_GREEN_DESTROY(g) .kind = SG_CALL_PRIMARY_DROP, .u.primary = { .dev = -1, .green = (g) }
#define SG_CAPTURE_BEGIN(s) .kind = SG_CALL_CAPTURE_BEGIN, .u.capture = { .stream = (s) }
#define SG_CAPTURE_TO_GRAPH(s, g) .kind = SG_CALL_CAPTURE_BEGIN, \
    .u.capture = { .stream = (s), .to_graph = 1, .graph = (g) }
#define SG_CAPTURE_END(s, g) .kind = SG_CALL_CAPTURE_END, .u.capture = { .stream = (s), .graph_out = (g) }
#define SG_KERNEL(f_, gx, gy, gz, bx, by, bz, sh, s, p, e, coop) .kind = SG_CALL_KERNEL, \
    .u.kernel = { .f = (f_), .grid = { gx, gy, gz }, .block = { bx, by, bz }, .shmem = (sh), \
                  .stream = (s), .params = (p), .extra = (e), .cooperative = (coop) }
/* cuLaunchKernelEx: the configuration read only if there is one (the driver
 * refuses a NULL one; the wrapper's direct path reads none of it). */
#define SG_CFG_(c, m, none) ((c) ? (c)->m : (none))
#define SG_KERNEL_EX(c, f_, p, e) .kind = SG_CALL_KERNEL, \
    .u.kernel = { .f = (f_), \
                  .grid = { SG_CFG_(c, gridDimX, 0), SG_CFG_(c, gridDimY, 0), SG_CFG_(c, gridDimZ, 0) }, \
                  .block = { SG_CFG_(c, blockDimX, 0), SG_CFG_(c, blockDimY, 0), SG_CFG_(c, blockDimZ, 0) }, \
                  .shmem = SG_CFG_(c, sharedMemBytes, 0), .stream = SG_CFG_(c, hStream, NULL), \
                  .params = (p), .extra = (e), .attrs = SG_CFG_(c, attrs, NULL), \
                  .nattrs = SG_CFG_(c, numAttrs, 0) }

/* The recorder's facet (core/call.h, sg_gb): what a stream operation adds
 * to a capturing stream's graph, what an explicit graph call does. */
#define SG_GB_(...) .gb = &(const sg_gb){ __VA_ARGS__ }
#define SG_MEMSET_A(d, v, n, es, s) SG_MEMSET(d, n, es), SG_GB_(.kind = SG_GB_MEMSET, .stream = (s), \
    .u.memset = { .dst = (d), .value = (v), .elem = (es), .width = (n), .height = 1 })
#define SG_MEMSET2D_A(d, pt, v, w, h, es, s) SG_MEMSET2D(d, pt, w, h, es), \
    SG_GB_(.kind = SG_GB_MEMSET, .stream = (s), \
           .u.memset = { .dst = (d), .pitch = (pt), .value = (v), .elem = (es), .width = (w), .height = (h) })
#define SG_SYNC_ SG_GB_(.kind = SG_GB_SYNC_OP)
#define SG_MEMSET_S(d, n, es) SG_MEMSET(d, n, es), SG_SYNC_
#define SG_MEMSET2D_S(d, pt, w, h, es) SG_MEMSET2D(d, pt, w, h, es), SG_SYNC_
#define SG_COPY_GB_(d, dt, dh, sp, st, sh, n, s) SG_GB_(.kind = SG_GB_COPY, .stream = (s), \
    .u.copy = { .dst = (d), .dst_type = (dt), .dst_host = (dh), .src = (sp), .src_type = (st), \
                .src_host = (sh), .bytes = (n) })
#define SG_COPY_A(d, sp, n, s) SG_COPY(d, n, sp, n), \
    SG_COPY_GB_(d, CU_MEMORYTYPE_UNIFIED, NULL, sp, CU_MEMORYTYPE_UNIFIED, NULL, n, s)
#define SG_COPY_HTOD_A(d, sh, n, s) SG_COPY(d, n, 0, 0), \
    SG_COPY_GB_(d, CU_MEMORYTYPE_DEVICE, NULL, 0, CU_MEMORYTYPE_HOST, sh, n, s)
#define SG_COPY_DTOH_A(dh, sp, n, s) SG_COPY(0, 0, sp, n), \
    SG_COPY_GB_(0, CU_MEMORYTYPE_HOST, dh, sp, CU_MEMORYTYPE_DEVICE, NULL, n, s)
#define SG_COPY_DTOD_A(d, sp, n, s) SG_COPY(d, n, sp, n), \
    SG_COPY_GB_(d, CU_MEMORYTYPE_DEVICE, NULL, sp, CU_MEMORYTYPE_DEVICE, NULL, n, s)
#define SG_COPY_S(d, dn, sp, sn) SG_COPY(d, dn, sp, sn), SG_SYNC_
#define SG_COPY_PEER_A(d, sp, n, s) SG_COPY(d, n, sp, n), SG_GB_(.kind = SG_GB_STREAM_OTHER, .stream = (s))
#define SG_COPY2D_A(p, s) SG_COPY2D(p), SG_GB_(.kind = SG_GB_COPY2D, .stream = (s), .u.desc = (p))
#define SG_COPY3D_A(p, s) SG_COPY3D(p), SG_GB_(.kind = SG_GB_COPY3D, .stream = (s), .u.desc = (p))
/* cuMemcpy3DPeer(Async): range-checked as a 3D copy; the Async form's
 * capture is not modelled (a memcpy node the recorder does not build). */
#define SG_COPY3D_PEER(p) .kind = SG_CALL_MEMOP, .u.memop = { .kind = SG_OP_COPY3D_PEER, .desc = (p) }
#define SG_COPY3D_PEER_S(p) SG_COPY3D_PEER(p), SG_SYNC_
#define SG_COPY3D_PEER_A(p, s) SG_COPY3D_PEER(p), SG_GB_(.kind = SG_GB_STREAM_OTHER, .stream = (s))
#define SG_COPY2D_S(p) SG_COPY2D(p), SG_SYNC_
#define SG_COPY3D_S(p) SG_COPY3D(p), SG_SYNC_
#define SG_EVENT_RECORD(ev, s, fl) .kind = SG_CALL_FORWARD, \
    SG_GB_(.kind = SG_GB_EVENT_RECORD, .stream = (s), .u.event = { .event = (ev), .flags = (fl) })
#define SG_EVENT_WAIT(s, ev, fl) .kind = SG_CALL_FORWARD, \
    SG_GB_(.kind = SG_GB_EVENT_WAIT, .stream = (s), .u.event = { .event = (ev), .flags = (fl) })
#define SG_EVENT_DESTROY(ev) .kind = SG_CALL_FORWARD, \
    SG_GB_(.kind = SG_GB_EVENT_DESTROY, .u.event = { .event = (ev) })
#define SG_STREAM_OP(s) .kind = SG_CALL_FORWARD, SG_GB_(.kind = SG_GB_STREAM_OTHER, .stream = (s))
#define SG_CAPTURE_INFO(s, st, d, n) .kind = SG_CALL_FORWARD, \
    SG_GB_(.kind = SG_GB_CAPTURE_INFO, .stream = (s), .u.capinfo = { .status = (st), .deps = (d), .ndeps = (n) })
#define SG_STREAM_CREATE(o, prio) .kind = SG_CALL_DEV_ALLOC, \
    SG_GB_(.kind = SG_GB_STREAM_CREATE, .u.create_stream = { .out = (o), .priority = (prio) })
#define SG_STREAM_ATTR(s) .kind = SG_CALL_FORWARD, SG_GB_(.kind = SG_GB_STREAM_ATTR, .stream = (s))
#define SG_GRAPH_CREATE(o) .kind = SG_CALL_FORWARD, SG_GB_(.kind = SG_GB_GRAPH_CREATE, .u.graph_out = (o))
#define SG_ADD_GB_(g, o, d, ed, n, e, k, p, c) SG_GB_(.kind = SG_GB_ADD_NODE, .u.add = { \
    .graph = (g), .out = (o), .deps = (d), .edata = (ed), .ndeps = (n), .empty = (e), .pk = (k), \
    .params = (p), .ctx = (c) })
#define SG_ADD_KERNEL(g, o, d, n, k, p) .kind = SG_CALL_FORWARD, SG_ADD_GB_(g, o, d, NULL, n, 0, k, p, NULL)
#define SG_ADD_EMPTY(g, o, d, n) .kind = SG_CALL_FORWARD, SG_ADD_GB_(g, o, d, NULL, n, 1, 0, NULL, NULL)
#define SG_ADD_MEMSET(g, o, d, n, p, c) SG_MEMSET_NODE(p), SG_ADD_GB_(g, o, d, NULL, n, 0, SG_NODE_MEMSET, p, c)
#define SG_ADD_MEMCPY(g, o, d, n, p, c) SG_MEMCPY_NODE(p), SG_ADD_GB_(g, o, d, NULL, n, 0, SG_NODE_MEMCPY, p, c)
#define SG_ADD_GENERIC(g, o, d, ed, n, p) SG_NODE_PARAMS(p), \
    SG_ADD_GB_(g, o, d, ed, n, 0, SG_NODE_GENERIC, p, NULL)
#define SG_SET_GB_(nd, k, p, c) SG_GB_(.kind = SG_GB_SET_NODE, .u.set = { .node = (nd), .pk = (k), \
    .params = (p), .ctx = (c) })
#define SG_SET_KERNEL(nd, k, p) .kind = SG_CALL_FORWARD, SG_SET_GB_(nd, k, p, NULL)
#define SG_SET_MEMSET(nd, p) SG_MEMSET_NODE(p), SG_SET_GB_(nd, SG_NODE_MEMSET, p, NULL)
#define SG_SET_MEMCPY(nd, p) SG_MEMCPY_NODE(p), SG_SET_GB_(nd, SG_NODE_MEMCPY, p, NULL)
#define SG_SET_GENERIC(nd, p) SG_NODE_PARAMS(p), SG_SET_GB_(nd, SG_NODE_GENERIC, p, NULL)
#define SG_SET_ATTR(nd, id_, v) .kind = SG_CALL_FORWARD, \
    SG_GB_(.kind = SG_GB_SET_ATTR, .u.attr = { .node = (nd), .id = (id_), .value = (v) })
#define SG_ADD_DEPS(g, f, t, ed, n_) .kind = SG_CALL_FORWARD, \
    SG_GB_(.kind = SG_GB_ADD_DEPS, .u.deps = { .graph = (g), .from = (f), .to = (t), .edata = (ed), .n = (n_) })
#define SG_CLONE(o, g) .kind = SG_CALL_GRAPH_CLONE, .u.clone = { .out = (o), .orig = (g) }, \
    SG_GB_(.kind = SG_GB_CLONE, .u.clone = { .out = (o), .orig = (g) })
#define SG_GRAPH_UOBJ(g) .kind = SG_CALL_GRAPH_UOBJ, .u.graph = { .graph = (g) }
#define SG_GRAPH_OTHER(g) .kind = SG_CALL_FORWARD, SG_GB_(.kind = SG_GB_GRAPH_OTHER, .u.graph = (g))
#define SG_NODE_OTHER(nd) .kind = SG_CALL_FORWARD, SG_GB_(.kind = SG_GB_NODE_OTHER, .u.node = (nd))
#define SG_MODULE_UNLOAD .kind = SG_CALL_MODULE_UNLOAD
#define SG_GRAPH_DESTROY(g) .kind = SG_CALL_GRAPH_DESTROY, .u.graph = { .graph = (g) }
#define SG_NODE_DESTROY(n) .kind = SG_CALL_NODE_DESTROY, .u.node = { .node = (n) }
#define SG_DESTROY_NODE(n) SG_NODE_DESTROY(n), SG_GB_(.kind = SG_GB_NODE_OTHER, .u.node = (n))
#define SG_INST(o, g) .kind = SG_CALL_INSTANTIATE, .u.inst = { .out = (o), .graph = (g) }
#define SG_LAUNCH(e, s) .kind = SG_CALL_LAUNCH, .u.launch = { .exec = (e), .stream = (s) }
#define SG_UPLOAD(e, s) .kind = SG_CALL_UPLOAD, .u.launch = { .exec = (e), .stream = (s) }
#define SG_UPDATE_GRAPH(e, g, i) .kind = SG_CALL_UPDATE_GRAPH, \
    .u.update = { .exec = (e), .graph = (g), .info = (i) }
#define SG_UPDATE_GRAPH_V1(e, g, en, r) .kind = SG_CALL_UPDATE_GRAPH, \
    .u.update = { .exec = (e), .graph = (g), .error_node = (en), .result = (r) }
#define SG_UPDATE_NODE_(e, n, k, p, c) .kind = SG_CALL_UPDATE_NODE, \
    .u.node_update = { .exec = (e), .node = (n), .kind = (k), .params = (p), .ctx = (c) }
#define SG_UPDATE_KERNEL(e, n, p) SG_UPDATE_NODE_(e, n, SG_NODE_KERNEL, p, NULL)
#define SG_UPDATE_KERNEL_V1(e, n, p) SG_UPDATE_NODE_(e, n, SG_NODE_KERNEL_V1, p, NULL)
#define SG_UPDATE_NODE(e, n, p) SG_UPDATE_NODE_(e, n, SG_NODE_GENERIC, p, NULL)
#define SG_UPDATE_MEMCPY(e, n, p, c) SG_UPDATE_NODE_(e, n, SG_NODE_MEMCPY, p, c)
#define SG_UPDATE_MEMSET(e, n, p, c) SG_UPDATE_NODE_(e, n, SG_NODE_MEMSET, p, c)
#define SG_EXEC_ENABLE(e, n) .kind = SG_CALL_EXEC_ENABLE, .u.exec = { .exec = (e), .node = (n) }
#define SG_EXEC_CHILD(e, n, g) .kind = SG_CALL_EXEC_DIRTY, .u.exec = { .exec = (e), .node = (n), .child = (g) }
#define SG_EXEC_DIRTY(e, n) SG_EXEC_CHILD(e, n, NULL)
#define SG_EXEC_DESTROY(e) .kind = SG_CALL_EXEC_DESTROY, .u.exec = { .exec = (e) }

/* A kernel launch goes straight to the driver once start-up is done, while
 * no stream capture is in progress and once its function was launched from
 * the thread's current context (the launch filter, core/memory.h: a first
 * launch may need device memory, which the general path retries): nothing
 * to record, nothing else to do. The exported wrapper holds only that test
 * and two tail calls (the real function, or the general path in
 * sg_hook_<name>), so that it touches no argument but reads f: a few
 * instructions (`make bench` counts them). The filter's byte is an atomic
 * (relaxed): another thread's sg_launch_filter_forget clears it (a context
 * destroyed, cuGreenCtxDestroy included, while this thread launches; a
 * plain read was a data race, ThreadSanitizer: adv_threads2 green). A stale
 * 1 sends one launch direct, as a launch just before the clear would go. */
static inline int sg_launch_direct(int have_real, CUfunction f)
{
    return __atomic_load_n(&sg_ready, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&sg_captures_active, __ATOMIC_RELAXED) && have_real &&
           __atomic_load_n(&sg_launch_known[SG_LAUNCH_SLOT(f)], __ATOMIC_RELAXED);
}

/* The direct path of a kernel launch. GCC moves the stack-passed arguments
 * of a tail call (cuLaunchKernel has eleven) through registers and back;
 * on x86-64 the test and the jumps are therefore written in assembly, which
 * reads f (the first argument register, cuLaunchKernelEx's second), writes
 * only rax and r11 and touches no stack slot (18 instructions). Not in
 * sanitizer builds, which instrument function entry; elsewhere, C. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SG_LAUNCH_FREG_(name) ((SG_ID_##name == SG_ID_cuLaunchKernelEx ||     \
                                SG_ID_##name == SG_ID_cuLaunchKernelEx_ptsz))
#define SG_LAUNCH_DIRECT_(name, params, ...)                                  \
    do {                                                                      \
        if (SG_LAUNCH_FREG_(name)) SG_LAUNCH_DIRECT_ASM_(name, "rsi");        \
        else SG_LAUNCH_DIRECT_ASM_(name, "rdi");                              \
    } while (0)
#define SG_LAUNCH_DIRECT_ASM_(name, freg)                                     \
    do {                                                                      \
        __asm__ volatile("movl %[ready], %%eax\n\t"                           \
                         "testl %%eax, %%eax\n\t"                             \
                         "jz 1f\n\t"                                          \
                         "movl %[caps], %%eax\n\t"                            \
                         "testl %%eax, %%eax\n\t"                             \
                         "jnz 1f\n\t"                                         \
                         "movq %%" freg ", %%r11\n\t"                         \
                         "shrq $%c[shift], %%r11\n\t"                         \
                         "andl $%c[mask], %%r11d\n\t"                         \
                         "movq sg_launch_known@gottpoff(%%rip), %%rax\n\t"    \
                         "movq %%fs:(%%rax), %%rax\n\t"                       \
                         "cmpb $0, (%%rax,%%r11)\n\t"                         \
                         "je 1f\n\t"                                          \
                         "movq %[real], %%rax\n\t"                            \
                         "testq %%rax, %%rax\n\t"                             \
                         "jz 1f\n\t"                                          \
                         "lock addq $1, %[calls]\n\t"                         \
                         "jmp *%%rax\n"                                        \
                         "1:\tjmp %P[hook]"                                    \
                         :: [ready] "m"(sg_ready), [caps] "m"(sg_captures_active), \
                            [real] "m"(sg_real.name),                         \
                            [calls] "m"(sg_hook_counters[SG_ID_##name].calls), \
                            [hook] "i"(sg_hook_##name),                       \
                            [shift] "i"(SG_LAUNCH_SHIFT), [mask] "i"(SG_LAUNCH_TABLE - 1) \
                         /* the argument registers are the program's: never */ \
                         /* an operand's address */                           \
                         : "rax", "rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11", \
                           "cc", "memory");                                   \
        __builtin_unreachable();                                              \
    } while (0)
#else
#define SG_LAUNCH_DIRECT_(name, params, ...)                                  \
    do {                                                                      \
        if (__builtin_expect(sg_launch_direct(sg_real.name != NULL,          \
                                              (sg_call){ __VA_ARGS__ }.u.kernel.f), 1)) { \
            __atomic_fetch_add(&sg_hook_counters[SG_ID_##name].calls, 1,      \
                               __ATOMIC_RELAXED);                             \
            return sg_real.name(SG_ARGS(params));                             \
        }                                                                     \
    } while (0)
#endif

/* Sets every member of c.u.kernel from a kernel call's initializer, one by
 * one: a copy of the member (or the initializer itself) would build the
 * whole union first, zeroed. */
#define SG_KERNEL_SET_(c, ...)                                                \
    do {                                                                      \
        c.u.kernel.f = (sg_call){ __VA_ARGS__ }.u.kernel.f;                   \
        c.u.kernel.grid[0] = (sg_call){ __VA_ARGS__ }.u.kernel.grid[0];       \
        c.u.kernel.grid[1] = (sg_call){ __VA_ARGS__ }.u.kernel.grid[1];       \
        c.u.kernel.grid[2] = (sg_call){ __VA_ARGS__ }.u.kernel.grid[2];       \
        c.u.kernel.block[0] = (sg_call){ __VA_ARGS__ }.u.kernel.block[0];     \
        c.u.kernel.block[1] = (sg_call){ __VA_ARGS__ }.u.kernel.block[1];     \
        c.u.kernel.block[2] = (sg_call){ __VA_ARGS__ }.u.kernel.block[2];     \
        c.u.kernel.shmem = (sg_call){ __VA_ARGS__ }.u.kernel.shmem;           \
        c.u.kernel.stream = (sg_call){ __VA_ARGS__ }.u.kernel.stream;         \
        c.u.kernel.params = (sg_call){ __VA_ARGS__ }.u.kernel.params;         \
        c.u.kernel.extra = (sg_call){ __VA_ARGS__ }.u.kernel.extra;           \
        c.u.kernel.cooperative = (sg_call){ __VA_ARGS__ }.u.kernel.cooperative; \
        c.u.kernel.attrs = (sg_call){ __VA_ARGS__ }.u.kernel.attrs;           \
        c.u.kernel.nattrs = (sg_call){ __VA_ARGS__ }.u.kernel.nattrs;         \
    } while (0)

/* Runs core/ with the reentrancy guard set. */
static __attribute__((noinline)) CUresult sg_dispatch(const sg_call *c)
{
    sg_in_hook = 1;
    CUresult rc = sg_core_call(c);
    sg_in_hook = 0;
    return rc;
}

#define SG_WRAPPER_(name, base, stream, params, call)                         \
    struct sg_args_##name { SG_FIELDS(params) };                              \
    static CUresult sg_fwd_##name(const void *p)                              \
    {                                                                         \
        const struct sg_args_##name *a = p;                                   \
        (void)a;                            /* P0: no argument */             \
        return sg_real.name(SG_UNPACK(params));                               \
    }                                                                         \
    static __attribute__((noinline)) CUresult sg_hook_##name(SG_PARAMS(params)); \
    SG_EXPORT CUresult name(SG_PARAMS(params))                                \
    {                                                                         \
        if ((sg_call){ call }.kind == SG_CALL_KERNEL) SG_LAUNCH_DIRECT_(name, params, call); \
        return sg_hook_##name(SG_ARGS(params));                               \
    }                                                                         \
    static CUresult sg_hook_##name(SG_PARAMS(params))                         \
    {                                                                         \
        sg_ensure_init();                                                     \
        __atomic_fetch_add(&sg_hook_counters[SG_ID_##name].calls, 1,          \
                           __ATOMIC_RELAXED);                                 \
        if (__builtin_expect(!sg_real.name, 0)) return sg_missing_real(SG_ID_##name); \
        if (sg_passthrough_all && (sg_call){ call }.kind == SG_CALL_KERNEL)   \
            sg_launch_known = sg_launch_all;   /* off: every launch direct */ \
        if (sg_passthrough_all || sg_in_hook) return sg_real.name(SG_ARGS(params)); \
        struct sg_args_##name a_ = { SG_ARGS(params) };                       \
        if ((sg_call){ call }.kind == SG_CALL_LAUNCH ||                       \
            (sg_call){ call }.kind == SG_CALL_KERNEL) {                       \
            /* the hottest hooks (a graph launch every step, a kernel */      \
            /* launch per captured node): only what they read is set (an */   \
            /* initialiser would zero the whole union, ~90 bytes) */          \
            sg_call l_;                                                       \
            l_.hook = SG_ID_##name;                                           \
            l_.kind = (sg_call){ call }.kind;                                 \
            l_.forward = sg_fwd_##name;                                       \
            l_.args = &a_;                                                    \
            l_.per_thread = (stream) == SG_STREAM_PTSZ;                       \
            l_.gb = (sg_call){ call }.gb;                                     \
            if ((sg_call){ call }.kind == SG_CALL_LAUNCH)                     \
                l_.u.launch = (sg_call){ call }.u.launch;                     \
            else                                                              \
                SG_KERNEL_SET_(l_, call);                                     \
            return sg_dispatch(&l_);                                          \
        }                                                                     \
        sg_call c_ = { .hook = SG_ID_##name, .forward = sg_fwd_##name,        \
                       .args = &a_, .per_thread = (stream) == SG_STREAM_PTSZ, \
                       call };                                                \
        return sg_dispatch(&c_);                                              \
    }
#define SG_HOOK SG_WRAPPER_
#define SG_RESOLVER(...)
#include "hooks.def"
#undef SG_HOOK
#undef SG_RESOLVER

#define SG_ENTRY_(name, b, s, ...)                                            \
    { #name, b, s, (void *)name, offsetof(sg_real_table, name) },
const sg_hook_entry sg_hooks[SG_HOOK_COUNT] = {
#define SG_HOOK SG_ENTRY_
#define SG_RESOLVER SG_ENTRY_
#include "hooks.def"
#undef SG_HOOK
#undef SG_RESOLVER
};

#define SG_NAME_(name, ...) #name,
const char *const sg_hook_names[SG_HOOK_COUNT] = {
#define SG_HOOK SG_NAME_
#define SG_RESOLVER SG_NAME_
#include "hooks.def"
#undef SG_HOOK
#undef SG_RESOLVER
};

void *sg_hook_real(int i)
{
    void *p;
    memcpy(&p, (const char *)&sg_real + sg_hooks[i].real_offset, sizeof p);
    return p;
}

/* sg_hook_find() is in dlsym_entry.c (reached from dlsym before start-up). */

void *sg_hook_hand_out(int i)
{
    __atomic_fetch_add(&sg_hook_counters[i].resolved, 1, __ATOMIC_RELAXED);
    return sg_hooks[i].wrapper;
}
