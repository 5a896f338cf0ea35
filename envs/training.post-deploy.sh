#!/usr/bin/env bash
# Run by Snakemake inside envs/training.yaml's environment after creating it: the GPU training options
# (pyproject.toml's `gpu` extra) where a GPU answers: bitsandbytes for grpo.quantization: 4bit, deepspeed for
# grpo.distributed: zero1-zero3. On a CPU neither can run, and hardex refuses both there.
set -euo pipefail
if nvidia-smi -L >/dev/null 2>&1; then
  pip install bitsandbytes==0.50.2
  # deepspeed is a source package that imports torch to build: the environment's torch, no isolation
  pip install --no-build-isolation deepspeed==0.19.8
fi
