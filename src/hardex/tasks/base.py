"""The task contract: load splits, build prompts, extract answers, judge correctness.

Every split is a polars DataFrame with at least the columns
  id (str, unique), question (str), answer (str, the reference answer in canonical form)
and optionally `tier` (int or str: the difficulty tier used for stratified accuracy) plus any
task metadata. Tasks are stateless; a split spec (a dict from the config) says where rows come from.
"""

from __future__ import annotations

import hashlib
import re
import string
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

BOX_INSTRUCTION = "Put your final answer within \\boxed{}."
#: what a prompt template may name: the example's question and the family's instruction (Task.instruction)
PLACEHOLDERS = ("question", "instruction")
#: today's user turn, the default of tasks.<task>.prompt_template
DEFAULT_TEMPLATE = "{question}\n{instruction}"

REQUIRED_COLUMNS = ("id", "question", "answer")

# fraction-of-hash ranges that make a generated family's splits disjoint (pool/test/ood/sft are its only splits):
# a problem belongs to the split its canonical form's hash falls in (hardex.tasks.synthetic, .reasoning_gym)
SPLIT_BUCKETS: dict[str, tuple[float, float]] = {
    "pool": (0.0, 0.5),
    "test": (0.5, 0.7),
    "ood": (0.7, 0.8),
    "sft": (0.8, 1.0),
}


def split_bucket(text: str) -> float:
    """Where a problem's canonical form falls in [0, 1): the split (SPLIT_BUCKETS) that may hold it."""
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big") / 2**64


class DataError(ValueError):
    """A dataset file or split that cannot be used; the message names the file, row and reason."""


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, braces balanced.

    Returns None when there is no complete box. Nested braces (``\boxed{\frac{1}{2}}``) are kept.
    """
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            c = text[i]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
        # unbalanced (truncated) box: try the one before it
    return None


# a number as models write one: digits with optional thousands commas and decimals, an optional sign
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def last_number(text: str) -> str | None:
    """The last number written in a text, or None: lm-evaluation-harness's "flexible extract" for
    answers stated in words ("so 8 + 6 = 14, the answer is 14.")."""
    found = _NUMBER.findall(text.replace("\u2212", "-"))
    return found[-1] if found else None


def strip_echo(completion: str, prompt: str | None) -> str:
    """Remove an echoed prompt (or its instruction) from a completion before reading an answer.

    Models sometimes repeat the question; a scorer must never read the prompt's own example
    (e.g. ``\\boxed{(A)}``) as the model's answer.
    """
    if prompt:
        completion = completion.replace(prompt, " ")
        # a partial echo usually still contains the instruction lines verbatim
        for line in prompt.splitlines():
            line = line.strip()
            if len(line) >= 20 and "boxed" in line:
                completion = completion.replace(line, " ")
    return completion.replace(BOX_INSTRUCTION, " ")


def template_error(template: str) -> str | None:
    """Why a prompt template cannot be used, or None. It is read as Python's str.format reads it (a literal
    brace is written twice, ``\\boxed{{}}``) and must name ``{question}``; ``{instruction}`` is optional,
    any other field is refused."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as e:  # a single brace: "Single '}' encountered in format string"
        return f"{e} (write a literal brace twice: {{{{ and }}}})"
    fields = [name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
              for _, name, spec, conversion in parsed if name is not None]
    unknown = [f for f in fields if f not in PLACEHOLDERS]
    if unknown:
        return (f"unknown placeholder {{{unknown[0]}}}; known: {{question}}, {{instruction}} "
                f"(write a literal brace twice: \\boxed{{{{}}}})")
    if "question" not in fields:
        return "the template never names {question}"
    return None


@dataclass(frozen=True)
class PromptFormat:
    """How a task asks: the user turn (`template`, with the question and the family's instruction) and
    the chat's system message (`system`, None for none): tasks.<task>.prompt_template and system_prompt."""

    template: str = DEFAULT_TEMPLATE
    system: str | None = None

    def __post_init__(self) -> None:
        if error := template_error(self.template):
            raise ValueError(f"prompt template {self.template!r}: {error}")

    @classmethod
    def of(cls, settings: dict[str, Any] | PromptFormat | None) -> PromptFormat:
        """The format of a rule's prompt settings ({"prompt_template": ..., "system_prompt": ...}, keys
        absent where the config leaves them out; None or {} is today's prompt)."""
        if isinstance(settings, PromptFormat):
            return settings
        settings = settings or {}
        return cls(settings.get("prompt_template") or DEFAULT_TEMPLATE, settings.get("system_prompt"))

    def user_text(self, question: str, instruction: str) -> str:
        return self.template.format(question=question, instruction=instruction)


