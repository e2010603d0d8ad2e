#!/usr/bin/env bash
# Builds kubectl of the Kubernetes release the local control plane runs
# (k8s.io/kubernetes/cmd/kubectl, the version hack/tools/controlplane/go.mod
# pins) from the Go module proxy into the control plane's cache directory
# (hack/controlplane.sh), and prints that directory. A second run finds it and
# returns at once. `make run` and `make local-up` use it; `make test` does not.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/hack/lib.sh"
cp_mod="$root/hack/tools/controlplane"

dir="$(controlplane_dir "$root")"
k8s_version="$(module_version "$cp_mod/go.mod" k8s.io/kubernetes)"
print_if_built "$dir" kubectl
make_build_dir "$(dirname "$dir")"

echo "kubectl.sh: building kubectl ${k8s_version} into $dir (first time only, ~5 min)" >&2
start=$SECONDS
(cd "$cp_mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$(kube_ldflags "$k8s_version")" -o "$tmp/kubectl" \
  k8s.io/kubernetes/cmd/kubectl)
echo "kubectl.sh: built in $((SECONDS - start))s" >&2

mkdir -p "$dir"
mv -f "$tmp/kubectl" "$dir/kubectl"
echo "$dir"
