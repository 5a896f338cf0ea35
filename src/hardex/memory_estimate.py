"""The peak memory of one GPU job, as a sum of named parts: pure arithmetic over a model's architecture (its
config.json, hardex.model_shape) and the job's settings, with no config in sight.

`estimate_train` sizes a GRPO train job (TRL's GRPOTrainer, LoRA through PEFT or all weights),
`estimate_generation` a probe or evaluate job (hardex's generators); each returns an Estimate, the parts
modelled on what these libraries hold at the job's peak. hardex.memory_plan makes them for a config's jobs.

An estimate is a model, not a measurement: it counts the tensors that are alive together at the peak
and adds a fixed allowance for the CUDA context. It is meant to catch a plan that cannot fit (a full
fine-tune of a 14B model, a vLLM engine that leaves the trainer no room) before hours of earlier jobs
run, not to predict the last GiB.

Conventions: sizes in bytes inside, GiB (2**30 bytes) in every Estimate; a card's memory is read as its
nominal memory in GiB (80 for an H100 80GB, `compute.gpu_memory_gb`), of which a job can use USABLE_SHARE
(the driver keeps the rest: an "80 GB" H100 reports 81559 MiB, 79.6 GiB).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hardex.architectures import count_parameters
from hardex.devices import COLOCATED_MEMORY_SHARE, MEMORY_SHARE

# grpo.distributed, in order of how much of the training state each process keeps: data parallel (all of it),
# ZeRO 1 (the optimizer's states sharded), ZeRO 2 (and the gradients), ZeRO 3 and FSDP (and the weights)
from hardex.launch import DISTRIBUTED_STRATEGIES
from hardex.model_shape import (
    DTYPE_BYTES,
    ROLLOUT_MAX_BATCH_PROMPTS,
    ROLLOUT_TOKEN_BUDGET,
    Batch,
    Shape,
    hf_batch,
    sampling_bytes,
)
from hardex.schedule import completions_per_step

GIB = 2**30
#: the CUDA context, cuBLAS workspaces and the caching allocator's rounding: memory a job holds on the
#: device that no tensor accounts for (about 0.5 GiB of context on an H100, the rest allowance)
CUDA_CONTEXT_GIB = 1.0
#: a CPU job's resident memory before its model loads: Python, torch, transformers, PEFT and TRL imported
#: (0.49 GiB measured by perf/memory_plan_vs_peak.py); on a CPU the plan estimates host memory
CPU_PROCESS_GIB = 0.5
#: HFGenerator.effective_token_budget: on a GPU the KV cache of a batch is held to this share of free memory
HF_KV_SHARE = 0.7
#: TRL's fused log-prob head (trl.kernels.chunked_logprob): tokens x vocabulary entries per projection tile
FUSED_TILE = (4096, 32768)
#: float32 tiles the fused head's torch fallback (devices without Triton: a CPU) holds at its backward's peak:
#: z, log p, p, the gradient and two temporaries of its expression, besides the projection tile (read in
#: trl.kernels.chunked_logprob._backward_tile)
TORCH_TILE_COPIES = 6
#: vLLM's profile run on a large GPU (its offline LLM defaults: max_num_batched_tokens, max_num_seqs) and the
#: memory its CUDA graphs take; the engine's activation peak is sized from these
VLLM_BATCHED_TOKENS, VLLM_MAX_SEQS, VLLM_GRAPHS_GIB = 16384, 1024, 1.0
#: the share of a card's nominal memory a job can allocate: an H100 "80 GB" reports 81559 MiB (79.6 GiB) total,
#: an H200 "141 GB" 143771 MiB (140.4 GiB of 141)
USABLE_SHARE = 0.995
#: bytes per trainable parameter of DeepSpeed's bf16 optimizer (ZeRO 1-3): fp32 master weights and AdamW's two
#: fp32 moments, beside the bf16 weights and gradients the model holds
DEEPSPEED_FP32_STATE_BYTES = 12


def usable_gib(device_gb: float) -> float:
    """What a job can allocate of a card of `device_gb` nominal GiB."""
    return device_gb * USABLE_SHARE


@dataclass
class Estimate:
    """GiB per named part of one job at its peak; `total` is their sum. `notes` say what the estimate
    assumed; `problems` are reasons the job cannot run whatever the total (a vLLM engine whose share
    cannot hold the model)."""

    parts: dict[str, float]
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    batch: str = ""  # train: the micro-batch (sequences); generation: the largest batch, rows x tokens

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def biggest(self, n: int = 3) -> list[tuple[str, float]]:
        return sorted(self.parts.items(), key=lambda kv: -kv[1])[:n]

    def fits(self, device_gb: float) -> bool:
        """Whether the job can run on a card of `device_gb` nominal GiB: no problem, and the total usable."""
        return not self.problems and self.total <= usable_gib(device_gb)


# ---- parts shared by the estimates ----------------------------------------------------------------


def lora_linears(s: Shape, targets: list[str]) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(in, out) of each linear a LoRA config wraps in one layer, by target name, and the names not sized."""
    dims = {"q_proj": (s.hidden, s.q), "k_proj": (s.hidden, s.kv), "v_proj": (s.hidden, s.kv),
            "o_proj": (s.q, s.hidden), "gate_proj": (s.hidden, s.intermediate), "up_proj": (s.hidden, s.intermediate),
            "down_proj": (s.intermediate, s.hidden),
            # Phi-3's fused projections
            "qkv_proj": (s.hidden, s.q + 2 * s.kv), "gate_up_proj": (s.hidden, 2 * s.intermediate)}
    return {t: dims[t] for t in targets if t in dims}, [t for t in targets if t not in dims]


