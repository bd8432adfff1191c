# The fuzzers (libFuzzer + ASan + UBSan), run by `make fuzz` and `make fuzz-long` (see docs/developers.md,
# "Fuzzing"). A crash, leak or timeout fails the make and leaves the input under build-fuzz/.
#
# config: the config loader, for FUZZ_SECONDS (default 60). Its corpus in build-fuzz/corpus is seeded
#   from the shipped configs and kept between runs. FUZZ_EXTRA=-DFUZZ_CYAML_LOAD also checks that
#   libcyaml loads every tree the validator accepts.
# readers: one target per reader of files a user may receive (FUZZ_READERS below), each for
#   FUZZ_READER_SECONDS (default 10), seeded from test/fuzz/seeds/<target>/ with the dictionary
#   test/fuzz/<target>.dict when there is one; corpus in build-fuzz/corpus-<target>, crash files
#   build-fuzz/<target>-crash-* (leak-*, timeout-*, oom-*).
# fuzz-long: every target, config included, for FUZZ_LONG_SECONDS each (default 600).

FUZZ_SECONDS        ?= 60
FUZZ_READER_SECONDS ?= 10
FUZZ_LONG_SECONDS   ?= 600
FUZZ_CC      ?= clang
FUZZ_DIR     := build-fuzz
FUZZ_BIN     := $(FUZZ_DIR)/fuzz_config$(if $(FUZZ_EXTRA),_extra)
FUZZ_CFLAGS  := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=c11 -D_GNU_SOURCE -I. $(FUZZ_EXTRA)
FUZZ_SRCS    := test/fuzz/fuzz_config.c \
                $(wildcard core/config/*.c) \
                $(addprefix core/base/,log.c fsio.c progress.c edit_distance.c rng.c) \
                $(addprefix core/data/,augment.c augment_conf.c augment_stft.c fft_plan.c) \
                recipes/keys.c $(wildcard recipes/*/keys.c)
