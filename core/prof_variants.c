/*
 * core/prof_variants.c: exec variants ("generations") of the profiled
 * policy (prof.h): which generation holds the program's state, making one,
 * choosing one for a launch, and launching it in the program's order.
 *
 * Bookkeeping: each generation keeps the canonical nodes it was set from
 * (`canon`), a per-node equality flag with L's canonical nodes and the number
 * of mismatching nodes (`mism`); generation 0, the program's exec, holds raw
 * nodes (never slot addresses) and is compared with raw L. A node of L that
 * changes is marked dirty and compared once per generation (reconcile); a
 * launch whose L did not change compares nothing.
 *
 * Choosing (choose): the generation launched last if it holds L and its slots
 * show L's buffers; else any that does (no driver call but the launch); else
 * a new generation while fewer than STABLEGRAPH_MAX_GENERATIONS exist (one
 * the host memory budget, STABLEGRAPH_VARIANT_MEMORY, has no room for makes
 * the exec give its variants up: prof_rent.c); else
 * one that holds L whose slots can be rebound now (idle: no launch of it in
 * flight); else the least recently used idle one, brought to L with one
 * cuGraphExecUpdate from the clone (a forwarded update); else, when every
 * aliased generation is busy, the program's own exec brought to raw L. The
 * launch path never waits for the GPU (issue 10, class 5).
 *
 * Order (issue 10, class 3): the driver orders the launches of one exec, so
 * launches of different generations must be ordered by the library. While
 * the program launches on one stream nothing is needed. When a launch goes
 * to another stream and another generation than the previous one, it waits
 * (cuStreamWaitEvent) for an event recorded after the previous launch;
 * from the first such switch on, every launch records that event. At the
 * switch itself no event exists yet: the launch is served by the previous
 * launch's generation instead, brought to L by an update (the driver orders
 * it), or, if that fails, by an event recorded on the previous stream now.
 * A generation given up, or a stream destroyed, gets its event recorded
 * first, so the next launch still follows it. A launch on a per-thread
 * default stream records the event at once: another thread, or this one
 * with another context current, cannot name that stream to record on it
 * later. Streams are told apart by their identities (streams.h): one
 * thread's per-thread streams of two contexts are two streams (round 29).
 */
#include "prof.h"

#include "capture.h"
#include "driver.h"
#include "log.h"
#include "util.h"
#include "vmm.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ canonical nodes */

/* L's raw node i as a canonical node (no aliased word). */
static cnode raw_of(const sg_fp *L, size_t i)
{
    const sg_fp_node *n = &L->nodes[i];
    return (cnode){ .pay = (unsigned char *)sg_prof_pay(n), .len = n->len,
                    .known = n->k.state == SG_FP_OK };
}

cnode sg_prof_lc_of(const sg_prof *p, const sg_fp *L, size_t i)
{
    return p->ngroups ? p->lc[i] : raw_of(L, i);
}

/* What generation g must hold at node i to hold L: raw for a raw one,
 * canonical for the others. */
static cnode want_of(const sg_prof *p, const sg_fp *L, int g, size_t i)
{
    return p->gens[g].raw ? raw_of(L, i) : sg_prof_lc_of(p, L, i);
}

/* ------------------------------------------------------------ generations */

static void gen_free_arrays(pgen *g, size_t n)
{
    if (g->canon)
        for (size_t i = 0; i < n; i++) sg_prof_cnode_free(&g->canon[i]);
    free(g->canon);
    free(g->eq);
    g->canon = NULL;
    g->eq = NULL;
}

static int gen_alloc_arrays(pgen *g, size_t n)
{
    size_t m = n ? n : 1;
    g->canon = calloc(m, sizeof *g->canon);
    g->eq = calloc(m, 1);
    g->mism = n;
    return g->canon && g->eq ? 0 : -1;
}

void sg_prof_gens_free(sg_prof *p)
{
    sg_prof_alias_free(p);
    free(p->dirty);
    free(p->dirty_list);
    p->dirty = NULL;
    p->dirty_list = NULL;
    p->ndirty = 0;
    p->ngroups = 0;
}

