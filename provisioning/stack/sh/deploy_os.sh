#!/usr/bin/env bash
# The ssh driver's deploy_os on a host that is already installed (provisioning/drivers/ssh.py):
# /etc/os-release must be the ordered image (exit 3 otherwise), and the prerequisite packages
# are installed with apt-get when missing (exit TRAINYARD_RETRY_STATUS when apt fails: retried).
# An image variant is not installed: the log says so and shows the host's NVIDIA driver.
# Header: TRAINYARD_OS_ID, TRAINYARD_OS_VERSION, TRAINYARD_OS_VARIANT ("" for none),
# TRAINYARD_APT_PACKAGES (space separated), TRAINYARD_INSTALL (0 on a declared test host),
# TRAINYARD_RETRY_STATUS.
set -eu

# shellcheck source=/dev/null
. /etc/os-release
echo "os-release: ${PRETTY_NAME:-$ID ${VERSION_ID:-}}"
if [ "$ID" != "$TRAINYARD_OS_ID" ] || [ "${VERSION_ID:-}" != "$TRAINYARD_OS_VERSION" ]; then
  echo "found $ID ${VERSION_ID:-?}, expected $TRAINYARD_OS_ID $TRAINYARD_OS_VERSION"
  exit 3
fi
if [ -n "$TRAINYARD_OS_VARIANT" ]; then
  echo "image variant $TRAINYARD_OS_VARIANT: not installed by the ssh driver (pre-installed host)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "host has NVIDIA driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader \
      2>/dev/null | head -n 1 || true)"
  else
    echo "host has no NVIDIA driver (nvidia-smi not found)"
  fi
fi
read -r -a wanted <<< "$TRAINYARD_APT_PACKAGES"
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "prerequisites present: ${TRAINYARD_APT_PACKAGES:-(none)}"
  exit 0
fi
if [ "$TRAINYARD_INSTALL" != 1 ]; then
  echo "declared test host: missing prerequisites not installed: ${missing[*]}"
  exit 0
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || exit "$TRAINYARD_RETRY_STATUS"
apt-get install -y -q --no-install-recommends "${missing[@]}" || exit "$TRAINYARD_RETRY_STATUS"
echo "prerequisites installed: ${missing[*]}"
