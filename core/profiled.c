/*
 * core/profiled.c: the skip_profiled policy as graphs.c's exec observer
 * (profiled.h): what happens to one exec at each event. The parts it uses
 * are in prof_observe.c, prof_variants.c, prof_restore.c and prof_alias.c
 * (prof.h).
 *
 *   created         profile state (the graph's clone is taken when variants
 *                   are bought: prof_restore.c);
 *   accept          in VARIANTS mode, an update whose differences are only
 *                   kernel argument bytes and memcpy / memset addresses in
 *                   placed memory of the exec's context is accepted without
 *                   the driver (the changed nodes are marked dirty);
 *   before_forward  any other update of a VARIANTS exec sends it back to
 *                   PROFILING, its own exec restored to L first;
 *   forwarded       forwarded updates are timed while profiling, and
 *                   charged while RENTING (prof_rent.c);
 *   launch          PROFILING records and forwards; the launch after the
 *                   last profiled one decides (PLAIN, or RENTING); RENTING
 *                   forwards until its updates have cost what the variants
 *                   would, then buys them; VARIANTS picks a variant;
 *                   every launch keeps the program's order; a launch into
 *                   a stream capture is the program's own exec, outside that
 *                   order (it runs nothing now);
 *   fix             state no variant carries: PLAIN for good;
 *   stream_gone     the order event is recorded before the stream goes;
 *   content_lost    VARIANTS is left (the program's exec restored) before a
 *                   module unload makes the exec's content unknown;
 *   destroyed       variants, clone and events go (none of the context's
 *                   objects is touched when the context is gone).
 */
#include "prof.h"

#include "capture.h"
#include "driver.h"
#include "log.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ lazy acceptance */

/* Whether two memcpy / memset payloads differ only in device address words
 * whose new value lies in a placed allocation of the exec's context. */
static int addresses_only(const sg_prof *p, const sg_fp_node *old, const sg_fp_node *nw)
{
    uint32_t offs[2];
    int k = sg_prof_address_words(old, offs);
    unsigned char tmp[sizeof(CUDA_MEMCPY3D)];
    if (nw->len > sizeof tmp) return 0;
    memcpy(tmp, nw->pay, nw->len);
    sg_prof_finder f;
    sg_prof_finder_begin(&f);
    int ok = 1;
    for (int j = 0; j < k && ok; j++) {
        uint64_t a = sg_prof_word(old->pay, offs[j]), b = sg_prof_word(nw->pay, offs[j]);
        sg_alloc_info ai;
        if (a == b) continue;
        ok = sg_prof_finder_find(&f, b, &ai) && (!p->ctx || !ai.ctx || ai.ctx == p->ctx);
        sg_prof_word_put(tmp, offs[j], a);
    }
    sg_prof_finder_end(&f);
    return ok && sg_bytes_eq(tmp, old->pay, old->len);
}

/* Whether node nw differs from old only as VARIANTS mode accepts (same key
 * but for attributes, which a per-node update leaves alone). */
static int lazy_node_ok(const sg_prof *p, const sg_fp_node *old, const sg_fp_node *nw)
{
    if (old->k.state != SG_FP_OK || nw->k.state != SG_FP_OK || old->len != nw->len ||
        memcmp(&old->k, &nw->k, offsetof(sg_fp_key, attr_mask)) || sg_fp_setter_refused(old, nw))
        return 0;
    if (sg_bytes_eq(old->pay, nw->pay, nw->len)) return 1;
    switch (old->k.type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return 1;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return addresses_only(p, old, nw);
    default:
        return 0;
    }
}

/* The same for a node of a whole-graph update: its attributes too. */
static int lazy_whole_ok(const sg_prof *p, const sg_fp_node *old, const sg_fp_node *nw)
{
    return old->k.attr_mask == nw->k.attr_mask && !memcmp(old->k.attrs, nw->k.attrs, sizeof old->k.attrs) &&
           lazy_node_ok(p, old, nw);
}

/* Whether update u of L is one VARIANTS mode accepts: for a whole graph
 * given as the nodes that differ, only those are looked at. */
static int lazy_update_ok(const sg_prof *p, const sg_fp *L, const sg_update *u)
{
    if (u->delta) {
        /* a kernel node the comparison found different only in its
         * arguments is one lazy_whole_ok accepts (same key, attributes,
         * states and length): not compared again */
        for (size_t k = 0; k < u->delta->n; k++) {
            const sg_fp_node *old = &L->nodes[u->delta->idx[k]];
            if (!sg_fp_delta_args_only(u->delta, k, old) && !lazy_whole_ok(p, old, &u->delta->nodes[k]))
                return 0;
        }
        return 1;
    }
    if (!u->next) return lazy_node_ok(p, &L->nodes[u->node], u->desc);
    const sg_fp *b = u->next;
    if (L->n != b->n || L->nedges != b->nedges || !sg_bytes_eq(L->edges, b->edges, L->nedges * sizeof *L->edges))
        return 0;
    for (size_t i = 0; i < L->n; i++)
        if (!lazy_whole_ok(p, &L->nodes[i], &b->nodes[i])) return 0;
    return 1;
}

