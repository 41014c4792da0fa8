#!/usr/bin/env bash
# The monitoring exporters: dcgm-exporter (pinned package) and node_exporter, each under
# Trainyard's own systemd unit that binds the management address only; the packages' own units
# (which listen on every interface) are stopped and masked. Installed once, units rewritten and
# restarted at each deploy. Exit 75: apt could not install (retried).
# Environment: TRAINYARD_DCGM_EXPORTER_PACKAGE, TRAINYARD_NODE_EXPORTER_PACKAGE (apt specs),
# TRAINYARD_DCGM_UNIT, TRAINYARD_NODE_UNIT (names), TRAINYARD_DCGM_UNIT_TEXT,
# TRAINYARD_NODE_UNIT_TEXT (rendered units); TRAINYARD_ROOT (tests: a scratch root).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
units="$root/etc/systemd/system"
dcgm_package="${TRAINYARD_DCGM_EXPORTER_PACKAGE:?TRAINYARD_DCGM_EXPORTER_PACKAGE is not set}"
node_package="${TRAINYARD_NODE_EXPORTER_PACKAGE:?TRAINYARD_NODE_EXPORTER_PACKAGE is not set}"
dcgm_unit="${TRAINYARD_DCGM_UNIT:?TRAINYARD_DCGM_UNIT is not set}"
node_unit="${TRAINYARD_NODE_UNIT:?TRAINYARD_NODE_UNIT is not set}"

installed_version() {  # the installed version of a package, empty when it is not installed
  { dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null || true; } \
    | awk '$3 == "installed" {print $4}'
}

wanted=()
for spec in "$dcgm_package" "$node_package"; do
  name="${spec%%=*}"
  version=""
  [ "$name" != "$spec" ] && version="${spec#*=}"
  have="$(installed_version "$name")"
  if [ -z "$have" ] || { [ -n "$version" ] && [ "$have" != "$version" ]; }; then
    wanted+=("$spec")
  fi
done
if [ ${#wanted[@]} -gt 0 ]; then
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      --allow-downgrades "${wanted[@]}"; then
    echo "apt could not install ${wanted[*]}"
    exit 75
  fi
  echo "installed ${wanted[*]}"
else
  echo "exporters already installed: $dcgm_package, $node_package"
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
systemctl enable "$dcgm_unit" "$node_unit"
systemctl restart "$dcgm_unit" "$node_unit"
echo "exporters running: $dcgm_unit, $node_unit"
