"""Loaders of the real-data tasks (GSM8K, BBH shuffled objects, AIME 2025, MATH) on small fixture files
in each hub dataset's own schema, and the DataErrors that name file, row and reason."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from hardex.tasks import DataError, get_task
from hardex.tasks.aime import AIMETask
from hardex.tasks.bbh import ShuffledObjectsTask
from hardex.tasks.gsm8k import GSM8KTask
from hardex.tasks.math import MATHTask
from hardex.tasks.qa import QATask
from tests.support import ROOT

HUB = ROOT / "tests" / "fixtures" / "hub"
BBH = "bbh/{config}.json"


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _check_columns(df: pl.DataFrame, *extra: str) -> None:
    assert {"id", "question", "answer", *extra} <= set(df.columns)
    assert df["id"].n_unique() == df.height
    assert df["question"].str.strip_chars().str.len_chars().min() > 0


@pytest.mark.parametrize(
    "family, cls, kind",
    [
        ("gsm8k", GSM8KTask, "number"),
        ("shuffled_objects", ShuffledObjectsTask, "choice"),
        ("aime2025", AIMETask, "number"),
        ("math", MATHTask, "math"),
        ("qa", QATask, "text"),
    ],
)
def test_registry_resolves_the_real_tasks(family, cls, kind):
    task = get_task(family)
    assert isinstance(task, cls) and task.answer_kind == kind and task.name == family


# --- GSM8K --------------------------------------------------------------------------------------


def test_gsm8k_train_and_test():
    task = get_task("gsm8k")
    train = task.load_split({"file": "gsm8k/train.jsonl", "split": "train"}, HUB)
    test = task.load_split({"file": "gsm8k/test.jsonl", "split": "test"}, HUB)
    _check_columns(train, "solution", "n_steps")
    assert train["id"].to_list() == [f"gsm8k-train-{i}" for i in range(6)]
    assert train["answer"].to_list() == ["72", "10", "5", "42", "624", "1536"]  # "#### 1,536": commas removed
    assert test["answer"].to_list() == ["18", "3", "70000", "540", "1000"]
    assert train["n_steps"].to_list() == [2, 2, 3, 4, 3, 2]
    assert "<<48/2=24>>" in train["solution"][0]  # the worked answer is kept as metadata


def test_gsm8k_id_prefix_and_split_from_file_name():
    task = get_task("gsm8k")
    assert task.load_split({"file": "gsm8k/test.jsonl"}, HUB)["id"][0] == "gsm8k-test-0"
    assert task.load_split({"file": "gsm8k/test.jsonl", "id_prefix": "g"}, HUB)["id"][1] == "g-1"


def test_gsm8k_parquet_equals_jsonl(tmp_path):
    rows = [json.loads(line) for line in (HUB / "gsm8k" / "test.jsonl").read_text().splitlines()]
    pl.DataFrame(rows).write_parquet(tmp_path / "test.parquet")
    task = get_task("gsm8k")
    from_parquet = task.load_split({"file": str(tmp_path / "test.parquet"), "split": "test"})
    from_jsonl = task.load_split({"file": "gsm8k/test.jsonl", "split": "test"}, HUB)
    assert from_parquet.equals(from_jsonl)


def test_gsm8k_answer_without_hashes_names_file_and_row(tmp_path):
    path = _write_jsonl(
        tmp_path / "train.jsonl",
        [
            {"question": "1+1?", "answer": "1+1=2\n#### 2"},
            {"question": "2+2?", "answer": "2+2 is 4"},
        ],
    )
    with pytest.raises(DataError, match=r"train\.jsonl: row 1: answer does not end with a parsable '#### N'"):
        get_task("gsm8k").load_split({"file": str(path)})


def test_gsm8k_non_numeric_final_answer(tmp_path):
    path = _write_jsonl(tmp_path / "train.jsonl", [{"question": "q?", "answer": "so\n#### four"}])
    with pytest.raises(DataError, match="row 0"):
        get_task("gsm8k").load_split({"file": str(path)})


# --- BBH shuffled objects -----------------------------------------------------------------------


def test_bbh_seven_objects_original_file_shape():
    df = get_task("shuffled_objects").load_split({"file": "bbh/tracking_shuffled_objects_seven_objects.json"}, HUB)
    _check_columns(df, "tier", "n_objects", "answer_text")
    assert df.height == 10
    assert df["id"].to_list() == [f"bbh-tso7-{i}" for i in range(10)]
    assert set(df["tier"]) == {7}
    assert all(a in {f"({c})" for c in "ABCDEFG"} for a in df["answer"])
    assert df["answer_text"][0] == "striker"


def test_bbh_start_stop_keeps_the_ids_of_the_whole_config():
    task = get_task("shuffled_objects")
    spec = {"file": BBH, "objects": 7}
    pool = task.load_split({**spec, "stop": 5}, HUB)
    test = task.load_split({**spec, "start": 5}, HUB)
    assert pool["id"].to_list() == [f"bbh-tso7-{i}" for i in range(5)]
    assert test["id"].to_list() == [f"bbh-tso7-{i}" for i in range(5, 10)]
    assert task.load_split({**spec, "start": 4, "stop": 8}, HUB)["id"].to_list() == [
        f"bbh-tso7-{i}" for i in range(4, 8)
    ]


def test_bbh_several_object_counts():
    df = get_task("shuffled_objects").load_split({"file": BBH, "objects": [3, 5, 7]}, HUB)
    _check_columns(df, "tier")
    assert df.group_by("tier").len().sort("tier").rows() == [(3, 5), (5, 5), (7, 10)]
    assert {"bbh-tso3-0", "bbh-tso5-0", "bbh-tso7-0"} <= set(df["id"])
    assert (df["tier"] == df["n_objects"]).all()


def test_bbh_object_count_from_config():
    spec = {"file": BBH, "config": "tracking_shuffled_objects_three_objects"}
    assert set(get_task("shuffled_objects").load_split(spec, HUB)["tier"]) == {3}


def test_bbh_wrong_object_count_is_an_error():
    spec = {"file": "bbh/tracking_shuffled_objects_three_objects.json", "objects": 7}
    with pytest.raises(DataError, match="row 0: 3 options, expected 7"):
        get_task("shuffled_objects").load_split(spec, HUB)


@pytest.mark.parametrize("objects", [[4], [], [3, 9]])
def test_bbh_unknown_object_counts(objects):
    with pytest.raises(DataError, match="expected values among 3, 5, 7"):
        get_task("shuffled_objects").load_split({"file": BBH, "objects": objects}, HUB)


def test_bbh_several_configs_need_a_config_placeholder():
    spec = {"file": "bbh/tracking_shuffled_objects_seven_objects.json", "objects": [3, 7]}
    with pytest.raises(DataError, match=r"no \{config\}"):
        get_task("shuffled_objects").load_split(spec, HUB)


@pytest.mark.parametrize("target", ["C", "(c)", "(D)", "pink ball", ""])
def test_bbh_target_must_be_an_option_letter(tmp_path, target):
    good = json.loads((HUB / "bbh" / "tracking_shuffled_objects_three_objects.json").read_text())[0]
    path = tmp_path / "three.json"
    path.write_text(json.dumps({"examples": [good, {**good, "target": target}]}))
    with pytest.raises(DataError, match=r"three\.json: row 1: "):
        get_task("shuffled_objects").load_split({"file": str(path), "objects": 3})


# --- AIME ---------------------------------------------------------------------------------------


def test_aime_default_is_part_one():
    df = get_task("aime2025").load_split({"file": "aime/{config}.jsonl"}, HUB)
    _check_columns(df, "part")
    assert df["id"].to_list() == [f"aime2025-I-{i}" for i in range(5)]
    assert df["answer"].to_list() == ["70", "16", "117", "279", "504"]


def test_aime_parts():
    task = get_task("aime2025")
    both = task.load_split({"file": "aime/{config}.jsonl", "parts": ["I", "II"]}, HUB)
    assert both.group_by("part").len().sort("part").rows() == [("I", 5), ("II", 3)]
    two = task.load_split({"file": "aime/AIME2025-II.jsonl", "config": "AIME2025-II"}, HUB)
    assert two["id"][0] == "aime2025-II-0" and two["answer"][0] == "49"


def test_aime_bad_part_and_bad_answer(tmp_path):
    with pytest.raises(DataError, match="parts"):
        get_task("aime2025").load_split({"file": "aime/{config}.jsonl", "parts": ["III"]}, HUB)
    path = _write_jsonl(tmp_path / "a.jsonl", [{"question": "q", "answer": "12"}, {"question": "q", "answer": "1000"}])
    with pytest.raises(DataError, match=r"a\.jsonl: row 1: answer '1000' is not an integer 0-999"):
        get_task("aime2025").load_split({"file": str(path)})


# --- MATH ---------------------------------------------------------------------------------------

MATH = {"file": "math/test.jsonl"}


def test_math_loads_levels_subjects_and_boxed_answers():
    df = get_task("math").load_split(MATH, HUB)
    _check_columns(df, "tier", "subject", "solution", "numeric")
    assert df.height == 15
    answers = dict(zip(df["id"], df["answer"]))
    assert answers["math-test-2"] == "\\frac{7}{12}"  # nested braces kept
    assert answers["math-test-10"] == "(-\\infty, 3]"  # the last box of the solution
    assert answers["math-test-11"] == "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"
    assert set(df["tier"].drop_nulls()) == {1, 2, 3, 4, 5}
    assert df.filter(pl.col("id") == "math-test-14")["tier"][0] is None  # "Level ?"


def test_math_level_filter_drops_unknown_levels():
    df = get_task("math").load_split({**MATH, "levels": [1, 2, 3]}, HUB)
    assert set(df["tier"]) == {1, 2, 3}
    assert "math-test-14" not in set(df["id"])


def test_math_subject_filter_accepts_names_and_config_names():
    task = get_task("math")
    by_name = task.load_split({**MATH, "subjects": ["Number Theory", "Counting & Probability"]}, HUB)
    by_config = task.load_split({**MATH, "subjects": ["number_theory", "counting_and_probability"]}, HUB)
    assert by_name.equals(by_config)
    assert set(by_name["subject"]) == {"Number Theory", "Counting & Probability"}
    with pytest.raises(DataError, match="unknown"):
        task.load_split({**MATH, "subjects": ["Topology"]}, HUB)


def test_math_numeric_only():
    df = get_task("math").load_split({**MATH, "numeric_only": True}, HUB)
    assert sorted(df["answer"]) == sorted(
        ["10", "11", "18", "0", "1,\\!000", "60^\\circ", "5\\text{ cm}", "-3", "0.25", "4"]
    )
    combined = get_task("math").load_split({**MATH, "numeric_only": True, "levels": [2]}, HUB)
    assert sorted(combined["answer"]) == ["1,\\!000", "5\\text{ cm}"]


def test_math_filters_that_leave_nothing():
    with pytest.raises(DataError, match="no rows left after filters"):
        get_task("math").load_split({**MATH, "levels": [5], "subjects": ["Algebra"]}, HUB)
    with pytest.raises(DataError, match="levels"):
        get_task("math").load_split({**MATH, "levels": [6]}, HUB)


def test_math_one_file_per_subject(tmp_path):
    rows = [json.loads(line) for line in (HUB / "math" / "test.jsonl").read_text().splitlines()]
    for config in ("algebra", "geometry"):
        subject = config.capitalize()
        _write_jsonl(tmp_path / f"{config}.jsonl", [r for r in rows if r["type"] == subject])
    spec = {"file": str(tmp_path / "{config}.jsonl"), "split": "test", "subjects": ["algebra", "geometry"]}
    df = get_task("math").load_split(spec, None)
    assert set(df["subject"]) == {"Algebra", "Geometry"}
    assert "math-test-geometry-0" in set(df["id"])


def test_math_flattened_schema_with_unique_ids(tmp_path):
    path = _write_jsonl(
        tmp_path / "m.jsonl",
        [
            {
                "problem": "1+1?",
                "solution": "It is 2.",
                "answer": "2",
                "subject": "Prealgebra",
                "level": 1,
                "unique_id": "test/prealgebra/1.json",
            },
            {
                "problem": "2+2?",
                "solution": "$\\boxed{4}$",
                "answer": "4",
                "subject": "Prealgebra",
                "level": 2,
                "unique_id": "test/prealgebra/2.json",
            },
        ],
    )
    df = get_task("math").load_split({"file": str(path)})
    assert df["id"].to_list() == ["test/prealgebra/1.json", "test/prealgebra/2.json"]
    assert df["answer"].to_list() == ["2", "4"] and df["tier"].to_list() == [1, 2]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"solution": "No box here."}, "row 1: solution has no \\\\boxed\\{\\} answer"),
        ({"level": "Level 9"}, "row 1: level 'Level 9'"),
        ({"type": None}, "row 1: no 'type'"),
        ({"problem": ""}, "row 1: no 'problem'"),
    ],
)
def test_math_bad_rows(tmp_path, bad, message):
    good = {"problem": "p", "level": "Level 1", "type": "Algebra", "solution": "$\\boxed{1}$"}
    path = _write_jsonl(tmp_path / "m.jsonl", [good, {**good, **bad}])
    with pytest.raises(DataError, match=rf"m\.jsonl: {message}"):
        get_task("math").load_split({"file": str(path)})


def test_duplicate_ids_name_both_rows(tmp_path):
    row = {"problem": "p", "level": "Level 1", "type": "Algebra", "solution": "$\\boxed{1}$", "unique_id": "x"}
    path = _write_jsonl(tmp_path / "m.jsonl", [row, {**row, "unique_id": "y"}, row])
    with pytest.raises(DataError, match=r"m\.jsonl: row 2: duplicate id 'x' \(first at .*m\.jsonl: row 0\)"):
        get_task("math").load_split({"file": str(path)})


# --- errors common to every loader --------------------------------------------------------------

# family -> (spec for a file path, a valid row in the hub's schema, the question field)
_FAMILIES = {
    "gsm8k": ({}, {"question": "1+1?", "answer": "1+1=<<1+1=2>>2\n#### 2"}, "question"),
    "shuffled_objects": (
        {"objects": 3},
        json.loads((HUB / "bbh" / "tracking_shuffled_objects_three_objects.json").read_text())[0],
        "input",
    ),
    "aime2025": ({}, {"question": "q", "answer": "7"}, "question"),
    "math": ({}, {"problem": "p", "level": "Level 2", "type": "Algebra", "solution": "$\\boxed{3}$"}, "problem"),
    "qa": ({"fields": {"question": "q"}}, {"q": "What is 2 + 2?", "answer": "4"}, "q"),
}


@pytest.mark.parametrize("family", sorted(_FAMILIES))
def test_missing_file(tmp_path, family):
    extra, _, _ = _FAMILIES[family]
    with pytest.raises(DataError, match=r"nope\.jsonl: file not found"):
        get_task(family).load_split({"file": str(tmp_path / "nope.jsonl"), **extra})


@pytest.mark.parametrize("family", sorted(_FAMILIES))
@pytest.mark.parametrize("name, text", [("empty.jsonl", ""), ("empty.json", "[]"), ("blank.jsonl", "\n\n")])
def test_empty_file(tmp_path, family, name, text):
    extra, _, _ = _FAMILIES[family]
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError, match=rf"{name.replace('.', '[.]')}: no rows"):
        get_task(family).load_split({"file": str(tmp_path / name), **extra})


@pytest.mark.parametrize("family", sorted(_FAMILIES))
@pytest.mark.parametrize("value", [None, "", "   "])
def test_row_without_question(tmp_path, family, value):
    extra, row, question = _FAMILIES[family]
    broken = {k: v for k, v in row.items() if k != question} if value is None else {**row, question: value}
    path = _write_jsonl(tmp_path / "rows.jsonl", [row, broken])
    with pytest.raises(DataError, match=rf"rows\.jsonl: row 1: no '{question}'"):
        get_task(family).load_split({"file": str(path), **extra})


@pytest.mark.parametrize("family", sorted(_FAMILIES))
def test_rows_that_are_not_objects(tmp_path, family):
    extra, row, _ = _FAMILIES[family]
    (tmp_path / "rows.json").write_text(json.dumps([row, ["not", "a", "row"]]))
    with pytest.raises(DataError, match=r"rows\.json: row 1: expected an object"):
        get_task(family).load_split({"file": str(tmp_path / "rows.json"), **extra})


def test_a_json_file_of_json_lines_loads(tmp_path):
    """What datasets' to_json writes (and what paper 1's released data files are), under a .json name."""
    import datasets

    rows = [json.loads(line) for line in (HUB / "gsm8k" / "test.jsonl").read_text().splitlines()]
    datasets.Dataset.from_list(rows).to_json(tmp_path / "test.json")
    datasets.Dataset.from_list(rows[:1]).to_json(tmp_path / "one.json")
    task = get_task("gsm8k")
    expected = task.load_split({"file": "gsm8k/test.jsonl"}, HUB)
    assert task.load_split({"file": str(tmp_path / "test.json")}).equals(expected)
    assert task.load_split({"file": str(tmp_path / "one.json"), "split": "test"}).equals(expected.head(1))


# --- fields: your columns renamed to the ones a family reads ------------------------------------


def test_fields_read_the_released_shuffled_objects_files(tmp_path):
    """Paper 1's released BBH files hold `question` and `answer` rows; `fields` maps them to input, target."""
    import datasets

    real = json.loads((HUB / "bbh" / "tracking_shuffled_objects_three_objects.json").read_text())
    released = [{"question": r["input"], "answer": r["target"]} for r in real]
    datasets.Dataset.from_list(released).to_json(tmp_path / "test.json")
    task = get_task("shuffled_objects")
    spec = {"file": str(tmp_path / "test.json"), "objects": 3, "fields": {"input": "question", "target": "answer"}}
    expected = task.load_split({"file": "bbh/tracking_shuffled_objects_three_objects.json", "objects": 3}, HUB)
    assert task.load_split(spec).equals(expected)


