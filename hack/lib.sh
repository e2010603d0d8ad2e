# What hack/controlplane.sh and hack/olm.sh share: each
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
