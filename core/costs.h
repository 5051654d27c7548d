/*
 * core/costs.h: what driver calls cost, in nanoseconds, for skip_profiled's
 * purchase of exec variants (prof_observe.c, issue 11). One table for the
 * library and the benchmark: core/costs.tsv (its header gives the format and
 * the source of every figure). core/costs.awk turns it into the built-in
 * figures at build time; sg_costs_load replaces them with those of a table
 * of the same format (STABLEGRAPH_COSTS, e.g. one calibrated on the GPU by
 * tests/gpu/run-all.sh). A call without a row of its own is charged as the
 * table's "*" row says; a figure of "query" is the query range's HIGH value
 * (the conservative one). The library charges a call its per-call figure
 * plus, for a call that covers nodes, its per-node figure per node ("every
 * node" rows; the callers pass the nodes a call changed).
 *
 * Thread safety: the figures are written once at start-up (sg_costs_load,
 * under the init guard) or by a unit test, and only read afterwards: no lock.
 */
#ifndef SG_COSTS_H
#define SG_COSTS_H

#include <stddef.h>
#include <stdint.h>

/* The calls the library charges: X(ID, "table name"). */
#define SG_COST_CALLS(X)                                                      \
    X(UPDATE, "cuGraphExecUpdate")                                            \
    X(NODE_SET, "cuGraphExecKernelNodeSetParams")                             \
    X(INSTANTIATE, "cuGraphInstantiateWithFlags")                             \
    X(GRAPH_NODE_SET, "cuGraphKernelNodeSetParams")                           \
    X(MEM_CREATE, "cuMemCreate")                                              \
    X(MEM_MAP, "cuMemMap")                                                    \
    X(MEM_SET_ACCESS, "cuMemSetAccess")                                       \
    X(MEM_UNMAP, "cuMemUnmap")                                                \
    X(ADDRESS_RESERVE, "cuMemAddressReserve")
#define SG_COST_ID_(id, name) SG_COSTID_##id,
typedef enum { SG_COST_CALLS(SG_COST_ID_) SG_COSTID_COUNT } sg_cost_id;

/* Call c once, covering `nodes` nodes (0 for a call that covers none). */
uint64_t sg_cost_ns(sg_cost_id c, size_t nodes);
/* A whole-graph update that changes `nodes` nodes. */
uint64_t sg_cost_update_ns(size_t nodes);
/* An instantiation of a graph of `nodes` nodes. */
uint64_t sg_cost_instantiate_ns(size_t nodes);
/* Host bytes an exec of a graph of `nodes` nodes holds (the instantiation's
 * host_bytes_node row; 0 if the table has none). */
uint64_t sg_cost_exec_host_bytes(size_t nodes);
/* The query figure (the HIGH value of the table's range). */
uint64_t sg_cost_query_ns(void);
/* Where the figures come from: "core/costs.tsv (built in)" or the path
 * loaded. */
const char *sg_costs_source(void);

/* Replaces the figures with those of the table at path. 0, or -1 with a
 * message in err (the file, the line, what is wrong; nothing changed). */
int sg_costs_load(const char *path, char *err, size_t errlen);
/* Back to the built-in figures (tests, and start-up). */
void sg_costs_reset(void);
/* Sets one call's figures (unit tests). */
void sg_costs_set(sg_cost_id c, double call_ns, double node_ns);

#endif /* SG_COSTS_H */
