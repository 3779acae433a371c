#!/usr/bin/env bash
# Fetches the Windows (win_amd64) wheels whose PE DLLs and .pyd hold device code from the
# Python package index (pip download, no install) into target/external/windows/, checks
# the sha256 of every member the tests read, and unpacks those members (scripts/setup.sh
# runs it; tests/suite/pe.rs reads them under OFFLOAD_IMAGE_EXTERNAL_TESTS=1):
#
#   scripts/fetch-windows-wheels.sh        # prints the directory
#
# Result (docs/PE.md lists what each holds):
#   windows/wheels/*.whl                        the five wheels, as downloaded
#   windows/cu12/curand64_10.dll                nvidia-curand-cu12 10.3.10.19 (CUDA 12)
#   windows/cu13/curand64_10.dll                nvidia-curand 10.4.4.72 (CUDA 13, signed)
#   windows/hip-quant-0.4.3/hip_quantize.dll    hip-quant 0.4.3 (py3-none-any)
#   windows/hip-quant-0.4.7/hip_quantize.dll, hip_quantize_rocm721.dll   (cp311)
#   windows/hip-quant-2.2.4/hip_quantize.dll, hip_quantize_rocm721.dll,
#                           _C.cp312-win_amd64.pyd                       (cp312)
# Quick when everything is there (the members are checked again, the wheels are not
# downloaded again).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${OFFLOAD_IMAGE_EXTERNAL:-$here/target/external}/windows"
mkdir -p "$dest/wheels"
# One fetcher at a time (tests may call this script in parallel).
exec 9>"$dest/fetch.lock"
flock 9

# requirement, python version (hip-quant's cp311 build is 0.4.7, cp312 is 2.2.4.post215)
wheels=(
  "nvidia-curand-cu12==10.3.10.19 3.12 nvidia_curand_cu12-10.3.10.19-"
  "nvidia-curand==10.4.4.72 3.12 nvidia_curand-10.4.4.72-"
  "hip-quant==0.4.3 3.12 hip_quant-0.4.3-"
  "hip-quant==0.4.7 3.11 hip_quant-0.4.7-"
  "hip-quant==2.2.4.post215 3.12 hip_quant-2.2.4.post215-"
)
for spec in "${wheels[@]}"; do
  read -r req py stem <<< "$spec"
  if ! ls "$dest"/wheels/"$stem"*.whl >/dev/null 2>&1; then
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform win_amd64 --python-version "$py" "$req" -d "$dest/wheels" >&2
  fi
done

# wheel stem, member, unpacked as, sha256 (PE.md §3)
members=(
  "nvidia_curand_cu12-10.3.10.19- nvidia/curand/bin/curand64_10.dll cu12/curand64_10.dll 4d6d16c9941c4f7a7e49d5c43df25d408a2a8503d8cc1eb9808e0e0c2cde36d4"
  "nvidia_curand-10.4.4.72- nvidia/cu13/bin/x86_64/curand64_10.dll cu13/curand64_10.dll 2ae1d341cd7da1dab91e2215c62f627e0e0288ff54cdc9003e908746584b5b2b"
  "hip_quant-0.4.3- hip_quant/hip_quantize.dll hip-quant-0.4.3/hip_quantize.dll ac0798cd14f94469a608b35e939023675e3654b23167ca7a48abc91b092f0eed"
  "hip_quant-0.4.7- hip_quant-0.4.7.data/purelib/hip_quant/hip_quantize.dll hip-quant-0.4.7/hip_quantize.dll e601077281490fce845ebe3856d9eb508004c5e521f2ef9555facb93ef22d387"
  "hip_quant-0.4.7- hip_quant-0.4.7.data/purelib/hip_quant/hip_quantize_rocm721.dll hip-quant-0.4.7/hip_quantize_rocm721.dll 3121891babf8e9533118e4a02bcdf0bc48021a8d62c283700901e8d891fa9797"
  "hip_quant-2.2.4.post215- hip_quant-2.2.4.post215.data/purelib/hip_quant/hip_quantize.dll hip-quant-2.2.4/hip_quantize.dll 24678727221c95c692ba2857b0d9593370c1fe6b17a20fb153a0172294a067d9"
  "hip_quant-2.2.4.post215- hip_quant-2.2.4.post215.data/purelib/hip_quant/hip_quantize_rocm721.dll hip-quant-2.2.4/hip_quantize_rocm721.dll 030516933a02f532c2459d8c4abdd90538acf726351bbe383392455694480e62"
  "hip_quant-2.2.4.post215- hip_quant-2.2.4.post215.data/purelib/hip_quant/_C.cp312-win_amd64.pyd hip-quant-2.2.4/_C.cp312-win_amd64.pyd 0883f5e86ae7b6feda9e0c237d887cb96330539fc7c39b0b432ae7d99c001d78"
)
for spec in "${members[@]}"; do
  read -r stem member out sum <<< "$spec"
  if [ ! -e "$dest/$out" ] || [ "$(sha256sum "$dest/$out" | cut -d' ' -f1)" != "$sum" ]; then
    whl=$(ls "$dest"/wheels/"$stem"*.whl | head -n1)
    mkdir -p "$(dirname "$dest/$out")"
    python3 - "$whl" "$member" "$dest/$out.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(src, out)
PY
    got="$(sha256sum "$dest/$out.part" | cut -d' ' -f1)"
    if [ "$got" != "$sum" ]; then
      echo "fetch-windows-wheels: $member of $(basename "$whl") has sha256 $got, expected $sum" >&2
      rm -f "$dest/$out.part"
      exit 1
    fi
    mv "$dest/$out.part" "$dest/$out"
  fi
done
echo "$dest"
