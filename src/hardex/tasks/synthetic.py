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

Splits of one dataset are disjoint by problem, by construction: an item belongs to the split whose hash
bucket its problem's canonical form falls in (see SPLIT_BUCKETS), so each split is generated alone and no
problem can leak into another split, in the same words or in others, whatever their seeds. Within a split
no problem repeats either, and `capacity` counts problems, not question strings. The canonical form
(`problem_key`, read back from the question text, so the overlap check applies it to any file of the
family's wording) is, per family:

- `addition`: the unordered pair of operands: "What is 3 + 4?" and "What is 4 + 3?" are one problem.
- `arith`: the expression computed, up to commutativity: the start value and the additions and
  subtractions up to the first doubling form one multiset of signed terms, each later stretch between
  doublings another, in order. "Start with 5. Add 3." = "Start with 3. Add 5."; "Start with 5. Add 3.
  Subtract 2." = "Start with 5. Subtract 2. Add 3."; "Start with 5. Add 3. Double it." differs from
  "Start with 5. Double it. Add 3." (16 against 13).
- `swaps`: who holds which object at the start (the colour: "red", "red ball" and "red present" alike),
  the swaps in order, each an unordered pair ("Alice-Bob" = "Bob and Alice swap"), and the person asked,
  whatever the wording (`style` compact or bbh) and the order the people are listed in. A renaming of
  people or colours is another problem (its answer reads differently).
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path
from typing import Any

import polars as pl

from hardex.tasks.base import SPLIT_BUCKETS, DataError, Task, check_split, split_bucket
from hardex.tasks.bbh import option_letter
from hardex.tasks.hub_formats import render_bbh
from hardex.tasks.numbers import same_number
from hardex.tasks.rows import check_fields

PEOPLE = ["Alice", "Bob", "Claire", "Dave", "Eve", "Fred", "Gertrude"]
COLOURS = ["red", "blue", "green", "white", "black", "pink", "brown"]
LETTERS = "ABCDEFG"
MAX_VALUE = 30
# generated BIG-Bench Hard variants: coloured objects of one kind
BBH_OBJECT_NOUN = {"ball": "ball", "present": "present"}


# distinct arith problems (canonical forms) per number of operations, counted by enumerating the forms level
# by level (tests/unit/test_synthetic.py recounts the first ones); beyond the table, the last entry stands in as
# a lower bound: 8.7 million problems is far beyond any split, and an undercount never promises what is not there
ARITH_PROBLEMS = (9, 79, 481, 2707, 14582, 75770, 378896, 1833993, 8656550)


def _arith_form(start: int, ops: list[tuple[str, int]]) -> str:
    """The canonical form of `start` followed by ops ("+", k), ("-", k) or ("*", 2): see the module docstring."""
    stretches: list[list[int]] = [[start]]
    for op, k in ops:
        if op == "*":
            stretches.append([])
        else:
            stretches[-1].append(k if op == "+" else -k)
    return "arith:" + " *2 ".join("(" + " ".join(f"{t:+d}" for t in sorted(terms)) + ")" for terms in stretches)


def _swaps_form(holds: dict[str, str], swaps: list[tuple[str, str]], query: str) -> str:
    start = ",".join(f"{name}:{holds[name]}" for name in sorted(holds))
    moves = ",".join("-".join(sorted(pair)) for pair in swaps)
    return f"swaps:{start};{moves};{query}"


class _SyntheticTask(Task):
    """Shared split generation: seeded rejection sampling into the split's hash bucket."""

    family_prefix = ""

    def make_item(self, rng: random.Random, difficulty: int, spec: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        """How many different problems (canonical forms, `problem_key`) `make_item` can pose at this difficulty."""
        raise NotImplementedError

    def capacity(self, spec: dict[str, Any]) -> int:
        """About how many distinct problems the split's hash bucket holds: what `n` may ask for at most."""
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
                    f"{self.name}/{split}: only {len(rows)} distinct problems of difficulty {d_lo}-{d_hi} "
                    f"exist for this split; ask for fewer (n={n}) or widen the difficulty range"
                )
            item = self.make_item(rng, rng.randint(d_lo, d_hi), spec)
            key = self.problem_key(item["question"])  # read back from the text: what the overlap check compares
            assert key is not None, f"{self.name}: no canonical form for its own question {item['question']!r}"
            if key in seen or not lo <= split_bucket(key) < hi:
                continue
            seen.add(key)
            rows.append({"id": f"{self.name}-{split}-{seed}-{len(rows)}", **item})
        return check_split(pl.DataFrame(rows), f"{self.name}/{split}")


class ArithTask(_SyntheticTask):
    """Start from a number, apply d operations; every intermediate value stays in 0..MAX_VALUE."""

    name = "arith"
    answer_kind = "number"

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        return ARITH_PROBLEMS[min(difficulty, len(ARITH_PROBLEMS) - 1)]

    @staticmethod
    def moves(value: int) -> list[tuple[str, int]]:
        """The operations make_item may apply to `value`: small operands and values within 0..MAX_VALUE keep the
        arithmetic facts learnable by a tiny model."""
        return ([("+", k) for k in range(1, min(5, MAX_VALUE - value) + 1)]
                + [("-", k) for k in range(1, min(5, value) + 1)]
                + ([("*", 2)] if 1 <= value <= MAX_VALUE // 2 else []))

    def problem_key(self, question: str) -> str | None:
        m = re.fullmatch(r"Start with (\d+)\.((?: (?:Add \d+|Subtract \d+|Double it)\.)*) What is the result\?",
                         question)
        if not m:
            return None
        ops = [("*", 2) if w == "Double it" else ("+" if w.startswith("Add") else "-", int(w.split()[-1]))
               for w in re.findall(r"(Add \d+|Subtract \d+|Double it)\.", m.group(2))]
        return _arith_form(int(m.group(1)), ops)

    def make_item(self, rng: random.Random, difficulty: int, spec: dict[str, Any]) -> dict[str, Any]:
        value = rng.randint(1, 9)
        words, steps = [f"Start with {value}."], []
        for _ in range(difficulty):
            # an operation, then its operand, among `moves` (what ARITH_PROBLEMS counts)
            moves = self.moves(value)
            op = rng.choice(sorted({o for o, _ in moves}))
            k = rng.choice([k for o, k in moves if o == op])
            if op == "+":
                words.append(f"Add {k}.")
                steps.append(f"{value}+{k}={value + k}.")
                value += k
            elif op == "-":
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
        n = len(self._operands(max(1, difficulty)))
        return n * (n + 1) // 2  # unordered pairs: a + b is b + a

    def problem_key(self, question: str) -> str | None:
        m = re.fullmatch(r"What is (\d+) \+ (\d+)\?", question.strip())
        return f"addition:{'+'.join(sorted(m.groups(), key=int))}" if m else None

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
    instruction = "Put your final answer within \\boxed{}, e.g. \\boxed{(A)}."

    def distinct_items(self, difficulty: int, spec: dict[str, Any]) -> int:
        p_lo, p_hi = spec.get("people", [3, 3])  # objects in seat order, swaps as unordered pairs, the person asked
        return sum(math.perm(len(COLOURS), n) * math.comb(n, 2) ** difficulty * n for n in range(p_lo, p_hi + 1))

    def problem_key(self, question: str) -> str | None:
        """The compact wording ("Alice:red Bob:blue. Swaps: Alice-Bob. Bob has? (A) red (B) blue") or BIG-Bench
        Hard's (names in its first sentence, person i holding option i, "First, Alice and Bob swap ...")."""
        compact = re.fullmatch(r"(.+?)\. Swaps: (.+?)\. (\w+) has\? .*", question, re.S)
        if compact:
            pairs = [p.split(":", 1) for p in compact.group(1).split()]
            moves = [] if compact.group(2) == "none" else [tuple(m.split("-")) for m in compact.group(2).split(", ")]
            return _swaps_form(dict(pairs), moves, compact.group(3))
        intro = re.match(r"(.+?) are ", question)
        query = re.search(r"At the end of the \w+, (\w+) (?:has|is)", question)
        options = re.findall(r"^\([A-G]\) (.+)$", question.split("\nOptions:\n")[-1], re.M)
        if not (intro and query and options):
            return None
        names = re.split(r", and |, | and ", intro.group(1))
        nouns = tuple(f" {noun}" for noun in BBH_OBJECT_NOUN.values())
        objects = [o.removesuffix(next((n for n in nouns if o.endswith(n)), "")) for o in options]
        if len(names) != len(objects):
            return None
        moves = re.findall(r"(?:First|Then|Finally), (\w+) and (\w+) (?:swap|switch|trade)", question)
        return _swaps_form(dict(zip(names, objects)), moves, query.group(1))

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

    def is_equivalent(self, predicted: str, reference: str) -> bool:
        got, want = option_letter(predicted), option_letter(reference)
        return got is not None and got == want
