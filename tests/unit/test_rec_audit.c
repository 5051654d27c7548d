/*
 * tests/unit/test_rec_audit.c: STABLEGRAPH_AUDIT_RECORDS (core/rec_audit.c)
 * on a fake driver graph (fake_graph.h). A record that describes the graph
 * passes, also when the driver lists the nodes in another order than they
 * were made; a record that differs from the driver's graph in a node's
 * argument bytes, its launch dimensions, an attribute it holds, an attribute
 * the driver reports and it does not, a node handle it knows or an edge is
 * counted; auditing off audits nothing. (A record here is the graph read
 * back, marked as a record, with the driver's default attributes dropped:
 * what the recorder makes of a graph built without attributes.)
 */
#include "check.h"
#include "fake_graph.h"

#include "core/rec_internal.h"

#include <stdlib.h>

int sg_rec_oom;   /* rec_graph.c's, which this test does not link */

static const size_t sizes3[] = { 8, 4, 8 };   /* ptr, u32, ptr */
static ff f_a;
static CUdeviceptr p_in = FG_DEV_LO + 0x1000, p_out = FG_DEV_LO + 0x2000;
static uint32_t salt = 7;

/* kernel(in, salt, out) -> memcpy -> memset, and a second kernel after the
 * memcpy. */
static void make_graph(fg *g)
{
    fg_make_chain(g, &f_a, &p_in, &salt, &p_out);
    const void *vals[] = { &p_out, &salt, &p_in };
    fg_kernel(g, &f_a, vals);
    fg_edge(g, 1, 3);
}

/* r becomes a record of g; the handles of the nodes in `known` (a bit per
 * node) are known. */
static void record_of(fg *g, sg_grecord *r, unsigned known)
{
    sg_fp_scratch s;
    memset(&s, 0, sizeof s);
    memset(r, 0, sizeof *r);
    CHECK_EQ(sg_fp_build(&r->fp, (CUgraph)g, &s, NULL), 0);
    r->fp.origin = SG_FP_RECORDED;
    r->handles = calloc(r->fp.n, sizeof *r->handles);
    CHECK(r->handles != NULL);
    r->unknown = r->fp.n;
    for (size_t i = 0; i < r->fp.n; i++) {
        r->fp.nodes[i].k.attr_mask = 0;
        memset(r->fp.nodes[i].k.attrs, 0, sizeof r->fp.nodes[i].k.attrs);
        if (known & (1u << i)) {
            r->handles[i] = s.nodes[i];
            r->unknown--;
        }
    }
    sg_fp_scratch_free(&s);
}

static void record_free(sg_grecord *r)
{
    sg_fp_free(&r->fp);
    free(r->handles);
}

/* Audits r against g: 1 if it was found to differ, 0 if not, -1 if it was
 * not audited. */
static int audit(sg_grecord *r, fg *g)
{
    unsigned long n, bad;
    sg_rec_audit_reset();
    sg_rec_audit a;
    sg_rec_audit_keep(&a, r);
    sg_rec_audit_run(&a, (CUgraph)g);
    sg_rec_audit_counts(&n, &bad);
    return n == 0 ? -1 : bad != 0;
}

/* dst: src with its nodes listed in the order perm gives (node i of src is
 * node perm[i] of dst), edges renamed to match. */
static void permuted(fg *dst, const fg *src, const int *perm)
{
    fg_copy(dst, src);
    for (size_t i = 0; i < src->n; i++) {
        dst->nodes[perm[i]] = src->nodes[i];
        fg_node *nd = &dst->nodes[perm[i]];
        nd->g = dst;
        for (int a = 0; a < 8; a++) nd->argv[a] = nd->args[a];
        if (nd->kp.kernelParams) nd->kp.kernelParams = nd->argv;
    }
    for (size_t e = 0; e < src->ne; e++) {
        dst->from[e] = perm[src->from[e]];
        dst->to[e] = perm[src->to[e]];
    }
}

TEST(a_record_of_the_graph_passes)
{
    fg g;
    sg_grecord r;
    make_graph(&g);
    record_of(&g, &r, 0xf);
    CHECK_EQ(audit(&r, &g), 0);
    /* the driver's default memory-synchronization domain map (remote 1 in
     * the fake, as in the emulator) is not held against a record */
    CHECK_EQ(g.nodes[0].attr[CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP].memSyncDomainMap.remote, 1);
    record_free(&r);
}

