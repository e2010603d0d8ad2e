# oria — see README.md. Every target works on a fresh machine with only Go.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

CONTROLLER_GEN := go tool -modfile=hack/tools/controller-gen/go.mod controller-gen
LOCAL_DIR := $(CURDIR)/.local
# go test stops a package after 10 minutes by default; the end-to-end package runs longer on a
# loaded 2-core machine.
GO_TEST_FLAGS ?= -count=1 -timeout=30m
# `make test` runs TEST_P test binaries at once (go test -p; its default is the number of cores),
# the longest first: go test starts packages in the order it is given them (./... adds the rest,
# sorted). The long suites mostly wait on their control planes, so a third binary beside them
# fills the cores; docs/development.md, "Where a warm run spends its time", has the figures.
TEST_P ?= 3
TEST_FIRST := ./test/e2e ./test/seqfuzz ./test/olm ./test/install ./hack/image ./internal/controller/scopeinstance
BENCH_FLAGS ?=

# The image `make docker-build`, `build-installer` and `deploy` use.
IMG ?= oria:latest
# The version stamped into oria (`oria --version`) and the kubectl plugin
# (`kubectl oria version`).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION_LDFLAGS := -X main.version=$(VERSION) -X github.com/operator-framework/oria/internal/cli.Version=$(VERSION)
CONTAINER_TOOL ?= docker
# `make image` / `make release`: the repository the printed reference and a release's
# install.yaml name when IMG names no registry (IMG=oria:latest): the image is then only in
# dist/image, to be pushed there later (`crane push dist/image ghcr.io/operator-framework/oria:v0.1.0`
# or `skopeo copy --all oci:dist/image:v0.1.0 docker://ghcr.io/operator-framework/oria:v0.1.0`);
# IMG=<registry>/oria:<tag> pushes while building. Timestamps are SOURCE_DATE_EPOCH if set, else
# the commit time: two builds of one commit give the same digest.
RELEASE_REPO ?= ghcr.io/operator-framework/oria
# Where a release's files are downloaded from: the krew manifest's URIs are $(RELEASE_URL)/<archive>.
RELEASE_URL ?= https://github.com/operator-framework/oria/releases/download/$(VERSION)
KUBECTL ?= kubectl
KUSTOMIZE := go run ./hack/kustomize

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for api/.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt applyconfiguration:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs (config/crd/bases), oria's RBAC (config/rbac) and its webhook configuration (config/webhook).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=oria-manager webhook paths=./internal/... output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -l -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: build
build: ## Build bin/oria and the kubectl plugin bin/kubectl-oria, VERSION stamped.
	go build -ldflags "$(VERSION_LDFLAGS)" -o bin/oria ./cmd/oria
	go build -ldflags "$(VERSION_LDFLAGS)" -o bin/kubectl-oria ./cmd/kubectl-oria

.PHONY: localcluster
localcluster:
	go build -o bin/localcluster ./hack/localcluster

.PHONY: controlplane
controlplane: ## Build (once, cached outside the clone) etcd, kube-apiserver and kube-controller-manager.
	@hack/controlplane.sh >/dev/null

.PHONY: kubectl
kubectl: ## Build (once, cached beside the control plane) the kubectl of the control plane's Kubernetes release; make run and local-up link it into .local/bin.
	@hack/kubectl.sh >/dev/null

# Every release with a wrapper module hack/tools/olm-<version>; test/olm runs against each.
OLM_VERSIONS := $(patsubst hack/tools/olm-%,%,$(wildcard hack/tools/olm-v*))

.PHONY: olm
olm: ## Build (once, cached outside the clone) OLM v1: operator-controller and catalogd v1.2.0 and v1.5.1, for test/olm.
	@for v in $(OLM_VERSIONS); do hack/olm.sh $$v >/dev/null || exit 1; done

##@ Run

# `make run` stops (oria, then the local control plane) on Ctrl-C and on SIGINT or SIGTERM sent
# to make alone. make passes SIGTERM on to the recipe, which execs localcluster; on SIGINT it waits
# for the recipe and deletes its target, RUN_STOP_FILE, which localcluster creates and watches
# (hack/localcluster/stop.go). Metrics and health probes listen on loopback only, and not on
# 8080: kubectl with no kubeconfig talks to localhost:8080.
RUN_STOP_FILE := $(CURDIR)/bin/.make-run
RUN_METRICS_ADDRESS ?= 127.0.0.1:8082
RUN_PROBE_ADDRESS ?= 127.0.0.1:8081
# What make run and make local-up link into .local/bin, which the exports they print put first on
# PATH: the kubectl of the control plane's release, and the plugin.
LOCAL_LINKS = --link "$$(hack/kubectl.sh)/kubectl" --link "$(CURDIR)/bin/kubectl-oria"

.PHONY: run
run: $(RUN_STOP_FILE) ## Run oria: against the cluster of KUBECONFIG if set, else on a local control plane under .local/.

$(RUN_STOP_FILE): build localcluster controlplane kubectl
	exec bin/localcluster run --dir "$(LOCAL_DIR)" --assets "$$(hack/controlplane.sh)" --stop-file "$@" $(LOCAL_LINKS) -- \
		bin/oria --metrics-bind-address=$(RUN_METRICS_ADDRESS) --metrics-secure=false --health-probe-bind-address=$(RUN_PROBE_ADDRESS) $(ARGS)

# GUARD=false starts the control plane without oria's escalation guard, for a release's
# install.yaml (docs/operations.md, "A local smoke test").
GUARD ?= true

.PHONY: local-up
local-up: build localcluster controlplane kubectl ## Start the local control plane in the background (kubeconfig: .local/kubeconfig); GUARD=false: without oria's guard, for install.yaml.
	bin/localcluster up --dir "$(LOCAL_DIR)" --assets "$$(hack/controlplane.sh)" --guard=$(GUARD) $(LOCAL_LINKS)

