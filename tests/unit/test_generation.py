"""The transformers backend: seeded determinism, per-sample streams independent of batch
composition, early stopping that changes nothing, checkpoint switching.

Runs on a tiny built Qwen3 (hardex.models.build_model with a few warm-start steps), built once per
test session.
"""

from __future__ import annotations

import functools
import os
import platform

import numpy as np
import pytest

from hardex.generation import Sampling
from tests.support import one_torch_thread, tiny_model_dir


@functools.lru_cache(maxsize=None)
def prompts(n: int = 12) -> tuple[str, ...]:
    from hardex.models import render_prompt
    from hardex.tasks import get_task

    task = get_task("arith")
    df = task.load_split({"name": "pool", "n": n, "seed": 1, "difficulty": [1, 6]})
    return tuple(render_prompt(None, task.prompt(r), False) for r in df.iter_rows(named=True))


@pytest.fixture(scope="module")
def gen():
    from hardex.generation.hf import HFGenerator

    with one_torch_thread():  # for this module's tests, then back for later modules
        yield HFGenerator(tiny_model_dir(), device="cpu", dtype="float32", progress=False)


SAMPLE = Sampling(1.0, 1.0, 24)


def test_same_seed_same_outputs_other_seed_other_outputs(gen):
    ps = list(prompts())
    a = gen.generate(ps, 3, SAMPLE, seed=5)
    assert [len(x) for x in a] == [3] * len(ps)
    assert gen.generate(ps, 3, SAMPLE, seed=5) == a
    assert gen.generate(ps, 3, SAMPLE, seed=6) != a


def test_per_example_samples_do_not_depend_on_batch_composition(gen):
    """Sample j of an example is the same alone, in any batch, at any batch size, and when asked
    for later (first_sample) -- what adaptive probing relies on."""
    ps, keys = list(prompts()), [f"id{i}" for i in range(len(prompts()))]
    full = gen.generate(ps, 4, SAMPLE, seed=1, keys=keys)
    gen.token_budget = 10**9
    big_batch = gen.generate(ps[::-1], 4, SAMPLE, seed=1, keys=keys[::-1])[::-1]
    gen.token_budget = 1  # one prompt per batch
    alone = gen.generate(ps, 4, SAMPLE, seed=1, keys=keys)
    gen.token_budget = 65536
    later = gen.generate(ps[3:9], 2, SAMPLE, seed=1, keys=keys[3:9], first_sample=2)
    # float32 on CPU: a different batch can change logits in the last bits; a flip needs a uniform
    # within that error of a CDF boundary, so demand near-total agreement, not bit-identity
    def agree(x, y):
        pairs = [(a, b) for xs, ys in zip(x, y) for a, b in zip(xs, ys)]
        return sum(a == b for a, b in pairs) / len(pairs)

    assert agree(full, big_batch) >= 0.97
    assert agree(full, alone) >= 0.97
    assert agree([f[2:] for f in full[3:9]], later) >= 0.97
    # the same example keyed differently draws a different stream
    assert gen.generate(ps[:4], 4, SAMPLE, seed=1, keys=["other"] * 4) != full[:4]


