"""GSM8K (`openai/gsm8k`, config `main`): grade-school word problems with one numeric answer."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import DataError, Task
from hardex.tasks.numbers import format_number, parse_number, same_number
from hardex.tasks.released import released_gsm8k_correct
from hardex.tasks.rows import field, finish, read_rows

_FINAL = re.compile(r"####\s*(.+?)\s*$")


def reference_answer(solution: str) -> str | None:
    """The canonical number after ``####`` on the last line of a GSM8K solution (commas removed)."""
    lines = solution.strip().splitlines()
    m = _FINAL.search(lines[-1]) if lines else None
    value = parse_number(m.group(1)) if m else None
    return None if value is None else format_number(value)


class GSM8KTask(Task):
    """Reference = the number after ``####``; a prediction is right when it states the same number
    (numbers.parse_number: ``1,000``, ``$18``, ``18.0``; an equation by its right-hand side). Strict
    scoring: the released ``int()`` of the last box (tasks.released).

    Ids are ``{id_prefix}-{row}`` with the prefix ``gsm8k-{split}`` by default, row = position in the
    source, so they stay stable across loads. Metadata: `solution` (the worked answer) and `n_steps`
    (its lines before ``####``), which is also the `tier`: GSM8K has no published difficulty tiers,
    and the number of solution steps is the proxy paper 2's stratified view can use.
    """

    name = "gsm8k"
    answer_kind = "number"
    columns = ("question", "answer")

    def sources(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """The spec, of the hub's `main` config unless it names another."""
        return [{"config": "main", **spec}]

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        (spec,) = self.sources(spec)
        rows, origin = read_rows(spec, root, self)
        # ids name the config split: two splits of a dataset never share one, whatever their files are called
        split = spec.get("name") or spec.get("split") or (Path(spec["file"]).stem if spec.get("file") else "train")
        prefix = spec.get("id_prefix") or f"gsm8k-{split}"
        records, wheres = [], []
        for i, row in enumerate(rows):
            question = field(row, "question", origin, i)
            solution = field(row, "answer", origin, i)
            answer = reference_answer(solution)
            if answer is None:
                raise DataError(f"{origin}: row {i}: answer does not end with a parsable '#### N'")
            steps = solution.strip().splitlines()[:-1]
            records.append(
                {
                    "id": f"{prefix}-{i}",
                    "question": question,
                    "answer": answer,
                    "solution": solution,
                    "n_steps": len(steps),
                    "tier": len(steps),  # our GSM8K tier (paper 2 does not publish its own): solution steps
                }
            )
            wheres.append(f"{origin}: row {i}")
        return finish(records, wheres, origin)

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        return same_number(predicted, reference)

    def released_correct(self, completion: str, reference: str) -> bool:
        return released_gsm8k_correct(completion, reference)
