"""Hub models and datasets fetched where there is internet, and jobs run with the hub offline once the cache
holds them (docs/offline-gpu.md, profiles/README.md).

    hardex-fetch [--configfile CONFIG ...]

`hardex-fetch` reads a config as the workflow does (by default the working directory's config.yaml, the
workflow's own where it runs in the checkout) and puts every hub model (`models.<name>.path` a hub id)
and every hub dataset split the tasks and built models read (`datasets.<dataset>.splits.<split>.hub`) into
the local Hugging Face cache: on a cluster's login node before submitting, since compute nodes often have
no internet. One line per item: fetched, already cached, or failed and why: no such repository, a gated
one, or no network. It exits non-zero when one failed.

At planning (`offline_jobs`, from rules/common.smk) the cache is looked up, never the hub: when it holds
everything, the jobs run with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 (nothing asks the hub, whose
retries on an unreachable network take minutes), else one notice names what is missing and the command
that fetches it. `hub_errors` turns what the hub libraries raise into one line naming the config key, for
hardex-fetch and for the dataset job alike.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hardex.checkout import workflow_file
from hardex.config import ConfigError, check_config, check_duplicate_keys
from hardex.layout import MADE_BY
from hardex.model_sources import is_hub_id
from hardex.models import FINGERPRINT_SUFFIXES, HUB_SKIP
from hardex.settings import GENERATED_FAMILIES, split_spec
from hardex.tasks import get_task
from hardex.tasks.base import DataError

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
# the files of a hub model that jobs load, as hardex.models.resolve_model downloads them
MODEL_FILES = {"allow_patterns": [f"*{s}" for s in FINGERPRINT_SUFFIXES], "ignore_patterns": list(HUB_SKIP)}


class HubError(DataError):
    """A hub model or dataset that cannot be had; str() is one line starting with its config key."""


@dataclass(frozen=True)
class HubItem:
    """One hub repository a config names: `key` is the config key that names it, `kind` model or dataset,
    `sources` the (config, split) pairs of a dataset that its loader reads (none for a model)."""

    key: str
    kind: str
    repo: str
    sources: tuple[tuple[str | None, str], ...] = ()

    def __str__(self) -> str:
        """The key, the repository and a dataset's sources: `datasets.x.splits.test.hub (openai/gsm8k main/test)`."""
        sources = "".join(f", {c}/{s}" if c else f", {s}" for c, s in self.sources).replace(", ", " ", 1)
        return f"{self.key} ({self.repo}{sources})"


# ---- what a config names on the hub ------------------------------------------------------------------


def hub_sources(family: str, spec: dict[str, Any]) -> list[tuple[str | None, str]]:
    """The (config, split) pairs of its hub dataset that a family's loader reads for a split `spec`, each one
    `datasets.load_dataset` call in hardex.tasks.rows (the family's own `Task.sources`)."""
    return [(s.get("config"), s.get("split") or "train") for s in get_task(family).sources(spec)]


def hub_items(cfg: dict) -> list[HubItem]:
    """Every hub model of a checked config and every hub dataset split its tasks and built models read."""
    items = [HubItem(f"models.{name}.path", "model", m["path"]) for name, m in cfg["models"].items()
             if m["path"] not in MADE_BY and not Path(m["path"]).expanduser().exists() and is_hub_id(m["path"])]
    refs = [ref for t in cfg["tasks"].values() for ref in (t["pool"], *t["benchmarks"])]
    refs += [ref for m in cfg["models"].values() for ref in (m.get("build") or {}).get("sft_from") or []]
    datasets = [dataset_item(ref, split_spec(cfg, ref)) for ref in dict.fromkeys(refs)]
    return items + [item for item in datasets if item is not None]


def dataset_item(ref: str, source: dict) -> HubItem | None:
    """The hub item of dataset split `ref` ('dataset/split', its split_spec `source`); None for a local file
    or a generator."""
    spec = source["spec"]
    if source["family"] in GENERATED_FAMILIES or spec.get("file") or not spec.get("hub"):
        return None
    dataset, split = ref.split("/", 1)
    return HubItem(f"datasets.{dataset}.splits.{split}.hub", "dataset", spec["hub"],
                   tuple(hub_sources(source["family"], spec)))


# ---- the cache, looked up without the hub -------------------------------------------------------------


def cached(item: HubItem) -> bool:
    """Whether the local cache holds what the jobs load of `item`: a model's snapshot with its config and
    every file the cached file listing names, or each (config, split) of a dataset as `datasets` prepared it."""
    if item.kind == "model":
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            folder = snapshot_download(item.repo, local_files_only=True, **MODEL_FILES)
        except LocalEntryNotFoundError:
            return False
        return (Path(folder) / "config.json").exists()
    return all(_dataset_cached(item.repo, config, split) for config, split in item.sources)


