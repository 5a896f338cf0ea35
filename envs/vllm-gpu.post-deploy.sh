#!/usr/bin/env bash
# Run by Snakemake inside envs/vllm-gpu.yaml's environment after creating it: vLLM's CUDA build. The
# workflow picks this environment for the vLLM jobs of a config whose model jobs ask for GPUs
# (compute.gpu >= 1, rules/common.smk), whatever machine builds it. The README's "vLLM" section.
set -euo pipefail
pip install vllm==0.31.0  # the newest TRL 1.16 drives (pyproject.toml's vllm extra)