@pytest.mark.parametrize(
    "family, source, spec, fields",
    [
        ("gsm8k", "gsm8k/test.jsonl", {}, {"question": "prompt", "answer": "worked"}),
        ("aime2025", "aime/AIME2025-I.jsonl", {}, {"question": "problem", "answer": "final"}),
        ("math", "math/test.jsonl", {}, {"problem": "prompt", "solution": "worked", "level": "difficulty"}),
    ],
)
def test_fields_rename_columns_for_every_family(tmp_path, family, source, spec, fields):
    rows = [json.loads(line) for line in (HUB / source).read_text().splitlines()]
    own = []
    for row in rows:
        renamed = {fields.get(k, k): v for k, v in row.items()}
        renamed[next(iter(fields))] = "a decoy: a column named like a role that fields maps elsewhere"
        own.append(renamed)
    path = _write_jsonl(tmp_path / f"{Path(source).stem}.jsonl", own)
    task = get_task(family)
    expected = task.load_split({"file": source, **spec}, HUB)
    assert task.load_split({"file": str(path), **spec, "fields": fields}).equals(expected)


@pytest.mark.parametrize("family", ["gsm8k", "shuffled_objects", "aime2025", "math"])
def test_fields_role_the_family_does_not_read(tmp_path, family):
    task = get_task(family)
    with pytest.raises(DataError, match=rf"fields: unknown role\(s\) \['rationale'\] for family '{family}'; "
                                        rf"its roles: {', '.join(task.columns)}"):
        task.load_split({"file": str(tmp_path / "any.jsonl"), "fields": {"rationale": "why"}})