@pytest.fixture(scope="module")
def eos_gen():
    """A random-init Qwen3 with the tiny model's tokenizer (a few warm-start steps leave the tiny
    model repeating one token under greedy decoding), its output row for EOS made a near copy of a
    token it emits now and then, so that greedy sequences end early, at different lengths."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from hardex.generation.hf import HFGenerator

    tok = AutoTokenizer.from_pretrained(tiny_model_dir())
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, tie_word_embeddings=False, eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id)).eval()
    gen = HFGenerator("random", device="cpu", model=model, tokenizer=tok, progress=False)
    outs = [tok(o[0])["input_ids"] for o in gen.generate(list(prompts()), 1, Sampling(0.0, 1.0, 40))]
    early = {t for ids in outs for t in ids[:3]}
    # a token never among the first three, present in the most outputs: sequences end at its first use
    common = max({t for ids in outs for t in ids} - early, key=lambda t: sum(t in ids for ids in outs))
    with torch.no_grad():
        model.lm_head.weight[tok.eos_token_id] = model.lm_head.weight[common] * 1.05
    return gen


def test_early_stopping_changes_nothing_under_greedy(eos_gen):
    """Dropping finished rows from the batch and the KV cache gives exactly what plain
    transformers generate gives (greedy, same prompts, batch of one)."""
    import torch

    gen = eos_gen
    ps = list(prompts())
    greedy = Sampling(0.0, 1.0, 40)
    gen.drop_fraction = 0.0  # drop finished rows at every step
    before = gen.tokens_generated
    ours = gen.generate(ps, 1, greedy)
    counted = gen.tokens_generated - before
    gen.drop_fraction = 1.0  # never drop: finished rows ride along to the end
    kept = gen.generate(ps, 1, greedy)
    gen.drop_fraction = 0.25
    assert ours == kept
    tok, model = gen.tokenizer, gen.model
    lengths = []
    for p, out in zip(ps, ours):
        enc = tok(p, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            ref = model.generate(**enc, do_sample=False, max_new_tokens=40, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)
        new = ref[0, enc["input_ids"].shape[1]:]
        lengths.append(len(new))  # up to and including EOS
        assert tok.decode(new, skip_special_tokens=True) == out[0]
    assert len(set(lengths)) > 2 and min(lengths) < 40  # rows really finished early, at different steps
    assert counted == sum(lengths)  # tokens_generated counts new tokens up to and including EOS


def test_early_stopping_keeps_sampled_outputs(eos_gen):
    ps = list(prompts())
    eos_gen.drop_fraction = 0.0
    dropped = eos_gen.generate(ps, 4, SAMPLE, seed=2)
    eos_gen.drop_fraction = 1.0
    kept = eos_gen.generate(ps, 4, SAMPLE, seed=2)
    eos_gen.drop_fraction = 0.25
    pairs = [(a, b) for xs, ys in zip(dropped, kept) for a, b in zip(xs, ys)]
    assert sum(a == b for a, b in pairs) / len(pairs) >= 0.97


def test_the_fixed_shape_decode_step_gives_the_dynamic_steps_tokens(eos_gen, monkeypatch):
    """What a GPU replays from a CUDA graph (decode="graph") is the fixed-shape step (decode="static"): the whole
    preallocated cache under a mask, the new token written at a slot tensor. Run here without the graph, it
    gives the dynamic step's tokens up to rounding, greedy and sampled, with rows leaving the batch at every
    step (the step is rebuilt at each new size) and never; the lean step (hardex.generation.lean_step, a CPU's
    default) run inside it gives its tokens exactly.

    Uninitialised memory is made NaN here. The step attends over cache positions not yet written, masked, and
    a masked weight of 0 times a NaN value is NaN: with the cache allocated empty, the step's tokens depended on
    what the allocator handed back (the sampled comparison agreed 37 of 48 in some runs, and SmolLM2 in
    bfloat16 sampled every row to its length limit now and then)."""
    import torch

    def garbage(real):
        return lambda *a, **k: real(*a, **k).fill_(float("nan"))

    monkeypatch.setattr(torch.Tensor, "new_empty", garbage(torch.Tensor.new_empty))
    monkeypatch.setattr(torch, "empty", garbage(torch.empty))
    monkeypatch.setattr(torch, "empty_like", garbage(torch.empty_like))
    outs = {}
    try:
        for decode in ("dynamic", "static", "lean"):
            eos_gen.decode = decode
            for drop in (0.0, 1.0):
                eos_gen.drop_fraction = drop
                outs[decode, drop] = greedy_and_sampled(eos_gen)
    finally:
        eos_gen.drop_fraction, eos_gen.decode = 0.25, "auto"
    for drop in (0.0, 1.0):
        assert_same_up_to_rounding(outs["static", drop], outs["dynamic", drop], drop)
        assert outs["lean", drop] == outs["static", drop], drop  # the same step, without transformers' forward
    assert len({len(o[0]) for o in outs["static", 0.0][0]}) > 2  # rows finished at different steps


def greedy_and_sampled(gen):
    """The test prompts' greedy completions and four sampled ones of each (seed 2)."""
    ps = list(prompts())
    return gen.generate(ps, 1, Sampling(0.0, 1.0, 40)), gen.generate(ps, 4, SAMPLE, seed=2)


def assert_same_up_to_rounding(these, those, label) -> None:
    """Two decodings of greedy_and_sampled that sum in another order: a near-tie may flip one greedy completion
    in 12, and a sample near a CDF boundary may change, so 90 % of the sampled ones agree."""
    (greedy, sampled), (greedy_other, sampled_other) = these, those
    assert sum(a != b for a, b in zip(greedy, greedy_other)) <= 1, label
    pairs = [(a, b) for xs, ys in zip(sampled, sampled_other) for a, b in zip(xs, ys)]
    assert sum(a == b for a, b in pairs) / len(pairs) >= 0.9, label


