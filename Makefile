# stablegraph: top-level build.
#
#   make                 build everything into build/
#   make test            build, then run every test (summary: "N passed, N failed, N skipped")
#   make deps            check (and, as root, install) the Debian packages needed
#   make install PREFIX=/usr/local DESTDIR=
#   make clean
#   make print-policies  the values of STABLEGRAPH_POLICY, from core/config.h
#   make test SAN=address,undefined   the same under sanitizers
#
# Layout of build/:
#   build/libstablegraph.so      the interposer (interpose/ + core/)
#   build/emu/libcuda.so.1       the emulated driver (tests/emu/driver/)
#   build/workloads/             workload programs and their kernel modules
#   build/tests/                 test programs (test_* are run by tests/run.sh)

CUDA_HOME ?= /usr/local/cuda
CC        ?= gcc
BUILD     ?= build
# One spelling of every path under $(BUILD): the compiler's dependency files
# (.d) name their targets as the build named them, and a target spelled
# differently (relative in one make, absolute in another, as tests/run.sh
# and test_install.sh call it) would not pick up its header dependencies.
override BUILD := $(abspath $(BUILD))
PREFIX    ?= /usr/local
DESTDIR   ?=
SAN       ?=
NVCC      ?= $(CUDA_HOME)/bin/nvcc

