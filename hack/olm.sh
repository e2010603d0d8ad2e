#!/usr/bin/env bash
# Builds OLM v1 — operator-controller and catalogd — from the Go module proxy
# into a cache directory outside the clone, keyed by version, and prints that
# directory. A second run finds the binaries and returns at once.
#
# The directory holds:
#   operator-controller, catalogd   the binaries (CGO_ENABLED=0, built with the
#                                   containers_image_openpgp tag, as upstream's
#                                   Makefile builds them)
#   crds/                           the ClusterExtension and ClusterCatalog CRDs
#                                   of the same release
#
# The version comes from hack/tools/olm/go.mod. It is v1.2.0 because it is the
# only operator-controller release the module proxy serves that builds from
# the proxy alone: v1.10.0 and v1.11.0 need pkg.package-operator.run/boxcutter,
# which the proxy does not serve. See docs/development.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/hack/lib.sh"
mod="$root/hack/tools/olm"
module=github.com/operator-framework/operator-controller

version="$(module_version "$mod/go.mod" "$module")"
if [[ -z "$version" ]]; then
  echo "olm.sh: cannot read the version of $module from $mod/go.mod" >&2
  exit 1
fi

cache="$(oria_cache_dir)"
dir="$cache/olm/operator-controller-${version}"
print_if_built "$dir" operator-controller catalogd crds/olm.operatorframework.io_clusterextensions.yaml crds/olm.operatorframework.io_clustercatalogs.yaml
make_build_dir "$cache/olm"

echo "olm.sh: building operator-controller and catalogd ${version} into $dir (first time only, ~10 min)" >&2
start=$SECONDS
# The wrapper module requires exactly the versions of the release's go.mod
# (it was made with `go get -tool <cmd>@<version>`), and its go.sum pins them.
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -tags containers_image_openpgp -ldflags "-s -w" -o "$tmp/" \
  "$module/cmd/operator-controller" "$module/cmd/catalogd")
src="$(cd "$mod" && go list -m -f '{{.Dir}}' "$module")"
mkdir -p "$tmp/crds"
cp "$src/config/base/operator-controller/crd/bases/olm.operatorframework.io_clusterextensions.yaml" \
   "$src/config/base/catalogd/crd/bases/olm.operatorframework.io_clustercatalogs.yaml" "$tmp/crds/"
chmod -R u+w "$tmp/crds"
echo "olm.sh: built in $((SECONDS - start))s" >&2

mkdir -p "$dir/crds"
mv -f "$tmp/operator-controller" "$tmp/catalogd" "$dir/"
mv -f "$tmp/crds/"* "$dir/crds/"
echo "$dir"
