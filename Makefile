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

# helm is built from the Go module proxy in its own tools module hack/helm
# (apart from hack/kube, whose k8s.io replace directives it must not meet),
# and cached by version. The chart tests find it through $$LEASEHOLD_HELM.
HELM_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "helm.sh/helm/v3") {print $$(i+1); exit}}' hack/helm/go.mod)
HELM_BIN     := $(CURDIR)/.cache/helm/$(HELM_VERSION)/helm
export LEASEHOLD_HELM := $(HELM_BIN)

# Release engineering (issue 14). VERSION is the one version of a build:
# `git describe --tags --always --dirty`, v1.2.3 at a release tag,
# v1.2.3-4-gabc1234-dirty after one, and v0.0.0-g<commit>[-dirty] before the
# first tag (git describe then names only the commit; given on the command
# line, such a value is completed the same way). The binary (-X
# main.version), GoReleaser's binaries and the image's version label carry
# it as is; the image tag, the archives' names and the chart's version and
# appVersion drop the leading v (1.2.3, a SemVer, as in GoReleaser's
# .Version). test/release checks that one build stamps nothing else.
ifndef VERSION
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
override VERSION := $(if $(filter v%,$(VERSION)),$(VERSION),v0.0.0-g$(VERSION))
ifndef REVISION
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
# What one release build stamps, handed to its sub-makes, so that a commit
# made while it runs cannot give its parts two versions.
RELEASE_STAMP = VERSION=$(VERSION) REVISION=$(REVISION) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)
IMAGE_TAG     := $(patsubst v%,%,$(VERSION))
CHART_VERSION := $(IMAGE_TAG)

# The release build flags: their one definition is BUILD_FLAGS_FILE, which the
# Dockerfile, .goreleaser.yaml and internal/testing/fleet (the binary the tests run)
# read too. make build uses them with the version stamped.
BUILD_FLAGS_FILE := internal/buildflags/flags.env
build_flag        = $(shell sed -n 's/^$(1)=//p' $(BUILD_FLAGS_FILE) | tr -d "'")
BUILD_CGO_ENABLED := $(call build_flag,BUILD_CGO_ENABLED)
BUILD_FLAGS       := $(call build_flag,BUILD_FLAGS)
BUILD_LDFLAGS     := $(call build_flag,BUILD_LDFLAGS) -X main.version=$(VERSION)