/* RENTING: an update variants would accept is forwarded and charged
 * (pending: forwarded() pays it); any other ends renting (before_forward). */
static int rent(sg_prof *p, const sg_exec_view *x, const sg_update *u)
{
    p->pending = x->L && !p->x0_stale && lazy_update_ok(p, x->L, u);
    if (p->pending) p->rent_pending = sg_prof_rent_of(x->L, u);
    p->rent_graph = p->pending && u->call && u->call->kind == SG_CALL_UPDATE_GRAPH
                        ? u->call->u.update.graph : NULL;
    return 0;
}

static int accept(void *st, const sg_exec_view *x, const sg_update *u)
{
    sg_prof *p = st;
    if (p->state == SG_PROF_RENTING) return rent(p, x, u);
    if (p->state != SG_PROF_VARIANTS || !x->L || p->x0_stale) return 0;
    if (!lazy_update_ok(p, x->L, u)) return 0;
    if (p->sim) {               /* always_update: what skip_profiled would have done */
        sg_exec_event(p->exec, SG_EXEC_EV_WOULD_SKIP_PROFILED);
        return -1;
    }
    if (u->delta) {                             /* the comparison found them */
        for (size_t k = 0; k < u->delta->n; k++) sg_prof_mark_dirty(p, u->delta->idx[k]);
    } else if (u->next) {
        for (size_t i = 0; i < x->L->n; i++)
            if (!sg_bytes_eq(x->L->nodes[i].pay, u->next->nodes[i].pay, u->next->nodes[i].len))
                sg_prof_mark_dirty(p, i);
    } else {
        sg_prof_mark_dirty(p, (size_t)u->node);
    }
    return 1;
}

/* After an accepted update: the changed nodes are compared with every
 * generation now, so that this work belongs to the update and the launch
 * that follows only checks its buffers. On failure (out of memory) the
 * nodes stay dirty: the launch retries. */
static void accepted(void *st, const sg_exec_view *x)
{
    sg_prof *p = st;
    if (!p->ngroups && p->ndirty && x->L) (void)sg_prof_reconcile(p, x->L);
}

/* ------------------------------------------------------------ the other events */

