/*
 * tests/e2e/adv_decide.c: round 9, valid programs against the update
 * decision (core/graph_update.c) and the exec record's node handles
 * (core/graph_records.c): a whole-graph or per-node update the library
 * answers itself must leave the exec, and the program, exactly where the
 * driver would.
 *
 * Most cases capture a chain of two mad_u32 nodes (acc = acc * 3 + in: the
 * order of the nodes shows in the result). A captured node's handle is not
 * known to the library until it reads the instantiation graph back (the
 * first per-node update naming one) and matches it, position by position,
 * against what the exec holds.
 *   reorder   both nodes mad(in0); after instantiation the first node of the
 *             graph is destroyed and a node with the same parameters added
 *             behind the second (the graph reads back in the exec's layout,
 *             but its first node is now the exec's second); the exec's
 *             second node is set to mad(in1) by its (still valid) handle;
 *             then cuGraphExecUpdate with a new capture mad(in1) -> mad(in0);
 *   new_node  the same graph surgery; then cuGraphExecKernelNodeSetParams
 *             naming the added node (the exec has no such node: the driver
 *             refuses it) with the parameters the exec's nodes hold;
 *   restore   (a control) mad(in0) -> mad(in1); the exec's first node set
 *             to mad(in2) (cuGraphExecKernelNodeSetParams), then
 *             cuGraphExecUpdate with the exec's own graph (which restores
 *             it); the second node set by cuGraphExecNodeSetParams, and the
 *             own graph again;
 *   outs_null (a control) cuGraphExecUpdate_v2 with the exec's own graph
 *             and a NULL result info: the driver's CUDA_ERROR_INVALID_VALUE.
 * After each step the exec is launched and the accumulator checked.
 * Usage: adv_decide reorder|new_node|restore|outs_null
 */
#include "adv_common.h"

#define N 64u

static CUfunction mad;
static CUstream s;
static CUdeviceptr in[3], acc;
static uint32_t hin[3][N], model[N];
static uint64_t n = N;

/* Captures the chain mad(in[a]) -> mad(in[b]) into *g. */
static void capture_chain(int a, int b, CUgraph *g)
{
    void *aa[] = { &in[a], &acc, &n }, *ab[] = { &in[b], &acc, &n };
    MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, aa, NULL));
    MUST(cuLaunchKernel(mad, 1, 1, 1, 1, 1, 1, 0, s, ab, NULL));
    MUST(cuStreamEndCapture(s, g));
}

/* Launches exec, whose nodes run mad(in[a]) then mad(in[b]), and checks. */
static void run(CUgraphExec exec, int a, int b, const char *what)
{
    R(cuGraphLaunch(exec, s));
    R(cuStreamSynchronize(s));
    for (uint32_t i = 0; i < N; i++) model[i] = (model[i] * 3u + hin[a][i]) * 3u + hin[b][i];
    adv_check_words(what, acc, model, N);
}

/* reorder, new_node: the graph's first node destroyed, one like it added
 * behind its second; *second gets the second node's handle, *added the
 * new node's. */
static void surgery(CUgraph g, CUgraphNode *second, CUgraphNode *added)
{
    CUgraphNode nodes[2];
    adv_chain_nodes(g, nodes, 2);
    *second = nodes[1];
    MUST(cuGraphDestroyNode(nodes[0]));
    void *a0[] = { &in[0], &acc, &n };
    CUDA_KERNEL_NODE_PARAMS kp = adv_kernel_params(mad, a0);
    MUST(cuGraphAddKernelNode(added, g, second, 1, &kp));
}

int main(int argc, char **argv)
{
    static const char *const cases[] = { "reorder", "new_node", "restore", "outs_null", NULL };
    int which = adv_case(argc, argv, cases);
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, N * 4));
    for (int k = 0; k < 3; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = (uint32_t)(k + 1) * 1000u + i * (uint32_t)(k + 7);
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    MUST(cuMemsetD32(acc, 0, N));
    memset(model, 0, sizeof model);

    CUgraph g, h = NULL;
    CUgraphExec exec;
    CUgraphExecUpdateResultInfo info;
    CUresult r;
    switch (which) {
    case 0:
    case 1: {
        CUgraphNode second, added;
        capture_chain(0, 0, &g);
        MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        run(exec, 0, 0, "as instantiated");
        surgery(g, &second, &added);
        if (which == 0) {
            void *a1[] = { &in[1], &acc, &n };
            ADV_SET_KERNEL(exec, second, mad, a1);
            run(exec, 0, 1, "second node set to in1");
            capture_chain(1, 0, &h);
            r = R(cuGraphExecUpdate(exec, h, &info));
            printf("update to in1 -> in0: %s, result %d\n", adv_err(r), (int)info.result);
            if (r == CUDA_SUCCESS) run(exec, 1, 0, "after the update to in1 -> in0");
            else run(exec, 0, 1, "after the refused update");
        } else {
            void *a0[] = { &in[0], &acc, &n };
            r = ADV_SET_KERNEL(exec, added, mad, a0);
            printf("setter naming the added node: %s\n", adv_err(r));
            run(exec, 0, 0, "after the setter naming the added node");
        }
        break;
    }
    case 2: {
        CUgraphNode nodes[2];
        capture_chain(0, 1, &g);
        MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        adv_chain_nodes(g, nodes, 2);
        run(exec, 0, 1, "as instantiated");
        void *a2[] = { &in[2], &acc, &n };
        ADV_SET_KERNEL(exec, nodes[0], mad, a2);
        run(exec, 2, 1, "first node set to in2");
        r = R(cuGraphExecUpdate(exec, g, &info));
        printf("update with the own graph: %s, result %d\n", adv_err(r), (int)info.result);
        run(exec, 0, 1, "after the update with the own graph");
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_KERNEL;
        np.kernel = (CUDA_KERNEL_NODE_PARAMS_v3){ .func = mad, .gridDimX = 1, .gridDimY = 1,
                                                  .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                                                  .blockDimZ = 1, .kernelParams = a2 };
        R(cuGraphExecNodeSetParams(exec, nodes[1], &np));
        run(exec, 0, 2, "second node set to in2 (cuGraphExecNodeSetParams)");
        r = R(cuGraphExecUpdate(exec, g, &info));
        printf("update with the own graph: %s, result %d\n", adv_err(r), (int)info.result);
        run(exec, 0, 1, "after the second update with the own graph");
        break;
    }
    case 3:
        capture_chain(0, 1, &g);
        MUST(cuGraphInstantiateWithFlags(&exec, g, 0));
        run(exec, 0, 1, "as instantiated");
        capture_chain(0, 1, &h);
        r = R(cuGraphExecUpdate(exec, h, NULL));
        printf("update without a result info: %s\n", adv_err(r));
        run(exec, 0, 1, "after the update without a result info");
        break;
    }
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    if (h) R(cuGraphDestroy(h));
    for (int k = 0; k < 3; k++) R(cuMemFree(in[k]));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
