# Thin wrapper over CMake: `make`, `make test`, `make demo`, `make bench`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
# Warnings are errors for `make test` (and so in CI), not for whoever just builds.
WERROR ?= OFF
test: WERROR = ON

.PHONY: all build asan test demo bench clean

all: build

build:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build -j $(JOBS)

asan:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSGRAD_SANITIZE=ON -DSGRAD_BUILD_TOOLS=OFF -DSGRAD_WERROR=$(WERROR)
	$(CMAKE) --build build-asan -j $(JOBS)

# Unit tests in the normal build, then again under ASan + UBSan.
test: build asan
	cd build && ctest --output-on-failure -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

demo: build
	./tools/demo.sh build

bench: build
	./build/sgrad-bench all

clean:
	rm -rf build build-asan
