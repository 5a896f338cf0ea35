r"""Control runs: how much of a GRPO gain is the skill, and how much any reward signal or the answer's form?

A control run (``selection.controls``; run strategy ``<strategy>_<control>``, hardex.selection) trains on
the same subset as the strategy it controls, with the same settings, and is evaluated with the true
scorer like every run; only its training reward differs. A control is worth its name only if its groups
mix (rewards that differ within a group) about as often as the true reward's: with DAPO's loss, no std
scaling and beta 0, a group whose rewards agree carries no gradient, and a control that never mixes never
trains. The report prints each control's learnable % beside the gain beyond it.

- ``random_reward``: each completion is paid `scale` with probability p, p the true reward's mean over the
  completions scored with it (a step's, on one process), independently of what it says (arXiv 2506.10947's
  random reward, with its rate matched to the true one's). It mixes at least as often as the true reward
  and carries no information: what it buys is what updating on any reward at that rate buys (sharpening,
  drift in form).
- ``format``: a reward for where and how the answer is written, whatever its value: a half for an answer
  the task's scorer reads at all, a quarter for that answer in a non-empty ``\boxed{}`` (the form the
  prompt asks for), a quarter for the completion ending with it (nothing but closing punctuation after it
  on its last line). Quarters, not thirds: a group of equal scores must have a standard deviation of
  exactly 0 (TRL counts a group of 2/3's, whose float32 std is 6e-8, as mixed).
  Graded, so a group mixes wherever its completions differ in form (one-shot RLVR's gain was partly format
  correction, arXiv 2504.20571). It pays no more for the right answer than for a wrong one.
- ``shuffled``: each example is scored by the task's own scorer against ANOTHER example's reference answer,
  a derangement of the subset's answers seeded by the run seed. It never pays the true answer: it is an
  incorrect-label reward, which on a choice task trains toward wrong options (a notice at planning says so);
  on numeric tasks it pays for answers in the subset's usual range of values.

The shuffled references are written into the run's rows (`control_rows`), so the run's checkpoints are
keyed by them (a resumed run keeps its mapping, a changed mapping starts afresh) and the processes of a
run trained in several (hardex.train_worker) get them with the rows; the derangement is a function of
the answers and the seed alone, so every job that rebuilds it gets the same one. The random reward's draws
are keyed by the run seed and the completions scored, so a resumed run or another process draws alike.
The true reward stays `task_reward`, or a task's reward hook (`tasks.<task>.reward`,
hardex.reward_hook) in its place: the random-reward control then takes its rate from the hook's rewards and the
shuffled control pays what the hook gives against another example's reference; the format control scores the
answer's form with the task's own extraction, hook or not. This module imports no stage.

Each control is one record of `REGISTRY` (`Control`: its reward, its log line, its line and marker in the figures,
the headline's preference, its rows), which every user reads: a new control is a new record.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from hardex.reward_hook import hook_reward
from hardex.tasks import get_task, last_boxed, strip_echo
from hardex.tasks.released import released_last_box

Reward = Callable[[str, str, str], float]


def _rng(seed: int, purpose: str) -> np.random.Generator:
    salt = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "big")
    return np.random.default_rng([int(seed), salt])


def derangement(answers: Sequence[str], seed: int) -> list[int]:
    """A seeded permutation `p` of the examples that gives as few as possible an equal answer:
    example i is scored against ``answers[p[i]]``.

    When no answer is held by more than half the examples, none gets an equal answer. Otherwise
    (a value held by m > n/2) 2m - n of its holders must, and exactly that many do. Construction: the
    examples grouped by answer (groups and members in seeded order), each matched with the example a
    seeded shift s further along, min(m, n-m) <= s <= max(m, n-m) for the largest group's size m, which
    is the classic proof that such a shift leaves no group facing itself. Deterministic in (answers,
    seed): the groups are ordered by value before shuffling, never by Python's (salted) string hashes.
    """
    n = len(answers)
    if n == 0:
        return []
    rng = _rng(seed, "shuffled control")
    groups: dict[str, list[int]] = {}
    for i, a in enumerate(answers):
        groups.setdefault(str(a), []).append(i)
    values = sorted(groups)
    order = []
    for v in (values[j] for j in rng.permutation(len(values))):
        members = groups[v]
        order += [members[j] for j in rng.permutation(len(members))]
    largest = max(len(g) for g in groups.values())
    lo, hi = sorted((largest, n - largest))
    shift = int(rng.integers(lo, hi + 1))
    perm = [0] * n
    for k, i in enumerate(order):
        perm[i] = order[(k + shift) % n]
    return perm


def shuffled_rows(rows: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], str]:
    """The run's rows with each reference replaced by another example's (`derangement`), and a line for
    the job's log saying how many keep an equal one and why."""
    answers = [str(r["answer"]) for r in rows]
    perm = derangement(answers, seed)
    out = [{**r, "answer": answers[j]} for r, j in zip(rows, perm)]
    kept = sum(answers[i] == answers[j] for i, j in enumerate(perm))
    if len(set(answers)) < 2:
        note = (f"all {len(rows)} examples have the same reference answer ({answers[0]!r} if any): the shuffled "
                f"reward is the true reward here, and this control measures nothing")
    elif kept:
        value = max(set(answers), key=answers.count)
        note = (f"{kept} of {len(rows)} examples keep an equal reference: {value!r} is the answer of "
                f"{answers.count(value)}, more than half of the subset, so no permutation avoids it")
    else:
        note = f"no example of {len(rows)} is scored against an equal answer"
    return out, note


