#!/usr/bin/env bash
# The monitoring exporters: NVIDIA's dcgm-exporter with the DCGM release it is paired with, and
# node_exporter, each under Trainyard's own systemd unit that binds the management address only;
# the packages' own units (which listen on every interface) are stopped and masked. Installed
# once (again when a pin changes), units rewritten and restarted at each deploy.
# What NVIDIA ships (docs/operations.md "On the GPU nodes" cites the sources): the deb
# datacenter-gpu-manager-exporter in the CUDA apt repository, versioned by the exporter release
# (e.g. 4.8.2-1), depending on datacenter-gpu-manager-4-core (epoch 1, e.g. 1:4.5.3-1);
# -4-proprietary adds the profiling fields (tensor-core activity) on Ampere and older. The
# package's unit is nvidia-dcgm-exporter.service (/usr/bin/dcgm-exporter -f
# /etc/dcgm-exporter/default-counters.csv, listening on :9400, every interface).
# Exit 75: apt could not fetch or install (retried). Exit 1: a pinned version is in no apt source
# of the node (the CUDA repository is missing or the pin is wrong; retrying cannot help).
# Environment: TRAINYARD_DCGM_PACKAGES (space-separated apt specs, package=version),
# TRAINYARD_NODE_EXPORTER_PACKAGE (apt spec), TRAINYARD_DCGM_UNIT, TRAINYARD_NODE_UNIT (names),
# TRAINYARD_DCGM_UNIT_TEXT, TRAINYARD_NODE_UNIT_TEXT (rendered units),
# TRAINYARD_DCGM_HOSTENGINE_UNIT (DCGM's nv-hostengine unit); TRAINYARD_ROOT (tests).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
units="$root/etc/systemd/system"
read -r -a specs <<< "${TRAINYARD_DCGM_PACKAGES:?TRAINYARD_DCGM_PACKAGES is not set}"
specs+=("${TRAINYARD_NODE_EXPORTER_PACKAGE:?TRAINYARD_NODE_EXPORTER_PACKAGE is not set}")
dcgm_unit="${TRAINYARD_DCGM_UNIT:?TRAINYARD_DCGM_UNIT is not set}"
node_unit="${TRAINYARD_NODE_UNIT:?TRAINYARD_NODE_UNIT is not set}"
hostengine_unit="${TRAINYARD_DCGM_HOSTENGINE_UNIT:?TRAINYARD_DCGM_HOSTENGINE_UNIT is not set}"

installed_version() {  # the installed version of a package, empty when it is not installed
  { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } \
    | awk '$3 == "installed" {print $4}'
}

available() {  # whether apt can install the spec: package, or package=version
  local name="${1%%=*}" version=""
  [ "$name" != "$1" ] && version="${1#*=}"
  apt-cache madison "$name" 2>/dev/null \
    | awk -F'|' -v want="$version" '{gsub(/ /, "", $2)} want == "" || $2 == want {found = 1}
                                    END {exit !found}'
}

wanted=()
for spec in "${specs[@]}"; do
  name="${spec%%=*}"
  version=""
  [ "$name" != "$spec" ] && version="${spec#*=}"
  have="$(installed_version "$name")"
  if [ -z "$have" ] || { [ -n "$version" ] && [ "$have" != "$version" ]; }; then
    wanted+=("$spec")
  fi
done
if [ ${#wanted[@]} -gt 0 ]; then
  if ! apt-get update -q; then
    echo "apt could not refresh its package lists"
    exit 75
  fi
  for spec in "${wanted[@]}"; do
    if ! available "$spec"; then
      offered="$(apt-cache madison "${spec%%=*}" 2>/dev/null \
        | awk -F'|' '{gsub(/ /, "", $2); print $2}' | paste -sd ' ' -)"
      echo "$spec is in no apt source of this node (apt offers: ${offered:-nothing}); add" \
           "NVIDIA's CUDA repository (cuda-keyring) to the image or correct the pin"
      exit 1
    fi
  done
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      --allow-downgrades "${wanted[@]}"; then
    echo "apt could not install ${wanted[*]}"
    exit 75
  fi
  echo "installed ${wanted[*]}"
else
  echo "exporters already installed: ${specs[*]}"
fi

# The packages' own services listen on every interface: never started.
for packaged in nvidia-dcgm-exporter.service prometheus-node-exporter.service; do
  systemctl disable --now "$packaged" >/dev/null 2>&1 || true
  systemctl mask "$packaged" >/dev/null 2>&1 || true
done
mkdir -p "$units"
printf '%s' "${TRAINYARD_DCGM_UNIT_TEXT:?}" > "$units/$dcgm_unit"
printf '%s' "${TRAINYARD_NODE_UNIT_TEXT:?}" > "$units/$node_unit"
systemctl daemon-reload
# DCGM's host engine (loopback only): the exporter reads it, and so does dcgmi diag.
systemctl enable --now "$hostengine_unit"
systemctl enable "$dcgm_unit" "$node_unit"
systemctl restart "$dcgm_unit" "$node_unit"
echo "exporters running: $dcgm_unit, $node_unit"
