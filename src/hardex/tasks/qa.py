"""Your own data: any dataset of questions with short reference answers, from the hub or a file.

Split spec: `fields` maps the roles to the dataset's column names: `question` and `answer`
(default: columns of those names), optionally `id` (else ``{id_prefix}-{row}``, prefix
``qa-{split}``) and `tier` (a difficulty label, for accuracy per tier). `start` / `stop` take a
slice of the rows.

The reference is the answer column's last ``\\boxed{}`` when it has one (MATH-style solutions),
the text after ``####`` when it has that (GSM8K-style), else the whole value. A completion is
judged by its last ``\\boxed{}``: a numeric reference compares as a number (``1,000`` = ``1000.0``),
any other by MATH's math_equal: one that looks mathematical (digits, operators, LaTeX) by
math-verify's equivalence, any other as text with case, spacing, ``$``, ``\\text{}``, a trailing
period and parentheses around a single letter ignored (``(B)`` = ``b``). Text is never given to
math-verify: it would read ``ab`` and ``ba`` as equal products of symbols.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import DataError, Task, last_boxed, last_number
from hardex.tasks.math import math_equal
from hardex.tasks.numbers import is_plain_number, same_number
from hardex.tasks.rows import column_name, field, finish, read_rows

ROLES = ("question", "answer", "id", "tier")


def reference_from(value: str) -> str:
    """The short reference answer inside an answer column's value (see the module docstring)."""
    boxed = last_boxed(value)
    if boxed is not None:
        return boxed
    if "####" in value:
        return value.rsplit("####", 1)[1].strip()
    return value.strip()


def qa_equal(predicted: str, reference: str) -> bool:
    """Whether a boxed prediction matches the reference: a number only as that number, else math_equal."""
    if is_plain_number(reference):
        return same_number(predicted, reference)
    return math_equal(predicted, reference)


class QATask(Task):
    """Questions with short answers in any schema; `fields` names the columns (module docstring)."""

    name = "qa"
    answer_kind = "text"
    columns = ROLES

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        fields = {"question": "question", "answer": "answer", **(spec.get("fields") or {})}
        rows, origin = read_rows(spec, root, self)  # renames the columns `fields` names to the roles
        if "question" not in rows[0] or "answer" not in rows[0]:
            have = ", ".join(sorted(column_name(rows[0], c) for c in rows[0]))
            raise DataError(f"{origin}: no column {fields['question']!r} or {fields['answer']!r} (columns: {have}); "
                            f"name yours with fields: {{question: ..., answer: ...}}")
        # ids name the config split: two splits of a dataset never share one, whatever their files are called
        split = spec.get("name") or spec.get("split") or (Path(spec["file"]).stem if spec.get("file") else "train")
        prefix = spec.get("id_prefix") or f"qa-{split}"
        records, wheres = [], []
        for i in range(len(rows))[spec.get("start"):spec.get("stop")]:
            row, where = rows[i], f"{origin}: row {i}"
            answer = reference_from(field(row, "answer", origin, i))
            if not answer:
                raise DataError(f"{where}: empty answer in {fields['answer']!r}")
            rec = {
                "id": str(field(row, "id", origin, i)) if "id" in fields else f"{prefix}-{i}",
                "question": field(row, "question", origin, i),
                "answer": answer,
            }
            if "tier" in fields:
                tier = row.get("tier")
                rec["tier"] = None if tier is None else str(tier)
            records.append(rec)
            wheres.append(where)
        return finish(records, wheres, origin)

    def unboxed_answer(self, completion: str, reference: str) -> str | None:
        """Flexible scoring reads the last number of an unboxed completion where the reference is a number."""
        return last_number(completion) if is_plain_number(reference) else None

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        return qa_equal(predicted, reference)
