#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from the Go module
# proxy (no prebuilt downloads are reachable here) into a cache directory that
# lives outside the clone and is keyed by version, then prints that directory.
# A second run finds the binaries and returns at once.
#
# Versions come from the wrapper modules' go.mod files, so bumping a version
# there is all it takes to get a fresh, separately cached build. The matching
# kubectl is built apart, on demand, into the same directory (hack/kubectl.sh):
# `make test` does not need it.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/hack/lib.sh"
cp_mod="$root/hack/tools/controlplane"
etcd_mod="$root/hack/tools/etcd"

k8s_version="$(module_version "$cp_mod/go.mod" k8s.io/kubernetes)"
etcd_version="$(module_version "$etcd_mod/go.mod" go.etcd.io/etcd/server/v3)"
if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
  echo "controlplane.sh: cannot read versions from $cp_mod/go.mod and $etcd_mod/go.mod" >&2
  exit 1
fi

cache="$(oria_cache_dir)"
dir="$cache/controlplane/k8s-${k8s_version}_etcd-${etcd_version}"
bins=(etcd kube-apiserver kube-controller-manager)
print_if_built "$dir" "${bins[@]}"
make_build_dir "$cache/controlplane"

echo "controlplane.sh: building kube-apiserver, kube-controller-manager ${k8s_version} and etcd ${etcd_version} into $dir (first time only, ~10 min)" >&2
start=$SECONDS
(cd "$cp_mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$(kube_ldflags "$k8s_version")" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
(cd "$etcd_mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
echo "controlplane.sh: built in $((SECONDS - start))s" >&2

mkdir -p "$dir"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$dir/$b"; done
echo "$dir"
