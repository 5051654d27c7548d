/*
 * tests/unit/test_profiled.c: core/profiled.c through sg_core_call() and its
 * own API, against the in-memory fake driver (fake_graph.h) extended with a
 * fake clone / instantiate / exec update / launch, a fake slot API
 * (sg_prof_set_slot_ops) and a fake allocation table (sg_prof_set_find):
 * pointer discovery (interior pointers, pointers inside by-value structs,
 * `extra` buffers, memcpy / memset operands), the decision (plain,
 * generations, each fallback), lazy acceptance against demotion, the order
 * in which generations are chosen, translation through slots, and
 * always_update's would_skip_profiled.
 */
#include "check.h"
#include "fake_graph.h"
#include "core/costs.h"
#include "core/fingerprint.h"
#include "core/profiled.h"
#include "core/stats.h"

#include <stdlib.h>

/* ------------------------------------------------------------ fake allocations */

#define CTX ((CUcontext)(uintptr_t)0xc7c7)
static const sg_alloc_info allocs[] = {
    { .base = 0x71000000, .size = 0x1000, .id = 1, .ctx = CTX, .own_handles = 1 },  /* in[0] */
    { .base = 0x71010000, .size = 0x1000, .id = 2, .ctx = CTX, .own_handles = 1 },  /* in[1] */
    { .base = 0x71020000, .size = 0x1000, .id = 3, .ctx = CTX, .own_handles = 1 },  /* in[2] */
    { .base = 0x72000000, .size = 0x1000, .id = 4, .ctx = CTX, .own_handles = 1 },  /* out */
    { .base = 0x73000000, .size = 0x1000, .id = 5, .ctx = CTX, .own_handles = 0 },  /* shared handles */
};
static int fake_find(CUdeviceptr p, sg_alloc_info *out)
{
    for (size_t i = 0; i < sizeof allocs / sizeof *allocs; i++)
        if (p >= allocs[i].base && p < allocs[i].base + allocs[i].size) {
            *out = allocs[i];
            return 1;
        }
    return 0;
}

/* ------------------------------------------------------------ fake graph execs */

static struct {
    int clone, inst, exec_update, launch, launch_ptsz, exec_destroy, graph_destroy, kset, cpset;
    CUdeviceptr cpset_src;          /* srcDevice of the last memcpy node set */
    CUgraphExec launched;
    uint64_t kset_word0;            /* first argument word of the last kernel node set */
    int fail_inst;
    /* restore paths: failures to inject, and what the X_0 per-node path got */
    int fail_kset, fail_update, fail_xkset, fail_nset;
    int xkset, nset;
    CUgraphExec xkset_exec;
    CUgraphNode xkset_node;
    uint64_t xkset_word0;
} fx;
static fg clones[4];
static int nclones;

static CUresult fx_clone(CUgraph *out, CUgraph g)
{
    fx.clone++;
    fg_copy(&clones[nclones], (fg *)g);
    *out = (CUgraph)&clones[nclones++];
    return CUDA_SUCCESS;
}
static CUresult fx_find_in_clone(CUgraphNode *out, CUgraphNode orig, CUgraph clone)
{
    fg_node *o = (fg_node *)orig;
    *out = (CUgraphNode)&((fg *)clone)->nodes[o - o->g->nodes];
    return CUDA_SUCCESS;
}
static CUresult fx_kset(CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    (void)n;
    fx.kset++;
    if (fx.fail_kset) return CUDA_ERROR_UNKNOWN;
    CHECK(p->extra && p->extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER && !p->kernelParams);
    memcpy(&fx.kset_word0, p->extra[1], 8);
    return CUDA_SUCCESS;
}
static CUresult fx_xkset(CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    fx.xkset++;
    if (fx.fail_xkset) return CUDA_ERROR_INVALID_VALUE;
    CHECK(p->extra && p->extra[0] == CU_LAUNCH_PARAM_BUFFER_POINTER && !p->kernelParams);
    fx.xkset_exec = e;
    fx.xkset_node = n;
    memcpy(&fx.xkset_word0, p->extra[1], 8);
    return CUDA_SUCCESS;
}
static CUresult fx_nset(CUgraphNode n, CUgraphNodeParams *p)
{
    (void)n;
    fx.nset++;
    if (fx.fail_nset) return CUDA_ERROR_UNKNOWN;
    if (p->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        CHECK(p->kernel.extra && !p->kernel.kernelParams);
        memcpy(&fx.kset_word0, p->kernel.extra[1], 8);
    }
    return CUDA_SUCCESS;
}
/* memcpy / memset clone nodes: set (their address words may be translated
 * too: every pointer into an aliased buffer is) */
static CUresult fx_cpset(CUgraphNode n, const CUDA_MEMCPY3D *p)
{
    (void)n;
    fx.cpset++;
    fx.cpset_src = p->srcDevice;
    return CUDA_SUCCESS;
}
static CUresult fx_msset(CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p) { (void)n; (void)p; return CUDA_SUCCESS; }
static CUresult fx_inst(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    (void)g; (void)flags;
    if (fx.fail_inst) return CUDA_ERROR_OUT_OF_MEMORY;
    *e = (CUgraphExec)(uintptr_t)(0xa000 + ++fx.inst);
    return CUDA_SUCCESS;
}
static CUresult fx_exec_update(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *i)
{
    (void)e; (void)g; (void)i;
    fx.exec_update++;
    return fx.fail_update ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}
