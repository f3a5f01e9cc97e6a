# Thin wrapper over CMake: `make`, `make test`, `make python`, `make demo`, `make bench`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
CLANG ?= clang
# Seconds each fuzz target runs in `make test`, after replaying its committed corpus.
FUZZ_SECONDS ?= 60
# Warnings are errors for `make test` (and so in CI), not for whoever just builds.
WERROR ?= OFF
test: WERROR = ON

# ThreadSanitizer and the fuzz targets need clang; TSan also needs LLVM's OpenMP runtime
# (libomp: libgomp is not built for TSan, which then reports races inside it). Each probe
# prints why it is skipped, or nothing when the build can go ahead.
TSAN_SKIP = $(shell sh cmake/probe-clang.sh $(CLANG) tsan)
FUZZ_SKIP = $(shell sh cmake/probe-clang.sh $(CLANG) fuzz)

.PHONY: all build python asan tsan fuzz test demo bench clean

all: build

build:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build -j $(JOBS)

# What the Python package (python/sgrad, ctypes) needs: build/libsgrad.so, which it finds
# by itself; nothing is compiled for Python.
python:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build -j $(JOBS) --target sgrad_shared

# ASan + UBSan over everything, programs included (gcc or the default compiler).
asan:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSGRAD_SANITIZE=ON -DSGRAD_BUILD_TOOLS=ON -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build-asan -j $(JOBS)

# TSan (clang + libomp) over the C tests; see cmake/tsan.supp for the Hogwild exception.
tsan:
ifeq ($(TSAN_SKIP),)
	$(CMAKE) -S . -B build-tsan -DCMAKE_C_COMPILER=$(CLANG) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSGRAD_TSAN=ON -DSGRAD_BUILD_TOOLS=OFF -DSGRAD_INSTALL=OFF -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build-tsan -j $(JOBS)
else
	@echo "SKIPPED tsan build: $(TSAN_SKIP)"
endif

# libFuzzer targets of fuzz/ (single-threaded library, ASan + UBSan).
fuzz:
ifeq ($(FUZZ_SKIP),)
	$(CMAKE) -S . -B build-fuzz -DCMAKE_C_COMPILER=$(CLANG) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSGRAD_FUZZ=ON -DSGRAD_FUZZ_SECONDS=$(FUZZ_SECONDS) -DSGRAD_OPENMP=OFF -DSGRAD_BUILD_TESTS=OFF -DSGRAD_BUILD_TOOLS=OFF -DSGRAD_INSTALL=OFF -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build-fuzz -j $(JOBS)
else
	@echo "SKIPPED fuzz build: $(FUZZ_SKIP)"
endif

# Unit tests in the normal build, again under ASan + UBSan, then under TSan, then the fuzz
# targets (the last two skipped with a message where clang or libomp is missing).
test: build asan tsan fuzz
	cd build && ctest --output-on-failure -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)
ifeq ($(TSAN_SKIP),)
	cd build-tsan && ctest --output-on-failure -j $(JOBS)
else
	@echo "SKIPPED ThreadSanitizer tests: $(TSAN_SKIP)"
endif
ifeq ($(FUZZ_SKIP),)
	cd build-fuzz && ctest -V -j $(JOBS)
else
	@echo "SKIPPED fuzz targets: $(FUZZ_SKIP)"
endif

demo: build
	./tools/demo.sh build

bench: build
	./build/sgrad-bench all

clean:
	rm -rf build build-asan build-tsan build-fuzz
