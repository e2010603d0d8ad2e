#!/usr/bin/env bash
# Builds promtool (Prometheus' rule checker and rule unit tester) from the Go
# module proxy into a cache directory outside the clone, keyed by version,
# and prints the binary's path. A second run finds it and returns at once.
# test/e2e (TestExampleAlerts) runs the example alerts of
# config/prometheus/alerts.yaml through it.
#
# The version comes from hack/tools/promtool/go.mod (github.com/prometheus/
# prometheus v0.316.0 is Prometheus 3.16); its go.sum pins every dependency.
# Built with Prometheus' remove_all_sd tag, without the service-discovery
# plugins (a dozen cloud providers' SDKs), which checking and unit-testing
# rules never use. promtool still links client-go (Kubernetes discovery) and
# the AWS and Azure clients of remote write: a cold build (empty Go build
# cache) takes about 6 CPU-minutes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/hack/lib.sh"
mod="$root/hack/tools/promtool"
module=github.com/prometheus/prometheus

version="$(module_version "$mod/go.mod" "$module")"
if [[ -z "$version" ]]; then
  echo "promtool.sh: cannot read the version of $module from $mod/go.mod" >&2
  exit 1
fi

cache="$(oria_cache_dir)"
dir="$cache/promtool/prometheus-${version}"
if [[ -x "$dir/promtool" ]]; then
  echo "$dir/promtool"
  exit 0
fi
make_build_dir "$cache/promtool"

echo "promtool.sh: building promtool from $module ${version} into $dir (first time only, about 5 min on 2 cores)" >&2
start=$SECONDS
(cd "$mod" && CGO_ENABLED=0 go build -tags remove_all_sd -trimpath -ldflags "-s -w" -o "$tmp/promtool" "$module/cmd/promtool")
echo "promtool.sh: built in $((SECONDS - start))s" >&2

mkdir -p "$dir"
mv -f "$tmp/promtool" "$dir/promtool"
echo "$dir/promtool"
