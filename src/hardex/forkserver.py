"""A fork server for a workflow's Python jobs: import torch, transformers, PEFT and TRL once, fork every job.

A job of a rehearsal spends most of its few CPU-seconds importing those libraries (docs/rehearsal.md, "What it
costs"). `run_snakemake` starts a server process that imports them, then runs Snakemake with `sys.executable`
pointing at a small launcher (`<dir>/python`). Snakemake runs each `script:` job as `<sys.executable> <script>`,
so the launcher hands the script, its working directory, environment and standard streams to the server over a
Unix socket; the server forks a child that runs the script as `python <script>` would, and the launcher exits
with the child's status. Anything else the launcher is asked to run (`-m snakemake ...`, `-c ...`) runs in the
real interpreter, as it would without the server.

What differs from a fresh interpreter: the preloaded libraries read the environment when the server started
(a job whose `IMPORT_TIME_ENV` values differ from the server's, another HF_HOME say, is sent back to run in a
fresh interpreter), thread counts are applied to torch in the child, Python's and NumPy's global random states
are reseeded in each child (torch's default generator starts from its fixed seed either way), and a job's CPU
time and memory are the child's, which Snakemake's benchmark does not see (it measures the launcher). A launcher
that ends, by any signal, ends its job. Rehearsals use it (`hardex-rehearse --no-forkserver` runs every job in
a fresh interpreter); real runs do not.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import random
import runpy
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

#: the environment variable naming the server's socket, set for Snakemake and so for its jobs' launchers
SOCKET_ENV = "HARDEX_FORKSERVER"
#: what the server imports before it forks: the libraries of the model jobs (training, probing, evaluation).
#: Not polars: it starts threads at import (a fork copies none of them); a child imports it in 0.15 s.
PRELOAD = ("torch", "transformers", "transformers.modeling_utils", "transformers.models.auto.modeling_auto",
           "peft", "trl", "safetensors.torch")
#: what the preloaded libraries read from the environment once, at import (Hugging Face's caches and offline
#: switches, thread counts, devices, Python's own path and hash seed, the home that default caches sit in): a job
#: whose values differ from the server's runs in a fresh interpreter, so that forking never changes its meaning
IMPORT_TIME_ENV = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "TORCH", "PYTORCH_", "CUDA_", "NVIDIA_",
                   "OMP_", "MKL_", "OPENBLAS_", "TRITON_", "PYTHON", "HOME", "XDG_CACHE_HOME")
#: thread counts, which Snakemake sets per job to its threads: applied in the child instead (torch's)
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
              "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
_STATUS = struct.Struct("!i")
RUN_IT_YOURSELF = -1  # the server's answer, in place of a child's pid, to a job whose environment differs


def _import_time_env(env) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV) and k not in THREAD_ENV}


def _send_message(conn: socket.socket, payload: dict, fds: list[int]) -> None:
    data = json.dumps(payload).encode()
    socket.send_fds(conn, [_STATUS.pack(len(data)) + data], fds)


def _receive_exactly(conn: socket.socket, size: int) -> bytes | None:
    """`size` bytes, or None where the other end closed first."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _receive_message(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, _STATUS.size, 8)
    (size,) = _STATUS.unpack(head)
    data = _receive_exactly(conn, size)
    if data is None:
        raise ConnectionError("the launcher closed the connection mid-message")
    return json.loads(data), fds


def _receive_int(conn: socket.socket) -> int | None:
    data = _receive_exactly(conn, _STATUS.size)
    return None if data is None else _STATUS.unpack(data)[0]


def _run_script(request: dict) -> int:
    """In the forked child: become `python <script>` in the launcher's directory, environment and streams."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ.pop(SOCKET_ENV, None)  # a job's own subprocesses run in a fresh interpreter
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    # as `python <script>` sets it: the script's folder first, not the server's `-c` entry (the working directory)
    sys.path[:] = [str(Path(script).resolve().parent), *(p for p in sys.path if p != "")]
    tempfile.tempdir = None  # read TMPDIR again
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))  # as torch reads it at start
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:  # what an uncaught exception does to `python <script>`: its traceback, status 1
        traceback.print_exc()
        return 1


def _end_with_launcher(conn: socket.socket) -> None:
    """In the forked child: the launcher sends nothing more, so the connection ends only when the launcher does,
    killed even by a signal it cannot pass on (SIGKILL: a scheduler's or the OOM killer's); the job ends with it."""
    try:
        conn.recv(1)
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGKILL)


def _serve_one(conn: socket.socket, listener: socket.socket, started_in: dict[str, str]) -> None:
    """In the forked child: take the launcher's streams, report the pid, run the script, report its status."""
    listener.close()
    request, fds = _receive_message(conn)
    if _import_time_env(request["env"]) != started_in:
        conn.sendall(_STATUS.pack(RUN_IT_YOURSELF))
        os._exit(0)
    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.sendall(_STATUS.pack(os.getpid()))
    threading.Thread(target=_end_with_launcher, args=(conn,), daemon=True).start()
    status = _run_script(request)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:
        conn.sendall(_STATUS.pack(status))
    finally:
        os._exit(status)


