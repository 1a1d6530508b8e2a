# tern — one GNU Makefile for the library, the command, the tests and the cross build.
#
#   make            libtern.a and the tern command (build/)
#   make test       install what is missing, fetch the models, build, run every test
#   make chat       install what building needs, fetch the chat model, build, start a chat
#   make asan       the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make arm64      cross-build for aarch64 (build-arm64/)
#   make install PREFIX=/usr/local
#
# Sources are found by wildcard: a new .c file in a module folder is part of the library.
# Files named *_avx2.c, *_avx512.c, *_amx.c, *_neon.c, *_neon_dotprod.c, *_neon_i8mm.c get their ISA's flags only and
# are compiled only for their architecture (run-time dispatch picks among them).

CC       ?= cc
AR       ?= ar
PREFIX   ?= /usr/local
BUILD    ?= build
ARCH     ?= $(shell $(CC) -dumpmachine | cut -d- -f1)

WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter
ifneq ($(CI),)
WARN     += -Werror
endif
OPT      ?= -O2 -g
CPPFLAGS += -Iinclude -I. -D_GNU_SOURCE
CFLAGS   += -std=c11 $(OPT) $(WARN) -fPIC -pthread -MMD -MP
LDLIBS   += -lm -ldl -pthread

# ---- sources ----------------------------------------------------------------------------------
MODULE_DIRS := base gguf quant kernels/cpu kernels/opencl platform text engine
ALL_LIB_SRC := $(foreach d,$(MODULE_DIRS),$(wildcard $(d)/*.c))
X86_SRC     := $(filter %_avx2.c %_avx512.c %_amx.c,$(ALL_LIB_SRC))
ARM_SRC     := $(filter %_neon.c %_neon_dotprod.c %_neon_i8mm.c,$(ALL_LIB_SRC))
ifeq ($(ARCH),x86_64)
LIB_SRC     := $(filter-out $(ARM_SRC),$(ALL_LIB_SRC))
else ifeq ($(ARCH),aarch64)
LIB_SRC     := $(filter-out $(X86_SRC),$(ALL_LIB_SRC))
else
LIB_SRC     := $(filter-out $(X86_SRC) $(ARM_SRC),$(ALL_LIB_SRC))
endif
GEN_SRC     :=
include text/gen.mk
include kernels/opencl/gen.mk

LIB_OBJ     := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC) $(GEN_SRC))
TOOL_SRC    := $(wildcard tools/*.c)
TOOL_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(TOOL_SRC))
# Tests map the TERN_* variables onto parameters as the command does (tools/env_params.c), so that
# TERN_ISA=... or TERN_OPENCL_OPTIONS=... before a test binary means what it means before tern.
TEST_SUPPORT_SRC := $(wildcard tests/support/*.c) tools/env_params.c
TEST_SUPPORT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SUPPORT_SRC))
TEST_SRC    := $(wildcard tests/test_*.c)
TEST_BIN    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
# Measurement programs (tests/bench_*.c): built by make check so they keep up with the library,
# never run by it.
BENCH_BIN   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/bench_*.c))

LIB         := $(BUILD)/libtern.a
TERN        := $(BUILD)/tern

# Per-ISA flags: only the files of that ISA are built with them.
$(BUILD)/%_avx2.o:         ISA_FLAGS := -mavx2 -mfma -mf16c
$(BUILD)/%_avx512.o:       ISA_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni
X86_AMX_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512vbmi -mamx-tile -mamx-int8
$(BUILD)/%_amx.o:          ISA_FLAGS := $(X86_AMX_FLAGS)
$(BUILD)/%_neon_dotprod.o: ISA_FLAGS := -march=armv8.2-a+dotprod+fp16
# i8mm on the v8.2 base, not -march=armv8.6-a, which promises more: Neoverse V1 has i8mm on ARMv8.4-A
$(BUILD)/%_neon_i8mm.o:    ISA_FLAGS := -march=armv8.2-a+dotprod+fp16+i8mm
# quant/ reference code must match the reference quantizer bit for bit: no FMA contraction;
# -fno-math-errno lets lrintf be one instruction (2x faster quantize, same bytes).
$(BUILD)/quant/%.o:        ISA_FLAGS := -ffp-contract=off -fno-math-errno

# The commit a binary was built from, for bench records (empty outside a git checkout).
GIT_COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
$(BUILD)/tools/sysdesc.o: CPPFLAGS += -DTERN_GIT_COMMIT='"$(GIT_COMMIT)"'
$(BUILD)/tools/sysdesc.o: $(wildcard .git/HEAD .git/index)

.PHONY: all lib tern test check asan arm64 install chat setup deps models clean format fuzz
all: $(LIB) $(TERN)
lib: $(LIB)
tern: $(TERN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_FLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(TERN): $(TOOL_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_SUPPORT_OBJ) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TEST_EXTRA_OBJ) $(TEST_SUPPORT_OBJ) $(LIB) $(LDLIBS) -lcmocka

# test_kernels also runs the amx table's code where the CPU has no AMX: matmul_amx.c built a second
# time with the tile instructions modelled in C (tests/support/amx_emulation.h), x86-64 only.
ifeq ($(ARCH),x86_64)
AMX_EMULATED_OBJ := $(BUILD)/tests/amx_emulated.o
$(AMX_EMULATED_OBJ): kernels/cpu/matmul_amx.c tests/support/amx_emulation.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(patsubst -mamx%,,$(X86_AMX_FLAGS)) -include tests/support/amx_emulation.h \
	  -Dtern_cpu_kernels_fill_amx=tern_cpu_kernels_fill_amx_emulated -c $< -o $@
$(BUILD)/tests/test_kernels: TEST_EXTRA_OBJ := $(AMX_EMULATED_OBJ)
$(BUILD)/tests/test_kernels: $(AMX_EMULATED_OBJ)
$(BUILD)/tests/test_kernels.o: CPPFLAGS += -DTERN_TEST_AMX_EMULATED
endif

# ---- set-up: packages and models (tools/setup.sh says what and why) --------------------------
deps:
	@bash tools/setup.sh deps
models:
	@bash tools/setup.sh models
setup: deps models

# ---- tests ------------------------------------------------------------------------------------
# Every tests/test_*.c is one cmocka executable; tests/run.sh runs them all plus the shell tests.
check: all $(TEST_BIN) $(BENCH_BIN)
	@BUILD=$(BUILD) bash tests/run.sh

# CI's command: set-up, every test, the suite again under ASan + UBSan, then each fuzz harness
# for a short bounded time.
# The builds use every core (JOBS); the tests run one program at a time.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test: setup
	@$(MAKE) --no-print-directory -j$(JOBS) check
	@$(MAKE) --no-print-directory -j$(JOBS) asan
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS)

# allocator_may_return_null: the tests check that impossible allocations fail cleanly.
asan:
	@ASAN_OPTIONS=allocator_may_return_null=1 $(MAKE) --no-print-directory check BUILD=build-asan CC=clang \
	  OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  LDFLAGS="-fsanitize=address,undefined"

arm64:
	@$(MAKE) --no-print-directory all $(patsubst $(BUILD)/%,build-arm64/%,$(TEST_BIN)) \
	  BUILD=build-arm64 CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar ARCH=aarch64

# ---- fuzzing: every tests/fuzz/fuzz_*.c under libFuzzer for FUZZ_SECONDS each ---------------------
FUZZ_SECONDS ?= 30
TEST_FUZZ_SECONDS ?= 20
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh

# ---- valgrind: memcheck on tern info and tern run with the tiny model (no leak, no bad access) ----
.PHONY: valgrind
valgrind: all
	@BUILD=$(BUILD) bash tests/sh/valgrind.sh

# ---- chat: the README's first command ---------------------------------------------------------
# Only what building and chatting need: the build's packages and the chat model (make test sets up the rest).
chat:
	@bash tools/setup.sh deps chat
	@bash tools/setup.sh models chat
	@$(MAKE) --no-print-directory all
	@bash tools/setup.sh chat

# ---- install ----------------------------------------------------------------------------------
install: $(LIB) $(TERN)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(LIB) $(DESTDIR)$(PREFIX)/lib/libtern.a
	install -m 644 include/tern.h $(DESTDIR)$(PREFIX)/include/tern.h
	install -m 755 $(TERN) $(DESTDIR)$(PREFIX)/bin/tern
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/^#define TERN_VERSION "\(.*\)"/\1/p' include/tern.h)|g' \
	  tools/tern.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tern.pc

format:
	clang-format -i $(ALL_LIB_SRC) $(TOOL_SRC) $(TEST_SRC) $(wildcard */*.h */*/*.h include/*.h)

clean:
	rm -rf build build-asan build-arm64 build-fuzz build-tsan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
