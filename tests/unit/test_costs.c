/*
 * tests/unit/test_costs.c: core/costs.c, the cost figures of skip_profiled's
 * purchase of variants: the built-in figures are core/costs.tsv's (through
 * core/costs.awk), a table loaded at run time gives the same figures for the
 * same file, "query" is the range's HIGH value, a call without a row of its
 * own is charged as "*", and a malformed table is refused with the file and
 * line, the figures unchanged.
 */
#include "check.h"
#include "core/costs.h"

#include <stdio.h>
#include <string.h>

#ifndef SG_SRC_DIR
#define SG_SRC_DIR "."
#endif

static const char *write_table(const char *text)
{
    static char path[] = "/tmp/sg_test_costs_XXXXXX";
    strcpy(path, "/tmp/sg_test_costs_XXXXXX");
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

TEST(builtin_is_the_shipped_table)
{
    sg_costs_reset();
    /* core/costs.tsv: update 1.0247 us/node + a query (0.3 us) per call;
     * instantiation 0.9 us/node + a query */
    CHECK_EQ(sg_cost_query_ns(), 300);
    CHECK_EQ(sg_cost_update_ns(0), 300);
    CHECK_EQ(sg_cost_update_ns(10), 300 + 10247);
    CHECK_EQ(sg_cost_instantiate_ns(1000), 300 + 900000);
    CHECK_EQ(sg_cost_ns(SG_COSTID_NODE_SET, 1), 300 + 1025);
    CHECK_EQ(sg_cost_ns(SG_COSTID_MEM_MAP, 0), 1450);
    CHECK_EQ(sg_cost_ns(SG_COSTID_ADDRESS_RESERVE, 0), 19000);
    CHECK(strstr(sg_costs_source(), "built in") != NULL);
    CHECK_EQ(sg_cost_exec_host_bytes(1000), 1512000);  /* host_bytes_node 1512 */
    uint64_t built[SG_COSTID_COUNT];
    for (int c = 0; c < SG_COSTID_COUNT; c++) built[c] = sg_cost_ns((sg_cost_id)c, 7);
    char err[256] = "";
    CHECK_EQ(sg_costs_load(SG_SRC_DIR "/core/costs.tsv", err, sizeof err), 0);
    for (int c = 0; c < SG_COSTID_COUNT; c++) CHECK_EQ(sg_cost_ns((sg_cost_id)c, 7), built[c]);
    CHECK_EQ(sg_cost_exec_host_bytes(1000), 1512000);
    CHECK(strstr(sg_costs_source(), "core/costs.tsv") != NULL);
    sg_costs_reset();
}

TEST(loaded_table)
{
    const char *p = write_table("# calibrated\n"
                                "query   range 0.01,0.02,0.05  measured\n"
                                "*       call  2               all else\n"
                                "cuGraphExecUpdate  call  query  q\n"
                                "cuGraphExecUpdate  node  0.5    measured\n"
                                "cuGraphExecUpdate  changed_node 9  ignored by the library\n"
                                "cuGraphInstantiateWithFlags node 0   free\n"
                                "cuGraphInstantiateWithFlags host_bytes_node 100  bytes\n");
    char err[256] = "";
    CHECK(p != NULL);
    CHECK_EQ(sg_costs_load(p, err, sizeof err), 0);
    CHECK_EQ(sg_cost_query_ns(), 50);
    CHECK_EQ(sg_cost_update_ns(4), 50 + 2000);
    CHECK_EQ(sg_cost_instantiate_ns(1000), 2000);     /* per call from "*", 0 per node */
    CHECK_EQ(sg_cost_exec_host_bytes(1000), 100000);  /* bytes, not microseconds */
    CHECK_EQ(sg_cost_ns(SG_COSTID_MEM_MAP, 0), 2000);
    CHECK_EQ(sg_cost_ns(SG_COSTID_NODE_SET, 3), 2000);
    CHECK(strcmp(sg_costs_source(), p) == 0);
    remove(p);
    sg_costs_reset();
}

static void refused(const char *text, const char *what)
{
    sg_costs_reset();
    uint64_t before = sg_cost_update_ns(3);
    const char *p = write_table(text);
    char err[256] = "";
    CHECK(p != NULL);
    CHECK_EQ(sg_costs_load(p, err, sizeof err), -1);
    if (!strstr(err, what)) printf("#   message: %s (expected %s)\n", err, what);
    CHECK(strstr(err, what) != NULL);
    CHECK_EQ(sg_cost_update_ns(3), before);
    CHECK(strstr(sg_costs_source(), "built in") != NULL);
    remove(p);
}

TEST(malformed_tables_refused)
{
    refused("query range 0.03,0.1,0.3 x\ncuGraphExecUpdate node fast x\n", ":2: US must be");
    refused("query range 0.03,0.1,0.3 x\ncuGraphExecUpdate per_kb 1 x\n", ":2: BASIS must be");
    refused("query range 0.03,0.1,0.3 x\ncuGraphInstantiate host_bytes_node query x\n",
            ":2: host_bytes_node wants a number of bytes");
    refused("query range 0.03,0.3 x\n", ":1: expected: query range");
    refused("query range 0.03,0.1,-1 x\n", ":1: expected: query range");
    refused("cuGraphExecUpdate node 1\n", "exactly one");
    refused("query range 0.03,0.1,0.3 x\ncuGraphExecUpdate\n", ":2: expected CALL BASIS");
    char err[256] = "";
    CHECK_EQ(sg_costs_load("/nonexistent/costs.tsv", err, sizeof err), -1);
    CHECK(strstr(err, "cannot open") != NULL);
}

int main(void)
{
    RUN(builtin_is_the_shipped_table);
    RUN(loaded_table);
    RUN(malformed_tables_refused);
    return check_done();
}