def adapter_parameters(s: Shape, lora: dict) -> int:
    """LoRA's A (r x in) and B (out x r) of every targeted linear of every layer."""
    linears, _ = lora_linears(s, lora["target_modules"])
    return s.layers * sum(lora["r"] * (i + o) for i, o in linears.values())


def layer_activation_bytes(s: Shape, nbytes: int, lora: dict | None) -> int:
    """Bytes one training forward keeps per token and layer for the backward pass; `lora` None = full
    fine-tuning (every weight trained), else the LoRA block (the base frozen).

    The form is Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
    eq. 1: 34·s·b·h bytes per layer) without its attention-score term 5·a·s²·b, since SDPA's flash and
    memory-efficient kernels never materialise the scores. Its terms are re-derived for what the Hugging
    Face decoders (Llama, Qwen2/3, Phi-3) save under bf16 autocast, with a SwiGLU MLP of width i and
    grouped-query attention (b: bytes of the compute dtype, h hidden, q = heads·head_dim, kv =
    kv_heads·head_dim), and checked against the tensors torch saves for a small Qwen3 on CPU:
      two RMSNorms          each its input upcast to float32 (4h); full fine-tuning also the normalised
                            input (for the norm's weight) and the output, the next projections' input (2bh)
      q/k RMSNorm (Qwen3)   float32 inputs of the per-head norms, 4(q + kv); full: + b(q + kv)
      attention             SDPA's query, key and value (repeated to every head: with a padding mask
                            transformers expands grouped keys) and output, 4bq
      SwiGLU MLP            gate output (SiLU's input), SiLU output, up output: 3bi; full: + their
                            product, down's input, bi
      LoRA (PEFT)           a frozen linear saves no input; its adapter does: PEFT casts the input to the
                            adapter's float32, autocast casts it back for the matmul and saves that copy,
                            and A's output: b(in + r) per wrapped linear
    """
    h, b, q, kv, i = s.hidden, nbytes, s.q, s.kv, s.intermediate
    full = lora is None
    total = 2 * (4 * h + (2 * b * h if full else 0)) + 4 * b * q + (4 if full else 3) * b * i
    if s.model_type == "qwen3":
        total += (4 + (b if full else 0)) * (q + kv)
    if lora:
        linears, _ = lora_linears(s, lora["target_modules"])
        total += sum(b * (d_in + lora["r"]) for d_in, _ in linears.values())
    return total


