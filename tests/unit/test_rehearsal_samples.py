"""Rehearsal sample rows, read back through the real loaders: formats, filters, BBH stories, determinism."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hardex.rehearsal.samples import SUPPORTED_HUBS, SampleError, sample_split
from hardex.tasks import get_task
from hardex.tasks.rows import keep_listed

GSM8K = {"hub": "openai/gsm8k", "config": "main", "split": "train"}
BBH7 = {"hub": "lukaemon/bbh", "config": "tracking_shuffled_objects_seven_objects", "split": "test"}
AIME = {"hub": "opencompass/AIME2025", "config": "AIME2025-I", "split": "test"}
MATH = {"hub": "EleutherAI/hendrycks_math", "split": "train"}
SPECS = [("gsm8k", GSM8K), ("shuffled_objects", BBH7), ("aime2025", AIME), ("math", MATH)]


def load(family: str, spec: dict, out: Path, n_rows: int):
    """sample_split, then the split as the workflow loads it (dataset_split: loader, then `rows`)."""
    new = sample_split(family, spec, out, n_rows)
    return keep_listed(get_task(family).load_split(new), new), new


@pytest.mark.parametrize(
    "family, spec, rows, columns",
    [
        ("gsm8k", GSM8K, 12, ["id", "question", "answer", "solution", "n_steps", "tier"]),
        ("shuffled_objects", BBH7, 12, ["id", "question", "answer", "tier", "n_objects", "answer_text"]),
        ("aime2025", AIME, 12, ["id", "question", "answer", "part"]),
        ("math", MATH, 7 * 12, ["id", "question", "answer", "tier", "subject", "solution", "numeric"]),  # 7 subjects
    ],
)
def test_each_hub_loads_through_its_real_loader(tmp_path, family, spec, rows, columns):
    df, new = load(family, spec, tmp_path, 12)
    assert (df.height, df.columns) == (rows, columns)
    assert "hub" not in new and {k: new[k] for k in spec if k != "hub"} == {k: v for k, v in spec.items() if k != "hub"}
    assert Path(new["file"]).is_absolute() and new["file"].startswith(str(tmp_path))
    assert df["question"].n_unique() == df.height


def test_loaded_ids_and_answers_are_the_hubs(tmp_path):
    assert load("gsm8k", GSM8K, tmp_path, 3)[0]["id"].to_list() == ["gsm8k-train-0", "gsm8k-train-1", "gsm8k-train-2"]
    aime = load("aime2025", {"hub": "opencompass/AIME2025", "parts": ["I", "II"]}, tmp_path, 15)[0]
    assert aime["part"].value_counts()["count"].to_list() == [15, 15]
    assert all(0 <= int(a) <= 999 for a in aime["answer"])
    math = load("math", MATH, tmp_path, 5)[0]
    assert set(math["subject"]) == {"Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra",
                                    "Number Theory", "Prealgebra", "Precalculus"}
    assert math.filter(math["subject"] == "Geometry")["id"].to_list() == [f"math-train-geometry-{i}" for i in range(5)]


def test_gsm8k_tiers_spread(tmp_path):
    df = load("gsm8k", GSM8K, tmp_path, 12)[0]
    assert df["tier"].n_unique() >= 3
    assert all(re.fullmatch(r"-?\d+", a) for a in df["answer"])


def _replayed(question: str) -> tuple[str, int]:
    """The option letter the asked person holds at the end, and the number of swaps, read from the story
    alone (not via render_bbh)."""
    story, options = question.split("\nOptions:\n")
    names = re.split(r", and |, | and ", story.split(" are ", 1)[0])
    assert len(options.splitlines()) == len(names)
    holder = {name: k for k, name in enumerate(names)}  # option k is what person k starts with
    swaps = re.findall(r"(\w+) and (\w+) (?:swap|switch|trade)", story.split("\n", 1)[1])
    for a, b in swaps:
        holder[a], holder[b] = holder[b], holder[a]
    asked = re.search(r"At the end of the \w+, (\w+) ", story).group(1)
    return f"({'ABCDEFG'[holder[asked]]})", len(swaps)


@pytest.mark.parametrize("objects", [3, 5, 7])
def test_bbh_targets_follow_the_story_and_both_scorers_read_them(tmp_path, objects):
    df = load("shuffled_objects", {"hub": "lukaemon/bbh", "objects": objects, "split": "test"}, tmp_path, 40)[0]
    assert df.height == 40 and set(df["n_objects"]) == {objects}
    lenient, strict = get_task("shuffled_objects"), get_task("shuffled_objects", "strict")
    for row in df.iter_rows(named=True):
        assert _replayed(row["question"]) == (row["answer"], objects)  # BBH: as many swaps as objects
        wrong = "(A)" if row["answer"] != "(A)" else "(B)"
        for task in (lenient, strict):
            assert task.is_correct(f"... so the answer is \\boxed{{{row['answer']}}}", row["answer"])
            assert not task.is_correct(f"... so the answer is \\boxed{{{wrong}}}", row["answer"])
    assert len({row.split(" are ", 2)[1][:20] for row in df["question"]}) >= 3  # several story variants


def test_bbh_rows_pick_positions_and_pool_and_test_share_one_growing_file(tmp_path):
    pool, new = load("shuffled_objects", {**BBH7, "rows": [168, 3, 240]}, tmp_path, 5)
    assert pool["id"].to_list() == ["bbh-tso7-168", "bbh-tso7-3", "bbh-tso7-240"]
    full = get_task("shuffled_objects").load_split({k: v for k, v in new.items() if k != "rows"})
    assert full.height == 241
    test, new_test = load("shuffled_objects", {**BBH7, "rows": [249, 0]}, tmp_path, 5)
    assert new_test["file"] == new["file"]
    grown = get_task("shuffled_objects").load_split({k: v for k, v in new.items() if k != "rows"})
    assert grown.height == 250
    assert grown.head(241).equals(full)  # the pool's rows are still the same items


def test_math_levels_and_numeric_only_filter(tmp_path):
    full = load("math", MATH, tmp_path, 15)[0]
    assert set(full["tier"]) == {1, 2, 3, 4, 5}
    low = load("math", {**MATH, "levels": [1, 2, 3]}, tmp_path, 15)[0]
    assert set(low["tier"]) == {1, 2, 3} and low.height == full.filter(full["tier"] <= 3).height
    numeric = load("math", {**MATH, "numeric_only": True}, tmp_path, 15)[0]
    assert 0 < numeric.height < full.height
    assert numeric.height > full.height / 2  # most answers are integers
    assert all(re.fullmatch(r"-?\d+", a) for a in numeric["answer"])
    assert any(a.startswith("\\frac") for a in full["answer"])
    one = load("math", {**MATH, "config": "number_theory", "levels": [4], "numeric_only": True}, tmp_path, 15)[0]
    assert set(one["subject"]) == {"Number Theory"} and set(one["tier"]) == {4}


@pytest.mark.parametrize("family, spec", [("gsm8k", GSM8K), ("math", MATH)])
def test_train_and_test_questions_are_disjoint(tmp_path, family, spec):
    train = load(family, spec, tmp_path, 150)[0]
    test, new = load(family, {**spec, "split": "test"}, tmp_path, 150)
    assert "test" in Path(new["file"]).name
    assert train.height == test.height and not set(train["question"]) & set(test["question"])


def test_same_call_writes_the_same_bytes(tmp_path):
    for family, spec in SPECS:
        sample_split(family, spec, tmp_path / "a", 20)
        sample_split(family, spec, tmp_path / "b", 20)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) == 1 + 1 + 1 + 7
    before = {f: (tmp_path / "a" / f).read_bytes() for f in files}
    assert before == {f: (tmp_path / "b" / f).read_bytes() for f in files}
    for family, spec in SPECS:  # a second call in the same place reuses the files
        sample_split(family, spec, tmp_path / "a", 20)
    assert before == {f: (tmp_path / "a" / f).read_bytes() for f in files}


def test_fields_name_the_columns_the_file_holds(tmp_path):
    spec = {**BBH7, "fields": {"input": "question", "target": "answer"}}  # the released code's column names
    df, new = load("shuffled_objects", spec, tmp_path, 4)
    assert df.height == 4 and new["fields"] == spec["fields"]
    assert '"question":' in Path(new["file"].replace("{config}", BBH7["config"])).read_text()


@pytest.mark.parametrize("spec", [{"hub": "cais/mmlu", "config": "all"}, {"file": "some.jsonl"}])
def test_unsupported_hub_is_a_sample_error(tmp_path, spec):
    with pytest.raises(SampleError) as e:
        sample_split("qa", spec, tmp_path, 4)
    assert str(spec.get("hub")) in str(e.value) and all(hub in str(e.value) for hub in SUPPORTED_HUBS)
    assert not any(tmp_path.iterdir())
