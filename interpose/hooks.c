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

#include "../core/core.h"

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
#define SG_FREE(p) .kind = SG_CALL_FREE, .u.free = { .ptr = (p) }
#define SG_FREE_ASYNC(p, s) .kind = SG_CALL_FREE, .u.free = { .ptr = (p), .stream = (s), .async = 1 }
#define SG_ADDR_RANGE(b, sz, p) .kind = SG_CALL_ADDR_RANGE, \
    .u.range = { .base = (b), .size = (sz), .ptr = (p) }
#define SG_PTR_ATTR(d, a, p) .kind = SG_CALL_PTR_ATTR, .u.attr = { .data = (d), .attr = (a), .ptr = (p) }
#define SG_PTR_ATTRS(n_, a, d, p) .kind = SG_CALL_PTR_ATTRS, \
    .u.attrs = { .n = (n_), .attrs = (a), .data = (d), .ptr = (p) }
#define SG_IPC_HANDLE(h, p) .kind = SG_CALL_IPC_HANDLE, .u.ipc = { .out = (h), .ptr = (p) }
#define SG_RETAIN_HANDLE(h, a) .kind = SG_CALL_RETAIN_HANDLE, .u.retain = { .out = (h), .addr = (a) }
#define SG_MEM_ACCESS(f, l, p) .kind = SG_CALL_MEM_ACCESS, \
    .u.access = { .flags = (f), .loc = (l), .ptr = (p) }
#define SG_MEM_INFO(f, t) .kind = SG_CALL_MEM_INFO, .u.info = { .free = (f), .total = (t) }
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
#define SG_PRIMARY_RETAIN(o, d) .kind = SG_CALL_PRIMARY_RETAIN, .u.primary = { .out = (o), .dev = (d) }
#define SG_PRIMARY_DROP(d) .kind = SG_CALL_PRIMARY_DROP, .u.primary = { .dev = (d) }
#define SG_CAPTURE_BEGIN(s) .kind = SG_CALL_CAPTURE_BEGIN, .u.stream = { .stream = (s) }
#define SG_CAPTURE_END(s) .kind = SG_CALL_CAPTURE_END, .u.stream = { .stream = (s) }
#define SG_MODULE_UNLOAD .kind = SG_CALL_MODULE_UNLOAD
#define SG_GRAPH_DESTROY(g) .kind = SG_CALL_GRAPH_DESTROY, .u.graph = { .graph = (g) }
#define SG_NODE_DESTROY(n) .kind = SG_CALL_NODE_DESTROY, .u.node = { .node = (n) }
#define SG_INST(o, g) .kind = SG_CALL_INSTANTIATE, .u.inst = { .out = (o), .graph = (g) }
#define SG_LAUNCH(e, s) .kind = SG_CALL_LAUNCH, .u.launch = { .exec = (e), .stream = (s) }
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
#define SG_EXEC_DIRTY(e, n) .kind = SG_CALL_EXEC_DIRTY, .u.exec = { .exec = (e), .node = (n) }
#define SG_EXEC_DESTROY(e) .kind = SG_CALL_EXEC_DESTROY, .u.exec = { .exec = (e) }

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
        return sg_real.name(SG_UNPACK(params));                               \
    }                                                                         \
    SG_EXPORT CUresult name(SG_PARAMS(params))                                \
    {                                                                         \
        sg_ensure_init();                                                     \
        __atomic_fetch_add(&sg_hook_counters[SG_ID_##name].calls, 1,          \
                           __ATOMIC_RELAXED);                                 \
        if (__builtin_expect(!sg_real.name, 0)) return sg_missing_real(SG_ID_##name); \
        if (sg_passthrough_all || sg_in_hook) return sg_real.name(SG_ARGS(params)); \
        struct sg_args_##name a_ = { SG_ARGS(params) };                       \
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