def _dataset_cached(repo: str, config: str | None, split: str) -> bool:
    """Whether `datasets` holds a prepared (config, split) of hub dataset `repo`: the lookup it makes itself when
    it loads a dataset offline (its `cache` builder)."""
    from datasets.packaged_modules.cache.cache import Cache

    with _quiet("datasets"):  # it logs each cached dataset it finds
        try:
            builder = Cache(repo_id=repo, dataset_name=repo.split("/")[-1], config_name=config, version="auto",
                            hash="auto")
        except (ValueError, OSError):  # none, or a folder without its dataset_info.json (cut short)
            return False
    return split in (builder.info.splits or {})


@contextlib.contextmanager
def _quiet(logger: str):
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


# ---- what the hub libraries raise, in one line ---------------------------------------------------------

MISSING, GATED, UNREACHABLE, NO_SPLIT = "missing", "gated", "unreachable", "no split"
_UNKNOWN_SPLIT = re.compile(r'Unknown split "(?P<split>[^"]*)"\. Should be one of \[(?P<splits>.*)\]')


def classify(error: BaseException) -> tuple[str, str] | None:
    """(kind, reason) of a hub failure: MISSING (no such repository; the hub answers 404, or 401 to one that
    is private or not there), GATED (a gated repository without access), UNREACHABLE (no network, a timeout,
    the hub offline or failing), NO_SPLIT (the dataset has no split of that name: the reason lists the splits it
    has); None for anything else. The whole chain of causes is read, the repository's
    answer first: huggingface_hub reports a 404 behind "cannot find it in the cache", and `datasets` reports an
    offline hub or a refused connection as a ConnectionError that reads the same as a missing dataset."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    chain, seen = [error], set()
    while chain:
        e = chain.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        chain += [e.__cause__, e.__context__]
        status = getattr(getattr(e, "response", None), "status_code", None) if isinstance(e, HfHubHTTPError) else None
        if isinstance(e, GatedRepoError) or status == 403 or (_dataset_not_found(e) and "gated" in str(e)):
            return GATED, _first_line(e)
        if status in (401, 404) or _dataset_not_found(e):  # RepositoryNotFoundError is a 401 or 404
            return MISSING, _first_line(e)
    for e in [error, *_causes(error)]:
        if isinstance(e, ValueError) and (m := _UNKNOWN_SPLIT.match(str(e))):  # datasets' arrow_reader
            return NO_SPLIT, ", ".join(s.strip().strip("'\"") for s in m["splits"].split(","))
        if isinstance(e, OfflineModeIsEnabled) or "OfflineModeIsEnabled" in str(e):
            return UNREACHABLE, "the hub is offline here (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set)"
        if isinstance(e, (ConnectionError, TimeoutError)) or _transport_error(e):
            return UNREACHABLE, f"{type(e).__name__}: {_first_line(e)}"
        if isinstance(e, HfHubHTTPError):  # a 5xx after huggingface_hub's retries
            return UNREACHABLE, f"the hub answered {_first_line(e)}"
    if isinstance(error, LocalEntryNotFoundError):  # not cached, the hub out of reach for a reason not chained
        return UNREACHABLE, _first_line(error)
    return None


def _causes(error: BaseException) -> list[BaseException]:
    """The exceptions behind `error`, nearest first (raised from, or while handling)."""
    out, e = [], error
    while (e := e.__cause__ or e.__context__) is not None and all(e is not o for o in out):
        out.append(e)
    return out


def _first_line(e: BaseException) -> str:
    return next(iter(str(e).strip().splitlines()), "") or type(e).__name__


def _dataset_not_found(e: BaseException) -> bool:
    exceptions = sys.modules.get("datasets.exceptions")  # only `datasets` raises it: never imported just to ask
    return exceptions is not None and isinstance(e, exceptions.DatasetNotFoundError)


def _transport_error(e: BaseException) -> bool:
    """A connection that failed below HTTP (huggingface_hub's httpx2 and httpx: ConnectError, ReadTimeout, ...)."""
    return any(c.__name__ == "TransportError" and c.__module__.startswith("httpx") for c in type(e).__mro__)


def failure_line(item: HubItem, kind: str, reason: str) -> str:
    from huggingface_hub import constants

    page = f"{constants.ENDPOINT}/{'datasets/' if item.kind == 'dataset' else ''}{item.repo}"
    if kind == MISSING:
        return f"{item.key}: no such {item.kind} on the hub: {item.repo} (a private one needs `hf auth login`)"
    if kind == NO_SPLIT:
        asked = ", ".join(f"{c}/{s}" if c else s for c, s in item.sources)
        return f"{item.key}: {item.repo} has no split {asked} on the hub; its splits: {reason}"
    if kind == GATED:
        return (f"{item.key}: {item.repo} is gated on the hub: ask for access at {page}, then log in here with "
                f"`hf auth login`")
    return (f"{item.key}: cannot reach the hub ({constants.ENDPOINT}) for {item.kind} {item.repo}: {reason}; "
            f"run hardex-fetch on a host with internet")


@contextlib.contextmanager
def hub_errors(item: HubItem):
    """Re-raise a failure to get `item` from the hub as one HubError line naming its config key; anything
    else (a bad row, a bug) as it was. A dataset job offline whose split the cache lacks says so, rather than
    `datasets`' "Couldn't find cache" or "Couldn't reach"."""
    try:
        yield
    except HubError:
        raise
    except Exception as e:
        kind = classify(e)
        if kind is None and item.kind == "dataset" and _offline() and not cached(item):
            kind = UNREACHABLE, "not in the local cache, and HF_DATASETS_OFFLINE is set"
        if kind is None:
            raise
        raise HubError(failure_line(item, *kind)) from e


def _offline() -> bool:
    return any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in OFFLINE_VARIABLES)


