/*
 * adv_unhooked.c: round 35, graphs captured with nodes that a call the
 * library does not hook adds (cuMemcpyBatchAsync_v2, CUDA 13.0: one memcpy
 * node per copy when captured; emulated since round 35). The library records
 * what it sees of each capture and skips an update when the new graph's
 * record equals the exec's; a node it did not see must make it read the
 * graph back (the node and edge counts), or it would skip an update that
 * changes that node and the exec would run the old operands, or the old
 * order.
 *
 * Each step frees and allocates a temporary (cuMemAlloc / cuMemFree between
 * captures: placed memory, the same address every step under the library),
 * captures on one stream, updates the exec (instantiates at step 0, and
 * anew where the driver refuses the update: the order of the nodes changed),
 * launches, and checks the result on the host. adv_rep: every third step
 * repeats the one before it (an update that may be skipped).
 *
 * Cases (the hooked kernels are the same at every step; `in[j]` are three
 * inputs, tmp the step's temporary, acc and out accumulators):
 *   operands   acc = 5 + i (fill); tmp <- in[r % 3] (batch); acc = acc * 3 +
 *              tmp (mad): only the unhooked node's source changes;
 *   replace    as operands, but the copy into tmp is cuMemcpyDtoDAsync
 *              (hooked) from in[0] on even steps, a batch (unhooked) from
 *              in[1] on odd ones: the same node count at the same place;
 *   zero_copy  as operands, with a zero-byte cuMemcpyDtoDAsync (hooked; the
 *              driver adds no node for it) before the batch: the record
 *              holds a node the graph does not and lacks one it does, so
 *              the counts agree;
 *   zero_order a zero-byte cuMemcpyDtoDAsync; acc = 5 + i; then either
 *              tmp <- acc (batch), acc += 1 (add) or the other way round;
 *              out = i * 3 + tmp (fill, mad): only the order of the unhooked node and a
 *              hooked one (the edges) changes, the counts and the record
 *              stay;
 *   join       a second stream forked after the fill and joined before the
 *              add (events); the batch tmp <- acc on the forked stream on
 *              even steps, on the origin stream on odd ones: only the edges
 *              differ;
 *   zero_alone as zero_copy with the batch replaced by cuMemcpyAsync (hooked):
 *              nothing unhooked, the record must match the graph (no
 *              read-back) and still see the source change;
 *   memop      a zero-byte cuMemcpyDtoDAsync; tmp = 0 (memset); a batch of
 *              memory operations (cuStreamBatchMemOp, unhooked: one batch
 *              memory operation node) writes tmp[0] (32 bits) and tmp[2..3]
 *              (64 bits) with the step's values; acc = 5 + i; acc = acc * 3 +
 *              tmp: only the unhooked node's values change;
 *   writevalue as memop with cuStreamWriteValue32/64 (hooked; the recorder
 *              does not model them: the record is spoiled, unmodeled_call);
 *   ptsz       zero_copy on the per-thread default stream, the batch through
 *              cuMemcpyBatchAsync_v2_ptsz given NULL;
 *   outside    no capture: batches between placed buffers (cuMemAlloc'd,
 *              freed and allocated again each step), one source read during
 *              the call from a host buffer overwritten at once.
 * Usage: adv_unhooked operands|replace|zero_copy|zero_order|join|zero_alone|memop|
 *                     writevalue|ptsz|outside
 */
#include "adv_common.h"

#define N 256
#define STEPS 12
#define BYTES (N * sizeof(uint32_t))

static CUfunction f_fill, f_mad, f_add;
static CUdeviceptr in[3], acc, out, dummy;
static uint32_t hin[3][N];

/* The per-thread flavour (cuda.h declares it only for its own build). */
CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *,
                                            size_t *, size_t, CUstream);

/* One copy of `bytes` from src to dst, a batch of one (source in stream
 * order unless `now`: read during the call), counted at the caller's line;
 * on the per-thread default stream through the _ptsz entry point, given
 * NULL (as a program built with --default-stream per-thread calls it). */
static CUresult batch_at(int line, CUdeviceptr dst, CUdeviceptr src, size_t bytes, int now, CUstream s)
{
    CUmemcpyAttributes a;
    size_t idx = 0;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = now ? CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL : CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    if (s == CU_STREAM_PER_THREAD)
        return adv_r(cuMemcpyBatchAsync_v2_ptsz(&dst, &src, &bytes, 1, &a, &idx, 1, NULL),
                     "cuMemcpyBatchAsync_v2_ptsz(dst, src, bytes, 1, attr, idx, 1, NULL)", line);
    return adv_r(cuMemcpyBatchAsync_v2(&dst, &src, &bytes, 1, &a, &idx, 1, s),
                 "cuMemcpyBatchAsync_v2(dst, src, bytes, 1, attr, idx, 1, s)", line);
}
#define BATCH(dst, src, bytes, now, s) batch_at(__LINE__, dst, src, bytes, now, s)

