"""hardex-fetch and offline jobs (hardex.fetch), with no internet: a small hub in the hub's own HTTP API on
this machine (HF_ENDPOINT) serves the hub-format fixtures as repositories, answers an unknown repository as
the hub does (404, X-Error-Code: RepoNotFound), one without that header as a bare 404 and a gated one with
401; an unused local port is a hub out of reach. huggingface_hub and datasets read HF_ENDPOINT when they are
imported, so everything runs in processes of its own: the command, and Snakemake's own CLI."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.support import ROOT, snakemake, write_config

FIXTURES = ROOT / "tests" / "fixtures" / "hub"
GATED, BARE_404 = "locked/model", "bare"  # a gated repository; an owner whose repositories 404 without a code


# ---- a hub on this machine ------------------------------------------------------------------------


def hub_repositories(root: Path) -> Path:
    """Repositories under root/{models,datasets}/<owner>/<name>: a model (with Meta's original/ folder, which
    jobs never read) and two datasets in the hub's layout, configs named by their README as on the hub."""
    model = root / "models" / "tiny" / "model"
    (model / "original").mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen3"}')
    (model / "tokenizer.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    (model / "original" / "consolidated.pth").write_bytes(b"\0" * 64)
    (model / "README.md").write_text("a model card")
    for repo, files in {
        "openai/gsm8k": {("main", "train"): FIXTURES / "gsm8k/train.jsonl",
                         ("main", "test"): FIXTURES / "gsm8k/test.jsonl"},
        "opencompass/AIME2025": {(f"AIME2025-{p}", "test"): FIXTURES / f"aime/AIME2025-{p}.jsonl" for p in ("I", "II")},
    }.items():
        folder = root / "datasets" / repo
        configs: dict[str, list] = {}
        for (config, split), source in files.items():
            (folder / config).mkdir(parents=True, exist_ok=True)
            (folder / config / f"{split}.jsonl").write_bytes(source.read_bytes())
            configs.setdefault(config, []).append({"split": split, "path": f"{config}/{split}.jsonl"})
        card = [{"config_name": c, "data_files": f} for c, f in configs.items()]
        (folder / "README.md").write_text(f"---\n{yaml.safe_dump({'configs': card})}---\n")
    return root


class Hub(BaseHTTPRequestHandler):
    """The part of the hub's API that huggingface_hub's snapshot_download and datasets' load_dataset use:
    repository info, file listing, path info and file downloads, by commit or branch."""

    root: Path
    requests: list[str]

    def log_message(self, *args):  # quiet
        pass

    def reply(self, code: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        self.requests.append(f"{self.command} {self.path}")
        url = urllib.parse.urlsplit(self.path)
        parts = urllib.parse.unquote(url.path).strip("/").split("/")
        api = parts[0] == "api"
        parts = parts[api:]
        kind = parts.pop(0) if parts[0] in ("models", "datasets") else "models"
        repo, rest = "/".join(parts[:2]), parts[2:]
        folder = self.root / kind / repo
        if repo.startswith(f"{BARE_404}/"):
            return self.reply(404, b"Not Found")
        if repo == GATED:
            return self.reply(401, b"{}",
                              {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access to model is restricted"})
        if not folder.is_dir():
            return self.reply(404, b'{"error": "Repository not found"}',
                              {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"})
        files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        commit = hashlib.sha1(b"".join(f.encode() + (folder / f).read_bytes() for f in files)).hexdigest()

        def entry(path: str) -> dict:
            data = (folder / path).read_bytes()
            return {"type": "file", "path": path, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}

        def listing(paths) -> None:
            self.reply(200, json.dumps(paths).encode(), {"Content-Type": "application/json"})

        if api and (not rest or rest[0] == "revision"):
            return listing({"id": repo, "sha": commit, "private": False, "siblings": [{"rfilename": f} for f in files]})
        if api and rest[0] == "tree":
            prefix = "/".join(rest[2:])
            under = [f for f in files if not prefix or f.startswith(prefix + "/")]
            if "recursive=true" in url.query.lower():
                dirs = {"/".join(f.split("/")[:i]) for f in under for i in range(1, f.count("/") + 1)}
                return listing([entry(f) for f in under] + [{"type": "directory", "path": d, "oid": "0" * 40}
                                                             for d in sorted(dirs) if d.startswith(prefix)])
            depth = prefix.count("/") + 1 if prefix else 0
            level = {"/".join(f.split("/")[:depth + 1]) for f in under}
            return listing([entry(p) if p in files else {"type": "directory", "path": p, "oid": "0" * 40}
                            for p in sorted(level)])
        if api and rest[0] == "paths-info":
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            asked = json.loads(body)["paths"] if body.startswith("{") else urllib.parse.parse_qs(body).get("paths", [])
            return listing([entry(p) if p in files else {"type": "directory", "path": p, "oid": "0" * 40}
                            for p in (a.strip("/") for a in asked)
                            if p in files or any(f.startswith(p + "/") for f in files)])
        if rest[:1] == ["resolve"] and "/".join(rest[2:]) in files:
            data = (folder / "/".join(rest[2:])).read_bytes()
            return self.reply(200, data, {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'})
        return self.reply(404, b"Entry not found", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit})

    do_HEAD = do_POST = do_GET


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """(endpoint, requests): the hub above, serving in a thread for the module's tests."""
    handler = type("TestHub", (Hub,), {"root": hub_repositories(tmp_path_factory.mktemp("hub")), "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", handler.requests
    server.shutdown()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def online(tmp_path: Path, endpoint: str) -> dict:
    """An environment with the hub at `endpoint` and a cache of the test's own (not offline, unlike the tests'
    Snakemake in tests/support.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_CACHE",
                                                             "HF_DATASETS_CACHE", "HF_TOKEN")}
    return {**env, "PYTHONPATH": str(ROOT / "src"), "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": endpoint,
            "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def fetch_cli(workdir: Path, env: dict) -> tuple[int, list[str], str]:
    """hardex-fetch (python -m hardex.fetch: its console script's main) on workdir's config.yaml: exit status,
    the lines it printed, and stderr."""
    res = subprocess.run([sys.executable, "-m", "hardex.fetch", "--configfile", str(workdir / "config.yaml")],
                         capture_output=True, text=True, env=env, cwd=workdir, timeout=300)
    return res.returncode, res.stdout.splitlines(), res.stderr


def snakemake_online(workdir: Path, env: dict, *args: str):
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                           str(workdir), "--configfile", str(workdir / "config.yaml"), *args],
                          capture_output=True, text=True, env=env, cwd=workdir, timeout=900)


def hub_config(models: dict, datasets: dict, pool: str, benchmarks: list[str]) -> dict:
    return {"seeds": [0], "models": {name: {"path": path, "chat": False} for name, path in models.items()},
            "datasets": datasets, "tasks": {"t": {"pool": pool, "benchmarks": benchmarks}},
            "selection": {"budget": 0.5, "seed": 0, "strategies": ["random"]},
            "grpo": {"max_steps": 1, "save_steps": 1}}


GSM8K = {"family": "gsm8k", "splits": {"train": {"hub": "openai/gsm8k", "split": "train"},
                                       "test": {"hub": "openai/gsm8k", "split": "test"}}}
AIME = {"family": "aime2025", "splits": {"test": {"hub": "opencompass/AIME2025", "parts": ["I", "II"]}}}
LOCAL = {"family": "gsm8k", "splits": {"test": {"file": str(FIXTURES / "gsm8k/test.jsonl")}}}


# ---- the tests ------------------------------------------------------------------------------------


def test_fetch_fills_the_cache_and_planning_then_runs_the_jobs_offline(hub, tmp_path):
    endpoint, requests = hub
    config = write_config(tmp_path, hub_config({"tiny": "tiny/model"}, {"gsm8k": GSM8K, "aime": AIME},
                                               "gsm8k/train", ["gsm8k/test", "aime/test"]))
    away = online(tmp_path, f"http://127.0.0.1:{unused_port()}")  # the same cache, the hub out of reach

    # planning with an empty cache: one notice naming what is missing and the command that fetches it
    res = snakemake_online(tmp_path, away, "-n", "--cores", "1", "results/data/aime/test.parquet")
    assert res.returncode == 0, res.stderr[-3000:]
    notices = [line for line in res.stderr.splitlines() if "hardex: notice: not in the local hub cache" in line]
    assert len(notices) == 1, res.stderr[-3000:]
    assert "models.tiny.path (tiny/model)" in notices[0] and "and 1 more" in notices[0]
    assert f"run `hardex-fetch --configfile {config}` on a host with internet first" in notices[0]

    rc, lines, err = fetch_cli(tmp_path, online(tmp_path, endpoint))
    assert rc == 0, lines + [err[-3000:]]
    assert lines == [
        "hardex-fetch: models.tiny.path (tiny/model): fetched",
        "hardex-fetch: datasets.gsm8k.splits.train.hub (openai/gsm8k main/train): fetched",
        # load_dataset prepares a config's every split: the test split came with the train split
        "hardex-fetch: datasets.gsm8k.splits.test.hub (openai/gsm8k main/test): already cached",
        "hardex-fetch: datasets.aime.splits.test.hub (opencompass/AIME2025 AIME2025-I/test, AIME2025-II/test): fetched",
        "hardex-fetch: 4 of 4 hub models and datasets in the cache; planning with this cache runs the jobs offline"]
    snapshot = next((tmp_path / "hf/hub/models--tiny--model/snapshots").iterdir())
    assert sorted(p.name for p in snapshot.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert not [r for r in requests if "original/" in r]  # what jobs never read is never asked for

    rc, lines, err = fetch_cli(tmp_path, away)  # nothing asks the hub now
    assert rc == 0 and all(line.endswith(": already cached") for line in lines[:-1]) and len(lines) == 5, lines + [err]

    # planning finds everything cached: the jobs run offline, and a data job loads its split from the cache
    res = snakemake_online(tmp_path, away, "--cores", "1", "results/data/aime/test.parquet")
    assert res.returncode == 0, res.stderr[-3000:]
    assert ("hardex: notice: the local hub cache holds all 4 hub models and datasets of this config: jobs run offline "
            "(HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1)") in res.stderr
    assert "offline mode is enabled" in (tmp_path / "logs/data/aime/test.log").read_text()
    rows = pl.read_parquet(tmp_path / "results/data/aime/test.parquet")
    assert rows.height == 8 and set(rows["part"]) == {"I", "II"}


def test_fetch_tells_a_missing_or_gated_repository_from_one_it_fetched(hub, tmp_path):
    endpoint, _ = hub
    write_config(tmp_path, hub_config(
        {"tiny": "tiny/model", "ghost": "nobody/ghost-model", "bare": f"{BARE_404}/model", "locked": GATED},
        {"local": LOCAL, "missing": {"family": "gsm8k", "splits": {"test": {"hub": "nobody/no-dataset"}}},
         "misnamed": {"family": "gsm8k", "splits": {"test": {"hub": "openai/gsm8k", "split": "validation"}}}},
        "local/test", ["missing/test", "misnamed/test"]))
    rc, lines, err = fetch_cli(tmp_path, online(tmp_path, endpoint))
    assert rc == 1 and "Traceback" not in err, lines + [err[-3000:]]
    private = "(a private one needs `hf auth login`)"
    assert lines == [
        f"hardex-fetch: failed: models.bare.path: no such model on the hub: {BARE_404}/model {private}",
        f"hardex-fetch: failed: models.ghost.path: no such model on the hub: nobody/ghost-model {private}",
        f"hardex-fetch: failed: models.locked.path: {GATED} is gated on the hub: ask for access at {endpoint}/{GATED}, "
        f"then log in here with `hf auth login`",
        "hardex-fetch: models.tiny.path (tiny/model): fetched",
        "hardex-fetch: failed: datasets.missing.splits.test.hub: no such dataset on the hub: "
        f"nobody/no-dataset {private}",
        # a split the hub's dataset lacks: one line with the splits it has, and the items after it still fetched
        "hardex-fetch: failed: datasets.misnamed.splits.test.hub: openai/gsm8k has no split main/validation on the "
        "hub; its splits: train, test",
        "hardex-fetch: 1 of 6 hub models and datasets in the cache, 5 failed"]


def test_fetch_without_network_says_so_for_each_item(tmp_path):
    endpoint = f"http://127.0.0.1:{unused_port()}"
    write_config(tmp_path, hub_config({"tiny": "tiny/model"}, {"gsm8k": GSM8K}, "gsm8k/train", ["gsm8k/test"]))
    t0 = time.monotonic()
    rc, lines, err = fetch_cli(tmp_path, online(tmp_path, endpoint))
    assert time.monotonic() - t0 < 60, "a refused connection is not retried for minutes"
    assert rc == 1 and "Traceback" not in err, lines + [err[-3000:]]
    for line, (key, what) in zip(lines, [("models.tiny.path", "model tiny/model"),
                                         ("datasets.gsm8k.splits.train.hub", "dataset openai/gsm8k"),
                                         ("datasets.gsm8k.splits.test.hub", "dataset openai/gsm8k")]):
        assert line.startswith(f"hardex-fetch: failed: {key}: cannot reach the hub ({endpoint}) for {what}: "
                               f"ConnectError: "), line
        assert line.endswith("; run hardex-fetch on a host with internet"), line
    assert lines[-1] == "hardex-fetch: 0 of 3 hub models and datasets in the cache, 3 failed"


def test_a_data_job_names_a_dataset_the_hub_lacks_and_a_hub_out_of_reach(hub, tmp_path, monkeypatch):
    endpoint, _ = hub
    (tmp_path / "model").mkdir()  # a local model: planning offline asks no cache for it
    write_config(tmp_path, hub_config({"mine": str(tmp_path / "model")}, {
        "local": LOCAL, "gsm8k": GSM8K,
        "missing": {"family": "gsm8k", "splits": {"test": {"hub": "nobody/no-dataset"}}}},
        "local/test", ["missing/test", "gsm8k/test"]))

    def last_line(dataset: str) -> str:
        log = (tmp_path / f"logs/data/{dataset}/test.log").read_text().strip().splitlines()
        return log[-2]  # the job's time is the last line

    # with the network: `datasets` would say DatasetNotFoundError, or with the hub offline a ConnectionError
    res = snakemake_online(tmp_path, online(tmp_path, endpoint), "--cores", "1", "results/data/missing/test.parquet")
    assert res.returncode != 0
    assert last_line("missing") == ("hardex.fetch.HubError: datasets.missing.splits.test.hub: no such dataset on the "
                                    "hub: nobody/no-dataset (a private one needs `hf auth login`)")
    # the tests' Snakemake runs offline: a dataset the cache lacks is out of reach, whatever the hub holds
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    res = snakemake(tmp_path, "--cores", "1", "results/data/gsm8k/test.parquet")
    assert res.returncode != 0
    assert last_line("gsm8k") == (
        f"hardex.fetch.HubError: datasets.gsm8k.splits.test.hub: cannot reach the hub ({endpoint}) for dataset "
        f"openai/gsm8k: the hub is offline here (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is set); run hardex-fetch on "
        f"a host with internet")


@pytest.mark.parametrize("family,spec", [
    ("shuffled_objects", {"objects": [3, 5, 7]}),
    ("shuffled_objects", {"config": "tracking_shuffled_objects_five_objects"}),
    ("shuffled_objects", {}),
    ("aime2025", {"parts": ["I", "II"]}),
    ("aime2025", {"config": "AIME2025-II"}),
    ("math", {"hub": "EleutherAI/hendrycks_math", "subjects": ["Algebra", "Number Theory"]}),
    ("math", {"hub": "EleutherAI/hendrycks_math"}),
])
def test_the_hub_configs_fetched_are_those_the_loader_reads(tmp_path, family, spec):
    """A file per config that hub_sources names, and nothing else: the family's loader reads them all (a config
    it reads beyond them would be a missing file) and its rows come from each."""
    from hardex.fetch import hub_sources
    from hardex.tasks import get_task
    from hardex.tasks.hub_formats import OBJECT_WORDS, subject_key

    spec = {"hub": "owner/name", **spec}
    configs = [config for config, _ in hub_sources(family, spec)]
    for config in configs:
        if family == "math":  # the fixture's problems of this subject
            rows = [line for line in (FIXTURES / "math/test.jsonl").read_text().splitlines()
                    if subject_key(json.loads(line)["type"]) == config]
            (tmp_path / f"{config}.jsonl").write_text("\n".join(rows) + "\n")
        else:
            folder = "bbh" if family == "shuffled_objects" else "aime"
            source = next((FIXTURES / folder).glob(f"{config}.*"))
            (tmp_path / f"{config}{source.suffix}").write_bytes(source.read_bytes())
    suffix = ".json" if family == "shuffled_objects" else ".jsonl"
    rows = get_task(family).load_split({**spec, "hub": None, "file": str(tmp_path / f"{{config}}{suffix}")})
    read = {"shuffled_objects": lambda r: f"tracking_shuffled_objects_{OBJECT_WORDS[r['n_objects']]}_objects",
            "aime2025": lambda r: f"AIME2025-{r['part']}", "math": lambda r: subject_key(r["subject"])}[family]
    assert {read(r) for r in rows.to_dicts()} == set(configs)
