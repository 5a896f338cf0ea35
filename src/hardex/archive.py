"""Studies that outlive one machine: a study's small results packed into one archive and unpacked into
another checkout, where Snakemake treats them as done (docs/archive.md).

    hardex-archive pack study.tar.gz [--directory WORKDIR] [--configfile CONFIG] [--adapters]
    hardex-archive unpack study.tar.gz [--directory WORKDIR] [--configfile CONFIG] [--cores N] [--snakefile FILE]
    hardex-archive show study.tar.gz

An archive holds the results layout's small files (data splits, overlap checks, probe tables and samples,
subsets, steps, evaluations, timings), Snakemake's metadata record of each of those outputs, so that its
params, input and code triggers still rerun what a later edit touches, and `manifest.json` (code version,
date, the checked config, each file's sha256 and size, the runs and whether each is complete). The models
are left out (the workflow makes them again) and so is the resumable training state; a run's final/ folder
is a placeholder (`evaluation.NO_ADAPTERS`) unless packed with --adapters, which also packs the weights of
each checkpoint that evaluation reads. Unpacking runs the workflow of the working directory's Snakefile (run
it in the checkout) or of the one --snakefile names; the code version is that checkout's.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import yaml

from hardex import layout
from hardex.checkout import MissingWorkflowFile, workflow_file
from hardex.config import ConfigError, check_config
from hardex.evaluation import NO_ADAPTERS
from hardex.io import atomic_path
from hardex.settings import run_strategies, seed_list

MANIFEST = "manifest.json"
METADATA = ".snakemake/metadata"  # Snakemake's file persistence: one record per output (`snakemake_records`)

# the outputs an archive holds, each made by one job whose metadata record travels with it
OUTPUTS = (layout.DATA, layout.OVERLAP, layout.PROBE, layout.PROBE_SAMPLES, layout.SUBSET, layout.STEPS,
           layout.EVAL_BASE, layout.EVAL_RUN, layout.LOOK)
# settings an archive's results do not depend on: a target config may differ in them
FREE_KEYS = ("seeds", "report", "compute")
# lists a target config may extend: more strategies and controls add runs and change none of the archived ones
GROWING = (("selection", "strategies"), ("selection", "online_strategies"), ("selection", "allow_unlearnable"),
           ("selection", "controls"))
# what a checkpoint holds only to resume training (optimizer, scheduler, RNG states): never archived
RESUME_STATE_SUFFIXES = (".pt", ".pth")

PLACEHOLDER_TEXT = (
    "This run's weights were left out of the archive (hardex-archive pack without --adapters).\n"
    "Its steps and evaluation are here; evaluating it again needs them: retrain it\n"
    "(snakemake -R <run>/steps.parquet) or unpack an archive made with --adapters.\n"
)
_ABSENT = object()


class ArchiveError(Exception):
    """An archive that cannot be made or unpacked; str() is one line for the user."""


# ---- what a study is made of ---------------------------------------------------------------------------


def code_version(checkout: Path = Path(".")) -> str:
    """`git describe --always --dirty` of the workflow's checkout (by default the working directory, where the
    command runs), else the installed package's version."""
    if (checkout / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(checkout), "describe", "--always", "--dirty"],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return version("hardex")
    except PackageNotFoundError:
        return "unknown"


def load_config(path: Path) -> dict[str, Any]:
    """A config file as `hardex.config.check_config` leaves it (defaults filled, keys sorted)."""
    if not path.is_file():
        raise ArchiveError(f"{path}: no such config file (give --configfile)")
    try:
        return check_config(yaml.safe_load(path.read_text()) or {})
    except ConfigError as e:
        raise ArchiveError(f"{path}: config error: {e}") from None


def _kind(rel: str) -> tuple[str, dict[str, Any]] | None:
    """The layout template a results path is a file of, with its fields (None: not an archived kind)."""
    for template in (*OUTPUTS, *layout.TIMINGS.values()):
        try:
            return template, layout.identity(template, rel)
        except layout.LayoutError:
            continue
    return None