static void fill(CUstream s, CUdeviceptr p, uint32_t v)
{
    uint64_t n = N;
    ADV_LAUNCH(f_fill, s, &p, &v, &n);
}

static void mad(CUstream s, CUdeviceptr src, CUdeviceptr dst)
{
    uint64_t n = N;
    ADV_LAUNCH(f_mad, s, &src, &dst, &n);
}

static void add(CUstream s, CUdeviceptr p, uint32_t v)
{
    uint64_t n = N;
    ADV_LAUNCH(f_add, s, &p, &v, &n);
}

/* Ends the capture on s into a graph, instantiates (*e NULL) or updates *e
 * (an update the driver refuses: the exec is instantiated anew, as programs
 * do), launches and waits; the graph of the last update is kept until the next. */
static void finish_step(CUstream s, CUgraphExec *e, CUgraph *prev)
{
    CUgraph g = NULL;
    if (R(cuStreamEndCapture(s, &g)) != CUDA_SUCCESS) return;
    CUgraphExecUpdateResultInfo info;
    if (*e && R(cuGraphExecUpdate_v2(*e, g, &info)) != CUDA_SUCCESS) {
        printf("update result %d: instantiated anew\n", (int)info.result);
        R(cuGraphExecDestroy(*e));
        *e = NULL;
    }
    if (!*e) MUST(cuGraphInstantiateWithFlags(e, g, 0));
    R(cuGraphLaunch(*e, s));
    R(cuStreamSynchronize(s));
    if (*prev) R(cuGraphDestroy(*prev));
    *prev = g;
}

static void check_step(const char *what, int k, CUdeviceptr d, const uint32_t *want)
{
    char name[64];
    snprintf(name, sizeof name, "%s_step%d", what, k);
    adv_check_words(name, d, want, N);
}

