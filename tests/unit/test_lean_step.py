"""The lean decode step (hardex.generation.lean_step), CPU generation's default: transformers' own tokens, bit for
bit, for each architecture it takes; a LoRA adapter merged into the weights it decodes with, and disabled when
the generator asks for the base model; every other architecture left to transformers' forward."""

from __future__ import annotations

import pytest

from hardex.generation import Sampling
from tests.support import one_torch_thread, tiny_model_dir
from tests.unit.test_generation import prompts

SAMPLED = Sampling(1.0, 1.0, 24)
GREEDY = Sampling(0.0, 1.0, 24)


def tiny(kind: str, vocab: int, dtype: str = "float32"):
    """A random-init model of one architecture the lean step takes, grouped-query attention, every layer full."""
    import torch
    import transformers

    torch.manual_seed(0)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=False)
    config, model = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),  # biases on q, k, v
        "qwen3": (transformers.Qwen3Config, transformers.Qwen3ForCausalLM),  # a norm on each query and key head
    }[kind]
    extra = {"head_dim": 16} if kind == "qwen3" else {}
    if kind == "mistral":
        extra["sliding_window"] = None
    m = model(config(**common, **extra)).to(getattr(torch, dtype)).eval()
    if kind == "qwen2":  # random biases: the initialisation leaves them 0, which would not test them
        with torch.no_grad():
            for layer in m.model.layers:
                for p in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    p.bias.normal_(0, 0.5)
    return m


def generator(model, decode: str):
    from transformers import AutoTokenizer

    from hardex.generation.hf import HFGenerator

    tok = AutoTokenizer.from_pretrained(tiny_model_dir())
    return HFGenerator("random", device="cpu", model=model, tokenizer=tok, progress=False, decode=decode)


def outputs(gen):
    ps = list(prompts())
    return gen.generate(ps, 1, GREEDY), gen.generate(ps, 4, SAMPLED, seed=3)


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2", "qwen3"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_lean_step_decodes_transformers_tokens(kind, dtype):
    """The same arithmetic in the same order as transformers' forward in the same fixed-shape step
    (decode="static"): the same logits to the bit, so the same greedy and sampled tokens; and transformers'
    dynamic step's tokens up to rounding (rows leaving the batch: test_generation's fixed-shape test)."""
    from transformers import AutoTokenizer

    from tests.unit.test_generation import assert_same_up_to_rounding

    vocab = len(AutoTokenizer.from_pretrained(tiny_model_dir()))
    model = tiny(kind, vocab, dtype)
    outs = {}
    with one_torch_thread():
        gen = generator(model, "lean")
        for decode in ("lean", "static", "dynamic"):
            gen.decode = decode
            outs[decode] = outputs(gen)
    assert outs["lean"] == outs["static"]
    assert_same_up_to_rounding(outs["lean"], outs["dynamic"], kind)


def test_auto_decodes_by_the_lean_step_on_a_cpu_and_by_transformers_elsewhere(monkeypatch):
    """decode="auto" takes the lean step for a Llama-family model; an architecture it does not know decodes by
    transformers' forward, with nothing asked of the user."""
    import torch
    import transformers

    from hardex.generation import lean_step
    from hardex.generation.kv_cache import make_cache

    steps = []
    real = lean_step.LeanDecodeStep.__call__
    monkeypatch.setattr(lean_step.LeanDecodeStep, "__call__", lambda self, *a: steps.append(1) or real(self, *a))
    gen = generator(tiny("llama", 600), "auto")
    gen.generate(list(prompts())[:2], 2, SAMPLED)
    assert steps
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=600, n_embd=32, n_layer=1, n_head=2)).eval()
    assert "gpt2" in lean_step.lean_unsupported(gpt2)
    other = generator(gpt2, "auto")
    assert other._decode_mode(make_cache(gpt2.config, 64), gpt2.config) == "dynamic"
    steps.clear()
    assert len(other.generate(list(prompts())[:2], 2, SAMPLED)[0]) == 2 and not steps