CUDA_INC   := $(CUDA_HOME)/include
CUDA_STUBS := $(firstword $(wildcard $(CUDA_HOME)/lib64/stubs $(CUDA_HOME)/targets/*/lib/stubs))

NO_TOOLCHAIN_GOALS := clean deps help
ifneq ($(filter-out $(NO_TOOLCHAIN_GOALS),$(or $(MAKECMDGOALS),all)),)
  ifeq ($(wildcard $(CUDA_INC)/cuda.h),)
    $(error cuda.h not found in $(CUDA_INC): install the CUDA toolkit or set CUDA_HOME=/path/to/cuda)
  endif
  ifeq ($(wildcard /usr/include/uthash.h),)
    $(error uthash.h not found: run 'make deps' (as root) or 'apt-get install -y uthash-dev')
  endif
endif

SANFLAGS := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all,)
WARN     := -Wall -Wextra -Werror
CFLAGS   ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(CFLAGS) $(WARN) -fPIC -pthread -I$(CUDA_INC) -D_GNU_SOURCE \
             -DHASH_NONFATAL_OOM=1 -ffp-contract=off $(SANFLAGS)
ALL_LDFLAGS = -pthread $(SANFLAGS) $(LDFLAGS)
STUB_LIBCUDA = -L$(CUDA_STUBS) -lcuda -Wl,-rpath-link,$(CUDA_STUBS)

.PHONY: all test check-all clean deps install help bench demo
all:

# ---------------------------------------------------------------- emulated driver
include tests/emu/emu.mk

# ---------------------------------------------------------------- generic objects
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------- parts with their own rules
# (include: a missing one is an error; -include is only for the .d files)
include tests/workloads/workloads.mk
include interpose/interpose.mk
include tests/unit/unit.mk
include tests/e2e/adv.mk
include tests/fuzz/fuzz.mk
include tests/bench/bench.mk
include tests/gpu/gpu.mk
include tests/stress/stress.mk
include tests/workloads/demo.mk
include tests/e2e/bounds.mk
include tests/e2e/oom.mk

# ---------------------------------------------------------------- build flags
# What a build directory is made with: the compiler, the flags (SAN
# included) and the toolkit. $(BUILD)/flags.<hash of them> records them, one
# VAR=value a line (tests/e2e/test_install.sh runs make again with them), and
# every file made into $(BUILD) depends on it (.EXTRA_PREREQS, kept out of
# $^): building into a directory made with other flags remakes each file by
# its rule, with a new stamp (and back again: the old one is removed). Nothing
# is deleted while the makefiles are read, and `make -n` changes nothing.
SG_BUILD_VARS := CC CFLAGS LDFLAGS SAN CUDA_HOME NVCC
sg_sq = '$(subst ','\'',$(1))'
SG_FLAGS_LINES = $(foreach v,$(SG_BUILD_VARS),$(call sg_sq,$(v)=$($(v)))) \
                 $(call sg_sq,compile: $(CC) $(ALL_CFLAGS)) $(call sg_sq,link: $(ALL_LDFLAGS))
ifneq ($(filter-out $(NO_TOOLCHAIN_GOALS),$(or $(MAKECMDGOALS),all)),)
  SG_FLAGS := $(BUILD)/flags.$(shell printf '%s\n' $(SG_FLAGS_LINES) | md5sum | cut -c1-12)
  .EXTRA_PREREQS := $(SG_FLAGS)
$(SG_FLAGS):
	@mkdir -p $(@D)
	@rm -f $(BUILD)/flags.*
	printf '%s\n' $(SG_FLAGS_LINES) >$@
endif

# ---------------------------------------------------------------- the policies
# The values STABLEGRAPH_POLICY accepts, in order: core/config.h's
# SG_POLICY_LIST through the preprocessor, so that scripts and tests take the
# list the library is built from (tests/lib/policies.sh reads
# $(BUILD)/policies; `make print-policies` prints it).
$(BUILD)/policies: core/config.h
	@mkdir -p $(@D)
	printf '#include "core/config.h"\n#define SG_NAME_(s, n) n\nsg_policies: SG_POLICY_LIST(SG_NAME_)\n' | \
	    $(CC) -E -P -I. -x c - | sed -n 's/^sg_policies: //p' | tr -d '"' | xargs >$@.tmp
	grep -qxE '[a-z_]+( [a-z_]+)+' $@.tmp && mv $@.tmp $@
print-policies: $(BUILD)/policies
	@cat $<
.PHONY: print-policies
all: $(BUILD)/policies

# ---------------------------------------------------------------- tests
# Sanitizer builds leave a marker so tests/run.sh can set the runtime's
# options (e.g. uninstrumented tools such as bash that inherit LD_PRELOAD).
$(BUILD)/san.cfg: FORCE
	@mkdir -p $(@D)
	@echo '$(SAN)' | cmp -s - $@ || echo '$(SAN)' > $@
FORCE:
.PHONY: FORCE
all: $(BUILD)/san.cfg

test: all
	BUILD=$(abspath $(BUILD)) tests/run.sh

# check-all: the suite three times, each build in its own directory: normal
# in $(BUILD), ASan+UBSan in $(BUILD)-asan, TSan in $(BUILD)-tsan. Every
# stage runs; then one line per stage; fails if any did.
check-all:
	@rc=0; sum=""; \
	for stage in normal asan tsan; do \
	    case $$stage in \
	    normal) dir='$(BUILD)'; san= ;; \
	    asan) dir='$(BUILD)-asan'; san=address,undefined ;; \
	    tsan) dir='$(BUILD)-tsan'; san=thread ;; \
	    esac; \
	    echo "==== check-all: $$stage (BUILD=$$dir SAN=$$san)"; \
	    start=$$(date +%s); mkdir -p "$$dir"; \
	    { $(MAKE) --no-print-directory BUILD="$$dir" SAN="$$san" test; echo $$? >"$$dir/check-all.rc"; } 2>&1 \
	        | tee "$$dir/check-all.log"; \
	    secs=$$(( $$(date +%s) - start )); \
	    counts=$$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$$' "$$dir/check-all.log" | tail -n 1); \
	    if [ "$$(cat "$$dir/check-all.rc")" = 0 ]; then res=PASS; else res=FAIL; rc=1; fi; \
	    sum="$$sum$$(printf '%s %-6s %-36s %s, %ss' $$res $$stage "BUILD=$$dir SAN=$$san" \
	        "$${counts:-no summary (build failed?)}" $$secs)\n"; \
	done; \
	echo; echo "check-all:"; printf "$$sum"; exit $$rc

# ---------------------------------------------------------------- set-up
deps:
	@scripts/setup-deps.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/stablegraph $(DESTDIR)$(PREFIX)/share/doc/stablegraph
	install -m 0755 $(BUILD)/libstablegraph.so $(DESTDIR)$(PREFIX)/lib/stablegraph/libstablegraph.so
	install -m 0755 scripts/stablegraph-run $(DESTDIR)$(PREFIX)/bin/stablegraph-run
	install -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/stablegraph/README.md

clean:
	rm -rf $(BUILD)

help:
	@sed -n '2,10p' Makefile | sed 's/^# \{0,1\}//'
