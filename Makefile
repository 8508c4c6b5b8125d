# Conveniences over the scripts; the scripts are what the README and CI use.
.PHONY: build up test short vet fmt fuzz

build:
	go build -o bin/hostd ./hostd

up:
	./scripts/up

test:
	./scripts/test

# The fast tier: pure tests, no QEMU.
short:
	go test -short -race ./...

vet:
	go vet ./...

fmt:
	gofmt -l -w $$(git ls-files '*.go')

# Run every fuzz target for FUZZTIME each: a count (1000x, the default) or a
# duration (10m); scripts/fuzz says why counts are the default.
FUZZTIME ?= 1000x
fuzz:
	FUZZ_TIME=$(FUZZTIME) ./scripts/fuzz
