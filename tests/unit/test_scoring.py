r"""Scorers of the real-data tasks on tricky completions, and BBH's exact wording.

The completions are the failure modes seen in practice: no box, several boxes, nested braces,
commas and dollar signs, a truncated box, an echoed prompt whose example ``\boxed{(A)}`` must not
count as an answer.
"""

from __future__ import annotations

import json
import re
import threading

import pytest

from hardex.tasks import REGISTRY, STRICT_FAMILIES, Task, get_task, last_boxed
from hardex.tasks.bbh import HINT, option_letter
from hardex.tasks.hub_formats import VARIANTS, render_bbh
from hardex.tasks.math import math_equal
from hardex.tasks.numbers import is_plain_number, parse_number
from hardex.tasks.released import released_last_box, released_shuffled_objects_correct
from tests.support import ROOT

HUB = ROOT / "tests" / "fixtures" / "hub"


# --- numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("18", 18),
        ("1,000", 1000),
        ("1{,}000", 1000),
        ("$18", 18),
        ("\\$18", 18),
        ("$18$", 18),
        ("18.0", 18),
        ("18.00", 18),
        ("18 dollars", 18),
        ("\\text{18}", 18),
        ("\\textbf{\\text{18}}", 18),
        ("\u22123", -3),
        ("-3", -3),
        ("50\\%", 50),
        ("50%", 50),
        ("x = 5", 5),
        ("4 + 6 = 10", 10),  # an equation states its right-hand side
        ("a = b = 7", 7),
        ("\\text{5 cm}", 5),
        ("18.", 18),
        (".5", 0.5),
        ("60^\\circ", 60),
        ("1\\,000", 1000),
    ],
)
def test_parse_number_reads_decorated_numbers(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text",
    ["eighteen", "", "18 and 19", "\\frac{1}{2}", "1/2", "1,00", "(C)", "x+1", "12,34.5", "x >= 5", "x == 5", "1 2"],
)
def test_parse_number_rejects_non_numbers(text):
    assert parse_number(text) is None


@pytest.mark.parametrize(
    "answer, numeric",
    [
        ("18", True),
        ("-3", True),
        ("0.25", True),
        ("1,000", True),
        ("1,\\!000", True),
        ("60^\\circ", True),
        ("5\\text{ cm}", True),
        ("\\$18.90", True),
        ("\\frac{1}{2}", False),
        ("1/2", False),
        ("\\sqrt{2}", False),
        ("2\\pi", False),
        ("50\\%", False),
        ("(-\\infty, 3]", False),
        ("\\text{(C)}", False),
        ("(1,2)", False),
        ("1,00", False),
        ("", False),
    ],
)
def test_is_plain_number_definition(answer, numeric):
    assert is_plain_number(answer) is numeric


# --- GSM8K --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, reference, correct",
    [
        ("so she makes \\boxed{18} dollars", "18", True),
        ("\\boxed{1,000}", "1000", True),
        ("\\boxed{\\$18}", "18", True),
        ("\\boxed{$18$}", "18", True),
        ("\\boxed{18.0}", "18", True),
        ("\\boxed{18.00}", "18", True),
        ("\\boxed{18 dollars}", "18", True),
        ("\\boxed{\\text{18}}", "18", True),
        ("\\boxed{\u22123}", "-3", True),
        ("\\boxed{50\\%}", "50", True),
        ("\\boxed{18.5}", "18", False),
        ("The answer is 18.", "18", False),  # no box, no answer
        ("first \\boxed{17}, corrected: \\boxed{18}", "18", True),  # last box wins
        ("first \\boxed{18}, corrected: \\boxed{17}", "18", False),
        ("so the total is \\boxed{12", "12", False),  # truncated box
        ("\\boxed{7} and then \\boxed{12", "12", False),  # truncated last box: the earlier one counts
        ("\\boxed{eighteen}", "18", False),
        ("\\boxed{18 and 19}", "18", False),
        ("\\boxed{}", "18", False),
        ("\\boxed{4 + 6 = 10}", "10", True),  # an equation is read by its right-hand side
        ("\\boxed{4 + 6 = 11}", "10", False),
        ("\\boxed{x = 5}", "5", True),
        ("\\boxed{x \\geq 5}", "5", False),
    ],
)
def test_gsm8k_scoring(completion, reference, correct):
    assert get_task("gsm8k").is_correct(completion, reference) is correct


