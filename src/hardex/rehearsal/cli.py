"""hardex-rehearse: rehearse a config on this machine, to its report, before renting GPUs for it.

    hardex-rehearse experiments/hard_examples_paper.yaml            # writes and runs rehearsals/hard_examples_paper/
    hardex-rehearse experiments/difficulty_limits.yaml -n           # any further arguments go to snakemake
    hardex-rehearse --quick experiments/hard_examples_paper.yaml    # one strategy trained, not all (what CI runs)

The rehearsal's config is written to <dir>/config.yaml and runs there (snakemake --directory <dir>), so
its results never mix with a real run's; running the command again resumes it as Snakemake does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

from hardex.rehearsal import RehearsalError, rehearsal_config

SNAKEFILE = Path(__file__).resolve().parents[3] / "Snakefile"


def write_rehearsal(config: Path, directory: Path, quick: bool = False) -> Path:
    """Write the rehearsal of `config` (its config.yaml and sample rows) under `directory`; its config path."""
    source = yaml.safe_load(config.read_text())
    cfg = rehearsal_config(source, str(config), samples=(directory / "samples").resolve(), quick=quick)
    out = directory / "config.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# The rehearsal of {config} (written by hardex-rehearse; edit that config, not this file):\n"
              f"# stand-in models, a few rows per dataset, short runs, seeded rewards. Its numbers are not results.\n")
    out.write_text(header + yaml.safe_dump(cfg, sort_keys=False, width=120))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hardex-rehearse", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("config", type=Path, help="the config to rehearse, e.g. experiments/hard_examples_paper.yaml")
    parser.add_argument("--dir", type=Path, help="where the rehearsal runs (default rehearsals/<config name>)")
    parser.add_argument("--quick", action="store_true",
                        help="train only the first strategy (every model, task and setting still runs)")
    args, snakemake_args = parser.parse_known_args(argv)
    directory = args.dir or Path("rehearsals") / args.config.stem
    try:
        written = write_rehearsal(args.config, directory, args.quick)
    except (RehearsalError, OSError, yaml.YAMLError) as e:
        print(f"hardex-rehearse: {e}", file=sys.stderr)
        return 2
    print(f"hardex-rehearse: the rehearsal of {args.config} is {written}; running it in {directory}/", file=sys.stderr)
    cores = [] if any(a in ("-c", "-j", "--cores", "--jobs") or a.startswith(("--cores=", "--jobs=")) for a in
                      snakemake_args) else ["--cores", "all"]
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--directory", str(directory),
           "--configfile", str(written.resolve()), *cores, *snakemake_args]
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