@pytest.mark.parametrize("family", ["arith", "swaps"])
def test_fields_on_a_generated_family_is_an_error(family):
    spec = {"name": "pool", "n": 2, "seed": 0, "difficulty": [1, 2], "fields": {"question": "q"}}
    with pytest.raises(DataError, match=f"fields: family '{family}' generates its rows"):
        get_task(family).load_split(spec)


@pytest.mark.parametrize("family", sorted(_FAMILIES))
def test_a_renamed_column_missing_from_a_row_names_your_column(tmp_path, family):
    extra, row, question = _FAMILIES[family]
    role = {"shuffled_objects": "input", "math": "problem"}.get(family, "question")
    mine = {("my_text" if k == question else k): v for k, v in row.items()}
    path = _write_jsonl(tmp_path / "rows.jsonl", [mine, {k: v for k, v in mine.items() if k != "my_text"}])
    with pytest.raises(DataError, match=r"rows\.jsonl: row 1: no 'my_text'"):
        get_task(family).load_split({"file": str(path), **extra, "fields": {role: "my_text"}})


def test_spec_without_file_or_hub():
    with pytest.raises(DataError, match="names neither a file nor a hub"):
        get_task("gsm8k").load_split({"split": "train"})


# --- your own data (family qa) ------------------------------------------------------------------


