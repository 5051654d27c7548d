# tests/e2e/bounds.mk: the helpers of tests/e2e/test_bounds.sh (issue 14:
# what the library keeps stays bounded by what is alive). Included by the
# top-level Makefile.
#   $(BUILD)/tests/e2e/bounds_prog          exec and context life cycles
#   $(BUILD)/tests/e2e/libbounds_probe.so   preloaded; writes the process's
#                                           memory figures at exit. Never
#                                           instrumented (it reads malloc's own
#                                           figures; sanitizer runs skip them).

$(BUILD)/tests/e2e/bounds_prog: tests/e2e/bounds_prog.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(STUB_LIBCUDA) $(ALL_LDFLAGS)

$(BUILD)/tests/e2e/libbounds_probe.so: SANFLAGS :=
$(BUILD)/tests/e2e/libbounds_probe.so: tests/e2e/bounds_probe.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS)

all: $(BUILD)/tests/e2e/bounds_prog $(BUILD)/tests/e2e/libbounds_probe.so