static void *created(const sg_exec_view *x, CUgraph graph)
{
    sg_prof *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->exec = x->exec;
    p->sim = !sg_prof_caps.variants;
    p->state = SG_PROF_PROFILING;
    p->hit = -1;
    p->last_gen = -1;
    p->ctx = x->ctx;
    if (p->ctx && sg_drv.cuCtxGetDevice) SG_DRIVER_CALL(cuCtxGetDevice, &p->dev);
    p->src = graph;
    if (p->sim || !x->L) return p;
    const sg_fp *L = x->L;
    cuuint64_t flags = 0;
    if (sg_drv.cuGraphExecGetFlags && SG_DRIVER_CALL(cuGraphExecGetFlags, p->exec, &flags) == CUDA_SUCCESS)
        p->inst_flags = flags & (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    /* The clone is taken when variants are bought (prof_restore.c); until
     * then clone_st keeps L as instantiated, whose attributes it must have. */
    if (sg_prof_fp_copy(&p->clone_st, L) != 0) sg_fp_free(&p->clone_st);
    p->n = L->n;
    return p;
}

static CUresult before_forward(void *st, const sg_exec_view *x, const sg_update *u)
{
    sg_prof *p = st;
    (void)u;
    /* On failure the update still goes ahead: a whole-graph update that
     * succeeds sets every node (the eager application of the program's
     * state); launches stay refused until the exec holds it. */
    if (p->state == SG_PROF_VARIANTS) (void)sg_prof_leave(p, x, 0, NULL);
    else if (p->x0_stale) (void)sg_prof_x0_recover(p, x);
    if (p->state == SG_PROF_RENTING && !p->pending) sg_prof_rent_end(p);
    return CUDA_SUCCESS;
}

static void forwarded(void *st, const sg_exec_view *x, long node, uint64_t ns)
{
    sg_prof *p = st;
    if (p->state == SG_PROF_PROFILING) p->update_ns += ns;
    if (p->state == SG_PROF_RENTING) {
        if (p->pending && x->L) {
            sg_prof_rent_paid(p, ns);
            /* due: the graph the exec now holds is cloned while the
             * program's call still holds it (the program may destroy it) */
            if (node < 0 && p->rent_graph && sg_prof_rent_due(p))
                p->clone_src = p->sim || sg_prof_clone_take(p, p->rent_graph, x->L) == 0;
        } else {
            sg_prof_rent_end(p);        /* what the exec holds is no longer known */
        }
    }
    p->rent_graph = NULL;
    if (node < 0) {                      /* X_0 holds the program's whole graph now */
        p->x0_stale = 0;
        p->x0_known = 0;
        return;
    }
    const sg_fp *L = x->L;
    if (node < 0 || !L || !p->x0_known || (size_t)node >= p->x0_st.n || (size_t)node >= L->n ||
        sg_fp_node_copy(&p->x0_st.nodes[node], &L->nodes[node]))
        p->x0_known = 0;
}

/* The launch of an exec that is not in VARIANTS mode, or of one launched
 * into a stream capture: the program's own exec. */
static CUresult launch_own(sg_prof *p, const sg_exec_view *x, const sg_call *c)
{
    if (p->x0_stale) {       /* a restore failed: X_0 must not run as it is */
        CUresult rc = sg_prof_x0_recover(p, x);
        if (rc != CUDA_SUCCESS) return sg_prof_plausible(rc);
    }
    return p->sim ? c->forward(c->args) : sg_prof_launch_ordered(p, x, 0, c);
}

/* A launch into a stream capture (sg_capture_stream: the program's stream
 * captures): the program's own exec, as the program made it. It runs
 * nothing now (the driver records it in the capture, or refuses it), so it
 * is not one of the exec's launches in their order: no order event is
 * waited on (a capturing stream that waits on an event recorded outside the
 * capture invalidates it: the program got an error of the library's making)
 * or recorded (the event would belong to the capture), the previous launch
 * stays the one the next must follow, and it is not profiled and buys
 * nothing. A VARIANTS exec gives its variants up for good first, as before
 * (a captured X_0 must hold L). */
static __attribute__((noinline)) CUresult launch_captured(sg_prof *p, const sg_exec_view *x,
                                                          const sg_call *c)
{
    CUresult rc = CUDA_SUCCESS;
    if (p->state == SG_PROF_VARIANTS && !p->sim)
        rc = sg_prof_leave(p, x, 1, "launched into a stream capture");
    else if (p->x0_stale) rc = sg_prof_x0_recover(p, x);
    return rc == CUDA_SUCCESS ? c->forward(c->args) : sg_prof_plausible(rc);
}

/* Whether variants bought now have a clone to be made from (always_update's
 * simulation: whether skip_profiled's would). */
static int clone_at_hand(sg_prof *p, const sg_exec_view *x)
{
    if (p->sim) return p->clone_src || (x->nodes && p->src);
    return p->clone || sg_prof_clone_from_source(p, x) == 0;
}

/* At a decision or a purchase: buys if renting has cost as much as the
 * variants would, sets them up, reports, and launches. */
static CUresult settle(sg_prof *p, const sg_exec_view *x, const sg_call *c, const sg_fp *L)
{
    /* Due, but no graph to clone at hand (the source is gone and the rent
     * was not paid by a whole-graph update): renting goes on, and the next
     * whole-graph update gives the clone (forwarded). */
    if (sg_prof_rent_due(p) && !clone_at_hand(p, x)) {
        if (p->prof.decided_at == p->nlaunch) sg_prof_decided(p);    /* reported once */
        return launch_own(p, x, c);
    }
    if (sg_prof_rent_due(p)) {
        if (p->sim || sg_prof_clone_map(p) == 0) {
            sg_prof_buy(p);
        } else {                               /* no clone to make variants from: for good */
            p->prof.renting = 0;
            p->prof.why = "the graph's clone could not be read back";
            p->final_plain = 1;
            p->state = SG_PROF_PLAIN;
        }
    }
    sg_prof_gens_start(p, L);
    sg_prof_decided(p);
    if (p->state == SG_PROF_VARIANTS && !p->sim) return sg_prof_launch_variants(p, x, c);
    return launch_own(p, x, c);
}

/* Every launch but the steady states of launch(). */
static __attribute__((noinline)) CUresult launch_slow(sg_prof *p, const sg_exec_view *x,
                                                      const sg_call *c)
{
    const sg_fp *L = x->L;
    if (sg_capture_active() && sg_capture_stream(c->u.launch.stream, c->per_thread))
        return launch_captured(p, x, c);
    if (p->state == SG_PROF_VARIANTS && !p->sim) {
        if (!L) {            /* the exec's content is unknown: cannot translate */
            CUresult rc = sg_prof_leave(p, x, 1, "the exec's content became unknown");
            return rc == CUDA_SUCCESS ? launch_own(p, x, c) : sg_prof_plausible(rc);
        }
        return sg_prof_launch_variants(p, x, c);
    }
    if (p->state == SG_PROF_RENTING && !x->fixed) {
        if (!L) sg_prof_rent_end(p);
        else if (sg_prof_rent_due(p)) return settle(p, x, c, L);
    }
    if (p->state == SG_PROF_PROFILING && !p->final_plain && !x->fixed) {
        if (!L) {
            sg_prof_profile_reset(p);
        } else if (p->launches >= sg_prof_caps.profile_steps && sg_prof_same_shape(&p->base, L)) {
            sg_prof_decide(p, L);
            return settle(p, x, c, L);
        } else if (sg_prof_observe(p, L)) {
            sg_prof_profile_reset(p);
        }
    }
    return launch_own(p, x, c);
}

/* The steady states take no call but sg_prof_launch_ordered (and a RENTING
 * exec sg_prof_rent_due); everything else is launch_slow's. */
static CUresult launch(void *st, const sg_exec_view *x, const sg_call *c)
{
    sg_prof *p = st;
    p->nlaunch++;
    p->pending = 0;
    /* a program rotating among variants: the generation settled by the last
     * update, no driver call but the launch */
    if (__builtin_expect(p->hit >= 0 && x->L && !p->x0_stale, 1) && !sg_capture_active())
        return sg_prof_launch_ordered(p, x, p->hit, c);
    /* a PLAIN exec, or a RENTING one whose purchase is not due: its own
     * exec, in order (launch_own when X_0 is sound); a launch into a
     * capture is launch_slow's */
    if (!p->x0_stale && !p->sim && !sg_capture_active() &&
        (p->state == SG_PROF_PLAIN ||
         (p->state == SG_PROF_RENTING && x->L && !x->fixed && !sg_prof_rent_due(p))))
        return sg_prof_launch_ordered(p, x, 0, c);
    return launch_slow(p, x, c);
}

/* An upload: of the program's exec, behind whatever served the latest
 * launch (always_update launches nothing else). */
static CUresult upload(void *st, const sg_exec_view *x, const sg_call *c)
{
    sg_prof *p = st;
    (void)x;
    return p->sim ? c->forward(c->args) : sg_prof_upload_ordered(p, c);
}

static CUresult fix(void *st, const sg_exec_view *x, const char *why)
{
    sg_prof *p = st;
    CUresult rc = CUDA_SUCCESS;
    if (!why)
        why = "the exec holds state no variant carries (a disabled node, or a setter of a node type "
              "the library does not model)";
    if (p->state == SG_PROF_VARIANTS)
        rc = sg_prof_leave(p, x, 1, why);
    else if (p->x0_stale)
        rc = sg_prof_x0_recover(p, x);
    if (!p->final_plain) {          /* the report says why, decided or not */
        p->prof.decided = 1;
        p->prof.generations = 0;
        p->prof.renting = 0;
        p->prof.why = why;
        sg_exec_set_profile(p->exec, &p->prof);
    }
    p->final_plain = 1;
    p->state = SG_PROF_PLAIN;
    sg_prof_plain_for_good(p);
    return rc == CUDA_SUCCESS ? rc : sg_prof_plausible(rc);
}

static void stream_gone(void *st, const sg_exec_view *x, sg_stream_id s)
{
    (void)x;
    sg_prof_order_stream_gone(st, s);
}

/* A module unload will make x->L unknown: variants cannot be given up
 * after it (the program's exec could not be restored), so they are now. */
static void content_lost(void *st, const sg_exec_view *x)
{
    sg_prof *p = st;
    if (p->state == SG_PROF_VARIANTS && !p->sim) sg_prof_leave(p, x, 0, "a module is unloaded");
}

static void destroyed(void *st, int ctx_gone)
{
    sg_prof *p = st;
    if (!p) return;
    for (int g = sg_prof_caps.max_variants - 1; g >= 0; g--) sg_prof_gen_destroy(p, g, ctx_gone);
    sg_prof_gens_free(p);
    sg_prof_profile_free(p);
    sg_prof_order_free(p, ctx_gone);
    sg_prof_clone_free(p);
    sg_fp_free(&p->x0_st);
    free(p->slot_size);
    free(p->scratch);
    free(p);
}

static const sg_exec_observer observer = {
    .created = created, .accept = accept, .accepted = accepted,
    .before_forward = before_forward, .forwarded = forwarded, .launch = launch, .upload = upload,
    .fix = fix,
    .stream_gone = stream_gone, .content_lost = content_lost, .destroyed = destroyed,
};

const sg_exec_observer *sg_prof_init(const sg_caps *caps)
{
    sg_prof_caps = *caps;
    if (sg_prof_caps.max_variants > SG_MAX_GENERATIONS_MAX) sg_prof_caps.max_variants = SG_MAX_GENERATIONS_MAX;
    if (sg_prof_caps.max_variants < 1) sg_prof_caps.max_variants = 1;
    return caps->profile ? &observer : NULL;
}
