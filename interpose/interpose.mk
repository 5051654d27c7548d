# interpose/interpose.mk: builds the interposer, its unit tests and the
# helper programs of the end-to-end tests. Included by the top-level Makefile.
#
#   $(BUILD)/libstablegraph.so          interpose/*.c + core/*.c, hidden visibility;
#                                       exports: the hooks of hooks.def + dlsym
#   $(BUILD)/tests/e2e/...              helpers for tests/e2e/test_*.sh

SG_LIB       := $(BUILD)/libstablegraph.so
SG_CORE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard core/*.c))
SG_IP_OBJS   := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard interpose/*.c))
SG_MAP       := $(BUILD)/interpose/libstablegraph.map

$(SG_CORE_OBJS) $(SG_IP_OBJS): ALL_CFLAGS += -fvisibility=hidden

# The library's built-in cost figures: core/costs.tsv, the table the bench
# uses too, through core/costs.awk (a change of either rebuilds core/costs.o;
# a malformed table fails the build).
SG_COSTS_INC := $(BUILD)/gen/sg_costs.inc
$(SG_COSTS_INC): core/costs.tsv core/costs.awk
	@mkdir -p $(@D)
	awk -f core/costs.awk core/costs.tsv >$@.tmp && mv $@.tmp $@
$(BUILD)/obj/core/costs.o: $(SG_COSTS_INC)
$(BUILD)/obj/core/costs.o: ALL_CFLAGS += -I$(BUILD)/gen
$(SG_IP_OBJS): interpose/hooks.def

# The exported dlsym and what it reaches (interpose/dlsym_entry.c) run inside
# a sanitizer runtime's own start-up (it looks up "mmap" & co. with dlsym
# before its shadow memory / thread state exist), so that object is never
# instrumented, whatever SAN says; the file #errors if it is. Target-specific,
# so only this object (ALL_CFLAGS expands $(SANFLAGS) when the recipe runs);
# the library is still linked with $(SANFLAGS).
$(BUILD)/obj/interpose/dlsym_entry.o: SANFLAGS :=

# The version script: exactly the names of hooks.def, plus dlsym.
$(SG_MAP): interpose/hooks.def interpose/interpose.mk
	@mkdir -p $(@D)
	{ echo '{ global:'; echo '  dlsym;'; \
	  sed -n 's/^SG_\(HOOK\|RESOLVER\)(\([A-Za-z0-9_]*\),.*/  \2;/p' interpose/hooks.def; \
	  echo '  local: *;'; echo '};'; } > $@

$(SG_LIB): $(SG_CORE_OBJS) $(SG_IP_OBJS) $(SG_MAP)
	$(CC) -shared -o $@ $(SG_CORE_OBJS) $(SG_IP_OBJS) -Wl,--version-script=$(SG_MAP) \
	    -Wl,-z,defs $(ALL_LDFLAGS) -ldl

# ---------------------------------------------------------------- unit tests
# tests/unit/unit.mk (each test links only the core/ objects it needs).

all: $(SG_LIB)

# ---------------------------------------------------------------- e2e helpers
SG_E2E := $(BUILD)/tests/e2e

$(SG_E2E)/libnext.so: tests/e2e/libnext.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS) -ldl

# libnext.so comes before libcuda in the link order, so that dlsym(RTLD_NEXT)
# from it can find the driver.
$(SG_E2E)/resolve_paths: tests/e2e/resolve_paths.c interpose/hooks.def $(SG_E2E)/libnext.so
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(SG_E2E) -lnext -Wl,-rpath,'$$ORIGIN' $(STUB_LIBCUDA) \
	    $(ALL_LDFLAGS) -ldl

all: $(SG_E2E)/resolve_paths

$(SG_E2E)/libctor.so: tests/e2e/libctor.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS)

$(SG_E2E)/startup_prog: tests/e2e/startup_prog.c $(SG_E2E)/libctor.so
	$(CC) $(ALL_CFLAGS) -o $@ $< -L$(SG_E2E) -lctor -Wl,-rpath,'$$ORIGIN' $(STUB_LIBCUDA) \
	    $(ALL_LDFLAGS)

all: $(SG_E2E)/startup_prog

# A CUDA runtime program (static runtime), when the toolkit has nvcc.
ifneq ($(wildcard $(NVCC)),)
$(SG_E2E)/rt_prog: tests/e2e/rt_prog.cu
	@mkdir -p $(@D)
	$(NVCC) -cudart static -o $@ $<

all: $(SG_E2E)/rt_prog
endif

# What a program observes of its allocations (tests/e2e/test_skip_temp_mem.sh).
$(SG_E2E)/mem_prog: tests/e2e/mem_prog.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS)

all: $(SG_E2E)/mem_prog

# ---------------------------------------------------------------- life-cycle and bad-handle programs
# Helpers of tests/e2e/test_lifecycle.sh and test_bad_handles.sh (issue 6).
# life_prog and bad_handles link the toolkit's stub libcuda; life_dl reaches
# the driver only through dlopen (it must run where libcuda is missing), so
# it does not link it.
SG_LIFE_PROGS := $(SG_E2E)/life_prog $(SG_E2E)/bad_handles
$(SG_LIFE_PROGS): $(SG_E2E)/%: tests/e2e/%.c tests/e2e/life_common.c tests/e2e/life_common.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< tests/e2e/life_common.c $(STUB_LIBCUDA) $(ALL_LDFLAGS) -ldl

$(SG_E2E)/life_dl: tests/e2e/life_dl.c tests/e2e/life_common.c tests/e2e/life_common.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< tests/e2e/life_common.c $(ALL_LDFLAGS) -ldl

all: $(SG_LIFE_PROGS) $(SG_E2E)/life_dl

# ---------------------------------------------------------------- stable slots on the emulated VMM
# Helper of tests/e2e/test_slots.sh (issue 5): drives core/slots.c directly,
# without the interposer. It links the core/ objects and the toolkit's stub
# libcuda, and fills core/'s driver table with dlsym (hence -ldl).
$(SG_E2E)/slots_prog: tests/e2e/slots_prog.c $(SG_CORE_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. -o $@ $< $(SG_CORE_OBJS) $(STUB_LIBCUDA) $(ALL_LDFLAGS) -ldl

all: $(SG_E2E)/slots_prog
