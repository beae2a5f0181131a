# Set-up is `make demo` and `make test`; both install what is missing first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0

.PHONY: install demo test test-deps lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	# torch first and pinned: an open range pulls gigabytes of CUDA wheels; the exact version takes the local CPU build
	$(BIN)/pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

DEMO_DB := demo/news.db

demo: $(STAMP)
	@mkdir -p demo
	$(BIN)/bertscope info
	$(BIN)/bertscope embed -i examples/news.txt -o $(DEMO_DB) --collection news --overwrite
	$(BIN)/bertscope collections $(DEMO_DB)
	$(BIN)/bertscope similar "a storm hits the coast" --in $(DEMO_DB) --collection news -k 5
	$(BIN)/bertscope similar "the price of food keeps rising" --in $(DEMO_DB) --collection news -k 5
	$(BIN)/bertscope anatomy "I like eating bread"

# Debian's Chromium for the explorer's browser test (Playwright drives it; no browser is downloaded)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-deps:
	command -v chromium || ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium)

test: $(STAMP) test-deps
	# Two workers, one test file each at a time: the suite is mostly one-threaded, CI has two cores;
	# tests/conftest.py hands the files out heaviest first so that both workers finish together
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy src/bertscope

# The peers (sentence-transformers' onnx backend through optimum-onnx, which needs transformers < 4.58,
# and its openvino backend through optimum-intel) cannot share the project's venv: they get their own
BENCH_VENV := bench/.venv
BENCH_STAMP := $(BENCH_VENV)/.installed
PEERS_ARGS ?= --models minilm,mpnet --corpora news,docs --rounds 3 --limit news=400,docs=40 --threads 2

$(BENCH_STAMP): pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q "torch==$(TORCH_VERSION)"
	$(BENCH_VENV)/bin/pip install -q -e '.[bench,onnx,openvino]'
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(BIN)/python bench/bench_engine.py
	$(BENCH_VENV)/bin/python bench/bench_peers.py $(PEERS_ARGS)

clean:
	rm -rf demo $(VENV) $(BENCH_VENV) build *.egg-info src/*.egg-info .pytest_cache
