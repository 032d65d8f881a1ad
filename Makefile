# ddpc — build with `make`; `make help` lists the targets.
CC      ?= cc
PREFIX  ?= /usr/local
SAN     ?=
# LEAN=1: the collective matrices run counts above 4097 for float32 only
# (tests/dist/coll_check.h); CI's sanitizer run
LEAN    ?=
OPT     ?= -O2
comma   := ,
# (no comma in the path: -Wl,-rpath-link,DIR would split it)
BUILD   ?= build$(if $(SAN),/san-$(subst $(comma),-,$(SAN)))

PKGS      := openblas zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lopenblas -lz)

CFLAGS  ?=
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Wno-unused-parameter -fvisibility=hidden \
           -Werror=implicit-function-declaration \
           -fPIC -pthread -Iinclude -Isrc -Itests $(PKG_CFLAGS)
# cJSON (libcjson-dev) reads rank table files (src/comm/ranktable.c) and
# HCCL's whitelist (src/base/auth.c); without it ddpc says so when given one
CJSON_LIBS := $(shell pkg-config --libs libcjson 2>/dev/null)
# what libddpc (the collectives) needs; the training library adds BLAS and zlib
CORE_LIBS := $(CJSON_LIBS) -lm -lpthread -lrt
LDLIBS  += $(PKG_LIBS) $(CORE_LIBS)
ifneq ($(SAN),)
CFLAGS  += -fsanitize=$(SAN) -fno-omit-frame-pointer
LDFLAGS += -fsanitize=$(SAN)
endif

