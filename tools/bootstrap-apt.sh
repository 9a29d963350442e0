# Sourced by the Debian-package steps of tools/bootstrap.d: apt_step installs one package unless it is there.
#
#   apt_step PACKAGE 'TEST' 'WHAT IT IS FOR' 'WITHOUT IT'
#
# Returns at once when the shell test TEST succeeds; installs PACKAGE with apt-get as root; elsewhere (not root,
# no apt-get) prints how to install it and what happens without it, and returns 0: the step never fails the
# bootstrap for a package only some tests need. After an install TEST must hold, or the step fails.
apt_step() {
  local pkg="$1" test="$2" what="$3" without="$4"
  if eval "$test"; then
    return 0
  fi
  if [[ "$(id -u)" != "0" ]]; then
    printf '\033[1;33m[bootstrap]\033[0m %s\n' \
      "$pkg is not installed and this is not root: run 'sudo apt-get update && sudo apt-get install -y $pkg' ($without)" >&2
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    printf '\033[1;33m[bootstrap]\033[0m %s\n' "no apt-get: install $pkg with this system's package manager ($without)" >&2
    return 0
  fi
  printf '\033[1;34m[bootstrap]\033[0m %s\n' "installing Debian $pkg ($what)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
  eval "$test" || { echo "$pkg missing after apt-get install $pkg" >&2; return 1; }
}
