#!/usr/bin/env bash
# Run the workflow on a GPU host with a time limit per command (a lent machine, an interactive
# allocation), and pack what the report needs, so that a run cut short still brings results home:
#
#   tools/device-run.sh SECONDS OUT_DIR [snakemake arguments...]
#   e.g. tools/device-run.sh 480 "$OUT" --configfile experiments/gpu_mini.yaml --cores 16 --resources gpu=12
#
# - installs the wheels in $WHEELS (default: .whl beside this script's repository, as gathered by
#   tools/offline-wheels.sh) when that folder exists; otherwise uses the Python environment as it is;
# - runs Snakemake for at most SECONDS under `timeout -s INT`: Snakemake stops its jobs and marks
#   them incomplete, GRPO checkpoints and probe chunks stay, and the next call resumes them
#   (--rerun-incomplete is passed);
# - writes to OUT_DIR: device.txt (GPU, versions, elapsed seconds, Snakemake's exit status: 124 =
#   stopped at the limit), report.tgz (tables, figures, regression.json, timing files, logs),
#   results.tgz (probe tables, subsets, steps) and eval.tgz (evaluation files): with these the
#   report can be redone elsewhere.
set -uo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,17p' "$0"
    exit 2
fi
limit=$1
out=$2
shift 2
repo=$(cd "$(dirname "$0")/.." && pwd)
wheels=${WHEELS:-$repo/.whl}
python=${PYTHON:-python3}
mkdir -p "$out"

if [ -d "$wheels" ]; then
    (cd "$repo" && source tools/offline-install.sh "$wheels" /tmp/hardex-site && echo "$PYTHONPATH") >"$out/.pythonpath" || exit 1
    export PYTHONPATH=$(cat "$out/.pythonpath")
    rm -f "$out/.pythonpath"
fi

{
    date -u +"started %Y-%m-%dT%H:%M:%SZ"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no NVIDIA GPU"
    "$python" -c 'import sys, torch, transformers, trl, peft, snakemake
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "transformers", transformers.__version__, "trl", trl.__version__, "peft", peft.__version__,
      "snakemake", snakemake.__version__)'
    echo "snakemake arguments: $*"
} >"$out/device.txt" 2>&1

t0=$(date +%s)
timeout -s INT -k 60 "$limit" "$python" -m snakemake --rerun-incomplete --scheduler greedy "$@"
rc=$?
echo "snakemake exit status $rc after $(($(date +%s) - t0)) s" | tee -a "$out/device.txt"

# what exists of the report and of the results (a cut run has some of each); never fail on packing
pack() {
    local tgz=$1
    shift
    local present=()
    for p in "$@"; do [ -e "$p" ] && present+=("$p"); done
    [ ${#present[@]} -gt 0 ] && tar czf "$tgz" "${present[@]}"
}
pack "$out/report.tgz" results/tables results/figures results/regression.json results/timings logs
shopt -s nullglob
probes=()
for f in results/probe/*/*.parquet; do [[ $f == *.samples.parquet ]] || probes+=("$f"); done
pack "$out/results.tgz" "${probes[@]}" results/subsets results/train/*/*/*/*/steps.parquet
pack "$out/eval.tgz" results/eval # per-example outcomes with their completions: the largest part
ls -l "$out" | tail -n +2
exit $rc
