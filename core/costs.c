/*
 * core/costs.c: the cost figures of costs.h: the built-in ones (core/costs.tsv
 * through core/costs.awk, $(BUILD)/gen/sg_costs.inc) and a table loaded at
 * start-up (STABLEGRAPH_COSTS). Each call of SG_COST_CALLS is resolved once
 * into a per-call and a per-node figure: its own rows, else the "*" row, else
 * the query figure.
 *
 * Thread safety: see costs.h (written at start-up, then read-only).
 */
#include "costs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SG_COST_CALL, SG_COST_NODE, SG_COST_HOST_BYTES } sg_cost_basis;

typedef struct sg_cost_row {
    const char *name;
    sg_cost_basis basis;
    double ns;                 /* < 0: charged as a query; SG_COST_HOST_BYTES: bytes */
} sg_cost_row;

#define SG_COST_ROW(name, basis, ns) { name, basis, ns },
static const sg_cost_row builtin[] = {
#include "sg_costs.inc"
};
#undef SG_COST_ROW

#define SG_COST_NAME_(id, name) name,
static const char *const call_names[SG_COSTID_COUNT] = { SG_COST_CALLS(SG_COST_NAME_) };

typedef struct sg_cost_fig {
    double call_ns, node_ns;
    double host_bytes;         /* per node (host_bytes_node), 0 if the table has none */
} sg_cost_fig;

static sg_cost_fig figs[SG_COSTID_COUNT];
static double query_ns;
static char source[256];
static int resolved;

/* Resolves every call of SG_COST_CALLS from rows (see the header). */
static void resolve(const sg_cost_row *rows, size_t n, double q, sg_cost_fig *out)
{
    for (int c = 0; c < SG_COSTID_COUNT; c++) {
        double call = -2, node = 0, star = -2, bytes = 0;
        for (size_t i = 0; i < n; i++) {
            double v = rows[i].ns < 0 ? q : rows[i].ns;
            if (!strcmp(rows[i].name, "*") && rows[i].basis == SG_COST_CALL) star = v;
            if (strcmp(rows[i].name, call_names[c])) continue;
            if (rows[i].basis == SG_COST_CALL) call = v;
            else if (rows[i].basis == SG_COST_NODE) node = v;
            else bytes = rows[i].ns;
        }
        out[c].call_ns = call > -2 ? call : star > -2 ? star : q;
        out[c].node_ns = node;
        out[c].host_bytes = bytes;
    }
}

void sg_costs_reset(void)
{
    query_ns = SG_COSTS_QUERY_NS;
    resolve(builtin, sizeof builtin / sizeof *builtin, query_ns, figs);
    snprintf(source, sizeof source, "core/costs.tsv (built in)");
    resolved = 1;
}

static void ensure(void)
{
    if (!resolved) sg_costs_reset();
}

void sg_costs_set(sg_cost_id c, double call_ns, double node_ns)
{
    ensure();
    if ((unsigned)c >= SG_COSTID_COUNT) return;
    figs[c].call_ns = call_ns;
    figs[c].node_ns = node_ns;
    snprintf(source, sizeof source, "set by a test");
}

/* A figure as the table writes it: digits, one optional fraction. 0 and the
 * value times `scale`, or -1. */
static int parse_num(const char *s, double scale, double *out)
{
    size_t d = strspn(s, "0123456789");
    if (!d || (s[d] && (s[d] != '.' || !s[d + 1] || strspn(s + d + 1, "0123456789") != strlen(s + d + 1))))
        return -1;
    *out = strtod(s, NULL) * scale;
    return 0;
}

/* A figure in microseconds: 0 and the value in ns, or -1. */
static int parse_us(const char *s, double *ns)
{
    return parse_num(s, 1000.0, ns);
}

/* Parses one line of a table into *row (0), a query range into *q (1), a
 * comment, blank or unused row (2), or fails (-1, *why set). name: room for
 * the call name (64 bytes). */
