/*
 * core/prof_alias.c: aliasing in the profiled policy (prof.h), opt-in
 * (STABLEGRAPH_ALIAS=always or auto).
 *
 * Each group has anchor positions (prof_observe.c): at every launch the
 * allocation the first anchor points into is the one bound to the group's
 * slot, and every other anchor of the group must point into the same one.
 * Which words are translated is decided by value, not by position: every
 * kernel argument word, and every memcpy / memset address word, whose value
 * lies in a bound allocation, from its base up to and including one past its
 * end, at any position of any node, is an aliased word (the lowest group
 * bound to that allocation wins, so equal values stay equal). So every
 * pointer relation inside a buffer holds in slot space too: a fixed begin
 * and end with a moving cursor, a pointer and its end pointer (issue 10,
 * classes 1 and 15). A word equal to one past a bound allocation's end that
 * also lies inside another live allocation could be either: the exec then
 * leaves variants (the translation would be a guess).
 *
 * What aliasing cannot see, and why it is opt-in (README "Aliasing"): a
 * kernel may keep a slot address (store it in device memory) and follow it
 * after the slot was remapped or unmapped; pointers inside by-value structs
 * whose words look like scalars, or in device memory, are not translated; a
 * scalar whose value happens to lie in a bound buffer is.
 */
#include "prof.h"

#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

int sg_prof_alias_resolve(sg_prof *p, const sg_fp *L, const char **why)
{
    if (!p->ngroups) return 0;
    int changed = 0, rc = 0;
    sg_prof_finder f;
    sg_prof_finder_begin(&f);
    for (size_t g = 0; g < p->ngroups; g++) p->want[g].base = 0;
    for (size_t a = 0; a < p->nap && !rc; a++) {
        const apos *q = &p->ap[a];
        uint64_t v = sg_prof_word(sg_prof_pay(&L->nodes[q->node]), q->off);
        sg_alloc_info ai;
        sg_slot_bind *w = &p->want[q->group];
        if (!sg_prof_finder_find(&f, v, &ai) || !ai.own_handles || (p->ctx && ai.ctx != p->ctx) ||
            ai.size > p->slot_size[q->group]) {
            *why = "an aliased buffer left its allocation, or outgrew its slot";
            rc = -1;
        } else if (w->base && w->id != ai.id) {
            *why = "the positions of an aliased group point into different buffers";
            rc = -1;
        } else if (!w->base) {
            if (w->id != ai.id) changed = 1;
            *w = (sg_slot_bind){ .id = ai.id, .base = ai.base };
            p->galloc[q->group] = ai;
        }
    }
    sg_prof_finder_end(&f);
    if (rc == 0 && changed)
        for (size_t i = 0; i < L->n; i++) sg_prof_mark_dirty(p, i);
    return rc;
}

/* The group whose bound allocation holds v (base <= v <= end), the lowest
 * one; -1 if none. */
static int group_of(const sg_prof *p, uint64_t v, uint64_t *off)
{
    for (size_t g = 0; g < p->ngroups; g++) {
        const sg_alloc_info *a = &p->galloc[g];
        if (p->want[g].id && v >= a->base && v - a->base <= a->size) {
            *off = v - a->base;
            return (int)g;
        }
    }
    return -1;
}

int sg_prof_alias_canon(sg_prof *p, const sg_fp *L, size_t i)
{
    const sg_fp_node *n = &L->nodes[i];
    cnode *c = &p->lc[i];
    const unsigned char *pay = sg_prof_pay(n);
    if (n->len > c->cap) {
        unsigned char *b = realloc(c->pay, n->len);
        if (!b) return -1;
        c->pay = b;
        c->cap = n->len;
    }
    if (n->len) memcpy(c->pay, pay, n->len);
    c->len = n->len;
    c->nmask = 0;
    c->known = 1;
    uint32_t offs[2];
    uint32_t nw = 0;
    int kernel = n->k.type == CU_GRAPH_NODE_TYPE_KERNEL;
    if (!kernel) nw = (uint32_t)sg_prof_address_words(n, offs);
    else nw = n->len / 8;
    sg_prof_finder f;
    int fr = 0, rc = 0;
    for (uint32_t k = 0; k < nw && rc == 0; k++) {
        uint32_t off = kernel ? k * 8 : offs[k];
        uint64_t v = sg_prof_word(pay, off), o;
        int g = group_of(p, v, &o);
        if (g < 0) continue;
        if (o == p->galloc[g].size) {
            /* one past the end: also the start of (or inside) another buffer? */
            sg_alloc_info other;
            if (!fr) { sg_prof_finder_begin(&f); fr = 1; }
            if (sg_prof_finder_find(&f, v, &other) && other.id != p->galloc[g].id) {
                rc = -2;
                break;
            }
        }
        size_t cap = c->capmask;
        if (sg_grow((void **)&c->mask, &cap, c->nmask + 1, sizeof *c->mask) != 0) {
            rc = -1;
            break;
        }
        c->capmask = (uint32_t)cap;
        c->mask[c->nmask++] = off << 8 | (uint32_t)g;
        sg_prof_word_put(c->pay, off, o);
    }
    if (fr) sg_prof_finder_end(&f);
    if (rc) c->known = 0;
    return rc;
}

const unsigned char *sg_prof_translate(sg_prof *p, const sg_fp *L, int g, size_t i)
{
    const sg_fp_node *ln = &L->nodes[i];
    const cnode *c = p->ngroups ? &p->lc[i] : NULL;
    if (g < 0 || !c || !c->nmask || !p->gens[g].slots || p->gens[g].raw) return sg_prof_pay(ln);
    if (ln->len > p->scratch_cap) {
        unsigned char *b = realloc(p->scratch, ln->len);
        if (!b) return NULL;
        p->scratch = b;
        p->scratch_cap = ln->len;
    }
    memcpy(p->scratch, ln->pay, ln->len);
    for (uint32_t k = 0; k < c->nmask; k++) {
        uint32_t off = c->mask[k] >> 8, grp = c->mask[k] & 0xff;
        uint64_t o = sg_prof_word(c->pay, off);
        sg_prof_word_put(p->scratch, off, sg_prof_slots->addr(p->gens[g].slots, grp) + o);
    }
    return p->scratch;
}

void sg_prof_alias_free(sg_prof *p)
{
    if (p->lc)
        for (size_t i = 0; i < p->n; i++) sg_prof_cnode_free(&p->lc[i]);
    free(p->lc);
    free(p->ap);
    free(p->want);
    free(p->galloc);
    p->lc = NULL;
    p->ap = NULL;
    p->want = NULL;
    p->galloc = NULL;
    p->nap = 0;
}
