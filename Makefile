# The two commands of the README: `make demo` and `make test`. Everything else is a convenience.
PRESET ?= release
JOBS   ?= $(shell nproc)
BUILD  := build/$(PRESET)
MERIDIAN := $(BUILD)/sites/meridian

.PHONY: all setup configure build test demo bench test-asan clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt: | setup
	cmake --preset $(PRESET)

configure: $(BUILD)/CMakeCache.txt

build: setup configure
	cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	ctest --preset $(PRESET) -j $(JOBS)

demo: build
	$(MERIDIAN) launch configs/demo.toml

bench: build
	BUILD_DIR=$(BUILD) bash bench/run.sh

test-asan:
	$(MAKE) test PRESET=asan

clean:
	rm -rf build