def test_the_cuda_graph_replays_the_fixed_shape_step_exactly():
    """On a GPU, decode="graph" (the default there) replays the fixed-shape step's kernels: the same tokens as
    decode="static" to the bit, with rows leaving the batch (captured again at each bucket: bucket_rows), and the
    capture did not fall back to eager steps. Skipped without CUDA (the device tool runs it where a machine is lent)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (no GPU here; perf/decode_graph_gpu.sh runs it where one is lent)")
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    from hardex.generation.hf import HFGenerator
    from hardex.generation.static_step import StaticDecodeStep

    tok = AutoTokenizer.from_pretrained(tiny_model_dir())
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    gen = HFGenerator("random", device="cuda", dtype="bfloat16", model=model.to(torch.bfloat16), tokenizer=tok,
                      progress=False, drop_fraction=0.0)
    ps = list(prompts())
    outs = {}
    for decode in ("graph", "static"):
        gen.decode = decode
        outs[decode] = gen.generate(ps, 4, SAMPLE, seed=3), gen.generate(ps, 1, Sampling(0.0, 1.0, 24))
    assert not StaticDecodeStep.failed_captures
    assert outs["graph"] == outs["static"]


# ---- issue 64 G3, G10: graphs captured at bucketed batch sizes; a failed capture retried at a smaller one ----

def test_a_batch_shrinks_through_powers_of_two_from_its_first_size():
    from hardex.generation.static_step import bucket_rows

    assert [bucket_rows(n, 96) for n in (96, 65, 64, 33, 32, 17, 5, 2, 1)] == [96, 96, 64, 64, 32, 32, 8, 2, 1]
    assert {bucket_rows(n, 96) for n in range(1, 97)} == {96, 64, 32, 16, 8, 4, 2, 1}  # 1 + ceil(log2 96) sizes
    assert bucket_rows(7, 7) == 7 and bucket_rows(4, 7) == 4 and bucket_rows(1, 1) == 1


@pytest.fixture
def fake_graphs(monkeypatch):
    """StaticDecodeStep's CUDA calls on a CPU: the warm-up is the eager step; a "capture" records the step's rows
    (raising where `fail(rows)` says) and returns a graph whose replay runs the step again into the same logits
    tensor, as a replayed graph writes into its captured output. Each model's capture state starts empty."""
    from hardex.generation.static_step import StaticDecodeStep

    captured = []  # (step, rows, captured or not)
    state = {"fail": lambda rows: False}

    class Graph:
        def __init__(self, step):
            self.step = step

        def replay(self):
            self.step.logits.copy_(self.step._forward())

    def capture(step):
        if state["fail"](step.rows):
            captured.append((step, step.rows, False))
            raise RuntimeError("CUDA out of memory (a fake capture)")
        captured.append((step, step.rows, True))
        step.logits = step._forward()
        return Graph(step)

    monkeypatch.setattr(StaticDecodeStep, "_warm_up", lambda step: step._forward())
    monkeypatch.setattr(StaticDecodeStep, "_capture", capture)
    monkeypatch.setattr(StaticDecodeStep, "failed_captures", set())
    monkeypatch.setattr(StaticDecodeStep, "capture_limits", {})
    return captured, state


def decode_as(gen, decode: str, drop: float = 0.0):
    gen.decode, gen.drop_fraction, gen.shapes = decode, drop, []
    try:
        return greedy_and_sampled(gen), gen.shapes
    finally:
        gen.decode, gen.drop_fraction, gen.shapes = "auto", 0.25, None


def test_rows_finishing_capture_a_graph_per_bucket_not_per_size(eos_gen, fake_graphs):
    """A batch whose rows leave at every step it can (drop_fraction 0) captures at its first size and then at
    each power of two its rows fall to: at most 1 + ceil(log2(rows)) captures, fewer than the sizes it passes
    through, and the replayed steps give the fixed-shape step's tokens exactly."""
    import math

    captured, _ = fake_graphs
    graph, shapes = decode_as(eos_gen, "graph")
    static, _ = decode_as(eos_gen, "static")
    assert graph == static
    steps = {}
    for step, rows, ok in captured:
        assert ok
        steps.setdefault(step, []).append(rows)
    assert len(steps) == 2  # the greedy and the sampled call's one batch each
    for step, sizes in steps.items():
        assert sizes == sorted(set(sizes), reverse=True)  # one capture per bucket
        assert len(sizes) <= 1 + math.ceil(math.log2(step.first))
        assert all(r == step.first or r & (r - 1) == 0 for r in sizes)
    # the sizes the batches passed through (each step's rows): a capture at each was what G3 measured
    assert len(captured) < len({rows for rows, tokens, _ in shapes if tokens == 1})