def test_gsm8k_echoed_prompt_is_not_an_answer():
    task = get_task("gsm8k")
    prompt = task.prompt({"question": "Janet has 18 ducks; what is \\boxed{18} minus 0?"})
    assert task.is_correct(prompt + " I am not sure.", "18", prompt) is False
    assert task.is_correct(prompt + " It is \\boxed{18}.", "18", prompt) is True


# --- BBH shuffled objects -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "predicted, letter",
    [
        ("(C)", "C"),
        ("C", "C"),
        ("(c)", "C"),
        ("C)", "C"),
        ("( C )", "C"),
        ("(C) red ball", "C"),
        ("C. red ball", "C"),
        ("\\text{(C)}", "C"),
        ("$(C)$", "C"),
        ("c", None),
        ("A red ball", None),
        ("red ball", None),
        ("", None),
        ("(H)", None),
    ],
)
def test_option_letter(predicted, letter):
    assert option_letter(predicted) == letter


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("\\boxed{(C)}", True),
        ("\\boxed{C}", True),
        ("\\boxed{(c)}", True),
        ("\\boxed{C)}", True),
        ("\\boxed{(C) red ball}", True),
        ("\\boxed{\\text{(C)}}", True),
        ("\\boxed{(B)}", False),
        ("(C)", False),
        ("\\boxed{(B)} no wait \\boxed{(C)}", True),
        ("\\boxed{(C)", False),
    ],
)
def test_shuffled_objects_scoring(completion, correct):
    assert get_task("shuffled_objects").is_correct(completion, "(C)") is correct


@pytest.fixture
def bbh_prompt():
    task = get_task("shuffled_objects")
    rows = task.load_split({"file": "bbh/tracking_shuffled_objects_three_objects.json", "objects": 3}, HUB)
    prompt = task.prompt(rows.row(0, named=True))
    assert last_boxed(prompt) == "(A)"  # the trap: read naively, the prompt itself answers (A)
    return task, prompt


@pytest.mark.parametrize(
    "answer, correct",
    [("", False), (" Let me think.", False), (" The answer is \\boxed{(B)}.", False), (" So \\boxed{(A)}.", True)],
)
def test_echoed_bbh_prompt_example_is_never_the_answer(bbh_prompt, answer, correct):
    task, prompt = bbh_prompt
    assert task.is_correct(prompt + answer, "(A)", prompt) is correct
    # the same without the prompt at hand (the example is stripped by extract itself)
    assert task.is_correct(prompt + answer, "(A)") is correct
    # a partial echo: only the instruction lines
    assert task.is_correct(prompt.split("Options:")[-1] + answer, "(A)", prompt) is correct


def test_bbh_prompt_has_the_letter_hint_on_its_own_line(bbh_prompt):
    _, prompt = bbh_prompt
    assert prompt.endswith("\nPut your final answer within \\boxed{}.\n" + HINT)
    assert "\\boxed{(A)}" in HINT


# --- AIME and MATH ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("\\boxed{70}", True),
        ("\\boxed{070}", True),
        ("\\boxed{70.0}", True),
        ("\\boxed{\\frac{140}{2}}", True),
        ("\\boxed{71}", False),
        ("The answer is 70", False),
        ("\\boxed{70", False),
        ("\\boxed{b=70}", True),
    ],
)
def test_aime_scoring(completion, correct):
    assert get_task("aime2025").is_correct(completion, "70") is correct


@pytest.mark.parametrize(
    "completion, reference, correct",
    [
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", True),
        ("\\boxed{0.5}", "\\frac{1}{2}", True),
        ("\\boxed{\\dfrac12}", "\\frac{1}{2}", True),
        ("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}", False),
        ("\\boxed{(-\\infty,3]}", "(-\\infty, 3]", True),
        ("\\boxed{x<3}", "(-\\infty, 3]", False),
        ("\\boxed{1000}", "1,\\!000", True),
        ("\\boxed{60}", "60^\\circ", True),
        ("\\boxed{\\text{(C)}}", "\\text{(C)}", True),
        ("\\boxed{\\begin{pmatrix}1\\\\2\\end{pmatrix}}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", True),
        ("\\boxed{\\frac{1}{}", "\\frac{1}{2}", False),  # malformed and truncated
        ("no box at all, 1/2", "\\frac{1}{2}", False),
        ("\\boxed{2} then \\boxed{\\frac{7}{12}}", "\\frac{7}{12}", True),
    ],
)
def test_math_scoring(completion, reference, correct):
    assert get_task("math").is_correct(completion, reference) is correct


