"""AIME 2025 (`opencompass/AIME2025`, configs `AIME2025-I` / `AIME2025-II`): 15 problems per part,
integer answers 0-999. Paper 1 uses it as an out-of-distribution check (part I, pass@8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import DataError, Task
from hardex.tasks.math import math_equal
from hardex.tasks.numbers import parse_number
from hardex.tasks.released import released_aime_correct
from hardex.tasks.rows import config_specs, field, finish, read_rows

PARTS = ("I", "II")


def _parts(spec: dict[str, Any]) -> list[str]:
    """The parts a spec asks for: `parts`, else the one its `config` names, else part I."""
    config = spec.get("config")
    parts = spec.get("parts") or ([config.rsplit("-", 1)[-1]] if config else ["I"])
    bad = [p for p in parts if p not in PARTS]
    if bad:
        raise DataError(f"AIME parts {bad} unknown; known: {', '.join(PARTS)}")
    return parts


class AIMETask(Task):
    """Reference = the integer answer; compared by math_equal: as numbers, else by math-verify
    (``\\frac{140}{2}``). Strict scoring: the released ``int()`` of the last box, or the completion's
    first integer when it has no box (tasks.released).

    Spec: `parts` (``["I", "II"]``; default: the part named by `config`, else ``["I"]``, the paper's
    OOD set). A `file` may hold ``{config}`` for one file per part. Ids: ``{id_prefix}-{part}-{row}``,
    prefix ``aime2025``; metadata column `part`.
    """

    name = "aime2025"
    answer_kind = "number"
    columns = ("question", "answer")

    def sources(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """One config per part, of the hub's `test` split unless the spec names another."""
        return config_specs({"split": "test", **spec}, [f"AIME2025-{p}" for p in _parts(spec)])

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        prefix = spec.get("id_prefix") or "aime2025"
        records, wheres, origin = [], [], ""
        for part, source in zip(_parts(spec), self.sources(spec)):
            rows, origin = read_rows(source, root, self)
            for i, row in enumerate(rows):
                where = f"{origin}: row {i}"
                raw = field(row, "answer", origin, i)
                value = parse_number(raw)
                if value is None or not value.is_integer() or not 0 <= value <= 999:
                    raise DataError(f"{where}: answer {raw!r} is not an integer 0-999")
                records.append(
                    {
                        "id": f"{prefix}-{part}-{i}",
                        "question": field(row, "question", origin, i),
                        "answer": str(int(value)),
                        "part": part,
                    }
                )
                wheres.append(where)
        return finish(records, wheres, origin)

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        return math_equal(predicted, reference)

    def released_correct(self, completion: str, reference: str) -> bool:
        return released_aime_correct(completion, reference)
