/*
 * emu_uobj.c: user objects of the emulated CUDA driver (cuUserObjectCreate,
 * cuUserObjectRetain/Release, cuGraphRetainUserObject/ReleaseUserObject),
 * after the programming guide's "CUDA User Objects":
 *   - an object has one reference count; references are owned by the
 *     program ("the calling thread"), by graphs and by execs. The count the
 *     program owns is kept apart (`user`), so a release of references it
 *     does not own (undefined: "It is undefined behavior to release
 *     references not owned by the caller") is refused loudly, as a
 *     violation, instead of destroying an object a graph still holds;
 *   - "A cloned cudaGraph_t retains a copy of every reference owned by the
 *     source cudaGraph_t, with the same multiplicity" (emu_graph_clone, and
 *     so the clone a child graph node embeds: "References owned by graphs
 *     in child graph nodes are associated to the child graphs, not the
 *     parents");
 *   - "An instantiated cudaGraphExec_t retains a copy of every reference in
 *     the source cudaGraph_t" (emu_exec.c: each nested instance of a child
 *     graph holds its child graph's); cuGraphExecUpdate and
 *     cuGraphExecChildGraphNodeSetParams: "the references in the new source
 *     graph are cloned and replace the references in the target graph"
 *     (emu_exec_update.c);
 *   - "if previous launches are not synchronized, any references which
 *     would be released are held until the launches have finished
 *     executing": each launch holds a copy of its exec's references until
 *     it is retired (emu_exec.c), so an exec destroyed or updated while it
 *     runs releases its own at once and the launch's keep the objects;
 *   - the destructor runs when the count reaches zero, "asynchronously", on
 *     "a shared internal thread" (one destructor thread, started at the first
 *     destruction; CU_USER_OBJECT_NO_DESTRUCTOR_SYNC: no API waits for it).
 *     The handle dies when the count reaches zero ("to use a user object
 *     handle after all references are released" is undefined: a violation,
 *     CUDA_ERROR_INVALID_VALUE).
 *
 * Locks: uobj_lock guards every object's counts; a reference list (a
 * graph's, an exec's, a launch's) is its owner's to serialise (graphs are
 * not thread-safe; an exec's under its top-level exec's lock). dq_lock
 * guards the destructor queue. Both are leaves, in that order at fork
 * (emu_uobj_fork); a count that reaches zero ends its object with neither
 * held.
 */
#include "emu_graph.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

struct CUuserObject_st {
    void *ptr;
    CUhostFn destroy;
    long long total;                /* every reference: the program's, graphs', execs', launches' */
    long long user;                 /* the program's */
    struct CUuserObject_st *next;   /* destructor queue */
};

static pthread_mutex_t uobj_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t dq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dq_cond = PTHREAD_COND_INITIALIZER;
static CUuserObject dq_head, dq_tail;
static int dq_thread;               /* the destructor thread runs */

static void *dtor_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dq_lock);
    for (;;) {
        while (!dq_head) pthread_cond_wait(&dq_cond, &dq_lock);
        CUuserObject o = dq_head;
        dq_head = o->next;
        if (!dq_head) dq_tail = NULL;
        pthread_mutex_unlock(&dq_lock);
        o->destroy(o->ptr);
        emu_handle_mem_put(EMU_K_UOBJ, o);
        pthread_mutex_lock(&dq_lock);
    }
    return NULL;
}

/* The count of o reached zero: its handle dies now, its destructor runs on
 * the destructor thread. */
static void uobj_dead(CUuserObject o)
{
    emu_handle_del(o);
    pthread_mutex_lock(&dq_lock);
    o->next = NULL;
    if (dq_tail) dq_tail->next = o;
    else dq_head = o;
    dq_tail = o;
    if (!dq_thread) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, dtor_thread, NULL) != 0) {
            fprintf(stderr, "cudaemu: cannot start the user-object destructor thread\n");
            abort();
        }
        pthread_attr_destroy(&a);
        dq_thread = 1;
    }
    pthread_cond_signal(&dq_cond);
    pthread_mutex_unlock(&dq_lock);
}

/* Adds d (> 0 or < 0) to o's total count, and u to the program's, under the
 * lock; a count that reaches zero ends o. */
static void uobj_add(CUuserObject o, long long d, long long u)
{
    pthread_mutex_lock(&uobj_lock);
    o->total += d;
    o->user += u;
    int dead = o->total == 0;
    pthread_mutex_unlock(&uobj_lock);
    if (dead) uobj_dead(o);
}

void emu_uobj_fork(int phase)
{
    if (phase == 0) {
        pthread_mutex_lock(&uobj_lock);
        pthread_mutex_lock(&dq_lock);
        return;
    }
    if (phase == 2) {                 /* the child has no destructor thread: the parent */
        pthread_cond_init(&dq_cond, NULL);   /* runs what was queued */
        dq_head = dq_tail = NULL;
        dq_thread = 0;
    }
    pthread_mutex_unlock(&dq_lock);
    pthread_mutex_unlock(&uobj_lock);
}

