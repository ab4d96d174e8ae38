# awf — build, test, demo. Everything runs as root on a Debian 12 or Ubuntu
# 22.04/24.04 host.
SHELL := /bin/bash
GO ?= go
# tests/setup/deps.sh installs go.mod's exact toolchain under AWF_GO_CACHE when
# the host's go is missing or older than go.mod asks; its bin directory comes
# first on every recipe's PATH.
export AWF_GO_CACHE ?= /var/cache/awf/go
export PATH := $(AWF_GO_CACHE)/bin:$(PATH)
export CGO_ENABLED := 1
export GOFLAGS := -tags=seccomp
BIN := bin
CMDS := awf bounded-query sealed-probe bounded-agent
STATICCHECK_VERSION := v0.8.2
TEST_TIMEOUT ?= 28m

.PHONY: all deps build test verify-all test-cgroup2 lint race notag demo fuzz bench bench-go clean

all: build

deps:
	@tests/setup/deps.sh

build: deps
	@mkdir -p $(BIN)
	@for c in $(CMDS); do $(GO) build -trimpath -o $(BIN)/$$c ./cmd/$$c || exit 1; done
	@CGO_ENABLED=0 GOFLAGS= $(GO) build -trimpath -o $(BIN)/agent-loop ./cmd/agent-loop
	@CGO_ENABLED=0 GOFLAGS= $(GO) build -trimpath -o $(BIN)/enclave-probe ./cmd/enclave-probe
	@echo "built: $(addprefix $(BIN)/,$(CMDS))"

# The docker backend's tests need a daemon: tests/setup/dockerd.sh starts Debian's
# dockerd on a private socket and data root (no host networking) and stops it after.
export AWF_TEST_DOCKER_SOCKET := /run/awf-test-docker/docker.sock

test: build
	$(GO) vet ./...
	@tests/setup/dockerd.sh start
	@set -o pipefail; rc=0; $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./... || rc=$$?; \
	  if [ $$rc -eq 0 ]; then $(MAKE) --no-print-directory verify-all || rc=$$?; fi; \
	  tests/setup/dockerd.sh stop; exit $$rc

# The host self-test over every runtime, as an operator would run it; it needs
# the private dockerd that the test target starts. A host without runsc
# (Ubuntu 22.04's archive has none) sets VERIFY_REQUIRE='direct docker'.
VERIFY_REQUIRE ?= direct gvisor docker
# Bounded-agent enclaves run on direct and gvisor; docker cannot join the
# enclave's network namespace and reports BLOCKED (awf isolate verify --enclave);
# a host without runsc sets ENCLAVE_RUNTIMES=direct.
ENCLAVE_RUNTIMES ?= direct gvisor
verify-all:
	$(BIN)/awf isolate verify --runtime all --require $(VERIFY_REQUIRE) --docker-socket $(AWF_TEST_DOCKER_SOCKET)
	$(BIN)/awf isolate verify --agent
	$(BIN)/awf isolate verify --enclave $(addprefix --runtime ,$(ENCLAVE_RUNTIMES))

# The sandbox on a pure cgroup v2 kernel, inside a throwaway VM (slow; correctness only).
test-cgroup2: build
	@tests/cgroup2/run.sh

lint: deps
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum: not tidy (the diff above); run go mod tidy"; exit 1; }
	$(GO) vet ./...
	@command -v staticcheck >/dev/null || GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...

# The race detector over the packages whose tests build no sandbox (pure Go,
# or cgo only through libseccomp): the protocol, the config, the client and
# the broker core with its ledger and scheduler. The sandbox backends' tests
# re-exec the test binary as container init, which -race makes too slow.
RACE_PKGS := ./proto/... ./broker/config/... ./broker/client/... ./broker ./tests/conformance/...
race: deps
	$(GO) test -race -count=1 -timeout 10m $(RACE_PKGS)

# A build without the seccomp tag compiles, and its direct backend refuses to
# open with a message that says how to rebuild (fail closed, not at the first
# sandbox start). CGO_ENABLED=0 does not build: libseccomp and libcontainer's
# nsenter need cgo.
notag: deps
	GOFLAGS= $(GO) build ./...
	GOFLAGS= $(GO) test -count=1 -run '^TestSeccompBuildTag$$' ./isolate/direct

demo: build
	@tests/demo/demo.sh

FUZZTIME ?= 5m
# Every go-test fuzz target in the tree, one after another, FUZZTIME each.
fuzz: deps
	@set -e; for f in $$(grep -rlE '^func Fuzz[A-Za-z0-9_]+\(' --include='*_test.go' .); do \
	  pkg=./$$(dirname $$f); \
	  for t in $$(grep -hoE '^func Fuzz[A-Za-z0-9_]+' $$f | sed 's/func //'); do \
	    echo "== $$pkg $$t"; $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -parallel 2; \
	  done; done

# The side-by-side suite (tests/bench): the host floor, bubblewrap, every
# runtime cold and warm, the broker end to end and the reference's approach,
# on three repository sizes and three workloads, in one run of about 20 min.
# It rewrites the generated block of docs/PERFORMANCE.md and
# docs/performance.json. BENCH_QUICK=1 makes a small run for development.
# The docker runtime and the reference's row need the private dockerd.
bench: build
	@tests/setup/dockerd.sh start
	@rc=0; AWF_BENCH_SUITE=1 AWF_BENCH_BIN=$(CURDIR)/$(BIN) $(GO) test -v -count=1 -timeout 60m ./tests/bench/ || rc=$$?; \
	  tests/setup/dockerd.sh stop; [ $$rc = 0 ] || exit $$rc; \
	  echo "bench: a bounded agent's enclave overhead on direct, on the broker's path, cold and from the warm pool, side by side with a bounded query (issue target: under 50 ms); load $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	  $(GO) test -run '^$$' -bench 'BenchmarkEnclaveOverhead' -benchtime 30x -count 1 -timeout 20m ./broker/host/

# The per-package Go benchmarks, each side by side with the peers it names
# (bare python3, bubblewrap, runsc, docker).
bench-go: build
	@tests/setup/dockerd.sh start
	@rc=0; $(GO) test -run '^$$' -bench . -benchtime 30x -count 1 -timeout 60m ./... || rc=$$?; \
	  tests/setup/dockerd.sh stop; exit $$rc

clean:
	rm -rf $(BIN)