int sg_prof_gens_setup(sg_prof *p, const sg_fp *L)
{
    size_t n = L->n, m = n ? n : 1;
    p->n = n;
    p->dirty = calloc(m, 1);
    p->dirty_list = calloc(m, sizeof *p->dirty_list);
    if (!p->dirty || !p->dirty_list) return -1;
    if (p->ngroups) {
        for (size_t i = 0; i < p->npos; i++) p->nap += p->pos[i].group >= 0;
        p->ap = calloc(p->nap ? p->nap : 1, sizeof *p->ap);
        p->want = calloc(p->ngroups, sizeof *p->want);
        p->galloc = calloc(p->ngroups, sizeof *p->galloc);
        p->lc = calloc(m, sizeof *p->lc);
        if (!p->ap || !p->want || !p->galloc || !p->lc) return -1;
        size_t k = 0;
        for (size_t i = 0; i < p->npos; i++)
            if (p->pos[i].group >= 0)
                p->ap[k++] = (apos){ p->pos[i].node, p->pos[i].off, (uint32_t)p->pos[i].group };
    }
    pgen *g0 = &p->gens[0];
    memset(g0, 0, sizeof *g0);
    if (gen_alloc_arrays(g0, n)) return -1;
    g0->live = 1;
    g0->raw = 1;
    g0->exec = p->exec;
    p->x0_known = sg_prof_fp_copy(&p->x0_st, L) == 0;
    for (size_t i = 0; i < n; i++) {          /* X_0 holds raw L */
        cnode r = raw_of(L, i);
        if (sg_prof_cnode_set(&g0->canon[i], &r)) return -1;
    }
    for (size_t i = 0; i < n; i++) sg_prof_mark_dirty(p, i);
    p->cur = 0;
    return 0;
}

void sg_prof_gen_destroy(sg_prof *p, int g, int ctx_gone)
{
    pgen *x = &p->gens[g];
    p->hit = -1;
    if (!x->live) return;
    if (x->bytes) sg_prof_mem_release(x->bytes);
    if (x->slots) sg_prof_slots->destroy(x->slots);
    if (g > 0 && x->exec && !ctx_gone && sg_drv.cuGraphExecDestroy)
        SG_DRIVER_CALL(cuGraphExecDestroy, x->exec);
    gen_free_arrays(x, p->n);
    memset(x, 0, sizeof *x);
}

/* The launch fast path (sg_prof_launch_variants): p->hit is the generation
 * choose would pick without any driver call, or -1. It is only set without
 * aliasing (whose slots must be checked against where L's buffers are at
 * every launch), in VARIANTS mode, with L reconciled: the last generation
 * launched if it holds L, else the first that does. Any change of a
 * generation or of L resets it. */
void sg_prof_set_hit(sg_prof *p)
{
    p->hit = -1;
    if (p->sim || p->ngroups || p->state != SG_PROF_VARIANTS || p->x0_stale || p->ndirty) return;
    if (p->gens[p->cur].live && p->gens[p->cur].mism == 0) {
        p->hit = p->cur;
        return;
    }
    for (int g = 0; g < sg_prof_caps.max_variants; g++)
        if (p->gens[g].live && p->gens[g].mism == 0) {
            p->hit = g;
            return;
        }
}

int sg_prof_reconcile(sg_prof *p, const sg_fp *L)
{
    for (size_t d = 0; d < p->ndirty; d++) {
        uint32_t i = p->dirty_list[d];
        if (p->ngroups) {
            int rc = sg_prof_alias_canon(p, L, i);
            if (rc) return rc;                /* keeps the rest dirty */
        }
        p->dirty[i] = 0;
        /* want_of for every generation, and its hash, computed once per
         * node: a generation's entry whose hash differs is unequal with no
         * byte compared (a node of L usually differs from all but one) */
        cnode raw = raw_of(L, i), canon = p->ngroups ? p->lc[i] : raw;
        uint64_t h_raw = sg_prof_cnode_hash(&raw), h_canon = p->ngroups ? sg_prof_cnode_hash(&canon) : h_raw;
        for (int g = 0; g < sg_prof_caps.max_variants; g++) {
            pgen *x = &p->gens[g];
            if (!x->live) continue;
            const cnode *have = &x->canon[i];
            unsigned char eq = have->h == (x->raw ? h_raw : h_canon) &&
                               sg_prof_cnode_eq(have, x->raw ? &raw : &canon);
            if (eq != x->eq[i]) {
                x->mism += eq ? (size_t)-1 : 1;
                x->eq[i] = eq;
            }
        }
    }
    p->ndirty = 0;
    sg_prof_set_hit(p);
    return 0;
}

