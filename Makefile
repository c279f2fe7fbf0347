# tern build. Sources are discovered by directory: every src/**/*.c goes into
# libtern.a except src/cli (the tern binary); every tests/unit/test_*.c is one test
# program. Files named *_avx2.c / *_avx512.c are compiled for that ISA only and are
# reached through run-time CPU dispatch, so the binary runs on any x86-64.
# Static files the server sends (src/server/web/*.html) are turned into C
# arrays by scripts/embed.sh and linked into libtern.a.
#
# The CUDA backend (src/backend/cuda/*.cu, sm_90) is built into
# libtern_cuda.a when nvcc is found (on PATH or /usr/local/cuda/bin; CUDA=0
# turns it off), together with the op harness (tests/ops -> B/ops_test) and
# the device benchmark (bench/cuda -> B/bench_cuda). Without nvcc,
# libtern_cuda.a holds src/backend/cuda/none.c, whose tern_cuda_open says so.
#
#   make            release build into build/
#   make SAN=1      ASan+UBSan build into build-san/
#   make test       build and run the unit tests (prints "N passed, N failed")
#   make fuzz       libFuzzer targets (tests/fuzz/fuzz_*.c, clang, ASan+UBSan) into build-fuzz/fuzz/

CC      ?= gcc
SAN     ?= 0
FUZZ    ?= 0
ifeq ($(FUZZ),1)
  CC      := clang
  B       := build-fuzz
  OPT     := -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDSAN   := -fsanitize=fuzzer,address,undefined
else ifeq ($(SAN),1)
  B       := build-san
  OPT     := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDSAN   := -fsanitize=address,undefined
else
  B       ?= build
  OPT     := -O2 -g
  LDSAN   :=
endif

WARN    := -Wall -Wextra -Werror -Wno-unused-parameter
ifneq ($(FUZZ),1)
  WARN  += -Wno-format-truncation
endif
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) -Iinclude -Isrc -pthread -fPIC
LIBS    := -lm -lpthread -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd
# Fuzz targets link the Debian libraries statically, so that the binaries run
# on any x86-64 Linux machine (for long runs elsewhere).
FUZZ_LIBS := -Wl,-Bstatic -ljansson -lpcre2-8 -lutf8proc -Wl,-Bdynamic -lm -lpthread

ISA_AVX2   := -mavx2 -mfma -mf16c
ISA_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16

