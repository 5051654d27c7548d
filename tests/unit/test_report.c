/*
 * tests/unit/test_report.c: report path templates, the counters and exec
 * table, the JSON writer (parsed back by a tiny field lookup) and the
 * atomic file write. core/ runs against a fake driver table.
 */
#include "check.h"
#include "core/core.h"
#include "core/driver.h"
#include "core/report.h"
#include "core/stats.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(path_expansion)
{
    char out[128];
    sg_path_env env = { 4242, "node/7", "3" };
    CHECK_EQ(sg_report_path_expand("/r/%p-%h-%r-%%.json", &env, out, sizeof out), 0);
    CHECK(strcmp(out, "/r/4242-node_7-3-%.json") == 0);
    env.rank = NULL;
    CHECK_EQ(sg_report_path_expand("r%r", &env, out, sizeof out), 0);
    CHECK(strcmp(out, "rnorank") == 0);
    CHECK_EQ(sg_report_path_expand("bad%x", &env, out, sizeof out), -1);
    CHECK(out[0] == '\0');
    CHECK_EQ(sg_report_path_expand("trailing%", &env, out, sizeof out), -1);
    CHECK_EQ(sg_report_path_expand("", &env, out, sizeof out), -1);
    CHECK_EQ(sg_report_path_expand("0123456789", &env, out, 10), -1);  /* no room for NUL */
    CHECK_EQ(sg_report_path_expand("012345678", &env, out, 10), 0);
    CHECK_EQ(sg_report_path_check("/a/%p%h%r%%"), 0);
    CHECK_EQ(sg_report_path_check("/a/%d"), -1);
}

static const char *fake_env[10];
static const char *fake_getenv(const char *name)
{
    for (int i = 0; fake_env[i]; i += 2)
        if (strcmp(fake_env[i], name) == 0) return fake_env[i + 1];
    return NULL;
}

TEST(rank_order)
{
    memset(fake_env, 0, sizeof fake_env);
    CHECK(sg_rank_from_env(fake_getenv) == NULL);
    fake_env[0] = "PMI_RANK"; fake_env[1] = "4";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "4") == 0);
    fake_env[2] = "OMPI_COMM_WORLD_RANK"; fake_env[3] = "3";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "3") == 0);
    fake_env[4] = "SLURM_PROCID"; fake_env[5] = "2";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "2") == 0);
    fake_env[6] = "RANK"; fake_env[7] = "1";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "1") == 0);
}

/* ---- core/ against a fake driver that can only count nodes: execs are
 * counted, their content cannot be described (graphs.c forwards every update) */
static size_t fake_nodes = 7;
static int fake_get_nodes_calls;
static CUresult fake_cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n)
{
    (void)g; (void)nodes;
    fake_get_nodes_calls++;
    *n = fake_nodes;
    return CUDA_SUCCESS;
}

typedef struct { CUresult result; int calls; CUgraphExec make; CUgraphExec *out; } fake_args;
static CUresult fake_forward(const void *p)
{
    fake_args *a = (fake_args *)p;
    a->calls++;
    if (a->out) *a->out = a->make;
    return a->result;
}

static const char *const hook_names[] = { "cuA", "cuB_ptsz" };
static sg_hook_counter hook_counters[2];

/* Reads the whole report written to a temporary file. */
static char *report_text(void)
{
    static char buf[65536];
    char path[] = "/tmp/sgunitXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK_EQ(sg_report_write_fd(fd, "always_update", "skip_temp", 0), 0);
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return buf;
}

