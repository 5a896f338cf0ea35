"""Bad local data files are refused at planning with the split, the file, the row and the reason."""

from __future__ import annotations

import json

import pytest

from tests.support import snakemake, write_config

GOOD = {"question": "Tom has 3 apples and buys 2. How many?", "answer": "3 + 2 = <<3+2=5>>5\n#### 5"}

CASES = {
    "empty": ("", "no rows"),
    "unreadable": ('{"question": "a", "answer": "#### 1"}\n{not json\n', "row 1: not valid JSON"),
    "no_question": (json.dumps(GOOD) + "\n" + json.dumps({"answer": "#### 4"}) + "\n", "row 1: no 'question'"),
    "no_answer_number": (json.dumps(GOOD) + "\n" + json.dumps({"question": "q?", "answer": "four"}) + "\n",
                         "row 1"),
    "answer_is_a_list": (json.dumps(GOOD) + "\n"
                         + json.dumps({"question": "q?", "answer": ["#### 4", "#### 5"]}) + "\n",
                         "row 1: 'answer' is a list, not one text value"),
    "not_utf8": ((json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n").encode() + b'{"question": "caf\xe9"}\n',
                 "row 2 (line 3): not UTF-8 text"),
}


def with_bad_file(work, case: str) -> dict:
    """The smoke config plus a dataset read from the case's bad file."""
    import yaml

    from tests.support import SMOKE

    content = CASES[case][0]
    bad = work / f"{case}.jsonl"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["datasets"][f"bad_{case}"] = {"family": "gsm8k", "splits": {"test": {"file": str(bad)}}}
    return cfg


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_file_is_refused_at_planning_naming_its_split_file_row_and_reason(tmp_path, case):
    """Planning makes a local file's split as its data job would (issue 61: the job found it, after planning had
    read the file): the config key, the file, the row and the reason in one line."""
    from hardex.config import ConfigError, check_config

    with pytest.raises(ConfigError) as e:
        check_config(with_bad_file(tmp_path, case))
    assert str(e.value).startswith(f"datasets.bad_{case}.splits.test: {tmp_path / f'{case}.jsonl'}: ")
    assert CASES[case][1] in str(e.value)


def test_snakemakes_cli_stops_on_a_bad_file_before_any_job(tmp_path):
    write_config(tmp_path, with_bad_file(tmp_path, "no_question"))
    res = snakemake(tmp_path, "--cores", "1", "results/data/bad_no_question/test.parquet")
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert f"datasets.bad_no_question.splits.test: {tmp_path / 'no_question.jsonl'}: row 1: no 'question'" in out
    assert not (tmp_path / "results").exists() and not (tmp_path / "logs").exists()  # no job ran


def own_qa_task(tmp_path, smoke_config, allow=None):
    """The smoke config plus a qa task whose benchmark holds its pool's 10 questions, in another order (the same
    file, or the same bytes, is refused at planning): the overlap job finds them."""
    from tests.support import ROOT

    own = ROOT / "tests/fixtures/hub/own_qa.jsonl"
    reordered = tmp_path / "own_qa_test.jsonl"
    reordered.write_text("".join(reversed(own.read_text().splitlines(keepends=True))))
    fields = {"question": "prompt_text", "answer": "gold", "id": "uid"}
    cfg = smoke_config
    cfg["datasets"]["own"] = {"family": "qa", "splits": {"pool": {"file": str(own), "fields": fields},
                                                         "test": {"file": str(reordered), "fields": fields}}}
    cfg["tasks"]["own"] = {"pool": "own/pool", "benchmarks": ["own/test"]}
    cfg["grpo"]["repeat_small_subsets"] = True  # 10 % of 10 questions is one, under a step: planning counts the file
    if allow is not None:
        cfg["tasks"]["own"]["allow_overlap"] = allow
    write_config(tmp_path, cfg)


def test_a_pool_that_holds_its_benchmark_stops_before_probing(tmp_path, smoke_config):
    """The same questions in the pool and the test set would measure the gain on training data."""
    own_qa_task(tmp_path, smoke_config)
    res = snakemake(tmp_path, "--cores", "1", "results/probe/tiny/own.parquet", forked=True)
    assert res.returncode != 0
    log = (tmp_path / "logs/overlap/own.log").read_text()
    line = [x for x in log.splitlines() if x.startswith("hardex.overlap.OverlapError")][0]
    assert "tasks.own: 10 questions of its benchmarks are in its pool own/pool (own/test: 10 of 10, 10 exact" in line
    assert line.count("'") >= 6 and "tasks.own.allow_overlap: 10" in line  # three examples and the way out
    assert not (tmp_path / "results/models").exists()  # no model built, nothing probed


def test_a_stated_overlap_is_accepted_and_reported(tmp_path, smoke_config):
    own_qa_task(tmp_path, smoke_config, allow=10)
    res = snakemake(tmp_path, "--cores", "1", "results/overlap/own.json", "results/overlap/swaps.json", forked=True)
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads((tmp_path / "results/overlap/own.json").read_text())
    assert report["allowed"] == 10 and report["benchmarks"]["own/test"]["exact"] == 10
    clean = json.loads((tmp_path / "results/overlap/swaps.json").read_text())  # generated splits are disjoint
    assert {b: o["overlap"] for b, o in clean["benchmarks"].items()} == {"swaps/test": 0, "swaps/ood": 0}


def test_overlap_counts_exact_and_normalized_questions():
    import polars as pl

    from hardex.overlap import overlap

    pool = pl.DataFrame({"question": ["What is 2 + 3?", "Name the capital of France.", "Add 3 to 4."]})
    test = pl.DataFrame({"question": ["What is 2 + 3?", "name the capital of france", "Add 3 to 5.", "New one?"]})
    found = overlap(pool, test)
    assert (found["exact"], found["normalized"], found["overlap"]) == (1, 1, 2)  # digits still count: 4 != 5
    assert found["examples"] == ["What is 2 + 3?", "name the capital of france"]


def test_a_model_planning_cannot_judge_fails_its_first_job_in_one_line(tmp_path, smoke_config):
    """A directory that is there passes planning (models that are not there are refused before any job:
    test_model_sources); what it lacks, the first job that loads it names in one line, not deep in
    transformers."""
    (tmp_path / "weights-only").mkdir()
    (tmp_path / "weights-only" / "config.json").write_text("{}")
    cfg = smoke_config
    cfg["models"] = {"mine": {"path": "weights-only", "chat": False}}
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "--cores", "1", "results/probe/mine/swaps.parquet", forked=True)
    assert res.returncode != 0
    last = (tmp_path / "logs/probe/mine/swaps.log").read_text().strip().splitlines()[-2]
    assert last.startswith("hardex.models.ModelError: ") and "a local directory without a tokenizer" in last, last


