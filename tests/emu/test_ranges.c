/*
 * test_ranges.c: the range checks the driver makes on API-level copies,
 * memsets and memory nodes. A range that runs past the end of the
 * allocation containing its start (a cuMemAlloc block's requested size, a
 * VMM mapping followed by nothing mapped) is refused with
 * CUDA_ERROR_INVALID_VALUE and nothing is written, for:
 *   cuMemsetD8/16/32, their Async and 2D forms; cuMemcpyHtoD, DtoH, DtoD,
 *   cuMemcpy and their Async forms, cuMemcpy2D, cuMemcpy3D (either side);
 *   cuGraphAddMemsetNode, cuGraphMemsetNodeSetParams,
 *   cuGraphExecMemsetNodeSetParams, cuGraphAddMemcpyNode.
 * cuGraphExecUpdate from a graph whose memset node now runs past its
 * (re-mapped) memory fails with CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE and
 * CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED. A range ending exactly at
 * the end, and VMM memory spanning adjacent mappings, are accepted.
 */
#include "graph_util.h"

#include <stdlib.h>

#define BLOCK 4000              /* not a page multiple: the page has slack */
#define PAGE 4096

static CUdeviceptr blk;         /* BLOCK bytes; the rest of its page is slack */
static unsigned char host[2 * PAGE];

/* Fills the block and its slack with 0xAB. */
static void blk_reset(void)
{
    memset((void *)blk, 0xAB, PAGE);
    memset(host, 0x11, sizeof host);
}

/* 1 if the block and its slack still hold 0xAB everywhere. */
static int blk_intact(void)
{
    const unsigned char *p = (const unsigned char *)blk;
    for (int i = 0; i < PAGE; i++)
        if (p[i] != 0xAB) { printf("#   byte %d is 0x%02x\n", i, p[i]); return 0; }
    return 1;
}

/* Calls that refuse: each runs past the end by one element / byte. */
#define REFUSED(expr) do { blk_reset(); CHECK_CU(expr, CUDA_ERROR_INVALID_VALUE); CHECK(blk_intact()); } while (0)
#define ACCEPTED(expr) do { blk_reset(); CHECK_CU(expr, CUDA_SUCCESS); } while (0)