# Two libraries, one per stack of layers (the README's source layout;
# `make check-layers` keeps them apart): libddpc, the collectives (base,
# store, transport, comm, coll: what HCCL, torch and C users of collectives
# link), and libddpc_train above it (nn, data, ddp), which alone needs BLAS
# and zlib. A program that trains links both: $(LIBS_A) statically.
CORE_SRC  := $(sort $(wildcard $(addprefix src/,$(addsuffix /*.c,base store transport comm coll))))
TRAIN_SRC := $(sort $(wildcard $(addprefix src/,$(addsuffix /*.c,nn data ddp))))
LIB_SRC   := $(CORE_SRC) $(TRAIN_SRC)
CORE_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRC))
TRAIN_OBJ_LIB := $(patsubst %.c,$(BUILD)/obj/%.o,$(TRAIN_SRC))
LIB_OBJ   := $(CORE_OBJ) $(TRAIN_OBJ_LIB)
LIBS_A    := $(BUILD)/libddpc_train.a $(BUILD)/libddpc.a
$(BUILD)/obj/src/comm/ranktable.o $(BUILD)/obj/src/base/auth.o: CFLAGS += $(if $(CJSON_LIBS),-DDDPC_HAVE_CJSON $(shell pkg-config --cflags libcjson))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TOOLS     := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOL_SRC))
EX_SRC    := $(sort $(wildcard examples/*.c))
EXAMPLES  := $(patsubst examples/%.c,$(BUILD)/bin/%,$(EX_SRC))
TEST_SRC  := $(sort $(wildcard tests/unit/*.c tests/dist/*.c))
TEST_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_SRC)) $(BUILD)/obj/tests/harness.o
# One test binary per test file, so that one area's tests build and run alone.
TEST_BIN  := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
HEADERS   := $(wildcard include/ddpc/*.h)

.PHONY: all lib tools examples tests torch torch-module torch2 torch-npu test check-layers check-asan check-san check-valgrind fuzz install uninstall clean help headers-check format format-check docs
all: lib tools examples tests

help:
	@echo "make              build the library, tools, examples and tests into $(BUILD)/"
	@echo "make test         build and run every test (each in its own process, with a deadline)"
	@echo "make test T=name  run the tests whose name contains 'name' (T=\"a b\": either)"
	@echo "make $(BUILD)/tests/unit/test_base   build one test binary; run it with a filter as argument"
	@echo "make SAN=address  (or undefined, thread) a sanitizer build in build/san-SAN/"
	@echo "make check-asan   every test under address,undefined (T= filters too)"
	@echo "make check-san    every test under address,undefined, then under thread (T= filters too)"
	@echo "make check-valgrind  every test, and the tools they start, under valgrind's memcheck (T= too)"
	@echo "make torch        the torch.distributed backend 'ddpc': $(BUILD)/python/ddpc_torch"
	@echo "make torch2       the same for pip's torch 2.x, pip-installed into $(TORCH2_VENV)"
	@echo "make torch-npu    ddpc_torch and ddpc_torch_npu (torch.npu, 'hccl' on CPUs) into $(TORCH_NPU_VENV)"
	@echo "make hccl         HCCL's C API on CPUs: $(BUILD)/libhccl.so, libascendcl.so, HCCL's test programs"
	@echo "make fuzz         clang's libFuzzer on the IDX, checkpoint, store, rank-table and handshake parsers (FUZZ_SECS each)"
	@echo "make install PREFIX=/usr/local   headers, libddpc and libddpc_train (.a, .so), tools, ddpc.pc, ddpc_train.pc"
	@echo "make headers-check  compile every public header on its own"
	@echo "make check-layers   fail when a file includes a header of a layer above its own"
	@echo "make format       clang-format every C file; make format-check fails on any difference"
	@echo "make docs         rewrite docs/ENVIRONMENT.md's table and the README's example from the code"
	@echo "make clean"

lib: $(BUILD)/libddpc.a $(BUILD)/libddpc.so $(BUILD)/libddpc_train.a $(BUILD)/libddpc_train.so
tools: $(TOOLS)
examples: $(EXAMPLES)
tests: $(TEST_BIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libddpc.a: $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libddpc.so: $(CORE_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -o $@ $^ $(CORE_LIBS)

$(BUILD)/libddpc_train.a: $(TRAIN_OBJ_LIB)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# libddpc_train.so finds libddpc.so beside itself ($ORIGIN); it calls the
# internal functions base/export.h marks DDPC_LAYER_API
$(BUILD)/libddpc_train.so: $(TRAIN_OBJ_LIB) $(BUILD)/libddpc.so
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -o $@ $(TRAIN_OBJ_LIB) -L$(BUILD) -lddpc \
	  -Wl,-rpath,'$$ORIGIN' $(PKG_LIBS) -lm -lpthread

# ddpc-run: its main (tools/ddpc-run.c) and its parts (tools/run/*.c, one job each)
RUN_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard tools/run/*.c)))
$(BUILD)/bin/ddpc-run: $(BUILD)/obj/tools/ddpc-run.o $(RUN_OBJ) $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(RUN_OBJ) $(LIBS_A) $(LDLIBS)

# ddpc-train: its main (tools/ddpc-train.c) and its parts (tools/train/*.c: resuming, the timeline, the models)
TRAIN_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(sort $(wildcard tools/train/*.c)))
$(BUILD)/bin/ddpc-train: $(BUILD)/obj/tools/ddpc-train.o $(TRAIN_OBJ) $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(TRAIN_OBJ) $(LIBS_A) $(LDLIBS)

# ddpc-trace: --merge reads Chrome trace files with cJSON (libcjson-dev), when there is one
$(BUILD)/obj/tools/ddpc-trace.o: CFLAGS += $(if $(CJSON_LIBS),-DDDPC_HAVE_CJSON $(shell pkg-config --cflags libcjson))
$(BUILD)/bin/ddpc-trace: $(BUILD)/obj/tools/ddpc-trace.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_A) $(LDLIBS) $(CJSON_LIBS)

$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_A) $(LDLIBS)

# The soak benchmark (bench/soak.c: random collectives, every result checked
# by the collective tests' checker, a rank killed and the job restarted),
# built with the tools but not installed
SOAK := $(BUILD)/bin/ddpc-soak
tools: $(SOAK)
$(SOAK): $(BUILD)/obj/bench/soak.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_A) $(LDLIBS)

$(BUILD)/bin/%: $(BUILD)/obj/examples/%.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS_A) $(LDLIBS)

# test_timeline reads the trace's JSON with cJSON (skips without it)
$(BUILD)/obj/tests/dist/test_timeline.o: CFLAGS += $(if $(CJSON_LIBS),-DDDPC_HAVE_CJSON $(shell pkg-config --cflags libcjson))
$(BUILD)/tests/dist/test_timeline: $(BUILD)/obj/tests/dist/test_timeline.o $(BUILD)/obj/tests/harness.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/harness.o $(LIBS_A) $(LDLIBS) $(CJSON_LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(BUILD)/obj/tests/harness.o $(LIBS_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBS_A) $(LDLIBS)

# The tests that build ddpc-train's models by name link its presets
# (tools/train/presets.c, declared in tools/train/train.h)
PRESET_TESTS := unit/test_nn unit/test_nn_train unit/test_nn_ckpt dist/test_resume dist/test_train_ddp
$(patsubst %,$(BUILD)/tests/%,$(PRESET_TESTS)): $(BUILD)/obj/tools/train/presets.o
$(patsubst %,$(BUILD)/obj/tests/%.o,$(PRESET_TESTS)): CFLAGS += -Itools

# torch.distributed's `ddpc` backend (bridges/torch): the Python package
# $(BUILD)/python/ddpc_torch, built against Debian's libtorch-dev 1.13 and
# pybind11-dev when they are installed (`make torch` says so when not).
TORCH_PY    ?= /usr/bin/python3
TORCH_HDR   := /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp
TORCH_PKG   := $(BUILD)/python/ddpc_torch
TORCH_PYINC  = $(shell $(TORCH_PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# where Debian's python3 looks under PREFIX (/usr/local/lib/python3.11/dist-packages)
TORCH_SITE   = $(PREFIX)/lib/$(shell $(TORCH_PY) -c 'import sys; print("python%d.%d" % sys.version_info[:2])')/dist-packages
TORCH_CXXFLAGS := -std=c++17 $(OPT) -g -fPIC -Wall -Wextra -Wno-unused-parameter -Iinclude \
  -I/usr/include/torch/csrc/api/include $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer)
TORCH_LIBS  := -ltorch_python -ltorch -ltorch_cpu -lc10

torch: lib
	@if [ -f $(TORCH_HDR) ]; then $(MAKE) --no-print-directory torch-module; \
	else echo "make torch: skipped: PyTorch's C++ headers are missing (apt-get install libtorch-dev pybind11-dev python3-torch, or DDPC_SETUP_PEERS=1 bash scripts/setup.sh)"; fi

torch-module: $(TORCH_PKG)/__init__.py $(TORCH_PKG)/_C.so $(TORCH_PKG)/_built.py

# the torch _C.so is built against, which __init__.py checks before loading it
$(TORCH_PKG)/_built.py: $(TORCH_HDR)
	@mkdir -p $(dir $@)
	$(TORCH_PY) -c 'import torch; print("torch_version = %r" % torch.__version__)' > $@.tmp && mv $@.tmp $@

$(TORCH_PKG)/__init__.py: bridges/torch/ddpc_torch/__init__.py
	@mkdir -p $(dir $@)
	cp $< $@

# The adapter's sources (ProcessGroupDDPC, collectives, work, convert), one
# object each; bridges/torch/setup.py lists the same files for pip's builds.
# (Python loads a plain _C.so as the extension module ddpc_torch._C)
TORCH_SRC := $(sort $(wildcard bridges/torch/*.cpp))
TORCH_OBJ := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(TORCH_SRC))
$(TORCH_OBJ): $(BUILD)/obj/%.o: %.cpp $(wildcard bridges/torch/*.h) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(TORCH_CXXFLAGS) -I$(TORCH_PYINC) -c -o $@ $<
$(TORCH_PKG)/_C.so: $(TORCH_OBJ) $(BUILD)/libddpc.a
	@mkdir -p $(dir $@)
	$(CXX) $(TORCH_CXXFLAGS) -shared -o $@ $(TORCH_OBJ) $(BUILD)/libddpc.a $(TORCH_LIBS) $(CORE_LIBS)

# The backend for pip's torch 2.x: `pip install --no-build-isolation
# ./bridges/torch` into the venv scripts/setup.sh makes (torch==2.13.0,
# DDPC_SETUP_PEERS=1), as a user would into theirs; the tests find it
# through DDPC_TEST_TORCH2_PY. Skipped, saying so, where there is no venv.
TORCH2_VENV  ?= build/venv-torch2
TORCH2_PY    := $(TORCH2_VENV)/bin/python
TORCH2_STAMP := $(TORCH2_VENV)/.ddpc_torch-installed
torch2:
	@if [ -x $(TORCH2_PY) ]; then $(MAKE) --no-print-directory $(TORCH2_STAMP); \
	else echo "make torch2: skipped: no torch 2.x venv at $(TORCH2_VENV) (DDPC_SETUP_PEERS=1 bash scripts/setup.sh makes it)"; fi

# (the plain build's libddpc.a is linked in; a sanitizer build's is not:
# Python's own allocations would fail its checks)
$(TORCH2_STAMP): $(wildcard bridges/torch/*.cpp bridges/torch/*.h bridges/torch/*.py bridges/torch/*.toml bridges/torch/ddpc_torch/*.py) $(CORE_SRC) $(HEADERS)
	$(MAKE) --no-print-directory BUILD=build SAN= build/libddpc.a
	DDPC_LIBDDPC=$(abspath build/libddpc.a) DDPC_TORCH_BUILD_DIR=$(abspath $(TORCH2_VENV))/ddpc_torch-build \
	    $(TORCH2_PY) -m pip install -q --no-build-isolation ./bridges/torch
	touch $@

# Ascend's torch.npu and backend 'hccl' on CPUs (bridges/torch_npu): both
# packages pip-installed into the venv scripts/setup.sh makes with
# torch==2.14.1 and torchvision==0.29.1 (DDPC_SETUP_PEERS=1); the tests find
# it through DDPC_TEST_TORCH_NPU_PY. Skipped, saying so, where there is none.
TORCH_NPU_VENV  ?= build/venv-torch214
TORCH_NPU_PY    := $(TORCH_NPU_VENV)/bin/python
TORCH_NPU_STAMP := $(TORCH_NPU_VENV)/.ddpc_torch_npu-installed
torch-npu:
	@if [ -x $(TORCH_NPU_PY) ]; then $(MAKE) --no-print-directory $(TORCH_NPU_STAMP); \
	else echo "make torch-npu: skipped: no torch 2.14 venv at $(TORCH_NPU_VENV) (DDPC_SETUP_PEERS=1 bash scripts/setup.sh makes it)"; fi

$(TORCH_NPU_STAMP): $(wildcard bridges/torch/*.cpp bridges/torch/*.h bridges/torch/*.py bridges/torch/*.toml bridges/torch/ddpc_torch/*.py bridges/torch_npu/*.cpp bridges/torch_npu/*.py bridges/torch_npu/*.toml bridges/torch_npu/ddpc_torch_npu/*.py) $(LIB_SRC) $(HEADERS)
	$(MAKE) --no-print-directory BUILD=build SAN= build/libddpc.a
	DDPC_LIBDDPC=$(abspath build/libddpc.a) DDPC_TORCH_BUILD_DIR=$(abspath $(TORCH_NPU_VENV))/ddpc_torch-build \
	    $(TORCH_NPU_PY) -m pip install -q --no-build-isolation --no-deps ./bridges/torch
	$(TORCH_NPU_PY) -m pip install -q --no-build-isolation --no-deps ./bridges/torch_npu
	touch $@

# Runs every test binary (the tests find the tools through DDPC_BIN) and
# prints one closing line for all of them.
# In a sanitizer build, programs not built with the sanitizers that load
# ddpc's code (Python importing ddpc_torch) need their runtimes preloaded.
SAN_PRELOAD = $(if $(findstring address,$(SAN)),$(shell $(CC) -print-file-name=libasan.so)) \
  $(if $(findstring undefined,$(SAN)),$(shell $(CC) -print-file-name=libubsan.so)) \
  $(if $(findstring thread,$(SAN)),$(shell $(CC) -print-file-name=libtsan.so))
test: check-layers all torch torch2 torch-npu
	DDPC_BIN=$(abspath $(BUILD)/bin) DDPC_TEST_PRELOAD="$(strip $(SAN_PRELOAD))" DDPC_TEST_LEAN=$(LEAN) \
	  DDPC_TEST_TORCH2_PY=$$([ -f $(TORCH2_STAMP) ] && echo $(abspath $(TORCH2_PY))) \
	  DDPC_TEST_TORCH_NPU_PY=$$([ -f $(TORCH_NPU_STAMP) ] && echo $(abspath $(TORCH_NPU_PY))) \
	  scripts/run-tests.sh $(TEST_BIN) -- $(T)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer alone (CI
# runs this one, with LEAN=1).
check-asan:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(MAKE) SAN=address,undefined test

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer (leaks
# included), then under ThreadSanitizer; any report fails the run. OpenBLAS
# runs one thread under ThreadSanitizer: its own threads are not instrumented,
# so the waits that order their writes before sgemm returns are invisible to
# it (a conv2d reading what an OpenBLAS thread had zeroed was reported).
check-san: check-asan
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" OPENBLAS_NUM_THREADS=1 $(MAKE) SAN=thread test

# The suite under valgrind's memcheck: the test binaries and every program
# they start (ddpc-run, ddpc-train, the example; not python3, which only the
# comparisons with PyTorch run), the harness's deadlines times VG_SLOW. Any
# memcheck error fails the test it happens in. Leaks are checked where
# LeakSanitizer checks them, where a test or a rank ends cleanly (harness.c);
# the exit-time check is off, since a process forked beside a running thread
# (the store tests' clients) would find that thread's memory lost. VG_JOBS
# test binaries run at once. --vgdb=no: a process the tests kill on purpose
# would leave its gdbserver FIFOs in /tmp.
VG_SLOW ?= 30
VG_JOBS ?= 2
VALGRIND ?= valgrind -q --vgdb=no --error-exitcode=99 --leak-check=no --show-leak-kinds=definite \
  --errors-for-leak-kinds=definite --trace-children=yes --trace-children-skip=*python*
check-valgrind: all
	DDPC_TEST_SLOW=$(VG_SLOW) DDPC_TEST_WRAPPER="$(VALGRIND)" DDPC_BIN=$(abspath $(BUILD)/bin) \
	  scripts/run-tests.sh -j $(VG_JOBS) $(TEST_BIN) -- $(T)

# Coverage-guided fuzzing (clang's libFuzzer, with AddressSanitizer and
# UndefinedBehaviorSanitizer) of the parsers that read what others wrote:
# IDX files, safetensors checkpoints, the store's wire protocol, HCCL's rank
# tables, the job token's handshake. Each target in tests/fuzz/ runs FUZZ_SECS seconds from
# tests/fuzz/corpus/NAME; new inputs go to build/fuzz/corpus/NAME, and a
# fault's input to build/fuzz/crash-* (add it to the corpus once fixed:
# `make test` replays the corpus).
FUZZ_TARGETS := idx ckpt store ranktable auth
FUZZ_SECS ?= 60
FUZZ_CC ?= clang
FUZZ_SAN := address,undefined
fuzz:
	$(MAKE) BUILD=build/fuzz CC=$(FUZZ_CC) SAN=fuzzer-no-link,$(FUZZ_SAN) build/fuzz/libddpc_train.a build/fuzz/libddpc.a
	@set -e; for t in $(FUZZ_TARGETS); do \
	  $(FUZZ_CC) $(filter-out -fsanitize=%,$(CFLAGS)) -fsanitize=fuzzer,$(FUZZ_SAN) -DDDPC_FUZZ_ENTRY_$$t \
	    tests/fuzz/fuzz_$$t.c tests/fuzz/fuzz_util.c build/fuzz/libddpc_train.a build/fuzz/libddpc.a $(LDLIBS) -o build/fuzz/fuzz_$$t; \
	done
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus/$$t; echo "== fuzz_$$t, $(FUZZ_SECS) s"; \
	  if (cd build/fuzz && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ./fuzz_$$t \
	      -max_total_time=$(FUZZ_SECS) -max_len=65536 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
	      corpus/$$t ../../tests/fuzz/corpus/$$t > fuzz_$$t.log 2>&1); \
	  then grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss)' build/fuzz/fuzz_$$t.log; \
	  else tail -n 60 build/fuzz/fuzz_$$t.log; echo "fuzz_$$t found a fault: build/fuzz/fuzz_$$t.log"; exit 1; fi; \
	done

# The layout: clang-format (Debian's clang-format, 14) with .clang-format
# over every C and C++ file in git; format-check fails on any difference.
CLANG_FORMAT ?= clang-format
FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cpp' 2>/dev/null)
format:
	$(CLANG_FORMAT) -i $(FORMAT_FILES)
format-check:
	@$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES) && echo "format ok"

# The generated parts of the docs (docs/ENVIRONMENT.md's table, the
# README's example); tests/unit/test_docs.c fails when they are stale.
docs: $(BUILD)/bin/ddpc-run
	sh scripts/docs.sh $(BUILD)/bin

# The layer rule (scripts/check-layers.sh states it): no file includes a
# header of a layer above its own; `make test` runs it first.
check-layers:
	@sh scripts/check-layers.sh

headers-check:
	@for h in $(HEADERS); do echo "#include \"$${h#include/}\"" | \
	  $(CC) -std=c11 -Wall -Wextra -Werror -Iinclude -x c -fsyntax-only - || exit 1; done; echo "headers ok"

install: lib tools
	install -d $(DESTDIR)$(PREFIX)/include/ddpc $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(HEADERS) $(DESTDIR)$(PREFIX)/include/ddpc/
	install -m 644 $(BUILD)/libddpc.a $(BUILD)/libddpc_train.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libddpc.so $(BUILD)/libddpc_train.so $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBS@|$(CORE_LIBS)|' ddpc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ddpc.pc
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBS@|$(PKG_LIBS) -lm -lpthread|' ddpc_train.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ddpc_train.pc
	@if [ -f $(TORCH_PKG)/_C.so ]; then d=$(DESTDIR)$(TORCH_SITE)/ddpc_torch; install -d $$d && \
	  install -m 644 $(TORCH_PKG)/__init__.py $(TORCH_PKG)/_built.py $$d/ && install -m 755 $(TORCH_PKG)/_C.so $$d/ && \
	  echo "installed the torch backend: $$d"; else echo "not installing ddpc_torch: not built (make torch)"; fi

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/ddpc $(DESTDIR)$(PREFIX)/lib/libddpc.* $(DESTDIR)$(PREFIX)/lib/libddpc_train.* \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig/ddpc.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/ddpc_train.pc $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(TOOLS))) \
	  $(DESTDIR)$(TORCH_SITE)/ddpc_torch

clean:
	rm -rf build

# keep the objects of tests and tools (make would delete them as intermediates,
# and rebuild them all after any library change)
.SECONDARY:

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/obj/bench/soak.d $(RUN_OBJ:.o=.d) $(patsubst %.c,$(BUILD)/obj/%.d,$(TOOL_SRC) $(EX_SRC))

# ---------------------------------------------------------------- HCCL on CPUs
# bridges/hccl: HCCL's C API (include/hccl/) as libhccl and the host-side
# subset of Ascend's runtime (include/acl/) as libascendcl (libacl_rt, a
# linker script, names it too) and its profiling calls as libmsprofiler,
# CANN's library names, over libddpc's public API; programs written for HCCL
# build against these headers unchanged and link with -lhccl -lascendcl (or
# -lhccl -lacl_rt -lmsprofiler, as HCCL Test does). tests/hccl holds
# such programs (built into $(BUILD)/bin; the _mpi one with mpicc when
# there is one), run by tests/dist/test_hccl.c; examples/hccl HCCL's
# benchmark. `make hccl` builds all of it.
HCCL_SRC   := $(sort $(wildcard bridges/hccl/hccl_*.c))
HCCL_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(HCCL_SRC))
ACL_OBJ    := $(BUILD)/obj/bridges/hccl/acl_rt.o $(BUILD)/obj/bridges/hccl/acl_event.o \
              $(BUILD)/obj/bridges/hccl/acl_mem.o
PROF_OBJ   := $(BUILD)/obj/bridges/hccl/acl_prof.o
HCCL_HDRS  := $(wildcard include/hccl/*.h)
ACL_HDRS   := $(wildcard include/acl/*.h)
HCCL_LIBS  := $(BUILD)/libhccl.so $(BUILD)/libhccl.a $(BUILD)/libascendcl.so $(BUILD)/libascendcl.a \
              $(BUILD)/libacl_rt.so $(BUILD)/libmsprofiler.so $(BUILD)/libmsprofiler.a
HCCL_PROG_DEPS = $(HCCL_HDRS) $(ACL_HDRS) examples/hccl/hccl_values.h $(BUILD)/libhccl.so
HCCL_PROGS := $(patsubst tests/hccl/%.c,$(BUILD)/bin/%,$(sort $(wildcard tests/hccl/*.c)))
MPICC      ?= $(shell command -v mpicc 2>/dev/null)
HCCL_MPI   := $(if $(MPICC),$(BUILD)/bin/hccl_check_mpi)
HCCL_SAN   := $(if $(SAN),-fsanitize=$(SAN) -fno-omit-frame-pointer)
# how HCCL programs build: HCCL + ACL only; the rpath finds the libraries
# one folder up from bin/ (-rpath-link: libhccl's own, $(BUILD)'s libddpc)
HCCL_PROG_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) -g -Wall -Wextra -Wno-unused-parameter $(HCCL_SAN) -Iinclude -pthread
HCCL_PROG_LIBS   = -L$(BUILD) -Wl,-rpath-link,$(BUILD) -lhccl -lascendcl -lm

.PHONY: hccl hccl-lib install-hccl
all: hccl
lib: hccl-lib
install: install-hccl
hccl-lib: $(HCCL_LIBS)
hccl: hccl-lib $(HCCL_PROGS) $(HCCL_MPI)

$(BUILD)/libascendcl.so: $(ACL_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -o $@ $^ -lpthread
$(BUILD)/libascendcl.a: $(ACL_OBJ)
	rm -f $@ && ar rcs $@ $^
# CANN's runtime name: a linker script, so -lacl_rt links libascendcl itself
# (one runtime, one set of streams, however a program names it)
$(BUILD)/libacl_rt.so:
	@mkdir -p $(BUILD)
	printf '/* ddpc: libacl_rt, the name CANN gives its runtime, is libascendcl */\nINPUT(-lascendcl)\n' > $@
# the profiling calls; libascendcl beside it ($ORIGIN) keeps their errors' texts
$(BUILD)/libmsprofiler.so: $(PROF_OBJ) $(BUILD)/libascendcl.so
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -o $@ $(PROF_OBJ) -L$(BUILD) -lascendcl \
	  -Wl,-rpath,'$$ORIGIN' -lpthread
$(BUILD)/libmsprofiler.a: $(PROF_OBJ)
	rm -f $@ && ar rcs $@ $^
# libhccl.so finds libddpc.so and libascendcl.so beside itself ($ORIGIN)
$(BUILD)/libhccl.so: $(HCCL_OBJ) $(BUILD)/libddpc.so $(BUILD)/libascendcl.so
	$(CC) -shared $(LDFLAGS) -Wl,--no-undefined -o $@ $(HCCL_OBJ) -L$(BUILD) -lddpc -lascendcl \
	  -Wl,-rpath,'$$ORIGIN' -lpthread
$(BUILD)/libhccl.a: $(HCCL_OBJ)
	rm -f $@ && ar rcs $@ $^

# the test programs: HCCL + ACL only, linked as a user would (-lhccl -lascendcl)
$(BUILD)/bin/%: tests/hccl/%.c $(HCCL_PROG_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(HCCL_PROG_CFLAGS) -o $@ $< $(HCCL_PROG_LIBS) -Wl,-rpath,'$$ORIGIN/..'
# HCCL Test's calls, linked as HCCL Test links (-lhccl -lacl_rt -lmsprofiler)
$(BUILD)/bin/hccl_test_calls: tests/hccl/hccl_test_calls.c $(HCCL_PROG_DEPS) $(BUILD)/libacl_rt.so $(BUILD)/libmsprofiler.so
	@mkdir -p $(dir $@)
	$(CC) $(HCCL_PROG_CFLAGS) -o $@ $< -L$(BUILD) -Wl,-rpath-link,$(BUILD) -lhccl -lacl_rt -lmsprofiler -lm \
	  -Wl,-rpath,'$$ORIGIN/..'
$(BUILD)/bin/hccl_check_mpi: tests/hccl/hccl_check.c $(HCCL_PROG_DEPS)
	@mkdir -p $(dir $@)
	$(MPICC) $(HCCL_PROG_CFLAGS) -DHCCL_CHECK_MPI -o $@ $< $(HCCL_PROG_LIBS) -Wl,-rpath,'$$ORIGIN/..'

# HCCL's benchmark (hccl_test's command line and table): one program, named
# after each operation as HCCL's are; run by ddpc-run from $(BUILD)/bin, by
# mpirun from $(BUILD)/hccl_test/bin (HCCL's layout) when there is an mpicc
HCCL_BENCH_OPS := all_reduce all_gather broadcast reduce reduce_scatter alltoall scatter
HCCL_BENCH     := $(BUILD)/bin/hccl_test $(if $(MPICC),$(BUILD)/hccl_test/bin/hccl_test)
hccl: $(HCCL_BENCH)
$(BUILD)/bin/hccl_test: examples/hccl/hccl_test.c $(HCCL_PROG_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(HCCL_PROG_CFLAGS) -o $@ $< $(HCCL_PROG_LIBS) -Wl,-rpath,'$$ORIGIN/..'
	cd $(dir $@) && for op in $(HCCL_BENCH_OPS); do ln -sf hccl_test $${op}_test; done
$(BUILD)/hccl_test/bin/hccl_test: examples/hccl/hccl_test.c $(HCCL_PROG_DEPS)
	@mkdir -p $(dir $@)
	$(MPICC) $(HCCL_PROG_CFLAGS) -DHCCL_TEST_MPI -o $@ $< $(HCCL_PROG_LIBS) -Wl,-rpath,'$$ORIGIN/../..'
	cd $(dir $@) && for op in $(HCCL_BENCH_OPS); do ln -sf hccl_test $${op}_test; done

install-hccl: hccl-lib
	install -d $(DESTDIR)$(PREFIX)/include/hccl $(DESTDIR)$(PREFIX)/include/acl/error_codes $(DESTDIR)$(PREFIX)/lib
	install -m 644 $(HCCL_HDRS) $(DESTDIR)$(PREFIX)/include/hccl/
	install -m 644 $(ACL_HDRS) $(DESTDIR)$(PREFIX)/include/acl/
	install -m 644 include/acl/error_codes/*.h $(DESTDIR)$(PREFIX)/include/acl/error_codes/
	install -m 644 $(BUILD)/libhccl.a $(BUILD)/libascendcl.a $(BUILD)/libmsprofiler.a $(BUILD)/libacl_rt.so $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libhccl.so $(BUILD)/libascendcl.so $(BUILD)/libmsprofiler.so $(DESTDIR)$(PREFIX)/lib/
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|' -e "s|@VERSION@|$$(sed -n 's/^#define DDPC_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' \
	  include/ddpc/ddpc.h | paste -sd.)|" bridges/hccl/hccl.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hccl.pc

.PHONY: uninstall-hccl
uninstall: uninstall-hccl
uninstall-hccl:
	rm -rf $(DESTDIR)$(PREFIX)/include/hccl $(DESTDIR)$(PREFIX)/include/acl \
	  $(DESTDIR)$(PREFIX)/lib/libhccl.* $(DESTDIR)$(PREFIX)/lib/libascendcl.* $(DESTDIR)$(PREFIX)/lib/libacl_rt.so \
	  $(DESTDIR)$(PREFIX)/lib/libmsprofiler.* $(DESTDIR)$(PREFIX)/lib/pkgconfig/hccl.pc

-include $(HCCL_OBJ:.o=.d) $(ACL_OBJ:.o=.d) $(PROF_OBJ:.o=.d)
# ------------------------------------------------------------ end HCCL on CPUs
