"""Offline synthetic task families with a difficulty knob, for the embedded default and for tests.

- `arith`: multi-step arithmetic (a stand-in for GSM8K). Difficulty = number of operations.
- `addition`: "What is a + b?", difficulty = digits of each operand: one-digit sums are what a small
  pretrained model (SmolLM2-135M) solves some of the time, two-digit sums it rarely does, so its pass
  rates over a pool of both spread from 0 to 1.
- `swaps`: object-swap tracking (a stand-in for BIG-Bench Hard tracking_shuffled_objects).
  Difficulty = number of swaps; `people` sets how many hold objects. `style: bbh` renders the
  exact BIG-Bench Hard wording and (A)..(G) options, so real models can be probed on fresh items.

Each family's harder out-of-distribution variant (more steps / more people) plays AIME's role: it is
just a split with a higher difficulty range. Every row carries a worked `solution` (chain of thought
ending in the boxed answer) used only to warm-start the tiny built model.

Splits of one dataset are disjoint by construction: an item belongs to the split whose hash bucket
its question falls in (see SPLIT_BUCKETS), so each split is generated alone and no split can leak
into another, whatever their seeds.
"""

from __future__ import annotations

import hashlib
import math
import random
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import DataError, Task, check_split
from hardex.tasks.bbh import option_letter, render_bbh
from hardex.tasks.numbers import same_number
from hardex.tasks.rows import check_fields

# fraction-of-hash ranges that make splits disjoint (pool/test/ood/sft are the only synthetic splits)
SPLIT_BUCKETS: dict[str, tuple[float, float]] = {
    "pool": (0.0, 0.5),
    "test": (0.5, 0.7),
    "ood": (0.7, 0.8),
    "sft": (0.8, 1.0),
}
PEOPLE = ["Alice", "Bob", "Claire", "Dave", "Eve", "Fred", "Gertrude"]
COLOURS = ["red", "blue", "green", "white", "black", "pink", "brown"]
LETTERS = "ABCDEFG"
MAX_VALUE = 30
# generated BIG-Bench Hard variants: coloured objects of one kind
BBH_OBJECT_NOUN = {"ball": "ball", "present": "present"}


def _bucket(text: str) -> float:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "big") / 2**64


