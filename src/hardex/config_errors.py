"""A config's errors: `ConfigError`, and what the JSON schema's validation finds, each as one line that names the
key, the value and what is allowed (with a hint where a value's form says what was meant: a TRL setting's name, a
percentage for a share, YAML reading 3e-5 as text)."""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """An invalid config; str() is the one-line message for the user."""


def key_path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _number_hint(value, expected) -> str:
    """Why a number came as text: YAML 1.1 reads 3e-5 (no dot before the exponent) as a string."""
    if isinstance(value, str) and "number" in str(expected):
        try:
            number = float(value)
        except ValueError:
            return ""
        mantissa, _, exponent = value.lower().partition("e")
        if exponent and "." not in mantissa:
            return f" (YAML reads {value} as text: write {mantissa}.0e{exponent})"
        return f" (write {number!r} without quotes)"
    return ""


#: keys users bring from TRL's GRPOConfig, and what to write instead
TRL_KEYS = {
    "per_device_train_batch_size": "a step's batch is grpo.prompts_per_step prompts x grpo.num_generations "
                                   "completions (grpo.gradient_accumulation_steps splits it)",
    "num_train_epochs": "write grpo.epochs (a step budget by epochs) or grpo.max_steps",
    "reward_funcs": "a task's reward is its scorer, or a hook of your own in tasks.<task>.reward (module:function)",
    "max_steps_per_epoch": "write grpo.max_steps",
    "bf16": "write grpo.precision: bf16",
    "fp16": "write grpo.precision: fp16",
    "output_dir": "runs are written under results/train/<model>/<task>/<strategy>/seed<N>",
}


def _share_hint(key: str, value) -> str:
    """A budget is a share of the pool: '10%' and 10 were meant as 0.1."""
    if key.rsplit(".", 1)[-1] != "budget":
        return ""
    text = str(value).strip()
    try:
        percent = float(text.removesuffix("%"))
    except ValueError:
        return " (a share of the pool, between 0 and 1)"
    if text.endswith("%"):
        return f" (a share of the pool: write {percent / 100:g} for {percent:g} %)"
    return f" (a share of the pool: {percent:g} % is {percent / 100:g})" if 1 < percent <= 100 else ""


def schema_error_line(err) -> str:
    """One line for a jsonschema ValidationError: key, value, what is allowed."""
    if err.validator == "oneOf" and err.context:  # one of several forms: the error of the form the value has
        same_type = [e for e in err.context if e.validator != "type"]
        if same_type:
            return schema_error_line(min(same_type, key=lambda e: len(e.relative_schema_path)))
        types = " or ".join(str(e.schema["type"]) for e in err.context)
        return f"{key_path(err.absolute_path)}: {err.instance!r} has the wrong type; expected {types}"
    key = key_path(err.absolute_path)
    v, kind, sch = err.instance, err.validator, err.schema
    if kind == "additionalProperties":
        allowed = sorted(sch.get("properties", {}))
        extra = sorted(set(v) - set(allowed)) if isinstance(v, dict) else []
        where = f"{key}." if err.absolute_path else ""
        name = extra[0] if extra else "?"
        if name in TRL_KEYS:
            return f"{where}{name}: unknown key (a TRL setting): {TRL_KEYS[name]}"
        hint = f"; allowed: {', '.join(allowed)}" if allowed else ""
        return f"{where}{name}: unknown key{hint}"
    if kind == "required":
        missing = [r for r in sch["required"] if r not in v]
        return f"{key + '.' if err.absolute_path else ''}{missing[0]}: required key is missing"
    if kind == "enum":  # a rehearsal's own scorings (hardex-rehearse writes them) are not for a user to write
        allowed = [str(e) for e in sch["enum"] if not str(e).startswith("rehearsal+")]
        other = "; for another card state its peaks in compute.gpu_rates" if key == "compute.gpu_kind" else ""
        return f"{key}: {v!r} is not allowed; allowed: {', '.join(allowed)}{other}"
    if kind == "type":
        hint = _share_hint(key, v) or _number_hint(v, sch["type"])
        return f"{key}: {v!r} has the wrong type; expected {sch['type']}{hint}"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[kind]
        rng = [f"{o} {sch[k]}" for k, o in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                            ("maximum", "<="), ("exclusiveMaximum", "<")) if k in sch]
        return f"{key}: {v!r} is out of range; must be {' and '.join(rng) or op}{_share_hint(key, v)}"
    if kind == "pattern":
        why = f" ({sch['description']})" if sch.get("description") else ""
        return f"{key}: {v!r} does not match {sch['pattern']}{why}"
    if kind in ("minItems", "minProperties") and sch[kind] > 1:
        return f"{key}: {v!r} is too short; needs {sch[kind]} entries"
    if kind in ("minItems", "minProperties"):
        return f"{key}: must not be empty"
    if kind == "maxItems":
        return f"{key}: {v!r} is too long; at most {sch[kind]} entries"
    if kind == "uniqueItems":
        return f"{key}: {v!r} has duplicate entries"
    return f"{key}: {err.message}"


def schema_errors(config: dict, schema_path: Path) -> list:
    """Validate with Snakemake's own `validate` (which fills defaults); return jsonschema errors."""
    import jsonschema
    import yaml
    from snakemake.utils import validate

    schema = yaml.safe_load(schema_path.read_text())
    try:
        validate(config, str(schema_path), set_default=True)
        return []
    except Exception:
        # Snakemake's message is a multi-line dump; recompute the errors to report them precisely
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
        if errors:
            return errors
        raise
