GO      ?= go
BIN     := bin/vertex
PKGS    := ./...
# What `vertex version` prints and the images' version label say.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: build run examples image images test faults bench lint deps clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/vertex

# Runs the example MonoVertex (generator -> cat -> log, at most 20 messages a
# second, ramping from 5 over 5s) until Ctrl-C. No Redis needed.
run: build
	./$(BIN) run -f config/examples/monovertex.yaml

# Builds the SDK examples (user-defined source, transformer, maps and sink)
# into bin/examples/, for config/examples/udf.yaml and for benchmarks.
EXAMPLES := $(notdir $(patsubst %/,%,$(dir $(wildcard pkg/sdk/examples/*/main.go))))
examples:
	@mkdir -p bin/examples
	$(foreach e,$(EXAMPLES),$(GO) build -o bin/examples/$(e) ./pkg/sdk/examples/$(e) &&) true

# Container images, FROM scratch, built with podman, buildah or docker
# (whichever is installed, in that order) by scripts/image.sh: sluice:$(TAG)
# (image), and sluice-example-<name>:$(TAG) for every SDK example (images).
# PLATFORMS=linux/amd64,linux/arm64 builds one image per platform and a
# manifest list (podman, buildah). TAG (default dev), IMAGE_PREFIX, PODMAN_FLAGS
# and CONTAINER_TOOL are passed on; see the script.
image:
	VERSION=$(VERSION) ./scripts/image.sh sluice

images:
	VERSION=$(VERSION) ./scripts/image.sh all

deps:
	@./scripts/deps.sh

# The end-to-end packages are named first so that they start first: they wait
# on real time, and with -p 4 the unit packages build and run beside them
# (with go test's default of one package per core, the two end-to-end packages
# would hold both cores' turns for their whole run). The slowest, test/, takes
# about six minutes beside the others on two cores; the timeout, which bounds a
# hang, leaves room for a machine with twice the load, on which a package takes
# twice as long.
test: deps
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -p 4 -timeout 15m ./test/ ./test/podman/ $(PKGS)

# The fault suite (docs/faults.md): every fault of its table, FAULT_RUNS times
# each, against real vertex processes, redis-server and nats-server; prints the
# table (runs, epochs, epochs over max, the worst epoch, messages lost and
# duplicated) and writes it to bin/faults.md. `make test` runs each row once.
FAULT_RUNS ?= 20
faults: deps
	@mkdir -p bin
	$(GO) test -count=1 -timeout 240m -run 'TestFault' ./test/ -args -faults.runs=$(FAULT_RUNS) -faults.table=$(CURDIR)/bin/faults.md
	@cat bin/faults.md

bench: build
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./pkg/ratelimit/ ./pkg/forward/ ./pkg/udf/ ./pkg/isb/...
	./$(BIN) bench -f config/examples/bench.yaml --duration 10s
	$(GO) test -run '^$$' -bench BenchmarkMapUDF -benchtime 5x ./cmd/vertex/
	$(GO) test -run '^$$' -bench BenchmarkStreamingSlowMap -benchtime 3x ./cmd/vertex/
	$(GO) test -run '^$$' -bench . -benchtime 3x ./pkg/ratelimit/redisstore/
	$(GO) test -run '^$$' -bench 'BenchmarkPipeline$$' -benchtime 5x ./cmd/vertex/
	$(GO) test -run '^$$' -bench BenchmarkPipelineWatermarks -benchtime 5x ./cmd/vertex/
	$(GO) test -run '^$$' -bench BenchmarkPipelineProcesses -benchtime 3x ./test/
	for i in 1 2 3 4 5; do $(GO) test -run '^$$' -bench 'BenchmarkAdd$$' ./pkg/reduce/ || exit 1; done
	$(GO) test -run '^$$' -bench BenchmarkOpenKeys -benchtime 3x ./pkg/reduce/
	$(GO) test -run '^$$' -bench BenchmarkReducePipeline -benchtime 3x ./test/
	$(GO) test -run '^$$' -bench BenchmarkOrderedPipeline -benchtime 3x ./test/
	$(GO) test -run '^$$' -bench 'BenchmarkKafkaSource|BenchmarkHTTPSink' -benchtime 1x -count 5 ./pkg/vertex/
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./pkg/connectors/kafka/ ./pkg/connectors/sink/ ./pkg/connectors/source/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
