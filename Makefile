# Targets of this repository. Run `make help` for the list.

.PHONY: help
.PHONY: generate check-generate
.PHONY: deps demo test vet cross-vet bench bench-starts boxd tidy

# The generator is pinned in tools/go.mod so that library users never inherit it.
# -modfile does not work in workspace mode, hence GOWORK=off.
OAPI_CODEGEN := GOWORK=off go tool -modfile=tools/go.mod oapi-codegen
GEN_CONFIG := gen/oapi-codegen.yaml
GEN_OUTPUT := gen/box.gen.go
SPEC := api/openapi.yaml
# Where the SDK and the CLI must build besides Linux (boxd runs only there,
# and builds everywhere with stubs that say so).
CROSS_PLATFORMS := darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

# Every module of go.work (the SDK at the root, boxd, boxtest, the commands,
# the examples, the end-to-end tests and two shared helpers), as package
# patterns: in a workspace, ./... names only the module of the current
# directory.
ALL := $(shell go list -m -f '{{.Dir}}/...')

help: ## List the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-16s %s\n", $$1, $$2}'

generate: ## Regenerate gen/ from api/openapi.yaml.
	$(OAPI_CODEGEN) -config $(GEN_CONFIG) $(SPEC)

check-generate: ## Fail if gen/ is not what api/openapi.yaml generates.
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	sed 's|^output:.*|output: '"$$tmp"'/box.gen.go|' $(GEN_CONFIG) > "$$tmp/config.yaml" && \
	$(OAPI_CODEGEN) -config "$$tmp/config.yaml" $(SPEC) && \
	if ! diff -u $(GEN_OUTPUT) "$$tmp/box.gen.go" > "$$tmp/diff"; then \
		head -n 40 "$$tmp/diff"; \
		echo "check-generate: $(GEN_OUTPUT) is stale or was edited by hand; run 'make generate' and commit the result." >&2; \
		exit 1; \
	fi

deps: ## Install bubblewrap (and python3) when missing and allowed.
	@./scripts/deps.sh

demo: deps ## Run the examples (on an embedded boxd; on the server at UPSTASH_BOX_BASE_URL, or the cloud, when UPSTASH_BOX_API_KEY is set).
	go run ./examples/quickstart
	go run ./examples/agent

vet: ## gofmt and go vet, here and for macOS and Windows.
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet $(ALL)
	@$(MAKE) --no-print-directory cross-vet

cross-vet: ## go vet every module, tests included, for each platform in CROSS_PLATFORMS: a Linux-only call outside a _linux.go file fails here.
	@for p in $(CROSS_PLATFORMS); do \
		echo "GOOS=$${p%/*} GOARCH=$${p#*/} go vet (every module)"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} go vet $(ALL) || exit 1; \
	done

test: ## Everything CI checks: generated code, vet, and all tests with the race detector.
	@./scripts/deps.sh --tests
	$(MAKE) check-generate
	$(MAKE) vet
	go test -race -count=1 -timeout 15m $(ALL)

bench: deps ## Run the benchmarks.
	go test -run '^$$' -bench . -benchmem -count=1 $(ALL)

bench-starts: deps ## Box starts on this machine: fork+exec, create + first exec one at a time, and 50 at once (median, p95, wall, processor time per box).
	go test -run '^$$' -bench 'ForkExec|CreateExec' -benchtime=30x -count=1 ./local/
	go test -run '^$$' -bench 'CreateBurst' -benchtime=3x -count=1 ./local/

tidy: ## go mod tidy in every module.
	./scripts/tidy.sh

boxd: ## Build boxd into bin/.
	go build -o bin/boxd ./cmd/boxd