TEST(a_changed_argument_or_dimension_is_found)
{
    fg g;
    sg_grecord r;
    make_graph(&g);
    record_of(&g, &r, 0);
    g.nodes[3].args[1][0] ^= 1;                 /* the second kernel's salt */
    CHECK_EQ(audit(&r, &g), 1);
    g.nodes[3].args[1][0] ^= 1;
    CHECK_EQ(audit(&r, &g), 0);
    g.nodes[0].kp.gridDimX = 8;
    CHECK_EQ(audit(&r, &g), 1);
    record_free(&r);
}

TEST(attributes_are_compared_both_ways)
{
    fg g;
    sg_grecord r;
    make_graph(&g);
    record_of(&g, &r, 0);
    /* one the driver reports and the record does not hold */
    g.nodes[3].attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority = -1;
    CHECK_EQ(audit(&r, &g), 1);
    /* the record holds it, with that value */
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = -1;
    CHECK_EQ(sg_fp_attr_set(&r.fp.nodes[3].k, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), 0);
    CHECK_EQ(audit(&r, &g), 0);
    /* with another value than the driver's */
    g.nodes[3].attr[CU_LAUNCH_ATTRIBUTE_PRIORITY].priority = 0;
    CHECK_EQ(audit(&r, &g), 1);
    record_free(&r);
}

TEST(a_wrong_handle_or_edge_is_found)
{
    fg g;
    sg_grecord r;
    make_graph(&g);
    record_of(&g, &r, 0x5);
    CHECK_EQ(audit(&r, &g), 0);
    r.handles[2] = (CUgraphNode)&g.nodes[1];
    CHECK_EQ(audit(&r, &g), 1);
    r.handles[2] = (CUgraphNode)&g.nodes[2];
    fg_edge(&g, 0, 3);                          /* an edge the record lacks */
    CHECK_EQ(audit(&r, &g), 1);
    g.ne--;
    g.to[1] = 3;                                /* the same count, another edge */
    CHECK_EQ(audit(&r, &g), 1);
    record_free(&r);
}

TEST(the_driver_may_list_nodes_in_another_order)
{
    fg g, p;
    sg_grecord r;
    static const int perm[] = { 2, 0, 3, 1 };
    make_graph(&g);
    record_of(&g, &r, 0x2);
    permuted(&p, &g, perm);
    r.handles[1] = (CUgraphNode)&p.nodes[perm[1]];   /* the handle the driver names */
    CHECK_EQ(audit(&r, &p), 0);
    r.handles[1] = (CUgraphNode)&p.nodes[1];
    CHECK_EQ(audit(&r, &p), 1);                       /* the handle of another node */
    r.handles[1] = (CUgraphNode)&p.nodes[perm[1]];
    p.nodes[perm[3]].args[1][0] ^= 1;
    CHECK_EQ(audit(&r, &p), 1);                       /* and a node that differs */
    p.nodes[perm[3]].args[1][0] ^= 1;
    p.to[1] = perm[0];                                /* an edge that differs */
    CHECK_EQ(audit(&r, &p), 1);
    record_free(&r);
}

TEST(auditing_off_audits_nothing)
{
    fg g;
    sg_grecord r;
    make_graph(&g);
    record_of(&g, &r, 0);
    g.nodes[0].kp.gridDimX = 8;
    sg_rec_audit_init(0);
    CHECK_EQ(audit(&r, &g), -1);
    sg_rec_audit_init(1);
    CHECK_EQ(audit(&r, &g), 1);
    record_free(&r);
}

int main(void)
{
    fg_install();
    f_a = ff_make(3, sizes3);
    sg_rec_audit_init(1);
    RUN(a_record_of_the_graph_passes);
    RUN(a_changed_argument_or_dimension_is_found);
    RUN(attributes_are_compared_both_ways);
    RUN(a_wrong_handle_or_edge_is_found);
    RUN(the_driver_may_list_nodes_in_another_order);
    RUN(auditing_off_audits_nothing);
    return check_done();
}
