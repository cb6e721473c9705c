# leasehold's entry points. `make test` is the one CI runs.
SHELL := /bin/bash

# kube-apiserver and etcd are built from the Go module proxy in the tools
# module hack/kube, and cached by version in a git-ignored folder.
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" && $$2 ~ /^v/ {print $$2; exit}' hack/kube/go.mod)
KUBE_ASSETS  := $(CURDIR)/.cache/kube/$(KUBE_VERSION)
KUBE_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
                -X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION)))) \
                -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
                -X k8s.io/component-base/version.gitTreeState=clean
export LEASEHOLD_KUBE_ASSETS := $(KUBE_ASSETS)

GO_TEST_FLAGS ?= -race -count=1 -timeout=20m

.PHONY: demo test vet kube-bins kube bench check-no-leftovers

## demo: a one-minute live demonstration: three sidecars against a real apiserver; SIGKILL, then SIGTERM, the leader.
demo: kube-bins
	go run ./hack/demo

## test: vet, then every test (unit and integration against the real apiserver) with the race detector.
test: kube-bins vet
	go test $(GO_TEST_FLAGS) ./...
	@$(MAKE) --no-print-directory check-no-leftovers

vet:
	go vet ./...

## kube-bins: build kube-apiserver and etcd once per version (about 12 minutes cold on 2 cores).
kube-bins: $(KUBE_ASSETS)/kube-apiserver $(KUBE_ASSETS)/etcd
	@ln -sfn $(KUBE_VERSION) .cache/kube/current

$(KUBE_ASSETS)/kube-apiserver:
	@mkdir -p $(KUBE_ASSETS)
	cd hack/kube && go build -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver
	mv $@.tmp $@

$(KUBE_ASSETS)/etcd:
	@mkdir -p $(KUBE_ASSETS)
	cd hack/kube && go build -o $@.tmp ./etcd
	mv $@.tmp $@

## kube: run a local apiserver; prints KUBECONFIG=<path>, stops on Ctrl-C.
kube: kube-bins
	go run ./hack/localkube

## image: the container image (needs a Docker engine; CI tests the same binary without one).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
image:
	docker build --build-arg VERSION=$(VERSION) -t leasehold:$(VERSION) .

## bench: handover/failover latency and API requests per renewal, one table, against a real apiserver.
bench: kube-bins
	go run ./bench $(BENCH_FLAGS)

# The harness must never leave an etcd or kube-apiserver behind.
check-no-leftovers:
	@if pgrep -f '$(KUBE_ASSETS)/' >/dev/null; then \
		echo "leftover processes from the test harness:"; pgrep -fa '$(KUBE_ASSETS)/'; exit 1; \
	fi
