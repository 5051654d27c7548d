/*
 * core/graph_uobj.c: which graphs hold user-object references (graphs.h,
 * sg_graph_uobj_*). The driver ties an object's lifetime to the handles
 * that hold it ("CUDA User Objects" in the programming guide): a graph, its
 * clones and the execs instantiated from it hold references, and
 * cuGraphExecUpdate replaces an exec's with the new graph's. An update the
 * library answers itself would keep the exec's old references and drop the
 * new graph's (a destructor run early, another delayed), and a clone or a
 * variant of the library's would hold references the program's handles do
 * not. The library does not model references; it only knows, per graph
 * handle, that the program moved or added some into it
 * (cuGraphRetainUserObject, the only way in: a capture's graph gets them
 * through its handle from cuStreamGetCaptureInfo) or that it is a clone of
 * such a graph (cuGraphClone). A graph marked once stays marked until it is
 * destroyed (cuGraphReleaseUserObject may leave it holding none: the mark
 * only costs savings); the mark goes before the driver's cuGraphDestroy,
 * which frees the handle value for another thread's next graph (graphs.c).
 * A child graph node's embedded graph (cuGraphChildGraphNodeGetGraph) may
 * be marked too, and dies with its parent, no call naming it: its mark then
 * stays on a value the driver gives to a new graph, so a graph the program
 * gets from cuGraphCreate or cuGraphClone starts unmarked (or as its
 * original) whatever its value held (sg_graph_uobj_born; round 40). A
 * captured graph exists from cuStreamBeginCapture on and may be marked
 * during its capture through its handle, so it keeps what its value holds
 * (a stale mark there only costs savings). A child graph node or conditional body that holds
 * them makes its parent's execs unsupported anyway (graphs.c: every update
 * forwarded, no observer), so a parent is not marked.
 *
 * Out of memory a mark could be lost: then every graph counts as marked
 * from then on (sticky), which is always correct.
 *
 * Locks: uo_lock guards the set; a leaf (taken under a record's lock).
 */
#include "graphs.h"

#include <pthread.h>
#include <stdlib.h>

static int uo_oom;       /* a mark was lost: every graph counts as marked (uo_lock) */
#define uthash_nonfatal_oom(elt) (uo_oom = 1)
#include "hash.h"

typedef struct uo_graph {
    CUgraph graph;
    UT_hash_handle hh;
} uo_graph;

static pthread_mutex_t uo_lock = PTHREAD_MUTEX_INITIALIZER;
static uo_graph *uo_set;
static int uo_any;       /* atomic: a graph was ever marked (the common program: never) */

void sg_graph_uobj_mark(CUgraph g)
{
    if (!g) return;
    __atomic_store_n(&uo_any, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&uo_lock);
    uo_graph *e;
    HASH_FIND_PTR(uo_set, &g, e);
    if (!e && !uo_oom) {
        if (!(e = calloc(1, sizeof *e))) {
            uo_oom = 1;
        } else {
            e->graph = g;
            HASH_ADD_PTR(uo_set, graph, e);
            if (uo_oom) free(e);         /* the table could not grow: not added */
        }
    }
    pthread_mutex_unlock(&uo_lock);
}

int sg_graph_uobj_held(CUgraph g)
{
    if (!g || !__atomic_load_n(&uo_any, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&uo_lock);
    uo_graph *e = NULL;
    if (!uo_oom) HASH_FIND_PTR(uo_set, &g, e);
    int held = uo_oom || e;
    pthread_mutex_unlock(&uo_lock);
    return held;
}

void sg_graph_uobj_cloned(CUgraph orig, CUgraph clone)
{
    if (sg_graph_uobj_held(orig)) sg_graph_uobj_mark(clone);
    else sg_graph_uobj_born(clone);
}

void sg_graph_uobj_born(CUgraph g) { (void)sg_graph_uobj_forget(g); }

int sg_graph_uobj_forget(CUgraph g)
{
    if (!g || !__atomic_load_n(&uo_any, __ATOMIC_ACQUIRE)) return 0;
    pthread_mutex_lock(&uo_lock);
    uo_graph *e;
    HASH_FIND_PTR(uo_set, &g, e);
    if (e) {
        HASH_DEL(uo_set, e);
        free(e);
    }
    pthread_mutex_unlock(&uo_lock);
    return e != NULL;
}

void sg_graph_uobj_atfork(int phase)
{
    if (phase == 0) pthread_mutex_lock(&uo_lock);
    else pthread_mutex_unlock(&uo_lock);
}

void sg_graph_uobj_reset(void)
{
    uo_graph *e, *tmp;
    pthread_mutex_lock(&uo_lock);
    HASH_ITER(hh, uo_set, e, tmp) {
        HASH_DEL(uo_set, e);
        free(e);
    }
    uo_oom = 0;
    __atomic_store_n(&uo_any, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&uo_lock);
}
