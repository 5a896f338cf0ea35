"""Pool against benchmarks: questions a task would train on and also be scored on.

A pool and a test set holding the same questions (the same file twice, the same GSM8K rows under two
names) would measure the gain on training data. Each benchmark question is counted once, in the first of
these classes it falls in:

- duplicates, refused beyond `tasks.<task>.allow_overlap`:
  `exact`; `normalized` (case, spacing and punctuation ignored; digits kept, so 'Add 3' and 'Add 4'
  differ); `same_problem`: the same canonical form as a pool question (`Task.problem_key`: for the
  generated families, 'What is 4 + 3?' is 'What is 3 + 4?'), where pool and benchmark both have one.
- near-duplicates, reported, and refused beyond `tasks.<task>.allow_near_duplicates` where that is set:
  `same_numbers`: the same numbers and operators in another order or wording (the multiset of the
  question's numbers and of its operators, '+' or 'add', 'times' or 'double'..., with at least
  MIN_NUMBERS numbers: 'What is 3 + 4?' and 'Add 4 to 3.' match, 'What is 3 * 4?' does not);
  `shared_ngram`: a word NGRAM-gram in common, as open-r1 decontaminates (lower case, punctuation
  dropped), leaving out n-grams that more than TEMPLATE_SHARE of the pool's questions hold, which are
  the wording of a template (BIG-Bench Hard's story), not of one problem. Where pool and benchmark
  both have a canonical form, it decides alone: a generated family's wording is a template whose
  numbers and n-grams recur across different problems.

Pool questions are indexed once (sets and dictionaries of their texts, forms, signatures and n-grams),
so the check is linear in the text of the pool and the benchmarks.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

import polars as pl

NGRAM = 8  # open-r1's decontamination (scripts/decontaminate.py, --ngram_size 8)
MIN_NUMBERS = 2  # a signature of one number matches too much to mean "the same problem"
TEMPLATE_SHARE = 0.01  # an n-gram in more of the pool's questions than this (and more than 2) is template text
DUPLICATES = ("exact", "normalized", "same_problem")
NEAR = ("same_numbers", "shared_ngram")
# words that name one operation whatever the sentence ("more" and "less" do not: "how many more" subtracts)
_OPERATOR_WORDS = {"+": ("add", "adds", "added", "plus", "sum"),
                   "-": ("subtract", "subtracts", "subtracted", "minus", "difference"),
                   "*": ("times", "multiply", "multiplied", "product", "double", "doubled", "twice", "triple"),
                   "/": ("divide", "divided", "quotient", "half", "halve", "halved")}
_WORD_OPERATOR = {w: op for op, words in _OPERATOR_WORDS.items() for w in words}
_SYMBOL_OPERATOR = {"+": "+", "-": "-", "−": "-", "*": "*", "×": "*", "·": "*", "/": "/", "÷": "/", "^": "^"}
_SYMBOL_WORD = {"+": "plus", "-": "minus", "*": "times", "/": "over", "^": "power", "=": "equals", "<": "lt", ">": "gt"}

Key = Callable[[str], "str | None"]


class OverlapError(ValueError):
    """A task whose pool shares questions with its benchmarks; str() is one line saying what to do."""


def normalized(question: str) -> str:
    """Case, spacing and punctuation ignored; operators kept as words ('3 + 4' is not '3 * 4'). A dash is a
    minus sign unless it joins two letters (a hyphenated word): '-( 3 - 0 )' is not '3 - 0', nor '4 - (-8)' '4 - 8'."""
    text = re.sub(r"([+*×·/÷^=<>])|(?<![^\W\d_])[-−]|[-−](?![^\W\d_])",
                  lambda m: f" {_SYMBOL_WORD[_SYMBOL_OPERATOR.get(m[0], m[0])]} ", question.casefold())
    return re.sub(r"[\W_]+", " ", text).strip()


def numbers_signature(question: str) -> str | None:
    """The multisets of the question's numbers and operators ('3,4|+'), or None with fewer than MIN_NUMBERS
    numbers. A minus sign counts between spaces or digits only, so that hyphenated words do not."""
    text = question.casefold()
    numbers = [n.replace(",", "") for n in re.findall(r"(?<![a-z_\d.])\d+(?:,\d{3})*(?:\.\d+)?", text)]
    numbers = sorted((n.rstrip("0").rstrip(".") if "." in n else n.lstrip("0") or "0" for n in numbers), key=float)
    if len(numbers) < MIN_NUMBERS:
        return None
    symbols = re.findall(r"[+*×·/÷^]|(?:(?<=[\s\d])|^)[-−](?=[\s\d])", text)
    operators = [_SYMBOL_OPERATOR[s] for s in symbols] + [_WORD_OPERATOR[w] for w in re.findall(r"[a-z]+", text)
                                                          if w in _WORD_OPERATOR]
    return ",".join(numbers) + "|" + "".join(sorted(operators))


def word_ngrams(question: str, n: int = NGRAM) -> set[str]:
    words = normalized(question).split()
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


class PoolIndex:
    """A pool's questions by their text, normalized text, canonical form, numbers signature and n-grams."""

    def __init__(self, pool: pl.DataFrame, key: Key | None = None, n: int = NGRAM) -> None:
        questions = pool["question"].to_list()
        self.size, self.key, self.n = len(questions), key, n
        self.exact = set(questions)
        self.normalized: dict[str, str] = {}
        self.forms: dict[str, str] = {}
        self.signatures: dict[str, str] = {}
        self.ngrams: dict[str, str] = {}
        holders: Counter[str] = Counter()
        for q in questions:  # the first pool question of each, to show beside a benchmark question
            self.normalized.setdefault(normalized(q), q)
            if key is not None and (form := key(q)) is not None:
                self.forms.setdefault(form, q)
            if (sig := numbers_signature(q)) is not None:
                self.signatures.setdefault(sig, q)
            grams = word_ngrams(q, n)
            holders.update(grams)
            for g in grams:
                self.ngrams.setdefault(g, q)
        most = max(2, TEMPLATE_SHARE * self.size)
        self.template = {g for g, c in holders.items() if c > most}

    def classify(self, question: str, key: Key | None = None) -> list[tuple[str, str]]:
        """[(class, pool question)]: the duplicate class the question falls in first, else every near class."""
        if question in self.exact:
            return [("exact", question)]
        if (q := self.normalized.get(normalized(question))) is not None:
            return [("normalized", q)]
        form = key(question) if key is not None and self.key is not None else None
        if form is not None:  # both sides define what a problem is: their form decides alone
            return [("same_problem", self.forms[form])] if form in self.forms else []
        near = []
        if (sig := numbers_signature(question)) is not None and sig in self.signatures:
            near.append(("same_numbers", self.signatures[sig]))
        shared = sorted(g for g in word_ngrams(question, self.n) if g in self.ngrams and g not in self.template)
        if shared:
            near.append(("shared_ngram", self.ngrams[shared[0]]))
        return near


