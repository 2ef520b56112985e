# Shared by tools/test, tools/demo, tools/install: install what is missing
# (Debian 12 packages only) and find Bazel. Source it; it is idempotent and
# costs one dpkg query when nothing is missing.

NMAD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NMAD_PACKAGES=(bazel-bootstrap bazel-rules-java bazel-platforms g++ pkg-config
  libfabric-dev libfabric-bin libhwloc-dev hwloc libboost-dev doctest-dev
  python3 python3-matplotlib openssh-client openssh-server mpich
  clang libclang-rt-14-dev)  # the last two: libFuzzer targets (tools/fuzz)

nmad_install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >&2 || { echo "setup: apt-get update failed" >&2; return 1; }
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    { echo "setup: could not install ${missing[*]}" >&2; return 1; }
}

nmad_setup() {
  nmad_install_packages "${NMAD_PACKAGES[@]}" || exit 1
  BAZEL="${BAZEL:-bazel}"
  command -v "$BAZEL" >/dev/null || { echo "setup: bazel not found after install" >&2; exit 1; }
  # A disk cache outside the tree keeps repeated builds fast.
  BAZEL_FLAGS=(--disk_cache="${HOME:-/root}/.cache/nmad-bazel-disk")
}