static CUresult fx_launch(CUgraphExec e, CUstream s) { (void)s; fx.launch++; fx.launched = e; return CUDA_SUCCESS; }
static CUresult fx_exec_destroy(CUgraphExec e) { (void)e; fx.exec_destroy++; return CUDA_SUCCESS; }
static CUresult fx_graph_destroy(CUgraph g) { (void)g; fx.graph_destroy++; return CUDA_SUCCESS; }
static CUresult fx_ctx_device(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }

/* ------------------------------------------------------------ fake slots */

struct sg_slot_gen { CUdeviceptr base; size_t n; uint64_t bound[4]; };
static struct { int create, bind, remap, launched, destroy, fail_create, fail_bind; } fs;
static int fs_create(CUcontext c, CUdevice d, const size_t *sizes, size_t n, sg_slot_gen **out)
{
    (void)c; (void)d; (void)sizes;
    if (fs.fail_create) return -1;
    sg_slot_gen *g = calloc(1, sizeof *g);
    g->base = 0x90000000ull + (CUdeviceptr)fs.create++ * 0x1000000;
    g->n = n;
    *out = g;
    return 0;
}
static CUdeviceptr fs_addr(const sg_slot_gen *g, size_t i) { return g->base + i * 0x10000; }
static int fs_matches(const sg_slot_gen *g, const sg_slot_bind *w)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->bound[i] != w[i].id) return 0;
    return 1;
}
static int fs_idle(sg_slot_gen *g) { (void)g; return 1; }
static int fs_bind(sg_slot_gen *g, const sg_slot_bind *w, int wait)
{
    (void)wait;
    fs.bind++;
    if (fs.fail_bind) return -1;
    for (size_t i = 0; i < g->n; i++)
        if (g->bound[i] != w[i].id) { g->bound[i] = w[i].id; fs.remap++; }
    return 0;
}
static int fs_launched(sg_slot_gen *g, CUstream s, int pt) { (void)g; (void)s; (void)pt; fs.launched++; return 0; }
static void fs_destroy(sg_slot_gen *g) { fs.destroy++; free(g); }
static sg_slot_stats fs_stats(void) { sg_slot_stats s; memset(&s, 0, sizeof s); return s; }
static const sg_prof_slot_ops fake_slots = { fs_create, fs_addr, fs_matches, fs_idle, fs_bind,
                                             fs_launched, fs_destroy, fs_stats };

/* ------------------------------------------------------------ set-up */

static ff f_k;
static CUdeviceptr v_in, v_out = 0x72000000;
static uint32_t v_salt = 7;
static fg graph;

/* kernel(in, salt, out) -> memcpy in -> out -> memset out */
static void make(void) { fg_make_chain(&graph, &f_k, &v_in, &v_salt, &v_out); }

/* STABLEGRAPH_VARIANT_MEMORY of the next setup (variant_memory_budget). */
static size_t t_budget = SIZE_MAX;

static void setup(sg_policy policy, sg_alias_mode alias, int gens, int with_clone)
{
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = policy;
    cfg.variant_memory = t_budget;
    cfg.profile_steps = 3;
    cfg.alias = alias;
    cfg.alias_min_bytes = 4096;
    cfg.max_generations = gens;
    cfg.cost_times = SG_COST_TIMES_TABLE;     /* reproducible: the table's figures */
    /* Variants cost nothing here, so that they are bought at the decision
     * (renting_then_buying puts the shipped figures back). */
    sg_costs_reset();
    sg_costs_set(SG_COSTID_INSTANTIATE, 0, 0);
    sg_costs_set(SG_COSTID_GRAPH_NODE_SET, 0, 0);
    sg_costs_set(SG_COSTID_ADDRESS_RESERVE, 0, 0);
    sg_costs_set(SG_COSTID_UPDATE, 0, 0);
    sg_core_reset();
    sg_core_init(&cfg);
    fg_install();
    sg_driver d = sg_drv;
    if (with_clone) {
        d.cuGraphClone = fx_clone;
        d.cuGraphNodeFindInClone = fx_find_in_clone;
    }
    d.cuGraphKernelNodeSetParams_v2 = fx_kset;
    d.cuGraphExecKernelNodeSetParams_v2 = fx_xkset;
    d.cuGraphNodeSetParams = fx_nset;
    d.cuGraphMemcpyNodeSetParams = fx_cpset;
    d.cuGraphMemsetNodeSetParams = fx_msset;
    d.cuGraphInstantiateWithFlags = fx_inst;
    d.cuGraphExecUpdate_v2 = fx_exec_update;
    d.cuGraphLaunch = fx_launch;
    d.cuGraphExecDestroy = fx_exec_destroy;
    d.cuGraphDestroy = fx_graph_destroy;
    d.cuCtxGetDevice = fx_ctx_device;
    sg_driver_set(&d);
    sg_prof_set_slot_ops(&fake_slots);
    sg_prof_set_find(fake_find);
    memset(&fx, 0, sizeof fx);
    memset(&fs, 0, sizeof fs);
    nclones = 0;
    static const size_t sizes[] = { 8, 4, 8 };
    f_k = ff_make(3, sizes);
    v_in = allocs[0].base;
    make();
}