def test_qa_reads_any_column_names_and_slices(tmp_path):
    rows = [{"uid": f"u{i}", "text": f"question {i}?", "gold": str(i), "band": i % 2} for i in range(6)]
    path = _write_jsonl(tmp_path / "mine.jsonl", rows)
    spec = {"file": str(path), "fields": {"question": "text", "answer": "gold", "id": "uid", "tier": "band"}}
    df = get_task("qa").load_split({**spec, "start": 1, "stop": 4})
    _check_columns(df, "tier")
    assert df["id"].to_list() == ["u1", "u2", "u3"] and df["tier"].to_list() == ["1", "0", "1"]
    plain = get_task("qa").load_split({"file": str(path), "fields": {"question": "text", "answer": "gold"}})
    assert plain["id"].to_list() == [f"qa-mine-{i}" for i in range(6)] and "tier" not in plain.columns


@pytest.mark.parametrize(
    "value, reference",
    [("42", "42"), ("Step 1 ... \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"), ("3 x 4 = 12\n#### 12", "12"),
     ("  Paris ", "Paris")],
)
def test_qa_reference_from_a_short_answer_a_boxed_solution_or_hashes(tmp_path, value, reference):
    path = _write_jsonl(tmp_path / "one.jsonl", [{"question": "q", "answer": value}])
    assert get_task("qa").load_split({"file": str(path)})["answer"].to_list() == [reference]


