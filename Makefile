GO      ?= go
BIN     := bin/vertex
PKGS    := ./...

.PHONY: build run test bench lint deps clean

build:
	$(GO) build -o $(BIN) ./cmd/vertex

# Runs the example: for now the rate limiter's ramp on a simulated clock.
run: build
	./$(BIN) simulate --max 110 --min 10 --ramp-up 10s --mode goBackN --threshold 100 --cool-down 0s \
		--demand "10,20,20,20,20,20,30,30,30,30,20,20,30,40,50,60,70,,,60,70,80,90,100,110,110"

deps:
	@./scripts/deps.sh

test: deps
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./pkg/ratelimit/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
