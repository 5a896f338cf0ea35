"""Stand-in rows for hub datasets, in each hub dataset's own file format, generated offline.

A rehearsal swaps every ``hub:`` split spec for a ``file:`` spec read by the family's real loader, so
the format checks, filters (`levels`, `numeric_only`, `rows` ...) and ids run exactly as on the hub
data. No network is available, so the rows are made by code, seeded by (hub, config, split): the
same call writes the same bytes, and two splits of a dataset get different questions (the workflow
refuses a pool that shares questions with a benchmark).

Generation is prefix-stable: row k depends only on the seed and the rows before it. A file that must
grow (a later spec lists a higher row) is rewritten with its first rows unchanged, so a split that
already picked rows of it still reads the same items.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from pathlib import Path
from typing import Callable

from hardex.tasks.hub_formats import LETTERS, OBJECT_WORDS, SUBJECTS, object_counts, render_bbh, subject_key
from hardex.tasks.rows import listed, read_local

SUPPORTED_HUBS: tuple[str, ...] = (
    "openai/gsm8k", "lukaemon/bbh", "opencompass/AIME2025", "EleutherAI/hendrycks_math",
)
#: the split a loader reads when the spec names none (tasks.bbh and tasks.aime default to "test")
_DEFAULT_SPLIT = {"shuffled_objects": "test", "aime2025": "test"}


class SampleError(ValueError):
    """A split spec this module cannot make sample rows for."""


def sample_split(family: str, spec: dict, out_dir: Path, n_rows: int) -> dict:
    """Write sample rows for one hub split spec under `out_dir` and return the spec that reads them.

    The returned spec is `spec` without `hub`, with `file` (absolute; a template holding ``{config}``
    where the loader reads one file per config) and every other key kept. Files live at
    ``<out_dir>/<hub>/<config>/<split>.<ext>``: the file's stem is the split, as the loaders name ids
    after it when a spec gives no `split`, and two specs of one hub config and split share one file,
    as bbh's pool and test share the rows of one config. An existing file with enough rows is reused.
    Each file holds at least `n_rows` rows, and at least max(rows) + 1 (or `stop`) where the spec
    picks rows by position.
    """
    hub = spec.get("hub")
    if hub not in SUPPORTED_HUBS:
        raise SampleError(f"no sample rows for hub dataset {hub!r}; supported: {', '.join(SUPPORTED_HUBS)}")
    split = spec.get("split") or _DEFAULT_SPLIT.get(family, "train")
    configs, per_config = _configs(hub, spec)
    count = max([n_rows, spec.get("stop") or 0] + [r + 1 for r in listed(spec.get("rows"), int, "rows") or []])
    make, question, write = _FORMATS[hub]
    root = Path(out_dir).absolute() / hub.replace("/", "__")
    name = f"{split}.json" if write is _write_examples else f"{split}.jsonl"
    for config in configs:
        path = root / config / name
        if path.exists() and len(read_local(path)) >= count:
            continue
        rows = _generate(f"{hub}|{config}|{split}", split, count, lambda rng, i: make(rng, i, config), question)
        fields = spec.get("fields") or {}  # a hub named with `fields` serves those column names
        write(path, [{fields.get(k, k): v for k, v in row.items()} for row in rows])
    file = root / ("{config}" if per_config else configs[0]) / name
    return {**{k: v for k, v in spec.items() if k != "hub"}, "file": str(file)}


def _configs(hub: str, spec: dict) -> tuple[list[str], bool]:
    """The hub configs the loader reads for `spec`, and whether it reads them through a ``{config}`` file."""
    if hub == "lukaemon/bbh":
        try:
            return [f"tracking_shuffled_objects_{OBJECT_WORDS[n]}_objects" for n in object_counts(spec)], True
        except ValueError as e:
            raise SampleError(str(e)) from None
    if hub == "opencompass/AIME2025":
        parts = spec.get("parts") or ([spec["config"].rsplit("-", 1)[-1]] if spec.get("config") else ["I"])
        return [f"AIME2025-{p}" for p in parts], True
    if hub == "EleutherAI/hendrycks_math":
        configs = [spec["config"]] if spec.get("config") else [subject_key(s) for s in spec.get("subjects") or []]
        unknown = sorted(set(configs) - set(SUBJECTS.values()))
        if unknown:
            raise SampleError(f"{hub}: no config(s) {unknown}; its configs: {', '.join(SUBJECTS.values())}")
        # a spec without config reads every (requested) subject file, as math.py does for this hub
        return (configs, False) if spec.get("config") else (configs or list(SUBJECTS.values()), True)
    return [spec.get("config") or "main"], False  # openai/gsm8k: one file per split


def _generate(seed: str, split: str, count: int, make: Callable[[random.Random, int], dict],
              question: str) -> list[dict]:
    """`count` rows with distinct questions, drawn one after another (so prefix-stable).

    A question whose hash is even belongs to train, any other to the other splits (the hubs here have
    train and test only): different seeds alone make a shared question unlikely, this makes it impossible.
    """
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < count:
        row = make(rng, len(rows))
        text = row[question]
        if text not in seen and (hashlib.sha256(text.encode()).digest()[0] % 2 == 0) == (split == "train"):
            seen.add(text)
            rows.append(row)
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    _replace(path, "".join(json.dumps(row) + "\n" for row in rows))


def _write_examples(path: Path, rows: list[dict]) -> None:
    """BIG-Bench's task file: ``{"examples": [...]}``."""
    _replace(path, json.dumps({"examples": rows}, indent=1) + "\n")