int sg_prof_gen_holds(sg_prof *p, const sg_fp *L, int g)
{
    pgen *x = &p->gens[g];
    p->hit = -1;
    for (size_t i = 0; i < L->n; i++) {
        cnode w = want_of(p, L, g, i);
        if (sg_prof_cnode_set(&x->canon[i], &w)) return -1;
        x->eq[i] = 1;
    }
    x->mism = 0;
    return 0;
}

/* Forgets what generation g holds (after a failed update of it). */
static void gen_unknown(sg_prof *p, int g)
{
    pgen *x = &p->gens[g];
    for (size_t i = 0; i < p->n; i++) x->canon[i].known = 0;
    memset(x->eq, 0, p->n);
    x->mism = p->n + 1;
    p->hit = -1;
}

/* Forwarded-update accounting for an update the library makes to bring a
 * variant to the program's state: scalar_changed if some differing kernel
 * word does not hold a placed address, else pointer_not_aliased. */
static sg_reason variant_update_reason(const sg_prof *p, const sg_fp *L, int g)
{
    const pgen *x = &p->gens[g];
    sg_prof_finder f;
    sg_prof_finder_begin(&f);
    sg_reason r = SG_REASON_POINTER_NOT_ALIASED;
    for (size_t i = 0; i < L->n && r == SG_REASON_POINTER_NOT_ALIASED; i++) {
        const sg_fp_node *ln = &L->nodes[i];
        const cnode *have = &x->canon[i];
        cnode w = want_of(p, L, g, i);
        if (x->eq[i] || ln->k.type != CU_GRAPH_NODE_TYPE_KERNEL || !have->known ||
            have->len != ln->len)
            continue;
        sg_alloc_info ai;
        for (uint32_t off = 0; off < ln->len; off += 8) {
            uint32_t n = ln->len - off < 8 ? ln->len - off : 8;
            if (!memcmp(have->pay + off, w.pay + off, n)) continue;
            if (n < 8 || !sg_prof_finder_find(&f, sg_prof_word(ln->pay, off), &ai)) {
                r = SG_REASON_SCALAR_CHANGED;
                break;
            }
        }
    }
    sg_prof_finder_end(&f);
    return r;
}

/* Makes a new generation g > 0 holding T_g(L): its host memory taken from
 * the budget, slots created and bound, clone translated, instantiated. 0, -2
 * if the budget has not enough free, or -1 (nothing left behind). */
static int gen_create(sg_prof *p, const sg_fp *L, int g)
{
    pgen *x = &p->gens[g];
    memset(x, 0, sizeof *x);
    uint64_t bytes = sg_prof_variant_bytes(L);
    if (sg_prof_mem_reserve(bytes)) return -2;
    x->bytes = bytes;
    if (gen_alloc_arrays(x, p->n)) goto fail;
    if (p->ngroups && (sg_prof_slots->create(p->ctx, p->dev, p->slot_size, p->ngroups, &x->slots) ||
                       sg_prof_slots->bind(x->slots, p->want, 0) != 0))
        goto fail;
    if (sg_prof_clone_sync(p, L, g) != CUDA_SUCCESS || !sg_drv.cuGraphInstantiateWithFlags ||
        SG_DRIVER_CALL(cuGraphInstantiateWithFlags, &x->exec, p->clone, p->inst_flags) !=
            CUDA_SUCCESS)
        goto fail;
    x->live = 1;
    if (sg_prof_gen_holds(p, L, g)) {
        sg_prof_gen_destroy(p, g, 0);
        return -1;
    }
    sg_exec_event(p->exec, SG_EXEC_EV_VARIANT);
    return 0;
fail:
    sg_prof_mem_release(x->bytes);
    if (x->slots) sg_prof_slots->destroy(x->slots);
    gen_free_arrays(x, p->n);
    memset(x, 0, sizeof *x);
    return -1;
}