typedef struct fwd { int calls; CUgraphExec *out; CUgraphExec make; } fwd;
static CUresult fake_forward(const void *p)
{
    fwd *a = (fwd *)p;
    a->calls++;
    if (a->out) *a->out = a->make;
    return CUDA_SUCCESS;
}

#define EXEC ((CUgraphExec)(uintptr_t)0xe001)
static void instantiate(void)
{
    fg_made(&graph);
    CUgraphExec got = NULL;
    fwd f = { 0, &got, EXEC };
    sg_call c = { .kind = SG_CALL_INSTANTIATE, .forward = fake_forward, .args = &f,
                  .u.inst = { .out = &got, .graph = (CUgraph)&graph } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
}

/* Points the kernel node at `in` (cuGraphExecKernelNodeSetParams_v2);
 * returns whether the program's call reached the (fake) driver. */
static int set_in(CUdeviceptr in)
{
    v_in = in;
    fg_node *nd = &graph.nodes[0];
    memcpy(nd->args[0], &in, 8);
    fwd f = { 0, NULL, NULL };
    sg_call c = { .kind = SG_CALL_UPDATE_NODE, .forward = fake_forward, .args = &f,
                  .u.node_update = { .exec = EXEC, .node = (CUgraphNode)nd, .kind = SG_NODE_KERNEL,
                                     .params = &nd->kp } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    return f.calls;
}

/* Launches; *rc gets what the program got; returns whether the program's
 * own call (X_0) was forwarded. */
static int launch_rc(CUresult *rc)
{
    fwd f = { 0, NULL, NULL };
    sg_call c = { .kind = SG_CALL_LAUNCH, .forward = fake_forward, .args = &f, .u.launch = { EXEC, NULL } };
    *rc = sg_core_call(&c);
    return f.calls;
}

/* Launches; returns whether the program's own call (X_0) was forwarded. */
static int launch(void)
{
    fwd f = { 0, NULL, NULL };
    sg_call c = { .kind = SG_CALL_LAUNCH, .forward = fake_forward, .args = &f, .u.launch = { EXEC, NULL } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    return f.calls;
}

static void destroy(void)
{
    fwd f = { 0, NULL, NULL };
    sg_call c = { .kind = SG_CALL_EXEC_DESTROY, .forward = fake_forward, .args = &f, .u.exec = { EXEC, NULL } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
}

static void grab(const sg_exec_info *e, void *u) { *(sg_exec_info *)u = *e; }
static sg_exec_info exec_info(void)
{
    sg_exec_info i;
    memset(&i, 0, sizeof i);
    sg_exec_foreach(grab, &i);
    return i;
}

/* Three profiled launches over in[0], in[1], in[2]. */
static void profile_rotation(void)
{
    for (int s = 0; s < 3; s++) {
        set_in(allocs[s].base);
        CHECK_EQ(launch(), 1);
    }
}

/* ------------------------------------------------------------ tests */

typedef struct found { sg_prof_pos p[16]; int n; } found;
static void on_pos(void *u, sg_prof_pos pos, uint64_t v, const sg_alloc_info *ai)
{
    found *f = u;
    (void)v; (void)ai;
    if (f->n < 16) f->p[f->n++] = pos;
}

TEST(pointer_discovery)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_AUTO, 4, 1);
    /* f(ptr, 4-byte scalar, struct { u64 x; interior ptr }) */
    static const size_t sz[] = { 8, 4, 16 };
    static ff f3;
    f3 = ff_make(3, sz);
    fg g;
    memset(&g, 0, sizeof g);
    CUdeviceptr p0 = allocs[3].base;
    uint32_t scalar = 7;
    unsigned char st[16];
    uint64_t x = 5, interior = allocs[1].base + 0x80;
    memcpy(st, &x, 8);
    memcpy(st + 8, &interior, 8);
    const void *vals[] = { &p0, &scalar, st };
    fg_kernel(&g, &f3, vals);
    /* the same kernel through `extra`: a packed buffer */
    fg_node *ex = fg_kernel(&g, &f3, vals);
    static unsigned char buf[32];
    static size_t bufsize = 32;
    memset(buf, 0, sizeof buf);
    memcpy(buf, &p0, 8);
    memcpy(buf + 8, &scalar, 4);
    memcpy(buf + 16, st, 16);
    static void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE,
                             &bufsize, CU_LAUNCH_PARAM_END };
    ex->kp.kernelParams = NULL;
    ex->kp.extra = extra;
    fg_node *cp = fg_other(&g, CU_GRAPH_NODE_TYPE_MEMCPY);
    cp->cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp->cp.srcDevice = allocs[2].base + 0x10;
    cp->cp.dstMemoryType = CU_MEMORYTYPE_HOST;      /* host operand: not a position */
    cp->cp.dstHost = (void *)(uintptr_t)allocs[3].base;
    cp->cp.WidthInBytes = 16;
    cp->cp.Height = cp->cp.Depth = 1;
    fg_node *ms = fg_other(&g, CU_GRAPH_NODE_TYPE_MEMSET);
    ms->ms.dst = allocs[3].base + 0x20;
    ms->ms.elementSize = 4;
    ms->ms.width = 4;
    ms->ms.height = 1;
    sg_fp fp;
    sg_fp_scratch s;
    memset(&fp, 0, sizeof fp);
    memset(&s, 0, sizeof s);
    CHECK_EQ(sg_fp_build(&fp, (CUgraph)&g, &s, NULL), 0);
    found f = { .n = 0 };
    sg_prof_scan(&fp, on_pos, &f);
    CHECK_EQ(f.n, 6);
    uint32_t want[][2] = { { 0, 0 }, { 0, 24 }, { 1, 0 }, { 1, 24 },
                           { 2, offsetof(CUDA_MEMCPY3D, srcDevice) },
                           { 3, offsetof(CUDA_MEMSET_NODE_PARAMS, dst) } };
    for (int i = 0; i < f.n && i < 6; i++) {
        CHECK_EQ(f.p[i].node, want[i][0]);
        CHECK_EQ(f.p[i].off, want[i][1]);
    }
    sg_fp_free(&fp);
    sg_fp_scratch_free(&s);
}

TEST(decision_plain_when_nothing_varies)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_AUTO, 4, 1);
    instantiate();
    CHECK_EQ(fx.clone, 0);                    /* the clone waits for a purchase */
    for (int s = 0; s < 4; s++) CHECK_EQ(launch(), 1);
    sg_exec_info i = exec_info();
    CHECK_EQ(i.profile.decided, 1);
    CHECK_EQ(i.profile.generations, 0);
    CHECK(strcmp(i.profile.why, "no pointer varied") == 0);
    CHECK(i.profile.positions >= 3);
    /* a pointer update now goes to the driver (PLAIN = skip_temp) */
    CHECK_EQ(set_in(allocs[1].base), 1);
    destroy();
    CHECK_EQ(fx.clone, 0);                    /* a plain exec never copies its graph */
    CHECK_EQ(fx.graph_destroy, 0);
}

