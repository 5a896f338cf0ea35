"""One generation interface, `generate(prompts, n, sampling) -> completions per prompt`.

Backends: Hugging Face transformers (default; CPU or CUDA) and vLLM (optional extra, GPU).
Decoding settings are `Sampling` (`hardex.generation.sampling`).
Prompts are already rendered (chat template applied or plain); completions are the new text only,
so a scorer never sees the prompt unless the model itself repeats it.
"""

from __future__ import annotations

from hardex.generation.sampling import Sampling


def load_generator(backend: str, model_path: str, **kwargs):
    """The generator for a config backend name (`transformers` or `vllm`)."""
    # deferred: only the backend asked for. This file runs for every importer of hardex.generation.sampling (the
    # memory plan at planning; the light jobs, through hardex.job), and hardex.generation.hf imports numpy
    if backend == "transformers":
        from hardex.generation.hf import HFGenerator

        return HFGenerator(model_path, **kwargs)
    if backend == "vllm":
        from hardex.generation.vllm_backend import VLLMGenerator

        return VLLMGenerator(model_path, **kwargs)
    raise ValueError(f"unknown generation backend {backend!r}; use 'transformers' or 'vllm'")


__all__ = ["Sampling", "load_generator"]
