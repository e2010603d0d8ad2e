#!/usr/bin/env bash
# Builds OLM v1 — operator-controller and catalogd — of one release from the
# Go module proxy into a cache directory outside the clone, keyed by version,
# and prints that directory. A second run finds the binaries and returns at
# once.
#
#   hack/olm.sh [VERSION]    VERSION: v1.2.0 (the default) or v1.5.1
#
# Each release has its own wrapper module, hack/tools/olm-<VERSION> (made with
# `go get -tool <cmd>@<VERSION>`; its go.sum pins every module), so the
# releases the suite runs against are the directories hack/tools/olm-v*.
#
# The directory holds:
#   operator-controller, catalogd   the binaries (CGO_ENABLED=0, built with the
#                                   containers_image_openpgp tag, as upstream's
#                                   Makefile builds them)
#   crds/                           the ClusterExtension and ClusterCatalog CRDs
#                                   of the same release (from v1.5.1 on, the
#                                   "experimental" ones: they add the fields of
#                                   the alpha feature gates, spec.config)
#
# v1.6.0 and later need pkg.package-operator.run/boxcutter, which the proxy
# does not serve. See docs/development.md.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/hack/lib.sh"
module=github.com/operator-framework/operator-controller

want="${1:-v1.2.0}"
mod="$root/hack/tools/olm-$want"
if [[ ! -f "$mod/go.mod" ]]; then
  known=("$root"/hack/tools/olm-v*)
  known=("${known[@]##*/olm-}")
  echo "olm.sh: no wrapper module hack/tools/olm-$want (there are: ${known[*]})" >&2
  exit 1
fi
version="$(module_version "$mod/go.mod" "$module")"
if [[ "$version" != "$want" ]]; then
  echo "olm.sh: $mod/go.mod requires $module ${version:-at no version}, not $want" >&2
  exit 1
fi

cache="$(oria_cache_dir)"
dir="$cache/olm/operator-controller-${version}"
print_if_built "$dir" operator-controller catalogd crds/olm.operatorframework.io_clusterextensions.yaml crds/olm.operatorframework.io_clustercatalogs.yaml
make_build_dir "$cache/olm"

echo "olm.sh: building operator-controller and catalogd ${version} into $dir (first time only, ~5 min per release on two cores)" >&2
start=$SECONDS
# The checksum of operator-controller v1.5.1 is not in the checksum database;
# the wrapper's go.sum pins it, so the database need not (and cannot) vouch
# for that one module.
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}$module"
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -tags containers_image_openpgp -ldflags "-s -w" -o "$tmp/" \
  "$module/cmd/operator-controller" "$module/cmd/catalogd")
src="$(cd "$mod" && go list -m -f '{{.Dir}}' "$module")"
# v1.2.0 keeps one CRD per kind under crd/bases; later releases generate a
# standard and an experimental one under crd/standard and crd/experimental.
crd() {
  local d="$src/config/base/$1/crd" f
  for f in "$d/experimental/$2" "$d/bases/$2"; do
    if [[ -f "$f" ]]; then
      echo "$f"
      return
    fi
  done
  echo "olm.sh: no $2 under $d" >&2
  return 1
}
mkdir -p "$tmp/crds"
cp "$(crd operator-controller olm.operatorframework.io_clusterextensions.yaml)" \
   "$(crd catalogd olm.operatorframework.io_clustercatalogs.yaml)" "$tmp/crds/"
chmod -R u+w "$tmp/crds"
echo "olm.sh: built in $((SECONDS - start))s" >&2

mkdir -p "$dir/crds"
mv -f "$tmp/operator-controller" "$tmp/catalogd" "$dir/"
mv -f "$tmp/crds/"* "$dir/crds/"
echo "$dir"