/* Varying pointers without aliasing: the generation holding L is found
 * first; a new one is made while fewer than the maximum exist; then the
 * least recently used one is updated. */
TEST(generations_choice_order)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 2, 1);
    instantiate();
    profile_rotation();                       /* X_0 holds in[2] */
    CHECK_EQ(set_in(allocs[0].base), 1);      /* still profiling: forwarded */
    CHECK_EQ(launch(), 1);                    /* decides; X_0 now holds in[0] */
    sg_exec_info i = exec_info();
    CHECK_EQ(i.profile.generations, 1);
    CHECK_EQ(i.profile.varying_positions, 1);  /* the kernel's `in` (the memcpy keeps its own) */
    CHECK_EQ(set_in(allocs[1].base), 0);      /* accepted without the driver */
    CHECK_EQ(launch(), 0);                    /* a new variant runs instead of X_0 */
    CHECK_EQ(fx.inst, 1);
    CHECK_EQ(fx.launch, 1);
    CHECK(fx.launched == (CUgraphExec)(uintptr_t)0xa001);
    CHECK_EQ(fx.kset_word0, allocs[1].base); /* the clone got the raw new pointer */
    CHECK_EQ(set_in(allocs[0].base), 0);
    CHECK_EQ(launch(), 1);                    /* X_0 holds in[0]: no driver call but the launch */
    CHECK_EQ(fx.exec_update, 0);
    CHECK_EQ(set_in(allocs[2].base), 0);
    CHECK_EQ(launch(), 0);                    /* two exist: the LRU (variant 1) is updated */
    CHECK_EQ(fx.exec_update, 1);
    CHECK_EQ(fx.inst, 1);
    i = exec_info();
    CHECK_EQ(i.reasons[SG_REASON_POINTER_NOT_ALIASED], 1);
    CHECK_EQ(i.variants, 1);
    destroy();
    CHECK_EQ(fx.exec_destroy, 1);             /* the variant went with the exec */
}

/* Ski rental (core/prof_rent.c), at core/costs.tsv's figures: decided for
 * variants, the exec forwards its updates until they have cost as much as
 * the variants would (2 instantiations of 3 nodes, each with its varying
 * node set in the clone: 2 x (0.3 + 3 x 0.9 + 0.3) us = 6.6 us; a per-node
 * update: 0.3 + 1.0247 us, so the 5th pays for them), then buys them at the
 * launch after the 5th update: later updates are accepted, a variant made.
 * An update variants would not carry while renting sends the exec back to
 * profiling, rent forgotten. */
