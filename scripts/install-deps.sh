#!/usr/bin/env bash
# Installs the Debian packages colossal-compile needs. Idempotent: when every
# package is already installed it does nothing (no apt-get update either).
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config
  libclang-19-dev clang-19 libclang-rt-19-dev   # front end (libclang), libFuzzer, sanitizers
  libomp-19-dev                                 # OpenMP for clang builds (the fuzzing build)
  libglpk-dev                                    # ILP solver
  libopenmpi-dev openmpi-bin                     # CPU backend collectives
  libopenblas-dev libblis-dev                    # CPU GEMM (chosen by measurement, see docs/runtime.md)
  libblis4-openmp                                # colrt loads BLIS's OpenMP build at run time
  libdnnl2                                       # ... and oneDNN's sgemm before it (faster, bench/codegen_cpu)
  libcjson-dev                                   # JSON: cluster files, plan, safetensors headers
  zlib1g-dev                                     # CRC-32 of checkpoint files
  python3
  python3-jsonschema                             # tests: plan JSON against docs/plan.schema.json
  chromium                                       # tests: the HTML report in headless Chromium
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
