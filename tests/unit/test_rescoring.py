"""Form against skill against sharpening: stored completions rescored by every scorer of their task, the
base model's pass@k at large k beside each strategy's final checkpoint, its figure, and the greedy sample
evaluation.greedy adds beside the sampled ones."""

from __future__ import annotations

import math

import polars as pl
import pytest

from hardex.generation.sampling import Sampling
from hardex.report import loading, plots as P, tables
from hardex.report.rescoring import rescore, rescored_table, scorers_of
from hardex.report.sharpening import k_values, pass_at_k_table
from hardex.tasks import get_task

BOXED = "6 x 7 = 42, so the answer is \\boxed{42}."
BARE = "6 x 7 = 42. The answer is 42."  # no box: flexible reads 42, lenient and strict find nothing
WRONG = "The answer is \\boxed{41}."
ROWS = {"q1": {"id": "q1", "question": "What is 6 x 7?", "answer": "42", "tier": None},
        "q2": {"id": "q2", "question": "What is 5 x 5?", "answer": "25", "tier": None}}


def test_scorers_disagree_on_a_bare_final_number_and_rescoring_counts_each():
    gsm8k = {s: get_task("gsm8k", s) for s in scorers_of("gsm8k")}
    assert list(gsm8k) == ["lenient", "flexible", "strict"] and scorers_of("math") == ["lenient", "flexible"]
    prompt = gsm8k["lenient"].prompt(ROWS["q1"])
    assert [gsm8k[s].is_correct(BARE, "42", prompt) for s in gsm8k] == [False, True, False]
    outcomes = pl.DataFrame({"id": ["q1", "q2"], "n": [3, 1], "n_correct": [1, 0],
                             "completions": [[BOXED, BARE, WRONG], ["It is 25"]]})
    out = rescore(outcomes, ROWS, "gsm8k")
    assert out["n_correct_lenient"].to_list() == [1, 0]
    assert out["n_correct_flexible"].to_list() == [2, 1]
    assert out["n_correct_strict"].to_list() == [1, 0]
    # an echoed prompt is stripped before reading: its instruction's empty box is no answer, its numbers none
    echo = rescore(outcomes.with_columns(pl.Series("completions", [[prompt + " 42"], [prompt]])), ROWS, "gsm8k")
    assert echo["n_correct_flexible"].to_list() == [1, 0]


def _write(path, frame):
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    return path


def test_the_rescored_table_puts_every_scorer_side_by_side(tmp_path):
    data = _write(tmp_path / "results/data/gsm8k/test.parquet", pl.DataFrame(list(ROWS.values())))
    base = _write(tmp_path / "results/eval/m/base/t.parquet", pl.DataFrame({
        "seed": [0, 0], "step": [0, 0], "benchmark": ["gsm8k/test"] * 2, "id": ["q1", "q2"], "tier": [None, None],
        "n": [2, 2], "n_correct": [0, 0], "completions": [[BARE, "no idea"], ["no idea", "no idea"]]}))
    run = _write(tmp_path / "results/eval/m/t/hard/seed0.parquet", pl.DataFrame({
        "step": [2, 2, 4, 4], "benchmark": ["gsm8k/test"] * 4, "id": ["q1", "q2"] * 2, "tier": [None] * 4,
        "n": [2] * 4, "n_correct": [0, 0, 2, 0],
        "completions": [["x", "x"], ["x", "x"], [BOXED, BOXED], [BARE.replace("42", "25"), "no idea"]]}))
    table = rescored_table([run], [base], {"t": ["gsm8k/test"]}, {"gsm8k/test": data}, {"gsm8k/test": "gsm8k"},
                           {"t": "lenient"})
    row = table.row(0, named=True)
    assert (row["configured"], row["final_step"], row["n_seeds"], row["stored_mismatch"]) == ("lenient", 4, 1, 0)
    # box only: 0 % -> 50 %; flexible also reads the bare numbers: 25 % -> 75 %; strict as box only here
    assert (row["lenient_base"], row["lenient_final"], row["lenient_gain"]) == (0.0, 50.0, 50.0)
    assert (row["flexible_base"], row["flexible_final"], row["flexible_gain"]) == (25.0, 75.0, 50.0)
    assert row["strict_final"] == 50.0
    # stored verdicts that the configured scorer does not reproduce are counted (here: a rehearsal's draws)
    drawn = rescored_table([run], [base], {"t": ["gsm8k/test"]}, {"gsm8k/test": data}, {"gsm8k/test": "gsm8k"},
                           {"t": "rehearsal+flexible"})
    assert drawn.row(0, named=True)["configured"] == "flexible" and drawn["stored_mismatch"][0] == 2
    # a family without a released scorer leaves strict empty (and MATH's flexible reads no bare number)
    row = rescored_table([run], [base], {"t": ["gsm8k/test"]}, {"gsm8k/test": data}, {"gsm8k/test": "math"},
                         {"t": "lenient"}).row(0, named=True)
    assert row["strict_gain"] is None and row["flexible_final"] == 50.0 and row["stored_mismatch"] == 0


