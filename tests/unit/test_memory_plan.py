"""The memory plan: the planning-time GPU memory estimate of each job (hardex.memory_estimate), the refusal of a plan
that cannot fit (hardex.memory_plan) and what it says to change (hardex.memory_advice).

Configs are checked as the Snakefile checks them (hardex.config.check_config). Hub models are made plannable
offline with a stub hub cache holding only their config.json (tests.support.stub_hub_cache) and
HF_HUB_OFFLINE set: the config check then accepts them without the network, whatever the environment says.
The sizes of the hub models come from hardex.architectures' kept config.json files; the estimate functions
are also tested on architecture dicts written here.
"""

from __future__ import annotations

import copy
import inspect
import math
import re

import pytest
import yaml

from hardex.architectures import count_parameters
from hardex.config import check_config
from hardex.memory_estimate import GIB, USABLE_SHARE, estimate_generation, estimate_train, usable_gib
from hardex.memory_plan import PlanError, check_plan, format_plan, plan
from hardex.model_shape import ROLLOUT_TOKEN_BUDGET
from tests.support import BUILT_CONFIG, ROOT, stub_hub_cache

QWEN3_14B = {"model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 17408, "num_hidden_layers": 40,
             "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
             "tie_word_embeddings": False, "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}
QWEN3_4B = {"model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36,
            "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
            "tie_word_embeddings": True, "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}
LORA = {"r": 32, "alpha": 32, "dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


def grpo(**changes) -> dict:
    """The grpo settings estimate_train reads (hard_examples_paper.yaml's, LoRA)."""
    g = {"finetune": "lora", "lora": LORA, "num_generations": 8, "prompts_per_step": 32,
         "gradient_accumulation_steps": 8, "gradient_checkpointing": True, "beta": 0.1, "rollouts": "hardex",
         "max_completion_length": 250, "top_p": 1.0}
    return {**g, **changes}


@pytest.fixture
def checked(monkeypatch, tmp_path):
    """check_config of a YAML file (or a dict), offline: every hub model of it gets a stub cache entry."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    def check(source, **compute) -> dict:
        cfg = copy.deepcopy(source) if isinstance(source, dict) else yaml.safe_load((ROOT / source).read_text())
        cfg.setdefault("compute", {}).update(compute)
        stub_hub_cache(tmp_path / "hub", [m["path"] for m in cfg["models"].values() if "/" in m["path"]])
        return check_config(cfg)

    return check


def hub_model_config(model: dict, **grpo_settings) -> dict:
    """experiments/cpu_tiny.yaml (the built model's CPU config, synthetic tasks) with one hub model and the grpo
    settings given; a generation batch of 65536 tokens (the default's 262144 would prefill ~450 short prompts at once:
    too much beside a 14B model, see test_hard_examples_presets_fit_80gb)."""
    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    cfg["models"] = {"qwen3-14b": model}
    cfg["generation"] = {"token_budget": 65536}
    cfg["grpo"].update({"prompts_per_step": 8, "num_generations": 8, "max_completion_length": 250, **grpo_settings})
    return cfg


QWEN3_14B_MODEL = {"path": "Qwen/Qwen3-14B", "chat": True, "dtype": "bfloat16", "size_b": 14.8}


def test_a_14b_full_finetune_is_refused_on_80gb(checked):
    cfg = checked(hub_model_config(QWEN3_14B_MODEL, finetune="full", gradient_checkpointing=True, beta=0.0),
                  gpu=1, gpu_memory_gb=80)
    with pytest.raises(PlanError) as err:
        check_plan(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("train job of model 'qwen3-14b'")
    assert float(re.search(r"about ([\d.]+) GiB", message).group(1)) > 80
    assert "compute.gpu_memory_gb 80" in message
    assert "grpo.finetune: lora" in message
    # the parts that make it: bfloat16 weights, gradients and AdamW's two states in the parameters' dtype
    e = estimate_train(QWEN3_14B, dtype="bfloat16", finetune="full", lora=LORA, grpo=grpo(finetune="full", beta=0.0),
                       prompt_tokens=512, device_gb=80)
    weights = 2 * count_parameters(QWEN3_14B) / GIB
    assert e.parts["weights"] == pytest.approx(weights)
    assert e.parts["gradients"] == pytest.approx(weights)
    assert e.parts["optimizer (AdamW)"] == pytest.approx(2 * weights)
    assert "reference model" not in e.parts  # beta 0: TRL makes no reference model
    with_kl = estimate_train(QWEN3_14B, dtype="bfloat16", finetune="full", lora=LORA, grpo=grpo(finetune="full"),
                             prompt_tokens=512, device_gb=80)
    assert with_kl.parts["reference model"] == pytest.approx(weights)


def test_the_same_model_with_lora_and_checkpointing_fits_80gb(checked):
    cfg = checked(hub_model_config(QWEN3_14B_MODEL, finetune="lora", gradient_checkpointing=True, beta=0.1),
                  gpu=1, gpu_memory_gb=80)
    plans = check_plan(cfg)
    train = next(p for p in plans if p.kind == "train")
    assert train.fits is True and train.estimate.total < 80
    assert "reference model" not in train.estimate.parts  # with LoRA the reference is the base, adapters off
    e = estimate_train(QWEN3_14B, dtype="bfloat16", finetune="lora", lora=LORA, grpo=grpo(), prompt_tokens=512,
                       device_gb=80)
    assert e.total < 80
    # adapters: r x (in + out) per targeted linear per layer, float32 weights, gradients and AdamW's two states
    h, q, kv, i = 5120, 40 * 128, 8 * 128, 17408
    per_layer = 32 * ((h + q) + 2 * (h + kv) + (q + h) + 2 * (h + i) + (i + h))
    assert e.parts["adapters (fp32 + grads + AdamW)"] == pytest.approx(40 * per_layer * 16 / GIB)


# the presets that run on GPUs declare the memory of the card their docs name (docs/gpu-runs.md)
GPU_PRESETS = ["hard_examples_paper", "hard_examples_code", "difficulty_limits", "gpu_mini"]


@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_presets_fit_the_gpu_they_declare(checked, preset):
    assert "H100 80GB" in (ROOT / "docs" / "gpu-runs.md").read_text()
    cfg = checked(f"experiments/{preset}.yaml")
    assert cfg["compute"]["gpu"] >= 1 and cfg["compute"]["gpu_memory_gb"] <= 80
    plans = check_plan(cfg)
    assert {p.kind for p in plans} == {"train", "probe", "evaluate"}
    assert all(p.fits for p in plans)


def test_at_the_default_token_budget_evaluation_on_80gb_is_refused_with_the_budget_that_fits(checked):
    # why hard_examples_*.yaml set generation.token_budget: a generation batch's prefill beside its KV cache
    cfg = yaml.safe_load((ROOT / "experiments" / "hard_examples_paper.yaml").read_text())
    del cfg["generation"]["token_budget"]
    cfg = checked(cfg)
    with pytest.raises(PlanError, match=r"^evaluate job of model .*lower generation\.token_budget to \d+"):
        check_plan(cfg)
    refused = [p for p in plan(cfg) if not p.fits]
    assert {p.kind for p in refused} == {"evaluate"}
    advised = min(int(re.search(r"generation\.token_budget to (\d+)", p.advice).group(1)) for p in refused)
    shipped = yaml.safe_load((ROOT / "experiments" / "hard_examples_paper.yaml").read_text())
    assert shipped["generation"]["token_budget"] <= advised


def test_more_accumulation_lowers_the_train_estimate_and_the_advised_value_fits(checked):
    totals = [estimate_train(QWEN3_4B, dtype="bfloat16", finetune="lora", lora=LORA,
                             grpo=grpo(gradient_accumulation_steps=n, gradient_checkpointing=False),
                             prompt_tokens=512, device_gb=80).total for n in (1, 2, 4, 8)]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    model = {"path": "Qwen/Qwen3-4B", "chat": True, "dtype": "bfloat16", "size_b": 4.0}
    cfg = hub_model_config(model, finetune="lora", gradient_checkpointing=False, prompts_per_step=32,
                           gradient_accumulation_steps=1, repeat_small_subsets=True)
    cfg = checked(cfg, gpu=1, gpu_memory_gb=80)
    with pytest.raises(PlanError, match="grpo.gradient_accumulation_steps") as err:
        check_plan(cfg)
    advised = re.search(r"gradient_accumulation_steps to (\d+) \(micro-batch (\d+)\)", str(err.value))
    n, micro = map(int, advised.groups())
    assert n > 1 and micro == 32 * 8 // n
    cfg["grpo"]["gradient_accumulation_steps"] = n
    train = next(p for p in check_plan(cfg) if p.kind == "train")
    assert train.fits and train.micro_batch == str(micro)


def test_a_colocated_vllm_engine_taking_0_9_is_refused(checked):
    e = estimate_train(QWEN3_4B, dtype="bfloat16", finetune="lora", lora=LORA,
                       grpo=grpo(rollouts="vllm", vllm={"gpu_memory_utilization": 0.9}), prompt_tokens=512,
                       device_gb=80)
    assert e.parts["vLLM engine share"] == pytest.approx(72)
    assert e.total > 80
    model = {"path": "Qwen/Qwen3-4B", "chat": True, "dtype": "bfloat16", "size_b": 4.0}
    cfg = hub_model_config(model, finetune="lora", gradient_checkpointing=True, rollouts="vllm")
    cfg["generation"]["vllm"] = {"gpu_memory_utilization": 0.9}
    cfg = checked(cfg, gpu=1, gpu_memory_gb=80)
    with pytest.raises(PlanError, match=r"generation\.vllm\.gpu_memory_utilization to ") as err:
        check_plan(cfg)
    assert str(err.value).startswith("train job of model 'qwen3-14b'")  # the config's name for the model
    share = float(re.search(r"gpu_memory_utilization to ([\d.]+)", str(err.value)).group(1))
    assert share < 0.9
    cfg["generation"]["vllm"]["gpu_memory_utilization"] = share
    train = next(p for p in check_plan(cfg) if p.kind == "train")
    assert train.fits and train.estimate.parts["vLLM engine share"] == pytest.approx(share * 80)


def test_a_vllm_share_too_small_for_the_engine_is_refused():
    # TRL's colocated default, 0.3 of 80 GiB, cannot hold Qwen3-14B's 27.5 GiB of weights
    e = estimate_train(QWEN3_14B, dtype="bfloat16", finetune="lora", lora=LORA, grpo=grpo(rollouts="vllm", vllm={}),
                       prompt_tokens=512, device_gb=80)
    assert e.parts["vLLM engine share"] == pytest.approx(24)
    assert e.problems and "the vLLM engine needs" in e.problems[0]


@pytest.mark.parametrize("arch", [QWEN3_4B, QWEN3_14B], ids=["qwen3-4b", "qwen3-14b"])
def test_weights_are_two_bytes_per_parameter(arch):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):  # the count transformers itself makes, without allocating the weights
        model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in arch.items() if k != "model_type"}))
    assert count_parameters(arch) == sum(p.numel() for p in model.parameters())
    train = estimate_train(arch, dtype="bfloat16", finetune="lora", lora=LORA, grpo=grpo(), prompt_tokens=512)
    probe = estimate_generation(arch, dtype="auto", batch_tokens=65536, backend="transformers", vllm_share=None)
    fp32 = estimate_generation(arch, dtype="float32", batch_tokens=65536, backend="transformers", vllm_share=None)
    assert train.parts["weights"] == probe.parts["weights"] == pytest.approx(2 * count_parameters(arch) / GIB)
    assert fp32.parts["weights"] == pytest.approx(4 * count_parameters(arch) / GIB)


def test_the_kept_architectures_are_the_ones_planned(checked):
    from hardex import architectures

    for hub_id, mine in (("Qwen/Qwen3-14B", QWEN3_14B), ("Qwen/Qwen3-4B", QWEN3_4B)):
        kept = architectures.config_of(hub_id)
        assert {k: kept.get(k) for k in mine} == mine
        assert architectures.count_parameters(kept) == count_parameters(mine)
    plans = plan(checked("experiments/hard_examples_paper.yaml", gpu_memory_gb=80))
    assert all("kept config" in p.architecture for p in plans)


def test_a_cpu_config_is_never_refused(checked):
    plans = check_plan(checked("experiments/cpu_tiny.yaml"))
    assert plans and all(p.fits is None and p.device_gb is None for p in plans)
    # not even a 14B full fine-tune: a CPU run declares no GPU memory
    big = checked(hub_model_config(QWEN3_14B_MODEL, finetune="full"))
    plans = check_plan(big)
    assert next(p for p in plans if p.kind == "train").estimate.total > 80
    assert all(p.fits is None for p in plans)
    assert "NO" not in format_plan(plans)


def test_without_gpu_memory_declared_estimates_are_printed_not_checked(checked):
    cfg = checked(hub_model_config(QWEN3_14B_MODEL, finetune="full"), gpu=1)
    plans = check_plan(cfg)
    assert all(p.fits is None for p in plans)


def test_the_table_is_aligned_and_names_the_refusal(checked):
    cfg = checked(hub_model_config(QWEN3_14B_MODEL, finetune="full"), gpu=1, gpu_memory_gb=80)
    table = format_plan(plan(cfg))
    lines = table.splitlines()
    header, rows = lines[0], lines[1:4]
    assert header.split() == ["model", "job", "batch", "GiB", "biggest", "parts", "device", "fits"]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    for row in rows:
        assert row.startswith("qwen3-14b")
        assert row[starts[-1]:].strip() in ("yes", "NO")  # the fits column lines up with its header
    assert "train" in rows[0] and rows[0].rstrip().endswith("NO")
    assert any("grpo.finetune: lora" in line for line in lines[4:])


def test_an_unknown_architecture_falls_back_to_size_b(checked):
    model = {"path": "someone/unknown-7b", "chat": True, "dtype": "bfloat16", "size_b": 7.0}
    cfg = hub_model_config(model, finetune="lora")
    cfg["models"] = {"unknown": model}
    plans = plan(checked(cfg, gpu=1, gpu_memory_gb=80))
    train = next(p for p in plans if p.kind == "train")
    assert train.estimate.parts["weights"] == pytest.approx(7e9 * 2 / GIB)
    assert "unknown" in train.architecture and any("not counted" in n for n in train.notes)
    # printed with snakemake -n: its 'fits' marked and the lower bound said once, with what to check (issue 46: a
    # misspelt hub id was planned as "fits yes" and nothing said more)
    table = format_plan(plans)
    assert all(line.rstrip().endswith("yes*") for line in table.splitlines()[1:4])
    assert table.count("* unknown: architecture unknown") == 1 and "Is the hub id right?" in table


def test_the_rollout_budget_is_the_trainers():
    from hardex.rollouts import rollout_generator

    assert inspect.signature(rollout_generator).parameters["token_budget"].default == ROLLOUT_TOKEN_BUDGET


def test_kv_cache_is_two_by_layers_by_kv_heads_by_head_dim_per_token():
    e = estimate_generation(QWEN3_4B, dtype="bfloat16", batch_tokens=65536, backend="transformers", vllm_share=None,
                            samples=8, prompt_tokens=512, max_new_tokens=250)
    assert e.batch == "80x762"  # 10 prompts x 8 samples of 512 + 250 tokens fit 65536
    kv = 80 * 762 * 2 * 36 * 8 * 128 * 2 / GIB
    # + the prompts' own cache, held until its 8 copies are made (more than one layer rebuilt as finished rows leave)
    assert e.parts["KV cache"] == pytest.approx(kv * (1 + 1 / 8))
    # on a GPU of known size the generator holds the KV cache to 70% of the free memory
    capped = estimate_generation(QWEN3_14B, dtype="bfloat16", batch_tokens=262144, backend="transformers",
                                 vllm_share=None, device_gb=40, samples=8, prompt_tokens=512, max_new_tokens=250)
    free = 40 - capped.parts["weights"] - capped.parts["CUDA context"]
    assert capped.parts["KV cache"] <= 0.7 * free * (1 + 2 / 40)
    assert any("lowers its token budget" in n for n in capped.notes)


def test_materialised_logits_cost_more_than_the_fused_head():
    # 4 prompts x 8 completions in one micro-batch: the backward pass, not the rollouts, is the peak
    args = dict(dtype="bfloat16", finetune="lora", lora=LORA, prompt_tokens=512, device_gb=80,
                grpo=grpo(prompts_per_step=4, gradient_accumulation_steps=1))
    fused = estimate_train(QWEN3_4B, logprobs="fused", **args)
    full = estimate_train(QWEN3_4B, logprobs="full", **args)
    # older TRL: logits, their temperature-scaled copy, the saved log-softmax and the gradient, in bfloat16
    assert full.parts["logits"] == pytest.approx(4 * 32 * 250 * 151936 * 2 / GIB)
    assert fused.parts["log-prob head (fused)"] < full.parts["logits"] / 10


@pytest.mark.parametrize("config", ["experiments/cpu_tiny.yaml", "tests/configs/smoke.yaml",
                                    "tests/configs/hub_fixtures.yaml"])
def test_every_shipped_config_can_be_planned_on_a_gpu(checked, config):
    # decodings that leave top_p out (the smoke config's) are planned at its default, as the generator reads them
    plans = check_plan(checked(config, gpu=1, gpu_memory_gb=80))
    assert plans and all(p.fits for p in plans)


def test_several_processes_split_the_micro_batch_and_zero3_shards_the_full_fine_tune():
    # 14B fully fine-tuned: one process cannot hold it on 80 GB; ZeRO 3 over 8 processes shards weights,
    # gradients and AdamW's states (each process a GPU), data parallel keeps all of it in each
    args = dict(dtype="bfloat16", finetune="full", lora=LORA, prompt_tokens=512, device_gb=80)
    one = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0), **args)
    ddp = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, processes=8, distributed="multi_gpu"), **args)
    zero3 = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, processes=8, distributed="zero3"), **args)
    assert one.batch == "32" and ddp.batch == zero3.batch == "4"  # 32 prompts x 8 / 8 micro-batches / 8 processes
    assert ddp.parts["weights"] == one.parts["weights"] and ddp.total > 80
    assert zero3.parts["weights"] == pytest.approx(one.parts["weights"] / 8)
    # DeepSpeed in bf16: float32 master weights and both AdamW moments, 12 bytes a parameter, sharded over 8
    # (not the 4 bytes of bfloat16 moments a one-process run keeps)
    n = count_parameters(QWEN3_14B)
    assert one.parts["optimizer (AdamW)"] == pytest.approx(4 * n / GIB)
    assert zero3.parts["optimizer (fp32 master + AdamW)"] == pytest.approx(12 * n / 8 / GIB)
    assert zero3.total < 80 * USABLE_SHARE


def test_fsdp_upcasts_the_trainable_weights_to_float32_and_zero1_shards_only_the_optimizer():
    args = dict(dtype="bfloat16", finetune="full", lora=LORA, prompt_tokens=512, device_gb=80)
    n = count_parameters(QWEN3_14B)
    fsdp = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, processes=8, distributed="fsdp2"), **args)
    assert fsdp.parts["weights"] == pytest.approx(4 * n / 8 / GIB)  # float32, sharded
    assert fsdp.parts["optimizer (AdamW)"] == pytest.approx(8 * n / 8 / GIB)  # two float32 moments, sharded
    zero1 = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, processes=8, distributed="zero1"), **args)
    assert zero1.parts["weights"] == pytest.approx(2 * n / GIB)
    assert zero1.parts["optimizer (fp32 master + AdamW)"] == pytest.approx(12 * n / 8 / GIB)


def test_a_job_is_checked_against_the_cards_usable_memory_not_its_nominal_size():
    # an "80 GB" H100 reports 81559 MiB: 79.6 GiB, less than the 80 compute.gpu_memory_gb names
    assert usable_gib(80) == pytest.approx(81559 / 1024, abs=0.05)
    from hardex.memory_estimate import Estimate

    assert not Estimate({"weights": 79.8}).fits(80)  # phi-4's evaluate job as planned before
    assert Estimate({"weights": 79.5}).fits(80)


def test_4bit_base_weights_take_about_a_quarter_of_bfloat16():
    args = dict(dtype="bfloat16", finetune="lora", lora=LORA, prompt_tokens=512, device_gb=80)
    bf16 = estimate_train(QWEN3_14B, grpo=grpo(), **args)
    nf4 = estimate_train(QWEN3_14B, grpo=grpo(quantization="4bit"), **args)
    assert 0.25 < nf4.parts["weights"] / bf16.parts["weights"] < 0.35  # embeddings and head stay in bfloat16


# ---- issue 43: what each process holds while it generates, and the dtype the train job loads ----


def test_under_zero3_trls_generate_gathers_every_weight_and_samples_only_its_own_share():
    # TRL's ds3_gather_for_generation (default True): each process holds the whole bfloat16 model while it
    # generates; the completions it samples are its own share of the step (256 / 8), not the step's 256
    args = dict(dtype="bfloat16", finetune="full", lora=LORA, prompt_tokens=512, device_gb=80)
    n, per_token = count_parameters(QWEN3_14B), 2 * 40 * 8 * 128 * 2
    zero3 = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, rollouts="trl", processes=8,
                                                distributed="zero3"), **args)
    assert zero3.parts["gathered weights (ZeRO 3)"] == pytest.approx(2 * n / GIB)
    assert zero3.parts["rollout KV cache"] == pytest.approx(256 // 8 * 762 * per_token * (1 + 1 / 40) / GIB)
    assert "rollouts: TRL generate, 32 rows" in zero3.notes
    one = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, rollouts="trl"), **args)
    assert "rollouts: TRL generate, 256 rows" in one.notes and "gathered weights (ZeRO 3)" not in one.parts
    # ZeRO 2 keeps whole weights: nothing to gather
    zero2 = estimate_train(QWEN3_14B, grpo=grpo(finetune="full", beta=0.0, rollouts="trl", processes=8,
                                                distributed="zero2"), **args)
    assert "gathered weights (ZeRO 3)" not in zero2.parts


def test_hardex_rollouts_of_several_processes_batch_only_their_own_prompts():
    args = dict(dtype="bfloat16", finetune="lora", lora=LORA, prompt_tokens=512, device_gb=80)
    one = estimate_train(QWEN3_4B, grpo=grpo(), **args)
    two = estimate_train(QWEN3_4B, grpo=grpo(processes=2), **args)
    assert "batches of 256x762" in " ".join(one.notes) and "batches of 128x762" in " ".join(two.notes)
    assert two.parts["rollout KV cache"] == pytest.approx(one.parts["rollout KV cache"] / 2)


def test_a_full_fine_tune_on_a_gpu_is_planned_in_float32_and_lora_over_bfloat16(checked):
    # hardex.precision.policy_dtype: a full fine-tune loads float32 weights on a GPU as on a CPU (bf16 autocast);
    # its gradients, AdamW's moments and TRL's reference model follow the weights' dtype
    model = {"path": "Qwen/Qwen3-4B", "chat": True, "dtype": "bfloat16", "size_b": 4.0}
    n = count_parameters(QWEN3_4B)
    full = checked(hub_model_config(model, finetune="full", beta=0.1), gpu=1, gpu_memory_gb=141)
    train = next(p for p in plan(full) if p.kind == "train").estimate
    assert train.parts["weights"] == pytest.approx(4 * n / GIB)
    assert train.parts["optimizer (AdamW)"] == pytest.approx(8 * n / GIB)
    assert train.parts["reference model"] == pytest.approx(4 * n / GIB)
    lora = checked(hub_model_config(model, finetune="lora"), gpu=1, gpu_memory_gb=80)
    assert next(p for p in plan(lora) if p.kind == "train").estimate.parts["weights"] == pytest.approx(2 * n / GIB)
    fp32 = checked(hub_model_config(model, finetune="lora", precision="fp32"), gpu=1, gpu_memory_gb=80)
    assert next(p for p in plan(fp32) if p.kind == "train").estimate.parts["weights"] == pytest.approx(4 * n / GIB)


@pytest.mark.parametrize("finetune, precision", [("full", "bf16"), ("full", "auto"), ("lora", "bf16"),
                                                 ("lora", "fp32")])
def test_the_plans_train_dtype_is_the_one_training_loads(checked, finetune, precision):
    import torch

    from hardex.precision import policy_dtype
    from hardex.settings import grpo_settings

    model = {"path": "Qwen/Qwen3-4B", "chat": True, "dtype": "bfloat16", "size_b": 4.0}
    cfg = checked(hub_model_config(model, finetune=finetune, precision=precision), gpu=1, gpu_memory_gb=141)
    weights = next(p for p in plan(cfg) if p.kind == "train").estimate.parts["weights"]
    loaded = policy_dtype(grpo_settings(cfg, "qwen3-14b"), use_cpu=False)
    assert weights == pytest.approx(torch.finfo(loaded).bits // 8 * count_parameters(QWEN3_4B) / GIB)


def test_4bit_adapters_are_planned_in_float32():
    # hardex keeps a QLoRA model's adapters float32 (TRL 1.16 would cast them to bfloat16): 16 bytes each
    e = estimate_train(QWEN3_14B, dtype="bfloat16", finetune="lora", lora=LORA, grpo=grpo(quantization="4bit"),
                       prompt_tokens=512, device_gb=80)
    from hardex.memory_estimate import adapter_parameters
    from hardex.model_shape import Shape

    assert e.parts["adapters (fp32 + grads + AdamW)"] == pytest.approx(
        16 * adapter_parameters(Shape.of(QWEN3_14B), LORA) / GIB)


@pytest.mark.parametrize("bfloat16, nbytes", [("1", 2), ("0", 4)], ids=["bf16 CPU", "fp32 CPU"])
def test_on_a_cpu_generation_is_planned_in_the_jobs_precision_and_a_probe_one_chunk_at_a_time(checked, monkeypatch,
                                                                                                bfloat16, nbytes):
    """A CPU job's generator reads dtype auto as the CPU's precision (generation.hf.pick_dtype), and a full probe
    generates one chunk of its pool at a time: the study's probe was planned at 2.6x its peak without both."""
    monkeypatch.setenv("HARDEX_CPU_BFLOAT16", bfloat16)
    cfg = hub_model_config({**QWEN3_14B_MODEL, "dtype": "auto"}, finetune="lora")
    cfg["generation"] = {"token_budget": 262144}
    cfg["probe"]["chunk_size"] = 16  # of 300 pool prompts; 16 x 8 samples of 51 + 64 tokens fit the budget
    plans = {p.kind: p for p in plan(checked(cfg, prompt_tokens=51))}
    assert plans["probe"].micro_batch == f"{16 * 8}x{51 + 64}"
    for kind in ("probe", "evaluate"):
        weights = plans[kind].estimate.parts["weights"]
        assert weights == pytest.approx(count_parameters(QWEN3_14B) * nbytes / GIB, rel=0.01), kind


def test_only_a_cpu_runs_known_models_declare_the_plans_host_memory(checked, tmp_path):
    """A CPU job's mem_mb is its plan with HOST_SLACK (tests/workflow/test_experiments.py checks the rules ask for
    it); the size formula stays on GPUs, where the plan is the card's memory, and for a rehearsal's stand-ins,
    which the plan sizes as the real model (Qwen3-14B's evaluation would have declared 90 GB for a tiny model).
    config.yaml's model is taken from the hub here: its GGUF package is not installed in the main test lane."""
    from hardex.memory_plan import HOST_SLACK, host_memory_mb
    from hardex.rehearsal import rehearsal_config

    source = yaml.safe_load((ROOT / "config.yaml").read_text())
    smol = {k: v for k, v in source["models"]["smol"].items() if k != "gguf"}
    source["models"]["smol"] = {**smol, "path": smol["architecture"]}
    cfg = checked(source)
    declared = host_memory_mb(cfg)
    assert set(declared) == {("smol", "train"), ("smol", "probe"), ("smol", "evaluate")}
    for p in plan(cfg):
        assert declared[p.model, p.kind] == math.ceil(p.estimate.total * HOST_SLACK * 1024)
    assert host_memory_mb(checked(source, gpu=1)) == {}
    paper = yaml.safe_load((ROOT / "experiments" / "hard_examples_paper.yaml").read_text())
    rehearsal = check_config(rehearsal_config(paper, "experiments/hard_examples_paper.yaml", tmp_path, quick=True))
    assert host_memory_mb(rehearsal) == {}
