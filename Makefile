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

# Node. wrangler, miniflare and vitest need Node >= NODE_MIN. When the node on PATH is older
# (or missing), the set-up brings Node NODE_VERSION into .tools/ from the npm registry (the
# node-linux-<arch> package carries the binary itself; its tarball integrity is pinned below)
# and puts it first on PATH, so every recipe, npm, npx, wrangler, vitest and wrangler's
# [build] command run under it. A recursive make then finds that node and keeps the PATH.
NODE_VERSION := 22.23.5
NODE_MIN := 22.12
NODE_INTEGRITY_x64 := sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
NODE_INTEGRITY_arm64 := sha512-e1LOUGKVruPGuLVutn8+Cgm5pI1APm4Kvh+zbb/qe/ZpD9s+TQby5iUgZOWmPpbSKpj0Td8DP1N0NEnXasHizg==
NODE_OK := $(shell node -e 'const v = process.versions.node.split(".").map(Number), m = "$(NODE_MIN)".split(".").map(Number); process.exit(v[0] > m[0] || (v[0] === m[0] && v[1] >= m[1]) ? 0 : 1)' >/dev/null 2>&1 && echo yes)
ifneq ($(NODE_OK),yes)
NODE_ARCH := $(patsubst x86_64,x64,$(patsubst aarch64,arm64,$(shell uname -m)))
NODE_HOME := $(CURDIR)/.tools/node-v$(NODE_VERSION)-linux-$(NODE_ARCH)
NODE_RUNTIME := $(NODE_HOME)/bin/node
export PATH := $(NODE_HOME)/bin:$(PATH)
endif
export CARGO_TERM_COLOR ?= auto
export WRANGLER_SEND_METRICS := false
WRANGLER := node_modules/.bin/wrangler

# What the wasm builds depend on; each build/index.js is rebuilt only when one changes.
WORKER_INPUTS := Cargo.toml Cargo.lock build.rs scripts/build-worker.sh model/decision-model.json rules/default.json \
	$(shell find src crates/decider-core/src crates/decider-core/Cargo.toml -type f 2>/dev/null)
# The control plane (workers/rollout): its own crate over decider-rollout.
ROLLOUT_INPUTS := Cargo.toml Cargo.lock scripts/build-worker.sh \
	$(shell find workers/rollout/src workers/rollout/Cargo.toml crates/decider-rollout/src crates/decider-rollout/Cargo.toml crates/decider-core/src crates/decider-core/Cargo.toml -type f 2>/dev/null)
ROLLOUT_BUILD := workers/rollout/build/index.js

.PHONY: help setup tools node node-runtime env dev build build-rollout test fmt doc-refs structure clippy cargo-test doc cli e2e deploy size skew clean

help:
	@echo "make dev     set up what is missing, build both Workers, and serve on 127.0.0.1:\$$PORT (default 8787); DEV_ARGS go to wrangler dev"
	@echo "make test    set up, then fmt, doc references, module structure, clippy, cargo test, cargo doc, wasm builds, end-to-end tests in workerd"
	@echo "make deploy  wrangler deploy: the control plane (workers/rollout) first, then the serving Worker (ENV=workers-ai for that environment)"
	@echo "make size    raw and gzip size of the built wasm"
	@echo "make structure  no import circle among the modules of any crate (scripts/check-structure.py)"
	@echo "make env     print the PATH line that puts the Makefile's Node first (eval \"\$$(make -s env)\")"

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

node_modules/.package-lock.json: package.json package-lock.json | node-runtime
	npm ci --no-audit --no-fund
	@touch $@

# Nothing to do when the node on PATH is new enough (NODE_RUNTIME is then empty).
node-runtime: $(NODE_RUNTIME)