def test_a_lora_adapter_is_merged_into_the_weights_and_disabled_for_the_base_model():
    """With an adapter on all seven projections, merged for the block as the generator merges it on a CPU, the lean
    step's logits are PEFT's unmerged ones up to the rounding of the merged weights (float32 here); with the
    adapter disabled, as the generator evaluates the base model beside a checkpoint, they are the base model's
    exactly; the base weights are left as they were, and an unmerged adapter is refused rather than skipped."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    from hardex.generation.decode_attention import decode_attention, one_token_attention
    from hardex.generation.kv_cache import make_cache
    from hardex.generation.lean_step import LeanDecodeStep, adapters_merged, lean_unsupported

    torch.manual_seed(0)
    base = tiny("llama", 600)
    plain_model = copy.deepcopy(base)
    before = {n: p.clone() for n, p in base.named_parameters()}
    peft = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, init_lora_weights=False, target_modules=[
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])).eval()
    ids = torch.randint(0, 600, (3, 7))

    def last_logits(model, lean: bool):
        """The logits of one decode step after a prefill of `ids`, by the lean step or by the model's forward."""
        cache = make_cache(model.config, 16)
        with torch.inference_mode(), decode_attention(model):  # the attention generation decodes with
            model(input_ids=ids, past_key_values=cache, use_cache=True)
            token, pos = torch.tensor([5, 6, 7]), torch.full((3,), 7)
            if lean:
                step = LeanDecodeStep(model, one_token_attention)
                return step(token, pos, cache, torch.ones(3, 1, 1, 8, dtype=torch.bool))
            return model(input_ids=token[:, None], position_ids=pos[:, None], past_key_values=cache,
                         use_cache=True).logits[:, -1]

    assert "not merged" in lean_unsupported(peft)
    separate, plain = last_logits(peft, False), last_logits(plain_model, False)
    assert (separate - plain).abs().max() > 0.1  # the adapter changes what the model says
    with adapters_merged(peft):
        assert lean_unsupported(peft) is None
        merged = last_logits(peft, True)
    torch.testing.assert_close(merged, separate, atol=1e-4, rtol=1e-4)
    with peft.disable_adapter():
        with adapters_merged(peft):  # nothing active, nothing merged
            assert torch.equal(last_logits(peft, True), plain)
    for n, p in peft.get_base_model().named_parameters():
        if "lora_" not in n:
            assert torch.equal(p, before[n.replace(".base_layer", "")]), n


def test_a_checkpoints_samples_on_the_fast_path_are_the_plain_paths_up_to_rounding(tmp_path):
    """A LoRA checkpoint evaluated as an evaluate job does (use_checkpoint): on the CPU's default path (adapters
    merged, the lean step) its greedy and sampled completions are those of transformers' and PEFT's own path
    (decode="dynamic") but for the few a rounding flips; the base model's beside it are the same exactly."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer

    from tests.unit.test_generation import assert_same_up_to_rounding, greedy_and_sampled

    vocab = len(AutoTokenizer.from_pretrained(tiny_model_dir()))
    adapter = get_peft_model(tiny("qwen3", vocab), LoraConfig(r=4, lora_alpha=8, init_lora_weights=False,
                                                               target_modules=["q_proj", "v_proj", "down_proj"]))
    with torch.no_grad():
        for name, p in adapter.named_parameters():
            if "lora_B" in name:
                p.mul_(5.0)
    adapter.save_pretrained(tmp_path / "lora")
    outs = {}
    with one_torch_thread():
        for decode in ("auto", "dynamic"):
            gen = generator(tiny("qwen3", vocab), decode)  # its own model: PEFT wraps the base in place
            outs[decode, "base"] = greedy_and_sampled(gen)
            gen.use_checkpoint(tmp_path / "lora")
            outs[decode, "lora"] = greedy_and_sampled(gen)
            gen.use_checkpoint(None)
            assert greedy_and_sampled(gen) == outs[decode, "base"]
    assert outs["auto", "base"] == outs["dynamic", "base"]
    assert outs["auto", "lora"] != outs["auto", "base"]
    assert_same_up_to_rounding(outs["auto", "lora"], outs["dynamic", "lora"], "lora")