static int parse_line(char *line, sg_cost_row *row, char *name, double *q, const char **why)
{
    char *save = NULL, *call = strtok_r(line, " \t\r\n", &save);
    if (!call || call[0] == '#') return 2;
    char *basis = strtok_r(NULL, " \t\r\n", &save), *us = strtok_r(NULL, " \t\r\n", &save);
    *why = "expected CALL BASIS US SOURCE";
    if (!basis || !us) return -1;
    if (!strcmp(call, "query")) {
        char *hi = strrchr(us, ',');
        *why = "expected: query range LOW,MID,HIGH SOURCE (microseconds)";
        if (strcmp(basis, "range") || !hi || hi == strchr(us, ',')) return -1;
        *hi++ = '\0';
        char *mid = strchr(us, ',');
        double lo, md;
        *mid++ = '\0';
        return parse_us(us, &lo) || parse_us(mid, &md) || parse_us(hi, q) ? -1 : 1;
    }
    *why = "BASIS must be call, node, changed_node, scanned_node or host_bytes_node";
    int c = !strcmp(basis, "call"), nd = !strcmp(basis, "node"), hb = !strcmp(basis, "host_bytes_node");
    if (!c && !nd && !hb && strcmp(basis, "changed_node") && strcmp(basis, "scanned_node")) return -1;
    if (hb) {
        *why = "host_bytes_node wants a number of bytes";
        if (parse_num(us, 1.0, &row->ns)) return -1;
    } else {
        *why = "US must be a number of microseconds or \"query\"";
        row->ns = -1;
        if (strcmp(us, "query") && parse_us(us, &row->ns)) return -1;
    }
    *why = "CALL name too long";
    if (strlen(call) >= 64) return -1;
    if (!c && !nd && !hb) return 2;
    strcpy(name, call);
    row->name = name;
    row->basis = c ? SG_COST_CALL : nd ? SG_COST_NODE : SG_COST_HOST_BYTES;
    return 0;
}

#define SG_COSTS_MAX_ROWS 256

int sg_costs_load(const char *path, char *err, size_t errlen)
{
    static sg_cost_row rows[SG_COSTS_MAX_ROWS];
    static char names[SG_COSTS_MAX_ROWS][64];
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    size_t n = 0, lineno = 0, nq = 0;
    double q = 0;
    const char *why = NULL;
    while (!why && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) why = "line too long";
        else if (n == SG_COSTS_MAX_ROWS) why = "too many rows";
        else {
            int k = parse_line(line, &rows[n], names[n], &q, &why);
            if (k >= 0) why = NULL;
            n += k == 0;
            nq += k == 1;
        }
    }
    fclose(f);
    if (!why && nq != 1) {
        snprintf(err, errlen, "%s: exactly one \"query range LOW,MID,HIGH\" row expected", path);
        return -1;
    }
    if (why) {
        snprintf(err, errlen, "%s:%zu: %s", path, lineno, why);
        return -1;
    }
    query_ns = q;
    resolve(rows, n, q, figs);
    snprintf(source, sizeof source, "%s", path);
    resolved = 1;
    return 0;
}

uint64_t sg_cost_ns(sg_cost_id c, size_t nodes)
{
    ensure();
    if ((unsigned)c >= SG_COSTID_COUNT) return 0;
    return (uint64_t)(figs[c].call_ns + figs[c].node_ns * (double)nodes + 0.5);
}

uint64_t sg_cost_update_ns(size_t nodes)
{
    return sg_cost_ns(SG_COSTID_UPDATE, nodes);
}

uint64_t sg_cost_instantiate_ns(size_t nodes)
{
    return sg_cost_ns(SG_COSTID_INSTANTIATE, nodes);
}

uint64_t sg_cost_exec_host_bytes(size_t nodes)
{
    ensure();
    return (uint64_t)(figs[SG_COSTID_INSTANTIATE].host_bytes * (double)nodes + 0.5);
}

uint64_t sg_cost_query_ns(void)
{
    ensure();
    return (uint64_t)(query_ns + 0.5);
}

const char *sg_costs_source(void)
{
    ensure();
    return source;
}
