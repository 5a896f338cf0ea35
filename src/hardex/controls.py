"""Control runs: how much of a GRPO gain is the skill, and how much the answer's form?

A control run (``selection.controls``; run strategy ``<strategy>_<control>``, hardex.selection) trains on
the same subset as the strategy it controls, with the same settings, and is evaluated with the true
scorer like every run; only its training reward differs:

- ``shuffled``: each example is scored by the task's own scorer against ANOTHER example's reference answer,
  a derangement of the subset's answers seeded by the run seed. The reward still pays for a readable
  answer in the subset's usual range of values, never for this question's answer (a spurious reward:
  arXiv 2506.10947 raised Qwen2.5-Math-7B on MATH-500 by ~21 points with such rewards, 29 with the true one).
- ``format``: `scale` for any completion in which the task's scorer reads an answer at all, whatever its
  value (one-shot RLVR's gain was partly format correction, arXiv 2504.20571).

The shuffled references are written into the run's rows (`control_rows`), so the run's checkpoints are
keyed by them (a resumed run keeps its mapping, a changed mapping starts afresh) and the processes of a
run trained in several (hardex.train_worker) get them with the rows; the derangement is a function of
the answers and the seed alone, so every job that rebuilds it gets the same one. The true reward stays
`hardex.training.task_reward`; this module imports no stage.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np

from hardex.tasks.released import released_last_box

Reward = Callable[[str, str, str], float]


def _rng(seed: int, purpose: str) -> np.random.Generator:
    salt = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "big")
    return np.random.default_rng([int(seed), salt])


def derangement(answers: Sequence[str], seed: int) -> list[int]:
    """A seeded permutation `p` of the examples that gives as few as possible an equal answer:
    example i is scored against ``answers[p[i]]``.

    When no answer is held by more than half the examples, none gets an equal answer. Otherwise
    (a value held by m > n/2) 2m - n of its holders must, and exactly that many do. Construction: the
    examples grouped by answer (groups and members in seeded order), each matched with the example a
    seeded shift s further along, min(m, n-m) <= s <= max(m, n-m) for the largest group's size m, which
    is the classic proof that such a shift leaves no group facing itself. Deterministic in (answers,
    seed): the groups are ordered by value before shuffling, never by Python's (salted) string hashes.
    """
    n = len(answers)
    if n == 0:
        return []
    rng = _rng(seed, "shuffled control")
    groups: dict[str, list[int]] = {}
    for i, a in enumerate(answers):
        groups.setdefault(str(a), []).append(i)
    values = sorted(groups)
    order = []
    for v in (values[j] for j in rng.permutation(len(values))):
        members = groups[v]
        order += [members[j] for j in rng.permutation(len(members))]
    largest = max(len(g) for g in groups.values())
    lo, hi = sorted((largest, n - largest))
    shift = int(rng.integers(lo, hi + 1))
    perm = [0] * n
    for k, i in enumerate(order):
        perm[i] = order[(k + shift) % n]
    return perm


def shuffled_rows(rows: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], str]:
    """The run's rows with each reference replaced by another example's (`derangement`), and a line for
    the job's log saying how many keep an equal one and why."""
    answers = [str(r["answer"]) for r in rows]
    perm = derangement(answers, seed)
    out = [{**r, "answer": answers[j]} for r, j in zip(rows, perm)]
    kept = sum(answers[i] == answers[j] for i, j in enumerate(perm))
    if len(set(answers)) < 2:
        note = (f"all {len(rows)} examples have the same reference answer ({answers[0]!r} if any): the shuffled "
                f"reward is the true reward here, and this control measures nothing")
    elif kept:
        value = max(set(answers), key=answers.count)
        note = (f"{kept} of {len(rows)} examples keep an equal reference: {value!r} is the answer of "
                f"{answers.count(value)}, more than half of the subset, so no permutation avoids it")
    else:
        note = f"no example of {len(rows)} is scored against an equal answer"
    return out, note


def reads_an_answer(task, completion: str, reference: str, prompt: str | None = None) -> bool:
    r"""Whether the task's scorer reads an answer from the completion at all, right or wrong: a non-empty
    last box for boxed scoring, whatever `scoring: flexible` extracts otherwise (Task.answer, the scorer's
    own extraction, echoed prompt stripped); for `scoring: strict` the released scorer's last box (AIME's
    released fallback to a completion's first integer is not counted)."""
    if task.scoring.endswith("strict"):  # a rehearsal's "rehearsal+strict" too
        found = released_last_box(completion)
    else:
        found = task.answer(completion, reference, prompt)
    return bool(found and found.strip())


def format_reward(task, scale: float = 1.0) -> Reward:
    """The format control's reward: `scale` for a completion the scorer reads an answer from, else 0."""
    return lambda completion, answer, prompt: scale * float(reads_an_answer(task, completion, answer, prompt))


def control_rows(control: str | None, rows: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], str]:
    """The rows a run trains on: the subset's, with shuffled references for the shuffled control; and a
    note for the log ("" when there is nothing to say)."""
    if control == "shuffled":
        return shuffled_rows(rows, seed)
    return rows, ""


def run_reward(control: str | None, task, scale: float, task_reward: Callable[[Any, float], Reward]) -> Reward:
    """The reward a run trains with: the format control's, or the true reward `task_reward(task, scale)`
    (hardex.training's, passed in: this module imports no stage), which for the shuffled control reads
    the shuffled references `control_rows` wrote."""
    if control == "format":
        return format_reward(task, scale)
    if control not in (None, "shuffled"):
        raise ValueError(f"unknown control {control!r}")
    return task_reward(task, scale)


def reward_line(control: str | None, scale: float) -> str:
    """What the job's log says about the reward that ran."""
    return {
        None: f"reward: the task's scorer against each example's own reference ({scale:g} if right, else 0)",
        "shuffled": f"reward: shuffled control, the task's scorer against another example's reference "
                    f"({scale:g} if it matches, else 0)",
        "format": f"reward: format control, {scale:g} for any completion the scorer reads an answer from, "
                  f"right or wrong, else 0",
    }[control]
