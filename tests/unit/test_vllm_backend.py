"""The vLLM backend without vLLM: argument mapping, adapter discovery, engine settings, the error when
vllm is missing, and the engine life cycle against a recording stub.

vLLM needs a GPU and is not installed here. Nothing below claims vLLM itself was run: the stub only
records what the backend would hand to `vllm.LLM`, `SamplingParams` and `LoRARequest`, whose
signatures are vLLM's documented ones.
"""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types
from pathlib import Path

import pytest

from hardex.generation import Sampling, load_generator
from hardex.generation.vllm_backend import (
    INSTALL_HINT,
    VLLM_LORA_RANKS,
    VLLMGenerator,
    adapter_id,
    discover_adapter,
    engine_kwargs,
    require_vllm,
    sample_seed,
    sampling_kwargs,
    supported_rank,
)


def write_adapter(folder: Path, r: int = 32, **extra) -> Path:
    folder.mkdir(parents=True)
    cfg = {"peft_type": "LORA", "r": r, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"], **extra}
    (folder / "adapter_config.json").write_text(json.dumps(cfg))
    return folder


# --- sampling --------------------------------------------------------------------------------------


def test_sampling_maps_to_sampling_params():
    kw = sampling_kwargs(Sampling(temperature=1.0, top_p=0.95, max_new_tokens=250), n=5, seed=7)
    assert kw == {"n": 5, "temperature": 1.0, "top_p": 0.95, "top_k": -1, "max_tokens": 250,
                  "skip_special_tokens": True, "seed": 7}
    assert "seed" not in sampling_kwargs(Sampling(1.0, 1.0, 10), n=1)


def test_greedy_is_temperature_zero_and_one_sample():
    kw = sampling_kwargs(Sampling(temperature=0.0, top_p=0.5, max_new_tokens=512), n=1, seed=0)
    assert kw["temperature"] == 0.0 and kw["n"] == 1 and kw["top_p"] == 1.0 and kw["max_tokens"] == 512
    with pytest.raises(ValueError, match="greedy decoding gives one completion"):
        sampling_kwargs(Sampling(0.0, 1.0, 10), n=8)
    with pytest.raises(ValueError, match="n must be >= 1"):
        sampling_kwargs(Sampling(1.0, 1.0, 10), n=0)


def test_sample_seed_depends_on_seed_key_and_sample_only():
    assert sample_seed(0, "a", 0) == sample_seed(0, "a", 0)
    assert len({sample_seed(0, "a", 0), sample_seed(1, "a", 0), sample_seed(0, "b", 0), sample_seed(0, "a", 1)}) == 4
    assert 0 <= sample_seed(123, "x" * 1000, 7) < 2**31


# --- adapters ---------------------------------------------------------------------------------------


def test_adapter_discovery(tmp_path):
    ckpt = write_adapter(tmp_path / "run" / "checkpoints" / "checkpoint-200", r=32)
    a = discover_adapter(ckpt)
    assert a["lora_name"] == "checkpoints/checkpoint-200"
    assert a["lora_path"] == str(ckpt.resolve()) and a["rank"] == 32
    assert a["lora_int_id"] == adapter_id(ckpt) == discover_adapter(str(ckpt))["lora_int_id"]  # stable
    assert a["lora_int_id"] > 0


def test_each_checkpoint_gets_its_own_id(tmp_path):
    ids = {adapter_id(write_adapter(tmp_path / f"checkpoint-{s}")) for s in range(100, 1100, 100)}
    assert len(ids) == 10 and all(0 < i < 2**31 for i in ids)


def test_rank_pattern_raises_the_rank(tmp_path):
    ckpt = write_adapter(tmp_path / "c", r=16, rank_pattern={"q_proj": 64})
    assert discover_adapter(ckpt)["rank"] == 64


def test_full_checkpoint_is_no_adapter(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "config.json").write_text("{}")
    assert discover_adapter(tmp_path / "full") is None


def test_broken_adapter_config(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "adapter_config.json").write_text("{not json")
    with pytest.raises(ValueError, match="unreadable adapter config"):
        discover_adapter(tmp_path / "c")
    (tmp_path / "c" / "adapter_config.json").write_text("{}")
    with pytest.raises(ValueError, match="no LoRA rank"):
        discover_adapter(tmp_path / "c")


@pytest.mark.parametrize("rank,want", [(1, 1), (2, 8), (8, 8), (32, 32), (33, 64), (300, 320), (512, 512)])
def test_supported_rank(rank, want):
    assert supported_rank(rank) == want and want in VLLM_LORA_RANKS


def test_rank_beyond_vllm():
    with pytest.raises(ValueError, match="exceeds vLLM's largest"):
        supported_rank(1024)


# --- engine -----------------------------------------------------------------------------------------


def test_engine_kwargs_from_config():
    kw = engine_kwargs("Qwen/Qwen3-4B", dtype="bfloat16", seed=3, gpu_memory_utilization=0.85, max_model_len=2048)
    assert kw == {"model": "Qwen/Qwen3-4B", "dtype": "bfloat16", "seed": 3, "gpu_memory_utilization": 0.85,
                  "max_model_len": 2048}
    assert "max_model_len" not in engine_kwargs("m") and engine_kwargs("m")["dtype"] == "auto"


def test_an_engine_beside_the_trainer_leaves_the_gpu_room_by_default():
    """grpo.rollouts: vllm starts the engine in the train job's process: at vLLM's usual 0.9 of the GPU the
    policy, its gradients and its optimizer state could not fit beside it."""
    assert engine_kwargs("m", device="cuda")["gpu_memory_utilization"] == 0.9  # a probe or evaluate job's own GPU
    assert engine_kwargs("m", device="cuda", colocated=True)["gpu_memory_utilization"] == 0.3
    assert engine_kwargs("m", device="cuda", colocated=True,
                         gpu_memory_utilization=0.5)["gpu_memory_utilization"] == 0.5
    assert engine_kwargs("m", device="cpu", colocated=True)["gpu_memory_utilization"] == 0.3


def test_engine_kwargs_with_lora():
    kw = engine_kwargs("m", enable_lora=True, max_lora_rank=32)
    assert kw["enable_lora"] is True and kw["max_lora_rank"] == 32 and kw["max_loras"] == 1
    assert engine_kwargs("m", enable_lora=True, max_lora_rank=24)["max_lora_rank"] == 32
    assert engine_kwargs("m", enable_lora=True)["max_lora_rank"] == 16  # vLLM's own default
    assert "enable_lora" not in engine_kwargs("m", max_lora_rank=32)


def test_engine_kwargs_bad_dtype():
    with pytest.raises(ValueError, match="dtype 'fp8'"):
        engine_kwargs("m", dtype="fp8")


def test_config_defaults_reach_the_engine(smoke_config):
    from hardex.config import check_config

    cfg = check_config(smoke_config)
    v = cfg["generation"]["vllm"]
    assert v == {"gpu_memory_utilization": None, "max_model_len": None, "max_lora_rank": None,
                 "enable_chunked_prefill": None, "tensor_parallel_size": 1}
    options = {k: v[k] for k in ("gpu_memory_utilization", "max_model_len", "enable_chunked_prefill")}
    kw = engine_kwargs("m", "auto", 0, **options)
    assert kw["gpu_memory_utilization"] == 0.9 and "max_model_len" not in kw and "enable_chunked_prefill" not in kw


def test_safe_engine_defaults_on_a_cpu():
    """vLLM on CPU reserves its share of host memory (0.9 fails beside a job's other processes) and dies
    under load with chunked prefill and a seed per request: both are off the defaults there."""
    kw = engine_kwargs("m", device="cpu")
    assert kw["gpu_memory_utilization"] == 0.3 and kw["enable_chunked_prefill"] is False
    assert engine_kwargs("m", device="cpu", enable_chunked_prefill=True)["enable_chunked_prefill"] is True
    assert engine_kwargs("m", device="cpu", gpu_memory_utilization=0.5)["gpu_memory_utilization"] == 0.5


# --- without vllm -------------------------------------------------------------------------------------


def test_clear_error_when_vllm_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # as if not installed (it is not, here)
    with pytest.raises(ImportError) as err:
        require_vllm()
    assert str(err.value) == INSTALL_HINT and "pip install 'hardex[vllm]'" in INSTALL_HINT
    with pytest.raises(ImportError, match="generation.backend: transformers"):
        load_generator("vllm", "Qwen/Qwen3-4B", dtype="auto", token_budget=1024, max_batch_prompts=8)


def test_module_imports_without_vllm(monkeypatch):
    import importlib

    import hardex.generation.vllm_backend as mod

    monkeypatch.setitem(sys.modules, "vllm", None)
    importlib.reload(mod)  # a module-level `import vllm` would fail here
    assert mod.sampling_kwargs(Sampling(1.0, 1.0, 4), 2)["n"] == 2


# --- engine life cycle against a recording stub (not vLLM) --------------------------------------------


@pytest.fixture
def stub_vllm(monkeypatch):
    """A stand-in `vllm` that records engines and requests and echoes deterministic text."""
    calls = {"engines": [], "generate": [], "shutdowns": []}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class LoRARequest:
        def __init__(self, lora_name, lora_int_id, lora_path):
            self.args = (lora_name, lora_int_id, lora_path)

    class LLM:
        def __init__(self, **kw):
            calls["engines"].append(kw)
            shutdown = lambda: calls["shutdowns"].append(kw["model"])  # noqa: E731
            self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=shutdown))

        def generate(self, prompts, params, use_tqdm=True, lora_request=None):
            texts = ["".join(map(chr, p["prompt_token_ids"])) for p in prompts]  # prompts arrive as token ids
            calls["generate"].append({"prompts": texts, "params": params, "lora": lora_request})
            out = []
            for p, sp in zip(texts, params):
                comps = [types.SimpleNamespace(text=f"{p}#{j}", token_ids=[1, 2]) for j in range(sp.kw["n"])]
                out.append(types.SimpleNamespace(outputs=comps))
            return out

    vllm = types.ModuleType("vllm")
    vllm.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    platforms = types.ModuleType("vllm.platforms")  # where vLLM says which device it runs on: here a CPU
    platforms.current_platform = types.SimpleNamespace(is_cpu=lambda: True)
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    return calls