def prefill_bytes_per_token(s: Shape, nbytes: int, lora: dict | None) -> int:
    """Bytes per prompt token of the largest transient of one layer in an inference forward (no autograd:
    a tensor lives until the next operation that no longer needs it), the residual stream included.

    The operations in order, with what is alive at each: the q, k, v projections; SDPA over keys and values
    expanded to every head (transformers' repeat_kv: a padding mask keeps SDPA's own grouped-query path
    off) and its output; o; then the MLP `down(act(gate(x)) * up(x))`: gate, its SiLU, up beside it, their
    product, down. A LoRA adapter (float32, and no autocast at generation) adds to the linear it wraps its
    input cast to float32 and two float32 outputs of width `out` (B·A·x, then its scaled copy, which the
    bf16 result is promoted to), alive together.
    """
    b, h, i, q, kv = nbytes, s.hidden, s.intermediate, s.q, s.kv
    dims = lora_linears(s, lora["target_modules"])[0] if lora else {}

    def adapter(*names: str) -> int:  # what PEFT adds while the linear(s) of these names run
        return max((4 * dims[n][0] + 8 * dims[n][1] for n in names if n in dims), default=0)

    alive = [
        b * q + adapter("q_proj"),
        b * (q + kv) + adapter("k_proj"),
        b * (q + 2 * kv) + adapter("v_proj", "qkv_proj"),  # Phi-3 projects q, k, v at once
        b * (q + 2 * kv + 2 * q + q),  # q, k, v, k and v repeated to every head, the output
        b * (q + h) + adapter("o_proj"),
        b * (i + h) + adapter("down_proj"),
    ]
    if s.model_type == "phi3":  # gate_up(x) at once, then up * act(gate): the fused output, act, product
        alive += [b * 2 * i + adapter("gate_up_proj"), b * 4 * i]
    else:  # gate; gate and its SiLU; SiLU and up; SiLU, up and their product
        alive += [b * i + adapter("gate_proj"), b * 2 * i, b * 2 * i + adapter("up_proj"), b * 3 * i]
    return 3 * b * h + max(alive)  # + the residual stream: residual, hidden states, normed input


def hf_generation_parts(s: Shape, nbytes: int, *, budget: int, samples: int, prompt_tokens: int, max_new_tokens: int,
                        max_batch_prompts: int, top_p: float, free_bytes: float | None, lora: dict | None = None,
                        prompts_available: int | None = None) -> tuple[dict[str, float], Batch, list[str]]:
    """Bytes of the KV cache and of the larger of the prefill and decode transients of HFGenerator's largest
    batch. On a GPU (`free_bytes` known) the generator lowers the budget to what a KV cache in 70% of the
    free memory holds (HFGenerator.effective_token_budget), as here."""
    notes = []
    per_token = s.kv_bytes_per_token(nbytes)
    if free_bytes is not None:
        cap = max(1, int(HF_KV_SHARE * max(free_bytes, 0) / per_token))
        if cap < budget:
            notes.append(f"the generator lowers its token budget {budget} to {cap} (a KV cache in 70% of free memory)")
            budget = cap
    batch = hf_batch(budget, samples, prompt_tokens, max_new_tokens, max_batch_prompts, prompts_available)
    kv = batch.kv_tokens * per_token
    # a cache is preallocated for prompt + new tokens. With n > 1 samples the prompts' own cache is copied n times
    # and stays resident until the copies are made (freed, then returned to the system: release_freed_host_memory);
    # rows that finish are dropped by rebuilding the cache layer by layer (one layer's keys and values twice more)
    held = max(kv / samples if samples > 1 else 0, 2 * kv / s.layers)
    # the prefill runs with the cache of the prompts only and keeps one logit row per prompt; a decode step holds
    # the whole cache, every row's logits and the sampler's copies of the rows it takes at a time
    prefill = kv / samples + batch.prompts * prompt_tokens * prefill_bytes_per_token(s, nbytes, lora) \
        + batch.rows * s.vocab * nbytes
    decode = kv + held + sampling_bytes(s, nbytes, batch.rows, top_p)
    if prefill >= decode:
        parts = {"KV cache": kv / samples, "prefill activations": prefill - kv / samples}
    else:
        parts = {"KV cache": kv + held, "sampling logits": decode - kv - held}
    return parts, batch, notes