static int gen_update_as(sg_prof *p, const sg_exec_view *xv, int g);

/* Whether x can serve L as it is: without aliasing always (its content is
 * checked by mism); with aliasing only a translated generation whose slots
 * show L's buffers (a raw one serves only when every translated one is
 * busy: choose's fallback). */
static int slots_match(const sg_prof *p, const pgen *x)
{
    if (!p->ngroups) return 1;
    return !x->raw && x->slots && sg_prof_slots->matches(x->slots, p->want);
}

/* Brings generation g to L with an update: translated through its slots
 * when aliasing (slots made and rebound first, without waiting: -1 if they
 * are busy), else raw (the program's exec by the restore paths). 0; -1 (g's
 * content is then unknown, or unchanged if the slots were busy); -2 if its
 * slots could not be reserved (aliasing is then given up). */
static int gen_update(sg_prof *p, const sg_exec_view *xv, int g)
{
    pgen *x = &p->gens[g];
    if (p->ngroups) {
        if (!x->slots &&
            sg_prof_slots->create(p->ctx, p->dev, p->slot_size, p->ngroups, &x->slots) != 0) {
            x->slots = NULL;
            return -2;
        }
        if (sg_prof_slots->bind(x->slots, p->want, 0) != 0) return -1;
    }
    x->raw = !p->ngroups;
    return gen_update_as(p, xv, g);
}

/* Brings generation g to raw L with an update (the fallback when every
 * aliased generation is busy: an exec may be updated while it runs; its
 * slots are not touched). */
static int gen_update_raw(sg_prof *p, const sg_exec_view *xv, int g)
{
    p->gens[g].raw = 1;
    return gen_update_as(p, xv, g);
}

/* The update itself, in the mode g->raw says. */
static int gen_update_as(sg_prof *p, const sg_exec_view *xv, int g)
{
    const sg_fp *L = xv->L;
    pgen *x = &p->gens[g];
    sg_reason reason = variant_update_reason(p, L, g);
    CUresult rc = g == 0 && x->raw ? sg_prof_x0_restore(p, xv)
                                   : sg_prof_exec_to(p, L, x->raw ? -1 : g, x->exec);
    if (rc != CUDA_SUCCESS || sg_prof_gen_holds(p, L, g)) {
        gen_unknown(p, g);
        return -1;
    }
    SG_TOTAL_ADD(updates_seen, 1);
    SG_TOTAL_ADD(updates_forwarded, 1);
    sg_exec_update(p->exec, 1, reason);
    return 0;
}

/* Picks the generation to launch for L (see the header comment); -1 with
 * *why set if the exec must leave VARIANTS mode. */
static int choose(sg_prof *p, const sg_exec_view *xv, const char **why)
{
    const sg_fp *L = xv->L;
    int max = sg_prof_caps.max_variants, nlive = 0, lru = -1, rebind = -1;
    pgen *cur = &p->gens[p->cur];
    if (cur->live && cur->mism == 0 && slots_match(p, cur)) return p->cur;
    for (int g = 0; g < max; g++) {
        pgen *x = &p->gens[g];
        if (!x->live) continue;
        nlive++;
        if (x->mism == 0 && slots_match(p, x)) return g;
        if (x->slots && !sg_prof_slots->idle(x->slots)) continue;   /* never wait */
        if (x->mism == 0 && !x->raw && rebind < 0) rebind = g;
        if (lru < 0 || x->last_use < p->gens[lru].last_use) lru = g;
    }
    if (nlive < max) {
        for (int g = 1; g < max; g++) {
            if (p->gens[g].live) continue;
            int rc = gen_create(p, L, g);
            if (rc == 0) return g;
            /* without room for the states it meets, the variants it has
             * would be updated in turn: given up, their memory returned */
            *why = rc == -2 ? "the host memory budget for variants (STABLEGRAPH_VARIANT_MEMORY) "
                              "has no room for another variant"
                            : "a variant could not be made (slots or instantiation failed)";
            return -1;
        }
    }
    if (rebind >= 0 && sg_prof_slots->bind(p->gens[rebind].slots, p->want, 0) == 0) return rebind;
    int r = lru >= 0 ? gen_update(p, xv, lru) : -1;
    if (r == 0) return lru;
    if (r == -2) {
        *why = "slots could not be reserved";
        return -1;
    }
    /* every aliased generation busy (or an update failed): the least
     * recently used one brought to raw L (no slot involved) */
    for (int g = 0; g < max; g++)
        if (p->gens[g].live && p->gens[g].raw && p->gens[g].mism == 0) return g;
    int old = -1;
    for (int g = 0; g < max; g++)
        if (p->gens[g].live && (old < 0 || p->gens[g].last_use < p->gens[old].last_use)) old = g;
    if (old >= 0 && gen_update_raw(p, xv, old) == 0) return old;
    *why = "a variant could not be updated";
    return -1;
}