# GoReleaser and staticcheck are built from the Go module proxy in their own
# tools modules (hack/goreleaser, hack/staticcheck) and cached by version,
# like helm.
GORELEASER_VERSION  := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/goreleaser/goreleaser/v2") {print $$(i+1); exit}}' hack/goreleaser/go.mod)
GORELEASER_BIN      := $(CURDIR)/.cache/goreleaser/$(GORELEASER_VERSION)/goreleaser
STATICCHECK_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "honnef.co/go/tools") {print $$(i+1); exit}}' hack/staticcheck/go.mod)
STATICCHECK_BIN     := $(CURDIR)/.cache/staticcheck/$(STATICCHECK_VERSION)/staticcheck
# GoReleaser reads the git state (git describe, the commit and its time) and
# fails on a clone without a remote (as CI may check out); such a clone
# gets the project's URL as origin, in GoReleaser's environment only.
GORELEASER_ENV  = $(if $(shell git remote 2>/dev/null),,GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/leasehold/leasehold.git)
# Every Go module of the repository: the product's and each tools module.
GO_MODULES := . bench $(patsubst %/go.mod,%,$(wildcard hack/*/go.mod))

.DEFAULT_GOAL := help
.PHONY: help build lint staticcheck-bin goreleaser-bin release-check release-snapshot release-notes release chart

# promtool (Prometheus' rule checker and unit-test runner, for the chart's
# alerts) is built from the Go module proxy in its own tools module
# hack/promtool, and cached by version. The chart tests find it through
# $$LEASEHOLD_PROMTOOL.
PROMTOOL_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/prometheus/prometheus") {print $$(i+1); exit}}' hack/promtool/go.mod)
PROMTOOL_BIN     := $(CURDIR)/.cache/promtool/$(PROMTOOL_VERSION)/promtool
export LEASEHOLD_PROMTOOL := $(PROMTOOL_BIN)

# @redocly/cli lints api/openapi.yaml. It is pinned, with its integrity
# hash, in hack/redocly/package.json and package-lock.json, and installed
# with `npm ci` into a git-ignored folder per version.
REDOCLY_VERSION := $(shell sed -n 's|.*"@redocly/cli": *"\([^"]*\)".*|\1|p' hack/redocly/package.json)
REDOCLY_DIR     := $(CURDIR)/.cache/redocly/$(REDOCLY_VERSION)
REDOCLY_BIN     := $(REDOCLY_DIR)/node_modules/.bin/redocly

GO_TEST_FLAGS ?= -race -count=1 -timeout=20m

.PHONY: demo test unit sim gsim vet kube-bins helm-bin chart-test kube bench bench-footprint bench-overlap bench-groups bench-handover bench-fencing bench-render image e2e-soak check-no-leftovers
.PHONY: node-bins cni-bin syft-bin image-sboms node node-down node-demo node-e2e FORCE
.PHONY: promtool-bin redocly-bin redocly-lint

## demo: a one-minute live demonstration: three sidecars against a real apiserver; SIGKILL, then SIGTERM, the leader.
demo: kube-bins
	go run ./hack/demo

## test: vet, then every test (unit and integration against the real apiserver) with the race detector,
## then 10,000 more lease-group histories without it (the race-detected run plays the first 400).
# The histories' live heap is a few MB: GOGC=3200 keeps the collector from
# running dozens of times a second (its heap goal is then about 130MB).
test: kube-bins kubectl-bin helm-bin vet
	go test $(GO_TEST_FLAGS) ./...
	cd bench && go test $(GO_TEST_FLAGS) ./...
	GOGC=3200 go test -count=1 -timeout=20m -run '^TestGSim$$' ./internal/group -gsim.first=401 -gsim.seeds=10000
	@$(MAKE) --no-print-directory check-no-leftovers
# The chart's alert rules are unit-tested with promtool (in test/chart), and
# the API document is linted with Redocly's recommended ruleset.
test: promtool-bin redocly-lint

## unit: the unit tests only (go test -short), with the race detector; needs neither the apiserver binaries nor helm.
## Tests that need the apiserver skip; those that need only the sidecar binary (built on the fly) run.
unit:
	go test -short -race -count=1 ./...
	cd bench && go test -short -race -count=1 ./...

vet:
	go vet ./...
	cd bench && go vet ./...

## kube-bins: build kube-apiserver and etcd once per version (about 12 minutes cold on 2 cores).
kube-bins: $(KUBE_ASSETS)/kube-apiserver $(KUBE_ASSETS)/etcd
	@ln -sfn $(KUBE_VERSION) .cache/kube/current

$(KUBE_ASSETS)/kube-apiserver:
	@echo "Building kube-apiserver $(KUBE_VERSION) (hack/kube, from the Go module proxy) for the integration tests: about 12 minutes on 2 cores, once per version."
	@mkdir -p $(KUBE_ASSETS)
	cd hack/kube && go build -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver
	mv $@.tmp $@

$(KUBE_ASSETS)/etcd:
	@mkdir -p $(KUBE_ASSETS)
	cd hack/kube && go build -o $@.tmp ./etcd
	mv $@.tmp $@

## kubectl-bin: build kubectl once per version, beside the apiserver (the shell example's fenced write and the node run it; a few minutes after kube-bins, which shares its build cache).
kubectl-bin: $(KUBE_ASSETS)/kubectl

$(KUBE_ASSETS)/kubectl: $(KUBE_ASSETS)/kube-apiserver
	cd hack/kube && go build -ldflags '$(NODE_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kubectl
	mv $@.tmp $@

# The rest of a single node (make node), from the same module and version:
# built in one go build (they share most packages), cached beside the
# apiserver. kubectl reports its version through client-go's variables.
NODE_KUBE_BINS  := kube-controller-manager kube-scheduler kubelet kube-proxy
NODE_KUBE_FILES := $(addprefix $(KUBE_ASSETS)/,$(NODE_KUBE_BINS))
NODE_LDFLAGS    := $(KUBE_LDFLAGS) $(subst k8s.io/component-base/version.,k8s.io/client-go/pkg/version.,$(KUBE_LDFLAGS))

## node-bins: build the node's Kubernetes binaries (kubelet, kube-proxy, kube-controller-manager, kube-scheduler, kubectl) once per version
## (about 10 minutes on 2 cores after kube-bins, which shares their build cache); containerd and runc are Debian's.
node-bins: kube-bins kubectl-bin $(NODE_KUBE_FILES)

$(NODE_KUBE_FILES) &:
	@echo "Building $(NODE_KUBE_BINS) $(KUBE_VERSION) (hack/kube, from the Go module proxy): about 10 minutes on 2 cores after kube-bins, once per version."
	@rm -rf $(KUBE_ASSETS)/node.tmp && mkdir -p $(KUBE_ASSETS)/node.tmp
	cd hack/kube && go build -ldflags '$(NODE_LDFLAGS)' -o $(KUBE_ASSETS)/node.tmp/ $(addprefix k8s.io/kubernetes/cmd/,$(NODE_KUBE_BINS))
	cd $(KUBE_ASSETS)/node.tmp && mv $(NODE_KUBE_BINS) .. && cd .. && rmdir node.tmp

# The CNI plugins (bridge, host-local, loopback, portmap) from the tools
# module hack/cni, cached by version.
CNI_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/containernetworking/plugins") {print $$(i+1); exit}}' hack/cni/go.mod)
CNI_DIR     := $(CURDIR)/.cache/cni/$(CNI_VERSION)
CNI_PLUGINS := bridge host-local loopback portmap

## cni-bin: build the CNI plugins make node wires its pods with, once per version (under a minute).
cni-bin: $(CNI_DIR)/bridge

$(CNI_DIR)/bridge:
	@rm -rf $(CNI_DIR).tmp && mkdir -p $(CNI_DIR).tmp
	cd hack/cni && CGO_ENABLED=0 go build -trimpath -o $(CNI_DIR).tmp/ \
		github.com/containernetworking/plugins/plugins/main/bridge github.com/containernetworking/plugins/plugins/ipam/host-local \
		github.com/containernetworking/plugins/plugins/main/loopback github.com/containernetworking/plugins/plugins/meta/portmap
	rm -rf $(CNI_DIR) && mv $(CNI_DIR).tmp $(CNI_DIR)

## helm-bin: build helm once per version (about 2 minutes cold). Like helm's own
## Makefile, stamp the Kubernetes version of its client-go as the default
## that `helm template` and `helm lint` render for.
helm-bin: $(HELM_BIN)
	@ln -sfn $(HELM_VERSION) .cache/helm/current

$(HELM_BIN):
	@mkdir -p $(dir $@)
	cd hack/helm && minor=$$(go list -m -f '{{.Version}}' k8s.io/client-go | cut -d. -f2) && \
	go build -trimpath -ldflags "-s -w \
		-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$minor \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$minor" \
		-o $@.tmp helm.sh/helm/v3/cmd/helm
	mv $@.tmp $@

## promtool-bin: build promtool once per version (about 5 minutes cold on 2 cores, 6 with the module downloads).
promtool-bin: $(PROMTOOL_BIN)
	@ln -sfn $(PROMTOOL_VERSION) .cache/promtool/current

$(PROMTOOL_BIN):
	@mkdir -p $(dir $@)
	cd hack/promtool && v=$(PROMTOOL_VERSION) && v=$${v#v0.} && minor=$${v:1} && minor=$$((10#$${minor%%.*})) && \
	go build -trimpath -ldflags "-s -w \
		-X github.com/prometheus/common/version.Version=$${v:0:1}.$$minor.$${v##*.} \
		-X github.com/prometheus/common/version.Branch=HEAD" \
		-o $@.tmp github.com/prometheus/prometheus/cmd/promtool
	mv $@.tmp $@

## redocly-bin: install @redocly/cli with npm (needs Node.js >= 20.19 and npm >= 10; a few seconds).
redocly-bin: $(REDOCLY_BIN)

$(REDOCLY_BIN):
	@mkdir -p $(REDOCLY_DIR)
	cp hack/redocly/package.json hack/redocly/package-lock.json $(REDOCLY_DIR)/
	cd $(REDOCLY_DIR) && npm ci --engine-strict --no-audit --no-fund --loglevel=error

## redocly-lint: lint api/openapi.yaml with @redocly/cli's recommended ruleset (api/redocly.yaml).
redocly-lint: redocly-bin
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true \
		$(REDOCLY_BIN) lint --config api/redocly.yaml api/openapi.yaml

## chart-test: only the chart and image tests (helm lint/template/install, RBAC and image proofs, alert unit tests).
chart-test: kube-bins helm-bin promtool-bin
	go test $(GO_TEST_FLAGS) ./test/chart/ ./test/image/

## sim: the election's deterministic simulator over SEEDS seeded histories of its default fault mix and STRESS of its
## stress mix (defaults 100000 and SEEDS; make test plays 6000 and 4000). A failing seed prints its history's end and
## replays with: go test ./internal/elect/decide -run TestSimulation -sim.mix=default|stress -sim.seed=N -v
SEEDS ?= 100000
STRESS ?= $(SEEDS)
sim:
	go test -count=1 -timeout=120m -run TestSimulation ./internal/elect/decide -sim.seeds=$(SEEDS) -sim.stress=$(STRESS) -v

## gsim: the lease-group simulator over SEEDS seeded histories (default 100000; make test plays 10,400).
## A failing seed prints its history's end and replays with: go test ./internal/group -run TestGSim -gsim.seed=N -v
gsim: kube-bins
	go test -count=1 -timeout=600m -run 'TestGSim$$' ./internal/group -gsim.seeds=$(SEEDS) -v

## e2e-soak: every fault scenario of test/e2e SOAK times (default 20) against one real apiserver, then a
## summary per scenario: trials, overlaps, token regressions, liveness misses and worst recovery time.
SOAK ?= 20
e2e-soak: kube-bins
	go test -count=1 -timeout=180m -v -run . ./test/e2e -args -soak=$(SOAK)

## kube: run a local apiserver; prints KUBECONFIG=<path>, stops on Ctrl-C.
kube: kube-bins
	go run ./hack/localkube

## image: the container image with no container engine (hack/image, go-containerregistry): a linux/amd64 + linux/arm64 index of the
## static binary alone, as 65532:65532, with the OCI labels, reproducible (times from the commit), into dist/image: an OCI layout
## (oci/), its archive for ctr/docker load (leasehold-<tag>.oci.tar), one docker-archive per platform and digests.txt.
## With Docker, the Dockerfile builds the same image (README, "Releasing").
IMAGE_DIR        ?= dist/image
IMAGE_REPOSITORY ?= ghcr.io/leasehold/leasehold
IMAGE_ARCHES     := amd64 arm64
# The image's every time, and its created label: the commit's time.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_BINS        := $(foreach a,$(IMAGE_ARCHES),$(IMAGE_DIR)/bin/linux_$(a)/leasehold)
image: $(IMAGE_BINS)
	cd hack/image && go run . -out $(abspath $(IMAGE_DIR)) -repository $(IMAGE_REPOSITORY) -tag $(IMAGE_TAG) -version $(VERSION) -revision $(REVISION) -created $(SOURCE_DATE_EPOCH) $(foreach a,$(IMAGE_ARCHES),linux/$(a)=$(abspath $(IMAGE_DIR))/bin/linux_$(a)/leasehold)

# go build decides whether a binary is stale.
$(IMAGE_DIR)/bin/linux_%/leasehold: FORCE
	CGO_ENABLED=$(BUILD_CGO_ENABLED) GOOS=linux GOARCH=$* go build $(BUILD_FLAGS) -ldflags '$(BUILD_LDFLAGS)' -o $@ ./cmd/sidecar
FORCE:

## bench: leasehold vs client-go's LeaderElector on one real apiserver (about 28 minutes, lease groups and handover included); writes every
## section it measures to docs/benchmarks/<section>.json and renders docs/benchmarks.md from all of them.
bench: kube-bins
	cd bench && go run . -out ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-footprint: only the footprint section of make bench (memory, binary, start-up, CPU; about 5 minutes), against leasehold
## before this work (FOOTPRINT_REF); replaces only docs/benchmarks/footprint.json, then renders docs/benchmarks.md.
FOOTPRINT_REF ?= 3f4e413
bench-footprint: kube-bins
	cd bench && go run . -only footprint -footprint-ref $(FOOTPRINT_REF) -footprint-gomemlimit 24MiB -out ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-overlap: only the overlap trials of make bench (partition and pause, OVERLAP_TRIALS each per implementation, default 10;
## about 5 minutes), judged by internal/testing/overlap; replaces only docs/benchmarks/overlap.json, then renders docs/benchmarks.md.
OVERLAP_TRIALS ?= 10
bench-overlap: kube-bins
	cd bench && go run . -only overlap -partitions $(OVERLAP_TRIALS) -pauses $(OVERLAP_TRIALS) -out ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-groups: only the lease-groups section of make bench (64 shards, 1 → 4 members, graceful exit, crash, requests,
## one process holding 256 Leases; leasehold side by side with one client-go LeaderElector per Lease; about 8 minutes);
## replaces only docs/benchmarks/groups.json, then renders docs/benchmarks.md.
bench-groups: kube-bins
	cd bench && go run . -only groups -out ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-handover: only the handover section of make bench (leader address, forwarding proxy, handover to a successor: 20 rolling
## updates each of leasehold HANDOVER=successor, leasehold default and client-go; release?to=; the proxy's added latency; 503s and
## fencing during handovers under load; about 3 minutes); replaces only docs/benchmarks/handover.json, then renders docs/benchmarks.md.
bench-handover: kube-bins
	cd bench && go run . -only handover -out ../docs/benchmarks.md $(BENCH_FLAGS)

## bench-fencing: the fencing policy's cost on the apiserver: p50/p99 of ConfigMap updates with the policy and without,
## interleaved, one run (about a minute); writes docs/benchmarks/fencing.json, then renders docs/benchmarks.md.
bench-fencing: kube-bins
	cd bench && go run ./fencing -out ../docs/benchmarks.md

## bench-render: render docs/benchmarks.md from docs/benchmarks/*.json through bench/benchdoc/benchmarks.md.tmpl, measuring nothing.
bench-render:
	cd bench && go run . -render -out ../docs/benchmarks.md

## help: list the targets and what they do (the default target; from the Makefile's `## target:` comments).
help:
	@echo "leasehold: make <target> (VERSION=$(VERSION))"
	@awk '/^## [A-Za-z0-9_.-]+:/ { t = $$2; sub(/:$$/, "", t); sub(/^## [^:]+: */, ""); printf "  %-18s %s\n", t, $$0; next } \
	     /^## / && t != "" { sub(/^## /, ""); printf "  %-18s %s\n", "", $$0; next } { t = "" }' $(MAKEFILE_LIST)