def test_qa_names_the_columns_it_lacks_and_refuses_unknown_roles(tmp_path):
    path = _write_jsonl(tmp_path / "mine.jsonl", [{"problem": "p", "final": "1"}])
    with pytest.raises(DataError, match=r"mine\.jsonl: no column 'question' or 'answer' \(columns: final, problem\)"):
        get_task("qa").load_split({"file": str(path)})
    with pytest.raises(DataError, match=r"unknown role\(s\) \['solution'\]"):
        get_task("qa").load_split({"file": str(path), "fields": {"solution": "final"}})


@pytest.mark.parametrize(
    "completion, reference, correct",
    [
        ("so \\boxed{1,000}", "1000", True),  # numbers as numbers
        ("\\boxed{999}", "1000", False),
        ("\\boxed{0.5}", "\\frac{1}{2}", True),  # mathematical equivalence
        ("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", True),
        ("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}", False),
        ("\\boxed{paris.}", "Paris", True),  # text: case, spacing, period
        ("\\boxed{\\text{New York}}", "new york", True),
        ("\\boxed{B}", "(B)", True),  # one letter in parentheses is the letter
        ("\\boxed{(C)}", "(B)", False),
        ("\\boxed{ba}", "ab", False),  # text is never read as a product of symbols
        ("Paris", "Paris", False),  # no box, no answer
    ],
)
def test_qa_judges_by_the_kind_of_reference(completion, reference, correct):
    assert get_task("qa").is_correct(completion, reference) is correct


