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

/* What each hooks.def `call` column tells core/ (fields of sg_call). */
#define SG_FWD .kind = SG_CALL_FORWARD
#define SG_ALLOC(out, n, s, p) .kind = SG_CALL_ALLOC, .dptr_out = (out), .bytes = (n), \
    .stream = (s), .pool = (p)
#define SG_ALLOC_ASYNC(out, n, s, p) SG_ALLOC(out, n, s, p), .async = 1
#define SG_FREE(p, a, s) .kind = SG_CALL_FREE, .dptr = (p), .async = (a), .stream = (s)
#define SG_ADDR_RANGE(b, sz, p) .kind = SG_CALL_ADDR_RANGE, .base_out = (b), .size_out = (sz), \
    .dptr = (p)
#define SG_PTR_ATTR(d, a, p) .kind = SG_CALL_PTR_ATTR, .attr_data = (d), .attr = (a), .dptr = (p)
#define SG_PTR_ATTRS(n, a, d, p) .kind = SG_CALL_PTR_ATTRS, .nattrs = (n), .attrs = (a), \
    .attr_datas = (d), .dptr = (p)
#define SG_IPC_HANDLE(h, p) .kind = SG_CALL_IPC_HANDLE, .ipc_out = (h), .dptr = (p)
#define SG_CTX_DESTROY(c) .kind = SG_CALL_CTX_DESTROY, .ctx = (c)
#define SG_PRIMARY_RETAIN(out, d) .kind = SG_CALL_PRIMARY_RETAIN, .ctx_out = (out), .device = (d)
#define SG_PRIMARY_DROP(d) .kind = SG_CALL_PRIMARY_DROP, .device = (d)
#define SG_INST(out, g) .kind = SG_CALL_INSTANTIATE, .exec_out = (out), .graph = (g)
#define SG_LAUNCH(e, s) .kind = SG_CALL_LAUNCH, .exec = (e), .stream = (s)
#define SG_UPDATE_GRAPH(e, g, info) .kind = SG_CALL_UPDATE_GRAPH, .exec = (e), .graph = (g), \
    .result_info = (info)
#define SG_UPDATE_GRAPH_V1(e, g, en, r) .kind = SG_CALL_UPDATE_GRAPH, .exec = (e), .graph = (g), \
    .error_node_out = (en), .update_result_out = (r)
#define SG_UPDATE_KERNEL(e, n, p) .kind = SG_CALL_UPDATE_KERNEL, .exec = (e), .node = (n), \
    .kparams = (p)
#define SG_UPDATE_KERNEL_V1(e, n, p) .kind = SG_CALL_UPDATE_KERNEL, .exec = (e), .node = (n), \
    .kparams_v1 = (p)
#define SG_UPDATE_NODE(e, n, p) .kind = SG_CALL_UPDATE_NODE, .exec = (e), .node = (n), \
    .nparams = (p)
#define SG_EXEC_DIRTY(e) .kind = SG_CALL_EXEC_DIRTY, .exec = (e)
#define SG_EXEC_DESTROY(e) .kind = SG_CALL_EXEC_DESTROY, .exec = (e)

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
