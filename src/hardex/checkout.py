"""The workflow a command runs: its Snakefile and default config.yaml are the working directory's (the
checkout the user runs the command in) or the ones an option names, never looked for beside the library,
which a `pip install .` puts elsewhere. Imports nothing of hardex.
"""

from __future__ import annotations

from pathlib import Path


class MissingWorkflowFile(FileNotFoundError):
    """A workflow file that is not where it was looked for; str() is one line naming it and the option."""


def workflow_file(name: str, option: str, given: Path | None = None) -> Path:
    """`given` (the command's `option`), else the working directory's `name` ("Snakefile", "config.yaml"),
    absolute. Raises MissingWorkflowFile, naming what is missing and how to point at it, where it is no file."""
    if given is not None:
        if not given.is_file():
            raise MissingWorkflowFile(f"{option} {given}: no such file")
        return given.resolve()
    here = Path(name).resolve()
    if not here.is_file():
        raise MissingWorkflowFile(f"no {name} in {Path.cwd()}: run this in the workflow's folder (a hardex "
                                  f"checkout) or name the file with {option}")
    return here
