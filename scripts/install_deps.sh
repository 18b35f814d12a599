#!/usr/bin/env bash
# Installs the Debian 12 packages dscale builds against. Idempotent; uses sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas-openmp-dev nlohmann-json3-dev libcli11-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcpp-httplib-dev gnuplot-nox
  # The server's end-to-end tests: two servers behind nginx.
  nginx
  # The hostile-client test builds a real gzip body.
  zlib1g-dev
  # The PyTorch parity check (tests/parity), run with /usr/bin/python3.
  python3-torch python3-numpy
  # The bundled tokenizer's Python encoder (training/tokenizer_bpe.py), for tests/figures.
  python3-regex
  # The sanitizer build (.ci/run) compiles with Clang: its ASan and UBSan runtimes, its OpenMP.
  clang libclang-rt-dev libomp-dev
)
# The server's end-to-end tests drive it with the OpenAI Node SDK. A Node.js installed some
# other way (with its own npm) is kept.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi
echo "dscale: installing ${missing[*]}" >&2
"${sudo_cmd[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
