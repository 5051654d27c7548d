/*
 * core/prof_rent.c: the purchase of exec variants (prof.h, issue 11). The
 * run's length is unknown in advance, so an exec buys like a ski renter:
 * once the decision finds that variants would serve it, it keeps forwarding
 * its updates (RENTING, as PLAIN) and adds up what each one cost, and buys
 * the variants (VARIANTS) only when those updates have cost as much as the
 * variants would. Whatever the run's length, the exec's update and
 * instantiation time is then at most twice what it would have been without
 * the library (what it forwarded, plus a price no larger than that), and in
 * a long run the price of the variants and nothing per step.
 *
 * The price: the instantiations of the variants (one per distinct state seen
 * while profiling, beyond the program's own exec, at most max_variants - 1;
 * none when the varying buffers are aliased into slots), each with the
 * clone's varying nodes set once (cuGraphKernelNodeSetParams), plus, when aliasing, a reservation
 * per slot and one whole-graph update of the program's exec into slot
 * addresses. What an update cost: the time the library measured around the
 * driver call (STABLEGRAPH_COST_TIMES=measured, the default) or the table's
 * figure for the nodes it changed (table). Every figure is the cost table's
 * (costs.h: core/costs.tsv, or STABLEGRAPH_COSTS).
 *
 * Host memory: each variant holds an exec (the table's host_bytes_node
 * figure per node) and the library's record of what it was set from (a
 * canonical node and its payload per node). The variants of all execs
 * together may hold at most STABLEGRAPH_VARIANT_MEMORY (sg_caps
 * variant_memory). An exec whose variants would not fit in what the budget
 * has free at its decision stays PLAIN (no renting: the updates it would
 * forward are the ones it forwards anyway); when every profiled launch
 * brought a new state, the states may be more than were seen, and the
 * variants that must fit are as many as may be made
 * (STABLEGRAPH_MAX_GENERATIONS - 1). Each variant reserves its bytes
 * when it is instantiated and returns them when it is destroyed, so a budget
 * that other execs took meanwhile makes the exec leave VARIANTS mode instead
 * of growing past it.
 *
 * Thread safety: as the rest of sg_prof, under the exec record's lock; the
 * bytes held against the budget are one atomic counter (any exec's lock).
 */
#include "prof.h"

#include "costs.h"
#include "util.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic uint64_t variant_bytes_held;

uint64_t sg_prof_variant_bytes(const sg_fp *L)
{
    uint64_t lib = L->n * (uint64_t)(sizeof(cnode) + 1);
    for (size_t i = 0; i < L->n; i++) lib += L->nodes[i].len + 32u;  /* a payload and its heap header */
    return sg_cost_exec_host_bytes(L->n) + lib;
}

