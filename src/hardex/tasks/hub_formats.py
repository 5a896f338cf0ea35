"""How the hub's files of BIG-Bench Hard and MATH are written: BBH's wording of a tracking_shuffled_objects
item and its object counts, MATH's subjects. Shared by the task loaders (hardex.tasks.bbh, hardex.tasks.math),
the synthetic swaps family and a rehearsal's sample files (hardex.rehearsal.samples); it imports nothing of
hardex, so that none of them lengthens another's chain of imports."""

from __future__ import annotations

import re
from typing import Any

LETTERS = "ABCDEFG"
OBJECT_WORDS = {3: "three", 5: "five", 7: "seven"}

# variant -> (story with {names} {start} {swaps} {query}, one start clause, one swap clause)
_VARIANTS = {
    "ball": (
        "{names} are playing a game. At the start of the game, they are each holding a ball: {start}.\n"
        "As the game progresses, pairs of players trade balls. {swaps} At the end of the game, {query} has the",
        "{name} has a {item}",
        "{a} and {b} swap balls",
    ),
    "present": (
        "{names} are holding a white elephant gift exchange. At the start of the event, they are each holding "
        "a present of a different color: {start}.\n"
        "As the event progresses, pairs of people swap gifts. {swaps} At the end of the event, {query} has the",
        "{name} has a {item}",
        "{a} and {b} swap their gifts",
    ),
    "dance": (
        "{names} are dancers at a square dance. At the start of a song, they each have a partner: {start}.\n"
        "Throughout the song, the dancers often trade partners. {swaps} At the end of the dance, {query} is "
        "dancing with",
        "{name} is dancing with {item}",
        "{a} and {b} switch partners",
    ),
    "soccer": (
        "{names} are on the same team in a soccer match. At the start of the match, they are each assigned to a "
        "position: {start}.\n"
        "As the game progresses, pairs of players occasionally swap positions. {swaps} At the end of the match, "
        "{query} is playing",
        "{name} is playing {item}",
        "{a} and {b} trade positions",
    ),
    "book": (
        "{names} are friends and avid readers who occasionally trade books. At the start of the semester, they each "
        "buy one new book: {start}.\n"
        "As the semester proceeds, they start trading around the new books. {swaps} At the end of the semester, "
        "{query} has",
        "{name} gets {item}",
        "{a} and {b} swap books",
    ),
}
VARIANTS = tuple(_VARIANTS)


def _series(words: list[str]) -> str:
    """English list with BBH's serial comma: "Alice, Bob, and Claire"."""
    if len(words) <= 2:
        return " and ".join(words)
    return ", ".join(words[:-1]) + ", and " + words[-1]


def render_bbh(
    names: list[str], items: list[str], swaps: list[tuple[int, int]], query: int, variant: str = "ball"
) -> tuple[str, list[str], int]:
    """BBH's exact wording for one tracking_shuffled_objects item.

    Person i starts with items[i]; `swaps` are pairs of person indices in order; `query` is the person
    asked about. Items are the option texts (``"yellow ball"``, ``"Lolita"``, ``"striker"``).
    Returns (question text ending in the Options block, option texts, index of the correct option).

    Variants reproduced: ball, present, dance, soccer, book: all five that occur in the three, five
    and seven-object configs. The wording was checked character for character against the released
    BBH task files (``bbh/tracking_shuffled_objects_*_objects.json``), so confidence is high; the
    tests re-render real items of every variant. Note that BBH puts a single newline (not a blank
    line) before "As the game progresses", and writes "a orange ball" (no "an"), which is kept.
    """
    if variant not in _VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    story, start_clause, swap_clause = _VARIANTS[variant]
    n = len(names)
    if n != len(items) or not 2 <= n <= len(LETTERS):
        raise ValueError(f"need 2-{len(LETTERS)} names and as many items, got {n} and {len(items)}")
    if not swaps or not 0 <= query < n or any(not (0 <= a < n and 0 <= b < n) or a == b for a, b in swaps):
        raise ValueError(f"bad swaps {swaps!r} or query {query} for {n} people")
    ordinals = ["First"] + ["Then"] * (len(swaps) - 2) + ["Finally"] * (len(swaps) > 1)
    text = story.format(
        names=_series(names),
        start=_series([start_clause.format(name=p, item=x) for p, x in zip(names, items)]),
        swaps=" ".join(f"{o}, {swap_clause.format(a=names[a], b=names[b])}." for o, (a, b) in zip(ordinals, swaps)),
        query=names[query],
    )
    options = "\n".join(f"({LETTERS[k]}) {x}" for k, x in enumerate(items))
    holder = list(range(n))  # holder[p] = index of the item person p holds
    for a, b in swaps:
        holder[a], holder[b] = holder[b], holder[a]
    return f"{text}\nOptions:\n{options}", list(items), holder[query]


def object_counts(spec: dict[str, Any]) -> list[int]:
    """Configs to load, by object count: `objects` (int or list), else the count in `config`, else 7.
    Raises ValueError for a count BBH has no config of."""
    objects = spec.get("objects")
    if objects is None:
        m = re.search(r"(three|five|seven)_objects", spec.get("config") or "")
        objects = [{w: n for n, w in OBJECT_WORDS.items()}[m.group(1)]] if m else [7]
    objects = [objects] if isinstance(objects, int) else list(objects)
    if not objects or any(n not in OBJECT_WORDS for n in objects):
        raise ValueError(f"objects {objects!r}: expected values among 3, 5, 7")
    return objects


#: subject (the `type` field) -> config name on hubs that split MATH by subject
SUBJECTS = {
    "Algebra": "algebra",
    "Counting & Probability": "counting_and_probability",
    "Geometry": "geometry",
    "Intermediate Algebra": "intermediate_algebra",
    "Number Theory": "number_theory",
    "Prealgebra": "prealgebra",
    "Precalculus": "precalculus",
}
PER_SUBJECT_HUBS = {"EleutherAI/hendrycks_math"}


def subject_key(subject: str) -> str:
    """``"Counting & Probability"`` and ``"counting_and_probability"`` name the same subject."""
    return re.sub(r"[^a-z0-9]+", "_", subject.lower().replace("&", "and")).strip("_")
