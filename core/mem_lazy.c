/*
 * core/mem_lazy.c: lazy kernel loading under the library's memory (design.md,
 * "Memory pressure" and "Headroom"). Under lazy loading (the default since
 * CUDA 12.2) a kernel's code reaches a context, taking device memory, when
 * its function is first taken or launched there; the arenas may hold that
 * memory. cuModuleGetFunction, cuKernelGetFunction and cuFuncLoad are
 * retried as allocations (memory.c); this file serves the two paths that
 * need more: cuLibraryGetKernel, and the uncaptured kernel launch through
 * the launch filter (memory.h).
 *
 * Locks: launch_lock guards the list of per-context tables and the counts
 * of context destroys (a leaf: nothing is taken under it); the tables' bytes are atomics; sg_launch_known is the
 * thread's own.
 */
#include "mem_internal.h"

#include "capture.h"
#include "contexts.h"
#include "driver.h"
#include "streams.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* cuLibraryGetKernel. Under lazy loading (the default) a kernel's code
 * reaches a context, taking device memory, when its function is first taken
 * there or at its first launch there; the CUDA runtime launches the CUkernel
 * itself right after looking it up, and that uncaptured launch goes
 * straight to the driver (hooks.c), so a failure for want of memory the
 * arenas hold would reach the program. The kernel is therefore loaded into
 * the current context now (cuKernelGetFunction; what the launch would load
 * next), given the arenas' unused chunks and tried once more on
 * CUDA_ERROR_OUT_OF_MEMORY. Not during a capture (the call's standing there
 * is not documented), not without a current context; whatever it answers,
 * the program gets the lookup's own result, and the kernel is as the driver
 * leaves it (loaded or not, its launch loads it if not). */
CUresult sg_mem_kernel_lookup(const sg_call *c)
{
    CUresult rc = c->forward(c->args);
    if (rc != CUDA_SUCCESS || !sg_mem_placing || !c->u.lookup.out || !sg_drv.cuKernelGetFunction ||
        sg_capture_active())
        return rc;
    CUkernel k = *c->u.lookup.out;
    CUfunction f;
    if (SG_DRIVER_CALL(cuKernelGetFunction, &f, k) == CUDA_ERROR_OUT_OF_MEMORY && sg_mem_trim_retry())
        SG_DRIVER_CALL(cuKernelGetFunction, &f, k);
    return rc;
}

static const unsigned char launch_none[SG_LAUNCH_TABLE];   /* every launch: general path */
const unsigned char sg_launch_all[SG_LAUNCH_TABLE] = { [0 ... SG_LAUNCH_TABLE - 1] = 1 };
__thread const unsigned char *sg_launch_known = launch_none;

/* One table per live context launched in. Tables are never freed (a thread
 * may still point at one); the table of a context that ended goes back to
 * the list without an owner (ctx NULL) and serves the next context that
 * needs one, so the list is as long as the most contexts alive at once
 * (before round 42 a table stayed with each ended context's handle: 4 KiB
 * for each context ever launched in, tests/e2e/test_soak.sh contexts). A
 * thread that still points at it has the ended context current (a switch,
 * a cuCtxCreate or its own cuCtxDestroy points it back at launch_none), in
 * which every launch fails, through either path. A primary context's table
 * stays with it (one per device): a primary context released and retained
 * again keeps its handle, and a thread that had it current launches in it
 * again. */
typedef struct launch_table {
    CUcontext ctx;                /* its context; NULL: free; LAUNCH_DYING: dying's, being destroyed */
    CUcontext dying;
    unsigned char *bytes;
    struct launch_table *next;
} launch_table;
static launch_table *launch_tables;
static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
/* Context destroys (launch_lock; epoch also read without it): epoch counts
 * every take and every teardown or give-back, dying the destroys between
 * take and teardown (or give-back). */
static unsigned long launch_epoch;
static unsigned launch_dying;

/* ctx's table, made if it has none; NULL if out of memory or if a context
 * destroy began or ended since the caller read epoch, or is in flight (the
 * launch is then not marked: its next launches take the general path too).
 * The launch ran in ctx, which was alive then; without that test a destroy
 * of ctx between the launch and this call (another thread's cuCtxDestroy
 * of a context current here, whose take found no table of ctx yet) left a
 * table made for the dead value, which a context made later on the value
 * would have found with the old context's launches marked: their first
 * launches there direct, without the retry after a trim. */
static unsigned char *launch_table_of(CUcontext ctx, unsigned long epoch)
{
    pthread_mutex_lock(&launch_lock);
    if (launch_dying || launch_epoch != epoch) {
        pthread_mutex_unlock(&launch_lock);
        return NULL;
    }
    launch_table *t = launch_tables, *spare = NULL;
    for (; t && t->ctx != ctx; t = t->next)
        if (!t->ctx && !spare) spare = t;
    if (!t && spare) {
        t = spare;               /* cleared when its context ended */
        t->ctx = ctx;
    } else if (!t && (t = calloc(1, sizeof *t))) {
        if ((t->bytes = calloc(1, SG_LAUNCH_TABLE))) {
            t->ctx = ctx;
            t->next = launch_tables;
            launch_tables = t;
        } else {
            free(t);
            t = NULL;
        }
    }
    pthread_mutex_unlock(&launch_lock);
    return t ? t->bytes : NULL;
}

