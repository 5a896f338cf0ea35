"""A job's log holds what its child processes write (issue 64, G7): vLLM's engine processes and any other child
write to the file descriptors they inherit, not to Python's sys.stdout, so hardex.job.job_log points descriptors
1 and 2 themselves at the log."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import types

from hardex.job import job_log


def fake_job(tmp_path):
    """What Snakemake hands a script: its log, rule and resources (no GPU)."""
    return types.SimpleNamespace(log=[str(tmp_path / "job.log")], rule="train", wildcards={},
                                 resources=types.SimpleNamespace(gpu=0))


def engine_core():
    """What a spawned vLLM engine process does when it fails: its traceback to its inherited stderr."""
    os.write(2, b"EngineCore failed: a traceback on descriptor 2\n")
    print("engine stdout line", flush=True)


def test_a_spawned_and_a_started_child_write_into_the_job_log(tmp_path):
    with job_log(fake_job(tmp_path)) as log:
        log("before the children")
        child = multiprocessing.get_context("spawn").Process(target=engine_core)  # as vLLM starts its engines
        child.start()
        child.join(60)
        subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('a subprocess on stderr\\n')"], check=True)
        log("after the children")
    text = (tmp_path / "job.log").read_text()
    assert "EngineCore failed: a traceback on descriptor 2" in text
    assert "engine stdout line" in text
    assert "a subprocess on stderr" in text
    # the job's own lines and the children's share one file offset: nothing overwritten, in order
    assert text.index("before the children") < text.index("EngineCore failed") < text.index("after the children")


def test_the_descriptors_are_given_back_after_the_job(tmp_path):
    before = os.fstat(2).st_ino, os.fstat(1).st_ino
    with job_log(fake_job(tmp_path)):
        assert os.fstat(2).st_ino == os.stat(tmp_path / "job.log").st_ino
    assert (os.fstat(2).st_ino, os.fstat(1).st_ino) == before
