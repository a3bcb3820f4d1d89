# KAME studio: `make run` starts the app, `make test` runs the suite. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export GRADIO_ANALYTICS_ENABLED := False
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install install-ray run serve lint test test-fast bench gpu-check space space-smoke clean

# eslint for the page's JavaScript (demo/static/, kame_core/serve/page/static/), from npm at the versions package-lock.json pins
NODE_STAMP := node_modules/.installed-stamp
install: $(STAMP) $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

# optional: Ray for `--executor ray` (its tests skip without it); same torch pin, checked afterwards
RAY_STAMP := $(VENV)/.ray-stamp
install-ray: $(RAY_STAMP)

$(RAY_STAMP): $(STAMP) requirements-ray.txt constraints.txt
	$(INSTALL) -q -c constraints.txt -r requirements-ray.txt
	$(PY) -c "import torch, ray; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(RAY_STAMP)

# `pip install` done by uv (pinned in constraints.txt) with pip's own indexes, links and certificate: ~10 s where
# pip took ~95 s on a clean clone; pip itself where uv fails (tools/pip_install.py)
INSTALL := $(PY) tools/pip_install.py

# The stamp is newer than every requirements file once an install succeeded: a second run does nothing.
$(STAMP): requirements.txt requirements-nodeps.txt requirements-test.txt constraints.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	-$(PY) -m pip install -q -c constraints.txt uv  # without it (no index has it), pip does the installs below
	$(INSTALL) -q -c constraints.txt -r requirements.txt -r requirements-test.txt
	$(INSTALL) -q --no-deps -r requirements-nodeps.txt
	$(INSTALL) -q "setuptools>=68"  # the editable install's build back-end (pyproject.toml)
	$(INSTALL) -q --no-deps --no-build-isolation -e .  # kame_core and demo importable from anywhere
	$(PY) -c "import torch, moshi; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

run: install
	$(PY) app.py

# the live protocol alone (CPU stack) at ws://127.0.0.1:8998/api/chat; the app serves it too, on its own port
serve: install
	HF_HUB_OFFLINE=1 $(PY) -m kame_core.serve

# ruff and mypy (pyproject.toml's rules) over every Python file, eslint (eslint.config.js) over the JavaScript;
# then the whole suite (tests/test_static_js.py runs the JavaScript's own tests, tests/js/, with node --test)
LINTED := kame_core demo tests benchmarks spaces tools app.py
lint: install
	$(PY) -m ruff check $(LINTED)
	$(PY) -m mypy
	npx --no-install eslint demo/static kame_core/serve/page/static tests/js eslint.config.js

# The suite in two stages (tests/suite.sh, docs/testing.md): the files that hold real-time deadlines
# (tests/conftest.py's WALL_CLOCK_FILES) one at a time, and beside them, at the kernel's idle priority, every other
# test on one pytest-xdist worker per core (PARALLEL), each file's tests on one worker so a module's app or model loads
# once, and the lint. SUITE_OVERLAP=0 runs the other tests and the lint after the real-time ones.
MAKE_STARTED := $(shell date +%s)
export PARALLEL ?= -n auto --dist loadgroup
export PY SUITE_OVERLAP

# lint and the whole suite; prints the wall time of it all
test: install
	@SUITE_LINT="$(MAKE) --no-print-directory lint" bash tests/suite.sh ""; rc=$$?; \
	  echo "make test: $$(( $$(date +%s) - $(MAKE_STARTED) )) s wall (set-up, lint and the suite)"; exit $$rc

# the edit loop: everything but the tests marked slow (Whisper, SmolLM2, Piper, browser); under a minute
# (modules marked slow as a whole are not even imported)
test-fast: install
	@bash tests/suite.sh "not slow and" $(patsubst %,--ignore=%,$(shell grep -l '^pytestmark = .*slow' tests/test_*.py)); \
	  rc=$$?; echo "make test-fast: $$(( $$(date +%s) - $(MAKE_STARTED) )) s wall"; exit $$rc

bench: install
	HF_HUB_OFFLINE=1 $(PY) benchmarks/virtual_clock_throughput.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/figure_build.py

# the GPU path: CUDA-graph tests (skipped without CUDA), batched-session tests, then the per-frame benchmark
# (Moshi 7B + Mimi, random bf16 weights, batch 1..32 on CUDA; a tiny configuration on CPU), then the live server
# at that size: N protocol clients at once on one pool (random:moshi-7b, no download)
GPU_LIVE_NS ?= 1,8,16,32
gpu-check: install
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -p no:cacheprovider tests/test_neural_cuda.py tests/test_neural_batch.py tests/test_neural_pool.py tests/test_neural_choice.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/gpu_step.py
	HF_HUB_OFFLINE=1 $(PY) benchmarks/live_talk.py --weights random:moshi-7b --device cuda --ns $(GPU_LIVE_NS) --tail-s 8

# the Hugging Face Space repository, ready to push as it is (spaces/build.py; deterministic)
space: install
	$(PY) spaces/build.py --out build/space

# what the Space builder does, on this machine: fresh venv, gradio at sdk_version + requirements.txt (with
# dependencies, several GB from PyPI), start the Space, open and compare a bundled scenario, stop
space-smoke: space
	bash spaces/smoke.sh build/space

clean:
	rm -rf $(VENV) build