class _SyntheticTask(Task):
    """Shared split generation: seeded rejection sampling into the split's hash bucket."""

    family_prefix = ""

    def make_item(self, rng: random.Random, difficulty: int, spec: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        """How many different questions `make_item` can write at this difficulty."""
        raise NotImplementedError

    def capacity(self, spec: dict[str, Any]) -> int:
        """About how many distinct items the split's hash bucket holds: what `n` may ask for at most."""
        lo, hi = SPLIT_BUCKETS[spec["name"]]
        d_lo, d_hi = spec["difficulty"]
        return int((hi - lo) * sum(self.distinct_items(d, spec) for d in range(d_lo, d_hi + 1)))

    def load_split(self, spec: dict[str, Any], root: Path | None = None) -> pl.DataFrame:
        check_fields(self, spec.get("fields"))  # generated rows have no columns to rename
        split = spec.get("name")  # the config split name: pool, test, ood or sft
        if split not in SPLIT_BUCKETS:
            raise DataError(f"synthetic split {split!r}: must be one of {', '.join(SPLIT_BUCKETS)}")
        lo, hi = SPLIT_BUCKETS[split]
        n, seed = int(spec["n"]), int(spec["seed"])
        d_lo, d_hi = spec["difficulty"]
        rng = random.Random(f"{self.name}:{split}:{seed}")
        rows, seen, tries = [], set(), 0
        while len(rows) < n:
            tries += 1
            if tries > 200 * n + 10_000:
                raise DataError(
                    f"{self.name}/{split}: only {len(rows)} distinct items of difficulty {d_lo}-{d_hi} "
                    f"exist for this split; ask for fewer (n={n}) or widen the difficulty range"
                )
            item = self.make_item(rng, rng.randint(d_lo, d_hi), spec)
            q = item["question"]
            if q in seen or not lo <= _bucket(q) < hi:
                continue
            seen.add(q)
            rows.append({"id": f"{self.name}-{split}-{seed}-{len(rows)}", **item})
        return check_split(pl.DataFrame(rows), f"{self.name}/{split}")


class ArithTask(_SyntheticTask):
    """Start from a number, apply d operations; every intermediate value stays in 0..MAX_VALUE."""

    name = "arith"
    answer_kind = "number"

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        paths = {v: 1 for v in range(1, 10)}  # questions ending at each value, by the rules of make_item
        for _ in range(difficulty):
            nxt: dict[int, int] = {}
            for v, count in paths.items():
                ends = [v + k for k in range(1, min(5, MAX_VALUE - v) + 1)] + [v - k for k in range(1, min(5, v) + 1)]
                ends += [2 * v] if 1 <= v <= MAX_VALUE // 2 else []
                for w in ends:
                    nxt[w] = nxt.get(w, 0) + count
            paths = nxt
        return sum(paths.values())

    def make_item(self, rng: random.Random, difficulty: int, spec: dict[str, Any]) -> dict[str, Any]:
        value = rng.randint(1, 9)
        words, steps = [f"Start with {value}."], []
        for _ in range(difficulty):
            # small operands and values <= MAX_VALUE keep the arithmetic facts learnable by a tiny model
            choices = (["add"] if value < MAX_VALUE else []) + (["sub"] if value >= 1 else [])
            choices += ["double"] if 1 <= value <= MAX_VALUE // 2 else []
            op = rng.choice(choices)
            if op == "add":
                k = rng.randint(1, min(5, MAX_VALUE - value))
                words.append(f"Add {k}.")
                steps.append(f"{value}+{k}={value + k}.")
                value += k
            elif op == "sub":
                k = rng.randint(1, min(5, value))
                words.append(f"Subtract {k}.")
                steps.append(f"{value}-{k}={value - k}.")
                value -= k
            else:
                words.append("Double it.")
                steps.append(f"{value}*2={value * 2}.")
                value *= 2
        question = " ".join(words) + " What is the result?"
        solution = " ".join(steps) + f" \\boxed{{{value}}}"
        return {"question": question, "answer": str(value), "solution": solution, "tier": difficulty}

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        try:
            return float(predicted.replace(",", "").strip()) == float(reference)
        except ValueError:
            return False


class AdditionTask(_SyntheticTask):
    """One sum of two integers of `difficulty` digits each (difficulty 1: 0 to 9)."""

    name = "addition"
    answer_kind = "number"

    @staticmethod
    def _operands(difficulty: int) -> range:
        return range(10 ** (difficulty - 1) if difficulty > 1 else 0, 10**difficulty)

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        return len(self._operands(max(1, difficulty))) ** 2

    def make_item(self, rng: random.Random, difficulty: int, spec: dict[str, Any]) -> dict[str, Any]:
        difficulty = max(1, difficulty)
        a, b = rng.choice(self._operands(difficulty)), rng.choice(self._operands(difficulty))
        return {"question": f"What is {a} + {b}?", "answer": str(a + b),
                "solution": f"{a} + {b} = {a + b}. \\boxed{{{a + b}}}", "tier": difficulty}

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        return same_number(predicted, reference)


class SwapsTask(_SyntheticTask):
    """n people hold n objects; d pairwise swaps; which object does one person end with?"""

    name = "swaps"
    answer_kind = "choice"

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        p_lo, p_hi = spec.get("people", [3, 3])  # objects in order, swaps as ordered pairs, the person asked
        return sum(math.perm(len(COLOURS), n) * (n * (n - 1)) ** difficulty * n for n in range(p_lo, p_hi + 1))

    def make_item(self, rng: random.Random, difficulty: int, spec: dict[str, Any]) -> dict[str, Any]:
        p_lo, p_hi = spec.get("people", [3, 3])
        n = rng.randint(p_lo, p_hi)
        names, items = PEOPLE[:n], rng.sample(COLOURS, n)
        swaps = [tuple(rng.sample(range(n), 2)) for _ in range(difficulty)]
        query = rng.randrange(n)
        holding = list(range(n))  # holding[person] = index of the object held = its option letter
        trace = []
        for a, b in swaps:
            holding[a], holding[b] = holding[b], holding[a]
            # the worked solution tracks option letters by seat, so a tiny model learns one
            # copy-with-a-swap per step instead of looking colours up by name
            trace.append(f"{names[a]}-{names[b]}: " + " ".join(LETTERS[h] for h in holding) + ".")
        answer_idx = holding[query]
        letter = f"({LETTERS[answer_idx]})"
        if spec.get("style", "compact") == "bbh":
            variant = spec.get("variant", "ball")
            if variant not in BBH_OBJECT_NOUN:
                raise DataError(f"swaps: style bbh generates variants {', '.join(BBH_OBJECT_NOUN)}, not {variant!r}")
            objects = [f"{c} {BBH_OBJECT_NOUN[variant]}" for c in items]
            question, _, idx = render_bbh(names, objects, swaps, query, variant)
            assert idx == answer_idx, "BBH renderer disagrees with the swap simulation"
        else:
            start = " ".join(f"{nm}:{it}" for nm, it in zip(names, items))
            moves = ", ".join(f"{names[a]}-{names[b]}" for a, b in swaps) or "none"
            options = " ".join(f"({LETTERS[i]}) {it}" for i, it in enumerate(items))
            question = f"{start}. Swaps: {moves}. {names[query]} has? {options}"
        solution = " ".join(trace + [f"{names[query]}: {LETTERS[answer_idx]} \\boxed{{{letter}}}"])
        return {
            "question": question,
            "answer": letter,
            "solution": solution,
            "tier": difficulty,
            "n_objects": n,
        }

    def prompt(self, row: dict[str, Any]) -> str:
        return f"{row['question']}\nPut your final answer within \\boxed{{}}, e.g. \\boxed{{(A)}}."

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        got, want = option_letter(predicted), option_letter(reference)
        return got is not None and got == want
