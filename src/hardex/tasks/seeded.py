"""Seeded scoring (`scoring: rehearsal+<scoring>`, which hardex.rehearsal writes into a rehearsal's config):
the task's own scorer runs on every completion, as it will in the real run, and a seeded draw gives the
verdict, so a rehearsal with random stand-in models exercises what depends on rewards (pass rates that
spread, every strategy selecting, groups with mixed rewards, nonzero gradients). `get_task` wraps a task in
it; it imports nothing of hardex.

Each example gets a pass rate spread over [0.2, 0.8] from a hash of its prompt; each completion is marked
correct when a hash of (prompt, completion) falls below it. Both are fixed by the text alone: the same
completion always gets the same verdict, in any job and on any backend.
"""

from __future__ import annotations

import hashlib

PREFIX = "rehearsal+"  # scoring "rehearsal+strict": the strict scorer runs, the seeded draw decides


def _unit(*parts: str) -> float:
    """A number in [0, 1) fixed by the text of `parts`."""
    digest = hashlib.blake2b("\0".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def seeded_pass_rate(prompt: str) -> float:
    """The share of an example's completions the rehearsal marks correct."""
    # never near 0 or 1: even the hardest subset's groups of 8 all agree in at most 0.8**8 = 17 % of steps
    return 0.2 + 0.6 * _unit("rehearsal pass rate", prompt)


class RehearsalScoring:
    """A Task whose verdicts are seeded draws; everything else (loading, prompts, answers) is the task's."""

    def __init__(self, task) -> None:
        self.task = task
        self.scoring = PREFIX + task.scoring

    def __getattr__(self, name: str):
        return getattr(self.task, name)

    def is_correct(self, completion: str, reference: str, prompt: str | None = None) -> bool:
        self.task.is_correct(completion, reference, prompt)  # the real scorer's path runs (and may fail) as it will
        example = prompt if prompt is not None else reference
        return _unit("rehearsal verdict", example, completion) < seeded_pass_rate(example)

    def score(self, completion: str, reference: str, prompt: str | None = None) -> float:
        """The reward: the seeded verdict, never the task's own score (which __getattr__ would hand on)."""
        return float(self.is_correct(completion, reference, prompt))
