/*
 * core/pathtmpl.c: the report-path template (see pathtmpl.h). Expansion
 * writes into the caller's buffer; nothing is allocated.
 */
#include "pathtmpl.h"

#include <stdio.h>
#include <string.h>

/* The rank, first found: the launcher's own before the resource manager's.
 * An MPI launcher started inside a Slurm job (sbatch, then mpirun) passes
 * every rank the batch step's SLURM_PROCID, the same on a whole node, while
 * OMPI_COMM_WORLD_RANK / PMI_RANK / PMIX_RANK is the rank: with
 * SLURM_PROCID first, the ranks of a node overwrote one another's report
 * (tests/e2e/test_wrapper.sh). Under srun alone the MPI variables are unset,
 * or equal to SLURM_PROCID. */
static const char *const rank_vars[] = { "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                         "SLURM_PROCID", "FLUX_TASK_RANK", NULL };

const char *sg_rank_from_env(sg_getenv_fn getenv_fn)
{
    for (int i = 0; rank_vars[i]; i++) {
        const char *v = getenv_fn(rank_vars[i]);
        if (v && *v) return v;
    }
    return NULL;
}

/* Appends s to out at *used, turning '/' into '_' if sanitize; -1 if full. */
static int append(char *out, size_t n, size_t *used, const char *s, size_t len, int sanitize)
{
    if (*used + len >= n) return -1;
    for (size_t i = 0; i < len; i++)
        out[(*used)++] = sanitize && s[i] == '/' ? '_' : s[i];
    out[*used] = '\0';
    return 0;
}

int sg_report_path_expand(const char *tmpl, const sg_path_env *env, char *out, size_t n)
{
    size_t used = 0;
    char num[32];
    if (n == 0) return -1;
    out[0] = '\0';
    if (!tmpl || !*tmpl) return -1;
    for (const char *p = tmpl; *p; p++) {
        int rc;
        if (*p != '%') {
            rc = append(out, n, &used, p, 1, 0);
        } else {
            switch (*++p) {
            case 'p':
                snprintf(num, sizeof num, "%ld", env->pid);
                rc = append(out, n, &used, num, strlen(num), 0);
                break;
            case 'h':
                rc = append(out, n, &used, env->host, strlen(env->host), 1);
                break;
            case 'r': {
                const char *r = env->rank ? env->rank : "norank";
                rc = append(out, n, &used, r, strlen(r), 1);
                break;
            }
            case '%':
                rc = append(out, n, &used, "%", 1, 0);
                break;
            default:   /* unknown sequence, or '%' at the end */
                rc = -1;
            }
        }
        if (rc) {
            out[0] = '\0';
            return -1;
        }
    }
    return 0;
}

int sg_report_path_check(const char *tmpl)
{
    char buf[SG_CONFIG_VALUE_MAX * 4];
    sg_path_env env = { 1, "h", "0" };
    return sg_report_path_expand(tmpl, &env, buf, sizeof buf);
}
