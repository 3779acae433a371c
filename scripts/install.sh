#!/usr/bin/env bash
# Installs loader-sim, its runtime shim, the C library and header, the man pages and shell
# completions under PREFIX (default ~/.local):
#
#   scripts/install.sh [--prefix PREFIX]
#
#   PREFIX/bin/loader-sim                      (cargo install --path loader-sim)
#   PREFIX/lib/libloader_sim_rt.so             (found by `register --load` via ../lib)
#   PREFIX/lib/liboffload_image.{a,so*}, PREFIX/include/offload_image.h,
#   PREFIX/lib/pkgconfig/offload_image.pc      (capi/install.sh)
#   PREFIX/share/man/man1/loader-sim*.1        (loader-sim man)
#   PREFIX/share/bash-completion/completions/loader-sim, zsh and fish equivalents
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${HOME}/.local"
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    *) echo "usage: scripts/install.sh [--prefix PREFIX]" >&2; exit 2 ;;
  esac
done
cargo install --locked --path loader-sim --root "$prefix"
cargo build --locked --release -p loader-sim-rt
install -d "$prefix/lib"
install -m 0755 target/release/libloader_sim_rt.so "$prefix/lib/libloader_sim_rt.so"
capi/install.sh --prefix "$prefix"
bin="$prefix/bin/loader-sim"
install -d "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
  "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
"$bin" man "$prefix/share/man/man1"
"$bin" completions bash > "$prefix/share/bash-completion/completions/loader-sim"
"$bin" completions zsh > "$prefix/share/zsh/site-functions/_loader-sim"
"$bin" completions fish > "$prefix/share/fish/vendor_completions.d/loader-sim.fish"
echo "installed loader-sim in $prefix"
