# tests/e2e/oom.mk: the helper of tests/e2e/test_host_oom.sh (round 17: the
# library's own host allocations fail). Included by the top-level Makefile.
#   $(BUILD)/tests/e2e/liboom_shim.so   preloaded after the library; fails
#                                       the library's malloc & co. on demand.
#                                       Never instrumented: it exports
#                                       nothing and calls whatever the
#                                       library's GOT held (a sanitizer's
#                                       malloc in a sanitizer build).

$(BUILD)/tests/e2e/liboom_shim.so: SANFLAGS :=
$(BUILD)/tests/e2e/liboom_shim.so: tests/e2e/oom_shim.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -shared -o $@ $< $(ALL_LDFLAGS)

all: $(BUILD)/tests/e2e/liboom_shim.so