def vllm_engine_need(s: Shape, n_params: int, nbytes: int, max_model_len: int | None,
                     fallback_len: int) -> tuple[float, int]:
    """Bytes a vLLM engine needs in its share at least, and the context length it was sized for: its copy of
    the weights, its profile run's activations (VLLM_BATCHED_TOKENS tokens through one layer's MLP, logits
    of VLLM_MAX_SEQS rows), its CUDA graphs and context, and a KV cache of one max_model_len sequence
    (vLLM refuses to start with less)."""
    length = int(max_model_len or s.max_positions or fallback_len)
    weights = n_params * nbytes
    activations = VLLM_BATCHED_TOKENS * (3 * nbytes * s.intermediate + 4 * nbytes * s.hidden) \
        + VLLM_MAX_SEQS * s.vocab * 4
    graphs = (VLLM_GRAPHS_GIB + CUDA_CONTEXT_GIB) * GIB
    return weights + activations + graphs + length * s.kv_bytes_per_token(nbytes), length


def resolve_dtype(dtype: str, arch: dict | None) -> str:
    """`auto` = the config's torch_dtype (float32 when it names none)."""
    if dtype == "auto":
        dtype = (arch or {}).get("torch_dtype") or (arch or {}).get("dtype") or "float32"
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r}: expected one of {', '.join(DTYPE_BYTES)} or auto")
    return dtype


@cache
def trl_fuses_lm_head() -> bool:
    """Whether the installed TRL scores completions with its fused, tiled log-prob head
    (trl.kernels.chunked_logprob, add_fused_lm_head), which never materialises the logits; older TRLs
    compute full logits and a log-softmax over them. Read from the installed files, without importing TRL."""
    spec = importlib.util.find_spec("trl")
    return bool(spec and spec.submodule_search_locations and any(
        (Path(p) / "kernels" / "chunked_logprob.py").is_file() for p in spec.submodule_search_locations))


def _runtime(gpu: bool) -> dict[str, float]:
    """What a job holds before any tensor of its own: the CUDA context on a GPU, the process on a CPU."""
    return {"CUDA context": CUDA_CONTEXT_GIB * GIB} if gpu else {"process": CPU_PROCESS_GIB * GIB}


def _gib(parts: dict[str, float]) -> dict[str, float]:
    return {k: v / GIB for k, v in parts.items() if v > 0}


# ---- the estimates --------------------------------------------------------------------------------