def _results(base_counts, final_counts, base_n=8, final_n=2, greedy=None) -> loading.Results:
    ids = [f"q{i}" for i in range(len(base_counts))]
    base = pl.DataFrame({"model": "m", "task": "t", "benchmark": "b", "seed": 0, "id": ids, "tier": None,
                         "n": base_n, "n_correct": base_counts})
    runs = pl.DataFrame({"model": "m", "task": "t", "strategy": "hard", "seed": 0, "step": 4, "benchmark": "b",
                         "id": ids, "tier": None, "n": final_n, "n_correct": final_counts})
    if greedy is not None:
        base = base.with_columns(pl.Series("greedy_correct", greedy[0]))
        runs = runs.with_columns(pl.Series("greedy_correct", greedy[1]))
    return loading.Results(runs, base, pl.DataFrame(), {"t": ["b"]}, {"b": [1]})


def test_pass_at_k_of_the_base_at_large_k_beside_the_final_checkpoint():
    assert k_values(8) == [1, 2, 4, 8] and k_values(12) == [1, 2, 4, 8, 12] and k_values(1) == [1]
    # q0: base 1 of 8, final 2 of 2 (sharpened); q1: base 0 of 8, final 1 of 2 (new); q2, q3: neither
    res = _results([1, 0, 0, 0], [2, 1, 0, 0], greedy=([0, 0, 0, 0], [1, 0, 0, 0]))
    table = pass_at_k_table(res)
    base, hard = (table.filter(pl.col("strategy") == s).row(0, named=True) for s in ("base", "hard"))
    assert table["strategy"].to_list() == ["base", "hard"]
    assert [c for c in table.columns if c.startswith("pass@")] == ["pass@1", "pass@2", "pass@4", "pass@8"]
    assert base["n_samples"] == 8 and base["pass@1"] == pytest.approx(100 / 32)
    assert base["pass@8"] == pytest.approx(25.0) and base["pass@2"] == pytest.approx(100 * (2 / 8) / 4)
    assert hard["n_samples"] == 2 and hard["pass@1"] == pytest.approx(100 * 1.5 / 4)
    assert hard["pass@2"] == pytest.approx(50.0) and hard["pass@4"] is None and hard["pass@8"] is None
    assert hard["beyond_base_pct"] == pytest.approx(25.0) and base["beyond_base_pct"] is None
    assert (base["greedy"], hard["greedy"]) == (0.0, 25.0)
    # four questions are too few to fit the sharpening null (tests/unit/test_sharpening.py): its columns empty
    assert hard["predicted_beyond_base_pct"] is None and hard["verdict"] is None and base["base_a"] is None
    # without evaluation.greedy the column is empty; the table is one of the report's
    plain = pass_at_k_table(_results([1, 0], [1, 0]))
    assert plain["greedy"].null_count() == plain.height
    assert "pass_at_k" in tables.TABLES and "rescored" in tables.TABLES


