"""The rehearsal: configs it writes, stand-in models of real architectures, its scorer, its report banner."""

from __future__ import annotations

import json

import pytest
import yaml

from hardex.config import ConfigError, check_config
from hardex.rehearsal import POOL_ROWS, RehearsalError, rehearsal_config
from hardex.settings import grpo_settings
from hardex.tasks import get_task
from hardex.tasks.seeded import seeded_pass_rate
from tests.support import BUILT_CONFIG, ROOT

PRESETS = sorted((ROOT / "experiments").glob("*.yaml"))


def rehearsal_of(preset, tmp_path, **kw) -> dict:
    return rehearsal_config(yaml.safe_load(preset.read_text()), str(preset), tmp_path / "samples", base=ROOT, **kw)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_every_preset_has_a_rehearsal_the_config_check_accepts(preset, tmp_path):
    source = yaml.safe_load(preset.read_text())
    cfg = check_config(rehearsal_of(preset, tmp_path))
    assert cfg["rehearsal"]["of"] == str(preset) and cfg["seeds"] == source["seeds"][:1]
    # the same models, tasks and strategies; hub and GGUF models become stand-ins of their architecture
    assert list(cfg["models"]) == sorted(source["models"]) and set(cfg["tasks"]) == set(source["tasks"])
    assert cfg["selection"]["strategies"] == source["selection"]["strategies"]
    for name, m in cfg["models"].items():
        assert m["path"] in ("standin", "build")
        if source["models"][name]["path"] != "build":
            assert m["architecture"] == source["models"][name].get("architecture", source["models"][name]["path"])
        g = grpo_settings(cfg, name)
        assert g["max_completion_length"] <= 16 and g["prompts_per_step"] <= 2
    # every dataset split is read from a file or generated, never from the hub
    for ds in cfg["datasets"].values():
        for spec in ds["splits"].values():
            assert "hub" not in spec
    for task in cfg["tasks"].values():
        assert task["scoring"].startswith("rehearsal+")


def test_a_rehearsal_keeps_the_settings_only_a_preset_uses(tmp_path):
    paper = rehearsal_of(ROOT / "experiments" / "hard_examples_paper.yaml", tmp_path)
    code = rehearsal_of(ROOT / "experiments" / "hard_examples_code.yaml", tmp_path)
    limits = rehearsal_of(ROOT / "experiments" / "difficulty_limits.yaml", tmp_path)
    # paper 1's released split, row by row (the first rows of it), strict scoring, phi-4's fused LoRA targets
    released = yaml.safe_load((ROOT / "experiments" / "hard_examples_paper.yaml").read_text())
    released_rows = released["datasets"]["bbh"]["splits"]["pool"]["rows"]
    assert paper["datasets"]["bbh"]["splits"]["pool"]["rows"] == released_rows[:POOL_ROWS]
    assert code["tasks"]["gsm8k"]["scoring"] == "rehearsal+strict"
    assert paper["models"]["phi4"]["grpo"]["lora"]["target_modules"] == ["qkv_proj", "o_proj", "gate_up_proj",
                                                                         "down_proj"]
    # paper 2's tiers and epochs instead of steps
    assert limits["selection"]["tiers"] and limits["grpo"]["epochs"] == 1


def test_a_rehearsal_computes_in_this_cpus_precision_whatever_the_preset_asks(tmp_path):
    """paper 1's presets ask for bf16 (a GPU's choice); on a CPU that emulates bfloat16 that made a stand-in's
    128k-row output layer most of a rehearsal's time. The rehearsal takes auto, which resolves per CPU."""
    source = yaml.safe_load((ROOT / "experiments" / "hard_examples_paper.yaml").read_text())
    assert source["grpo"]["precision"] == "bf16"
    cfg = check_config(rehearsal_of(ROOT / "experiments" / "hard_examples_paper.yaml", tmp_path))
    assert {grpo_settings(cfg, name)["precision"] for name in cfg["models"]} == {"auto"}


def test_a_quick_rehearsal_trains_one_strategy(tmp_path):
    cfg = check_config(rehearsal_of(ROOT / "experiments" / "cpu_online.yaml", tmp_path, quick=True))
    source = yaml.safe_load((ROOT / "experiments" / "cpu_online.yaml").read_text())
    assert cfg["selection"]["strategies"] == source["selection"]["strategies"][:1]
    assert cfg["rehearsal"]["quick"]


