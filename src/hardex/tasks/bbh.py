"""BIG-Bench Hard tracking_shuffled_objects (hub `lukaemon/bbh`, split `test`; 250 items per config).

People start with one object each, swap pairs in sequence, and the question asks what one person
ends with; options (A)-(G) are the objects in start order, the target looks like ``(C)``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import BOX_INSTRUCTION, DataError, Task, last_boxed
from hardex.tasks.hub_formats import LETTERS, OBJECT_WORDS, object_counts
from hardex.tasks.released import released_shuffled_objects_correct
from hardex.tasks.rows import config_specs, field, finish, read_rows

#: the prompt's example box; a completion that echoes it has not answered (see ShuffledObjectsTask.extract)
EXAMPLE = "e.g. \\boxed{(A)}"
HINT = f"Write the letter of the correct option inside the box, {EXAMPLE}."


def option_letter(text: str) -> str | None:
    """The option letter an answer names: ``(C)``, ``C``, ``(c)``, ``C)``, ``(C) red ball``, ``\\text{(C)}``.

    A bare letter must be upper case and stand alone or before ``)``, ``.``, ``:``, so that words
    (``A red ball``, ``a``) are not read as options.
    """
    t = re.sub(r"\\(?:text|textbf|mathrm)\s*\{([^{}]*)\}", r"\1", text).replace("$", "").strip()
    m = re.match(r"\(\s*([A-Ga-g])\s*\)", t) or re.match(rf"([{LETTERS}])\s*(?:[).:]|$)", t)
    return m.group(1).upper() if m else None


def _objects(spec: dict[str, Any]) -> list[int]:
    try:
        return object_counts(spec)
    except ValueError as e:
        raise DataError(str(e)) from None


class ShuffledObjectsTask(Task):
    """Answer = the option letter in parentheses; tier = number of objects.

    Spec: `objects` (3, 5, 7 or a list: one hub config each; a local `file` may hold ``{config}``),
    `start`/`stop` (slice of rows within each config; the released code used rows 0-124 of the
    seven-object config as pool and 125-249 as test). Ids ``bbh-tso{n}-{row}``, row = position in the
    full config, so a slice keeps the ids of the whole. Metadata: `n_objects`, `answer_text`. The
    released code's files name the columns `question` and `answer`: read them with
    ``fields: {input: question, target: answer}``. Strict scoring: the last box is exactly the
    target string (tasks.released).
    """

    name = "shuffled_objects"
    #: the box instruction and the letter hint on a line of its own (so strip_echo drops it)
    instruction = f"{BOX_INSTRUCTION}\n{HINT}"
    answer_kind = "choice"
    columns = ("input", "target")

    def sources(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """One config per object count, of the hub's `test` split unless the spec names another."""
        configs = [f"tracking_shuffled_objects_{OBJECT_WORDS[n]}_objects" for n in _objects(spec)]
        return config_specs({"split": "test", **spec}, configs)

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        records, wheres, origin = [], [], ""
        for n, source in zip(_objects(spec), self.sources(spec)):
            rows, origin = read_rows(source, root, self)
            for i in range(len(rows))[spec.get("start") : spec.get("stop")]:
                where = f"{origin}: row {i}"
                question = field(rows[i], "input", origin, i)
                target = field(rows[i], "target", origin, i).strip()
                options = dict(re.findall(r"^\(([A-G])\) (.+)$", question, flags=re.M))
                if len(options) != n:
                    raise DataError(f"{where}: {len(options)} options, expected {n} for {source['config']}")
                m = re.fullmatch(r"\(([A-G])\)", target)
                if not m or m.group(1) not in options:
                    raise DataError(f"{where}: target {target!r} is not an option letter like (C)")
                records.append(
                    {
                        "id": f"bbh-tso{n}-{i}",
                        "question": question,
                        "answer": target,
                        "tier": n,
                        "n_objects": n,
                        "answer_text": options[m.group(1)],
                    }
                )
                wheres.append(where)
        return finish(records, wheres, origin)

    def extract(self, completion: str) -> str | None:
        """Last box, ignoring the prompt's example ``\\boxed{(A)}`` even when no prompt was given."""
        return last_boxed(completion.replace(EXAMPLE, " "))

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        letter = option_letter(predicted)
        return letter is not None and letter == option_letter(reference)

    def released_correct(self, completion: str, reference: str) -> bool:
        return released_shuffled_objects_correct(completion, reference)