@pytest.mark.parametrize(
    "completion, reference, correct",
    [
        ("\\boxed{ba}", "ab", False),  # text, never products of symbols
        ("\\boxed{ab}", "ab", True),
        ("\\boxed{1 2}", "12", False),  # two numbers are not one
        ("\\boxed{12}", "12", True),
        ("\\boxed{\\text{5 cm}}", "5", True),  # as 5\text{ cm} already was
        ("\\boxed{5\\text{ cm}}", "5", True),
        ("\\boxed{\\text{6 cm}}", "5", False),
    ],
)
@pytest.mark.parametrize("family", ["math", "aime2025", "qa"])
def test_lenient_fixes_hold_for_every_family_built_on_math_equal(family, completion, reference, correct):
    assert get_task(family).is_correct(completion, reference) is correct


@pytest.mark.parametrize(
    "predicted, reference, equal",
    [("ba", "ab", False), ("1 2", "12", False), ("\\text{5 cm}", "5", True), ("(-\\infty,3]", "(-\\infty, 3]", True)],
)
def test_math_equal_fixes(predicted, reference, equal):
    assert math_equal(predicted, reference) is equal


@pytest.mark.parametrize("predicted, reference", [("\\frac{", "}"), ("}{", "\\left("), ("\\sqrt", "\\sqrt"), ("", "")])
def test_math_equal_never_raises(predicted, reference):
    assert isinstance(math_equal(predicted, reference), bool)
    assert math_equal("", reference) is False


def test_math_equal_works_off_the_main_thread():
    """math-verify's signal-based timeout fails in threads; the scorer must still verify there."""
    result = {}
    worker = threading.Thread(target=lambda: result.update(ok=math_equal("0.5", "\\frac{1}{2}")))
    worker.start()
    worker.join()
    assert result["ok"] is True


# --- strict scoring: paper 1's released scorers ------------------------------------------------


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("so \\boxed{18} dollars", True),
        ("\\boxed{ 18 }", True),  # int() takes surrounding spaces
        ("\\boxed{018}", True),
        ("\\boxed{17} no, \\boxed{18}", True),
        ("\\boxed{18.0}", False),  # int() refuses what lenient scoring reads as 18
        ("\\boxed{1,8}", False),
        ("\\boxed{\\$18}", False),
        ("\\boxed{18 dollars}", False),
        ("\\boxed{\\text{18}}", False),  # the non-greedy box is "\\text{18"
        ("\\boxed{x = 18}", False),
        ("The answer is 18.", False),
    ],
)
def test_strict_gsm8k_is_int_of_the_last_box(completion, correct):
    assert get_task("gsm8k", "strict").is_correct(completion, "18") is correct


def test_strict_gsm8k_thousands():
    assert get_task("gsm8k", "strict").is_correct("\\boxed{1,000}", "1000") is False
    assert get_task("gsm8k", "strict").is_correct("\\boxed{1000}", "1000") is True
    assert get_task("gsm8k").is_correct("\\boxed{1,000}", "1000") is True


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("\\boxed{(C)}", True),
        ("\\boxed{(B)} no wait \\boxed{(C)}", True),
        ("\\boxed{C}", False),
        ("\\boxed{(c)}", False),
        ("\\boxed{(C) red ball}", False),
        ("\\boxed{ (C)}", False),
        ("\\boxed{\\text{(C)}}", False),
        ("(C)", False),
    ],
)
def test_strict_shuffled_objects_is_the_exact_option_string(completion, correct):
    assert get_task("shuffled_objects", "strict").is_correct(completion, "(C)") is correct


def test_strict_scores_the_completion_not_the_prompt(bbh_prompt):
    """The released code read prompt + completion, so the prompt's example box answered (A) for a
    completion cut off before its own box; strict scoring reads the completion only."""
    _, prompt = bbh_prompt
    strict = get_task("shuffled_objects", "strict")
    assert released_shuffled_objects_correct(prompt + " Let me think", "(A)") is True  # the released trap
    assert strict.is_correct(" Let me think", "(A)", prompt) is False
    assert strict.is_correct(" So \\boxed{(A)}", "(A)", prompt) is True