def serve(socket_path: str, preload: tuple[str, ...] = PRELOAD) -> None:
    """Import `preload`, then fork a child per connection on `socket_path` until terminated or orphaned."""
    started_in = _import_time_env(os.environ)  # before the imports, which set some (TORCHINDUCTOR_CACHE_DIR)
    for module in preload:
        importlib.import_module(module)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".tmp")
    listener.listen(64)
    os.replace(socket_path + ".tmp", socket_path)  # ready only once it listens
    listener.settimeout(1.0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while os.getppid() == parent:  # the process that started the server is gone: so is its workflow
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:  # reap finished children
                pass
        except ChildProcessError:
            pass
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            _serve_one(conn, listener, started_in)
        conn.close()


def launch(argv: list[str] | None = None) -> None:
    """The launcher Snakemake runs as its Python: a lone script goes to the server, anything else to Python."""
    argv = sys.argv[1:] if argv is None else argv
    path = os.environ.get(SOCKET_ENV)
    if not (path and len(argv) == 1 and argv[0].endswith(".py")):
        os.execv(sys.executable, [sys.executable, *argv])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:  # the server is gone (the workflow is ending): run it as if there were none
        os.execv(sys.executable, [sys.executable, *argv])
    _send_message(conn, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
    child = _receive_int(conn)
    if child is None:
        sys.exit(f"hardex fork server: no child was started for {argv[0]}")
    if child == RUN_IT_YOURSELF:
        os.execv(sys.executable, [sys.executable, *argv])

    def forward(signum, _frame):  # Snakemake stops a job by signalling its shell's processes: pass it on
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    status = _receive_int(conn)
    if status is None:
        sys.exit(f"hardex fork server: the job running {argv[0]} ended without a status (killed?)")
    sys.exit(status)


@contextlib.contextmanager
def started(preload: tuple[str, ...] = PRELOAD, env: dict[str, str] | None = None):
    """A server that imported `preload` in `env` (default: this process's), while the block runs: yields its
    launcher and `env` naming it, for the processes that run the launcher."""
    env = dict(os.environ if env is None else env)
    folder = Path(tempfile.mkdtemp(prefix="hardex-forkserver-"))  # short: a socket path has at most 107 bytes
    sock, launcher = folder / "socket", folder / "python"
    launcher.write_text(f"#!{sys.executable}\nfrom hardex.forkserver import launch\nlaunch()\n")
    launcher.chmod(0o755)
    serve = f"from hardex.forkserver import serve; serve({str(sock)!r}, {tuple(preload)!r})"
    server = subprocess.Popen([sys.executable, "-c", serve], env=env)
    try:
        while not sock.exists():
            if server.poll() is not None:
                raise RuntimeError(f"the fork server stopped while importing (status {server.returncode})")
            time.sleep(0.05)
        yield launcher, {**env, SOCKET_ENV: str(sock)}
    finally:
        server.terminate()
        server.wait()
        sock.unlink(missing_ok=True)
        launcher.unlink()
        folder.rmdir()


def snakemake_command(launcher: Path) -> list[str]:
    """`python -m snakemake` whose script jobs run through `launcher` (Snakemake runs them as its sys.executable)."""
    code = ("import sys; from snakemake.cli import main; "
            f"sys.executable = {str(launcher)!r}; sys.argv[0] = 'snakemake'; main()")
    return [sys.executable, "-c", code]


def run_snakemake(args: list[str], preload: tuple[str, ...] = PRELOAD) -> int:
    """Run `snakemake <args>` with every Python script job forked from a server that imported `preload` (on Linux:
    elsewhere, forking a process that loaded these libraries is not safe, and every job starts afresh)."""
    if not sys.platform.startswith("linux"):
        return subprocess.call([sys.executable, "-m", "snakemake", *args])
    with started(preload) as (launcher, env):
        return subprocess.call([*snakemake_command(launcher), *args], env=env)