## build: the leasehold binary, into bin/leasehold, with the release flags (internal/buildflags/flags.env) and VERSION stamped.
build:
	CGO_ENABLED=$(BUILD_CGO_ENABLED) go build $(BUILD_FLAGS) -ldflags '$(BUILD_LDFLAGS)' -o bin/leasehold ./cmd/sidecar

## lint: gofmt (no diffs), go vet, staticcheck, go mod tidy -diff for every module (the product's and hack/*), helm lint on the chart.
lint: staticcheck-bin helm-bin
	@echo "gofmt -l"; files=$$(gofmt -l $$(find . -name '*.go' -not -path './.cache/*' -not -path './dist/*')); \
		if [ -n "$$files" ]; then echo "not gofmt'ed (run gofmt -w):"; echo "$$files"; exit 1; fi
	@$(MAKE) --no-print-directory vet
	$(STATICCHECK_BIN) ./...
	cd bench && $(STATICCHECK_BIN) ./...
	@for m in $(GO_MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && go mod tidy -diff) || exit 1; done
	$(HELM_BIN) lint --strict charts/leasehold

staticcheck-bin: $(STATICCHECK_BIN)

$(STATICCHECK_BIN):
	@mkdir -p $(dir $@)
	cd hack/staticcheck && go build -trimpath -o $@.tmp honnef.co/go/tools/cmd/staticcheck
	mv $@.tmp $@