def control_notices(cfg: dict) -> list[str]:
    """One line per choice task and configured control with a notice for one (`Control.choice_notice`), said at
    planning time, never an error: the shuffled control pays another question's option letter and never the true
    one, an incorrect-label reward that trains toward wrong options rather than measuring form."""
    named = [c for c in REGISTRY.values() if c.choice_notice and cfg["selection"]["controls"].get(c.name)]
    if not named:
        return []
    lines = []
    for control in named:
        for task, tcfg in cfg["tasks"].items():
            family = cfg["datasets"][tcfg["pool"].split("/", 1)[0]]["family"]
            if get_task(family).answer_kind == "choice":
                lines.append(f"{task}: selection.controls.{control.name} {control.choice_notice}")
    return lines


def reads_an_answer(task, completion: str, reference: str, prompt: str | None = None) -> bool:
    r"""Whether the task's scorer reads an answer from the completion at all, right or wrong: a non-empty
    last box for boxed scoring, whatever `scoring: flexible` extracts otherwise (Task.answer, the scorer's
    own extraction, echoed prompt stripped); for `scoring: strict` the released scorer's last box (AIME's
    released fallback to a completion's first integer is not counted)."""
    return bool(_read_answer(task, completion, reference, prompt))


def _read_answer(task, completion: str, reference: str, prompt: str | None) -> str:
    if task.scoring.endswith("strict"):  # a rehearsal's "rehearsal+strict" too
        found = released_last_box(completion)
    else:
        found = task.answer(completion, reference, prompt)
    return (found or "").strip()


# what may follow an answer at the end of a completion: closing punctuation, markup and space
_CLOSING = re.compile(r"[\s.!)\]}$*`'\"]*")


def format_score(task, completion: str, reference: str, prompt: str | None = None) -> float:
    r"""The answer's form, from 0 to 1 in quarters, blind to its value: a half for an answer the scorer reads
    (`reads_an_answer`), a quarter for a non-empty last ``\boxed{}`` (the form the prompt asks for), a quarter
    for a completion that ends with its answer: after the last place the answer is written (its box, else its
    text) nothing follows on the completion's last non-empty line but closing punctuation."""
    text = strip_echo(completion, prompt).rstrip()
    answer = _read_answer(task, completion, reference, prompt)
    if not answer:
        return 0.0
    boxed = bool((last_boxed(text) or "").strip())
    last_line = text.splitlines()[-1] if text else ""
    after = _after_last(last_line, answer, boxed)
    ends = after is not None and _CLOSING.fullmatch(after) is not None
    return 0.5 + 0.25 * boxed + 0.25 * ends


def _after_last(line: str, answer: str, boxed: bool) -> str | None:
    """What follows the answer's last occurrence on `line` (after the box's closing brace where it is
    boxed: the answer is then the box's content), or None where the line does not hold it."""
    i = line.rfind(answer)
    if i < 0:
        return None
    after = line[i + len(answer):]
    if boxed:
        after = after.lstrip()
        return after[1:] if after.startswith("}") else None
    return after