int sg_prof_mem_reserve(uint64_t bytes)
{
    uint64_t held = atomic_load_explicit(&variant_bytes_held, memory_order_relaxed);
    do {
        if (bytes > sg_prof_caps.variant_memory || held > sg_prof_caps.variant_memory - bytes)
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(&variant_bytes_held, &held, held + bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    return 0;
}

void sg_prof_mem_release(uint64_t bytes)
{
    atomic_fetch_sub_explicit(&variant_bytes_held, bytes, memory_order_relaxed);
}

uint64_t sg_prof_mem_free(void)
{
    uint64_t held = atomic_load_explicit(&variant_bytes_held, memory_order_relaxed);
    return held < sg_prof_caps.variant_memory ? sg_prof_caps.variant_memory - held : 0;
}


void sg_prof_count_state(sg_prof *p, const sg_fp *L)
{
    uint64_t h = sg_fnv1a(SG_FNV_BASIS, &L->n, sizeof L->n);
    for (size_t i = 0; i < L->n; i++) h = sg_fnv1a(h, sg_prof_pay(&L->nodes[i]), L->nodes[i].len);
    for (unsigned k = 0; k < p->nstates; k++)
        if (p->state_hash[k] == h) return;
    if (p->nstates < (unsigned)sg_prof_caps.max_variants && p->nstates < SG_MAX_GENERATIONS_MAX)
        p->state_hash[p->nstates++] = h;
}

int sg_prof_rent_start(sg_prof *p, const sg_fp *L, size_t ngroups)
{
    sg_exec_profile *d = &p->prof;
    unsigned states = p->nstates > 1 ? p->nstates : 2;    /* a pointer varied: two at least */
    unsigned gens = states < (unsigned)sg_prof_caps.max_variants ? states
                                                                  : (unsigned)sg_prof_caps.max_variants;
    /* every profiled launch brought a new state: how many there are is not
     * known, so the budget must hold as many variants as may be made */
    unsigned held = p->launches > 0 && p->nstates >= (unsigned)p->launches
                        ? (unsigned)sg_prof_caps.max_variants : gens;
    d->variant_host_bytes = (held - 1) * sg_prof_variant_bytes(L);
    d->variant_memory_free = sg_prof_mem_free();
    if (d->variant_host_bytes > d->variant_memory_free) {
        d->why = "varying pointers; the variants would hold more host memory than "
                 "STABLEGRAPH_VARIANT_MEMORY has free";
        return -1;                       /* PLAIN: sg_prof_decide's state */
    }
    unsigned inst = ngroups ? 0 : gens - 1;
    uint64_t price = inst * (sg_cost_instantiate_ns(L->n) +
                             d->varying_positions * sg_cost_ns(SG_COSTID_GRAPH_NODE_SET, 1));
    if (ngroups)
        price += ngroups * gens * sg_cost_ns(SG_COSTID_ADDRESS_RESERVE, 0) + sg_cost_update_ns(L->n);
    d->renting = 1;
    d->generations = 0;
    d->variants_priced = inst;
    d->variant_ns = price;
    d->decided_at = p->nlaunch;
    d->bought_at = 0;
    d->forwarded_ns = 0;
    d->rented_updates = 0;
    d->rent_launch = 0;
    d->measured = 0;
    p->pending = 0;
    p->state = SG_PROF_RENTING;
    return 0;
}

uint64_t sg_prof_rent_of(const sg_fp *L, const sg_update *u)
{
    if (u->delta) return sg_cost_update_ns(u->delta->n);
    if (!u->next) return sg_cost_ns(SG_COSTID_NODE_SET, 1);
    size_t changed = 0;
    for (size_t i = 0; i < L->n && i < u->next->n; i++)
        changed += !sg_bytes_eq(L->nodes[i].pay, u->next->nodes[i].pay, u->next->nodes[i].len);
    return sg_cost_update_ns(changed);
}

void sg_prof_rent_paid(sg_prof *p, uint64_t ns)
{
    sg_exec_profile *d = &p->prof;
    int measured = sg_prof_caps.measured_costs && ns;
    d->forwarded_ns += measured ? ns : p->rent_pending;
    d->measured |= measured;
    d->rented_updates++;
    d->rent_launch = p->nlaunch;
    p->pending = 0;
    sg_exec_set_profile(p->exec, d);
}

int sg_prof_rent_due(const sg_prof *p)
{
    return p->state == SG_PROF_RENTING && p->prof.forwarded_ns >= p->prof.variant_ns;
}

void sg_prof_buy(sg_prof *p)
{
    p->prof.renting = 0;
    p->prof.generations = 1;
    p->prof.bought_at = p->nlaunch;
    p->state = SG_PROF_VARIANTS;
}

void sg_prof_rent_end(sg_prof *p)
{
    p->pending = 0;
    p->prof.renting = 0;
    p->prof.why = "renting stopped: an update variants would not carry (profiling again)";
    sg_exec_set_profile(p->exec, &p->prof);
    sg_prof_profile_reset(p);
    p->state = SG_PROF_PROFILING;
}