## goreleaser-bin: build GoReleaser once per version (about 5 minutes cold on 2 cores).
goreleaser-bin: $(GORELEASER_BIN)

$(GORELEASER_BIN):
	@echo "Building GoReleaser $(GORELEASER_VERSION) (hack/goreleaser, from the Go module proxy): about 5 minutes on 2 cores, once per version."
	@mkdir -p $(dir $@)
	cd hack/goreleaser && go build -trimpath -ldflags "-s -w -X main.version=$(GORELEASER_VERSION) -X main.treeState=clean -X main.builtBy=leasehold-make" \
		-o $@.tmp github.com/goreleaser/goreleaser/v2
	mv $@.tmp $@

# syft writes the release's SBOMs (SPDX): built from the Go module proxy in
# its own tools module hack/syft, cached by version, like GoReleaser.
SYFT_VERSION := $(shell awk '{for (i = 1; i < NF; i++) if ($$i == "github.com/anchore/syft") {print $$(i+1); exit}}' hack/syft/go.mod)
SYFT_BIN     := $(CURDIR)/.cache/syft/$(SYFT_VERSION)/syft

## syft-bin: build syft (the SBOM generator of make release-snapshot) once per version (about 6 minutes cold on 2 cores).
syft-bin: $(SYFT_BIN)