def format_reward(task, scale: float = 1.0) -> Reward:
    """The format control's reward: `scale` times the answer's form (`format_score`)."""
    return lambda completion, answer, prompt: scale * format_score(task, completion, answer, prompt)


class RandomReward:
    """The random-reward control's reward: `scale` with probability p, p the true reward's mean over the
    completions scored together (`batch`; TRL scores a step's completions on each process at once),
    independently of each completion's content. Draws are seeded by the run seed and the batch's text,
    so the same batch gets the same rewards in a resumed run. Called on one completion alone (no batch to
    take a rate from), it pays the true reward: a group's refill check of online filtering, which
    controls never use."""

    def __init__(self, true_reward: Reward, scale: float, seed: int):
        self.true_reward, self.scale, self.seed = true_reward, scale, int(seed)

    def __call__(self, completion: str, answer: str, prompt: str) -> float:
        return self.true_reward(completion, answer, prompt)

    def batch(self, completions: Sequence[str], answers: Sequence[str], prompts: Sequence[str]) -> list[float]:
        if not completions:
            return []
        true = [self.true_reward(c, a, p) for c, a, p in zip(completions, answers, prompts)]
        rate = min(1.0, max(0.0, sum(true) / (len(true) * self.scale))) if self.scale else 0.0
        digest = hashlib.sha256("\x00".join(f"{p}\x01{c}" for p, c in zip(prompts, completions)).encode()).digest()
        rng = _rng(self.seed, "random reward " + digest.hex())
        return [self.scale * float(u < rate) for u in rng.random(len(completions))]


def control_rows(control: str | None, rows: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], str]:
    """The rows a run trains on: the subset's, or the control's own (`Control.rows`: shuffled references for the
    shuffled control); and a note for the log ("" when there is nothing to say)."""
    rewrite = REGISTRY[control].rows if control is not None else None
    return rewrite(rows, seed) if rewrite else (rows, "")


def task_reward(task, scale: float = 1.0) -> Reward:
    """The verifiable reward: `scale` times the task's score, 1 for a completion its scorer accepts, else 0 (or a
    verifier's partial credit: Task.score). A task's reward hook (tasks.<task>.reward) is called the same way in its
    place (run_reward, hardex.reward_hook)."""
    return lambda completion, answer, prompt: scale * task.score(completion, answer, prompt)


def run_reward(control: str | None, task, scale: float, seed: int = 0, hook: str | None = None) -> Reward:
    """The reward a run trains with: its control's (`Control.reward`, the random-reward control's draws seeded by the
    run `seed`), or the true reward: `task_reward(task, scale)`, or the reward hook `hook` names in its place
    (tasks.<task>.reward, a spec of hardex.reward_hook), which for the shuffled control reads the shuffled
    references `control_rows` wrote. The true reward is built only for a control that calls it (never the format
    control's: a hook is not loaded for it)."""
    if control is not None and control not in REGISTRY:
        raise ValueError(f"unknown control {control!r}")

    def true_reward() -> Reward:
        return hook_reward(hook, scale) if hook else task_reward(task, scale)

    return true_reward() if control is None else REGISTRY[control].reward(task, scale, seed, true_reward)


@dataclass(frozen=True)
class RewardSpec:
    """A run's reward as data: what the train job builds it from (hardex.training.train_grpo) and what the processes
    of a run trained in several are handed (a function cannot cross to them; hardex.train_worker). Both build it
    by `function`. The shuffled control's references come with the run's rows (`control_rows`), not from here."""

    family: str  # the task's family and scoring (hardex.tasks.get_task)
    scoring: str
    scale: float  # grpo.reward_scale
    control: str | None = None  # selection.controls: random_reward, format, shuffled, or None
    hook: str | None = None  # the task's reward hook (tasks.<task>.reward), its file resolved (reward_hook.resolved)

    def function(self, seed: int) -> Reward:
        """The reward function of run seed `seed` (run_reward)."""
        return run_reward(self.control, get_task(self.family, self.scoring), self.scale, seed, self.hook)