def test_a_quick_rehearsal_keeps_one_model_of_each_class(tmp_path):
    """Three Qwen2.5 sizes run the same code as stand-ins: one is rehearsed. Qwen3-4B ties its embeddings
    and Qwen3-14B does not, so both stay; the full rehearsal keeps every model."""
    limits = check_config(rehearsal_of(ROOT / "experiments" / "difficulty_limits.yaml", tmp_path, quick=True))
    assert list(limits["models"]) == ["qwen25-05b"]
    paper = check_config(rehearsal_of(ROOT / "experiments" / "hard_examples_paper.yaml", tmp_path, quick=True))
    assert set(paper["models"]) == {"qwen3-4b", "qwen3-14b", "phi4", "llama31-8b"}
    study = check_config(rehearsal_of(ROOT / "experiments" / "cpu_study.yaml", tmp_path, quick=True))
    assert list(study["models"]) == ["small"]  # built models are all built at the stand-ins' size
    full = check_config(rehearsal_of(ROOT / "experiments" / "difficulty_limits.yaml", tmp_path))
    assert len(full["models"]) == 3


def test_a_quick_rehearsal_runs_each_model_class_on_one_task_and_each_task_once(tmp_path):
    """Four model classes and two tasks: four cells (each model on one task, each task on two models), not eight;
    the full rehearsal keeps every model on every task."""
    paper = check_config(rehearsal_of(ROOT / "experiments" / "hard_examples_paper.yaml", tmp_path, quick=True))
    cells = [(m, t) for m, entry in paper["models"].items() for t in entry["tasks"]]
    assert len(cells) == 4 and {t for _, t in cells} == set(paper["tasks"]) and len({m for m, _ in cells}) == 4
    full = check_config(rehearsal_of(ROOT / "experiments" / "hard_examples_paper.yaml", tmp_path))
    assert all("tasks" not in entry for entry in full["models"].values())


def test_a_quick_rehearsal_keeps_only_the_controls_of_its_strategy(tmp_path):
    from hardex.settings import run_strategies

    source = yaml.safe_load((ROOT / "experiments" / "cpu_online.yaml").read_text())
    first, second = source["selection"]["strategies"][:2]
    source["selection"]["controls"] = {"shuffled": [first, second], "format": [second]}
    cfg = check_config(rehearsal_config(source, "x.yaml", tmp_path / "samples", base=ROOT, quick=True))
    assert cfg["selection"]["controls"] == {"shuffled": [first]}
    assert f"{first}_shuffled" in run_strategies(cfg)


def test_a_model_without_a_kept_architecture_is_refused_by_key(tmp_path):
    source = {"models": {"mine": {"path": "someone/unknown-7b"}}, "datasets": {}, "tasks": {}}
    with pytest.raises(RehearsalError, match=r"models\.mine: no kept architecture for 'someone/unknown-7b'"):
        rehearsal_config(source, "x.yaml", tmp_path)


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    from hardex.rehearsal.standin import build_standin

    out = tmp_path_factory.mktemp("standins")
    return {arch: (out / arch.replace("/", "__"),
                   build_standin(out / arch.replace("/", "__"), arch, log=lambda *a: None))
            for arch in ("microsoft/phi-4", "Qwen/Qwen3-4B", "meta-llama/Llama-3.1-8B-Instruct")}


def test_a_phi3_standin_takes_lora_on_its_fused_projections(standins):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder, record = standins["microsoft/phi-4"]
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "Phi3ForCausalLM" and record["architecture"] == "Phi3ForCausalLM"
    attn = model.model.layers[0].self_attn
    cfg = model.config
    assert attn.qkv_proj.out_features == (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim
    peft_model = get_peft_model(model, LoraConfig(r=4,
                                                  target_modules=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]))
    names = [n for n, _ in peft_model.named_parameters() if "lora_A" in n]
    assert any("qkv_proj.lora_A" in n for n in names) and any("gate_up_proj.lora_A" in n for n in names)
    # the names paper 1's other models use match nothing fused: q_proj alone would leave attention untouched
    assert not any(".q_proj" in n for n, _ in model.named_modules())
    out = peft_model(torch.tensor([[1, 2, 3]])).logits
    assert out.shape[-1] == cfg.vocab_size


