"""Shared helpers for the performance scripts: the built tiny model, pool prompts, machine facts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
OUT = ROOT / "perf" / "out"

# the built tiny model (experiments/cpu_tiny.yaml: models.tiny.build, the default until 2026-11-26), on its sft splits
DEFAULT_ARCH = {"hidden_size": 256, "intermediate_size": 512, "num_layers": 2, "num_heads": 4,
                "vocab_size": 512, "max_position_embeddings": 1024}
DEFAULT_WARMSTART = {"epochs": 2, "batch_size": 16, "learning_rate": 3.0e-3, "seed": 0}
SFT_SPECS = {"arith": {"name": "sft", "n": 2400, "seed": 4, "difficulty": [1, 6]},
             "swaps": {"name": "sft", "n": 2400, "seed": 4, "difficulty": [0, 4], "people": [3, 3]}}
POOL_SPECS = {"arith": {"name": "pool", "n": 300, "seed": 1, "difficulty": [1, 6]},
              "swaps": {"name": "pool", "n": 300, "seed": 1, "difficulty": [0, 4], "people": [3, 3]}}


def built_model(path: str | Path | None = None, epochs: float | None = None, log=print) -> str:
    """A from_pretrained folder of the built tiny Qwen3: `path` if given (e.g. results/models/tiny,
    what the workflow built), else build it once (cpu_tiny's arch and warm start, so the
    same model as the workflow's) into perf/out/tiny-e{epochs}."""
    if path and str(path) != "build":
        return str(path)
    ws = dict(DEFAULT_WARMSTART, epochs=epochs if epochs is not None else DEFAULT_WARMSTART["epochs"])
    out = OUT / f"tiny-e{ws['epochs']:g}"
    if not (out / "config.json").exists():
        from hardex.models import build_model, warmstart_rows
        from hardex.tasks import get_task

        rows = []
        for family, spec in SFT_SPECS.items():
            task = get_task(family)
            rows += warmstart_rows(task, task.load_split(spec))
        log(f"building the tiny model into {out} (warm start {ws['epochs']} epochs on {len(rows)} rows)")
        build_model(out, rows, DEFAULT_ARCH, ws, log=log)
    return str(out)


def pool(family: str, n: int | None = None):
    """Rows and rendered (plain) prompts of cpu_tiny's pool split of a synthetic family."""
    from hardex.models import render_prompt
    from hardex.tasks import get_task

    task = get_task(family)
    df = task.load_split(POOL_SPECS[family])
    rows = df.to_dicts()[: n or None]
    return task, rows, [render_prompt(None, task.prompt(r), chat=False) for r in rows]


def config_pool(configfile: str | Path, model_path: str, n: int | None = None):
    """Task, rows and rendered prompts of a config's first task's pool, rendered for the model at
    `model_path` as the config's first model would be (chat template or plain): what its probe and
    train jobs see, e.g. experiments/real_model_cpu.yaml with the converted SmolLM2 folder."""
    import yaml

    from hardex.config import check_config
    from hardex.job import renderer
    from hardex.settings import split_spec
    from hardex.tasks import get_task

    cfg = yaml.safe_load(Path(configfile).read_text())
    first = next(iter(cfg["models"].values()))
    first.pop("gguf", None)
    first["path"] = str(model_path)  # the model timed here, not the one the config would fetch or convert
    cfg = check_config(cfg)
    name, t = next(iter(cfg["tasks"].items()))
    spec = split_spec(cfg, t["pool"])
    task = get_task(spec["family"], t["scoring"])
    rows = task.load_split(spec["spec"]).to_dicts()[: n or None]
    render = renderer(model_path, next(iter(cfg["models"].values()))["chat"])
    return cfg, task, rows, [render(task.prompt(r)) for r in rows]


def matmul_bound(parameters: int, seconds: float = 3.0, size: int = 2048, dtype=None) -> dict:
    """This machine's matmul rate in `dtype` (float32 by default; GFLOP/s, torch's current threads) and the generation
    rate it bounds for a model of `parameters` (about 2 floating-point operations per parameter per token)."""
    import time

    import torch

    dtype = dtype or torch.float32
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b  # warm-up
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        n += 1
    gflops = 2 * size**3 * n / (time.perf_counter() - t0) / 1e9
    return {"matmul_gflops": gflops, "bound_tokens_per_s": gflops * 1e9 / (2 * parameters)}


def machine() -> dict:
    """CPU model, cores and load average, for the printed summary."""
    info = {"python": platform.python_version(), "cores": os.cpu_count()}
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                info["cpu"] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        info["load"] = os.getloadavg()
    except OSError:
        pass
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        if gpu:
            info["gpu"] = gpu
    except (OSError, subprocess.SubprocessError):
        pass
    return info


class GpuBusy:
    """How busy GPU 0 was while the block ran: NVML's utilization.gpu (the share of each sample period in which
    a kernel ran), sampled every `every` seconds in a thread. `mean` is None where NVML does not answer."""

    def __init__(self, every: float = 0.05):
        self.every, self.samples, self.mean = every, [], None

    def __enter__(self):
        import threading

        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._read = lambda: pynvml.nvmlDeviceGetUtilizationRates(self._handle).gpu
        except Exception:  # no NVML, no GPU: nothing to sample
            self._read = None
            return self
        self._stop = threading.Event()

        def sample():
            while not self._stop.wait(self.every):
                self.samples.append(self._read())

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._read is not None:
            self._stop.set()
            self._thread.join()
            self.mean = sum(self.samples) / len(self.samples) if self.samples else None
        return False


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def dump(obj, path: Path) -> None:
    """Write a script's figures as JSON (numpy numbers as plain ones)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def _timed(fn, repeats: int = 3) -> float:
    """Median seconds of fn() over `repeats` calls after one warm-up."""
    import time

    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_matmul_bound(model, shapes: list[tuple[int, int, int]]) -> dict:
    """The seconds a generation's matmuls alone take at the shapes it ran, and nothing else: `shapes` is what
    HFGenerator.shapes recorded, (rows, new tokens per row, filled cache positions) of every forward pass.

    Each pass is charged its linear layers, timed as the model's own weights one after another at that pass's
    rows x tokens (a weight is read from memory as in a real step, not from a cache warmed by timing it alone,
    which at 16 rows understated a step's matmuls by a third), and, for a decode step, attention's two
    products (scores, weighted values) over its filled positions in every layer, on keys and values packed at
    exactly those positions (interpolated between the fewest and most positions at that row count). A prefill's
    attention and everything that is not a matmul (norms, rotary, sampling, Python) are what the bound leaves out."""
    from collections import defaultdict

    import torch

    head = model.get_output_embeddings()
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head]
    config = model.config.get_text_config()
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    layers, dtype = config.num_hidden_layers, linears[0].weight.dtype

    def linear_seconds(tokens: int, rows: int) -> float:
        # the output layer at one position per row: a prefill keeps only the last position's logits
        xs = {m.in_features: torch.randn(tokens, m.in_features, dtype=dtype) for m in linears}
        last = torch.randn(rows, head.in_features, dtype=dtype)
        return _timed(lambda: [torch.nn.functional.linear(xs[m.in_features], m.weight) for m in linears]
                      + [torch.nn.functional.linear(last, head.weight)])

    def attention_seconds(rows: int, positions: int) -> float:
        # each layer's keys and values packed at exactly the filled positions: the products alone, no copy of a view
        group, batch = heads // kv_heads, rows * kv_heads
        keys = [torch.randn(batch, positions, head_dim, dtype=dtype) for _ in range(layers)]
        values = [torch.randn(batch, positions, head_dim, dtype=dtype) for _ in range(layers)]
        q = torch.randn(batch, head_dim, group, dtype=dtype)
        p = torch.randn(batch, group, positions, dtype=dtype)

        def run():
            for k, v in zip(keys, values):
                torch.bmm(k, q)
                torch.bmm(p, v)

        return _timed(run)

    with torch.inference_mode():
        linear = {(r, t): linear_seconds(r * t, r) for r, t in sorted({(r, t) for r, t, _ in shapes})}
        by_rows = defaultdict(list)
        for r, t, pos in shapes:
            if t == 1:
                by_rows[r].append(pos)
        attention = {}
        for r, ps in by_rows.items():
            lo, hi = min(ps), max(ps)
            a, b = attention_seconds(r, lo), attention_seconds(r, hi) if hi > lo else None
            attention[r] = (lo, hi, a, b)

    def attn(r: int, pos: int) -> float:
        lo, hi, a, b = attention[r]
        return a if b is None else a + (b - a) * (pos - lo) / (hi - lo)

    prefill = sum(linear[r, t] for r, t, _ in shapes if t > 1)
    decode_linear = sum(linear[r, t] for r, t, _ in shapes if t == 1)
    decode_attention = sum(attn(r, pos) for r, t, pos in shapes if t == 1)
    return {"passes": len(shapes), "decode_steps": sum(t == 1 for _, t, _ in shapes),
            "prefill_linear_s": prefill, "decode_linear_s": decode_linear, "decode_attention_s": decode_attention,
            "seconds": prefill + decode_linear + decode_attention}