def _in_config(fields: dict[str, Any], cfg: dict[str, Any]) -> bool:
    """Whether a file's fields name this config's datasets, models, tasks, runs and seeds: leftovers of
    earlier settings stay behind (no rule of this config could make them)."""
    datasets = cfg["datasets"]
    checks = {
        "dataset": lambda v: v in datasets,
        "split": lambda v: v in datasets.get(fields.get("dataset"), {}).get("splits", {}),
        "model": lambda v: v in cfg["models"],
        "task": lambda v: v in cfg["tasks"],
        "strategy": lambda v: v in run_strategies(cfg),
        "seed": lambda v: v in seed_list(cfg),  # a sequential design's: 0 .. max - 1
    }
    return all(checks[k](v) for k, v in fields.items() if k in checks)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def snakemake_records(workdir: Path) -> dict[str, Path]:
    """Snakemake's metadata record of each output, by the output's path: the file persistence names a record
    by the path urlsafe-base64-encoded, cut into folders named '@<part>' where a name would pass the file
    system's limit (snakemake/persistence/file.py, `_record_path`); read here from the names themselves."""
    root = workdir / METADATA
    records = {}
    for path in root.rglob("*") if root.is_dir() else ():
        if path.is_file():
            encoded = "".join(part.lstrip("@") for part in path.relative_to(root).parts)
            try:
                records[base64.urlsafe_b64decode(encoded).decode()] = path
            except (ValueError, UnicodeDecodeError):
                continue  # not a record
    return records


def study_files(workdir: Path, cfg: dict[str, Any], adapters: bool) -> tuple[dict[str, Path | None], list[str], int,
                                                                            list[str]]:
    """(the files to archive, by path; None for a final/ placeholder), the outputs Snakemake made of them
    (final/ folders as folders), how many result files were left out as not this config's, and the runs
    trained but not yet evaluated whose training was left out because their weights were (they train again
    where the archive is unpacked: unpacked without weights, their evaluation could not run)."""
    files: dict[str, Path | None] = {}
    outputs, left_out, unevaluated = [], 0, []
    for path in sorted((workdir / "results").rglob("*")):
        rel = path.relative_to(workdir).as_posix()
        kind = _kind(rel) if path.is_file() else None
        if kind is None:
            continue
        template, fields = kind
        if not _in_config(fields, cfg):
            left_out += 1
            continue
        if template == layout.STEPS:  # the train job's two outputs: its steps and its final/ folder
            final = workdir / layout.fill(layout.FINAL, **fields)
            if not final.is_dir():
                continue  # a run Snakemake would not count as trained
            if not adapters and not (workdir / layout.fill(layout.EVAL_RUN, **fields)).is_file():
                unevaluated.append(layout.fill(layout.RUN_DIR, **fields))
                continue
            final_rel = final.relative_to(workdir).as_posix()
            outputs.append(final_rel)
            if adapters:
                files.update(_run_weights(workdir, final.parent))
            else:
                files[f"{final_rel}/{NO_ADAPTERS}"] = None
        files[rel] = path
        if template in OUTPUTS:
            outputs.append(rel)
    return files, sorted(outputs), left_out, unevaluated


def _run_weights(workdir: Path, run_dir: Path) -> dict[str, Path]:
    """A run's final/ folder and what evaluation reads of each checkpoint (weights, configs, trainer state),
    without the state that resumes training; the checkpoints' settings marker stays behind too, so a retrain
    starts afresh rather than resuming from weights alone (hardex.training.train_grpo)."""
    found = {p.relative_to(workdir).as_posix(): p for p in sorted((run_dir / "final").rglob("*")) if p.is_file()}
    for ckpt in sorted((run_dir / "checkpoints").glob("checkpoint-*")):
        if (ckpt / "trainer_state.json").is_file():
            found.update({p.relative_to(workdir).as_posix(): p for p in sorted(ckpt.rglob("*"))
                          if p.is_file() and not p.name.endswith(RESUME_STATE_SUFFIXES)})
    return found


