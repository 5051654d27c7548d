/*
 * core/pathtmpl.h: the report-path template (STABLEGRAPH_REPORT): checking
 * it and expanding %p (pid), %h (host), %r (rank) and %% into a path.
 *
 * A leaf: it depends on the C library only, so that the configuration
 * parser (config.c, which checks the template) and whoever writes the
 * report can both use it without depending on each other. No global state,
 * no locks.
 */
#ifndef SG_PATHTMPL_H
#define SG_PATHTMPL_H

#include <stddef.h>

#include "config.h"

/* What %p, %h and %r expand to. */
typedef struct sg_path_env {
    long pid;
    const char *host;
    const char *rank;   /* NULL: no rank variable set; %r gives "norank" */
} sg_path_env;

/* The rank from RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK (first
 * one set), or NULL. */
const char *sg_rank_from_env(sg_getenv_fn getenv_fn);

/* 0 if tmpl is a non-empty template whose % sequences are all %p %h %r %%;
 * -1 otherwise. */
int sg_report_path_check(const char *tmpl);

/* Expands tmpl into out (n bytes). '/' inside host or rank becomes '_'.
 * Returns 0, or -1 if tmpl is bad or the result does not fit (out is then
 * an empty string). */
int sg_report_path_expand(const char *tmpl, const sg_path_env *env, char *out, size_t n);

#endif /* SG_PATHTMPL_H */
