# TorchNeuron — the two commands a user needs are `make demo` and `make test`;
# both set everything up on a fresh machine (venv, pinned torch, build).
PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
DEPS   := $(VENV)/.deps-stamp
JOBS   ?= $(shell nproc)
export CMAKE_BUILD_PARALLEL_LEVEL := $(JOBS)
# ccache (used when installed) keys on paths relative to the checkout, so
# clones and worktrees share hits.
export CCACHE_BASEDIR ?= $(CURDIR)

.PHONY: all build test test-avx2 ctest pytest sanitize conformance demo bench profile chromium clean models-doc test-models-compile

all: build

$(VPY):
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 is the CPU wheel this machine's pip finds on disk.
$(DEPS): requirements-dev.txt | $(VPY)
	$(VPY) -m pip install -q torch==2.13.0 -r requirements-dev.txt
	touch $@

# Editable install with a persistent CMake build dir (build/py): reruns are
# incremental.  No build isolation, so pip never fetches another torch.
build: $(DEPS)
	$(VPY) -m pip install -q --no-build-isolation --no-deps -e .

# The C layers alone, no PyTorch: build/c (ninja comes from the venv).
CMAKE_C := cmake -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV))/bin/ninja -DTORCHNEURON_PYTHON=OFF -DTORCHNEURON_C_TESTS=ON
ctest: $(DEPS)
	$(CMAKE_C) -S . -B build/c -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build/c
	tests/c/run_all.sh build/c

# The same C tests under AddressSanitizer + UndefinedBehaviorSanitizer.
sanitize: $(DEPS)
	$(CMAKE_C) -S . -B build/sanitize -DTORCHNEURON_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build/sanitize
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  tests/c/run_all.sh build/sanitize

# Headless chromium for the profiler report test (idempotent, quick when present).
chromium:
	scripts/install-chromium.sh

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
pytest: build chromium
	@$(VPY) -m pytest -q tests; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

test: ctest pytest

# `make test` as an AVX2-only x86-64 CPU runs it, on any newer one: torch's
# own CPU kernels (ATEN_CPU_CAPABILITY), oneDNN's (its convolutions and
# 16-bit paths), MKL's (its BLAS and LAPACK) and ours capped at AVX2; the C
# tests run the portable and AVX2 kernels only.  The CPU reference's 16-bit
# results differ there (tests/conformance/reference.py says where and why).
AVX2_ENV := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 TORCHNEURON_ISA=avx2
test-avx2: build
	$(AVX2_ENV) $(VPY) -c "import torch; \
	  assert torch.backends.cpu.get_cpu_capability() == 'AVX2', 'ATen not capped'; \
	  assert not torch.ops.mkldnn._is_mkldnn_bf16_supported(), 'oneDNN not capped'"
	$(AVX2_ENV) $(MAKE) --no-print-directory test

# All of op_db on neuron vs cpu (long): results in build/conformance,
# the table in docs/ops.md.  `make test` runs a slice of it.
conformance: build
	$(VPY) tests/conformance/run.py --write-docs

demo: build
	$(VPY) examples/demo.py

# Neuron vs torch CPU, side by side in one run; BENCH_ARGS=--quick for a
# short pass of the dense-compute ones (issue 4's tables).
BENCH_ARGS ?=
bench: build
	$(VPY) bench/overhead.py
	$(VPY) bench/elementwise.py
	$(VPY) bench/peak.py
	for b in gemm conv attention norm loss optim train compile nki adaptive; do $(VPY) bench/$$b.py $(BENCH_ARGS) || exit 1; done

# Every model of tests/models under torch.compile vs CPU eager (cold Inductor
# cache; `make test` runs one model per family: test_models_compile.py says why).
test-models-compile: build
	MODELS_COMPILE=all $(VPY) -m pytest -q tests/models/test_models_compile.py

# The transformers models of tests/models on neuron vs cpu: docs/models.md.
models-doc: build
	$(VPY) -m tests.models.report

# Profile a few training steps of a small GPT (torch.profiler with the neuron
# device activity), write build/profile/trace.json and the HTML report, and
# print the profiling overhead.
profile: build
	$(VPY) bench/profiler.py --trace build/profile/trace.json --report build/profile/report.html

clean:
	rm -rf build