# --- hub access (datasets.load_dataset replaced: nothing downloads) ---------------------------


class _FakeHub:
    """Stands in for datasets.load_dataset: serves fixture rows and records what was asked."""

    def __init__(self, tables: dict[tuple[str, str | None, str], list[dict]]):
        self.tables, self.calls = tables, []

    def __call__(self, hub, config=None, split="train"):
        self.calls.append((hub, config, split))
        rows = self.tables[(hub, config, split)]
        return type("Dataset", (), {"to_list": lambda self: rows})()


def _rows(relative: str) -> list[dict]:
    text = (HUB / relative).read_text()
    if relative.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines()]
    data = json.loads(text)
    return data["examples"] if isinstance(data, dict) else data


@pytest.fixture
def fake_hub(monkeypatch):
    import datasets

    tables = {
        ("openai/gsm8k", "main", "test"): _rows("gsm8k/test.jsonl"),
        ("lukaemon/bbh", "tracking_shuffled_objects_three_objects", "test"): _rows(
            "bbh/tracking_shuffled_objects_three_objects.json"
        ),
        ("lukaemon/bbh", "tracking_shuffled_objects_seven_objects", "test"): _rows(
            "bbh/tracking_shuffled_objects_seven_objects.json"
        ),
        ("opencompass/AIME2025", "AIME2025-I", "test"): _rows("aime/AIME2025-I.jsonl"),
        ("opencompass/AIME2025", "AIME2025-II", "test"): _rows("aime/AIME2025-II.jsonl"),
    }
    math_rows = _rows("math/test.jsonl")
    for config in ("algebra", "geometry"):
        tables[("EleutherAI/hendrycks_math", config, "test")] = [
            r for r in math_rows if r["type"] == config.capitalize()
        ]
    hub = _FakeHub(tables)
    monkeypatch.setattr(datasets, "load_dataset", hub)
    return hub