def test_padding_rows_change_no_real_rows_tokens(eos_gen, monkeypatch):
    """On the fixed-shape step the graph replays (decode="static"), a batch computed with padding rows behind
    its real ones gives the tokens of the same batch at its exact sizes, with the padding rows' cache and mask
    made garbage (NaN keys and values, every position unmasked)."""

    from hardex.generation import static_step

    exact, _ = decode_as(eos_gen, "static")
    select = static_step.StaticDecodeStep.select

    def poisoned(step, keep):
        select(step, keep)
        step.valid[len(keep):] = True
        for layer in step.cache.layers:
            layer._k[len(keep):] = float("nan")
            layer._v[len(keep):] = float("nan")

    monkeypatch.setattr(static_step.StaticDecodeStep, "select", poisoned)
    padded, shapes = decode_as(eos_gen, "static")
    assert padded == exact
    with monkeypatch.context() as m:  # no buckets: every step at its rows
        m.setattr(static_step, "bucket_rows", lambda rows, first: rows)
        unpadded, _ = decode_as(eos_gen, "static")
    assert unpadded == exact
    assert any(rows & (rows - 1) for rows, tokens, _ in shapes if tokens == 1)  # real rows with padding behind


def test_a_failed_capture_is_retried_at_the_next_smaller_bucket(eos_gen, fake_graphs):
    """Issue 64 G10: a capture that fails at 8 rows or more (out of memory, say) leaves that model's larger steps
    eager and captures the smaller ones, with a warning that says so; graphs are dropped for the model only
    once a capture of one row fails. The tokens stay the fixed-shape step's."""
    from hardex.generation.static_step import StaticDecodeStep

    captured, state = fake_graphs
    state["fail"] = lambda rows: rows >= 8
    # the greedy call's batch first: 12 rows
    with pytest.warns(UserWarning, match=r"Qwen3ForCausalLM's decode step failed to capture at 12 rows \(CUDA out "
                                         r"of memory.*more than 8 rows decode without a graph") as seen:
        graph, _ = decode_as(eos_gen, "graph")
    assert graph == decode_as(eos_gen, "static")[0]
    assert StaticDecodeStep.capture_limits == {"Qwen3ForCausalLM": 4}
    assert not StaticDecodeStep.failed_captures
    assert any(ok and rows <= 4 for _, rows, ok in captured)  # graphs captured below the failure
    assert not any(ok and rows >= 8 for _, rows, ok in captured)
    # at 12 rows, then at 8; the sampled call's 48-row batch stays eager down to 4 rows, and captures no larger
    assert len([w for w in seen if "failed to capture" in str(w.message)]) == 2

    state["fail"] = lambda rows: True  # an architecture whose forward synchronises with the host
    StaticDecodeStep.capture_limits["Qwen3ForCausalLM"] = 1
    with pytest.warns(UserWarning, match="decoding Qwen3ForCausalLM without a CUDA graph: its capture failed at "
                                         "every size down to one row"):
        decode_as(eos_gen, "graph")
    assert StaticDecodeStep.failed_captures == {"Qwen3ForCausalLM"}


def test_an_unknown_decode_mode_is_refused():
    from hardex.generation.hf import HFGenerator

    with pytest.raises(ValueError, match="decode: 'cuda' is not one of auto, graph, static, dynamic, lean"):
        HFGenerator(tiny_model_dir(), device="cpu", decode="cuda", progress=False)


def test_sampled_tokens_follow_the_distribution():
    """Inverse-CDF sampling with keyed uniforms draws from softmax(logits / T) (and top_p)."""
    import torch

    from hardex.generation.token_sampler import sample_tokens, stream_key, stream_uniforms

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(20000, 1)
    u = torch.from_numpy(stream_uniforms([stream_key(0, "x", j) for j in range(20000)], 1)[:, 0]).float()
    got = np.bincount(sample_tokens(logits, u, 1.0, 1.0).numpy(), minlength=4) / 20000
    want = torch.softmax(logits[0], -1).numpy()
    assert np.abs(got - want).max() < 0.015
    top = np.bincount(sample_tokens(logits, u, 1.0, 0.7).numpy(), minlength=4) / 20000
    assert top[2] == top[3] == 0 and abs(top[0] - want[0] / (want[0] + want[1])) < 0.015


