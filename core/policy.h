/*
 * core/policy.h: the policy, turned once into capability flags.
 *
 * This is the only file besides the configuration (config.h) that names the
 * policies. process.c computes the flags at start-up and hands them to each
 * module's init; no module reads the policy back.
 *
 *   policy          observe place skip_identical count_would_skip profile variants
 *   off                0      0        0               0            0       0
 *   always_update      1      0        0               1            1       0
 *   skip_temp          1      1        1               0            0       0
 *   skip_profiled      1      1        1               0            1       1
 *
 * alias: skip_profiled with STABLEGRAPH_ALIAS=always or auto (opt-in; see
 * README "Aliasing"): varying buffers may be mapped a second time into the
 * library's slots. own_handles_min: the allocation size from which placed
 * blocks get physical handles of their own (needed to alias them; SIZE_MAX
 * when aliasing is off, so blocks share granules and nothing is rounded up).
 *
 * Thread safety: a value type; no state.
 */
#ifndef SG_POLICY_H
#define SG_POLICY_H

#include <stddef.h>

#include "config.h"

typedef struct sg_caps {
    int observe;           /* core/ sees the hooked calls */
    int place;             /* memory.c places allocations in its arenas */
    int skip_identical;    /* graphs.c answers updates that change nothing */
    int count_would_skip;  /* graphs.c counts what skip_temp would skip */
    int profile;           /* the profiled policy watches each exec */
    int variants;          /* ... and acts on it: exec variants (else it only counts) */
    int alias;             /* variants may alias buffers into slots */
    sg_alias_mode alias_mode;
    size_t own_handles_min;
    size_t place_max_bytes;    /* STABLEGRAPH_PLACE_MAX_BYTES */
    size_t headroom_bytes;     /* STABLEGRAPH_HEADROOM (SG_HEADROOM_AUTO: per device) */
    int profile_steps;     /* launches profiled per exec */
    int max_variants;      /* exec variants per exec (the program's own included) */
    size_t variant_memory; /* host bytes all execs' variants may hold (STABLEGRAPH_VARIANT_MEMORY) */
    int measured_costs;    /* forwarded updates cost their measured time (else the table's) */
} sg_caps;

/* The flags of cfg's policy and settings. */
sg_caps sg_policy_caps(const sg_config *cfg);

#endif /* SG_POLICY_H */