$(SYFT_BIN):
	@mkdir -p $(dir $@)
	cd hack/syft && go build -trimpath -ldflags "-s -w -X main.version=$(SYFT_VERSION)" -o $@.tmp github.com/anchore/syft/cmd/syft
	mv $@.tmp $@

## release-check: goreleaser check: .goreleaser.yaml is valid for this GoReleaser, with nothing deprecated.
release-check: goreleaser-bin
	$(GORELEASER_BIN) check

## release-snapshot: a release without publishing: goreleaser release --snapshot (static linux/amd64 and linux/arm64 binaries,
## archives, an SPDX SBOM of each archive and checksums in dist/), each binary checked, the chart packaged (make chart), the image
## built (make image) and an SPDX SBOM of each of its platforms written (dist/image/leasehold-<tag>-linux-<arch>.spdx.json), all by syft.
release-snapshot: release-check syft-bin
	PATH=$(dir $(SYFT_BIN)):$$PATH LEASEHOLD_VERSION=$(VERSION) $(GORELEASER_ENV) $(GORELEASER_BIN) release --snapshot --clean --skip=publish
	@version=$(VERSION) && for bin in dist/leasehold_linux_*/leasehold; do \
		info=$$(go version -m $$bin) || exit 1; \
		if ! grep -q 'CGO_ENABLED=0' <<<"$$info" || ! grep -q -- '-trimpath=true' <<<"$$info" || ! grep -qaF -- "$$version" $$bin; then \
			echo "$$bin: want CGO_ENABLED=0, -trimpath and the version $$version"; echo "$$info"; exit 1; \
		fi; \
		echo "$$bin: $$(awk '$$2 ~ /^GOARCH=/ {print $$2}' <<<"$$info"), CGO_ENABLED=0, -trimpath, version $$version"; \
	done
	cd dist && sha256sum -c checksums.txt
	@$(MAKE) --no-print-directory chart $(RELEASE_STAMP)
	@$(MAKE) --no-print-directory image $(RELEASE_STAMP)
	@$(MAKE) --no-print-directory image-sboms $(RELEASE_STAMP)
	@for sbom in dist/*.spdx.json; do grep -q '"name": *"github.com/leasehold/leasehold"' $$sbom || { echo "$$sbom does not list leasehold's module"; exit 1; }; done

## release-notes: print the section of CHANGELOG.md for VERSION (without its heading): the release's notes on GitHub.
# The section's body, from CHANGELOG.md: between its heading and the next
# section or the links; it fails when there is no such section.
release_notes = awk -v want='\#\# [$(IMAGE_TAG)]' 'index($$0, want) == 1 {f = 1; found = 1; next} /^\#\# \[/ || /^\[[^]]+\]: / {f = 0} \
	f {line[++n] = $$0; if ($$0 != "") {last = n; if (!first) first = n}} \
	END {if (!found) {print "CHANGELOG.md has no section \#\# [$(IMAGE_TAG)]" > "/dev/stderr"; exit 1} for (i = first; i <= last; i++) print line[i]}' CHANGELOG.md
release-notes:
	@$(release_notes)

## release: publish the release at its tag vX.Y.Z (HEAD, clean), with GITHUB_TOKEN set: goreleaser release (the archives, SBOMs and
## checksums on a GitHub release whose notes are make release-notes'); then push the image and the chart (README, "Releasing").
RELEASE_NOTES := $(CURDIR)/.cache/release-notes-$(VERSION).md
release: release-check syft-bin
	@tag=$$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) && [ "$$tag" = '$(VERSION)' ] || \
		{ echo "make release: HEAD is not at a release tag, or is dirty (VERSION $(VERSION))"; exit 1; }
	@mkdir -p $(dir $(RELEASE_NOTES)) && $(release_notes) > $(RELEASE_NOTES)
	PATH=$(dir $(SYFT_BIN)):$$PATH LEASEHOLD_VERSION=$(VERSION) $(GORELEASER_BIN) release --clean --release-notes $(RELEASE_NOTES)

## image-sboms: an SPDX SBOM of each platform of make image's image, by syft (make release-snapshot runs it after make image).
IMAGE_SBOMS := $(foreach a,$(IMAGE_ARCHES),$(IMAGE_DIR)/leasehold-$(IMAGE_TAG)-linux-$(a).spdx.json)
image-sboms: syft-bin $(IMAGE_SBOMS)

$(IMAGE_DIR)/leasehold-$(IMAGE_TAG)-linux-%.spdx.json: FORCE
	SYFT_CHECK_FOR_APP_UPDATE=false $(SYFT_BIN) scan oci-dir:$(IMAGE_DIR)/oci --platform linux/$* --quiet --output spdx-json=$@
	@grep -q '"name": *"github.com/leasehold/leasehold"' $@ || { echo "$@ does not list leasehold's module"; exit 1; }

## chart: package the Helm chart into dist/, its version and appVersion stamped from VERSION (see CHART_VERSION).
chart: helm-bin
	@mkdir -p dist
	$(HELM_BIN) package charts/leasehold --version $(CHART_VERSION) --app-version $(IMAGE_TAG) --destination dist

# The single node (hack/node): one per machine, its state in NODE_STATE.
NODE_STATE        ?= /var/lib/leasehold-node
CHART_APP_VERSION := $(shell awk '$$1 == "appVersion:" {gsub(/"/, "", $$2); print $$2}' charts/leasehold/Chart.yaml)
NODE_ENV = LEASEHOLD_CNI_DIR=$(CNI_DIR) LEASEHOLD_NODE_STATE=$(NODE_STATE) LEASEHOLD_ROOT=$(CURDIR) \
	KUBE_MODULE_DIR=$$(cd hack/kube && go list -m -f '{{.Dir}}' k8s.io/kubernetes) \
	LEASEHOLD_IMAGE_ARCHIVE=$(abspath $(IMAGE_DIR))/leasehold-$(IMAGE_TAG).oci.tar \
	LEASEHOLD_IMAGE_NAME=$(IMAGE_REPOSITORY):$(IMAGE_TAG) LEASEHOLD_CHART_APP_VERSION=$(CHART_APP_VERSION)

## node: start a real single-node Kubernetes (hack/kube's version) on this machine (hack/node, as root; about 15 s once built): etcd,
## kube-apiserver, kube-controller-manager, kube-scheduler, containerd + runc (Debian's), the kubelet, kube-proxy; make image's image
## and locally built test images imported, nothing pulled; catch-all unreachable routes and a forwarding guard first, so no
## packet leaves the machine. Prints KUBECONFIG=<path>; make node-down removes everything.
node: node-bins cni-bin image
	$(NODE_ENV) hack/node/up.sh

## node-down: stop the single node and remove everything it created (routes, bridges, iptables chains, mounts, cgroups, state).
node-down:
	$(NODE_ENV) hack/node/down.sh

## node-demo: make node, then install the chart with its demo app (helm install demo charts/leasehold --set demo.enabled=true)
## into the namespace demo, and say how to watch it; make node-down ends it.
node-demo: node helm-bin
	KUBECONFIG=$(NODE_STATE)/etc/admin.kubeconfig $(HELM_BIN) install demo charts/leasehold --namespace demo --create-namespace \
		--set demo.enabled=true --wait --timeout 3m
	@echo; echo "export KUBECONFIG=$(NODE_STATE)/etc/admin.kubeconfig; alias kubectl=$(KUBE_ASSETS)/kubectl"; \
	echo "kubectl -n demo get lease demo-leasehold -o wide        # the holder (the first leader: one lease duration, 15s, after start)"; \
	echo "kubectl -n demo logs -f -l app.kubernetes.io/component=demo -c app --prefix"; \
	echo "kubectl -n demo delete pod <the leader's pod>            # the other takes over within a round trip"; \
	echo "make node-down                                           # removes everything"

## node-e2e: the scenarios of test/node on a real single node started for them (make node, then make node-down, also on failure):
## helm install, leader-pod deletions, rollouts, the leader label behind a Service, leasehold run, faults, memory, every example
## manifest; each logs its figures (FIGURES lines, repeated at the end). NODE_E2E_RUN narrows them (go test -run).
## With LEASEHOLD_BENCH_JSON=docs/benchmarks, TestMemoryBesideClientGo writes its figures there (node.json) and
## docs/benchmarks.md is rendered again.
NODE_E2E_RUN ?= .
LEASEHOLD_BENCH_JSON ?=
node-e2e: node-bins cni-bin image helm-bin
	@set -o pipefail; trap '$(NODE_ENV) hack/node/down.sh' EXIT; \
	$(NODE_ENV) hack/node/up.sh && \
	{ LEASEHOLD_NODE_STATE=$(NODE_STATE) LEASEHOLD_NODE_KUBECONFIG=$(NODE_STATE)/etc/admin.kubeconfig LEASEHOLD_BENCH_JSON=$(LEASEHOLD_BENCH_JSON) \
		go test -count=1 -v -timeout 30m -run '$(NODE_E2E_RUN)' ./test/node \
		2>&1 | tee $(NODE_STATE)/e2e.log; status=$$?; } && \
	{ echo; grep -h 'FIGURES' $(NODE_STATE)/e2e.log | sed 's/^ *[a-z_]*\.go:[0-9]*: //'; exit $$status; }
	@$(MAKE) --no-print-directory check-no-leftovers
	@if [ -n "$(LEASEHOLD_BENCH_JSON)" ]; then cd bench && go run . -render -out $(abspath $(LEASEHOLD_BENCH_JSON)).md; fi

## check-no-leftovers: fail if the tests left an etcd or kube-apiserver running, or anything of the single node behind.
check-no-leftovers:
	@$(NODE_ENV) hack/node/check-leftovers.sh
	@if pgrep -f '^$(KUBE_ASSETS)/(etcd|kube-apiserver) ' >/dev/null; then \
		echo "leftover processes from the test harness:"; pgrep -fa '^$(KUBE_ASSETS)/(etcd|kube-apiserver) '; exit 1; \
	fi
