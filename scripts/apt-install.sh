# Sourced by the setup scripts: apt_install NAME... installs Debian packages, with sudo when not root.
apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "$(basename "$0"): need root or sudo to install: $*" >&2; return 1; }
    sudo="sudo"
  fi
  echo "$(basename "$0"): installing $*"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