@pytest.mark.parametrize(
    "completion, correct",
    [
        ("\\boxed{70}", True),
        ("\\boxed{070}", True),
        ("\\boxed{70.0}", False),
        ("\\boxed{\\frac{140}{2}}", False),
        ("\\boxed{b=70}", False),
        ("\\boxed{71} or \\boxed{hm}", False),  # a box that int() refuses is no answer, even after a number
        ("The answer is 70", True),  # no box: the first integer
        ("Of the 9 bases, 70 works", False),
        ("so \\boxed{70", True),  # an unclosed box is no box: its integer is the first
        ("no answer", False),
    ],
)
def test_strict_aime_is_int_of_the_last_box_else_the_first_integer(completion, correct):
    assert get_task("aime2025", "strict").is_correct(completion, "70") is correct


def test_released_box_does_not_balance_braces():
    assert released_last_box("\\boxed{\\frac{1}{2}}") == "\\frac{1"
    assert last_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert released_last_box("no box") is None


@pytest.mark.parametrize("family", sorted(REGISTRY))
def test_strict_exists_exactly_for_the_families_with_a_released_scorer(family):
    lenient = get_task(family)
    assert lenient is get_task(family, "lenient") and lenient.scoring == "lenient"
    has_scorer = type(lenient).released_correct is not Task.released_correct
    assert has_scorer is (family in STRICT_FAMILIES)
    if family in STRICT_FAMILIES:
        strict = get_task(family, "strict")
        assert strict.scoring == "strict" and strict is not lenient and strict is get_task(family, "strict")
    else:
        with pytest.raises(ValueError, match=rf"task family '{family}' has no strict scoring: .* aime2025, gsm8k, "
                                             rf"shuffled_objects"):
            get_task(family, "strict")


def test_unknown_scoring_is_refused():
    with pytest.raises(ValueError, match="unknown scoring 'exact'; known: lenient, flexible, strict"):
        get_task("gsm8k", "exact")


# --- render_bbh ---------------------------------------------------------------------------------

_STORY_KEYS = {
    "playing a game": "ball",
    "white elephant": "present",
    "square dance": "dance",
    "soccer match": "soccer",
    "avid readers": "book",
}


def _structure(text: str):
    """Names, items, swaps, query and variant of a real BBH item (a parser independent of render_bbh)."""
    story, options = text.split("\nOptions:\n")
    names = re.split(r", and |, | and ", story.split(" are ", 1)[0])
    items = [line[4:] for line in options.splitlines()]
    swaps = [(names.index(a), names.index(b)) for a, b in re.findall(r"(\w+) and (\w+) (?:swap|switch|trade)", story)]
    query = names.index(re.search(r"At the end of the \w+, (\w+)", story).group(1))
    variant = next(v for key, v in _STORY_KEYS.items() if key in story)
    return names, items, swaps, query, variant


def _fixture_items():
    bbh = HUB / "bbh"
    seven = json.loads((bbh / "tracking_shuffled_objects_seven_objects.json").read_text())["examples"]
    three = json.loads((bbh / "tracking_shuffled_objects_three_objects.json").read_text())
    five = json.loads((bbh / "tracking_shuffled_objects_five_objects.json").read_text())
    return three + five + seven


def test_render_bbh_reproduces_a_real_item_character_for_character():
    names = ["Alice", "Bob", "Claire"]
    items = ["brown ball", "red ball", "white ball"]
    text, options, correct = render_bbh(names, items, [(2, 1), (1, 0), (2, 0)], query=1)
    real = json.loads((HUB / "bbh" / "tracking_shuffled_objects_three_objects.json").read_text())[2]
    assert text == real["input"]
    assert options == items
    assert f"({'ABC'[correct]})" == real["target"]


@pytest.mark.parametrize("item", _fixture_items(), ids=lambda item: item["input"][:40])
def test_render_bbh_matches_every_fixture_item(item):
    names, items, swaps, query, variant = _structure(item["input"])
    text, _, correct = render_bbh(names, items, swaps, query, variant)
    assert text == item["input"]
    assert f"({'ABCDEFG'[correct]})" == item["target"]