TEST(core_accounting_and_json)
{
    sg_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policy = SG_POLICY_ALWAYS_UPDATE;
    sg_driver drv = { .cuGraphGetNodes = fake_cuGraphGetNodes };
    sg_stats_set_hooks(hook_names, hook_counters, 2);
    sg_core_reset();
    sg_core_init(&cfg);
    sg_driver_set(&drv);
    hook_counters[1].calls = 5;
    hook_counters[1].resolved = 2;

    CUgraphExec e1 = (CUgraphExec)0x1000, e2 = (CUgraphExec)0x2000, got = NULL;
    fake_args inst = { CUDA_SUCCESS, 0, e1, &got };
    sg_call c = { .kind = SG_CALL_INSTANTIATE, .forward = fake_forward, .args = &inst,
                  .u.inst = { .out = &got, .graph = (CUgraph)0x1 } };
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    CHECK(got == e1);
    CHECK_EQ(fake_get_nodes_calls, 1);
    CHECK_EQ(sg_driver_calls[SG_DRV_cuGraphGetNodes], 1);

    fake_args launch = { CUDA_SUCCESS, 0, NULL, NULL };
    sg_call l = { .kind = SG_CALL_LAUNCH, .forward = fake_forward, .args = &launch,
                  .u.launch = { .exec = e1 } };
    CHECK_CU(sg_core_call(&l), CUDA_SUCCESS);
    CHECK_CU(sg_core_call(&l), CUDA_SUCCESS);
    launch.result = CUDA_ERROR_INVALID_HANDLE;   /* failed launches are not counted */
    CHECK_CU(sg_core_call(&l), CUDA_ERROR_INVALID_HANDLE);
    CHECK_EQ(launch.calls, 3);

    fake_args upd = { CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, 0, NULL, NULL };
    CUgraphExecUpdateResultInfo info;
    sg_call u = { .kind = SG_CALL_UPDATE_GRAPH, .forward = fake_forward, .args = &upd,
                  .u.update = { .exec = e2, .graph = (CUgraph)0x2, .info = &info } };
    CHECK_CU(sg_core_call(&u), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);  /* result passed through */
    CHECK_EQ(upd.calls, 1);

    fake_args alloc = { CUDA_SUCCESS, 0, NULL, NULL };
    CUdeviceptr dp = 0x50000;   /* what the fake "driver" allocated */
    sg_call a = { .kind = SG_CALL_ALLOC, .forward = fake_forward, .args = &alloc,
                  .u.alloc = { .bytes = 4096, .out = &dp } };
    CHECK_CU(sg_core_call(&a), CUDA_SUCCESS);

    fake_args destroy = { CUDA_SUCCESS, 0, NULL, NULL };
    sg_call d = { .kind = SG_CALL_EXEC_DESTROY, .forward = fake_forward, .args = &destroy,
                  .u.exec = { .exec = e1 } };
    CHECK_CU(sg_core_call(&d), CUDA_SUCCESS);

    sg_totals t = sg_stats_totals();
    CHECK_EQ(t.launches, 2);
    CHECK_EQ(t.updates_seen, 1);
    CHECK_EQ(t.updates_forwarded, 1);
    CHECK_EQ(t.updates_skipped, 0);
    CHECK_EQ(t.bytes_requested, 4096);
    CHECK_EQ(sg_exec_count(), 2);

    const char *j = report_text();
    CHECK(strstr(j, "\"policy\": \"always_update\"") != NULL);
    CHECK(strstr(j, "\"policy_requested\": \"skip_temp\"") != NULL);
    CHECK(strstr(j, "\"cuA\": {\"calls\": 0, \"resolved\": 0}") != NULL);
    CHECK(strstr(j, "\"cuB_ptsz\": {\"calls\": 5, \"resolved\": 2}") != NULL);
    CHECK(strstr(j, "\"launches\": 2") != NULL);
    CHECK(strstr(j, "\"bytes_requested\": 4096") != NULL);
    CHECK(strstr(j, "\"cuGraphGetNodes\": 1") != NULL);
    CHECK(strstr(j, "{\"id\": 1, \"nodes\": 7, \"destroyed\": true, \"launches\": 2, "
                    "\"updates_seen\": 0") != NULL);
    /* e2 was first seen at its update: node count unknown */
    CHECK(strstr(j, "{\"id\": 2, \"nodes\": null, \"destroyed\": false, \"launches\": 0, "
                    "\"updates_seen\": 1, \"updates_forwarded\": 1, \"updates_skipped\": 0, "
                    "\"would_skip\": 0, \"would_skip_profiled\": 0, \"forwarded_reasons\": {\"topology\": 0, "
                    "\"function_changed\": 0, \"dims_changed\": 0, \"attributes_changed\": 0, "
                    "\"scalar_changed\": 0, \"pointer_changed\": 0, \"pointer_not_aliased\": 0, "
                    "\"memcpy_changed\": 0, "
                    "\"memset_changed\": 0, \"unsupported_node\": 0, \"exec_modified\": 0, "
                    "\"untracked_exec\": 1, \"not_comparable\": 0, \"policy\": 0}}") != NULL);

    /* The same handle instantiated again after destroy is a new exec. */
    got = NULL;
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    CHECK_EQ(sg_exec_count(), 3);
    sg_stats_reset();
    CHECK_EQ(sg_exec_count(), 0);
    CHECK_EQ(hook_counters[1].calls, 0);
}

/* JSON is checked by python3 when available: the writer's escapes and
 * structure must parse. */
TEST(json_parses)
{
    static const char *const odd_names[] = { "cu\"quote\\back\n" };
    static sg_hook_counter odd[1];
    sg_stats_set_hooks(odd_names, odd, 1);
    char dir[] = "/tmp/sgunitdirXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256], cmd[512];
    snprintf(path, sizeof path, "%s/report.json", dir);
    CHECK_EQ(sg_report_write_file(path, "off", "off", 2), 0);
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
             "assert d[\"config_errors\"]==2 and \"cu\\\"quote\\\\back\\n\" in d[\"hooks\"]' %s",
             path);
    CHECK_EQ(system(cmd), 0);
    /* no temporary file is left behind */
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
    CHECK_EQ(system(cmd), 0);
    /* a symlink planted at a temporary name is not followed or replaced */
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.0", path, (long)getpid());
    CHECK_EQ(symlink("/nonexistent-target", tmp), 0);
    CHECK_EQ(sg_report_write_file(path, "off", "off", 0), 0);
    struct stat st;
    CHECK_EQ(lstat(tmp, &st), 0);
    CHECK(S_ISLNK(st.st_mode));
    unlink(tmp);
    /* an unwritable directory fails cleanly */
    CHECK_EQ(sg_report_write_file("/nonexistent-dir/r.json", "off", "off", 0), -1);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    RUN(path_expansion);
    RUN(rank_order);
    RUN(core_accounting_and_json);
    RUN(json_parses);
    return check_done();
}
