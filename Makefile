# phasegate: the commands the README promises.
GO ?= go

.PHONY: demo test unit e2e fuzz bench vet artifacts images containers nemesis

## demo: the embedded run: an in-process broker, two skewed forks, the sidecar.
demo:
	$(GO) run ./cmd/demo

## test: everything CI runs: vet, the unit and kfake suites under -race, the
## real-broker suite (started by e2e/kafka/kafka.sh when no broker is given),
## and, when a Docker engine answers, the containers' part (compose smoke,
## nemesis (a) and (d) on three brokers; see e2e/README.md).
test: vet unit artifacts e2e containers

vet:
	@unformatted="$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt: not formatted (run gofmt -w): $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	cd deploy && $(GO) vet ./...   # its own module: k8s.io/api stays out of go.mod

unit:
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 ./txn   # the fencing test, which -race leaves out (IBM/sarama#2913)
	cd deploy && $(GO) test -race -count=1 ./...   # manifests and dashboard, validated offline

e2e:
	./scripts/test-readers.sh   # installs the Java and Python readers (R1, R2) and checks them on markers/testdata's vectors
	./e2e/run.sh

## artifacts: the Dockerfile's build step, the static binary, docker-compose.yml
artifacts:
	./scripts/check-artifacts.sh

## images: every image the container tests use, built locally without a
## registry (images/build.sh: Debian base by debootstrap, Kafka 4.1.2, the
## sidecar's image from ./Dockerfile); unchanged inputs are skipped.
images:
	./images/build.sh all

## containers: the image and docker-compose.yml running, e2e's container
## broker on the local image, the nemesis faults (a) and (d), the ACL test.
containers:
	./scripts/containers.sh

## nemesis: all six faults of e2e/cluster on a three-broker cluster and the
## ACL test on a SASL_SSL broker (~25 min).
nemesis:
	NEMESIS=all ./scripts/containers.sh

## fuzz: each fuzz target for FUZZTIME (default 60s).
FUZZTIME ?= 60s
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## bench: phasegate against Kafka's own tools on a real broker (bench/README.md);
## BENCH_RECORDS=100000 for a quick run. Prints the table, writes bench/results/.
bench:
	./bench/run.sh

## bench-micro: the Go benchmarks of the per-record paths.
.PHONY: bench-micro
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./markers ./watermarks ./dedupe ./proxy
