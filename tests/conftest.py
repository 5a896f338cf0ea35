"""Shared fixtures: the smoke config, one finished smoke run per session (and private copies of it),
and tiny models. Helpers that are not fixtures are in support.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.support import SMOKE, build_swaps_model, finished_run, one_torch_thread as support_one_torch_thread

#: the suite's longest tests (pytest --durations=20, 2026-11-27: 25-170 s each, a third of the lane's time), started
#: first: collected in file order they came last and left one of the two workers idle for minutes (CI time)
LONGEST_FIRST = (
    "tests/workflow/test_slurm.py::test_smoke_config_runs_through_slurm",
    "tests/workflow/test_determinism.py::",
    "tests/workflow/test_resume.py::",
    "tests/workflow/test_gpu_assignment.py::",
    "tests/workflow/test_staleness.py::test_a_rebuilt_model",
    "tests/unit/test_gpu_first_run.py::test_the_first_run_check_runs_at_tiny_sizes",
)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture
def one_torch_thread():
    """torch at one thread for one test, then as it was (support.one_torch_thread)."""
    with support_one_torch_thread():
        yield


@pytest.fixture
def smoke_config() -> dict:
    return yaml.safe_load(SMOKE.read_text())


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """One finished smoke run (through every stage) for the whole session, shared by the workflow tests:
    read it, or work on a copy of it (`smoke_copy`). Under pytest -n the workers share it too: the first
    that needs it builds it, the others wait for it."""
    return finished_run(tmp_path_factory, "smoke", SMOKE)


@pytest.fixture
def smoke_copy(smoke_run, tmp_path) -> Path:
    """A private copy of the finished smoke run (timestamps and Snakemake's records kept), for a test
    that changes it: what its change does not touch is up to date and not rebuilt."""
    work = tmp_path / "run"
    # Snakemake's own logs and locks are left out: another test may be running Snakemake in the shared run
    shutil.copytree(smoke_run, work, symlinks=True, ignore=shutil.ignore_patterns("log", "locks"))
    return work


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny built Qwen3 (random-ish after a few warm-start steps): real weights, real tokenizer."""
    return build_swaps_model(tmp_path_factory.mktemp("tiny") / "model", hidden_size=32)


@pytest.fixture(scope="session")
def answering_model(tmp_path_factory) -> Path:
    """A tiny Qwen3 with head size 64 (what vLLM's CPU attention takes), warm-started long enough (12 epochs)
    to answer swaps in the boxed form: its pass rates spread and one boxed letter can be rewarded. After one
    epoch a model this size writes near-uniform tokens."""
    return build_swaps_model(tmp_path_factory.mktemp("answering") / "model", hidden_size=128, epochs=12)


@pytest.fixture(scope="session")
def bos_chat_model(tmp_path_factory) -> Path:
    """A tiny random Qwen3 whose tokenizer adds a BOS and whose chat template writes one, as Llama 3's
    do: the case where a second tokenization with special tokens doubles the BOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<|bos|>", "<|eos|>", "<|pad|>"]
    tok.train_from_iterator(["Alice has a red ball. Bob has? (A) red (B) blue"] * 4, trainers.BpeTrainer(
        vocab_size=300, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", special_tokens=[("<|bos|>", 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>")
    fast.chat_template = ("{{ bos_token }}{% for m in messages %}<|user|>{{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=len(fast), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                                         max_position_embeddings=256, bos_token_id=0, eos_token_id=1, pad_token_id=2))
    out = tmp_path_factory.mktemp("bos") / "model"
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out