TEST(renting_then_buying)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    sg_costs_reset();
    instantiate();
    profile_rotation();
    CHECK_EQ(set_in(allocs[0].base), 1);
    CHECK_EQ(launch(), 1);                    /* decides: renting */
    sg_exec_info i = exec_info();
    CHECK_EQ(i.profile.renting, 1);
    CHECK_EQ(i.profile.generations, 0);
    CHECK_EQ(i.profile.variants_priced, 2);
    CHECK_EQ(i.profile.variant_ns, 6600);
    CHECK_EQ(i.profile.decided_at, 4);
    for (int s = 1; s <= 4; s++) {
        CHECK_EQ(set_in(allocs[s % 3].base), 1);   /* forwarded, charged */
        CHECK_EQ(launch(), 1);                     /* the program's exec */
        CHECK_EQ(exec_info().profile.forwarded_ns, (unsigned long long)s * 1325);
    }
    CHECK_EQ(fx.inst, 0);
    CHECK_EQ(exec_info().profile.renting, 1);
    CHECK_EQ(set_in(allocs[5 % 3].base), 1);  /* the 5th: 6625 >= 6600 ns */
    CHECK_EQ(launch(), 1);                    /* bought; X_0 holds L (in[2]) */
    CHECK_EQ(fx.inst, 0);
    i = exec_info();
    CHECK_EQ(i.profile.renting, 0);
    CHECK_EQ(i.profile.generations, 1);
    CHECK_EQ(i.profile.bought_at, 9);
    CHECK_EQ(i.profile.rented_updates, 5);
    CHECK_EQ(set_in(allocs[0].base), 0);      /* accepted without the driver */
    CHECK_EQ(launch(), 0);                    /* a variant made for in[0] runs */
    CHECK_EQ(fx.inst, 1);
    CHECK_EQ(set_in(allocs[2].base), 0);
    CHECK_EQ(launch(), 1);                    /* X_0 holds in[2] */
    destroy();

    /* renting ends on an update variants would not carry */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    sg_costs_reset();
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();
    CHECK_EQ(set_in(allocs[1].base), 1);
    launch();
    CHECK(exec_info().profile.forwarded_ns > 0);
    graph.nodes[0].kp.gridDimX = 8;
    CHECK_EQ(set_in(allocs[2].base), 1);
    i = exec_info();
    CHECK_EQ(i.profile.renting, 0);
    CHECK(strstr(i.profile.why, "renting stopped") != NULL);
    for (int s = 0; s < 3; s++) {              /* profiled again, decided again: renting from 0 */
        set_in(allocs[s].base);
        CHECK_EQ(launch(), 1);
    }
    set_in(allocs[0].base);
    CHECK_EQ(launch(), 1);
    i = exec_info();
    CHECK_EQ(i.profile.renting, 1);
    CHECK_EQ(i.profile.forwarded_ns, 0);
    CHECK_EQ(fx.inst, 0);
    destroy();
}

/* The host memory budget (STABLEGRAPH_VARIANT_MEMORY, prof_rent.c). With
 * none, an exec whose pointers vary stays PLAIN and says why (what its
 * variants would hold, what was free): every profiled launch brought a new
 * state, so all the variants that may be made (3 with 4 generations) must
 * fit. Profiled over in[0], in[1], in[0] (two states), one variant must fit:
 * with room for exactly one, it is bought and serves in[0]; in[2] needs a
 * variant the budget has no room for: the exec gives its variants up
 * (destroyed, the program's exec restored and run), and their bytes go back
 * to the budget, as they do when an exec is destroyed. */
static void profile_two_states(void)
{
    for (int s = 0; s < 3; s++) {
        set_in(allocs[s % 2].base);
        CHECK_EQ(launch(), 1);
    }
}

TEST(variant_memory_budget)
{
    t_budget = 0;
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    CHECK_EQ(set_in(allocs[0].base), 1);
    CHECK_EQ(launch(), 1);                    /* decides: no room */
    sg_exec_info i = exec_info();
    CHECK_EQ(i.profile.generations, 0);
    CHECK_EQ(i.profile.renting, 0);
    CHECK(i.profile.why && strstr(i.profile.why, "STABLEGRAPH_VARIANT_MEMORY") != NULL);
    unsigned long long one = i.profile.variant_host_bytes / 3;
    CHECK(one > 0);
    CHECK_EQ(i.profile.variant_host_bytes, 3 * one);
    CHECK_EQ(i.profile.variant_memory_free, 0);
    CHECK_EQ(set_in(allocs[1].base), 1);      /* forwarded, as skip_temp would */
    CHECK_EQ(launch(), 1);
    CHECK_EQ(fx.inst, 0);
    destroy();

    t_budget = one;
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_two_states();
    CHECK_EQ(set_in(allocs[1].base), 1);
    CHECK_EQ(launch(), 1);                    /* bought (variants free here); X_0 holds in[1] */
    i = exec_info();
    CHECK_EQ(i.profile.generations, 1);
    CHECK_EQ(i.profile.variant_host_bytes, one);
    CHECK_EQ(i.profile.variant_memory_free, one);
    CHECK_EQ(set_in(allocs[0].base), 0);
    CHECK_EQ(launch(), 0);                    /* variant 1 */
    CHECK_EQ(fx.inst, 1);
    CHECK_EQ(sg_prof_mem_free(), 0ULL);       /* it took it all */
    CHECK_EQ(set_in(allocs[1].base), 0);
    CHECK_EQ(launch(), 1);                    /* X_0, no driver call but the launch */
    CHECK_EQ(set_in(allocs[0].base), 0);
    CHECK_EQ(launch(), 0);
    CHECK_EQ(fx.exec_update, 0);
    CHECK_EQ(set_in(allocs[2].base), 0);      /* a third state: accepted ... */
    CHECK_EQ(launch(), 1);                    /* ... no room: given up, X_0 restored and run */
    CHECK_EQ(fx.inst, 1);
    CHECK_EQ(fx.exec_destroy, 1);
    i = exec_info();
    CHECK_EQ(i.profile.generations, 0);
    CHECK(i.profile.why && strstr(i.profile.why, "has no room") != NULL);
    CHECK_EQ(sg_prof_mem_free(), one);        /* returned */
    CHECK_EQ(set_in(allocs[0].base), 1);      /* PLAIN: forwarded */
    destroy();

    t_budget = one;                           /* destroyed with its variant: returned too */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_two_states();
    set_in(allocs[1].base);
    launch();
    set_in(allocs[0].base);
    CHECK_EQ(launch(), 0);
    CHECK_EQ(sg_prof_mem_free(), 0ULL);
    destroy();
    CHECK_EQ(sg_prof_mem_free(), one);
    t_budget = SIZE_MAX;
}