/* ------------------------------------------------------- reference lists */

static emu_uref *urefs_find(emu_urefs *r, CUuserObject o)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].o == o) return &r->v[i];
    return NULL;
}

/* Adds n references of o to r's entry (without counting them). */
static void urefs_put(emu_urefs *r, CUuserObject o, unsigned long long n)
{
    emu_uref *e = urefs_find(r, o);
    if (e) {
        e->n += n;
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 4;
        emu_uref *v = realloc(r->v, cap * sizeof *v);
        if (!v) {
            fprintf(stderr, "cudaemu: out of host memory (user object references)\n");
            abort();
        }
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (emu_uref){ o, n };
}

void emu_urefs_copy(emu_urefs *dst, const emu_urefs *src)
{
    for (size_t i = 0; i < src->n; i++) {
        uobj_add(src->v[i].o, (long long)src->v[i].n, 0);
        urefs_put(dst, src->v[i].o, src->v[i].n);
    }
}

void emu_urefs_drop(emu_urefs *r)
{
    emu_urefs old = *r;
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < old.n; i++) uobj_add(old.v[i].o, -(long long)old.v[i].n, 0);
    free(old.v);
}

void emu_urefs_move(emu_urefs *dst, emu_urefs *src)
{
    free(dst->v);
    *dst = *src;
    memset(src, 0, sizeof *src);
}

/* ------------------------------------------------------------------ API */

/* A live object, or a violation (a handle whose references were all
 * released: undefined) and 0. */
static int uobj_ok(CUuserObject o, const char *call)
{
    if (!o) return 0;
    if (emu_handle_ok(o, EMU_K_UOBJ)) return 1;
    emu_violation(call, "user object %p: not a live user object (all its references released?)", (void *)o);
    return 0;
}

static int count_ok(unsigned c) { return c && c <= INT_MAX; }

EMU_EXPORT CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                       unsigned int initialRefcount, unsigned int flags)
{
    EMU_ENTRY_INIT();
    /* "Currently it is required to pass CU_USER_OBJECT_NO_DESTRUCTOR_SYNC" */
    if (!object_out || !destroy || !count_ok(initialRefcount) || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    CUuserObject o = emu_handle_mem_get(EMU_K_UOBJ, sizeof *o);
    o->ptr = ptr;
    o->destroy = destroy;
    o->total = o->user = initialRefcount;
    emu_handle_add(o, EMU_K_UOBJ);
    *object_out = o;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuUserObjectRetain(CUuserObject object, unsigned int count)
{
    EMU_ENTRY_INIT();
    if (!count_ok(count) || !uobj_ok(object, __func__)) return CUDA_ERROR_INVALID_VALUE;
    uobj_add(object, count, count);
    return CUDA_SUCCESS;
}

/* Takes n of the program's references of o for a graph (MOVE) or for a
 * release; 0 (a violation) if the program owns fewer. */
static int user_take(CUuserObject o, unsigned n, const char *call)
{
    pthread_mutex_lock(&uobj_lock);
    long long had = o->user;
    if (had >= n) o->user -= n;
    pthread_mutex_unlock(&uobj_lock);
    if (had >= n) return 1;
    emu_violation(call, "user object %p: %u references taken from the program, which owns %lld", (void *)o, n,
                  had);
    return 0;
}

EMU_EXPORT CUresult cuUserObjectRelease(CUuserObject object, unsigned int count)
{
    EMU_ENTRY_INIT();
    if (!count_ok(count) || !uobj_ok(object, __func__) || !user_take(object, count, __func__))
        return CUDA_ERROR_INVALID_VALUE;
    uobj_add(object, -(long long)count, 0);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                            unsigned int flags)
{
    EMU_ENTRY_INIT();
    if (!emu_graph_ok(graph) || !count_ok(count) || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE) ||
        !uobj_ok(object, __func__))
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & CU_GRAPH_USER_OBJECT_MOVE) {
        /* "transfers references from the calling thread" */
        if (!user_take(object, count, __func__)) return CUDA_ERROR_INVALID_VALUE;
    } else {
        uobj_add(object, count, 0);
    }
    urefs_put(&graph->urefs, object, count);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
    EMU_ENTRY_INIT();
    if (!emu_graph_ok(graph) || !count_ok(count) || !uobj_ok(object, __func__)) return CUDA_ERROR_INVALID_VALUE;
    emu_uref *e = urefs_find(&graph->urefs, object);
    if (!e || e->n < count) return CUDA_ERROR_INVALID_VALUE;    /* not the graph's to release */
    e->n -= count;
    if (!e->n) *e = graph->urefs.v[--graph->urefs.n];
    uobj_add(object, -(long long)count, 0);
    return CUDA_SUCCESS;
}
