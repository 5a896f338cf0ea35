"""A GGUF file converted into a from_pretrained folder computes what the GGUF file does, and keeps the
tokenizer's chat template and end token: the folder every stage loads stands for the file."""

from __future__ import annotations

import hashlib
import json

import torch

from hardex.model_sources import gguf_file
from hardex.models import encode_prompt, model_fingerprint, render_prompt
from tests.realmodel.conftest import SMOLLM2


def test_the_converted_folder_computes_what_the_gguf_file_does(smollm2_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "float32"
    source = json.loads((smollm2_dir / "source.json").read_text())
    path = gguf_file(SMOLLM2)
    assert source["gguf"] == SMOLLM2 and source["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert 130e6 < source["parameters"] < 140e6 and source["architecture"] == "LlamaForCausalLM"
    assert len(model_fingerprint(smollm2_dir)) == 16  # weights found; source.json (timings) left out

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    gguf_tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)

    # the chat template, end and padding tokens survive the conversion
    assert tok.chat_template == gguf_tok.chat_template
    prompt = render_prompt(tok, "What is 17 + 25? Put the answer in \\boxed{}.", chat=True)
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|im_end|>")
    generation = json.loads((smollm2_dir / "generation_config.json").read_text())
    assert generation["eos_token_id"] == generation["pad_token_id"] == tok.eos_token_id

    ids = encode_prompt(tok, prompt)
    assert ids == encode_prompt(gguf_tok, prompt)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
        expected = gguf_model(torch.tensor([ids])).logits
    assert model.dtype == torch.float32 and logits.shape == (1, len(ids), len(tok))
    torch.testing.assert_close(logits, expected)
