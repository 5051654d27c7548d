/*
 * tests/unit/test_report.c: report path templates, the counters and exec
 * table (bounded by what is alive; a forked child starts from zero without
 * freeing entries), the JSON writer (parsed back by a tiny field lookup)
 * and the atomic file write. core/ runs against a fake driver table.
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
#include <sys/wait.h>
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

static const char *fake_env[14];
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
    fake_env[0] = "FLUX_TASK_RANK"; fake_env[1] = "6";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "6") == 0);
    fake_env[2] = "SLURM_PROCID"; fake_env[3] = "5";   /* a batch step's, under mpirun */
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "5") == 0);
    fake_env[4] = "PMIX_RANK"; fake_env[5] = "4";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "4") == 0);
    fake_env[6] = "PMI_RANK"; fake_env[7] = "3";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "3") == 0);
    fake_env[8] = "OMPI_COMM_WORLD_RANK"; fake_env[9] = "2";
    CHECK(strcmp(sg_rank_from_env(fake_getenv), "2") == 0);
    fake_env[10] = "RANK"; fake_env[11] = "1";
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
                    "\"memset_changed\": 0, \"unsupported_node\": 0, \"exec_modified\": 0, \"user_objects\": 0, "
                    "\"foreign_memory\": 0, "
                    "\"untracked_exec\": 1, \"not_comparable\": 0, \"policy\": 0}}") != NULL);

    /* The same handle instantiated again after destroy is a new exec. */
    got = NULL;
    CHECK_CU(sg_core_call(&c), CUDA_SUCCESS);
    CHECK_EQ(sg_exec_count(), 3);
    sg_stats_reset();
    CHECK_EQ(sg_exec_count(), 0);
    CHECK_EQ(hook_counters[1].calls, 0);
}

/* Sums one exec counter over the listed execs (sg_exec_foreach). */
typedef struct { unsigned long forwarded, launches, listed, destroyed_listed; } listed_sum;
static void sum_listed(const sg_exec_info *e, void *ctx)
{
    listed_sum *s = ctx;
    s->forwarded += e->updates_forwarded;
    s->launches += e->launches;
    s->listed++;
    s->destroyed_listed += e->destroyed != 0;
}

/* 1000 execs instantiated, launched and destroyed one after the other: the
 * table keeps SG_EXEC_KEEP destroyed ones (every exec with a forwarded
 * update among them) plus the live one, folds the rest into one sum that
 * still adds up, and reuses entries instead of allocating new ones. */
TEST(destroyed_execs_are_folded)
{
    sg_stats_reset();
    enum { N = 1000, LIVE = (int)0x7fff0 };
    struct sg_exec *seen[SG_EXEC_KEEP + 2];
    size_t nseen = 0, fresh = 0;
    unsigned long launches = 0;
    for (int i = 0; i < N; i++) {
        CUgraphExec x = (CUgraphExec)(uintptr_t)(0x10 + (i % 3) * 0x10);  /* handles come back */
        CHECK_EQ(sg_exec_created(x, 4, 1), 0);
        struct sg_exec *e = sg_exec_entry(x);
        size_t k = 0;
        while (k < nseen && seen[k] != e) k++;
        if (k == nseen) {
            fresh++;
            if (nseen < sizeof seen / sizeof seen[0]) seen[nseen++] = e;
        }
        for (int l = 0; l <= i % 5; l++, launches++) sg_exec_entry_launched(e);
        if (i % 100 == 7) CHECK_EQ(sg_exec_update(x, 1, SG_REASON_SCALAR_CHANGED), 0);
        sg_exec_destroyed(x);
    }
    CHECK_EQ(sg_exec_created((CUgraphExec)(uintptr_t)LIVE, 2, 1), 0);
    CHECK(fresh <= SG_EXEC_KEEP + 1);     /* entries are reused, not allocated per exec */
    CHECK_EQ(sg_exec_count(), N + 1);

    listed_sum s = { 0, 0, 0, 0 };
    sg_exec_foreach(sum_listed, &s);
    CHECK_EQ(s.listed, SG_EXEC_KEEP + 1);
    CHECK_EQ(s.destroyed_listed, SG_EXEC_KEEP);
    CHECK_EQ(s.forwarded, N / 100);       /* the execs with a forwarded update are all listed */
    sg_exec_info f;
    CHECK_EQ(sg_exec_folded(&f), N - SG_EXEC_KEEP);
    CHECK_EQ(f.updates_forwarded, 0);
    CHECK_EQ(s.launches + f.launches, launches);
    CHECK_EQ(f.reasons[SG_REASON_SCALAR_CHANGED], 0);

    /* The report says how many it folded, and stays small. */
    const char *j = report_text();
    char want[64];
    snprintf(want, sizeof want, "\"execs_folded\": {\"execs\": %d, ", N - SG_EXEC_KEEP);
    CHECK(strstr(j, want) != NULL);
    CHECK(strlen(j) < 64 * 1024);
    sg_stats_reset();
    CHECK_EQ(sg_exec_folded(&f), 0);
}

/* A forked child starts from zero counts, but its live execs keep the
 * entries other modules point at (graphs.c keeps one per exec for the
 * launch path): counting through such a pointer in the child must land in
 * the child's table, not in freed memory (issue 10, item 14). */
TEST(fork_child_keeps_live_entries)
{
    sg_stats_set_hooks(hook_names, hook_counters, 2);
    sg_stats_reset();
    CUgraphExec live = (CUgraphExec)0x4000, gone = (CUgraphExec)0x5000;
    CHECK_EQ(sg_exec_created(live, 3, 1), 0);
    struct sg_exec *e = sg_exec_entry(live);
    sg_exec_entry_launched(e);
    sg_exec_entry_launched(e);
    CHECK_EQ(sg_exec_update(live, 1, SG_REASON_TOPOLOGY), 0);
    CHECK_EQ(sg_exec_created(gone, 3, 1), 0);
    sg_exec_destroyed(gone);
    SG_TOTAL_ADD(launches, 2);
    hook_counters[0].calls = 9;

    sg_stats_atfork_prepare();
    pid_t pid = fork();
    if (pid == 0) {
        sg_stats_atfork_child();
        int bad = 0;
        listed_sum s = { 0, 0, 0, 0 };
        sg_exec_foreach(sum_listed, &s);
        bad |= s.listed != 1 || s.launches != 0 || s.forwarded != 0;
        bad |= sg_exec_count() != 1 || sg_exec_id(live) != 1 || sg_exec_entry(live) != e;
        bad |= sg_stats_totals().launches != 0 || sg_stats_hook(0).calls != 0;
        sg_exec_entry_launched(e);     /* the pointer graphs.c holds */
        memset(&s, 0, sizeof s);
        sg_exec_foreach(sum_listed, &s);
        bad |= s.launches != 1;
        sg_exec_info f;
        bad |= sg_exec_folded(&f) != 0;
        _exit(bad ? 1 : 0);
    }
    sg_stats_atfork_parent();
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the parent keeps its counts */
    listed_sum s = { 0, 0, 0, 0 };
    sg_exec_foreach(sum_listed, &s);
    CHECK_EQ(s.listed, 2);
    CHECK_EQ(s.launches, 2);
    CHECK_EQ(sg_stats_totals().launches, 2);
    sg_stats_reset();
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
    RUN(destroyed_execs_are_folded);
    RUN(fork_child_keeps_live_entries);
    RUN(json_parses);
    return check_done();
}