def test_the_sampler_takes_rows_in_chunks_and_draws_what_the_whole_batch_would():
    """Issue 44: the sampler's float32 copies of every row's vocabulary (0.5-1 GiB for 1,200-2,500 rows of SmolLM2's
    49,152 words) now exist SAMPLE_ROWS rows at a time; each row's token is the one sampling the batch at once gives."""
    import torch

    from hardex.generation.sampling import SAMPLE_ROWS
    from hardex.generation.token_sampler import _sample_rows, sample_tokens

    torch.manual_seed(0)
    rows = 2 * SAMPLE_ROWS + 37
    logits = (3 * torch.randn(rows, 4000)).to(torch.bfloat16)
    u = torch.rand(rows)
    for top_p in (1.0, 0.9):
        assert torch.equal(sample_tokens(logits, u, 0.7, top_p), _sample_rows(logits, u, 0.7, top_p))


def test_use_checkpoint_switches_weights(gen, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    ps = list(prompts())[:4]
    greedy = Sampling(0.0, 1.0, 16)
    base = gen.generate(ps, 1, greedy)
    # a full checkpoint with perturbed weights
    full = AutoModelForCausalLM.from_pretrained(tiny_model_dir())
    torch.manual_seed(0)
    with torch.no_grad():
        for p in full.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    full.save_pretrained(tmp_path / "full")
    # a LoRA adapter with non-zero weights
    lora_base = AutoModelForCausalLM.from_pretrained(tiny_model_dir())
    peft_model = get_peft_model(lora_base, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"],
                                                      init_lora_weights=False))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.mul_(20.0)
    peft_model.save_pretrained(tmp_path / "lora")
    try:
        gen.use_checkpoint(tmp_path / "full")
        assert gen.generate(ps, 1, greedy) != base
        gen.use_checkpoint(None)
        assert gen.generate(ps, 1, greedy) == base
        gen.use_checkpoint(tmp_path / "lora")
        with_lora = gen.generate(ps, 1, greedy)
        assert with_lora != base
        gen.use_checkpoint(None)  # adapters disabled: the base model again
        assert gen.generate(ps, 1, greedy) == base
        gen.use_checkpoint(tmp_path / "lora")  # and back
        assert gen.generate(ps, 1, greedy) == with_lora
    finally:
        gen.use_checkpoint(None)


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's heap on Linux")
def test_switching_checkpoints_on_a_cpu_hands_freed_memory_back(gen):
    """An evaluate job on a CPU climbed past its declared memory over checkpoints: glibc kept what each
    generation freed. Here a generation's worth of freed 2 MB blocks must leave the process at the switch."""
    import torch

    torch.ones(16 << 20, dtype=torch.uint8)  # freed at once: glibc now keeps blocks below 16 MB in its heap
    blocks = [torch.ones(2 << 20, dtype=torch.uint8) for _ in range(100)]
    pin = torch.ones(2 << 20, dtype=torch.uint8)  # above them, so that free() cannot shrink the heap's top
    del blocks
    held = _rss_mb()
    gen.use_checkpoint(None)
    assert held - _rss_mb() > 100, f"{held:.0f} MB held before the switch, {_rss_mb():.0f} after"
    del pin


PREFILL_PEAK = """
import resource, sys, torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from hardex.generation import Sampling
from hardex.generation.hf import HFGenerator
torch.manual_seed(0)
# SmolLM2-135M's output layer (576 x 49,152, untied); one thin layer below it
cfg = LlamaConfig(hidden_size=576, intermediate_size=64, num_hidden_layers=1, num_attention_heads=9,
                  num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=False)
model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
for p in model.parameters():
    p.requires_grad_(False)  # as after a LoRA checkpoint loads (HFGenerator.use_checkpoint)
gen = HFGenerator("m", model=model, tokenizer=AutoTokenizer.from_pretrained(sys.argv[1]), dtype="bfloat16",
                  progress=False)
prompts = [f"question {i}: " + "word " * 40 for i in range(64)]
gen.generate(prompts[:2], 1, Sampling(1.0, 1.0, 1), seed=0)  # allocator and kernels warm
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
gen.generate(prompts, 1, Sampling(1.0, 1.0, 1), seed=0)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 2**20)
"""


def test_a_prefill_with_frozen_weights_does_not_copy_the_output_layer_per_prompt(tiny_model, tmp_path):
    """Issue 44: a 3-D strided slice into the output layer (logits_to_keep=1) made CPU bfloat16 copy its weight
    once per prompt when no weight needs a gradient, 57 MB a prompt at SmolLM2's shape: 64 prompts grew the
    process by 3.3 GiB. The prefill's growth now stays under what a single copy per prompt would take."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", PREFILL_PEAK, str(tiny_model)], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    grown_gib = float(res.stdout.strip().splitlines()[-1])
    per_prompt_copy_gib = 576 * 49152 * 2 / 2**30
    assert grown_gib < 8 * per_prompt_copy_gib, f"the 64-prompt prefill grew the process by {grown_gib:.2f} GiB"