@dataclass(frozen=True)
class RewardWords:
    """What a log line says of the true reward a run's reward is made from: its scale, and the task's scorer or the
    reward hook (`hook`) in its place."""

    scale: float
    hook: str | None = None

    @property
    def scorer(self) -> str:
        return f"the reward hook {self.hook}" if self.hook else "the task's scorer"

    @property
    def paid(self) -> str:
        return f"{self.scale:g} x what it returns" if self.hook else f"{self.scale:g} if right, else 0"

    @property
    def rate(self) -> str:
        return f"the rate of the reward hook {self.hook}" if self.hook else "the true reward's rate"


def reward_line(control: str | None, scale: float, hook: str | None = None) -> str:
    """What the job's log says about the reward that ran (`hook`: the task's reward hook, where it has one): the
    true reward's line, or its control's (`Control.line`)."""
    # without a hook, the lines as they were: a control run's checkpoints are keyed by its line (scripts/train.py)
    words = RewardWords(scale, hook)
    if control is None:
        return f"reward: {words.scorer} against each example's own reference ({words.paid})"
    return REGISTRY[control].line(words)


@dataclass(frozen=True)
class Control:
    """A control (`selection.controls`; its runs `<strategy>_<name>`), everything the library knows of it in one
    record: what its runs train with, what their logs say, how the report draws them and reads them. A new control
    is one record in `REGISTRY` (docs/architecture.md, "Extending hardex")."""

    name: str
    #: (task, scale, run seed, the true reward's builder) -> the reward its runs train with (`run_reward`); the
    #: builder gives the task's scorer or its reward hook times the scale, called only by a control that uses it
    reward: Callable[[Any, float, int, Callable[[], Reward]], Reward]
    #: the train job's log line on its reward (`reward_line`), which also keys its runs' checkpoints: a changed line
    #: starts them afresh
    line: Callable[[RewardWords], str]
    linestyle: Any  # its runs' line in every figure (matplotlib's), beside its strategy's colour
    marker: str  # and their marker
    #: the headline reads a strategy against the control that leaves the least beyond it, on a tie the lowest here
    preference: int
    #: whether its reward calls the true one: where it does not (format), a task's reward hook is not in its runs'
    #: settings (settings.run_grpo_settings), so editing the hook does not retrain them
    calls_true_reward: bool = True
    #: (the subset's rows, run seed) -> the rows it trains on and a note for the log (`control_rows`), where they are
    #: not the subset's
    rows: Callable[[list[dict[str, Any]], int], tuple[list[dict[str, Any]], str]] | None = None
    #: said at planning where it runs on a choice task (`control_notices`), after "<task>: selection.controls.<name>"
    choice_notice: str | None = None


#: the controls, in the order tables and legends show them (each after its strategy; `selection.CONTROLS` is a view
#: of these names)
REGISTRY: dict[str, Control] = {c.name: c for c in (
    Control(
        "shuffled",
        reward=lambda task, scale, seed, true_reward: true_reward(),  # against the references `rows` shuffled
        line=lambda w: f"reward: shuffled control, {w.scorer} against another example's reference "
                       f"({w.paid.replace('right', 'it matches')})",
        linestyle="-.", marker="v", preference=2, rows=shuffled_rows,
        choice_notice="on a choice task pays another question's option, never the right one: it trains toward "
                      "wrong options (an incorrect-label reward, not a form control); selection.controls.random_reward "
                      "or format measure form",
    ),
    Control(
        "format",
        reward=lambda task, scale, seed, true_reward: format_reward(task, scale),
        line=lambda w: f"reward: format control, up to {w.scale:g} for the answer's form, right or wrong: a half for "
                       f"an answer the scorer reads, a quarter each for a boxed answer and a completion that ends with "
                       f"it",
        linestyle=(0, (5, 2)), marker="s", preference=1, calls_true_reward=False,
    ),
    Control(
        "random_reward",
        reward=lambda task, scale, seed, true_reward: RandomReward(true_reward(), scale, seed),
        line=lambda w: f"reward: random-reward control, {w.scale:g} at random with {w.rate} in each step, whatever "
                       f"the completion says, else 0",
        linestyle=":", marker="X", preference=0,
    ),
)}


def control_preference() -> tuple[str, ...]:
    """The controls in the order the headline reads them on ties (`Control.preference`): the random reward (no
    information at the true reward's rate), then format, then shuffled."""
    return tuple(sorted(REGISTRY, key=lambda name: REGISTRY[name].preference))