def test_a_model_that_cannot_be_found_is_named_in_one_line(tmp_path, monkeypatch):
    """What the job says where planning could not know: the hub went offline, or a name is no hub id."""
    from huggingface_hub import constants

    from hardex.models import ModelError, resolve_model

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelError, match="not a hub id"):
        resolve_model("no such thing")
    with pytest.raises(ModelError, match="not in the cache while the hub cannot be reached"):
        resolve_model("Qwen/Qwen3-4B")


def test_a_directory_without_a_tokenizer_is_named(tmp_path, tiny_model):
    import shutil

    from hardex.models import ModelError, resolve_model

    broken = tmp_path / "weights-only"
    shutil.copytree(tiny_model, broken)
    for f in broken.glob("tokenizer*"):
        f.unlink()
    with pytest.raises(ModelError, match="a local directory without a tokenizer"):
        resolve_model(broken)


def test_a_benchmark_that_reads_the_pools_file_is_refused_at_planning(tmp_path):
    """The same file named as pool and test (or a copy of it under another name) is the test set trained on: refused
    at planning in one line naming both splits and the file (the overlap job found it only after the data jobs);
    disjoint rows of one file stay allowed."""
    import shutil

    import yaml

    from tests.support import SMOKE

    pool = tmp_path / "train.jsonl"
    pool.write_text("".join(json.dumps({**GOOD, "question": f"Tom has {i} apples. How many?"}) + "\n"
                            for i in range(40)))
    shutil.copy(pool, tmp_path / "copy.jsonl")
    for test_file in (pool, tmp_path / "copy.jsonl"):
        cfg = yaml.safe_load(SMOKE.read_text())
        cfg["datasets"]["mine"] = {"family": "gsm8k", "splits": {"pool": {"file": str(pool)},
                                                                 "test": {"file": str(test_file)}}}
        cfg["tasks"]["mine"] = {"pool": "mine/pool", "benchmarks": ["mine/test"]}
        write_config(tmp_path, cfg)
        res = snakemake(tmp_path, "-n", "--cores", "1")
        assert res.returncode != 0, res.stdout[-3000:]
        assert (f"hardex: config error: tasks.mine.benchmarks[0]: 'mine/test' reads the same file as the task's pool "
                f"'mine/pool' ({pool}), the same rows") in res.stderr, res.stderr[-3000:]
    # one file kept in disjoint rows by pool and test: planned
    cfg["datasets"]["mine"]["splits"] = {"pool": {"file": str(pool), "rows": list(range(30))},
                                         "test": {"file": str(pool), "rows": list(range(30, 40))}}
    write_config(tmp_path, cfg)
    res = snakemake(tmp_path, "-n", "--cores", "1")
    assert res.returncode == 0, res.stderr[-3000:]