FUZZ_SEEDS   := $(wildcard conf/*.yaml recipes/*/conf/*.yaml test/fuzz/seeds/*.yaml)
# -malloc_limit_mb: no reader may allocate hundreds of MB for a few KB of input (a header's claim).
FUZZ_FLAGS   := -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -close_fd_mask=2 -print_final_stats=1

FUZZ_READERS := safetensors trainer_state npz tokens manifest kaldi_dir corpus shapes audio audio_stream metrics_csv text_scp \
                torch torch_pickle zip_unpack noise_scp espnet2_config align_text pcm_stream
# The readers and what they need, compiled once (instrumented) and linked into every target.
FUZZ_LIB_SRCS := $(wildcard core/base/*.c core/formats/*.c) core/data/audio.c core/data/audio_riff.c core/data/audio_stream.c core/data/tokenizer.c \
                 core/data/pcm_stream.c \
                 core/data/noise_rir_scp.c \
                 $(wildcard core/config/*.c) core/nn/espnet2_config.c core/data/augment.c core/data/augment_conf.c \
                 core/data/augment_stft.c core/data/fft_plan.c \
                 core/train/checkpoint.c core/train/checkpoint_average.c core/train/checkpoint_espnet3.c \
                 core/nn/param_names.c core/decode/text_cleaner.c test/fuzz/fuzz_util.c
# The tokenizer reaches SentencePiece (C++) through its shim, compiled with the same instrumentation
# (less UBSan's vptr check, whose runtime only a C++ link brings).
FUZZ_CXX      ?= clang++
FUZZ_LIB_CXX_SRCS := core/data/spm_shim.cc
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_LIB_CXX_SRCS:%.cc=$(FUZZ_DIR)/obj/%.o)
FUZZ_OBJ_CFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -g -O1 -std=c11 \
                   -D_GNU_SOURCE -Wall -Wextra -Werror -I.
FUZZ_LIBS    := -lsndfile -lsamplerate -ljansson -lzip -lz -licuuc -lcyaml -lyaml -lfftw3f -lm -lpthread -lsentencepiece \
                -lsentencepiece_train -lstdc++

# The runs go FUZZ_JOBS at a time (default: one per core), each target's output kept together.
FUZZ_JOBS    ?= $(shell nproc)

.PHONY: fuzz-run fuzz-config fuzz-readers fuzz-long fuzz-build $(FUZZ_READERS:%=fuzz-run-%)
fuzz-run: $(FUZZ_BIN) $(FUZZ_READERS:%=$(FUZZ_DIR)/fuzz_%)
	@$(MAKE) --no-print-directory -f test/fuzz/fuzz.mk -j$(FUZZ_JOBS) --output-sync=target fuzz-config \
	    $(FUZZ_READERS:%=fuzz-run-%)

fuzz-build: $(FUZZ_BIN) $(FUZZ_READERS:%=$(FUZZ_DIR)/fuzz_%)

fuzz-config: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	@for f in $(FUZZ_SEEDS); do cp -f $$f $(FUZZ_DIR)/corpus/seed_$$(echo $$f | tr '/' '_'); done
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 -close_fd_mask=2 \
	    -dict=test/fuzz/config.dict -artifact_prefix=$(FUZZ_DIR)/ -print_final_stats=1 $(FUZZ_DIR)/corpus

# Built before any run starts, so a compile error fails fast; then the readers' runs.
fuzz-readers: $(FUZZ_READERS:%=$(FUZZ_DIR)/fuzz_%)
	@$(MAKE) --no-print-directory -f test/fuzz/fuzz.mk -j$(FUZZ_JOBS) --output-sync=target $(FUZZ_READERS:%=fuzz-run-%)

fuzz-long:
	@$(MAKE) --no-print-directory -f test/fuzz/fuzz.mk fuzz-run FUZZ_SECONDS=$(FUZZ_LONG_SECONDS) \
	    FUZZ_READER_SECONDS=$(FUZZ_LONG_SECONDS)

$(FUZZ_READERS:%=fuzz-run-%): fuzz-run-%: $(FUZZ_DIR)/fuzz_%
	@mkdir -p $(FUZZ_DIR)/corpus-$*
	@cp -f test/fuzz/seeds/$*/* $(FUZZ_DIR)/corpus-$*/
	$< -max_total_time=$(FUZZ_READER_SECONDS) $(FUZZ_FLAGS) $(if $(wildcard test/fuzz/$*.dict),-dict=test/fuzz/$*.dict) \
	    -artifact_prefix=$(FUZZ_DIR)/$*- $(FUZZ_DIR)/corpus-$*

$(FUZZ_BIN): $(FUZZ_SRCS) $(wildcard core/*/*.h) test/fuzz/fuzz.mk
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRCS) -lcyaml -lyaml -ljansson -lfftw3f -lm -lpthread

$(FUZZ_DIR)/obj/%.o: %.c $(wildcard core/*/*.h) test/fuzz/fuzz_util.h test/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/obj/%.o: %.cc $(wildcard core/*/*.h) test/fuzz/fuzz.mk
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -g -O1 -std=c++17 \
	    -Wall -Wextra -Werror -I. -c -o $@ $<

.SECONDARY: $(FUZZ_LIB_OBJS) $(FUZZ_READERS:%=$(FUZZ_DIR)/obj/test/fuzz/fuzz_%.o)
$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/test/fuzz/fuzz_%.o $(FUZZ_LIB_OBJS)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $^ $(FUZZ_LIBS)

# Regenerates test/fuzz/seeds/<reader>/ with espnet3's own writers (not part of `make fuzz`).
.PHONY: fuzz-seeds
fuzz-seeds:
	@mkdir -p $(FUZZ_DIR)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra -Werror -I. -c -o $(FUZZ_DIR)/spm_shim_seeds.o core/data/spm_shim.cc
	$(CC) -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -I. -o $(FUZZ_DIR)/make_seeds test/fuzz/make_seeds.c \
	    $(filter-out test/fuzz/fuzz_util.c,$(FUZZ_LIB_SRCS)) $(FUZZ_DIR)/spm_shim_seeds.o $(FUZZ_LIBS)
	$(FUZZ_DIR)/make_seeds