ifneq ($(NODE_RUNTIME),)
# npm pack runs under the older node; it checks the tarball against the registry's integrity,
# and this against the pinned one. Unpacked next to its final place and renamed last, so an
# interrupted install leaves nothing that looks installed.
$(NODE_RUNTIME):
	@if [[ "$$(uname -s)" != Linux || ! "$(NODE_ARCH)" =~ ^(x64|arm64)$$ ]]; then \
		echo "Node >= $(NODE_MIN) is needed and there is no pinned Node for $$(uname -sm): install it and retry" >&2; exit 1; \
	fi
	@command -v npm >/dev/null || { echo "Node >= $(NODE_MIN) is needed; bringing it needs npm, which is missing" >&2; exit 1; }
	@echo "node $$(node --version 2>/dev/null || echo '(none)') is older than $(NODE_MIN): installing Node $(NODE_VERSION) into .tools/" >&2
	@mkdir -p .tools; tmp=$$(mktemp -d .tools/.node-install.XXXXXX); trap 'rm -rf "$$tmp"' EXIT; \
	integrity=$$(npm pack --json --pack-destination "$$tmp" node-linux-$(NODE_ARCH)@$(NODE_VERSION) | node -e 'let s = ""; process.stdin.on("data", (c) => (s += c)).on("end", () => console.log(JSON.parse(s)[0].integrity))'); \
	if [[ "$$integrity" != "$(NODE_INTEGRITY_$(NODE_ARCH))" ]]; then \
		echo "node-linux-$(NODE_ARCH)@$(NODE_VERSION): integrity $$integrity, expected $(NODE_INTEGRITY_$(NODE_ARCH))" >&2; exit 1; \
	fi; \
	tar -xzf "$$tmp"/node-linux-$(NODE_ARCH)-$(NODE_VERSION).tgz -C "$$tmp"; \
	[[ "$$("$$tmp/package/bin/node" --version)" == v$(NODE_VERSION) ]]; \
	rm -rf .tools/node-v*; mv "$$tmp/package" $(NODE_HOME)
	@echo "node $$(node --version) from $(NODE_HOME)/bin" >&2
endif

# For running npx/wrangler by hand under the Makefile's Node: eval "$$(make -s env)".
env: node-runtime
	@echo 'export PATH="$(if $(NODE_RUNTIME),$(NODE_HOME)/bin:)$(CARGO_BIN):$$PATH"'

## ---- build --------------------------------------------------------------------

build: build/index.js $(ROLLOUT_BUILD)

build/index.js: $(WORKER_INPUTS) | tools node
	bash scripts/build-worker.sh
	@touch $@

# The control plane alone (its wrangler.toml's [build] command).
build-rollout: $(ROLLOUT_BUILD)

$(ROLLOUT_BUILD): $(ROLLOUT_INPUTS) | tools node
	bash scripts/build-worker.sh --crate workers/rollout
	@touch $@

# The same Worker with a challenger model embedded (tests/fixtures/challenger-model.json), for
# the champion/challenger end-to-end tests. Not optimised by wasm-opt: it is only tested.
build/challenger/index.js: $(WORKER_INPUTS) tests/fixtures/challenger-model.json | tools node
	DECIDER_CHALLENGER=tests/fixtures/challenger-model.json bash scripts/build-worker.sh --out-dir build/challenger --no-opt
	@touch $@

size: build
	@for w in build/index_bg.wasm workers/rollout/build/index_bg.wasm; do \
		raw=$$(stat -c %s $$w); gz=$$(gzip -9 -c $$w | wc -c); \
		echo "$$w: $$raw bytes raw, $$gz bytes gzip -9"; \
	done

## ---- run ----------------------------------------------------------------------

# Both Workers in one wrangler session: the serving Worker (first config: its port, its
# requests) binds the control plane's object across scripts.
dev: setup build .dev.vars
	$(WRANGLER) dev -c wrangler.toml -c workers/rollout/wrangler.toml --ip 127.0.0.1 --port $(PORT) $(DEV_ARGS)

# Local secrets for `make dev` (never deployed): .dev.vars.example with a decision id key of
# this checkout's own. An existing .dev.vars is left as it is.
.dev.vars: | node-runtime
	@key=$$(node -e 'console.log(require("crypto").randomBytes(32).toString("hex"))'); \
	sed "s/^DECISION_ID_KEY=.*/DECISION_ID_KEY=$$key/" .dev.vars.example > $@
	@echo "wrote $@ from .dev.vars.example, with a random DECISION_ID_KEY"

# The control plane first: the serving Worker binds its object by script_name.
deploy: setup build
	$(WRANGLER) deploy -c workers/rollout/wrangler.toml $(if $(ENV),--env $(ENV))
	$(WRANGLER) deploy $(if $(ENV),--env $(ENV))

## ---- test ---------------------------------------------------------------------

test: setup
	@start=$$(date +%s); \
	for step in fmt doc-refs structure clippy cargo-test doc build size cli build/challenger/index.js e2e; do \
		echo "== make $$step"; $(MAKE) --no-print-directory $$step; \
	done; \
	echo "make test: all green in $$(( $$(date +%s) - start )) s"

fmt:
	cargo fmt --all --check

# Every relative link, repository path and Rust item the docs name exists (the checker checks
# itself first on an in-memory example).
doc-refs: node-runtime
	node scripts/check-doc-refs.mjs --self-test
	node scripts/check-doc-refs.mjs

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