/* ------------------------------------------------------------ order */

static CUresult launch_exec(const sg_prof *p, int g, const sg_call *c)
{
    if (g == 0) return c->forward(c->args);
    CUgraphExec e = p->gens[g].exec;
    if (c->per_thread)
        return sg_drv.cuGraphLaunch_ptsz ? SG_DRIVER_CALL(cuGraphLaunch_ptsz, e, c->u.launch.stream)
                                         : CUDA_ERROR_NOT_SUPPORTED;
    return sg_drv.cuGraphLaunch ? SG_DRIVER_CALL(cuGraphLaunch, e, c->u.launch.stream)
                                : CUDA_ERROR_NOT_SUPPORTED;
}

/* A launch of generation *g on another stream than the previous launch, of
 * another generation: ordered after it (the header's Order); *g may become
 * the previous generation. CUDA_SUCCESS, or what the program gets. Kept out
 * of sg_prof_launch_ordered, whose steady state never comes here. */
static __attribute__((noinline)) CUresult order_switch(sg_prof *p, const sg_exec_view *xv, int *g,
                                                       const sg_call *c)
{
    p->multi = 1;
    if (!p->order_valid) {
        /* the first switch: the previous launch's generation serves this
         * one (the driver orders them), else an event recorded now */
        int prev = p->last_gen;
        if (prev >= 0 && xv->L && p->gens[prev].live &&
            (p->gens[prev].mism == 0 || gen_update(p, xv, prev) == 0) &&
            slots_match(p, &p->gens[prev]))
            *g = prev;
        else
            sg_prof_order_record_last(p);
    }
    if (*g != p->last_gen) {
        if (!p->order_valid) return sg_prof_plausible(CUDA_ERROR_UNKNOWN);
        CUresult rc = sg_prof_order_wait(p, c);
        if (rc != CUDA_SUCCESS) return sg_prof_plausible(rc);
    }
    return CUDA_SUCCESS;
}

/* After a successful launch of generation g on stream c (identity s): its
 * slots are in use on the stream, and from the first switch of stream on, or
 * on a per-thread default stream, every launch records the order event. */
static __attribute__((noinline)) void launched_multi(sg_prof *p, int g, const sg_call *c,
                                                    sg_stream_id s)
{
    if (p->gens[g].live && p->gens[g].slots)
        sg_prof_slots->launched(p->gens[g].slots, c->u.launch.stream, c->per_thread);
    if (p->multi || sg_stream_id_per_thread(s)) sg_prof_order_record(p, c->u.launch.stream, c->per_thread);
    else p->order_valid = 0;
}