def _runs(outputs: list[str]) -> list[dict[str, Any]]:
    """Each run with steps or an evaluation, complete when it has both."""
    runs: dict[tuple, dict[str, Any]] = {}
    for rel in outputs:
        for template, key in ((layout.STEPS, "steps"), (layout.EVAL_RUN, "evaluation")):
            try:
                fields = layout.identity(template, rel)
            except layout.LayoutError:
                continue
            run = runs.setdefault(tuple(fields.values()), {**fields, "steps": False, "evaluation": False})
            run[key] = True
    return [{**r, "complete": r["steps"] and r["evaluation"]} for _, r in sorted(runs.items())]


# ---- pack ---------------------------------------------------------------------------------------------


def pack(archive: Path, workdir: Path, configfile: Path, adapters: bool = False, log=print) -> dict[str, Any]:
    """Write the study in `workdir` (results of `configfile`) to `archive`; return its manifest."""
    if not (workdir / "results").is_dir():
        raise ArchiveError(f"{workdir}: no results/ folder to pack (give --directory)")
    cfg = load_config(configfile)
    files, outputs, left_out, unevaluated = study_files(workdir, cfg, adapters)
    if not outputs:
        raise ArchiveError(f"{workdir}/results: none of this config's results are there")
    records = snakemake_records(workdir)
    for out in outputs:
        if out in records:
            files[records[out].relative_to(workdir).as_posix()] = records[out]
    unrecorded = sum(out not in records for out in outputs)
    placeholder = PLACEHOLDER_TEXT.encode()
    entries = [{"path": rel, "sha256": hashlib.sha256(placeholder).hexdigest() if p is None else _sha256(p),
                "size": len(placeholder) if p is None else p.stat().st_size} for rel, p in sorted(files.items())]
    runs = _runs(outputs)
    manifest = {
        "format": 1,
        "code_version": code_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "adapters": adapters,
        "config": cfg,
        "outputs": outputs,
        "runs": runs,
        "files": entries,
    }
    text = json.dumps(manifest, indent=2, default=str).encode()
    archive.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(archive) as tmp, tarfile.open(tmp, "w:gz", dereference=True) as tar:
        _add_bytes(tar, MANIFEST, text, datetime.now().timestamp())
        for rel, path in sorted(files.items()):
            if path is None:  # the placeholder dated as its run's final/ folder
                _add_bytes(tar, rel, placeholder, _mtime(workdir / Path(rel).parent))
            else:
                tar.add(path, arcname=rel, recursive=False)
    size = sum(e["size"] for e in entries)
    log(f"hardex-archive: packed {len(entries)} files ({size / 1e6:.1f} MB) of {len(runs)} runs "
        f"({sum(r['complete'] for r in runs)} complete) into {archive}; weights "
        + ("included" if adapters else "left out (--adapters packs them)")
        + (f"; {left_out} result files of settings this config does not name left out" if left_out else "")
        + (f"; {len(unevaluated)} runs trained but not evaluated left out, to train again: {', '.join(unevaluated)}"
           if unevaluated else "")
        + (f"; {unrecorded} outputs without a Snakemake record (unpack records them as the config says)"
           if unrecorded else ""))
    return manifest


def _mtime(folder: Path) -> float:
    stamp = folder / ".snakemake_timestamp"  # Snakemake dates a folder output by it
    return (stamp if stamp.exists() else folder).stat().st_mtime


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), mtime, 0o644
    tar.addfile(info, io.BytesIO(data))


# ---- unpack -------------------------------------------------------------------------------------------


def read_manifest(archive: Path) -> dict[str, Any]:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(MANIFEST)
            return json.loads(member.read())
    except (OSError, KeyError, tarfile.TarError, json.JSONDecodeError, AttributeError) as e:
        raise ArchiveError(f"{archive}: not a hardex archive ({type(e).__name__}: {e})") from None


