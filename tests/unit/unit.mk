# tests/unit/unit.mk: the unit tests (included by the top-level Makefile).
#
#   $(BUILD)/tests/unit/test_<name>   tests/unit/test_<name>.c, linked with
#                                     the core/ objects of UNIT_OBJS_<name>
#                                     and no others
#   $(BUILD)/tests/unit/link-lists    "test_<name>: objects..." a line, for
#                                     tests/harness/test_unit_links.sh
#
# Each list is the link's closure: the core/ objects that define what the
# test calls, and what those call in turn (a symbol the test defines itself,
# a fake, is not looked for in core/). An object missing from a list fails
# the link; one too many fails tests/harness/test_unit_links.sh, which
# computes the closure from the objects with nm. A test without a list is an
# error here. When a core/ file is split or added, the link or that test
# says which lists change.

UNIT_OBJS_arena       := arena arena_index arena_query blocked util
UNIT_OBJS_arena_index := arena arena_index arena_query blocked util
UNIT_OBJS_blocked     := blocked util
UNIT_OBJS_config      := config pathtmpl
UNIT_OBJS_costs       := costs
UNIT_OBJS_fingerprint := blocked driver fp_build fp_compare fp_store fp_desc fp_pinfo mem_registry stats util
# captures record their graphs (rec_graph.c), which describes their nodes
UNIT_OBJS_memory      := arena arena_index arena_query blocked cap_record capture config contexts driver fp_build fp_compare fp_store fp_desc fp_pinfo \
                         ipc ipc_wire log procio mem_arena mem_lazy mem_query mem_registry memory pathtmpl policy \
                         rec_audit rec_graph rec_marks stats streams util vmm
UNIT_OBJS_slots       := arena arena_index arena_query blocked capture config contexts driver fp_build fp_compare fp_store fp_desc fp_pinfo \
                         ipc ipc_wire log procio mem_arena mem_lazy mem_registry memory pathtmpl policy rec_audit \
                         rec_graph rec_marks slot_map slots stats streams util vmm
# graphs.c reaches the profiled policy, and through it the rest of core/
UNIT_OBJS_graphs      := arena arena_index arena_query blocked cap_record capture config contexts core costs driver fp_build fp_compare fp_store fp_desc \
                         fp_pinfo graph_records graph_uobj graph_update graphs ipc ipc_wire log procio mem_arena mem_lazy mem_query \
                         mem_registry memory pathtmpl policy prof_alias prof_observe prof_order prof_rent prof_restore \
                         prof_util prof_variants profiled rec_audit rec_graph rec_marks slot_map slots stats \
                         streams util vmm
UNIT_OBJS_profiled    := $(UNIT_OBJS_graphs)
# the test defines rec_graph.c's sg_rec_oom itself
UNIT_OBJS_rec_marks   := rec_marks
# the test defines sg_rec_oom too; the read-back through fake_graph.h
UNIT_OBJS_rec_audit   := config driver fp_build fp_store fp_desc fp_pinfo log procio pathtmpl rec_audit util
UNIT_OBJS_report      := $(UNIT_OBJS_graphs) report
# legacy IPC, through the router (core.c) as the hooks reach it
UNIT_OBJS_ipc         := $(UNIT_OBJS_graphs)

UNIT_NAMES := $(patsubst tests/unit/test_%.c,%,$(wildcard tests/unit/test_*.c))
UNIT_TESTS := $(UNIT_NAMES:%=$(BUILD)/tests/unit/test_%)
$(foreach t,$(UNIT_NAMES),$(if $(UNIT_OBJS_$(t)),,\
    $(error tests/unit/test_$(t).c has no UNIT_OBJS_$(t) in tests/unit/unit.mk)))

# The test's own object (generic rule), with the tests' include paths.
$(BUILD)/obj/tests/unit/%.o: ALL_CFLAGS += -Itests -I.
# test_blocked refuses the container's allocations on demand
$(BUILD)/tests/unit/test_blocked: ALL_LDFLAGS += -Wl,--wrap=malloc,--wrap=realloc
# test_costs reads the shipped core/costs.tsv
$(BUILD)/obj/tests/unit/test_costs.o: ALL_CFLAGS += -DSG_SRC_DIR='"$(CURDIR)"'

$(foreach t,$(UNIT_NAMES),\
    $(eval $(BUILD)/tests/unit/test_$(t): $(UNIT_OBJS_$(t):%=$(BUILD)/obj/core/%.o)))
$(UNIT_TESTS): $(BUILD)/tests/unit/test_%: $(BUILD)/obj/tests/unit/test_%.o
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(ALL_LDFLAGS)

$(BUILD)/tests/unit/link-lists: tests/unit/unit.mk
	@mkdir -p $(@D)
	printf '%s\n' $(foreach t,$(UNIT_NAMES),'test_$(t): $(strip $(UNIT_OBJS_$(t)))') >$@

all: $(UNIT_TESTS) $(BUILD)/tests/unit/link-lists
