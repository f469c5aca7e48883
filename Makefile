# edge-decider — two commands: `make dev` and `make test`.
# Every set-up step is skipped when already done, so both are fast on a warm machine.

SHELL := bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

# Pinned tool versions (wasm-bindgen-cli must equal the wasm-bindgen crate in Cargo.lock).
WORKER_BUILD_VERSION := 0.8.7
WASM_BINDGEN_VERSION := 0.2.130

PORT ?= 8787
DEV_ARGS ?=
# `make deploy ENV=workers-ai` deploys that wrangler environment.
ENV ?=

CARGO_BIN := $(or $(CARGO_HOME),$(HOME)/.cargo)/bin
export PATH := $(CARGO_BIN):$(PATH)
export CARGO_TERM_COLOR ?= auto
export WRANGLER_SEND_METRICS := false
WRANGLER := node_modules/.bin/wrangler

# What the wasm build depends on; build/index.js is rebuilt only when one changes.
WORKER_INPUTS := Cargo.toml Cargo.lock build.rs model/decision-model.json rules/default.json \
	$(shell find src crates/decider-core/src crates/decider-core/Cargo.toml -type f 2>/dev/null)

.PHONY: help setup tools node dev build test fmt clippy cargo-test doc cli e2e deploy size skew clean

help:
	@echo "make dev     set up what is missing, build, and serve on 127.0.0.1:\$$PORT (default 8787); DEV_ARGS go to wrangler dev"
	@echo "make test    set up, then fmt, clippy, cargo test, cargo doc, wasm build, end-to-end tests in workerd"
	@echo "make deploy  wrangler deploy (ENV=workers-ai for the Workers AI environment)"
	@echo "make size    raw and gzip size of the built wasm"

## ---- set-up (idempotent) ----------------------------------------------------

setup: tools node

tools:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	@if [[ "$$(worker-build --version 2>/dev/null)" != *"$(WORKER_BUILD_VERSION)"* ]]; then \
		echo "installing worker-build $(WORKER_BUILD_VERSION)"; \
		cargo install worker-build --version $(WORKER_BUILD_VERSION) --force; \
	fi
	@if [[ "$$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $(WASM_BINDGEN_VERSION)" ]]; then \
		echo "installing wasm-bindgen-cli $(WASM_BINDGEN_VERSION)"; \
		cargo install wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION) --force; \
	fi

node: node_modules/.package-lock.json

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

## ---- build --------------------------------------------------------------------

build: build/index.js

build/index.js: $(WORKER_INPUTS) | tools node
	bash scripts/build-worker.sh
	@touch $@

size: build
	@raw=$$(stat -c %s build/index_bg.wasm); gz=$$(gzip -9 -c build/index_bg.wasm | wc -c); \
	echo "build/index_bg.wasm: $$raw bytes raw, $$gz bytes gzip -9"

## ---- run ----------------------------------------------------------------------

dev: setup build
	$(WRANGLER) dev --ip 127.0.0.1 --port $(PORT) $(DEV_ARGS)

deploy: setup build
	$(WRANGLER) deploy $(if $(ENV),--env $(ENV))

## ---- test ---------------------------------------------------------------------

test: setup
	@start=$$(date +%s); \
	for step in fmt clippy cargo-test doc build size cli e2e; do \
		echo "== make $$step"; $(MAKE) --no-print-directory $$step; \
	done; \
	echo "make test: all green in $$(( $$(date +%s) - start )) s"

fmt:
	cargo fmt --all --check

clippy:
	cargo clippy --workspace --all-targets --locked -- -D warnings

cargo-test:
	cargo test --workspace --locked

doc:
	RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

# The CLI for the skew test. A debug build decides bit for bit like a release build, and
# `cargo test --workspace` has already built it, so this costs nothing in `make test`.
cli:
	cargo build -p decider-cli --locked

# End-to-end tests only (needs `make build cli`).
e2e: node
	node scripts/run-e2e.mjs

# The training/serving skew check on any JSONL file of states: make skew STATES=path
skew: build cli
	SKEW_STATES=$(STATES) node scripts/run-e2e.mjs tests/e2e/skew.test.mjs

clean:
	rm -rf build .wrangler

# --- bench (perf) ---
# Regenerates BENCHMARKS.md from one run: criterion (native), the decision in V8 (wasm vs JS),
# edge-decider vs an empty workers-rs Worker vs a plain-JS Worker in workerd at the same rates,
# knees, cold starts, sizes, and the agreement of `decider loadtest` with oha. BENCH_QUICK=1: short.
.PHONY: bench
bench: setup
	bash bench/run.sh

# --- fuzz (hardening) ---
# Every cargo-fuzz target of decider-core for FUZZ_SECONDS each (default 60), one after
# another on one core; needs the nightly toolchain (the script installs cargo-fuzz).
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

# --- model (decider CLI) ---
# `make model` regenerates model/decision-model.json, its card and curve from the simulator
# (byte-identical for the same seeds). `make peers` re-measures scikit-learn's MLP and
# HistGradientBoosting against `decider train` on the same data (needs scikit-learn; the card
# embeds model/peers.md on the next `make model`). `make unseen` checks training on routing
# policies the simulator never produced (bench/unseen_policy.py).
.PHONY: model peers unseen
model:
	bash model/regenerate.sh

peers: cli
	python3 -m pip install --quiet scikit-learn==1.5.2
	python3 bench/peers.py --decider target/release/decider --out model/peers.md

unseen: cli
	python3 bench/unseen_policy.py --decider target/release/decider

# --- soak (hardening) ---
# A fixed rate at `wrangler dev` for 60 s in 10 s windows; 0 errors and last-window p99
# within 20% of the first, or it fails. Writes SOAK.md.
.PHONY: soak
soak: setup build cli
	bash scripts/soak.sh