/* A change GENERATIONS mode cannot accept (dims) demotes: X_0 restored to
 * L, variants destroyed, profiling again, the update forwarded. */
TEST(demotion_on_dims_change)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();
    set_in(allocs[1].base);
    CHECK_EQ(launch(), 0);                    /* variant 1 */
    CHECK_EQ(fx.inst, 1);
    graph.nodes[0].kp.gridDimX = 8;
    int before = fx.exec_update;
    CHECK_EQ(set_in(allocs[1].base), 1);      /* forwarded */
    CHECK_EQ(fx.exec_update, before + 1);     /* X_0 (holding in[0]) restored to L first */
    CHECK_EQ(fx.exec_destroy, 1);
    sg_exec_info i = exec_info();
    CHECK_EQ(i.demotions, 1);
    CHECK_EQ(i.reasons[SG_REASON_DIMS_CHANGED], 1);
    CHECK_EQ(launch(), 1);                    /* profiling: the program's exec */
    destroy();
}

/* Aliasing with one generation: X_0 is translated once (slot address +
 * the interior offset); afterwards other buffers only rebind the slot. */
TEST(aliasing_translation_and_rebind)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_ALWAYS, 1, 1);
    instantiate();
    profile_rotation();
    CHECK_EQ(set_in(allocs[0].base + 0x40), 1);
    CHECK_EQ(launch(), 1);                    /* decide; translate X_0 */
    sg_exec_info i = exec_info();
    CHECK_EQ(i.profile.aliased_slots, 1);
    CHECK_EQ(fs.create, 1);
    CHECK_EQ(fx.exec_update, 1);
    CHECK_EQ(fx.kset_word0, 0x90000000ull + 0x40);   /* slot 0 + offset */
    CHECK_EQ(fs.launched, 1);
    CHECK_EQ(fx.cpset_src, 0x90000000ull);    /* the memcpy node reads in[0] too: translated */
    CHECK_EQ(set_in(allocs[1].base + 0x40), 0);
    int remaps = fs.remap;
    CHECK_EQ(launch(), 1);
    CHECK_EQ(fs.remap, remaps + 1);           /* rebound ... */
    /* ... and updated once: the memcpy node still reads in[0], which is no
     * longer the slot's buffer (every pointer is translated by value, so
     * pointers into one buffer stay consistent: issue 10, class 1) */
    CHECK_EQ(fx.exec_update, 2);
    CHECK_EQ(fx.cpset_src, allocs[0].base);
    CHECK_EQ(launch(), 1);                    /* nothing changed: no bind, no update */
    CHECK_EQ(fs.remap, remaps + 1);
    CHECK_EQ(fx.exec_update, 2);
    /* a buffer without own handles cannot be aliased: demoted for good */
    CHECK_EQ(set_in(allocs[4].base), 0);      /* the kernel word change is accepted ... */
    CHECK_EQ(launch(), 1);                    /* ... but the launch gives up and restores X_0 */
    CHECK_EQ(fx.exec_update, 3);
    CHECK_EQ(fs.destroy, 1);
    CHECK_EQ(exec_info().profile.generations, 0);
    CHECK_EQ(set_in(allocs[1].base), 1);      /* PLAIN now: forwarded */
    destroy();
}

