# What hack/controlplane.sh, hack/kubectl.sh and hack/olm.sh share: each
# builds tools from the Go module proxy once, into a cache directory outside
# the clone keyed by version, and prints where they are. Sourced, not run.

# oria_cache_dir prints the cache's root ($ORIA_CACHE_DIR, else
# $XDG_CACHE_HOME/oria, else ~/.cache/oria).
oria_cache_dir() {
  echo "${ORIA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/oria}"
}

# module_version GO_MOD MODULE prints the version GO_MOD requires MODULE at
# (nothing when it does not).
module_version() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit}' "$1"
}

# print_if_built DIR FILE... prints DIR and exits the script when every FILE
# is there (and not empty): the build was made before.
print_if_built() {
  local dir="$1" f
  shift
  for f in "$@"; do
    [[ -s "$dir/$f" ]] || return 0
  done
  echo "$dir"
  exit 0
}

# make_build_dir PARENT sets tmp to a new directory under PARENT (created),
# removed when the script exits: a build lands there, and moves into the
# cache only once complete.
make_build_dir() {
  mkdir -p "$1"
  tmp="$(mktemp -d "$1/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
}

# controlplane_dir ROOT prints the cache directory of the control plane the
# wrapper modules under ROOT/hack/tools pin (kube-apiserver,
# kube-controller-manager, etcd, and kubectl when hack/kubectl.sh built it),
# and sets k8s_version.
controlplane_dir() {
  local etcd_version
  k8s_version="$(module_version "$1/hack/tools/controlplane/go.mod" k8s.io/kubernetes)"
  etcd_version="$(module_version "$1/hack/tools/etcd/go.mod" go.etcd.io/etcd/server/v3)"
  if [[ -z "$k8s_version" || -z "$etcd_version" ]]; then
    echo "cannot read versions from $1/hack/tools/controlplane/go.mod and $1/hack/tools/etcd/go.mod" >&2
    return 1
  fi
  echo "$(oria_cache_dir)/controlplane/k8s-${k8s_version}_etcd-${etcd_version}"
}

# kube_ldflags VERSION prints the -ldflags that stamp a Kubernetes binary
# with VERSION (v1.X.Y), as Kubernetes' own build does: `kubectl version`
# and the API server's /version report it.
kube_ldflags() {
  local minor="${1#v1.}"
  minor="${minor%%.*}"
  echo "-s -w \
 -X k8s.io/component-base/version.gitVersion=$1 \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$1 \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
}
