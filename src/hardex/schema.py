"""The config's JSON schema: where it lies (package data beside this module, so that an installed hardex carries
it) and the defaults it states, the one place they are written. A ground module: the stages that take a block of
settings without the config check (adaptive probing, a rehearsal, the GPU smoke) read their defaults here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

#: the config's JSON schema: its keys, what each allows and its defaults (hardex.config validates against it)
SCHEMA = Path(__file__).resolve().parent / "config.schema.yaml"


def schema_defaults(*keys: str) -> dict[str, Any]:
    """The schema's defaults of the block at `keys` (e.g. "probe", "adaptive"): the one place they are
    written, for callers of the library that pass a block without going through the config check."""
    schema = yaml.safe_load(SCHEMA.read_text())
    node = schema
    for key in keys:
        node = node["properties"][key]
        if "$ref" in node:  # "#/$defs/grpo"
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return {k: v["default"] for k, v in node["properties"].items() if "default" in v}
