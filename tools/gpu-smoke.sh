#!/usr/bin/env bash
# The GPU smoke run: versions, a 1-process nccl group through hardex's reduction, the CUDA initialisation order
# of server mode, two GRPO steps of a stand-in (LoRA, gradient checkpointing, TensorBoard) in one process and
# through `accelerate launch`, a 4-bit step, a probe and evaluate through vLLM; one PASS/FAIL/SKIP line each
# and a summary (docs/gpu-runs.md). Within 10 minutes on one H100.
#   tools/gpu-smoke.sh                     on a GPU machine
#   tools/gpu-smoke.sh --cpu               what a CPU can check (CI: tests/unit/test_gpu_first_run.py)
# The first-run check at the presets' real sizes (tools/first_run_check.py; within 10 minutes on one H100):
#   tools/gpu-smoke.sh --first-run         on a GPU machine
#   tools/gpu-smoke.sh --first-run --tiny  the same code at stand-in sizes (CI)
# Extra arguments go to the Python script (--architecture, --dir, --timeout; --only, --budget).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
if [[ "${1:-}" == "--first-run" ]]; then
  shift
  exec "${PYTHON:-python3}" "$root/tools/first_run_check.py" "$@"
fi
exec "${PYTHON:-python3}" "$root/tools/gpu_smoke.py" "$@"
