# Thin wrapper over CMake: `make`, `make test`, `make demo`, `make bench`.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake

.PHONY: all build asan test demo bench clean

all: build

build:
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build build -j $(JOBS)

asan:
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSGRAD_SANITIZE=ON -DSGRAD_BUILD_TOOLS=OFF
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