# ---- fetching ---------------------------------------------------------------------------------------


def fetch(item: HubItem) -> str:
    """Put `item` into the local cache ("fetched"), unless it is there ("already cached"); a HubError says why not."""
    if cached(item):
        return "already cached"
    with hub_errors(item):
        if item.kind == "model":
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(item.repo, **MODEL_FILES))
            if not (folder / "config.json").exists():
                raise HubError(f"{item.key}: hub repository {item.repo} has no config.json: not a transformers model")
        else:
            import datasets
            from huggingface_hub import HfApi

            HfApi().dataset_info(item.repo)  # one call: a missing repository or no network, said at once
            for config, split in item.sources:
                if not _dataset_cached(item.repo, config, split):
                    datasets.load_dataset(item.repo, config, split=split)  # as hardex.tasks.rows loads it
    return "fetched"


def load_config(paths: list[Path]) -> dict:
    """The config as the workflow reads it: the files merged in order (Snakemake's --configfile), checked."""
    from snakemake.utils import update_config

    cfg: dict = {}
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        update_config(cfg, yaml.safe_load(path.read_text()) or {})
    check_duplicate_keys(paths)
    return check_config(cfg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hardex-fetch", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--configfile", type=Path, nargs="+", action="extend",
                        help="the config file(s), as given to snakemake (default: ./config.yaml, the workflow's)")
    args = parser.parse_args(argv)
    try:
        items = hub_items(load_config(args.configfile or [workflow_file("config.yaml", "--configfile")]))
    except (ConfigError, DataError, OSError, yaml.YAMLError) as e:
        print(f"hardex-fetch: config error: {e}", file=sys.stderr)
        return 2
    failed = 0
    for item in items:
        try:
            print(f"hardex-fetch: {item}: {fetch(item)}", flush=True)
        except HubError as e:
            failed += 1
            print(f"hardex-fetch: failed: {e}", flush=True)
    done = len(items) - failed
    print(f"hardex-fetch: {done} of {len(items)} hub models and datasets in the cache"
          + (f", {failed} failed" if failed else "; planning with this cache runs the jobs offline"), flush=True)
    return 1 if failed else 0


# ---- planning ----------------------------------------------------------------------------------------


@dataclass
class Offline:
    """What planning did about the hub: the variables it set for the jobs, and notices to print."""

    variables: list[str]
    notices: list[str]


def offline_jobs(cfg: dict, configfiles=(), environ=os.environ) -> Offline:
    """Set HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 in `environ` (the jobs inherit it) when the local cache
    holds every hub item of `cfg`; a variable already set is left as it is. Where the cache lacks an item,
    a notice names it and the hardex-fetch command: a host with internet still runs (its jobs download)."""
    items = hub_items(cfg)
    missing = [item for item in items if not cached(item)]
    notices = []
    if missing:
        from huggingface_hub import constants

        listed = ", ".join(map(str, missing[:3])) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        command = " ".join(["hardex-fetch", *(f"--configfile {shlex.quote(str(f))}" for f in configfiles)])
        notices.append(f"not in the local hub cache ({constants.HF_HUB_CACHE}): {listed}; jobs must download them, "
                       f"which fails without internet: run `{command}` on a host with internet first")
    else:
        unset = [v for v in OFFLINE_VARIABLES if v not in environ]
        environ.update(dict.fromkeys(unset, "1"))
        if items and unset:
            notices.append(f"the local hub cache holds all {len(items)} hub models and datasets of this config: "
                           f"jobs run offline ({', '.join(f'{v}=1' for v in unset)})")
    return Offline([v for v in OFFLINE_VARIABLES if v in environ], notices)


if __name__ == "__main__":
    sys.exit(main())