def _show(value: Any) -> str:
    return "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True, default=str)


def config_differences(archived: dict[str, Any], target: dict[str, Any], path: tuple = ()) -> list[str]:
    """One line per setting in which `target` differs from the config an archive's results were made with,
    among those the results depend on: every key but FREE_KEYS; GROWING lists may gain entries."""
    if path and path[0] in FREE_KEYS:
        return []
    if isinstance(archived, dict) and isinstance(target, dict):
        return [line for k in sorted(set(archived) | set(target), key=str)
                for line in config_differences(archived.get(k, _ABSENT), target.get(k, _ABSENT), (*path, k))]
    if any(path[:len(g)] == g for g in GROWING) and isinstance(target, list):
        before = [] if archived is _ABSENT else archived
        if isinstance(before, list) and all(v in target for v in before):
            return []
    if archived == target:
        return []
    return [f"{'.'.join(map(str, path))}: archive {_show(archived)}, config {_show(target)}"]


def refusals(manifest: dict[str, Any], cfg: dict[str, Any], workdir: Path) -> list[str]:
    """Why an archive must not be unpacked into `workdir` under `cfg` (nothing when it may): settings its
    results depend on that differ, and data splits already there with other contents."""
    lines = config_differences(manifest["config"], cfg)
    for entry in manifest["files"]:
        here = workdir / entry["path"]
        if (_kind(entry["path"]) or ("",))[0] == layout.DATA and here.is_file() \
                and (sha := _sha256(here)) != entry["sha256"]:
            lines.append(f"{entry['path']}: differs from the archive's (sha256 {sha[:12]} here, "
                         f"{entry['sha256'][:12]} in the archive): another study's data")
    return lines


def _checked_members(tar: tarfile.TarFile, manifest: dict[str, Any]) -> list[tarfile.TarInfo]:
    """The archive's files, each checked against the manifest (name, sha256) before anything is written."""
    expected = {e["path"]: e["sha256"] for e in manifest["files"]}
    members = []
    for member in tar:
        if member.name == MANIFEST:
            continue
        if (member.name not in expected or not member.isfile()
                or not member.name.startswith(("results/", METADATA + "/"))):
            raise ArchiveError(f"{member.name}: in the archive but not a file of its manifest's results")
        h = hashlib.sha256()
        with tar.extractfile(member) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        if h.hexdigest() != expected.pop(member.name):
            raise ArchiveError(f"{member.name}: damaged (its sha256 is not the manifest's)")
        members.append(member)
    if expected:
        raise ArchiveError(f"{sorted(expected)[0]}: in the manifest but not in the archive ({len(expected)} missing)")
    return members


def _keeps_weights(workdir: Path, member: tarfile.TarInfo) -> bool:
    """A placeholder that would land in a final/ folder holding a trained run's weights: left out."""
    folder = workdir / Path(member.name).parent
    return (Path(member.name).name == NO_ADAPTERS and folder.is_dir()
            and any(p.name not in (NO_ADAPTERS, ".snakemake_timestamp") for p in folder.iterdir()))


def _snakemake(snakefile: Path, workdir: Path, configfile: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile), "--directory", str(workdir),
           "--configfile", str(configfile), *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        tail = "\n".join(res.stderr.strip().splitlines()[-30:])
        raise ArchiveError(f"snakemake {' '.join(args[:3])} ... failed (exit {res.returncode}):\n{tail}")


