"""Hendrycks MATH: competition problems in seven subjects and five difficulty levels.

Reads the original schema (`problem`, `solution`, `level` as ``"Level 3"``, `type`), as in
`EleutherAI/hendrycks_math` (one hub config per subject) and the per-problem JSON files, and the
flattened schema of e.g. `nlile/hendrycks-MATH-benchmark` (`subject`, integer `level`, `answer`,
`unique_id`).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import DataError, Task, last_boxed
from hardex.tasks.hub_formats import PER_SUBJECT_HUBS, SUBJECTS, subject_key
from hardex.tasks.numbers import is_plain_number, parse_number, same_number
from hardex.tasks.rows import config_specs, field, finish, read_rows


def parse_level(level: Any, where: str) -> int | None:
    """Tier from ``"Level 3"`` or ``3``. A handful of MATH train problems say ``"Level ?"``: their tier
    is null (they drop out of any `levels` filter) rather than an error, so full loads still work."""
    if isinstance(level, int) and 1 <= level <= 5:
        return level
    text = str(level).strip()
    if text == "Level ?":
        return None
    m = re.fullmatch(r"(?:Level\s*)?([1-5])", text)
    if not m:
        raise DataError(f"{where}: level {level!r} is not 'Level 1' ... 'Level 5'")
    return int(m.group(1))


#: a reference with none of these characters is text, never given to math-verify: it would read
#: ``ab`` and ``ba`` as equal products of symbols
_MATHY = re.compile(r"[0-9\\^_{}=+\-*/<>]")


def _normalized(answer: str) -> str:
    """Loose textual form for the fallback comparison: no delimiters, text wrappers or spacing, except a
    space between two digits (``1 2`` is not ``12``)."""
    t = re.sub(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}", r"\1", answer)
    t = t.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("^{\\circ}", "").replace("^\\circ", "")
    for noise in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\$", "$"):
        t = t.replace(noise, "")
    t = re.sub(r"(?<!\d) | (?!\d)", "", re.sub(r"\s+", " ", t))
    return t.rstrip(".")


def normalized_text(answer: str) -> str:
    """The loose form case-folded, for text answers; a letter in parentheses is the letter: "(b)" -> "b"."""
    t = _normalized(answer).casefold()
    m = re.fullmatch(r"[(\[]([a-z])[)\]]", t)
    return m.group(1) if m else t


def math_equal(predicted: str, reference: str) -> bool:
    """Equivalence of a prediction to a reference, by the reference's kind.

    A plain-number reference compares as a number when the prediction is one (``\\text{5 cm}`` = 5,
    see numbers.parse_number); a text reference (no digits, operators or LaTeX) as loose text
    (normalized_text); any other by math-verify, falling back to loose string equality.

    Never raises. math-verify's timeouts use signal.alarm, which only works in the main thread, so
    elsewhere it runs without a timeout.
    """
    if not predicted.strip():
        return False
    if is_plain_number(reference) and parse_number(predicted) is not None:
        return same_number(predicted, reference)
    if not _MATHY.search(reference):
        return normalized_text(predicted) == normalized_text(reference)
    try:
        from math_verify import parse, verify

        timeout = 5 if threading.current_thread() is threading.main_thread() else None
        gold = parse(f"\\boxed{{{reference}}}", parsing_timeout=timeout)
        pred = parse(f"\\boxed{{{predicted}}}", parsing_timeout=timeout)
        if gold and pred and verify(gold, pred, timeout_seconds=timeout):
            return True
    except Exception:  # a parser failure is not a verdict; the string comparison decides
        pass
    return _normalized(predicted) == _normalized(reference)


def _per_subject(spec: dict[str, Any]) -> bool:
    """Whether a split is read one subject at a time: a file per subject (``{config}``), or a hub dataset
    split by subject (PER_SUBJECT_HUBS) without a config named."""
    return "{config}" in str(spec.get("file") or "") or (
        not spec.get("file") and not spec.get("config") and spec.get("hub") in PER_SUBJECT_HUBS
    )


class MATHTask(Task):
    """Reference = the last ``\\boxed{}`` of the solution; tier = level 1-5; equivalence by math_equal.

    Spec options: `levels` (list of 1-5), `subjects` (names or config names), `numeric_only` (keep
    problems whose reference is a plain number, see numbers.is_plain_number). A `file` may hold
    ``{config}`` to read one file per subject; a per-subject hub without `config` loads every
    (requested) subject. Ids: the source's `unique_id` when present, else
    ``{id_prefix}-{row}`` (prefix ``math-{split}``, plus ``-{config}`` for per-subject loads).
    """

    name = "math"
    answer_kind = "math"
    columns = ("problem", "solution", "answer", "level", "type", "subject", "unique_id")

    def sources(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """One config per subject (`subjects`, else all) where the dataset is split by subject, else the spec."""
        if not _per_subject(spec):
            return [spec]
        return config_specs(spec, [subject_key(s) for s in spec.get("subjects") or []] or list(SUBJECTS.values()))

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        wanted = [subject_key(s) for s in spec.get("subjects") or []]
        unknown = sorted(set(wanted) - set(SUBJECTS.values()))
        if unknown:
            raise DataError(f"subjects {unknown} unknown; known: {', '.join(SUBJECTS.values())}")
        levels = spec.get("levels")
        if levels is not None and not set(levels) <= {1, 2, 3, 4, 5}:
            raise DataError(f"levels {levels!r}: expected values among 1-5")

        per_subject = _per_subject(spec)
        sources = self.sources(spec)
        # a filtered split keeps the ids of the whole
        split = spec.get("split") or (Path(spec["file"]).stem if spec.get("file") else "train")
        prefix = spec.get("id_prefix") or f"math-{split}"

        records, wheres, origin = [], [], ""
        for source in sources:
            rows, origin = read_rows(source, root, self)
            stem = f"{prefix}-{source['config']}" if per_subject else prefix
            for i, row in enumerate(rows):
                where = f"{origin}: row {i}"
                solution = field(row, "solution", origin, i)
                answer = last_boxed(solution) or str(row.get("answer") or "").strip()
                if not answer:
                    raise DataError(f"{where}: solution has no \\boxed{{}} answer")
                subject = row.get("type") or row.get("subject")
                if not subject:
                    raise DataError(f"{where}: no 'type' (subject)")
                records.append(
                    {
                        "id": str(row.get("unique_id") or f"{stem}-{i}"),
                        "question": field(row, "problem", origin, i),
                        "answer": answer,
                        "tier": parse_level(row.get("level"), where),
                        "subject": subject,
                        "solution": solution,
                        "numeric": is_plain_number(answer),
                    }
                )
                wheres.append(where)
        df = finish(records, wheres, origin)

        if levels is not None:
            df = df.filter(pl.col("tier").is_in(list(levels)))
        if wanted:
            df = df.filter(pl.col("subject").map_elements(subject_key, return_dtype=pl.Utf8).is_in(wanted))
        if spec.get("numeric_only"):
            df = df.filter(pl.col("numeric"))
        if df.height == 0:
            raise DataError(
                f"{origin}: no rows left after filters levels={levels} subjects={wanted or None} "
                f"numeric_only={bool(spec.get('numeric_only'))}"
            )
        return df

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        return math_equal(predicted, reference)
