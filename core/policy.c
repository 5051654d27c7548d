/*
 * core/policy.c: the policy and its settings as capability flags
 * (policy.h). No state.
 */
#include "policy.h"

#include <stdint.h>

sg_caps sg_policy_caps(const sg_config *cfg)
{
    sg_caps c = { 0 };
    sg_policy p = cfg->policy;
    c.observe = p != SG_POLICY_OFF;
    c.place = p == SG_POLICY_SKIP_TEMP || p == SG_POLICY_SKIP_PROFILED;
    c.skip_identical = c.place;
    c.count_would_skip = p == SG_POLICY_ALWAYS_UPDATE;
    c.profile = p == SG_POLICY_SKIP_PROFILED || p == SG_POLICY_ALWAYS_UPDATE;
    c.variants = p == SG_POLICY_SKIP_PROFILED;
    c.alias_mode = cfg->alias;
    c.alias = c.variants && cfg->alias != SG_ALIAS_NEVER;
    c.own_handles_min = SIZE_MAX;
    c.place_max_bytes = cfg->place_max_bytes;
    c.headroom_bytes = cfg->headroom_bytes;
    if (c.alias) c.own_handles_min = cfg->alias_min_bytes ? cfg->alias_min_bytes : 1;
    c.profile_steps = cfg->profile_steps > 0 ? cfg->profile_steps : SG_PROFILE_STEPS_DEFAULT;
    c.max_variants = cfg->max_generations > 0 ? cfg->max_generations : SG_MAX_GENERATIONS_DEFAULT;
    c.variant_memory = cfg->variant_memory;
    c.measured_costs = cfg->cost_times == SG_COST_TIMES_MEASURED;
    return c;
}