def test_hub_specs_ask_for_the_right_configs(fake_hub):
    gsm = get_task("gsm8k").load_split({"hub": "openai/gsm8k", "split": "test"})
    assert gsm["id"][0] == "gsm8k-test-0" and gsm["answer"][-1] == "1000"
    bbh = get_task("shuffled_objects").load_split({"hub": "lukaemon/bbh", "objects": [3, 7], "start": 1, "stop": 3})
    assert bbh["id"].to_list() == ["bbh-tso3-1", "bbh-tso3-2", "bbh-tso7-1", "bbh-tso7-2"]
    aime = get_task("aime2025").load_split({"hub": "opencompass/AIME2025", "parts": ["I", "II"]})
    assert aime.height == 8
    math = get_task("math").load_split(
        {"hub": "EleutherAI/hendrycks_math", "split": "test", "subjects": ["Algebra", "Geometry"], "levels": [1]}
    )
    assert set(math["subject"]) == {"Algebra", "Geometry"} and set(math["tier"]) == {1}
    assert fake_hub.calls == [
        ("openai/gsm8k", "main", "test"),
        ("lukaemon/bbh", "tracking_shuffled_objects_three_objects", "test"),
        ("lukaemon/bbh", "tracking_shuffled_objects_seven_objects", "test"),
        ("opencompass/AIME2025", "AIME2025-I", "test"),
        ("opencompass/AIME2025", "AIME2025-II", "test"),
        ("EleutherAI/hendrycks_math", "algebra", "test"),
        ("EleutherAI/hendrycks_math", "geometry", "test"),
    ]


def test_hub_errors_name_the_hub_dataset(fake_hub):
    fake_hub.tables[("openai/gsm8k", "main", "train")] = [{"question": "q", "answer": "no final line"}]
    with pytest.raises(DataError, match=r"openai/gsm8k:main:train: row 0: answer does not end"):
        get_task("gsm8k").load_split({"hub": "openai/gsm8k"})
