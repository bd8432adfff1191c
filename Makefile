# espnet3 build. `make` builds ./espnet3 for CPUs; `make CUDA=1` adds cuda/ (nvcc);
# `make lib` builds libespnet3 (.a, .so) and its example; `make check` checks the layer rules and runs every test; `make asan` runs them under AddressSanitizer + UBSan;
# `make fuzz` runs the config loader fuzzer for FUZZ_SECONDS, then each file reader's fuzzer for
# FUZZ_READER_SECONDS; `make fuzz-long` runs them all for FUZZ_LONG_SECONDS each (test/fuzz/fuzz.mk).

CC       ?= gcc
CXX      ?= g++
NVCC     ?= nvcc
CUDA_HOME ?= /usr/local/cuda
FUZZ_SECONDS ?= 60

WARN     := -Wall -Wextra -Werror
CSTD     := -std=c11 -D_GNU_SOURCE
OPT      ?= -O2 -g
# -fPIC: the same objects go into the binary and into libespnet3.so (the library, lib/);
# -fno-semantic-interposition keeps the compiler inlining and calling them directly as before.
PIC      := -fPIC -fno-semantic-interposition
CFLAGS   += $(CSTD) $(OPT) $(PIC) -fopenmp-simd -fno-math-errno $(WARN) -MMD -MP -I.
LDLIBS   += -lcyaml -lyaml -lsndfile -lsamplerate -lfftw3f -lfftw3 -lxsmm -lopenblas -lmvec -ldl -ljansson -lzip -lz -licuuc -lm -lpthread
# SentencePiece (C++) behind core/data/spm_shim.cc: the tokenizer's bpe/unigram models.
CXXFLAGS += -std=c++17 $(OPT) $(PIC) $(WARN) -MMD -MP -I.
LDLIBS   += -lsentencepiece -lsentencepiece_train -lstdc++

BUILD    := build
SANFLAGS :=
ifeq ($(SAN),1)
BUILD    := build-asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
# The CPU variant's folder: a CUDA build takes from it every object that does not depend on CUDA.
BASE_BUILD := $(BUILD)

# Optional parts are detected by compiling a probe, never by asking the package manager.
probe = $(shell printf '%s\n' '$(1)' 'int main(void){return 0;}' | $(CC) -x c - $(2) -o /dev/null 2>/dev/null && echo 1)