def test_standins_render_their_family_chat_template(standins):
    from transformers import AutoTokenizer

    from hardex.models import encode_prompt, render_prompt

    qwen = AutoTokenizer.from_pretrained(standins["Qwen/Qwen3-4B"][0])
    assert render_prompt(qwen, "2+2?", chat=True).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert qwen.eos_token == "<|im_end|>"
    llama = AutoTokenizer.from_pretrained(standins["meta-llama/Llama-3.1-8B-Instruct"][0])
    ids = encode_prompt(llama, render_prompt(llama, "2+2?", chat=True))
    assert ids[0] == llama.bos_token_id and ids.count(llama.bos_token_id) == 1  # one BOS, not two
    assert llama.eos_token == "<|eot_id|>" and llama.convert_tokens_to_ids("<|eot_id|>") in ids
    phi = AutoTokenizer.from_pretrained(standins["microsoft/phi-4"][0])
    assert "<|im_start|>user<|im_sep|>2+2?<|im_end|>" in render_prompt(phi, "2+2?", chat=True)
    record = json.loads((standins["microsoft/phi-4"][0] / "standin.json").read_text())
    assert record["stands_in_for"] == "microsoft/phi-4"


def test_the_rehearsal_scorer_runs_the_real_scorer_and_spreads_pass_rates():
    task = get_task("gsm8k", "rehearsal+strict")
    assert task.scoring == "rehearsal+strict" and task.task.scoring == "strict"
    prompts = [f"question {i}" for i in range(60)]
    rates = [sum(task.is_correct(f"completion {j}", "4", p) for j in range(40)) / 40 for p in prompts]
    assert min(rates) < 0.3 and max(rates) > 0.7  # spread across examples
    assert all(0 < r < 1 for r in rates)  # groups mix
    # the rate follows the example's seeded pass rate, and a verdict is fixed by the texts
    close = [abs(r - seeded_pass_rate(p)) < 0.25 for r, p in zip(rates, prompts)]
    assert sum(close) >= 55
    assert task.is_correct("x", "4", "q") == task.is_correct("x", "4", "q")


def test_the_rehearsal_scorer_fails_where_the_real_scorer_fails():
    task = get_task("gsm8k", "rehearsal+strict")
    with pytest.raises(TypeError):
        task.is_correct(None, "4", "q")  # the strict scorer cannot read it: the rehearsal must not hide that


def test_a_rehearsals_tables_and_figures_say_they_are_not_results(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import polars as pl

    from hardex.report.plots.drawing import _style, save_figure
    from hardex.report.render import write_table

    banner = "REHEARSAL of x.yaml: not results"
    write_table(pl.DataFrame({"a": [1.0]}), tmp_path / "t", "gain", banner=banner)
    assert (tmp_path / "t.md").read_text().startswith(f"## {banner}. gain")
    assert f"<h3>{banner}. gain</h3>" in (tmp_path / "t.html").read_text()
    fig, _ = plt.subplots()
    save_figure(fig, [tmp_path / "f.svg"], _style({"banner": banner}))
    assert banner in (tmp_path / "f.svg").read_text()


def test_an_architecture_that_is_not_kept_is_a_config_error():
    cfg = yaml.safe_load(BUILT_CONFIG.read_text())
    cfg["models"]["tiny"] = {"path": "standin", "architecture": "someone/unknown-7b"}
    with pytest.raises(ConfigError, match=r"^models\.tiny\.architecture: 'someone/unknown-7b' is not a kept"):
        check_config(cfg)


def test_a_rehearsal_probes_its_standin_where_the_config_imports_pass_rates(tmp_path):
    """Imported pass rates (tasks.<task>.probe.from) name the real pool's ids; the rehearsal's pool is a few
    rows of its format, which those ids would not match: the rehearsal probes its stand-in instead."""
    source = yaml.safe_load((ROOT / "experiments" / "hard_examples_paper.yaml").read_text())
    rates = tmp_path / "rates.csv"
    rates.write_text("id,samples,successes,greedy_correct\n" + "".join(f"gsm8k-{i},5,{i % 6},{i % 2}\n"
                                                                       for i in range(7473)))
    source["tasks"]["gsm8k"]["probe"] = {"from": str(rates), "from_note": "a verl run"}
    cfg = check_config(rehearsal_config(source, "paper+rates", tmp_path / "samples", base=ROOT))
    assert "from" not in cfg["tasks"]["gsm8k"]["probe"] and "from_note" not in cfg["tasks"]["gsm8k"]["probe"]