.PHONY: local-down
local-down: localcluster ## Stop the local control plane and remove its state (.local: etcd data, certificates, kubeconfig, logs, bin/).
	bin/localcluster down --dir "$(LOCAL_DIR)"

.PHONY: build-release
build-release: ## Build bin/oria and bin/kubectl-oria as released: -trimpath, stripped, version stamped (VERSION=...).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o bin/oria ./cmd/oria
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o bin/kubectl-oria ./cmd/kubectl-oria

##@ Deploy

.PHONY: docker-build
docker-build: ## Build oria's image IMG (default oria:latest) with VERSION stamped; CONTAINER_TOOL=podman works too.
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: image
image: ## Build oria's image in Go, no daemon: linux/amd64+arm64 in dist/image (OCI layout), pushed if IMG names a registry; prints <repository>@<digest>.
	go run ./hack/image -img '$(IMG)' -repo '$(RELEASE_REPO)' -version '$(VERSION)' -ldflags '-s -w $(VERSION_LDFLAGS)' -o dist/image

.PHONY: release
release: ## Release VERSION=vX.Y.Z in dist/: the image (as `make image`), install.yaml pinned to it by digest, kubectl-oria archives, krew manifest.
	@[[ "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]] || { echo "make release: want VERSION=vX.Y.Z, not '$(VERSION)'" >&2; exit 1; }
	ref="$$($(MAKE) --no-print-directory -s image)" && $(MAKE) --no-print-directory build-installer IMG="$$ref"
	go run ./hack/release -version '$(VERSION)' -url '$(RELEASE_URL)' -ldflags '-s -w $(VERSION_LDFLAGS)' -o dist

.PHONY: build-installer
build-installer: ## Write dist/install.yaml: CRDs, RBAC, Deployment, PodDisruptionBudget, webhook (oria makes its certificate: no cert-manager), with image IMG.
	$(KUSTOMIZE) -image $(IMG) -version $(VERSION) -o dist/install.yaml config/default

.PHONY: deploy
deploy: build-installer ## Install oria with image IMG on the cluster of KUBECONFIG (needs kubectl).
	$(KUBECTL) apply --server-side -f dist/install.yaml

.PHONY: undeploy
undeploy: ## Remove what `make deploy` installed (the CRDs too, and with them every oria object).
	$(KUSTOMIZE) -image $(IMG) config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Test

.PHONY: test
test: controlplane olm verify ## Everything, deterministically: checks, unit (fuzz seeds and committed findings included), integration (envtest) and end-to-end tests.
	KUBEBUILDER_ASSETS="$$(hack/controlplane.sh)" go test $(GO_TEST_FLAGS) -p $(TEST_P) $(TEST_FIRST) ./...

# How long `make fuzz` explores each fuzz target (five targets). `make test` runs no exploration:
# plain `go test` runs each target's seeds (f.Add) and the committed findings under
# testdata/fuzz/, so its verdict never depends on luck. Explore with `make fuzz FUZZTIME=5m`;
# commit what it finds (testdata/fuzz/FuzzX/<hash>, as go test writes it) with the fix.
FUZZTIME ?= 10s

.PHONY: fuzz
fuzz: ## Explore each Go fuzz target for FUZZTIME (default 10s) for new failing inputs; not part of `make test`.
	go test -short -run='^$$' -fuzz='^FuzzScopeInstanceSpecUnmarshalJSON$$' -fuzztime=$(FUZZTIME) ./api/v1alpha1
	go test -short -run='^$$' -fuzz='^FuzzInstanceBindings$$' -fuzztime=$(FUZZTIME) ./internal/binding
	go test -short -run='^$$' -fuzz='^FuzzValidateTemplate$$' -fuzztime=$(FUZZTIME) ./internal/binding
	go test -short -run='^$$' -fuzz='^FuzzCompile$$' -fuzztime=$(FUZZTIME) ./internal/policy
	go test -short -run='^$$' -fuzz='^FuzzGuardDecode$$' -fuzztime=$(FUZZTIME) ./internal/admission

# `make fuzz-sequences` explores new random sequences of test/seqfuzz (the attacker against oria
# with its guard, on the local control plane) for FUZZTIME; `make test` runs only its fixed seeds.
.PHONY: fuzz-sequences
fuzz-sequences: controlplane ## Explore new attack sequences (test/seqfuzz) for FUZZTIME against oria on the local control plane; reports sequences, steps and violations (seed, shortest failing sequence).
	KUBEBUILDER_ASSETS="$$(hack/controlplane.sh)" ORIA_SEQFUZZ_TIME=$(FUZZTIME) go test -count=1 -timeout=0 -run='^TestExploreSequences$$' -v ./test/seqfuzz

.PHONY: verify
verify: ## Fail if gofmt, go vet, go mod tidy or generated files are stale.
	hack/verify.sh

.PHONY: test-install
test-install: controlplane build-installer ## Install tests on dist/install.yaml (IMG): dry-run on the local control plane, oria as its ServiceAccount, two replicas (HA).
	ORIA_INSTALL_YAML="$(CURDIR)/dist/install.yaml" ORIA_INSTALL_IMAGE="$(IMG)" KUBEBUILDER_ASSETS="$$(hack/controlplane.sh)" go test $(GO_TEST_FLAGS) -v ./test/install

.PHONY: bench
bench: build controlplane ## Scale benchmark against the local control plane (see docs/benchmarks.md).
	KUBEBUILDER_ASSETS="$$(hack/controlplane.sh)" go run ./test/bench $(BENCH_FLAGS)