# PMIx (libpmix-dev): ranks of an `srun --mpi=pmix` step; without it the SLURM variables serve.
PMIX_CFLAGS := $(shell pkg-config --cflags pmix 2>/dev/null)
PMIX_LIBS   := $(shell pkg-config --libs pmix 2>/dev/null)
ifeq ($(call probe,#include <pmix.h>,$(PMIX_CFLAGS) $(PMIX_LIBS)),1)
CFLAGS   += -DESPNET3_PMIX=1 $(PMIX_CFLAGS)
LDLIBS   += $(PMIX_LIBS)
endif

ifeq ($(CUDA),1)
NVCC := $(shell command -v $(NVCC) 2>/dev/null || echo $(CUDA_HOME)/bin/nvcc)
# The probe: nvcc must compile a kernel, and the C compiler must link a program against cudart.
HAVE_NVCC := $(shell d=$$(mktemp -d) && printf '__global__ void k(float *x){x[0]=1;}\n' >$$d/p.cu && \
                $(NVCC) -c $$d/p.cu -o $$d/p.o >/dev/null 2>&1 && echo 1; rm -rf $$d)
ifneq ($(HAVE_NVCC),1)
$(error CUDA=1 but nvcc ($(NVCC)) cannot compile a probe kernel (install the CUDA toolkit or set CUDA_HOME))
endif
HAVE_CUDART := $(call probe,#include <cuda_runtime.h>,-I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib64 -lcudart)
ifneq ($(HAVE_CUDART),1)
$(error CUDA=1 but a probe program does not link against $(CUDA_HOME)/lib64/libcudart (set CUDA_HOME))
endif
HAVE_CUBLAS := $(call probe,#include <cublas_v2.h>,-I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib64 -lcublas -lcudart)
ifneq ($(HAVE_CUBLAS),1)
$(error CUDA=1 but a probe program does not link against $(CUDA_HOME)/lib64/libcublas (install cuBLAS or set CUDA_HOME))
endif
# NCCL: the comm of multi-GPU runs (cuda/comm_nccl.cu).
HAVE_NCCL := $(call probe,#include <nccl.h>,-I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib64 -lnccl -lcudart)
ifneq ($(HAVE_NCCL),1)
$(error CUDA=1 but a probe program does not link against libnccl (install NCCL, e.g. libnccl-dev, or set CUDA_HOME))
endif
BUILD    := $(BUILD)-cuda
# Only the sources that depend on it (scripts/cuda_aware_srcs.sh) are compiled with ESPNET3_CUDA,
# into $(BUILD); every other object is the CPU variant's, the same bytes, built once.
CUDA_CFLAGS := -DESPNET3_CUDA=1 -I$(CUDA_HOME)/include
CUDA_AWARE_SRCS := $(shell scripts/cuda_aware_srcs.sh)
# nvcc's host code (kernel registration, guarded statics) needs the C++ runtime: the link is gcc's.
LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl -lcublas -lcudart -lstdc++
# The architectures every kernel is built for (scripts/check_cuda_resources.sh checks each).
CUDA_ARCHS ?= 80 90
# -fmad=false: kernels round every multiply and add as the C code does (C11 does not contract
# a * b + c into an FMA either), so ops built from kernel_math.h keep the CPU's bits.
NVCCFLAGS ?= -O2 -std=c++17 -fmad=false -Xcompiler -Wall,-Wextra,-Werror,-fPIC -Werror all-warnings -I. \
             $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a))
endif

CFLAGS   += $(SANFLAGS)
CXXFLAGS += $(SANFLAGS)
LDFLAGS  += $(SANFLAGS)

APP_SRCS  := $(wildcard core/*/*.c lib/*.c stages/*.c recipes/*.c recipes/*/*.c)
CXX_SRCS  := $(wildcard core/*/*.cc)
MAIN_SRCS := $(wildcard cli/*.c)
CUDA_SRCS := $(if $(filter 1,$(CUDA)),$(wildcard cuda/*.cu))
TEST_SRCS := $(wildcard test/unit/*.c test/unit/*/*.c)

# A C source's object: in $(BUILD) when CUDA-aware, else the CPU variant's ($(BASE_BUILD); the same
# folder unless CUDA=1).
c_objs = $(foreach s,$(1),$(if $(filter $(s),$(CUDA_AWARE_SRCS)),$(BUILD),$(BASE_BUILD))/$(s:.c=.o))
APP_OBJS  := $(call c_objs,$(APP_SRCS)) $(CXX_SRCS:%.cc=$(BASE_BUILD)/%.o) $(CUDA_SRCS:%.cu=$(BUILD)/%.o)
# Python files that go into the binary as data (ld -r -b binary): the bridge to a recipe's Python
# runs core/data/py_helper.py with `python -c`; pack_demo writes stages/demo_app.py as the demo's app.
PY_RESOURCES := core/data/py_helper.py stages/demo_app.py
APP_OBJS  += $(PY_RESOURCES:%.py=$(BASE_BUILD)/%_py.o)
MAIN_OBJS := $(call c_objs,$(MAIN_SRCS))
TEST_OBJS := $(call c_objs,$(TEST_SRCS))
# The tests link everything but main().
CLI_LIB_OBJS := $(filter-out %/cli/main.o,$(MAIN_OBJS))

# Each variant links into its own build folder; `make` (and `make CUDA=1`) copies it to ./espnet3.
BIN      := $(BUILD)/espnet3
TEST_BIN := $(BUILD)/espnet3_tests

.PHONY: all lib check check-build asan fuzz fuzz-long clean deps print-ldlibs print-objs print-test-objs print-main-objs print-nvcc layers cuda-check test-venv bench
all: $(BIN)
	@cmp -s $(BIN) espnet3 || cp -f $(BIN) espnet3

$(BIN): $(APP_OBJS) $(MAIN_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_CFLAGS) -c -o $@ $<

ifeq ($(CUDA),1)
$(BASE_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<
endif

$(BASE_BUILD)/%_py.o: %.py
	@mkdir -p $(dir $@)
	ld -r -b binary -z noexecstack -o $@ $<

$(BASE_BUILD)/%.o: %.cc
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c -o $@ $<

# ptxas' report of every kernel (-Xptxas -v: registers, spills, stack, shared memory per
# architecture) is kept beside the object as .ptxas for scripts/check_cuda_resources.py, so the
# check compiles nothing again; it is printed when the compile fails.
$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xptxas -v -MMD -MP -MF $(@:.o=.d) -c -o $@ $< 2>$(@:.o=.ptxas) || \
	    { cat $(@:.o=.ptxas) >&2; rm -f $@; exit 1; }

$(TEST_BIN): $(TEST_OBJS) $(APP_OBJS) $(CLI_LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcriterion

# The C library (include/espnet3.h, docs/library.md): core/, lib/ and the recipes' key tables (a
# model's training config names its recipe's create_dataset keys; not their dataset builders), static
# and shared; the shared one exports the header's functions only (lib/espnet3.map). The example
# program links each.
RECIPE_KEY_OBJS := $(filter %/recipes/keys.o %/keys.o,$(filter %/recipes/%,$(APP_OBJS)))
LIB_OBJS := $(filter-out %/stages/% %/recipes/%,$(APP_OBJS)) $(RECIPE_KEY_OBJS)
LIB_A    := $(BUILD)/libespnet3.a
LIB_SO   := $(BUILD)/libespnet3.so
EXAMPLES := $(BUILD)/examples/transcribe $(BUILD)/examples/transcribe_static

$(LIB_A): $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(LIB_SO): $(LIB_OBJS) lib/espnet3.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libespnet3.so -Wl,--version-script=lib/espnet3.map -Wl,--no-undefined \
	    -o $@ $(LIB_OBJS) $(LDLIBS)

$(BUILD)/examples/transcribe: examples/transcribe.c include/espnet3.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) $(WARN) $(SANFLAGS) -I. -o $@ $< -L$(BUILD) -lespnet3 -Wl,-rpath,'$$ORIGIN/..'

$(BUILD)/examples/transcribe_static: examples/transcribe.c include/espnet3.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(OPT) $(WARN) $(SANFLAGS) -I. -o $@ $< $(LIB_A) $(LDLIBS)

lib: $(LIB_A) $(LIB_SO) $(EXAMPLES)

# The benchmark drivers (scripts/bench/*.c), built against this build's objects so that they
# cannot rot: make check builds them, the bench scripts run them.
BENCH_SRCS := $(filter-out scripts/bench/gemm_shapes_preload.c,$(wildcard scripts/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:scripts/bench/%.c=$(BUILD)/bench/%) $(BUILD)/bench/gemm_shapes_preload.so

$(BUILD)/bench/%: scripts/bench/%.c $(APP_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_CFLAGS) $(LDFLAGS) -o $@ $< $(APP_OBJS) $(LDLIBS)

$(BUILD)/bench/gemm_shapes_preload.so: scripts/bench/gemm_shapes_preload.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 $(WARN) -shared -fPIC -o $@ $< -ldl -lpthread

bench: $(BENCH_BINS)

deps:
	@scripts/install_deps.sh

# The layer rules of docs/developers.md: which room may include which; and every relative link of
# README.md and docs/ resolves.
layers:
	@python3 scripts/check_layers.py
	@python3 scripts/check_doc_links.py

# The tests' real-world checks (PyTorch loading our .pth/.ckpt, the real torchrun, Python's
# safetensors) use a cached venv from PyPI; ESPNET3_NO_TEST_VENV=1 skips it (those tests then say
# they are skipped, and why).
TEST_VENV ?= $(or $(ESPNET3_TEST_VENV),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/espnet3/test-venv)

test-venv:
	@scripts/install_test_venv.sh '$(TEST_VENV)'

# What make check runs and builds: the binary, the tests, the library's examples and (plain) the
# bench drivers. .ci/run builds it with -j2 on its own, beside the CUDA checks.
check-build: $(BIN) $(TEST_BIN) $(EXAMPLES) $(if $(SAN),,$(BENCH_BINS))

# The test runner finds the binary under test through ESPNET3_BIN, the venv through ESPNET3_TEST_VENV.
TEST_ENV = ESPNET3_BIN=$(abspath $(BIN)) ESPNET3_ROOT=$(CURDIR) ESPNET3_TEST_VENV='$(TEST_VENV)' ESPNET3_SANITIZED=$(SAN)
# The suites that spend most of their time waiting on the local SLURM cluster's daemons (node
# registration, job scheduling: minutes of an idle core in all) run in a second runner beside the
# others; its output, kept in $(BUILD)/check-slurm.log, follows theirs. TEST_ARGS: one runner.
SLURM_SUITES := dist_slurm|runner_slurm|infer_slurm

check: deps layers test-venv
	@$(MAKE) --no-print-directory check-build
ifeq ($(TEST_ARGS),)
	@echo "$(TEST_BIN): every suite but $(SLURM_SUITES), which run beside them"
	@$(TEST_ENV) $(TEST_BIN) --filter '@($(SLURM_SUITES))/*' >$(BUILD)/check-slurm.log 2>&1 & slurm=$$!; \
	    $(TEST_ENV) $(TEST_BIN) --filter '!($(SLURM_SUITES))/*'; rc=$$?; wait $$slurm; slurm_rc=$$?; \
	    echo "== $(TEST_BIN): the suites $(SLURM_SUITES) (run beside the others)"; cat $(BUILD)/check-slurm.log; \
	    [ $$rc -eq 0 ] && [ $$slurm_rc -eq 0 ]
else
	$(TEST_ENV) $(TEST_BIN) $(TEST_ARGS)
endif

# The CUDA checks (make CUDA=1 cuda-check; .ci/run runs them after the CUDA build): ptxas'
# registers and spills per kernel (from the build's reports), the CUDA build's 2-rank NCCL check
# (2 GPUs, else skipped), the kernels and the NCCL comm on the CPU emulation, and the GPU lease's
# dry run (scripts/gpu/lease.sh), which runs the CUDA build's test_backend_ops (cuda against ref64
# where a GPU is visible, reported as skipped elsewhere), train_cuda and speech2text-on-cuda tests.
ifeq ($(CUDA),1)
cuda-check: $(BIN) $(TEST_BIN)
	python3 scripts/check_cuda_resources.py --build $(BUILD)
	$(TEST_BIN) --filter 'comm_nccl/*'
	EMU_ASAN=1 scripts/cuda_emu/run
	scripts/gpu/lease.sh dry-run
else
cuda-check:
	@echo "make cuda-check: needs CUDA=1 (make CUDA=1 cuda-check)" >&2; exit 2
endif

# Every test under AddressSanitizer + UBSan, but for the checks by other programs than ours
# (PyTorch, torchrun and safetensors reading our files: ESPNET3_NO_TEST_VENV, tests that say so
# and skip); the plain `make check` runs those.
asan: deps
	@ESPNET3_NO_TEST_VENV=1 $(MAKE) --no-print-directory SAN=1 check

# The fuzz targets build on every core, then run one per core (FUZZ_JOBS, test/fuzz/fuzz.mk).
fuzz: deps
	@$(MAKE) --no-print-directory -j$(shell nproc) -f test/fuzz/fuzz.mk fuzz-build
	@$(MAKE) --no-print-directory -f test/fuzz/fuzz.mk FUZZ_SECONDS=$(FUZZ_SECONDS)

fuzz-long: deps
	@$(MAKE) --no-print-directory -f test/fuzz/fuzz.mk fuzz-long

clean:
	rm -rf build build-asan build-cuda build-asan-cuda build-fuzz espnet3

-include $(APP_OBJS:.o=.d) $(MAIN_OBJS:.o=.d) $(TEST_OBJS:.o=.d)

# The link libraries and the objects of this build (not a stale .o of a moved file), for scripts
# that link against them (scripts/bench/).
print-ldlibs:
	@echo $(LDLIBS)

print-objs:
	@echo $(APP_OBJS)

# The test and command-line objects of this build (scripts/cuda_emu/run links its own binaries from them).
print-test-objs:
	@echo $(TEST_OBJS)

print-main-objs:
	@echo $(MAIN_OBJS)

# nvcc, its flags and the architectures of `make CUDA=1`, for scripts/check_cuda_resources.sh.
print-nvcc:
	@echo 'NVCC=$(NVCC)'
	@echo 'NVCCFLAGS=$(NVCCFLAGS)'
	@echo 'CUDA_ARCHS=$(CUDA_ARCHS)'
