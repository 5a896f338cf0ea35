"""Task families and the registry that maps config names to them."""

from __future__ import annotations

import copy
import importlib
from typing import Any

from hardex.tasks import seeded
from hardex.tasks.base import (
    BOX_INSTRUCTION,
    DEFAULT_TEMPLATE,
    DataError,
    PromptFormat,
    Task,
    check_split,
    last_boxed,
    strip_echo,
    template_error,
)

# config name -> "module:Class"; imported lazily so that a task's heavy deps load only when used
REGISTRY: dict[str, str] = {
    "arith": "hardex.tasks.synthetic:ArithTask",
    "swaps": "hardex.tasks.synthetic:SwapsTask",
    "addition": "hardex.tasks.synthetic:AdditionTask",
    "gsm8k": "hardex.tasks.gsm8k:GSM8KTask",
    "shuffled_objects": "hardex.tasks.bbh:ShuffledObjectsTask",
    "aime2025": "hardex.tasks.aime:AIMETask",
    "math": "hardex.tasks.math:MATHTask",
    "qa": "hardex.tasks.qa:QATask",
    "reasoning_gym": "hardex.tasks.reasoning_gym:ReasoningGymTask",
}
SCORINGS = ("lenient", "flexible", "strict")
#: families whose Task implements released_correct: paper 1's released code has a scorer for them
STRICT_FAMILIES = frozenset({"gsm8k", "shuffled_objects", "aime2025"})

_cache: dict[tuple[str, str, PromptFormat], Task] = {}


def get_task(family: str, scoring: str = "lenient", prompt: dict[str, Any] | PromptFormat | None = None) -> Task:
    """The task object for a config family name, judging completions by `scoring` (see Task; a rehearsal's
    "rehearsal+<scoring>" runs that scorer and lets a seeded draw decide, hardex.tasks.seeded) and
    asking with `prompt`: a rule's prompt settings (tasks.<task>.prompt_template and system_prompt, where
    set; PromptFormat.of), today's prompt by default.

    Raises KeyError naming the known families, ValueError for a scoring the family lacks or a bad template.
    """
    fmt = PromptFormat.of(prompt)
    if (family, scoring, fmt) in _cache:
        return _cache[family, scoring, fmt]
    if scoring.startswith(seeded.PREFIX):
        scored = get_task(family, scoring.removeprefix(seeded.PREFIX), fmt)
        _cache[family, scoring, fmt] = seeded.RehearsalScoring(scored)
    elif fmt != PromptFormat():  # the family's task, asking otherwise
        task = copy.copy(get_task(family, scoring))
        task.prompt_format = fmt
        _cache[family, scoring, fmt] = task
    else:
        if family not in REGISTRY:
            raise KeyError(f"unknown task family {family!r}; known: {', '.join(sorted(REGISTRY))}")
        if scoring not in SCORINGS:
            raise ValueError(f"unknown scoring {scoring!r}; known: {', '.join(SCORINGS)}")
        if scoring == "strict" and family not in STRICT_FAMILIES:
            raise ValueError(f"task family {family!r} has no strict scoring: paper 1's released code scores only "
                             f"{', '.join(sorted(STRICT_FAMILIES))}")
        module, cls = REGISTRY[family].split(":")
        _cache[family, scoring, fmt] = getattr(importlib.import_module(module), cls)(scoring)
    return _cache[family, scoring, fmt]


__all__ = [
    "BOX_INSTRUCTION", "DEFAULT_TEMPLATE", "DataError", "PromptFormat", "REGISTRY", "SCORINGS", "STRICT_FAMILIES",
    "Task", "check_split", "get_task", "last_boxed", "strip_echo", "template_error",
]
