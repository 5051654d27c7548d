# tests/bench/bench.mk: `make bench` (included by the top-level Makefile; not
# part of `make test`). Runs tests/bench/bench.py, which writes
# $(BENCH_OUT)/results.json, results.csv, table.md and *.png (gnuplot) and
# prints a summary; it exits non-zero when a checksum differs from the run
# without the library, a run fails, the library adds violations, or one of
# issue 11's figures cannot be measured (a missed target only is reported).
# docs/benchmarks.md describes every figure. Also builds the bench's own
# measurement programs (tests/bench/launch_loop.c) as part of `all`.
#
#   make bench                                   defaults below
#   make bench BENCH_SIZES="16 256" BENCH_WORKLOADS=rotating_inputs BENCH_STEPS=10
#   make bench BENCH_CALLGRIND_SIZES=            no callgrind runs
#
# BENCH_SIZES            graph sizes (kernel nodes), timed and counted
# BENCH_MODEL_SIZES      graph sizes with a modeled driver time per step (those not in
#                        BENCH_SIZES are run for their counts only, one run of S and 2S steps)
# BENCH_WORKLOADS        workloads of tests/workloads/
# BENCH_POLICIES         policies (the no-library run "none" is always added);
#                        default: every one the build lists ($(BUILD)/policies)
# BENCH_STEPS            S: each cell runs T and 2T steps, T a multiple of S; per step = difference / T
# BENCH_MIN_TIME         seconds: T is raised until T steps take this long without the library
# BENCH_REPEATS          timed runs per step count (the median counts)
# BENCH_CALLGRIND_SIZES  sizes also run under valgrind --tool=callgrind (a subset of BENCH_SIZES)
# BENCH_CALLGRIND_STEPS  S for the callgrind runs
# BENCH_JOBS             callgrind runs at a time (timed runs are always one at a time; >1 makes
#                        the whole-process instruction differences noisier)
# BENCH_DRIVER           auto | emu | real (auto: real when nvidia-smi names a GPU)
# BENCH_OUT              output directory
# BENCH_BOUNDS           1 (default): also runs tests/e2e/test_bounds.sh (memory and report size flat
#                        from small to large loops, emulated driver) and writes $(BENCH_OUT)/bounds.txt
# BENCH_ARGS             more options for bench.py (--help lists them), e.g.
#                        --costs FILE (a cost table, such as the real-GPU kit's measured one),
#                        --targets node_cost,accept_cost (only those of issue 11's figures),
#                        --no-targets, --curve-nodes N, --node-cost-sizes '16 256 4096'

BENCH_SIZES           ?= 16 64 256 1024 4096
BENCH_MODEL_SIZES     ?= 16 64 256 1024 4096 16384
BENCH_WORKLOADS       ?= recapture_temps rotating_inputs fresh_inputs slices scalar_changes topology_changes \
                         train_loop
BENCH_POLICIES        ?=
BENCH_STEPS           ?= 20
BENCH_REPEATS         ?= 3
BENCH_MIN_TIME        ?= 0.2
BENCH_CALLGRIND_SIZES ?= 16 256
BENCH_CALLGRIND_STEPS ?= 8
BENCH_JOBS            ?= 1
BENCH_DRIVER          ?= auto
BENCH_OUT             ?= $(BUILD)/bench
BENCH_ARGS            ?=
BENCH_BOUNDS          ?= 1
PYTHON3               ?= python3

# The command quoted in the summary and in table.md: what reproduces this run.
BENCH_COMMAND = make bench BENCH_SIZES='$(BENCH_SIZES)' BENCH_MODEL_SIZES='$(BENCH_MODEL_SIZES)' \
    BENCH_WORKLOADS='$(BENCH_WORKLOADS)' \
    BENCH_POLICIES='$(BENCH_POLICIES)' BENCH_STEPS=$(BENCH_STEPS) BENCH_MIN_TIME=$(BENCH_MIN_TIME) BENCH_REPEATS=$(BENCH_REPEATS) \
    BENCH_CALLGRIND_SIZES='$(BENCH_CALLGRIND_SIZES)' BENCH_CALLGRIND_STEPS=$(BENCH_CALLGRIND_STEPS)

# Measurement programs of the bench (not workloads): $(BUILD)/tests/bench/,
# beside links to the workloads' kernel modules (wl_common.c loads the module
# from the program's directory).
BENCH_PROG_DIR := $(BUILD)/tests/bench
BENCH_PROGS    := $(BENCH_PROG_DIR)/launch_loop

$(BUILD)/obj/tests/bench/%.o: ALL_CFLAGS += -Itests/workloads
$(BENCH_PROG_DIR)/%: $(BUILD)/obj/tests/bench/%.o $(BUILD)/obj/tests/workloads/wl_common.o
	@mkdir -p $(@D)
	$(CC) -o $@ $^ $(STUB_LIBCUDA) $(ALL_LDFLAGS)
	ln -sf ../../workloads/wl_kernels.so $(@D)/wl_kernels.so
	ln -sf ../../workloads/wl_kernels.fatbin $(@D)/wl_kernels.fatbin

# Keep the objects (make would delete them as intermediates and relink).
.SECONDARY: $(patsubst $(BENCH_PROG_DIR)/%,$(BUILD)/obj/tests/bench/%.o,$(BENCH_PROGS))
all: $(BENCH_PROGS)

bench: all
	$(PYTHON3) tests/bench/bench.py --build $(BUILD) --out $(BENCH_OUT) \
	    --workloads '$(BENCH_WORKLOADS)' --sizes '$(BENCH_SIZES)' --model-sizes '$(BENCH_MODEL_SIZES)' \
	    --policies "$(or $(BENCH_POLICIES),$$(cat $(BUILD)/policies))" \
	    --steps $(BENCH_STEPS) --min-time $(BENCH_MIN_TIME) --repeats $(BENCH_REPEATS) \
	    --callgrind-sizes '$(BENCH_CALLGRIND_SIZES)' --callgrind-steps $(BENCH_CALLGRIND_STEPS) \
	    --jobs $(BENCH_JOBS) --driver $(BENCH_DRIVER) --command "$(BENCH_COMMAND)" $(BENCH_ARGS)
	@if [ "$(BENCH_BOUNDS)" = 1 ]; then \
	    echo "bench: bounded memory (tests/e2e/test_bounds.sh, emulated driver)"; \
	    BOUNDS_SCALE=1 BUILD=$(BUILD) tests/run.sh tests/e2e/test_bounds.sh || exit 1; \
	    grep '^#' $(BUILD)/test-logs/tests_e2e_test_bounds.sh.log | sed 's/^#  *//' >$(BENCH_OUT)/bounds.txt; \
	    echo "bench: the library's report, heap and resident memory, small -> large: $(BENCH_OUT)/bounds.txt"; \
	fi
