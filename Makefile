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

# Run every fuzz target for FUZZTIME each (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$(go list ./...); do \
	  for f in $$(go test -list 'Fuzz.*' $$pkg | grep ^Fuzz); do \
	    echo "fuzz $$pkg $$f"; go test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
