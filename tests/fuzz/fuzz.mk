# tests/fuzz/fuzz.mk: fuzzing. Included by the top-level Makefile.
#
#   $(BUILD)/tests/fuzz/test_fuzz_corpus   part of `all`, run by `make test`:
#        replays tests/fuzz/corpus/<target>/* through every target, built
#        with $(CC) and the normal flags (and SAN=... when given)
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_MERGE=1] [FUZZ_TARGETS="config ..."]
#        builds each target with clang and libFuzzer (+ASan/UBSan) into
#        $(BUILD)/fuzz/ and runs it for FUZZ_SECONDS, starting from the
#        repository corpus. New inputs go to $(BUILD)/fuzz/work/<target>/;
#        with FUZZ_MERGE=1 the ones that add coverage are merged into
#        tests/fuzz/corpus/<target>/ afterwards. A crash leaves its input in
#        $(BUILD)/fuzz/artifacts/<target>/ and makes the target fail (after
#        every target has run).
#
# A target is tests/fuzz/fuzz_<name>.c defining LLVMFuzzerTestOneInput; add
# <name> to FUZZ_TARGET_LIST in test_fuzz_corpus.c and give it a corpus
# folder. tests/fuzz/<name>.dict, if present, is passed as a dictionary.

FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 600
FUZZ_MERGE    ?=
FUZZ_MAX_LEN  ?= 4096
FUZZ_SAN      ?= address,undefined
FUZZ_ALL      := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS  ?= $(FUZZ_ALL)
FUZZ_DIR      := $(BUILD)/fuzz
FUZZ_CFLAGS    = -std=gnu11 -O1 -g $(WARN) -pthread -I$(CUDA_INC) -I. -Itests/fuzz -D_GNU_SOURCE \
                 -DHASH_NONFATAL_OOM=1 -fno-omit-frame-pointer -fno-sanitize-recover=all
# The targets link the configuration parser and the report-path template
# alone (issue 12: the parser must not pull in the rest of core/).
FUZZ_CORE_SRCS := core/config.c core/pathtmpl.c
FUZZ_CORE_OBJS = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_CORE_SRCS))

.PHONY: fuzz fuzz-build

# ---------------------------------------------------------------- replay test (make test)
FUZZ_REPLAY_OBJS := $(patsubst %,$(BUILD)/tests/fuzz/replay_%.o,$(FUZZ_ALL))

$(BUILD)/tests/fuzz/replay_%.o: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_input.h core/config.h core/pathtmpl.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -I. -Itests/fuzz -DLLVMFuzzerTestOneInput=sg_fuzz_$* -c -o $@ $<

FUZZ_REPLAY_CORE := $(patsubst %.c,$(BUILD)/obj/%.o,$(FUZZ_CORE_SRCS))
$(BUILD)/tests/fuzz/test_fuzz_corpus: tests/fuzz/test_fuzz_corpus.c tests/check.h $(FUZZ_REPLAY_OBJS) \
                                      $(FUZZ_REPLAY_CORE)
	$(CC) $(ALL_CFLAGS) -Itests -DSG_SOURCE_DIR='"$(CURDIR)"' -o $@ $< $(FUZZ_REPLAY_OBJS) \
	    $(FUZZ_REPLAY_CORE) $(ALL_LDFLAGS)

all: $(BUILD)/tests/fuzz/test_fuzz_corpus

# ---------------------------------------------------------------- libFuzzer targets (make fuzz)
$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) -MMD -MP -c -o $@ $<

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $(FUZZ_CORE_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer,$(FUZZ_SAN) -pthread -o $@ $^

.PRECIOUS: $(FUZZ_DIR)/obj/%.o
-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)

fuzz-build: $(addprefix $(FUZZ_DIR)/fuzz_,$(FUZZ_TARGETS))

# Each target runs even if an earlier one crashed; the status says whether any did.
fuzz: fuzz-build
	@status=0; for t in $(FUZZ_TARGETS); do \
	    work=$(FUZZ_DIR)/work/$$t; art=$(FUZZ_DIR)/artifacts/$$t; mkdir -p $$work $$art; \
	    dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=tests/fuzz/$$t.dict; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/$$t.log)"; \
	    if $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) \
	        -timeout=10 -print_final_stats=1 -artifact_prefix=$$art/ $$dict \
	        $$work tests/fuzz/corpus/$$t >$(FUZZ_DIR)/$$t.log 2>&1; then \
	        grep -E '^(stat::number_of_executed_units|stat::new_units_added|Done)' \
	            $(FUZZ_DIR)/$$t.log | sed "s/^/fuzz: $$t: /"; \
	    else \
	        status=1; echo "fuzz: $$t FAILED; inputs in $$art/:"; ls $$art; \
	        grep -A12 -E 'ERROR|property failed' $(FUZZ_DIR)/$$t.log | head -30; \
	    fi; \
	    if [ -n "$(FUZZ_MERGE)" ]; then \
	        $(FUZZ_DIR)/fuzz_$$t -merge=1 -max_len=$(FUZZ_MAX_LEN) tests/fuzz/corpus/$$t $$work \
	            >>$(FUZZ_DIR)/$$t.log 2>&1 || status=1; \
	        echo "fuzz: $$t: corpus now $$(ls tests/fuzz/corpus/$$t | wc -l) files"; \
	    fi; \
	done; exit $$status