TEST(fallbacks)
{
    /* no clone to be had (no cuGraphClone): the purchase waits, renting
     * (updates forwarded, the program's exec launched) */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 0);
    instantiate();
    profile_rotation();
    launch();
    CHECK_EQ(exec_info().profile.renting, 1);
    CHECK_EQ(exec_info().profile.generations, 0);
    for (int s = 0; s < 3; s++) {
        CHECK_EQ(set_in(allocs[s].base), 1);
        CHECK_EQ(launch(), 1);
    }
    CHECK_EQ(fx.inst, 0);
    destroy();
    /* instantiate failure: demoted for good, X_0 launched, right state */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();
    fx.fail_inst = 1;
    CHECK_EQ(set_in(allocs[1].base), 0);
    CHECK_EQ(launch(), 1);                    /* X_0, restored to in[1] */
    CHECK_EQ(fx.exec_update, 1);
    CHECK_EQ(exec_info().profile.generations, 0);
    CHECK_EQ(set_in(allocs[2].base), 1);
    destroy();
    /* slot reservation failure with aliasing */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_ALWAYS, 1, 1);
    instantiate();
    profile_rotation();
    fs.fail_create = 1;
    set_in(allocs[0].base);
    CHECK_EQ(launch(), 1);
    CHECK_EQ(exec_info().profile.generations, 0);
    CHECK_EQ(fx.kset_word0 >= 0x90000000ull, 0);   /* never translated */
    destroy();
}

/* Restoring X_0 when the library's own calls fail (profiled.c, "Restoring
 * the program's exec"): path B (per-node exec updates of the nodes that
 * differ), path C (the clone through cuGraphNodeSetParams), and every path
 * failing: the launch gets CUDA_ERROR_OUT_OF_MEMORY and X_0 does not run
 * until a later launch restores it. */