def overlap(pool: pl.DataFrame | PoolIndex, benchmark: pl.DataFrame, key: Key | None = None,
            pool_key: Key | None = None) -> dict[str, Any]:
    """Questions of `benchmark` found in `pool` by class (module docstring), with three examples of each kind.
    `key` and `pool_key`: the canonical forms of the benchmark's and the pool's families (None: none)."""
    index = pool if isinstance(pool, PoolIndex) else PoolIndex(pool, pool_key)
    counts = dict.fromkeys(DUPLICATES + NEAR, 0)
    examples: list[str] = []
    near_examples: list[dict[str, str]] = []
    near = 0
    for q in benchmark["question"]:
        found = index.classify(q, key)
        for kind, _ in found:
            counts[kind] += 1
        if found and found[0][0] in DUPLICATES:
            if len(examples) < 3:
                examples.append(q)
        elif found:
            near += 1
            if len(near_examples) < 3:
                near_examples.append({"question": q, "pool_question": found[0][1], "kind": found[0][0]})
    return {"n_pool": index.size, "n_benchmark": benchmark.height, **counts,
            "overlap": sum(counts[c] for c in DUPLICATES), "near_duplicates": near,
            "examples": examples, "near_examples": near_examples}


def _shown(questions: list[str]) -> str:
    return "; ".join(repr(q[:60] + ("..." if len(q) > 60 else "")) for q in questions)


def check_task(task: str, pool_ref: str, pool: pl.DataFrame, benchmarks: dict[str, pl.DataFrame],
               allowed: int, keys: dict[str, Key | None] | None = None,
               allowed_near: int | None = None) -> dict[str, Any]:
    """The overlap of every benchmark with the pool; OverlapError when the duplicates exceed `allowed`, or the
    near-duplicates `allowed_near` (None: reported only). `keys`: each split reference's canonical form."""
    keys = keys or {}
    index = PoolIndex(pool, keys.get(pool_ref))
    found = {ref: overlap(index, df, keys.get(ref)) for ref, df in benchmarks.items()}
    total = sum(f["overlap"] for f in found.values())
    if total > allowed:
        worst = max(found, key=lambda r: found[r]["overlap"])
        f = found[worst]
        raise OverlapError(
            f"tasks.{task}: {total} questions of its benchmarks are in its pool {pool_ref} ({worst}: {f['overlap']} "
            f"of {f['n_benchmark']}, {f['exact']} exact, {f['normalized']} after normalizing, {f['same_problem']} the "
            f"same problem in other words; e.g. {_shown(f['examples'])}): the gain would be measured on training "
            f"data. Use disjoint splits, or accept it with tasks.{task}.allow_overlap: {total}")
    near = sum(f["near_duplicates"] for f in found.values())
    if allowed_near is not None and near > allowed_near:
        worst = max(found, key=lambda r: found[r]["near_duplicates"])
        f = found[worst]
        pairs = "; ".join(f"{e['kind']}: {_shown([e['question']])} ~ {_shown([e['pool_question']])}"
                          for e in f["near_examples"])
        raise OverlapError(
            f"tasks.{task}: {near} questions of its benchmarks are near-duplicates of questions in its pool {pool_ref} "
            f"({worst}: {f['near_duplicates']} of {f['n_benchmark']}, {f['same_numbers']} with the same numbers and "
            f"operators, {f['shared_ngram']} sharing a {NGRAM}-word run; e.g. {pairs}). Use disjoint splits, or "
            f"accept them with tasks.{task}.allow_near_duplicates: {near}")
    return {"task": task, "pool": pool_ref, "allowed": allowed, "allowed_near": allowed_near, "ngram": NGRAM,
            "benchmarks": found}
