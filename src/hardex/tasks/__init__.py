"""Task families and the registry that maps config names to them."""

from __future__ import annotations

import importlib

from hardex.tasks.base import BOX_INSTRUCTION, DataError, Task, check_split, last_boxed, strip_echo

# config name -> "module:Class"; imported lazily so that a task's heavy deps load only when used
REGISTRY: dict[str, str] = {
    "arith": "hardex.tasks.synthetic:ArithTask",
    "swaps": "hardex.tasks.synthetic:SwapsTask",
    "gsm8k": "hardex.tasks.gsm8k:GSM8KTask",
    "shuffled_objects": "hardex.tasks.bbh:ShuffledObjectsTask",
    "aime2025": "hardex.tasks.aime:AIMETask",
    "math": "hardex.tasks.math:MATHTask",
    "qa": "hardex.tasks.qa:QATask",
}

_cache: dict[str, Task] = {}


def get_task(family: str) -> Task:
    """The task object for a config family name; raises KeyError naming the known families."""
    if family not in _cache:
        if family not in REGISTRY:
            raise KeyError(f"unknown task family {family!r}; known: {', '.join(sorted(REGISTRY))}")
        module, cls = REGISTRY[family].split(":")
        _cache[family] = getattr(importlib.import_module(module), cls)()
    return _cache[family]


__all__ = ["BOX_INSTRUCTION", "DataError", "REGISTRY", "Task", "check_split", "get_task", "last_boxed", "strip_echo"]
