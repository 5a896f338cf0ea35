"""Reward hooks: a task's training reward from a function of the user's (`tasks.<task>.reward`), in place of
the task's scorer, as TRL's `reward_funcs` and verl's `custom_reward_function` allow.

A hook is named by a spec string: ``module:function`` or ``package.module:function`` (imported as Python
imports it: an installed package, or one on PYTHONPATH), or ``path/file.py:function``, a file relative to the
working directory (a user's study folder, where data files are read from too), else to the workflow's
directory where the file is there only (the one holding the Snakefile, which rules/common.smk puts in
HARDEX_WORKFLOW_DIR for planning and every job: the checkout's examples/), or an absolute path.
It is called as the task's scorer is in training, once per completion::

    hook(completion, answer, prompt) -> number

with the completion's text, the example's reference answer (a shuffled control's: another example's) and the
rendered prompt (chat template and system message included); the run's reward is `grpo.reward_scale` times what
it returns. Planning refuses a hook that does not import, is not callable or cannot be called that way
(`check_hook`), and one that raises or returns no finite number when called on a pool example with a right, an
empty and a wrong completion (`check_returns`), naming the key. A run's settings hold the spec and a hash of the
file the function is defined in (`hook_settings`), so editing that file trains again. The processes of a run
trained in several (hardex.train_worker) load the hook again by its spec: a function is not what crosses to them.

Evaluation never calls a hook: accuracy is the benchmark's, the task's scorer's.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

#: the variable naming the workflow's directory, where a relative hook file is found (set by rules/common.smk)
WORKFLOW_DIR_VARIABLE = "HARDEX_WORKFLOW_DIR"
#: the arguments a hook is called with, in order
CALLED_WITH = ("completion", "answer", "prompt")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_loaded: dict[tuple[str, Path], tuple[Callable, Path | None]] = {}


class HookError(ValueError):
    """A reward hook that cannot be used; str() is one line saying why."""


def _parts(spec: str) -> tuple[str, str]:
    target, sep, function = spec.rpartition(":")
    if not sep or not target or not function.isidentifier():
        raise HookError(f"{spec!r} is not module:function, package.module:function or path/file.py:function")
    return target, function


def is_file_spec(spec: str) -> bool:
    """Whether a spec names a file (path/file.py:function) rather than a module."""
    target = spec.rpartition(":")[0]
    return target.endswith(".py") or "/" in target or "\\" in target


def workflow_dir() -> Path:
    """The workflow's directory (HARDEX_WORKFLOW_DIR, which the Snakefile sets to its own folder), else the
    working directory (the library used from a checkout)."""
    return Path(os.environ.get(WORKFLOW_DIR_VARIABLE) or ".").resolve()


def hook_root(spec: str) -> Path:
    """Where a relative hook file is read from: the working directory, as a data file is (a user's study
    folder), else the workflow's directory where the file is there only (the checkout's examples/)."""
    target = _parts(spec)[0]
    here = Path.cwd().resolve()
    return next((root for root in (here, workflow_dir()) if (root / target).is_file()), here)


def resolved(spec: str, root: Path | None = None) -> str:
    """The spec with a relative file made absolute (from `root`, by default `hook_root`): what processes
    elsewhere load."""
    if not is_file_spec(spec):
        return spec
    target, function = _parts(spec)
    return f"{((root or hook_root(spec)) / target).resolve()}:{function}"


def _one_line(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


def _import(spec: str, root: Path):
    target, function = _parts(spec)
    if is_file_spec(spec):
        path = (root / target).resolve()
        if not path.is_file():
            where = "" if Path(target).is_absolute() else (f" (a relative path is read from the working directory, "
                                                            f"then from the workflow's, {workflow_dir()})")
            raise HookError(f"{spec}: no file {path}{where}")
        name = "hardex_reward_hook_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # what the file defines (dataclasses, pickled objects) finds its module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            sys.modules.pop(name, None)
            raise HookError(f"{spec}: loading {path} failed: {_one_line(e)}") from None
    else:
        if not _MODULE.fullmatch(target):
            raise HookError(f"{spec}: {target!r} is no module name (a file is named path/file.py)")
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            raise HookError(f"{spec}: no module named {e.name!r} (install it, put it on PYTHONPATH, or name a file: "
                            f"path/file.py:{function})") from None
        except Exception as e:
            raise HookError(f"{spec}: importing {target} failed: {_one_line(e)}") from None
    if not hasattr(module, function):
        raise HookError(f"{spec}: {target} defines no {function!r}")
    return getattr(module, function), module


def load_hook(spec: str, root: Path | None = None) -> Callable:
    """The hook a spec names, checked (`check_hook`); loaded once per process."""
    return _load(spec, root)[0]


def _load(spec: str, root: Path | None) -> tuple[Callable, Path | None]:
    root = Path(root) if root is not None else hook_root(spec)
    key = (spec, root)
    if key not in _loaded:
        fn, module = _import(spec, root)
        if not callable(fn):
            raise HookError(f"{spec}: {fn!r} is not callable")
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # some builtins have none to read: they are called and fail then
            signature = None
        if signature is not None:
            try:
                signature.bind(*CALLED_WITH)
            except TypeError as e:
                name = spec.rpartition(":")[2]
                raise HookError(f"{spec}: cannot be called as {name}({', '.join(CALLED_WITH)}): its signature "
                                f"is {signature} ({e})") from None
        try:
            source = inspect.getsourcefile(fn)
        except TypeError:
            source = None
        source = source or getattr(module, "__file__", None)
        _loaded[key] = (fn, Path(source) if source else None)
    return _loaded[key]


def check_hook(spec: str, root: Path | None = None) -> None:
    """Raise HookError (one line) unless the spec names a callable that takes (completion, answer, prompt)."""
    _load(spec, root)


def hook_settings(spec: str, root: Path | None = None) -> dict[str, Any]:
    """What a run's settings hold of its hook: the spec and the sha256 of the file the function is defined in
    (None where it has no file), so that an edit of the hook trains the run again."""
    source = _load(spec, root)[1]
    digest = hashlib.sha256(source.read_bytes()).hexdigest() if source and source.is_file() else None
    return {"spec": spec, "sha256": digest}


def hook_reward(spec: str, scale: float = 1.0, root: Path | None = None) -> Callable[[str, str, str], float]:
    """The training reward of a hook: `scale` times its number for each completion (hardex.controls.task_reward's
    form); a value that is not a finite number stops the run, naming the hook."""
    hook = load_hook(spec, root)

    def reward(completion: str, answer: str, prompt: str) -> float:
        try:
            value = hook(completion, answer, prompt)
        except Exception as e:  # tied to the hook and the call, not a bare traceback from inside the trainer
            raise HookError(f"reward hook {spec} raised {_one_line(e)} when called with completion "
                            f"{completion[:60]!r}, answer {answer[:60]!r}") from e
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise HookError(f"reward hook {spec} returned {value!r}, not a number") from None
        if not math.isfinite(number):
            raise HookError(f"reward hook {spec} returned {number}")
        return scale * number

    return reward


def trial_calls(question: str, answer: str) -> list[tuple[str, str, str]]:
    """What planning calls a hook with, as training will (completion, answer, prompt): a completion that is the
    right answer boxed, one that is empty, and one that is wrong."""
    return [(f"The answer is \\boxed{{{answer}}}.", answer, question), ("", answer, question),
            ("I do not know.", answer, question)]


def check_returns(spec: str, calls: list[tuple[str, str, str]], root: Path | None = None) -> None:
    """Call the hook on each (completion, answer, prompt) as training will: HookError (one line) where it raises
    or returns anything but a finite number, before a job is queued for it."""
    reward = hook_reward(spec, 1.0, root)
    for completion, answer, prompt in calls:
        reward(completion, answer, prompt)