def test_fixture_covers_every_variant():
    assert {_structure(item["input"])[4] for item in _fixture_items()} == set(VARIANTS)


def test_render_bbh_ordinals_and_options():
    text, options, correct = render_bbh(
        ["Alice", "Bob", "Claire", "Dave"],
        ["striker", "goalkeeper", "fullback", "cheerleader"],
        [(0, 1), (1, 2), (2, 3), (3, 0)],
        query=2,
        variant="soccer",
    )
    assert (
        "First, Alice and Bob trade positions. Then, Bob and Claire trade positions. Then, Claire and Dave "
        "trade positions. Finally, Dave and Alice trade positions. At the end of the match, Claire is playing\n" in text
    )
    assert text.endswith("Options:\n(A) striker\n(B) goalkeeper\n(C) fullback\n(D) cheerleader")
    assert options[correct] == "cheerleader"


@pytest.mark.parametrize(
    "names, items, swaps, query, variant",
    [
        (["Alice", "Bob"], ["x"], [(0, 1)], 0, "ball"),  # items and names differ in length
        (["Alice", "Bob"], ["x", "y"], [], 0, "ball"),  # no swaps
        (["Alice", "Bob"], ["x", "y"], [(0, 0)], 0, "ball"),  # self swap
        (["Alice", "Bob"], ["x", "y"], [(0, 2)], 0, "ball"),  # out of range
        (["Alice", "Bob"], ["x", "y"], [(0, 1)], 2, "ball"),  # bad query
    ],
)
def test_render_bbh_rejects_bad_structures(names, items, swaps, query, variant):
    with pytest.raises(ValueError):
        render_bbh(names, items, swaps, query, variant)


def test_render_bbh_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'cards'"):
        render_bbh(["Alice", "Bob"], ["x", "y"], [(0, 1)], 0, "cards")


# what SmolLM2-135M-Instruct wrote when asked for \boxed{} (probe samples of "What is a + b?")
SMOLLM2_WROTE = ["1 + 5 = 6", "8 + 6 = 14, so the final answer is 14.", "7 + 5 = \\boxed{} 20",
                 "The answer to your question is \\boxed{}.", "27 + 46 = 101."]


def test_flexible_scoring_reads_what_a_small_model_writes():
    lenient, flexible = get_task("addition", "lenient"), get_task("addition", "flexible")
    verdicts = [flexible.is_correct(c, a) for c, a in zip(SMOLLM2_WROTE, ["6", "14", "12", "3", "101"])]
    assert verdicts == [True, True, False, False, True]  # an empty box says nothing: the number after it counts
    assert not any(lenient.is_correct(c, a) for c, a in zip(SMOLLM2_WROTE, ["6", "14", "12", "3", "101"]))
    assert flexible.is_correct("so \\boxed{14} and then 3 more", "14")  # a box still wins over later numbers
    assert not flexible.is_correct("no number here", "14")
    assert get_task("swaps", "flexible").is_correct("Alice ends with (B) the blue ball", "(B)")
    assert get_task("qa", "flexible").is_correct("It is 1,000 in all", "1000")
    assert not get_task("qa", "flexible").is_correct("It is Paris", "Paris")  # text answers still need a box


def test_the_real_models_own_answers_get_the_right_verdict():
    """Completions SmolLM2-135M-Instruct wrote in a probe of experiments/real_model_cpu.yaml, right and
    wrong, in its forms: a bare equation, a box, an empty box then the number, a number after a stray one,
    a wrong sum stated twice, a completion cut before its answer (whose last number is an operand)."""
    import json
    from pathlib import Path

    fixture = json.loads((Path(__file__).parents[1] / "fixtures" / "smollm2_completions.json").read_text())
    flexible, lenient = get_task("addition", "flexible"), get_task("addition", "lenient")
    samples = fixture["samples"]
    assert {s["correct"] for s in samples} == {True, False}
    for s in samples:
        assert flexible.is_correct(s["completion"], s["answer"]) == s["correct"], s
        boxed = flexible.extract(s["completion"])  # lenient credits only a non-empty box
        assert lenient.is_correct(s["completion"], s["answer"]) == (bool(boxed) and s["correct"]), s

