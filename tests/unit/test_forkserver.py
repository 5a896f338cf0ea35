"""The fork server (hardex.forkserver): a script forked from it behaves as `python <script>` would, and Snakemake's
script jobs run through it. The server here preloads a marker module that counts its imports, instead of torch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from hardex.forkserver import run_snakemake, started

MARKER = "hardex_forkserver_marker"


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """A module that appends a line to a file each time a process imports it; on the path of the server and jobs."""
    lib = tmp_path / "lib"
    lib.mkdir()
    imports = tmp_path / "imports.txt"
    (lib / f"{MARKER}.py").write_text(f"with open({str(imports)!r}, 'a') as f:\n    f.write('imported\\n')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(lib), os.environ.get("PYTHONPATH", "")]))
    return imports


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_a_forked_script_has_its_directory_arguments_environment_streams_and_status(tmp_path, marker):
    script = _script(tmp_path, "job.py", f"""
        import os, sys
        print("preloaded", {MARKER!r} in sys.modules)
        import {MARKER}
        print("cwd", os.getcwd())
        print("argv", sys.argv)
        print("env", os.environ["JOB_SETTING"])
        print("stdin", sys.stdin.read().strip())
        print("to stderr", file=sys.stderr)
        sys.exit(int(os.environ["JOB_STATUS"]))
        """)
    work = tmp_path / "work"
    work.mkdir()
    with started((MARKER,)) as (launcher, env):
        for status in (0, 3):
            done = subprocess.run([str(launcher), str(script)], input="from stdin\n", capture_output=True, text=True,
                                  cwd=work, env={**env, "JOB_SETTING": f"run {status}", "JOB_STATUS": str(status)})
            assert done.returncode == status, done.stderr
            assert done.stdout.splitlines() == ["preloaded True", f"cwd {work}", f"argv [{str(script)!r}]",
                                                f"env run {status}", "stdin from stdin"]
            assert done.stderr == "to stderr\n"
    # imported once, by the server: each job found it loaded
    assert marker.read_text() == "imported\n"


def test_a_job_whose_import_time_environment_differs_runs_in_a_fresh_interpreter(tmp_path, marker):
    script = _script(tmp_path, "job.py", f"""
        import os, sys
        print({MARKER!r} in sys.modules, os.environ.get("HF_HOME"))
        """)
    with started((MARKER,)) as (launcher, env):
        for hf_home, forked in ((None, True), (str(tmp_path / "elsewhere"), False)):
            job_env = {**env, "HF_HOME": hf_home} if hf_home else env
            done = subprocess.run([str(launcher), str(script)], capture_output=True, text=True, env=job_env)
            assert done.returncode == 0, done.stderr
            assert done.stdout.split() == [str(forked), str(hf_home)]


def test_an_uncaught_exception_gives_its_traceback_and_status_1_and_other_commands_run_in_python(tmp_path, marker):
    script = _script(tmp_path, "fails.py", """
        raise ValueError("the job's own error")
        """)
    with started((MARKER,)) as (launcher, env):
        done = subprocess.run([str(launcher), str(script)], capture_output=True, text=True, env=env)
        assert done.returncode == 1
        assert "Traceback" in done.stderr and "ValueError: the job's own error" in done.stderr
        # not a lone script (Snakemake's `-m snakemake` for run: jobs, say): the real interpreter runs it
        done = subprocess.run([str(launcher), "-c", f"import sys; print({MARKER!r} in sys.modules, sys.executable)"],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0 and done.stdout.split() == ["False", sys.executable]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_stopping_the_launcher_stops_the_job(tmp_path, marker, stop):
    pid_file = tmp_path / "pid"
    script = _script(tmp_path, "sleeps.py", f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
        """)
    with started((MARKER,)) as (launcher, env):
        job = subprocess.Popen([str(launcher), str(script)], env=env)
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and job.poll() is None
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert child != job.pid
        job.send_signal(stop)  # what Snakemake sends a job it cancels; what a scheduler or the OOM killer sends
        assert job.wait(timeout=30) != 0
        deadline = time.monotonic() + 30
        while _alive(child):
            assert time.monotonic() < deadline, "the forked job outlived its launcher"
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:  # a zombie not yet reaped by the server counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_snakemake_runs_its_script_jobs_through_the_server_and_sees_their_failures(tmp_path, marker):
    (tmp_path / "ok.py").write_text(f"import sys\n"
                                    f"open(snakemake.output[0], 'w').write(str({MARKER!r} in sys.modules))\n")
    (tmp_path / "fails.py").write_text("raise RuntimeError('this job fails')\n")
    (tmp_path / "Snakefile").write_text(textwrap.dedent("""
        rule ok:
            output: "ok.txt"
            script: "ok.py"

        rule fails:
            input: "ok.txt"
            output: "never.txt"
            script: "fails.py"
        """))
    args = ["--snakefile", str(tmp_path / "Snakefile"), "--directory", str(tmp_path), "--cores", "1"]
    assert run_snakemake([*args, "ok.txt"], preload=(MARKER,)) == 0
    assert (tmp_path / "ok.txt").read_text() == "True"
    assert run_snakemake([*args, "never.txt"], preload=(MARKER,)) != 0
    assert not (tmp_path / "never.txt").exists()