static void case_captured(int which, CUstream s, CUstream s2)
{
    CUgraphExec e = NULL;
    CUgraph prev = NULL;
    CUevent fork, join;
    MUST(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    MUST(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr tmp = 0;
    for (int k = 0; k < STEPS; k++) {
        int r = adv_rep(k);
        uint32_t want[N];
        /* a temporary allocated anew each step (placed by the library) */
        if (tmp) MUST(cuMemFree(tmp));
        MUST(cuMemAlloc(&tmp, BYTES));
        MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        const uint32_t *src = NULL;
        uint32_t mo[N];
        switch (which) {
        case 0:                                            /* operands */
        case 2:                                            /* zero_copy */
        case 8:                                            /* ptsz */
            fill(s, acc, 5);
            if (which != 0) R(cuMemcpyDtoDAsync(dummy, in[0], 0, s));
            BATCH(tmp, in[r % 3], BYTES, 0, s);
            mad(s, tmp, acc);
            src = hin[r % 3];
            break;
        case 1:                                            /* replace */
            fill(s, acc, 5);
            if (r % 2 == 0) R(cuMemcpyAsync(tmp, in[0], BYTES, s));
            else BATCH(tmp, in[1], BYTES, 0, s);
            mad(s, tmp, acc);
            src = hin[r % 2];
            break;
        case 3:                                            /* zero_order */
            R(cuMemcpyDtoDAsync(dummy, in[0], 0, s));
            fill(s, acc, 5);
            fill(s, out, 0);
            if (r % 2 == 0) {
                BATCH(tmp, acc, BYTES, 0, s);
                add(s, acc, 1);
            } else {
                add(s, acc, 1);
                BATCH(tmp, acc, BYTES, 0, s);
            }
            mad(s, tmp, out);
            break;
        case 5:                                            /* zero_alone */
            fill(s, acc, 5);
            R(cuMemcpyDtoDAsync(dummy, in[0], 0, s));
            R(cuMemcpyAsync(tmp, in[r % 3], BYTES, s));
            mad(s, tmp, acc);
            src = hin[r % 3];
            break;
        case 6:                                            /* memop */
        case 7: {                                          /* writevalue */
            uint32_t v = 1000u + (uint32_t)r * 3u;
            uint64_t w = ((uint64_t)(r % 4) << 32) | (2000u + (uint32_t)r);
            R(cuMemcpyDtoDAsync(dummy, in[0], 0, s));
            R(cuMemsetD32Async(tmp, 0, N, s));
            if (which == 6) {
                CUstreamBatchMemOpParams ops[2];
                memset(ops, 0, sizeof ops);
                ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
                ops[0].writeValue.address = tmp;
                ops[0].writeValue.value = v;
                ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
                ops[1].writeValue.address = tmp + 8;
                ops[1].writeValue.value64 = w;
                R(cuStreamBatchMemOp(s, 2, ops, 0));
            } else {
                R(cuStreamWriteValue32(s, tmp, v, 0));
                R(cuStreamWriteValue64(s, tmp + 8, w, 0));
            }
            fill(s, acc, 5);
            mad(s, tmp, acc);
            memset(mo, 0, sizeof mo);
            mo[0] = v;
            mo[2] = (uint32_t)w;
            mo[3] = (uint32_t)(w >> 32);
            src = mo;
            break;
        }
        case 4:                                            /* join */
            fill(s, acc, 5);
            fill(s, out, 0);
            R(cuEventRecord(fork, s));
            R(cuStreamWaitEvent(s2, fork, 0));
            BATCH(tmp, acc, BYTES, 0, r % 2 == 0 ? s2 : s);
            R(cuEventRecord(join, s2));
            R(cuStreamWaitEvent(s, join, 0));
            add(s, acc, 1);
            mad(s, tmp, out);
            break;
        }
        finish_step(s, &e, &prev);
        static const char *const names[] = { "operands", "replace", "zero_copy", "zero_order", "join",
                                             "zero_alone", "memop", "writevalue", "ptsz" };
        if (which <= 2 || which >= 5) {
            for (int i = 0; i < N; i++) want[i] = (5u + (uint32_t)i) * 3u + src[i];
            check_step(names[which], k, acc, want);
        } else {
            uint32_t bump = which == 3 && r % 2 ? 1u : 0u;    /* zero_order, odd: tmp after the add */
            for (int i = 0; i < N; i++) want[i] = 3u * (uint32_t)i + 5u + (uint32_t)i + bump;   /* out = i * 3 + tmp */
            check_step(names[which], k, out, want);
        }
    }
    MUST(cuMemFree(tmp));
    R(cuGraphExecDestroy(e));
    R(cuGraphDestroy(prev));
    MUST(cuEventDestroy(fork));
    MUST(cuEventDestroy(join));
}

static void case_outside(CUstream s)
{
    CUdeviceptr a = 0, b = 0;
    for (int k = 0; k < STEPS; k++) {
        uint32_t host[N], want[N];
        MUST(cuMemAlloc(&a, BYTES));
        MUST(cuMemAlloc(&b, BYTES));
        fill(s, a, 40u + (uint32_t)k);
        BATCH(b, a, BYTES, 0, s);
        mad(s, b, acc);                          /* acc = acc * 3 + 40 + k + i */
        for (int i = 0; i < N; i++) host[i] = 1000u * (uint32_t)k + (uint32_t)i;
        BATCH(a, (CUdeviceptr)(uintptr_t)host, BYTES, 1, s);
        for (int i = 0; i < N; i++) host[i] = 0xdeadu;   /* read during the call: not seen */
        R(cuStreamSynchronize(s));
        char name[64];
        for (int i = 0; i < N; i++) want[i] = 1000u * (uint32_t)k + (uint32_t)i;
        snprintf(name, sizeof name, "outside_host_step%d", k);
        adv_check_words(name, a, want, N);
        MUST(cuMemFree(a));
        MUST(cuMemFree(b));
    }
    uint32_t model[N];
    for (int i = 0; i < N; i++) {
        model[i] = 0;
        for (int k = 0; k < STEPS; k++) model[i] = model[i] * 3u + 40u + (uint32_t)k + (uint32_t)i;
    }
    adv_check_words("outside_acc", acc, model, N);
}

int main(int argc, char **argv)
{
    static const char *const names[] = { "operands", "replace", "zero_copy", "zero_order", "join",
                                         "zero_alone", "memop", "writevalue", "ptsz", "outside", NULL };
    int which = adv_case(argc, argv, names);
    CUcontext ctx;
    CUmodule mod;
    CUstream s, s2;
    adv_open(&ctx, &mod);
    f_fill = adv_fn(mod, "fill_u32");
    f_mad = adv_fn(mod, "mad_u32");
    f_add = adv_fn(mod, "add_u32");
    for (int j = 0; j < 3; j++) {
        for (int i = 0; i < N; i++) hin[j][i] = 0x100u * (uint32_t)(j + 1) + 7u * (uint32_t)i;
        MUST(cuMemAlloc(&in[j], BYTES));
        MUST(cuMemcpyHtoD(in[j], hin[j], BYTES));
    }
    MUST(cuMemAlloc(&acc, BYTES));
    MUST(cuMemAlloc(&out, BYTES));
    MUST(cuMemAlloc(&dummy, BYTES));
    MUST(cuMemsetD32(acc, 0, N));
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    if (which == 9) case_outside(s);
    else case_captured(which, which == 8 ? CU_STREAM_PER_THREAD : s, s2);
    MUST(cuStreamDestroy(s));
    MUST(cuStreamDestroy(s2));
    for (int j = 0; j < 3; j++) MUST(cuMemFree(in[j]));
    MUST(cuMemFree(acc));
    MUST(cuMemFree(out));
    MUST(cuMemFree(dummy));
    return adv_finish();
}