def test_the_pass_at_k_figure_from_a_constructed_table(tmp_path):
    table = pass_at_k_table(_results([1, 0, 3, 0], [2, 1, 2, 0]))
    table = pl.concat([table, table.with_columns(pl.lit("t2").alias("task"))])  # two panels
    paths = P.plot_pass_at_k(table, [tmp_path / "pass_at_k.png", tmp_path / "pass_at_k.pdf"], {"dpi": 60})
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_bytes()[:5] == b"%PDF-"
    # from the CSV the report writes (nulls where a strategy has fewer samples), and with no rows at all
    csv = tmp_path / "pass_at_k.csv"
    table.write_csv(csv)
    P.plot_pass_at_k(pl.read_csv(csv), [tmp_path / "again.png"], {"dpi": 60})
    P.plot_pass_at_k(table.clear(), [tmp_path / "empty.png"], {"dpi": 60})
    assert (tmp_path / "again.png").stat().st_size > 1000 and not math.isnan(table["pass@8"][0])


def test_greedy_outcomes_beside_the_sampled_ones_on_the_tiny_model():
    from hardex.evaluation import evaluate_examples, greedy_outcomes
    from hardex.generation.hf import HFGenerator
    from tests.support import tiny_model_dir

    gen = HFGenerator(tiny_model_dir(), device="cpu", dtype="float32", progress=False)
    task = get_task("swaps")
    rows = task.load_split({"name": "test", "n": 3, "seed": 1, "difficulty": [1, 1], "people": [3, 3]}).to_dicts()
    decoding = {"n_samples": 2, "temperature": 1.0, "max_new_tokens": 8, "pass_k": [1]}
    g1 = greedy_outcomes(gen, task, rows, lambda t: t, decoding, 0)
    g2 = greedy_outcomes(gen, task, rows, lambda t: t, decoding, 0)
    assert g1.equals(g2) and g1.columns == ["id", "greedy_correct", "greedy_completion"]  # no randomness
    out = evaluate_examples(gen, task, rows, lambda t: t, decoding, 0, 7).join(g1, on="id", how="left")
    assert out["n"].to_list() == [2, 2, 2] and out["greedy_completion"].null_count() == 0
    assert out["greedy_correct"].to_list() == [int(task.is_correct(c, r["answer"], task.prompt(r)))
                                               for c, r in zip(out["greedy_completion"], rows)]


def test_greedy_answers_decoded_beside_the_samples_are_the_two_passes_answers_with_one_prefill():
    """evaluate_examples(with_greedy=True): the samples and greedy completions of the two separate passes, from one
    prefill per prompt (each batch's prompts go through the model once, not twice)."""
    from hardex.evaluation import evaluate_examples, greedy_outcomes
    from hardex.generation.hf import HFGenerator
    from tests.support import tiny_model_dir

    gen = HFGenerator(tiny_model_dir(), device="cpu", dtype="float32", progress=False)
    task = get_task("swaps")
    rows = task.load_split({"name": "test", "n": 6, "seed": 1, "difficulty": [1, 2], "people": [3, 3]}).to_dicts()
    decoding = {"n_samples": 3, "temperature": 1.0, "max_new_tokens": 12, "pass_k": [1]}
    prefills = []
    gen.model.register_forward_pre_hook(
        lambda m, a, kw: prefills.append(1) if kw["input_ids"].shape[1] > 1 else None, with_kwargs=True)
    apart = evaluate_examples(gen, task, rows, lambda t: t, decoding, 0, 7).join(
        greedy_outcomes(gen, task, rows, lambda t: t, decoding, 0), on="id", how="left")
    two_passes, prefills[:] = len(prefills), []
    together = evaluate_examples(gen, task, rows, lambda t: t, decoding, 0, 7, with_greedy=True)
    assert together.equals(apart.select(together.columns)) and "greedy_completion" in together.columns
    assert len(prefills) * 2 == two_passes
    with pytest.raises(ValueError, match="temperature > 0"):
        gen.generate_with_greedy(["a"], 1, Sampling(temperature=0.0, max_new_tokens=4))