def estimate_train(arch: dict | None, *, dtype: str, finetune: str, lora: dict, grpo: dict, prompt_tokens: int,
                   device_gb: float | None = None, parameters: int | None = None, logprobs: str = "auto",
                   device: str = "cuda") -> Estimate:
    """Peak memory of one GRPO train job (TRL's GRPOTrainer as hardex.training configures it).

    `grpo` is the model's grpo settings (hardex.settings.grpo_settings): group size, prompts per step,
    accumulation, checkpointing, beta, rollouts, completion length (and `vllm` with vLLM rollouts).
    `arch` None: only `parameters` are known, and only the weights and their optimizer are counted.
    `logprobs`: "fused" (TRL's tiled log-prob head), "full" (materialised logits, older TRL), or "auto"
    (what the installed TRL does). `device`: "cuda", or "cpu" for host memory of a CPU run.

    A step has two phases that do not overlap, and the peak is the larger: the rollouts (each process samples
    its share of the step's completions, prompts_per_step x num_generations / processes: KV cache and
    sampling; under ZeRO 3 with every weight gathered) and the backward pass of one micro-batch of
    per_device_train_batch_size = prompts_per_step x num_generations / (gradient_accumulation_steps x
    processes) sequences of prompt_tokens + max_completion_length tokens (activations and the log-prob
    head). The weights, adapters, optimizer state and reference model are held through both.

    `dtype` is what the policy loads in (hardex.precision.policy_dtype): float32 for a full fine-tune, whose
    small updates would vanish in bfloat16, bfloat16 under a LoRA adapter's frozen base. Activations, KV
    cache and logits are counted in it too: under bf16 autocast the matmuls' outputs are bfloat16 but the
    residual stream, the norms and the rotated keys follow float32 weights, so float32 is an upper bound.
    DeepSpeed (ZeRO 1-3) is the exception: its bf16 engine casts the module to bfloat16 and keeps float32
    master weights in its optimizer.
    """
    gpu = device == "cuda"
    nbytes = DTYPE_BYTES[resolve_dtype(dtype, arch)]
    completions = completions_per_step(grpo)
    processes, strategy = grpo.get("processes", 1), grpo.get("distributed", "multi_gpu")
    micro = completions // (grpo["gradient_accumulation_steps"] * processes)  # per process (hardex.launch)
    deepspeed = processes > 1 and strategy.startswith("zero")
    if deepspeed:
        nbytes = DTYPE_BYTES["bfloat16"]
    # what each of several processes keeps of the full-fine-tuning state: ZeRO 1 shards the optimizer's
    # states, ZeRO 2 also the gradients, ZeRO 3 and FSDP also the weights; data parallel keeps it all
    shard = {k: (processes if strategy in sharded else 1) for k, sharded in
             (("optimizer", DISTRIBUTED_STRATEGIES[1:]), ("gradients", DISTRIBUTED_STRATEGIES[2:]),
              ("weights", DISTRIBUTED_STRATEGIES[3:]))}
    completion = grpo["max_completion_length"]
    seq = prompt_tokens + completion
    notes = [f"micro-batch {micro} sequences of {seq} tokens ({prompt_tokens} prompt + {completion} completion)"]
    s = Shape.of(arch) if arch is not None else None
    n_params = count_parameters(arch) if arch is not None else int(parameters or 0)
    full = finetune == "full"

    # ZeRO 3 and FSDP partition every parameter, a LoRA adapter's frozen base too
    held = {"weights": n_params * nbytes / shard["weights"]}
    if grpo.get("quantization", "none") == "4bit" and s is not None:
        # NF4 (hardex.quantization): the linear layers at half a byte per weight (+ a little for the double-
        # quantized scales); the embeddings and the output head stay in the compute dtype
        embeddings = s.vocab * s.hidden * (1 if s.tied else 2)
        held["weights"] = (n_params - embeddings) * 0.53 + embeddings * nbytes
        notes.append("4-bit base weights (NF4) under the adapters")
    fsdp = processes > 1 and strategy.startswith("fsdp")
    if full and fsdp:
        # accelerate's FSDP with bf16 mixed precision upcasts the trainable weights to float32 (sharded), and
        # computes in bfloat16 copies of one layer at a time; AdamW's states follow the float32 weights
        held["weights"] = n_params * 4 / shard["weights"]
        notes.append("FSDP: trainable weights upcast to float32, sharded")
    if full:
        # torch's AdamW keeps exp_avg and exp_avg_sq in each parameter's dtype; gradients are in that dtype too.
        # DeepSpeed (ZeRO 1-3) in bf16 keeps float32 master weights and moments, 12 bytes a parameter, sharded
        if processes > 1 and strategy.startswith("zero"):
            held["optimizer (fp32 master + AdamW)"] = DEEPSPEED_FP32_STATE_BYTES * n_params / shard["optimizer"]
        else:
            held["optimizer (AdamW)"] = 2 * n_params * (4 if fsdp else nbytes) / shard["optimizer"]
        if grpo["beta"] > 0:  # the KL term's frozen reference, a second copy (with LoRA: the base, adapters off),
            # which TRL loads in the policy's dtype
            held["reference model"] = n_params * nbytes
    elif s is not None:
        # the adapters train in float32 (PEFT's autocast_adapter_dtype; over 4-bit weights hardex keeps them
        # float32 where TRL would cast them to bfloat16): weights, gradients, AdamW's two states
        held["adapters (fp32 + grads + AdamW)"] = 16 * adapter_parameters(s, lora)
        unknown = lora_linears(s, lora["target_modules"])[1]
        if unknown:
            notes.append(f"LoRA targets not sized: {', '.join(unknown)}")
    held.update(_runtime(gpu))
    problems: list[str] = []
    if grpo["rollouts"] == "vllm":
        vllm = grpo.get("vllm") or {}
        share = vllm.get("gpu_memory_utilization") or COLOCATED_MEMORY_SHARE["cuda"]
        if s is not None:
            need, length = vllm_engine_need(s, n_params, nbytes, vllm.get("max_model_len"), seq)
        else:
            need, length = n_params * nbytes, seq
        if device_gb is not None and gpu:
            held["vLLM engine share"] = share * device_gb * GIB  # vLLM's share is of the card's reported total
            if need > share * device_gb * GIB:
                problems.append(f"the vLLM engine needs about {need / GIB:.1f} GiB (its weights and a KV cache of one "
                                f"{length}-token sequence) but its share {share:g} of {device_gb:g} GiB is "
                                f"{share * device_gb:.1f} GiB")
        else:
            held["vLLM engine (at least)"] = need
            notes.append(f"the vLLM engine takes {share:g} of the device, whose size is not declared")
    grad_bytes = 4 if fsdp else nbytes
    if s is None:
        if full:
            held["gradients"] = n_params * grad_bytes / shard["gradients"]
        notes.append("architecture unknown: activations, logits, KV cache and adapters not counted (a lower bound)")
        return Estimate(_gib(held), notes, problems, batch=str(micro))

    # -- phase 1: backward of one micro-batch
    tokens = micro * seq
    per_layer = layer_activation_bytes(s, nbytes, None if full else lora)
    # the final norm's saved input and output, and the 4D padding mask all layers share (transformers
    # builds it in the compute dtype, one entry per query x key position)
    final_norm = tokens * (4 + nbytes) * s.hidden + micro * seq * seq * nbytes
    if grpo["gradient_checkpointing"]:
        # transformers keeps each decoder layer's input; the backward recomputes one layer at a time, whose
        # activations and their gradients are then alive together
        activations = s.layers * tokens * nbytes * s.hidden + final_norm + 2 * tokens * per_layer
        notes.append("gradient checkpointing: layer inputs kept, one layer recomputed")
    else:
        # every layer's activations, and the gradients of the layer being back-propagated
        activations = s.layers * tokens * per_layer + final_norm + tokens * per_layer
    mode = logprobs if logprobs != "auto" else ("fused" if trl_fuses_lm_head() else "full")
    # the log-probabilities of the completion tokens (the prompt's are masked; on a CPU TRL scores every position)
    scored = micro * completion if gpu else micro * (seq - 1)
    if mode == "fused":
        # trl.kernels.chunked_logprob: the scored hidden states are copied and saved, logits exist one
        # 4096 x 32768 tile at a time; the backward accumulates the hidden states' gradient in float32 (then
        # casts it) and, when the head is trained (full fine-tuning), its weight's gradient in float32
        tile = min(scored, FUSED_TILE[0]) * min(s.vocab, FUSED_TILE[1])
        head = scored * s.hidden * (nbytes + 4 + nbytes) + tile * nbytes
        if not gpu:  # no Triton: its torch fallback holds float32 copies of a whole tile at once
            head += TORCH_TILE_COPIES * tile * 4
        if full:
            head += s.vocab * s.hidden * 4
        head_name = "log-prob head (fused)"
    else:
        # older TRL: the logits of the micro-batch's completions, their temperature-scaled copy, the
        # log-softmax saved for the backward, and the logits' gradient: four copies in the compute dtype
        head = 4 * scored * s.vocab * nbytes
        head_name = "logits"
    backward = {"activations": activations, head_name: head}
    if full:
        backward["gradients"] = n_params * grad_bytes / shard["gradients"]

    # -- phase 2: the rollouts of a step: each process samples its own prompts (TRL hands each its share)
    rows, prompts = completions // processes, grpo["prompts_per_step"] // processes
    gathered = {}
    if processes > 1 and strategy == "zero3" and (grpo["rollouts"] == "trl" or
                                                  (grpo["rollouts"] == "vllm-server" and not full)):
        # TRL's ds3_gather_for_generation (default True) gathers every weight on every process for its generate;
        # the vLLM weight sync gathers a LoRA model whole to merge its adapters: a full 16-bit copy beside the shard
        gathered = {"gathered weights (ZeRO 3)": n_params * nbytes}
        notes.append("ZeRO 3: every weight gathered on each process while it generates")
    free = None
    if gpu and device_gb is not None:
        free = usable_gib(device_gb) * GIB - sum(held.values()) - sum(gathered.values())
    rollout: dict[str, float]
    if grpo["rollouts"] == "vllm-server":
        rollout = {}  # a server on GPUs of its own samples
        notes.append("rollouts: a vLLM server on GPUs of its own (not planned here)")
    elif grpo["rollouts"] == "vllm":
        rollout = {}  # the engine samples inside its share
        notes.append("rollouts: vLLM engine beside the trainer")
    elif grpo["rollouts"] == "hardex":
        parts, batch, gen_notes = hf_generation_parts(
            s, nbytes, budget=ROLLOUT_TOKEN_BUDGET, samples=grpo["num_generations"], prompt_tokens=prompt_tokens,
            max_new_tokens=completion, max_batch_prompts=ROLLOUT_MAX_BATCH_PROMPTS, top_p=grpo["top_p"],
            free_bytes=free, lora=None if full else lora, prompts_available=prompts)
        rollout = {f"rollout {k}": v for k, v in parts.items()}
        notes += [f"rollouts: batches of {batch} tokens (hardex generator)", *gen_notes]
    else:
        # TRL's generate: every completion of the process a row, its prompt repeated; transformers'
        # DynamicCache grows by concatenation (one layer copied at a time) and the sampler works on float32 logits
        kv = rows * seq * s.kv_bytes_per_token(nbytes)
        prefill = rows * prompt_tokens * prefill_bytes_per_token(s, nbytes, None if full else lora)
        logits = rows * s.vocab * 4 * 4
        rollout = {"rollout KV cache": kv * (1 + 1 / s.layers), "rollout prefill/logits": max(prefill, logits)}
        notes.append(f"rollouts: TRL generate, {rows} rows")
    rollout = {**gathered, **rollout}
    train_peak, rollout_peak = sum(backward.values()), sum(rollout.values())
    if rollout_peak > train_peak:
        notes.append(f"peak in the rollouts; the backward pass needs {train_peak / GIB:.1f} GiB beside the held parts")
        return Estimate(_gib({**held, **rollout}), notes, problems, batch=str(micro))
    if rollout_peak:
        notes.append(f"peak in the backward pass; the rollouts need {rollout_peak / GIB:.1f} GiB beside the held parts")
    return Estimate(_gib({**held, **backward}), notes, problems, batch=str(micro))