def unpack(archive: Path, workdir: Path, configfile: Path, cores: str = "all", log=print,
           snakefile: Path | None = None) -> dict[str, Any]:
    """Unpack `archive` into `workdir`, where Snakemake then treats its outputs as done under `configfile` and
    `snakefile` (by default the working directory's; MissingWorkflowFile where there is none).

    Refused, with nothing written, when the config differs in a setting the results depend on, or a data
    split there differs. Otherwise: extract; make the models the workflow makes (they are not archived),
    the data they are made from first marked done, since a fresh checkout's scripts are newer than the
    archived data; then `snakemake --touch` over the archived outputs, which touches them job by job in
    the graph's order, after the models; finally the archived metadata records again over the ones the
    touch wrote, so params, input and code triggers compare with what the results were made with."""
    snakefile = workflow_file("Snakefile", "--snakefile", snakefile)
    manifest = read_manifest(archive)
    cfg = load_config(configfile)
    lines = refusals(manifest, cfg, workdir)
    if lines:
        raise ArchiveError("\n".join(f"refused: {line}" for line in lines))
    with tarfile.open(archive, "r:gz") as tar:
        members = _checked_members(tar, manifest)
    if manifest["code_version"] != (here := code_version(snakefile.parent)):
        log(f"hardex-archive: notice: packed by hardex {manifest['code_version']}, unpacked by {here}")
    workdir.mkdir(parents=True, exist_ok=True)
    names = {m.name for m in members if not _keeps_weights(workdir, m)}
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(workdir, members=[m for m in tar if m.name in names], filter="data")
    outputs = manifest["outputs"]
    made = [layout.fill(layout.MODEL, model=m) for m, spec in cfg["models"].items()
            if spec["path"] in layout.MADE_BY]
    if made:
        data = [o for o in outputs if _kind(o) and _kind(o)[0] == layout.DATA]
        if data:
            _snakemake(snakefile, workdir, configfile, "--touch", "--cores", str(cores), *data)
        log(f"hardex-archive: making {', '.join(made)} (models are not archived)")
        _snakemake(snakefile, workdir, configfile, "--cores", str(cores), *made)
    _snakemake(snakefile, workdir, configfile, "--touch", "--cores", str(cores), *outputs)
    with tarfile.open(archive, "r:gz") as tar:  # the records as the results were made
        tar.extractall(workdir, members=[m for m in tar if m.name.startswith(METADATA + "/")], filter="data")
    runs = manifest["runs"]
    log(f"hardex-archive: unpacked {len(names)} files of {len(runs)} runs ({sum(r['complete'] for r in runs)} "
        f"complete) into {workdir}; Snakemake treats them as done (snakemake -n: what remains to run)")
    return manifest


# ---- the command --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hardex-archive", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("pack", "write a study's small results to ARCHIVE"),
                       ("unpack", "unpack ARCHIVE into a checkout, its outputs done for Snakemake"),
                       ("show", "print ARCHIVE's manifest")):
        p = sub.add_parser(name, help=what)
        p.add_argument("archive", type=Path, help="the archive (.tar.gz)")
        if name != "show":
            p.add_argument("--directory", type=Path, default=Path("."),
                           help="the workflow's directory (snakemake --directory; default: here)")
            p.add_argument("--configfile", type=Path, help="the study's config (default: WORKDIR/config.yaml)")
    sub.choices["pack"].add_argument("--adapters", action="store_true",
                                     help="pack each run's final/ folder and its checkpoints' weights too")
    sub.choices["unpack"].add_argument("--cores", default="all", help="cores for making the models (default: all)")
    sub.choices["unpack"].add_argument("--snakefile", type=Path, help="the workflow's Snakefile (default: ./Snakefile)")
    args = parser.parse_args(argv)
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    try:
        if args.command == "show":
            print(json.dumps(read_manifest(args.archive), indent=2))
            return 0
        workdir = args.directory.resolve()
        configfile = (args.configfile or workdir / "config.yaml").resolve()
        if args.command == "pack":
            pack(args.archive.resolve(), workdir, configfile, args.adapters, log)
        else:
            unpack(args.archive.resolve(), workdir, configfile, args.cores, log, args.snakefile)
    except (ArchiveError, MissingWorkflowFile) as e:
        for line in str(e).splitlines():
            log(f"hardex-archive: {line}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
