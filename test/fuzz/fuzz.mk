# The config loader fuzzer (libFuzzer + ASan + UBSan), run by `make fuzz FUZZ_SECONDS=N`.
# The corpus in build-fuzz/corpus is seeded from the shipped configs and kept between runs;
# a crash leaves build-fuzz/crash-* and fails the make. FUZZ_EXTRA=-DFUZZ_CYAML_LOAD also checks that
# libcyaml loads every tree the validator accepts.

FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_DIR     := build-fuzz
FUZZ_BIN     := $(FUZZ_DIR)/fuzz_config$(if $(FUZZ_EXTRA),_extra)
FUZZ_CFLAGS  := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=c11 -D_GNU_SOURCE -I. $(FUZZ_EXTRA)
FUZZ_SRCS    := test/fuzz/fuzz_config.c \
                $(addprefix core/config/,yamltree.c yamltree_emit.c yindex.c config_compose.c config_interp.c \
                  config_resolvers.c config_expr.c config_schema.c config_values.c config.c) \
                $(addprefix core/base/,log.c fsio.c progress.c)
FUZZ_SEEDS   := $(wildcard conf/*.yaml recipes/*/conf/*.yaml test/fuzz/seeds/*.yaml)

.PHONY: fuzz-run
fuzz-run: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	@for f in $(FUZZ_SEEDS); do cp -f $$f $(FUZZ_DIR)/corpus/seed_$$(echo $$f | tr '/' '_'); done
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -close_fd_mask=2 \
	    -dict=test/fuzz/config.dict -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 $(FUZZ_DIR)/corpus

$(FUZZ_BIN): $(FUZZ_SRCS) $(wildcard core/*/*.h) test/fuzz/fuzz.mk
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRCS) -lcyaml -lyaml -lm
