/*
 * tests/e2e/adv_fork.c: issue 10, class 14 (fork). The parent runs an exec
 * over rotating inputs (the library's profiling and generations), then
 * forks. The child keeps using what it inherited, as the emulated driver
 * allows (a real driver answers such calls with an error; either way the
 * program's calls are defined): it instantiates an exec of its own (exec2),
 * launches the inherited exec 3 times and exec2 once, checks the results
 * and exits with exit() (so a library writes its report there). The parent
 * waits for the child, then launches its exec 3 more times and checks.
 *
 * A library that frees its per-exec statistics in the child while its graph
 * records still point at them writes the inherited exec's launches into
 * memory that is no longer the inherited exec's (with the runner's report
 * template `%p`, the child's report shows it: exec2 must have 1 launch).
 *
 * Checks: the accumulator in the child and in the parent; the child's exit
 * status.
 * Usage: adv_fork
 */
#include "adv_common.h"

#include <sys/wait.h>

#define N 4096u
#define INPUTS 3

static CUfunction mad;
static CUstream s;
static CUdeviceptr in[INPUTS], acc;
static CUgraphNode node;
static uint32_t hin[INPUTS][N], model[N];

static void step(CUgraphExec exec, int k)
{
    uint64_t n = N;
    void *args[] = { &in[k], &acc, &n };
    ADV_SET_KERNEL(exec, node, mad, args);
    R(cuGraphLaunch(exec, s));
    for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[k][i];
}

static CUgraphExec make_exec(CUgraph *g, CUgraphNode *out_node)
{
    uint64_t n = N;
    void *args[] = { &in[0], &acc, &n };
    return adv_one_node_exec(s, mad, args, g, out_node);
}

int main(void)
{
    CUcontext ctx;
    CUmodule mod;
    adv_open(&ctx, &mod);
    mad = adv_fn(mod, "mad_u32");
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&acc, N * 4));
    MUST(cuMemsetD32(acc, 0, N));
    for (int k = 0; k < INPUTS; k++) {
        MUST(cuMemAlloc(&in[k], N * 4));
        for (uint32_t i = 0; i < N; i++) hin[k][i] = (uint32_t)k * 77u + i;
        MUST(cuMemcpyHtoD(in[k], hin[k], sizeof hin[k]));
    }
    memset(model, 0, sizeof model);
    CUgraph g;
    CUgraphExec exec = make_exec(&g, &node);
    for (int st = 0; st < 8; st++) step(exec, st % INPUTS);
    R(cuStreamSynchronize(s));
    adv_check_words("accumulator before the fork", acc, model, N);

    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        CUgraph g2;
        CUgraphNode node2;
        CUgraphExec exec2 = make_exec(&g2, &node2);
        for (int st = 0; st < 3; st++) step(exec, st % INPUTS);
        R(cuGraphLaunch(exec2, s));
        for (uint32_t i = 0; i < N; i++) model[i] = model[i] * 3u + hin[0][i];
        R(cuStreamSynchronize(s));
        adv_check_words("child: accumulator", acc, model, N);
        R(cuGraphExecDestroy(exec2));
        R(cuGraphDestroy(g2));
        printf("child: ");
        exit(adv_finish());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    adv_check("child's exit status", WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %d",
              WIFEXITED(status) ? "exited" : "killed",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    /* The child's kernels may have written the memory the parent sees (the
     * emulated driver's device memory may be shared with the child): start
     * the accumulator again. */
    R(cuMemsetD32(acc, 0, N));
    memset(model, 0, sizeof model);
    for (int st = 0; st < 3; st++) step(exec, (st + 1) % INPUTS);
    R(cuStreamSynchronize(s));
    adv_check_words("parent: accumulator after the child", acc, model, N);
    R(cuGraphExecDestroy(exec));
    R(cuGraphDestroy(g));
    for (int k = 0; k < INPUTS; k++) R(cuMemFree(in[k]));
    R(cuMemFree(acc));
    R(cuStreamDestroy(s));
    return adv_finish();
}