void sg_launch_filter_switched(void) { sg_launch_known = launch_none; }

/* Context ctx ends (contexts.h, sg_ctx_on_take and SG_CTX_PART_LAUNCH).
 * Before the destroy is forwarded its tables leave it (marked dying): once
 * the driver has freed the handle another thread's new context may get the
 * value, and must find no table holding the old context's launches (nor
 * have one it made taken away afterwards, while its threads point at it).
 * Once destroyed, the dying tables, cleared, go back for the next context;
 * a refused destroy gives them back to ctx. */
static const char dying_mark;
#define LAUNCH_DYING ((CUcontext)(uintptr_t)&dying_mark)
enum { LAUNCH_GOING, LAUNCH_GONE, LAUNCH_KEPT };

static void launch_ctx_phase(CUcontext ctx, int phase)
{
    pthread_mutex_lock(&launch_lock);
    __atomic_store_n(&launch_epoch, launch_epoch + 1, __ATOMIC_RELEASE);
    if (phase == LAUNCH_GOING) launch_dying++;
    else if (launch_dying) launch_dying--;
    for (launch_table *t = launch_tables; t; t = t->next) {
        if (phase == LAUNCH_GOING) {
            if (t->ctx != ctx) continue;
            t->ctx = LAUNCH_DYING;
            t->dying = ctx;
        } else if (t->ctx == LAUNCH_DYING && t->dying == ctx) {
            if (phase == LAUNCH_GONE)
                for (size_t i = 0; i < SG_LAUNCH_TABLE; i++) __atomic_store_n(&t->bytes[i], 0, __ATOMIC_RELAXED);
            t->ctx = phase == LAUNCH_GONE ? NULL : ctx;
            t->dying = NULL;
        }
    }
    pthread_mutex_unlock(&launch_lock);
}

/* The token handed back is the context itself. */
static void *launch_take(CUcontext ctx)
{
    if (!ctx) return NULL;
    launch_ctx_phase(ctx, LAUNCH_GOING);
    return ctx;
}

static void launch_give_back(void *taken) { launch_ctx_phase((CUcontext)taken, LAUNCH_KEPT); }

/* The teardown: only what was taken (a primary context keeps its table). */
static void launch_teardown(sg_ctx *c)
{
    if (c->early[SG_CTX_PART_LAUNCH]) launch_ctx_phase((CUcontext)c->early[SG_CTX_PART_LAUNCH], LAUNCH_GONE);
}

void sg_launch_filter_init(void)
{
    sg_ctx_on_take(SG_CTX_PART_LAUNCH, launch_take, launch_give_back);
    sg_ctx_on_teardown(SG_CTX_PART_LAUNCH, launch_teardown);
}

/* A context destroyed or reset: what its kernels had loaded is gone (and a
 * primary context keeps its handle); a module or library unloaded: the
 * driver gives its kernels' handle values to kernels loaded next, which no
 * context has loaded (round 25: a CUkernel of a library loaded after another
 * was unloaded went direct at its first launch, CUDA_ERROR_OUT_OF_MEMORY).
 * Every table is cleared (rare); other threads' pointers stay on their (now
 * empty) tables. */
void sg_launch_filter_forget(void)
{
    pthread_mutex_lock(&launch_lock);
    for (launch_table *t = launch_tables; t; t = t->next)
        for (size_t i = 0; i < SG_LAUNCH_TABLE; i++) __atomic_store_n(&t->bytes[i], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&launch_lock);
    sg_launch_known = launch_none;
}

/* An uncaptured kernel launch that the direct path sent here (core.c sends
 * it only while no capture is in progress): a function's first launch in
 * this thread's context since the thread's last switch. Under lazy loading
 * its first launch in a context may take device memory (a CUkernel looked
 * up in another context): on CUDA_ERROR_OUT_OF_MEMORY the arenas give back
 * their unused chunks and the launch is made once more (sg_mem_retry: a
 * launch that failed was not queued). Then its byte is set in the current
 * context's table, if it ran there, and no capture began meanwhile. */
CUresult sg_mem_kernel_launch(const sg_call *c)
{
    unsigned long epoch = __atomic_load_n(&launch_epoch, __ATOMIC_ACQUIRE);
    CUresult rc = c->forward(c->args);
    if (!sg_mem_placing) {
        sg_launch_known = sg_launch_all;
        return rc;
    }
    if (sg_capture_active()) return rc;
    rc = sg_mem_retry(c, rc);
    CUcontext cur = NULL, sctx = NULL;
    if (rc != CUDA_SUCCESS || SG_DRIVER_CALL(cuCtxGetCurrent, &cur) != CUDA_SUCCESS || !cur) return rc;
    CUstream s = c->u.kernel.stream;
    if (!sg_default_stream(s) && (SG_DRIVER_CALL(cuStreamGetCtx, s, &sctx) != CUDA_SUCCESS || sctx != cur))
        return rc;
    unsigned char *t = launch_table_of(cur, epoch);
    if (!t) return rc;
    __atomic_store_n(&t[SG_LAUNCH_SLOT(c->u.kernel.f)], 1, __ATOMIC_RELAXED);
    sg_launch_known = t;
    return rc;
}
