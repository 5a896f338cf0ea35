#!/usr/bin/env bash
# Gather what an offline GPU host needs to run hardex, for a host that already has CUDA torch,
# transformers, peft, accelerate, pyarrow, matplotlib, pyyaml, jinja2 (a typical ML image).
#
#   tools/offline-wheels.sh [DEST] [PYTHON_VERSION] [EXTRA...]   # default: .whl  3.12
#
# Writes wheels for snakemake, polars, trl, datasets, math-verify, jsonschema and their pure-Python
# dependencies into DEST, skipping packages listed in $HAVE or DEST/../have.txt if present (one name a line;
# tools/gpu-image-packages.txt lists the lent GPU machines' image).
# pulp (16 MB) is left out: it is only imported by Snakemake's MILP scheduler; run with
# `--scheduler greedy`. polars' runtime (53 MB) is repacked as polars_runtime.tar.xz (33 MB) so that
# the set fits a 64 MB transfer; install.sh unpacks it. EXTRA: further requirements with their dependencies,
# e.g. deepspeed==0.19.8 for the first-run check's ZeRO-3 line (its sdist built here as a 2.2 MB wheel; with
# pydantic and hjson 5.1 MB more). See docs/offline-gpu.md.
set -euo pipefail
dest=${1:-.whl}
py=${2:-3.12}
mkdir -p "$dest"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
want=(snakemake==9.27.1 polars==2.1.0 trl==1.16.0 datasets==5.2.0 math-verify==0.9.0 jsonschema "${@:3}")
# some of Snakemake's dependencies exist only as source: build those as (pure-Python) wheels first
for _ in 1 2 3 4 5; do
  missing=$(python3 -m pip download -q --only-binary=:all: --find-links "$tmp" --python-version "$py" \
    --implementation cp "${plat[@]}" -d "$tmp" "${want[@]}" 2>&1 | sed -n 's/.*No matching distribution found for \([^ ]*\).*/\1/p' \
    || true)  # pip fails while a dependency is missing: under pipefail that must not end the script
  [ -z "$missing" ] && break
  python3 -m pip wheel -q --no-deps -w "$tmp" "$missing"
done
# a download that still misses a package holds only part of the set (it once lacked snakemake and trl): stop
got=$(for f in "$tmp"/*.whl; do basename "$f" | cut -d- -f1; done | tr 'A-Z.-' 'a-z__')
for pkg in "${want[@]}"; do
  name=$(echo "${pkg%%[=<>]*}" | tr 'A-Z.-' 'a-z__')
  if ! grep -qx "$name" <<<"$got"; then
    echo "offline-wheels: $pkg was not downloaded (pip: ${missing:-no error}); nothing written to $dest" >&2
    exit 1
  fi
done
have=${HAVE:-$(dirname "$dest")/have.txt}
for f in "$tmp"/*.whl; do
  name=$(basename "$f" | cut -d- -f1 | tr '_.' '--' | tr 'A-Z' 'a-z')
  case "$name" in pulp|nvidia-*|torch|triton) continue ;; esac
  if [ -f "$have" ] && grep -qix "$name" "$have"; then continue; fi
  if [ "$name" = polars-runtime-32 ]; then
    (mkdir -p "$tmp/pr" && cd "$tmp/pr" && python3 -m zipfile -e "$f" . && tar -cJf - .) > "$dest/polars_runtime.tar.xz"
  else
    cp "$f" "$dest/"
  fi
done
du -sh "$dest"
