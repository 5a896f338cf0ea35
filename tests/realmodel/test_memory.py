"""The memory an evaluation declares holds for SmolLM2-135M-Instruct at the default's and real_model_cpu's sizes.

On a CPU run each model job declares the memory plan's estimate as its `mem_mb` (hardex.memory_plan.host_memory_mb,
rules/common.smk), which a cluster enforces. The largest evaluation of each config is its base model's: every
test question at once, `evaluation.base_pass_k` samples each. A fresh process loads the model as the evaluate job
does, generates that batch, and its peak resident memory must stay under what the config declares.

The batch stops after its first decode steps: the job's peak is there (the cache is written at its full capacity
when the prompts' cache is copied for every sample, and the sampler holds the first step's logits for every row);
after them rows only leave. docs/memory-plan.md sets whole jobs' peaks beside their declarations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from hardex.config import check_config
from hardex.memory_plan import host_memory_mb
from hardex.settings import split_spec
from tests.support import ROOT

CONFIGS = ["config.yaml", "experiments/real_model_cpu.yaml"]

# runs in a fresh interpreter: the peak is that process's alone
BATCH = r"""
import json, resource, sys
from hardex.generation import hf
from hardex.generation.sampling import Sampling
from hardex.job import make_generator, renderer, set_threads
from hardex.tasks import get_task

model_dir, spec, samples, decoding, generation, dtype, chat = json.loads(sys.argv[1])
set_threads(2)
task = get_task(spec["family"], "flexible")
rows = task.load_split(spec["spec"], root=None).to_dicts()
generator = make_generator(generation, {"path": model_dir, "dtype": dtype})
render = renderer(model_dir, chat, task.prompt_format.system)
prompts = [render(task.prompt(r)) for r in rows]

class Enough(Exception):
    pass

sample, calls = hf.sample_tokens, []
def first_steps(*args):
    calls.append(args[0].shape[0])
    if len(calls) > 2:
        raise Enough
    return sample(*args)
hf.sample_tokens = first_steps
try:
    generator.generate(prompts, samples, Sampling.from_config(decoding), seed=0)
except Enough:
    pass
print(json.dumps({"rows": calls[0], "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


@pytest.mark.parametrize("name", CONFIGS)
def test_the_base_evaluation_stays_within_the_memory_it_declares(smollm2_dir, name):
    cfg = check_config(yaml.safe_load((ROOT / name).read_text()))
    declared = host_memory_mb(cfg)[("smol", "evaluate")]
    rows, peak_mb = base_batch_peak(smollm2_dir, cfg)
    assert peak_mb <= declared, (f"{name}: the base evaluation's first batch ({rows} rows) peaked at {peak_mb:.0f} MB, "
                                 f"more than the {declared} MB its jobs declare")


def base_batch_peak(model_dir, cfg: dict) -> tuple[int, float]:
    """Rows of the base evaluation's first batch and the peak resident MB of a process that generated it."""
    decoding = cfg["evaluation"]["decoding"]
    samples = max(decoding["n_samples"], cfg["evaluation"]["base_pass_k"])
    generation = {"backend": "transformers", "token_budget": cfg["generation"]["token_budget"],
                  "max_batch_prompts": cfg["generation"]["max_batch_prompts"]}
    entry = cfg["models"]["smol"]
    args = json.dumps([str(model_dir), split_spec(cfg, cfg["tasks"]["addition"]["benchmarks"][0]), samples, decoding,
                       generation, entry.get("dtype", "auto"), entry["chat"]])
    out = subprocess.run([sys.executable, "-c", BATCH, args], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["rows"], got["peak_mb"]
