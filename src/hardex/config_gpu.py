"""The config's checks of how a model trains on its GPUs: combinations of processes, sharding, 4-bit weights,
rollouts and precision that cannot train as asked, refused at planning rather than by a train job hours in."""

from __future__ import annotations

from hardex.config_errors import ConfigError
from hardex.job_time import gpu_rates, rates_key
from hardex.precision import BF16_CAPABILITY, bf16_refusal

#: grpo.distributed strategies that shard the weights over the processes
SHARDED_WEIGHTS = ("zero3", "fsdp1", "fsdp2")


def check_gpu_training(where: str, grpo: dict) -> None:
    """Combinations of several processes, sharding, 4-bit weights and rollouts that cannot train as asked."""
    processes = grpo["processes"]
    own_rollouts = grpo["rollouts"] in ("hardex", "vllm")  # hardex.rollouts.HardexRollouts
    if processes > 1 and own_rollouts and grpo["prompts_per_step"] % processes:
        raise ConfigError(f"{where}.prompts_per_step: {grpo['prompts_per_step']} prompts do not split into whole "
                          f"groups over {processes} processes (grpo.processes), which hardex's rollouts "
                          f"(grpo.rollouts: {grpo['rollouts']}) need; use a multiple of {processes}")
    if processes > 1 and own_rollouts and grpo["distributed"] in SHARDED_WEIGHTS:
        raise ConfigError(f"{where}.rollouts: {grpo['rollouts']} samples the unwrapped model, whose weights "
                          f"grpo.distributed: {grpo['distributed']} shards over the {processes} processes (the gathers "
                          f"fall out of step); use rollouts: trl or vllm-server, or distributed: multi_gpu, zero1 "
                          f"or zero2")
    if grpo["quantization"] != "none" and processes > 1:
        raise ConfigError(f"{where}.quantization: {grpo['quantization']} loads every process's model on the first GPU; "
                          f"train 4-bit weights in one process (processes: 1) or set quantization: none")
    if processes > 1 and grpo["rollouts"] == "vllm":
        # TRL's own colocate mode starts vLLM with its external_launcher, one engine per rank on its GPU;
        # hardex's in-process engine does not, so every rank's engine lands on cuda:0
        raise ConfigError(f"{where}.rollouts: vllm starts an engine in each of the {processes} training processes "
                          f"(grpo.processes) and every one lands on the first GPU; use processes: 1, or rollouts: "
                          f"vllm-server, trl or hardex")
    if grpo["quantization"] != "none" and grpo["rollouts"] in ("vllm", "vllm-server"):
        # TRL merges the adapters into the packed NF4 weights and sends uint8 tensors to a 16-bit engine
        raise ConfigError(f"{where}.quantization: {grpo['quantization']} with rollouts: {grpo['rollouts']} would add "
                          f"the LoRA deltas to packed 4-bit weights; use rollouts: hardex or trl")
    if grpo["rollouts"] == "vllm-server" and grpo["finetune"] == "lora" and grpo["precision"] != "fp32":
        # TRL's sync (W += dW, read, W -= dW) rounds twice a step: in 16 bits the frozen base and the KL reference
        # walk away over a run (tests/unit/test_vllm_server.py); float32's rounding is 2^16 times finer. auto is
        # refused too (bf16 from Ampere on); hardex's own vLLM rollouts compute W + dW without touching W.
        precision = "bf16" if grpo["precision"] == "auto" else grpo["precision"]
        raise ConfigError(f"{where}.rollouts: vllm-server with finetune: lora syncs the server by merging the adapters "
                          f"into the frozen base and unmerging them after, every step, which in {precision} drifts the "
                          f"base; use rollouts: vllm (one process), or {where}.precision: fp32")


def check_card_bfloat16(cfg: dict, model: str, where: str, grpo: dict) -> None:
    """An explicit bfloat16 on the config's card without it (compute capability below 8.0, stated for each
    gpu_kind and, where a user says it, in gpu_rates) is refused here: the train job would refuse it only after
    hours of probing (hardex.precision), and vLLM refuses it too. auto takes fp32 there."""
    cap = gpu_rates(cfg).capability
    if not cfg["compute"]["gpu"] or cap is None or cap >= BF16_CAPABILITY:
        return
    card = f"{rates_key(cfg)} states {gpu_rates(cfg).name}'s, {'.'.join(map(str, cap))}"
    if cfg["models"][model].get("dtype") == "bfloat16":
        raise ConfigError(bf16_refusal(f"models.{model}.dtype", "bfloat16", card, "auto, float32 or float16"))
    if grpo["precision"] == "bf16":
        raise ConfigError(bf16_refusal(f"{where}.precision", "bf16", card))
