# tests/stress/stress.mk: the concurrency stress program (issue 6), driven by
# tests/stress/test_stress.sh. Included by the top-level Makefile after
# tests/workloads/workloads.mk (it uses the workloads' kernel module).
#
#   $(BUILD)/tests/stress/stress   links the toolkit's stub libcuda, like the
#                                  workloads; kernels: $(BUILD)/workloads/wl_kernels.so

STRESS_PROG := $(BUILD)/tests/stress/stress

$(STRESS_PROG): tests/stress/stress.c tests/workloads/wl_math.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -Itests/workloads -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS)

all: $(STRESS_PROG) $(BUILD)/workloads/wl_kernels.so

# The scale program (round 18), driven by tests/stress/test_scale.sh; kernels:
# $(BUILD)/tests/emu/mod_test.so.
SCALE_PROG := $(BUILD)/tests/stress/scale_prog

$(SCALE_PROG): tests/stress/scale_prog.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS)

all: $(SCALE_PROG)