def _replace(path: Path, text: str) -> None:
    """Write via a temporary file and a rename, so a loader in another job never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --- openai/gsm8k -------------------------------------------------------------------------------

_NAMES = ["Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Mark", "Alexis", "Tina", "Randy",
          "Joy", "Ken", "Maila", "Carla", "Ravi", "Greta", "Hassan", "Ivy", "Omar", "Priya"]
_THINGS = ["apples", "stickers", "marbles", "books", "cookies", "pencils", "stamps", "shells", "cards", "coins"]


def _gsm8k(rng: random.Random, i: int, config: str) -> dict:
    """A word problem of 1-6 steps (cycling with the row, so the loader's step tiers spread), one
    solution line per step with GSM8K's ``<<a+b=c>>`` calculator notes, then ``#### answer``."""
    name, things, value = rng.choice(_NAMES), rng.choice(_THINGS), rng.randint(10, 500)
    sentences, lines = [f"{name} has {value} {things}."], []
    for _ in range(1 + i % 6):
        kinds = ["buy"] + ["give"] * (value > 1) + ["double"] * (value <= 2000) + ["half"] * (value % 2 == 0)
        kind = rng.choice(kinds)
        if kind == "buy":
            b = rng.randint(5, 200)
            new = value + b
            sentences.append(f"Then {name} buys {b} more.")
            lines.append(f"After buying {b} more, {name} has {value} + {b} = <<{value}+{b}={new}>>{new} {things}.")
        elif kind == "give":
            b = rng.randint(1, value - 1)
            new = value - b
            sentences.append(f"Then {name} gives {b} of them to a friend.")
            lines.append(f"After giving {b} away, {name} has {value} - {b} = <<{value}-{b}={new}>>{new} {things}.")
        elif kind == "double":
            new = value * 2
            sentences.append(f"Then {name} doubles the collection.")
            lines.append(f"Doubling gives {value} x 2 = <<{value}*2={new}>>{new} {things}.")
        else:
            new = value // 2
            sentences.append(f"Then {name} gives half of the {things} to a cousin.")
            lines.append(f"Half of {value} is {value} / 2 = <<{value}/2={new}>>{new}, so {name} keeps {new}.")
        value = new
    question = " ".join(sentences) + f" How many {things} does {name} have now?"
    return {"question": question, "answer": "\n".join(lines + [f"#### {value}"])}


# --- lukaemon/bbh -------------------------------------------------------------------------------

_PEOPLE = ["Alice", "Bob", "Claire", "Dave", "Eve", "Fred", "Gertrude"]
_COLOURS = ["red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "white", "black"]
#: option texts of each BBH story variant (bbh.render_bbh), as the real task files name them
_ITEMS = {
    "ball": [f"{c} ball" for c in _COLOURS],
    "present": [f"{c} present" for c in _COLOURS],
    "dance": ["Helga", "Izzi", "Jamie", "Karl", "Lola", "Melissa", "Ophelia", "Patrick", "Rodrigo", "Sam"],
    "soccer": ["benchwarmer", "center midfielder", "cheerleader", "fullback", "goalkeeper", "left midfielder",
               "left winger", "right midfielder", "right winger", "striker"],
    "book": ["Catch-22", "Frankenstein", "Hound of the Baskervilles", "Lolita", "Moby Dick",
             "The Fellowship of the Ring", "The Great Gatsby", "The Odyssey", "The Pearl", "Ulysses"],
}


def _bbh(rng: random.Random, i: int, config: str) -> dict:
    """One item in BBH's exact wording (bbh.render_bbh): n people, n swaps as in the real configs,
    the target the option the asked person ends up holding."""
    n = next(k for k, word in OBJECT_WORDS.items() if f"_{word}_" in config)
    variant = rng.choice(sorted(_ITEMS))
    swaps = [tuple(rng.sample(range(n), 2)) for _ in range(n)]
    text, _, answer = render_bbh(_PEOPLE[:n], rng.sample(_ITEMS[variant], n), swaps, rng.randrange(n), variant)
    return {"input": text, "target": f"({LETTERS[answer]})"}


# --- opencompass/AIME2025 -----------------------------------------------------------------------


def _aime(rng: random.Random, i: int, config: str) -> dict:
    """An AIME-style question whose answer is an integer 0-999, given as text as the hub does."""
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randint(2, 999), rng.randint(2, 99)
        return {"question": f"Find the remainder when ${a}^{{{b}}}$ is divided by $1000$.",
                "answer": str(pow(a, b, 1000))}
    if kind == 1:
        n = rng.randint(100, 99999)
        total = sum(d + n // d * (d * d != n) for d in range(1, math.isqrt(n) + 1) if n % d == 0)
        return {"question": f"Let $N$ be the sum of all positive divisors of ${n}$. Find the remainder when $N$ is "
                            "divided by $1000$.", "answer": str(total % 1000)}
    s = rng.randint(3, 1000)
    return {"question": f"Find the number of ordered pairs of positive integers $(x, y)$ with $x + y = {s}$.",
            "answer": str(s - 1)}


# --- EleutherAI/hendrycks_math ------------------------------------------------------------------


def _fraction(rng: random.Random) -> tuple[int, int]:
    """A reduced fraction p/q that is not an integer."""
    while True:
        p, q = rng.randint(1, 300), rng.randint(2, 40)
        g = math.gcd(p, q)
        if q // g > 1:
            return p // g, q // g


def _math(rng: random.Random, i: int, config: str) -> dict:
    """A problem of the config's subject. Levels cycle 1-5 (every level within five rows), and rows
    5-9 of every 15 have a fraction answer, so `levels` and `numeric_only` each keep a part."""
    if (i // 5) % 3 == 1:
        p, q = _fraction(rng)
        answer, k = f"\\frac{{{p}}}{{{q}}}", rng.randint(2, 12)
        problem, solution = rng.choice([
            (f"Simplify $\\frac{{{p * k}}}{{{q * k}}}$.",
             f"Both ${p * k}$ and ${q * k}$ are divisible by ${k}$, so the fraction is $\\boxed{{{answer}}}$."),
            (f"Solve ${q}x = {p}$ for $x$. Express your answer as a common fraction.",
             f"Dividing both sides by ${q}$ gives $x = \\boxed{{{answer}}}$."),
        ])
    else:
        a, b, c = rng.randint(2, 999), rng.randint(2, 999), rng.randint(2, 99)
        problem, solution = rng.choice([
            (f"If $x + {a} = {b}$, what is the value of $x$?",
             f"Subtracting ${a}$ from both sides gives $x = {b} - {a} = \\boxed{{{b - a}}}$."),
            (f"Compute ${a} \\cdot {c} + {b}$.",
             f"We have ${a} \\cdot {c} = {a * c}$, so the sum is ${a * c} + {b} = \\boxed{{{a * c + b}}}$."),
            (f"What is the remainder when ${a * b}$ is divided by ${c}$?",
             f"Since ${a * b} = {c} \\cdot {a * b // c} + {a * b % c}$, the remainder is $\\boxed{{{a * b % c}}}$."),
        ])
    subject = next(name for name, key in SUBJECTS.items() if key == config)
    return {"problem": problem, "level": f"Level {1 + i % 5}", "type": subject, "solution": solution}


#: hub -> (row maker (rng, row, config) -> row, the column that must be distinct, file writer)
_FORMATS = {
    "openai/gsm8k": (_gsm8k, "question", _write_jsonl),
    "lukaemon/bbh": (_bbh, "input", _write_examples),
    "opencompass/AIME2025": (_aime, "question", _write_jsonl),
    "EleutherAI/hendrycks_math": (_math, "problem", _write_jsonl),
}
