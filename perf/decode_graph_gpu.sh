#!/usr/bin/env bash
# The CUDA-graph decode step on a lent GPU (issue 44), in one call of the device tool:
#   perf/decode_graph_gpu.sh OUT_DIR        (from the repository root; wheels in .whl as tools/offline-wheels.sh
#                                            gathers them, pytest's in .whl/test)
# 1. the graph's test: the graph replays the fixed-shape step to the bit (tests/unit/test_generation.py);
# 2. decoding SmolLM2-135M-Instruct's architecture (random bfloat16 weights, so every completion runs to 48
#    tokens) at a train job's rollout shape (2 prompts x 8) and an evaluation's (150 x 8): graph against the
#    step it replays (static) and the dynamic step, with how many completions each shares with the graph's;
# 3. real_model_cpu's GRPO step with hardex's rollouts with and without the graph, and how busy the GPU was.
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
source tools/offline-install.sh .whl /tmp/hardex-site || exit 1
python3 -m pip install -q --no-index --no-deps --target /tmp/hardex-site .whl/test/*.whl
export HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/hardex-site:$PWD/src:$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch, transformers, trl, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__, "peft", peft.__version__)'
m=$(python3 -c "import sys; sys.path.insert(0, 'tools'); from pathlib import Path; from first_run_check import saved_model
print(saved_model('HuggingFaceTB/SmolLM2-135M-Instruct', Path('/tmp/m'), False))" | tail -1)
echo "model: $m"
timeout 120 python3 -m pytest -q -n0 -p no:cacheprovider -rs tests/unit/test_generation.py -k "cuda_graph or fixed_shape"
for shape in "2 3" "150 2"; do
  set -- $shape
  timeout 150 python3 perf/probe_throughput.py --model "$m" --config experiments/real_model_cpu.yaml --device cuda \
    --dtype bfloat16 --n-prompts "$1" --k 8 --max-new-tokens 48 --repeats "$2" --decode graph,static,dynamic \
    --json "$out/decode_$1x8.json" 2>&1 | grep -v Warning
done
timeout 240 python3 perf/grpo_step.py --config experiments/real_model_cpu.yaml --model "$m" --steps 6 --repeats 2 \
  --threads 4 --rollouts hardex-dynamic,hardex 2>&1 | grep -v Warning
cp perf/out/grpo_step_real_model_cpu.json "$out/" 2>/dev/null
exit 0
