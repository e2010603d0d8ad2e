#!/usr/bin/env bash
# Fails when the tree is not as the tools would leave it: gofmt, go vet,
# go mod tidy (main and tool modules), and generated code and manifests
# (deepcopy, apply configurations, CRDs, RBAC, webhook configuration). It compares content before
# and after regeneration, so it works on a dirty tree too.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail=0

unformatted="$(gofmt -l $(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go') 2>/dev/null || true)"
if [[ -n "$unformatted" ]]; then
  echo "verify: gofmt needed on:" >&2
  echo "$unformatted" >&2
  fail=1
fi

go vet ./... || fail=1

for mod in . hack/tools/controlplane hack/tools/etcd hack/tools/controller-gen hack/tools/olm-v*; do
  if ! (cd "$mod" && go mod tidy -diff >/dev/null); then
    echo "verify: go mod tidy needed in $mod (run: (cd $mod && go mod tidy))" >&2
    fail=1
  fi
done

generated=(api config/crd config/rbac config/webhook)
snapshot() { mkdir -p "${generated[@]}"; find "${generated[@]}" -type f -print0 | sort -z | xargs -0 sha256sum; }
before="$(snapshot)"
make --no-print-directory generate manifests >/dev/null
after="$(snapshot)"
if [[ "$before" != "$after" ]]; then
  echo "verify: generated files were stale and have been regenerated; review and commit:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  fail=1
fi

if [[ $fail -ne 0 ]]; then
  exit 1
fi
echo "verify: ok"
