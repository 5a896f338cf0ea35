#!/usr/bin/env bash
# A small model's whole train job on a lent GPU, alone on the card (issue 44): the study's arith train job as
# docs/results-real-model-study/arith-h100-config.yaml ran it on an H100 (16 steps, 2 prompts x 8 completions),
# with SmolLM2-135M-Instruct's architecture at random bfloat16 weights (the GGUF file does not fit one transfer
# beside the wheels), so every completion runs to its 48 tokens. Two train jobs, one after the other:
#   perf/train_job_gpu.sh OUT_DIR     (from the repository root; wheels in .whl)
# OUT_DIR gets the jobs' Snakemake benchmark files (wall seconds, peak memory) and logs.
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
source tools/offline-install.sh .whl /tmp/hardex-site || exit 1
export HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/hardex-site:$PWD/src:$PWD
m=$(python3 -c "import sys; sys.path.insert(0, 'tools'); from pathlib import Path; from first_run_check import saved_model
print(saved_model('HuggingFaceTB/SmolLM2-135M-Instruct', Path('/tmp/m'), False))" | tail -1)
python3 - "$m" <<'PY'
import sys, yaml
c = yaml.safe_load(open("docs/results-real-model-study/arith-h100-config.yaml"))
c["models"]["smol"] = {"path": sys.argv[1], "architecture": "HuggingFaceTB/SmolLM2-135M-Instruct", "chat": True,
                       "size_b": 0.135}
c["seeds"] = [0]
c["selection"]["allow_unlearnable"] = c["selection"]["strategies"]  # random weights: every pass rate 0
yaml.safe_dump(c, open("/tmp/train_gpu.yaml", "w"))
PY
t0=$(date +%s)
timeout 300 python3 -m snakemake --configfile /tmp/train_gpu.yaml --cores 16 --resources gpu=1 --scheduler greedy \
  results/train/smol/arith/hard/seed0/steps.parquet results/train/smol/arith/random/seed0/steps.parquet 2>&1 | tail -n 25
echo "snakemake: $(($(date +%s) - t0)) s"
for f in results/timings/*/smol/arith/*/seed0.tsv results/timings/*/smol/arith.tsv results/timings/*/smol/*.tsv; do
  [ -f "$f" ] && echo "$f: $(tail -n 1 "$f" | cut -f1-3)"
done
tar czf "$out/train_job.tgz" results/timings logs 2>/dev/null
exit 0