CUresult sg_prof_launch_ordered(sg_prof *p, const sg_exec_view *xv, int g, const sg_call *c)
{
    sg_stream_id s = sg_stream_id_of(c->u.launch.stream, c->per_thread);
    if (__builtin_expect(p->last_gen != -1 && g != p->last_gen && !sg_stream_id_eq(s, p->last_stream), 0)) {
        CUresult rc = order_switch(p, xv, &g, c);
        if (rc != CUDA_SUCCESS) return rc;
    }
    CUresult rc = launch_exec(p, g, c);
    /* refused for want of memory: the arenas give back what they hold and g is launched again behind
     * the same order wait, rec->lock held (the trim's locks come after it: docs/locking.md), as graphs.c
     * does for a plain launch (round 21: tests/e2e/adv_oom.c observed_launch, skip_profiled) */
    if (__builtin_expect(rc == CUDA_ERROR_OUT_OF_MEMORY, 0) && sg_mem_trim_retry()) rc = launch_exec(p, g, c);
    if (rc != CUDA_SUCCESS) return rc;
    pgen *x = &p->gens[g];
    /* a per-thread default stream cannot be named from another thread, or
     * another context, afterwards (last_stream_handle): its order event is
     * recorded at once, so that a launch there can wait for it */
    if (__builtin_expect(p->multi || (x->live && x->slots) || sg_stream_id_per_thread(s), 0))
        launched_multi(p, g, c, s);
    else p->order_valid = 0;
    p->last_gen = g;
    p->last_stream = s;
    if (x->live) {
        x->last_use = ++p->tick;
        p->cur = g;
    }
    return rc;
}

/* ------------------------------------------------------------ launch */

CUresult sg_prof_launch_variants(sg_prof *p, const sg_exec_view *x, const sg_call *c)
{
    const sg_fp *L = x->L;
    const char *why = NULL;
    int g = -1, r;
    if (sg_prof_alias_resolve(p, L, &why)) {
        /* why set */
    } else if ((r = sg_prof_reconcile(p, L)) != 0) {
        why = r == -2 ? "a word could be one past the end of an aliased buffer or the start of "
                        "another (the translation would be a guess)"
                      : "out of memory";
    } else {
        g = choose(p, x, &why);
    }
    if (g < 0) {
        CUresult rc = sg_prof_leave(p, x, 1, why);
        return rc == CUDA_SUCCESS ? sg_prof_launch_ordered(p, x, 0, c) : sg_prof_plausible(rc);
    }
    CUresult rc = sg_prof_launch_ordered(p, x, g, c);
    if (rc == CUDA_SUCCESS) sg_prof_set_hit(p);
    return rc;
}

/* ------------------------------------------------------------ start and end */

int sg_prof_gens_start(sg_prof *p, const sg_fp *L)
{
    if (p->sim || p->state != SG_PROF_VARIANTS || !sg_prof_gens_setup(p, L)) return 0;
    sg_prof_gens_free(p);
    sg_prof_gen_destroy(p, 0, 0);
    p->state = SG_PROF_PLAIN;
    p->prof.generations = 0;
    p->prof.why = "out of memory";
    return -1;
}

CUresult sg_prof_leave(sg_prof *p, const sg_exec_view *x, int final, const char *why)
{
    CUresult rc = CUDA_SUCCESS;
    const sg_fp *L = x->L;
    if (!p->sim && p->state == SG_PROF_VARIANTS) {
        int restore = 1;
        if (L && sg_prof_reconcile(p, L) == 0) restore = p->gens[0].mism != 0;
        if (restore) rc = sg_prof_x0_restore(p, x);
        sg_prof_order_hand_over(p);
        for (int g = sg_prof_caps.max_variants - 1; g >= 0; g--) sg_prof_gen_destroy(p, g, 0);
        sg_prof_gens_free(p);
        if (rc != CUDA_SUCCESS) {
            SG_WARN("graph exec %p: could not restore the program's exec (%d): every launch tries "
                    "again before it may run", (void *)p->exec, (int)rc);
            p->x0_stale = 1;
            final = 1;
        }
    }
    sg_exec_event(p->exec, SG_EXEC_EV_DEMOTION);
    p->hit = -1;
    sg_prof_profile_reset(p);
    p->state = final || p->final_plain ? SG_PROF_PLAIN : SG_PROF_PROFILING;
    if (final && !p->final_plain) {
        p->final_plain = 1;
        p->prof.generations = 0;
        p->prof.why = why;
        sg_exec_set_profile(p->exec, &p->prof);
        SG_INFO("graph exec %lu (%p): generations given up: %s; its updates go to the driver as "
                "under skip_temp", sg_exec_id(p->exec), (void *)p->exec, why);
    }
    sg_prof_plain_for_good(p);
    return rc;
}