TEST(memsets)
{
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    REFUSED(cuMemsetD8(blk, 1, BLOCK + 1));
    REFUSED(cuMemsetD16(blk, 1, BLOCK / 2 + 1));
    REFUSED(cuMemsetD32(blk, 1, BLOCK / 4 + 1));
    REFUSED(cuMemsetD32(blk + 8, 1, BLOCK / 4 - 1));
    REFUSED(cuMemsetD8Async(blk, 1, BLOCK + 1, s));
    REFUSED(cuMemsetD16Async(blk + 2, 1, BLOCK / 2, s));
    REFUSED(cuMemsetD32Async(blk, 1, BLOCK / 4 + 1, s));
    /* 2D: 10 rows of pitch 400; 40 bytes written per row: the 10th row would
     * start at 3600 and end at 3640 (fits), with pitch 440 it ends at 4000
     * (fits), with pitch 441 past it. */
    ACCEPTED(cuMemsetD2D8(blk, 440, 1, 40, 10));
    REFUSED(cuMemsetD2D8(blk, 441, 1, 40, 10));
    REFUSED(cuMemsetD2D16(blk, 442, 1, 20, 10));
    REFUSED(cuMemsetD2D32(blk, 444, 1, 10, 10));
    REFUSED(cuMemsetD2D32Async(blk, 444, 1, 10, 10, s));
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK(blk_intact());
    ACCEPTED(cuMemsetD8(blk, 1, BLOCK));
    ACCEPTED(cuMemsetD32Async(blk, 1, BLOCK / 4, s));
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_EQ(((uint32_t *)blk)[BLOCK / 4 - 1], 1);
    CHECK_EQ(((unsigned char *)blk)[BLOCK], 0xAB);          /* slack untouched */
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

TEST(copies)
{
    CUstream s;
    CUdeviceptr other;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CHECK_CU(cuMemAlloc(&other, 2 * PAGE), CUDA_SUCCESS);
    REFUSED(cuMemcpyHtoD(blk, host, BLOCK + 1));
    REFUSED(cuMemcpyHtoD(blk + 100, host, BLOCK - 99));
    REFUSED(cuMemcpyHtoDAsync(blk, host, BLOCK + 1, s));
    REFUSED(cuMemcpyDtoD(blk, other, BLOCK + 1));
    REFUSED(cuMemcpyDtoDAsync(blk, other, BLOCK + 1, s));
    REFUSED(cuMemcpy(blk, other, BLOCK + 1));
    REFUSED(cuMemcpyAsync(blk, other, BLOCK + 1, s));
    /* The source runs past its end: nothing read, nothing written. */
    blk_reset();
    memset((void *)other, 0x22, 2 * PAGE);
    CHECK_CU(cuMemcpyDtoH(host, blk, BLOCK + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyDtoHAsync(host, blk, BLOCK + 1, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpyDtoD(other, blk, BLOCK + 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(host[0], 0x11);
    CHECK_EQ(((unsigned char *)other)[0], 0x22);
    /* 2D and 3D: 10 rows of 40 bytes, pitch 441: the last row ends at 4009. */
    CUDA_MEMCPY2D c2;
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = host;
    c2.srcPitch = 441;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = blk;
    c2.dstPitch = 441;
    c2.WidthInBytes = 40;
    c2.Height = 10;
    REFUSED(cuMemcpy2D(&c2));
    REFUSED(cuMemcpy2DAsync(&c2, s));
    c2.dstPitch = 440;
    ACCEPTED(cuMemcpy2D(&c2));
    c2.dstY = 1;                       /* starting one row lower: past the end */
    REFUSED(cuMemcpy2D(&c2));
    CUDA_MEMCPY3D c3;
    memset(&c3, 0, sizeof c3);
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c3.srcDevice = blk;
    c3.srcPitch = 400;
    c3.srcHeight = 5;
    c3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c3.dstDevice = other;
    c3.dstPitch = 400;
    c3.dstHeight = 5;
    c3.WidthInBytes = 400;
    c3.Height = 5;
    c3.Depth = 2;                      /* 2 x 5 rows of 400: exactly 4000 */
    ACCEPTED(cuMemcpy3D(&c3));
    c3.srcXInBytes = 1;                /* the source's last row now ends at 4001 */
    c3.WidthInBytes = 399;
    c3.srcPitch = 400;
    ACCEPTED(cuMemcpy3D(&c3));
    c3.WidthInBytes = 400;
    CHECK_CU(cuMemcpy3D(&c3), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuMemcpy3DAsync(&c3, s), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuStreamSynchronize(s), CUDA_SUCCESS);
    CHECK_CU(cuMemFree(other), CUDA_SUCCESS);
    CHECK_CU(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Two granules, two handles, mapped side by side (read-write) at the start of
 * a reservation of `granules` granules. */
typedef struct two_maps { CUdeviceptr va; size_t gran, granules; CUmemGenericAllocationHandle h[2]; } two_maps;

static two_maps map_two(size_t granules)
{
    two_maps m = { .granules = granules };
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CHECK_CU(cuMemGetAllocationGranularity(&m.gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressReserve(&m.va, granules * m.gran, 0, 0, 0), CUDA_SUCCESS);
    for (int i = 0; i < 2; i++) {
        CHECK_CU(cuMemCreate(&m.h[i], m.gran, &prop, 0), CUDA_SUCCESS);
        CHECK_CU(cuMemMap(m.va + i * m.gran, m.gran, 0, m.h[i], 0), CUDA_SUCCESS);
    }
    CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CHECK_CU(cuMemSetAccess(m.va, 2 * m.gran, &acc, 1), CUDA_SUCCESS);
    return m;
}

/* Unmaps what is still mapped (mapped granules from the start), frees all. */
static void unmap_two(two_maps *m, size_t mapped)
{
    CHECK_CU(cuMemUnmap(m->va, mapped * m->gran), CUDA_SUCCESS);
    CHECK_CU(cuMemAddressFree(m->va, m->granules * m->gran), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(m->h[0]), CUDA_SUCCESS);
    CHECK_CU(cuMemRelease(m->h[1]), CUDA_SUCCESS);
}

/* VMM: a range over two adjacent mappings is one buffer; past the last
 * mapping it is refused. */
TEST(vmm_mappings)
{
    two_maps m = map_two(3);
    CUdeviceptr va = m.va;
    size_t gran = m.gran;
    CHECK_CU(cuMemsetD8(va + gran - 8, 7, 16), CUDA_SUCCESS);           /* across the seam */
    CHECK_CU(cuMemsetD8(va, 7, 2 * gran), CUDA_SUCCESS);
    CHECK_CU(cuMemsetD8(va + gran, 7, gran + 1), CUDA_ERROR_INVALID_VALUE);  /* into the unmapped third */
    CHECK_CU(cuMemsetD8(va + 2 * gran, 7, 1), CUDA_ERROR_INVALID_VALUE);     /* not mapped at all */
    unmap_two(&m, 2);
}

/* The legacy ELF name, which cuda.h maps to cuGraphExecUpdate_v2. */
#undef cuGraphExecUpdate
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *);
static CUresult legacy_update(CUgraphExec e, CUgraph g, CUgraphNode *err, CUgraphExecUpdateResult *res)
{
    return cuGraphExecUpdate(e, g, err, res);
}
#define cuGraphExecUpdate cuGraphExecUpdate_v2

static CUDA_MEMSET_NODE_PARAMS set_params(CUdeviceptr dst, size_t width_u32)
{
    CUDA_MEMSET_NODE_PARAMS p = { .dst = dst, .value = 1, .elementSize = 4, .width = width_u32, .height = 1 };
    return p;
}

TEST(graph_nodes)
{
    CUgraph g;
    CUgraphNode n, cn;
    CUgraphExec e;
    CHECK_CU(cuGraphCreate(&g, 0), CUDA_SUCCESS);
    CUDA_MEMSET_NODE_PARAMS bad = set_params(blk, BLOCK / 4 + 1), good = set_params(blk, BLOCK / 4);
    CHECK_CU(cuGraphAddMemsetNode(&n, g, NULL, 0, &bad, g_ctx), CUDA_ERROR_INVALID_VALUE);
    size_t count = 9;
    CHECK_CU(cuGraphGetNodes(g, NULL, &count), CUDA_SUCCESS);
    CHECK_EQ(count, 0);
    CHECK_CU(cuGraphAddMemsetNode(&n, g, NULL, 0, &good, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphMemsetNodeSetParams(n, &bad), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMSET_NODE_PARAMS got;
    CHECK_CU(cuGraphMemsetNodeGetParams(n, &got), CUDA_SUCCESS);
    CHECK_EQ(got.width, BLOCK / 4);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphExecMemsetNodeSetParams(e, n, &bad, g_ctx), CUDA_ERROR_INVALID_VALUE);
    blk_reset();
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(((unsigned char *)blk)[BLOCK], 0xAB);          /* the old, valid width ran */
    CHECK_EQ(((uint32_t *)blk)[BLOCK / 4 - 1], 1);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = blk + 1;
    c.WidthInBytes = BLOCK;
    c.Height = c.Depth = 1;
    CHECK_CU(cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, g_ctx), CUDA_ERROR_INVALID_VALUE);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g), CUDA_SUCCESS);
}

/* A memset node made while its VMM memory spanned two mappings; once the
 * second is unmapped, updating an exec from that graph is refused. */
TEST(exec_update_with_node_past_the_end)
{
    two_maps m = map_two(2);
    CUdeviceptr va = m.va;
    size_t gran = m.gran;
    CUgraph g1, g2;
    CUgraphNode n1, n2;
    CUgraphExec e;
    CUDA_MEMSET_NODE_PARAMS small = set_params(va, 16), wide = set_params(va, 2 * gran / 4);
    CHECK_CU(cuGraphCreate(&g1, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemsetNode(&n1, g1, NULL, 0, &small, g_ctx), CUDA_SUCCESS);
    CHECK_CU(cuGraphInstantiateWithFlags(&e, g1, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphCreate(&g2, 0), CUDA_SUCCESS);
    CHECK_CU(cuGraphAddMemsetNode(&n2, g2, NULL, 0, &wide, g_ctx), CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_SUCCESS);  /* fits while both are mapped */
    CHECK_CU(cuGraphExecUpdate(e, g1, &info), CUDA_SUCCESS);
    CHECK_CU(cuMemUnmap(va + gran, gran), CUDA_SUCCESS);
    memset(&info, 0, sizeof info);
    CHECK_CU(cuGraphExecUpdate(e, g2, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    CHECK_EQ(info.result, 5);
    CHECK(info.errorNode == n2);
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult res;
    CHECK_CU(legacy_update(e, g2, &err, &res), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK_EQ(res, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED);
    /* The exec kept its valid parameters and runs. */
    CHECK_CU(cuGraphLaunch(e, NULL), CUDA_SUCCESS);
    CHECK_CU(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    CHECK_EQ(((uint32_t *)va)[15], 1);
    CHECK_CU(cuGraphExecDestroy(e), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g1), CUDA_SUCCESS);
    CHECK_CU(cuGraphDestroy(g2), CUDA_SUCCESS);
    unmap_two(&m, 1);
}

int main(void)
{
    gu_setup();
    CHECK_CU(cuMemAlloc(&blk, BLOCK), CUDA_SUCCESS);
    RUN(memsets);
    RUN(copies);
    RUN(vmm_mappings);
    RUN(graph_nodes);
    RUN(exec_update_with_node_past_the_end);
    CHECK_CU(cuMemFree(blk), CUDA_SUCCESS);
    return check_done();
}
