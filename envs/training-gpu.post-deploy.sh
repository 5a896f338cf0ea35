#!/usr/bin/env bash
# Run by Snakemake inside envs/training-gpu.yaml's environment after creating it: the GPU training options
# (pyproject.toml's `gpu` extra), bitsandbytes for grpo.quantization: 4bit and deepspeed for
# grpo.distributed: zero1-zero3. The workflow picks this environment for the train jobs of a config whose
# model jobs ask for GPUs (compute.gpu >= 1, rules/common.smk), whatever machine builds it: a login node
# without a GPU builds what the GPU jobs will need.
set -euo pipefail
pip install bitsandbytes==0.50.2
# deepspeed is a source package that imports torch to build: the environment's torch, no isolation. It
# compiles its CUDA ops when they are first used, so it installs without a GPU or nvcc
pip install --no-build-isolation deepspeed==0.19.8