# End-to-end tests only (needs `make build cli build/challenger/index.js`).
e2e: node
	node scripts/run-e2e.mjs

# The training/serving skew check on any JSONL file of states: make skew STATES=path
skew: build cli
	SKEW_STATES=$(STATES) node scripts/run-e2e.mjs tests/e2e/skew.test.mjs

# The module import graph of each crate (src/, crates/decider-core/src, crates/decider-cli/src):
# fails naming each cycle as `a -> b -> a`. The self-test runs the checker on a fixture with
# known cycles first.
structure:
	python3 scripts/check-structure.py --self-test
	python3 scripts/check-structure.py

clean:
	rm -rf build .wrangler workers/rollout/build

# --- bench (perf) ---
# One run, then docs/reports/BENCHMARKS.md rendered from its result files (bench/results/):
# the decision in wasm in V8, workerd CPU per request and cold start of edge-decider against an
# empty workers-rs Worker (with an A/A control), wasm sizes, `decider loadtest` against oha,
# and `decider report` on 1,000,000 log lines. About 10 minutes; BENCH_QUICK=1: a short check.
# BENCH_AGAINST="REV ...": edge-decider at those commits, built and run beside this one.
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
# HistGradientBoosting and LightGBM against `decider train` on the simulator's data and on
# oblique-boundary data (bench/peers.py; the card embeds model/peers.md on the next `make model`). `make unseen` checks training on routing
# policies the simulator never produced (bench/unseen_policy.py).
.PHONY: model peers unseen
model:
	bash model/regenerate.sh

# On demand, not in CI: the peers live in their own virtualenv under .tools/.
PEERS_PY := .tools/peers-venv/bin/python
peers:
	cargo build --release --locked -p decider-cli
	[ -x $(PEERS_PY) ] || python3 -m venv .tools/peers-venv
	$(PEERS_PY) -m pip install --quiet scikit-learn==1.5.2 lightgbm==4.7.0
	$(PEERS_PY) bench/peers.py --decider target/release/decider --out model/peers.md

# Policies learned from logs, scored by true value on the world of crates/decider-cli/src/world.rs:
# decider train --logs against a LightGBM direct method and OBP's IPW learner, six seeds
# (bench/value_peers.py; writes docs/reports/VALUE.md and bench/results/value.json).
VALUE_PY := .tools/value-venv/bin/python
VALUE_SEEDS ?= 1-6
.PHONY: value
value:
	cargo build --release --locked -p decider-cli --bin decider --example world
	[ -x $(VALUE_PY) ] || python3 -m venv .tools/value-venv
	$(VALUE_PY) -m pip install --quiet numpy scipy scikit-learn==1.5.2 lightgbm==4.7.0 pandas tqdm pyyaml matplotlib seaborn
	$(VALUE_PY) -m pip install --quiet --no-deps --ignore-requires-python obp==0.5.7
	$(VALUE_PY) bench/value_peers.py --seeds $(VALUE_SEEDS) --out bench/results/value.json \
		--markdown docs/reports/VALUE.md

# The release CLI: training 20,000 rows is numeric work (python3 standard library only).
unseen:
	cargo build --release --locked -p decider-cli
	python3 bench/unseen_policy.py --decider target/release/decider

# --- soak (hardening) ---
# A fixed rate at `wrangler dev` for 60 s in 10 s windows; 0 errors and last-window p99
# within 20% of the first, or it fails. Writes docs/reports/SOAK.md.
.PHONY: soak
soak: setup build
	cargo build --release --locked -p decider-cli
	bash scripts/soak.sh

# --- lab (decision loop end to end) ---
# The built Worker in workerd against three loopback origins with a ground truth of their own:
# scenario A (champion/challenger + rules holdout, read by `decider report`), scenario B
# (explore, `decider train --logs`, `decider ope`, serve the candidate) and scenario C (the
# rollout judge on cron runs: a better challenger ramped, a worse one rolled back, A/A over 20
# seeds), scenario D (minimum step, bake, operator verbs, webhooks) and scenario E (a failing
# origin's challenger with failover on and off). Writes lab/results/ and docs/reports/LAB.md;
# fails when a must-show fails. LAB_ONLY=a, b, c, d or e runs one; not part of `make test`.
.PHONY: lab
lab: setup build cli
	node lab/run.mjs

# The table of docs/rollout.md "How much traffic a rollout takes": `decider rollout plan`
# with both judges for each row (a minute or two on two cores).
.PHONY: rollout-table
rollout-table:
	cargo build --release -p decider-cli --locked
	python3 scripts/rollout-table.py target/release/decider