TEST(restore_paths)
{
    CUresult rc;
    /* A fails at its update: B sets the one differing node of X_0 */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();                                 /* decides; X_0 holds in[0] */
    fx.fail_inst = 1;
    fx.fail_update = 1;
    CHECK_EQ(set_in(allocs[1].base), 0);      /* accepted lazily */
    CHECK_EQ(launch_rc(&rc), 1);              /* no variant: X_0 restored through B, launched */
    CHECK_CU(rc, CUDA_SUCCESS);
    CHECK_EQ(fx.xkset, 1);                    /* only the kernel node differed */
    CHECK(fx.xkset_exec == EXEC);
    CHECK(fx.xkset_node == (CUgraphNode)&graph.nodes[0]);
    CHECK_EQ(fx.xkset_word0, allocs[1].base);
    CHECK_EQ(fx.nset, 0);
    CHECK_EQ(set_in(allocs[2].base), 1);      /* PLAIN: forwarded */
    destroy();

    /* A fails at the clone, B fails: C (generic setter + update) */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();
    fx.fail_inst = 1;
    fx.fail_kset = 1;
    fx.fail_xkset = 1;
    CHECK_EQ(set_in(allocs[1].base), 0);
    int upd = fx.exec_update;
    CHECK_EQ(launch_rc(&rc), 1);
    CHECK_CU(rc, CUDA_SUCCESS);
    CHECK_EQ(fx.nset, 1);
    CHECK_EQ(fx.kset_word0, allocs[1].base);
    CHECK_EQ(fx.exec_update, upd + 1);
    destroy();

    /* every path fails: no launch of X_0, OUT_OF_MEMORY; retried later */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();
    fx.fail_inst = 1;
    fx.fail_kset = 1;
    fx.fail_xkset = 1;
    fx.fail_nset = 1;
    CHECK_EQ(set_in(allocs[1].base), 0);
    CHECK_EQ(launch_rc(&rc), 0);              /* X_0 holds in[0]: not launched */
    CHECK_CU(rc, CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(launch_rc(&rc), 0);              /* still stale */
    CHECK_CU(rc, CUDA_ERROR_OUT_OF_MEMORY);
    fx.fail_xkset = 0;
    CHECK_EQ(launch_rc(&rc), 1);              /* B works again: restored, launched */
    CHECK_CU(rc, CUDA_SUCCESS);
    CHECK_EQ(fx.xkset_word0, allocs[1].base);
    destroy();

    /* every path fails, then the program's own update sets the node: X_0
     * holds its state again and runs (B has nothing left to set) */
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 1);
    instantiate();
    profile_rotation();
    set_in(allocs[0].base);
    launch();
    fx.fail_inst = 1;
    fx.fail_kset = 1;
    fx.fail_xkset = 1;
    fx.fail_nset = 1;
    CHECK_EQ(set_in(allocs[1].base), 0);
    CHECK_EQ(launch_rc(&rc), 0);
    CHECK_CU(rc, CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(set_in(allocs[2].base), 1);      /* forwarded: X_0's kernel node = L's */
    int xk = fx.xkset;
    CHECK_EQ(launch_rc(&rc), 1);
    CHECK_CU(rc, CUDA_SUCCESS);
    CHECK_EQ(fx.xkset, xk);                   /* nothing left to set */
    destroy();
}

/* always_update simulates the state machine: identical and lazily
 * acceptable updates after profiling count as would_skip_profiled. */
TEST(always_update_counts_would_skip_profiled)
{
    setup(SG_POLICY_ALWAYS_UPDATE, SG_ALIAS_AUTO, 4, 1);
    instantiate();
    CHECK_EQ(fx.clone, 0);                    /* no clone: nothing is acted on */
    profile_rotation();
    set_in(allocs[0].base);
    launch();                                 /* decides (simulated) */
    CHECK_EQ(exec_info().profile.generations, 1);
    for (int s = 0; s < 5; s++) {
        CHECK_EQ(set_in(allocs[s % 3].base), 1);   /* always forwarded */
        CHECK_EQ(launch(), 1);
    }
    /* 5, plus the first profiled step's identical update (skipped in any state) */
    sg_exec_info i = exec_info();
    CHECK_EQ(i.would_skip_profiled, 6);
    graph.nodes[0].kp.blockDimX = 64;         /* not lazily acceptable: demotes */
    set_in(allocs[1].base);
    CHECK_EQ(exec_info().would_skip_profiled, 6);
    CHECK_EQ(exec_info().demotions, 1);
    CHECK_EQ(fx.inst + fx.exec_update, 0);
    destroy();
}

/* The launch finds its exec's record through a hot slot (graph_records.c)
 * and counts through the record's stats entry. More execs than hot slots
 * (256), launched in turn: each launch reaches its own exec's observer (each
 * decides at its 4th launch) and its own counter; a destroyed exec's handle
 * reaches no record, not even when its emptied record serves another exec;
 * a handle instantiated again gets a fresh record. */
#define MANY 300
static CUgraphExec many_exec(int i) { return (CUgraphExec)(uintptr_t)(0x100000 + 0x40 * i); }
static int many_call(sg_call_kind kind, CUgraphExec e)
{
    CUgraphExec got = NULL;
    fwd f = { 0, &got, e };
    sg_call c = { .kind = kind, .forward = fake_forward, .args = &f };
    if (kind == SG_CALL_INSTANTIATE) c.u.inst = (typeof(c.u.inst)){ .out = &got, .graph = (CUgraph)&graph };
    else if (kind == SG_CALL_LAUNCH) c.u.launch.exec = e;
    else c.u.exec.exec = e;
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    return f.calls;
}
typedef struct by_id { sg_exec_info v[MANY + 4]; } by_id;
static void grab_id(const sg_exec_info *e, void *u)
{
    if (e->id && e->id < MANY + 4) ((by_id *)u)->v[e->id] = *e;
}
static by_id *infos(void)
{
    static by_id b;
    memset(&b, 0, sizeof b);
    sg_exec_foreach(grab_id, &b);
    return &b;
}

TEST(launch_reaches_its_own_record)
{
    setup(SG_POLICY_SKIP_PROFILED, SG_ALIAS_NEVER, 4, 0);     /* no clones: PLAIN at the decision */
    for (int i = 0; i < MANY; i++) many_call(SG_CALL_INSTANTIATE, many_exec(i));
    for (int round = 1; round <= 4; round++)
        for (int i = 0; i < MANY; i++) {
            CHECK_EQ(many_call(SG_CALL_LAUNCH, many_exec(i)), 1);
            /* exec i + 1 has not had this round's launch yet */
            if (i + 1 < MANY) CHECK_EQ(infos()->v[i + 2].profile.decided, 0);
            CHECK_EQ(infos()->v[i + 1].profile.decided, round == 4);
        }
    by_id *b = infos();
    int bad = 0;
    for (int i = 1; i <= MANY; i++) bad += b->v[i].launches != 4 || !b->v[i].profile.decided;
    CHECK_EQ(bad, 0);
    CHECK_EQ(sg_stats_totals().launches, 4 * MANY);
    /* exec 0 destroyed; exec MANY (a new handle) takes its emptied record */
    many_call(SG_CALL_EXEC_DESTROY, many_exec(0));
    many_call(SG_CALL_INSTANTIATE, many_exec(MANY));
    CHECK_EQ(many_call(SG_CALL_LAUNCH, many_exec(0)), 1);   /* to the driver, as it is */
    b = infos();
    CHECK_EQ(b->v[MANY + 1].launches, 0);                   /* not counted for the new exec */
    CHECK_EQ(b->v[MANY + 1].profile.decided, 0);
    CHECK_EQ(many_call(SG_CALL_LAUNCH, many_exec(MANY)), 1);
    CHECK_EQ(infos()->v[MANY + 1].launches, 1);
    /* exec 1's handle instantiated again: a fresh record, profiled afresh */
    many_call(SG_CALL_INSTANTIATE, many_exec(1));
    CHECK_EQ(many_call(SG_CALL_LAUNCH, many_exec(1)), 1);
    b = infos();
    CHECK_EQ(b->v[MANY + 2].launches, 1);
    CHECK_EQ(b->v[MANY + 2].profile.decided, 0);
    CHECK_EQ(b->v[2].launches, 4);                          /* the old exec 1: unchanged */
    for (int i = 1; i <= MANY; i++) many_call(SG_CALL_EXEC_DESTROY, many_exec(i));
}

int main(void)
{
    RUN(launch_reaches_its_own_record);
    RUN(pointer_discovery);
    RUN(decision_plain_when_nothing_varies);
    RUN(generations_choice_order);
    RUN(renting_then_buying);
    RUN(variant_memory_budget);
    RUN(demotion_on_dims_change);
    RUN(aliasing_translation_and_rebind);
    RUN(fallbacks);
    RUN(restore_paths);
    RUN(always_update_counts_would_skip_profiled);
    return check_done();
}