class Task(ABC):
    """One task family. Subclasses set `name` and implement `load_split`, `extract`, `is_equivalent`.

    `scoring` picks how completions are judged: ``"lenient"`` (extract, then is_equivalent),
    ``"flexible"`` (as lenient, but a completion with no box is read by `unboxed_answer`: small
    instruction-tuned models state their answer in their own words far more often than in a box), or
    ``"strict"`` (released_correct: paper 1's released scorer, see tasks.released), which only the
    families in tasks.STRICT_FAMILIES implement. Build tasks with tasks.get_task.
    """

    name: str = ""
    #: "number" | "choice" | "math": how answers compare; informs the report and the vLLM backend
    answer_kind: str = "number"
    #: the source columns the loader reads; a split's `fields` renames the user's columns to these
    columns: tuple[str, ...] = ()
    #: where and how to write the answer: the line after the question (a template's {instruction})
    instruction: str = BOX_INSTRUCTION
    #: the prompt's template and system message (tasks.get_task gives a task the config's)
    prompt_format: PromptFormat = PromptFormat()

    def __init__(self, scoring: str = "lenient") -> None:
        self.scoring = scoring

    @abstractmethod
    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        """Rows of one split described by `spec` (hub id/config/split, a local file, or generator args)."""

    def sources(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """What `load_split` reads for `spec`, one spec per hub config or local file: the spec itself, unless
        the family reads several configs of its hub dataset (hardex.fetch caches exactly these)."""
        return [spec]

    def problem_key(self, question: str) -> str | None:
        """The canonical form of the problem a question poses, or None where the family defines none: two
        questions with one key are the same problem in other words or order (hardex.tasks.synthetic).
        Splits of a generated family are disjoint by it, and the overlap check compares it."""
        return None

    def prompt(self, row: dict[str, Any]) -> str:
        """The user-turn text for one example: by default the question, then the family's instruction
        (`prompt_format`'s template; its system message is the renderer's, hardex.models.render_prompt)."""
        return self.prompt_format.user_text(row["question"], self.instruction)

    def extract(self, completion: str) -> str | None:
        """The answer a completion commits to, or None (then it is wrong, never an error)."""
        return last_boxed(completion)

    @abstractmethod
    def is_equivalent(self, predicted: str, reference: str) -> bool:
        """Whether an extracted answer matches the reference answer."""

    def released_correct(self, completion: str, reference: str) -> bool:
        """Paper 1's released scorer on the completion alone (scoring "strict")."""
        raise NotImplementedError(f"task family {self.name!r} has no released scorer")

    def unboxed_answer(self, completion: str, reference: str) -> str | None:
        """Flexible scoring's reading of a completion that boxes nothing: its last number where the
        reference is a number, its last parenthesised option letter for a choice, else None."""
        if self.answer_kind == "choice":
            letters = re.findall(r"\(([A-G])\)", completion)
            return f"({letters[-1]})" if letters else None
        return last_number(completion) if self.answer_kind == "number" else None

    def answer(self, completion: str, reference: str, prompt: str | None = None) -> str | None:
        """The answer a completion commits to under this task's scoring (lenient or flexible), or None."""
        completion = strip_echo(completion, prompt)
        predicted = self.extract(completion)
        if self.scoring == "flexible" and not predicted:  # an empty box, as in an echoed instruction, says nothing
            predicted = self.unboxed_answer(completion, reference)
        return predicted

    #: the version of the package whose verifiers score this family, where one does (hardex.tasks.reasoning_gym):
    #: part of the scorer's identity, so that an upgrade reruns the work it scores
    scorer_version: str | None = None

    def score(self, completion: str, reference: str, prompt: str | None = None) -> float:
        """The reward of one completion before `grpo.reward_scale`, in [0, 1]: 1 for a correct one, else 0; a family
        whose verifier gives partial credit (reasoning_gym) returns its score, and a pass is a score of 1."""
        return float(self.is_correct(completion, reference, prompt))

    def is_correct(self, completion: str, reference: str, prompt: str | None = None) -> bool:
        """Binary correctness of one completion: the reward and the probe/eval outcome.

        Strict scoring ignores `prompt`: the released scorer reads the completion as it is.
        """
        if self.scoring == "strict":
            return self.released_correct(completion, reference)
        predicted = self.answer(completion, reference, prompt)
        if predicted is None:
            return False
        try:
            return bool(self.is_equivalent(predicted, reference))
        except Exception:  # a malformed prediction is a wrong answer, not a crash
            return False


def check_split(df: pl.DataFrame, origin: str) -> pl.DataFrame:
    """Validate a loaded split: required columns, non-empty, unique ids, no empty question/answer."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{origin}: missing column(s) {', '.join(missing)}")
    if df.height == 0:
        raise DataError(f"{origin}: no rows")
    df = df.with_columns(pl.col("id").cast(pl.Utf8), pl.col("answer").cast(pl.Utf8))
    dup = df.filter(pl.col("id").is_duplicated())
    if dup.height:
        raise DataError(f"{origin}: duplicate id {dup['id'][0]!r}")
    for col in ("question", "answer"):
        bad = df.with_row_index("_row").filter(
            pl.col(col).is_null() | (pl.col(col).cast(pl.Utf8).str.strip_chars() == "")
        )
        if bad.height:
            raise DataError(f"{origin}: row {bad['_row'][0]} (id {bad['id'][0]!r}) has no {col}")
    return df
