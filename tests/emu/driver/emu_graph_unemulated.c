/*
 * emu_graph_unemulated.c: the graph node kinds the emulated driver does not
 * run: external semaphore signal and wait nodes (event record and wait
 * nodes are emulated since round 28, conditional nodes since round 33:
 * emu_cond.c; batch memory operation nodes since round 35;
 * emu_graph.c). Their entry points exist (the
 * library hooks them: a program may call them, and the recorder must see
 * it) and check the graph or node they name like the others
 * (CUDA_ERROR_INVALID_VALUE for a bad one), then refuse with
 * CUDA_ERROR_NOT_SUPPORTED, adding or changing nothing: a program that needs
 * them fails loudly here instead of running a graph that lacks a node.
 * docs/emulator.md, "Emulation limits".
 *
 * Locks: none (nothing is changed).
 */
#include "emu_graph.h"

/* A node would be added to g: refused once g and the output are checked. */
static CUresult add_refused(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n)
{
    if (!out || !emu_graph_ok(g) || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* A node's parameters would change: no node of these kinds can exist here. */
static CUresult set_refused(CUgraphNode nd, const void *params)
{
    if (!params || !emu_node_ok(nd)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_INVALID_VALUE;     /* a node of another type */
}

/* Nodes added with one parameter (a parameter struct): NULL is refused
 * first. */
#define ADD_REFUSED_(name, ptype)                                                       \
    EMU_EXPORT CUresult name(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies, \
                             size_t numDependencies, ptype param)                      \
    {                                                                                  \
        EMU_ENTRY_INIT();                                                              \
        if (!param) return CUDA_ERROR_INVALID_VALUE;                                   \
        return add_refused(phGraphNode, hGraph, dependencies, numDependencies);        \
    }
ADD_REFUSED_(cuGraphAddExternalSemaphoresSignalNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)
ADD_REFUSED_(cuGraphAddExternalSemaphoresWaitNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)

#define SET_REFUSED_(name, ptype)                                                       \
    EMU_EXPORT CUresult name(CUgraphNode hNode, ptype param)                           \
    {                                                                                  \
        EMU_ENTRY_INIT();                                                              \
        return set_refused(hNode, param);                                              \
    }
SET_REFUSED_(cuGraphExternalSemaphoresSignalNodeSetParams, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS *)
SET_REFUSED_(cuGraphExternalSemaphoresWaitNodeSetParams, const CUDA_EXT_SEM_WAIT_NODE_PARAMS *)