def estimate_generation(arch: dict | None, *, dtype: str, batch_tokens: int, backend: str, vllm_share: float | None,
                        device_gb: float | None = None, samples: int = 1, prompt_tokens: int = 512,
                        max_new_tokens: int = 250, max_batch_prompts: int = 512, top_p: float = 1.0,
                        weight_copies: int = 1, lora: dict | None = None, max_model_len: int | None = None,
                        prompts: int | None = None,
                        parameters: int | None = None, device: str = "cuda") -> Estimate:
    """Peak memory of a probe or evaluate job: the weights and the largest generation batch.

    transformers (HFGenerator): `weight_copies` copies of the weights (evaluating full checkpoints holds the
    base, the checkpoint evaluated and, while switching, the next one), LoRA adapters when `lora` is given,
    the KV cache of a batch of at most `batch_tokens` padded tokens (rows x (prompt_tokens + max_new_tokens),
    2 x layers x kv_heads x head_dim x bytes per token) and the larger of the prefill's transient and a
    decode step's logits. vLLM: the job holds the engine's share of the device (`vllm_share`, default 0.9),
    in which the engine's weights and the KV cache of one max_model_len sequence must fit.
    """
    gpu = device == "cuda"
    nbytes = DTYPE_BYTES[resolve_dtype(dtype, arch)]
    s = Shape.of(arch) if arch is not None else None
    n_params = count_parameters(arch) if arch is not None else int(parameters or 0)
    notes: list[str] = []
    problems: list[str] = []
    if backend == "vllm":
        share = vllm_share or MEMORY_SHARE["cuda"]
        if s is not None:
            need, length = vllm_engine_need(s, n_params, nbytes, max_model_len, prompt_tokens + max_new_tokens)
        else:
            need, length = n_params * nbytes, prompt_tokens + max_new_tokens
        if device_gb is None or not gpu:
            notes.append(f"the vLLM engine takes {share:g} of a device of undeclared size: its least need shown")
            return Estimate(_gib({"vLLM engine (at least)": need}), notes, problems, batch="vLLM")
        if need > share * device_gb * GIB:
            problems.append(f"the vLLM engine needs about {need / GIB:.1f} GiB (weights and a KV cache of one "
                            f"{length}-token sequence) but its share {share:g} of {device_gb:g} GiB is "
                            f"{share * device_gb:.1f} GiB")
        notes.append(f"vLLM engine: at least {need / GIB:.1f} GiB of its {share * device_gb:.1f} GiB share "
                     f"(max_model_len {length})")
        return Estimate({"vLLM engine share": share * device_gb}, notes, problems, batch="vLLM")
    held = {"weights": weight_copies * n_params * nbytes}
    if weight_copies > 1:
        notes.append(f"{weight_copies} copies of the weights: the base and full checkpoints loaded one after another")
    if s is not None and lora:
        held["adapters (fp32)"] = 4 * adapter_parameters(s, lora)  # PEFT loads them in float32
        if not gpu:  # a CPU decodes with the adapted weights merged into copies (hardex.generation.lean_step)
            linears, _ = lora_linears(s, lora["target_modules"])
            held["adapted weights, merged"] = nbytes * s.layers * sum(i * o for i, o in linears.values())
    held.update(_runtime(gpu))
    if s is None:
        notes.append("architecture unknown: KV cache and activations not counted (a lower bound)")
        return Estimate(_gib(held), notes, problems, batch="?")
    free = usable_gib(device_gb) * GIB - sum(held.values()) if gpu and device_gb is not None else None
    parts, batch, gen_notes = hf_generation_parts(
        s, nbytes, budget=batch_tokens, samples=samples, prompt_tokens=prompt_tokens, max_new_tokens=max_new_tokens,
        prompts_available=prompts,
        max_batch_prompts=max_batch_prompts, top_p=top_p, free_bytes=free, lora=lora)
    notes += [f"largest batch {batch.prompts} prompts x {samples} samples, {batch} tokens", *gen_notes]
    return Estimate(_gib({**held, **parts}), notes, problems, batch=str(batch))
