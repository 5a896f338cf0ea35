"""What planning reads of a run's checkpoints: whether a new run length alone would make its train job delete them."""

from __future__ import annotations

from hardex.checkpoints import length_changes, lost_by_length, resume_point

GRPO = {"learning_rate": 1e-4, "max_steps": 4, "epochs": None, "schedule_steps": None, "precision": "auto",
        "report_to": "none"}


def trained(tmp_path, grpo, name="run"):
    """A run folder whose checkpoints were trained with `grpo` (precision resolved, as the train job records it)."""
    run = tmp_path / name
    resume_point(run / "checkpoints", "m", [("q", "a")], {**grpo, "precision": "fp32"}, 0, None, grpo["max_steps"],
                 log=lambda _: None)
    (run / "checkpoints" / "checkpoint-2").mkdir()
    (run / "checkpoints" / "checkpoint-2" / "trainer_state.json").write_text("{}")
    return run


def test_a_new_length_alone_without_a_fixed_schedule_would_delete_the_checkpoints(tmp_path):
    run = trained(tmp_path, GRPO)
    assert length_changes(run / "checkpoints", {**GRPO, "max_steps": 8}) == ["max_steps: 4 -> 8"]
    assert length_changes(run / "checkpoints", {**GRPO, "max_steps": 2}) == ["max_steps: 4 -> 2"]
    # the same settings (auto resolved by the job), a tracker (computes nothing): resumed, nothing lost
    assert length_changes(run / "checkpoints", GRPO) == []
    assert length_changes(run / "checkpoints", {**GRPO, "report_to": "wandb"}) == []
    # other settings too: another run, as the user meant
    assert length_changes(run / "checkpoints", {**GRPO, "max_steps": 8, "learning_rate": 3e-4}) == []
    line = lost_by_length({run: {**GRPO, "max_steps": 8}, tmp_path / "untrained": {**GRPO, "max_steps": 8}})
    assert line.startswith(f"grpo.max_steps: 4 -> 8 would delete the checkpoints of 1 trained run(s) ({run}) ")
    assert lost_by_length({run: GRPO}) is None


def test_under_a_fixed_schedule_a_new_length_continues_and_nothing_is_lost(tmp_path):
    fixed = {**GRPO, "schedule_steps": 8}
    run = trained(tmp_path, fixed)
    assert length_changes(run / "checkpoints", {**fixed, "max_steps": 8}) == []


def test_a_run_without_checkpoints_loses_nothing(tmp_path):
    run = trained(tmp_path, GRPO)
    (run / "checkpoints" / "checkpoint-2" / "trainer_state.json").unlink()
    assert length_changes(run / "checkpoints", {**GRPO, "max_steps": 8}) == []
