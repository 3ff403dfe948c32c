# Shared by the README commands: install a Debian package when the command it provides is missing.
# Usage: source scripts/_debian.sh; ensure_debian_package COMMAND PACKAGE... (WHY)
ensure_debian_package() {
  local command="$1" why="${*: -1}"
  local packages=("${@:2:$#-2}")
  if command -v "$command" >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${packages[*]} with apt-get: $why" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
  else
    echo "${packages[*]} missing and cannot be installed here (not root, or no apt-get): $why" >&2
  fi
}