NVCC    ?= $(shell command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
CUDA    ?= $(if $(NVCC),1,0)
ifeq ($(CUDA),1)
  CUDA_HOME   := $(patsubst %/bin/,%,$(dir $(NVCC)))
  NVCCFLAGS   := -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -lineinfo -Iinclude -Isrc -Xcompiler -fPIC,-Wall,-Wno-unused-parameter,-Wno-format-truncation
  NVCCFLAGS   += $(NVCC_EXTRA)
  CU_SRC      := $(sort $(wildcard src/backend/cuda/*.cu))
  # Device code takes no sanitizer flags: the ASan/UBSan build links the
  # release build's CUDA objects instead of compiling them a second time.
  CU_B        := $(if $(filter 1,$(SAN)),build,$(B))
  CU_OBJ      := $(CU_SRC:%.cu=$(CU_B)/obj/%.o)
  CUDA_LIBS   := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -Wl,--as-needed -lcublas -Wl,--no-as-needed -lcudart_static -ldl -lrt -lstdc++
  OPS_SRC     := $(sort $(wildcard tests/ops/*.c))
  BENCHCU_SRC := $(sort $(wildcard bench/cuda/*.c))
  CUDA_BINS   := $(B)/ops_test $(B)/bench_cuda
else
  CU_OBJ      := $(B)/obj/src/backend/cuda/none.o
  CUDA_LIBS   :=
  CUDA_BINS   :=
endif

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' -not -path 'src/backend/cuda/*' | sort)
# The model's CUDA backend (src/model/backend_cuda*.c) calls the CUDA ops;
# without them its _none file refuses a GPU.
ifeq ($(CUDA),1)
  LIB_SRC := $(filter-out src/model/backend_cuda_none.c,$(LIB_SRC))
else
  LIB_SRC := $(filter-out src/model/backend_cuda.c src/model/backend_cuda_chain.c src/model/backend_cuda_load.c src/model/backend_cuda_kv.c src/model/backend_cuda_exec.c,$(LIB_SRC))
endif
CLI_SRC  := $(shell find src/cli -name '*.c' | sort)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_HELPER_SRC := $(filter-out $(TEST_SRC),$(wildcard tests/unit/*.c))

ifeq ($(FUZZ),1)
  # The fuzz targets reach the loaders, the text layer and the request parser only.
  LIB_SRC := $(filter src/core/% src/io/% src/text/% src/server/request.c src/server/anthropic.c \
               src/server/json_out.c src/server/reply.c src/engine/sampler%.c src/engine/prng.c \
               src/model/gguf_tok.c,$(LIB_SRC))
endif
LIB_OBJ  := $(LIB_SRC:%.c=$(B)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(B)/obj/%.o)
TEST_HELPER_OBJ := $(TEST_HELPER_SRC:%.c=$(B)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(B)/tests/%)
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/fuzz/%)
WEB_SRC  := $(sort $(wildcard src/server/web/*.html))
WEB_OBJ  := $(WEB_SRC:src/server/web/%.html=$(B)/obj/gen/web_%.o)

all: $(B)/tern $(TEST_BIN) $(CUDA_BINS)

# libtern holds the CUDA objects too (the model's CUDA backend calls them;
# without nvcc they are none.o), so a program links libtern alone plus
# CUDA_LIBS (tern.pc's Libs.private).
$(B)/libtern.a: $(LIB_OBJ) $(WEB_OBJ) $(CU_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR  $@"
	@rm -f $@ && ar rcs $@ $^

$(B)/libtern_cuda.a: $(CU_OBJ)
	@mkdir -p $(dir $@)
	@echo "  AR  $@"
	@rm -f $@ && ar rcs $@ $^

$(B)/tern: $(CLI_OBJ) $(B)/libtern.a $(B)/libtern_cuda.a
	@echo "  CC  $@"
	@$(CC) $(LDSAN) -pthread -o $@ $(CLI_OBJ) $(B)/libtern.a $(B)/libtern_cuda.a $(LIBS) $(CUDA_LIBS)

# The harness and the benchmark link no Debian library, so they run on a GPU
# machine that has only the CUDA toolkit.
$(B)/ops_test: $(OPS_SRC:%.c=$(B)/obj/%.o) $(B)/libtern.a $(B)/libtern_cuda.a
	@echo "  CC  $@"
	@$(CC) $(LDSAN) -pthread -o $@ $(OPS_SRC:%.c=$(B)/obj/%.o) $(B)/libtern.a $(B)/libtern_cuda.a -lm $(CUDA_LIBS)

$(B)/bench_cuda: $(BENCHCU_SRC:%.c=$(B)/obj/%.o) $(B)/libtern.a $(B)/libtern_cuda.a
	@echo "  CC  $@"
	@$(CC) $(LDSAN) -pthread -o $@ $(BENCHCU_SRC:%.c=$(B)/obj/%.o) $(B)/libtern.a $(B)/libtern_cuda.a -lm $(CUDA_LIBS)

$(CU_B)/obj/%.o: %.cu
	@mkdir -p $(dir $@)
	@echo "  NVCC $@"
	@$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<

$(B)/tests/%: tests/unit/%.c $(TEST_HELPER_OBJ) $(B)/libtern.a $(B)/libtern_cuda.a
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(CFLAGS_BASE) -Itests/unit -o $@ $< $(TEST_HELPER_OBJ) $(B)/libtern.a $(B)/libtern_cuda.a $(LIBS) $(CUDA_LIBS) $(LDSAN)

$(B)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(CFLAGS_BASE) $(ISA_AVX512) -MMD -MP -c -o $@ $<

$(B)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(CFLAGS_BASE) $(ISA_AVX2) -MMD -MP -c -o $@ $<

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(CFLAGS_BASE) -MMD -MP -c -o $@ $<

$(B)/gen/web_%.c: src/server/web/%.html scripts/embed.sh
	@mkdir -p $(dir $@)
	@echo "  GEN $@"
	@sh scripts/embed.sh srv_web_$(subst -,_,$*)_html $< > $@.tmp && mv $@.tmp $@

$(B)/obj/gen/web_%.o: $(B)/gen/web_%.c
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(CFLAGS_BASE) -c -o $@ $<

ifeq ($(FUZZ),1)
build-fuzz/fuzz/%: tests/fuzz/%.c $(B)/libtern.a
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(CFLAGS_BASE) -o $@ $< $(B)/libtern.a $(FUZZ_LIBS) $(LDSAN)

fuzz-targets: $(FUZZ_BIN)
else
fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 fuzz-targets
endif

test: all
	@scripts/run_unit_tests.sh $(B)

clean:
	rm -rf build build-san build-fuzz

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
ifeq ($(CUDA)$(SAN),11)
-include $(shell find build/obj/src/backend/cuda -name '*.d' 2>/dev/null)
endif

# The libraries a program linking build/libtern.a needs (the benchmark programs' build lines).
link-flags:
	@echo $(LIBS) $(CUDA_LIBS)

.PHONY: all test clean fuzz fuzz-targets link-flags
.SECONDARY:

# Installing libtern for other programs: the static and shared library, the
# public headers and a pkg-config file (tern.pc), plus the tern binary.
#   make install PREFIX=/usr/local [DESTDIR=...]
PREFIX  ?= /usr/local
LIBDIR  := $(PREFIX)/lib
INCDIR  := $(PREFIX)/include
TERN_VERSION := 0.1.0

$(B)/libtern.so: $(LIB_OBJ) $(WEB_OBJ) $(CU_OBJ)
	@echo "  LD  $@"
	@$(CC) $(LDSAN) -shared -pthread -Wl,-soname,libtern.so -o $@ $^ $(LIBS) $(CUDA_LIBS)

$(B)/tern.pc:
	@mkdir -p $(dir $@)
	@printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: tern\nDescription: LLM inference engine and server\nVersion: %s\nLibs: -L$${libdir} -ltern\nLibs.private: %s\nCflags: -I$${includedir}\n' \
	  "$(PREFIX)" "$(LIBDIR)" "$(INCDIR)" "$(TERN_VERSION)" "$(LIBS) $(CUDA_LIBS)" > $@

install: $(B)/tern $(B)/libtern.a $(B)/libtern.so $(B)/tern.pc
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/tern $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(B)/libtern.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(B)/libtern.so $(DESTDIR)$(LIBDIR)/
	install -m 644 include/tern/*.h $(DESTDIR)$(INCDIR)/tern/
	install -m 644 $(B)/tern.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 755 $(B)/tern $(DESTDIR)$(PREFIX)/bin/

.PHONY: install $(B)/tern.pc