class CharTokenizer:
    """Stands in for a model's tokenizer: one id per character, no special tokens."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


def test_one_engine_for_every_adapter_checkpoint(stub_vllm, tmp_path):
    gen = VLLMGenerator("Qwen/Qwen2.5-0.5B-Instruct", dtype="bfloat16", token_budget=1, max_batch_prompts=1,
                        progress=False, tokenizer=CharTokenizer())
    assert stub_vllm["engines"] == []  # lazy: the first use_checkpoint decides about LoRA
    ckpts = [write_adapter(tmp_path / "checkpoints" / f"checkpoint-{s}", r=32) for s in (100, 200)]
    for c in ckpts:
        gen.use_checkpoint(c)
        out = gen.generate(["p1", "p2"], 3, Sampling(1.0, 1.0, 16), seed=5)
        assert out == [["p1#0"] * 3, ["p2#0"] * 3]  # one request per sample; the stub echoes the prompt
    assert len(stub_vllm["engines"]) == 1
    engine = stub_vllm["engines"][0]
    assert engine["enable_lora"] is True and engine["max_lora_rank"] == 32 and engine["dtype"] == "bfloat16"
    first, second = (g["lora"].args for g in stub_vllm["generate"])
    assert first[1] != second[1] and first[2].endswith("checkpoint-100") and second[2].endswith("checkpoint-200")
    call = stub_vllm["generate"][0]
    assert call["prompts"] == ["p1"] * 3 + ["p2"] * 3 and all(p.kw["n"] == 1 for p in call["params"])
    assert [p.kw["seed"] for p in call["params"]] == [sample_seed(5, p, j) for p in ("p1", "p2") for j in range(3)]
    assert gen.tokens_generated == 2 * 2 * 3 * 2


def test_samples_follow_keys_and_first_sample(stub_vllm):
    gen = VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False)
    gen.generate(["same", "same"], 2, Sampling(1.0, 1.0, 8), seed=1, keys=["id-0", "id-1"], first_sample=4)
    seeds = [p.kw["seed"] for p in stub_vllm["generate"][0]["params"]]
    assert seeds == [sample_seed(1, k, j) for k in ("id-0", "id-1") for j in (4, 5)]
    # a later round continues the streams: sample 5 has the same seed whichever round draws it
    gen.generate(["same"], 1, Sampling(1.0, 1.0, 8), seed=1, keys=["id-0"], first_sample=5)
    assert stub_vllm["generate"][1]["params"][0].kw["seed"] == seeds[1]
    with pytest.raises(ValueError, match="1 keys for 2 prompts"):
        gen.generate(["a", "b"], 1, Sampling(1.0, 1.0, 8), keys=["a"])


def test_base_model_has_no_lora(stub_vllm):
    gen = VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False)
    gen.use_checkpoint(None)
    assert gen.generate(["q"], 1, Sampling(0.0, 1.0, 8)) == [["q#0"]]
    assert "enable_lora" not in stub_vllm["engines"][0] and stub_vllm["generate"][0]["lora"] is None
    greedy = stub_vllm["generate"][0]["params"][0].kw
    assert greedy["temperature"] == 0.0 and "seed" not in greedy


def test_adapter_after_a_plain_engine_restarts_it(stub_vllm, tmp_path):
    gen = VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False)
    gen.generate(["q"], 1, Sampling(1.0, 1.0, 8))
    gen.use_checkpoint(write_adapter(tmp_path / "checkpoint-100", r=8))
    gen.generate(["q"], 1, Sampling(1.0, 1.0, 8))
    assert len(stub_vllm["engines"]) == 2 and stub_vllm["engines"][1]["max_lora_rank"] == 8
    assert stub_vllm["shutdowns"] == ["m"]  # the first engine is stopped, not left holding its memory


def test_larger_adapter_than_the_engine_allows(stub_vllm, tmp_path):
    gen = VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False)
    gen.use_checkpoint(write_adapter(tmp_path / "a", r=8))
    gen.generate(["q"], 1, Sampling(1.0, 1.0, 8))
    with pytest.raises(ValueError, match="set generation.vllm.max_lora_rank"):
        gen.use_checkpoint(write_adapter(tmp_path / "b", r=64))


def test_full_checkpoints_need_a_new_engine_each(stub_vllm, tmp_path):
    gen = VLLMGenerator("base", tokenizer=CharTokenizer(), progress=False)
    for s in (100, 200):
        (tmp_path / f"checkpoint-{s}").mkdir()
        gen.use_checkpoint(tmp_path / f"checkpoint-{s}")
        gen.generate(["q"], 1, Sampling(1.0, 1.0, 8))
    gen.use_checkpoint(None)
    gen.generate(["q"], 1, Sampling(1.0, 1.0, 8))
    models = [e["model"] for e in stub_vllm["engines"]]
    assert models == [str(tmp_path / "checkpoint-100"), str(tmp_path / "checkpoint-200"), "base"]
    assert stub_vllm["shutdowns"] == models[:2]


def test_greedy_with_several_samples_fails_before_an_engine_starts(stub_vllm):
    gen = VLLMGenerator("m", tokenizer=CharTokenizer(), progress=False)
    with pytest.raises(ValueError, match="greedy"):
        gen.generate(["q"], 4, Sampling(0.0, 1.0, 8))
    assert stub_vllm["engines"] == [] and gen.generate([], 1, Sampling(1.0, 1.0, 8)) == []


def test_requests_carry_the_rendered_tokens(stub_vllm, bos_chat_model):
    """vLLM tokenizes a text request with special tokens (a second BOS after a chat template's own): the
    backend sends the ids every other stage uses instead."""
    from transformers import AutoTokenizer

    from hardex.models import encode_prompt, render_prompt

    tok = AutoTokenizer.from_pretrained(bos_chat_model)
    text = render_prompt(tok, "Bob has? (A) red (B) blue", chat=True)
    gen = VLLMGenerator(str(bos_chat_model), progress=False)  # the model's own tokenizer, loaded by the backend
    gen.generate([text], 2, Sampling(1.0, 1.0, 4), seed=0)
    sent = [[ord(ch) for ch in p] for p in stub_vllm["generate"][0]["prompts"]]
    assert sent == [encode_prompt(tok, text)] * 2 and sent[0][:2] == [tok.bos_token_id, sent[0][1]] != [0, 0]


def test_tensor_parallel_size_reaches_the_engine_only_above_one():
    assert "tensor_parallel_size" not in engine_kwargs("m", device="cuda")
    assert engine_kwargs("m", device="cuda", tensor_parallel_size=4)["tensor_parallel_size"] == 4
