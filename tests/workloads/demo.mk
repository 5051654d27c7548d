# tests/workloads/demo.mk: `make demo` (included by the top-level Makefile,
# which declares it .PHONY). Builds everything, then runs scripts/demo.sh:
# the train_loop workload without the library, under always_update and under
# the library's default policy, on a real GPU when one is present and on the
# emulated driver otherwise; prints the table (counts, checksums, the modeled
# driver time from core/costs.tsv) and writes $(BUILD)/demo/demo.md.
# Exits non-zero when a run fails or a checksum differs.
#
#   make demo                                      defaults (50 steps, 320 nodes)
#   make demo DEMO_STEPS=200 DEMO_NODES=1024       a longer run, a bigger graph
#   make demo DEMO_DRIVER=emu                      the emulated driver even with a GPU
#
# DEMO_STEPS, DEMO_NODES, DEMO_DRIVER (auto | emu | real), DEMO_POLICY,
# DEMO_COSTS (a cost table) and DEMO_OUT are passed to scripts/demo.sh (its
# header describes them); unset ones take the script's defaults.

DEMO_VARS := DEMO_STEPS DEMO_NODES DEMO_DRIVER DEMO_POLICY DEMO_COSTS DEMO_OUT

demo: all
	BUILD=$(abspath $(BUILD)) $(foreach v,$(DEMO_VARS),$(if $(value $(v)),$(v)='$($(v))')) \
	    scripts/demo.sh
