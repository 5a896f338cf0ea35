"""The compute table from timing files (the Snakemake benchmark files that Snakemake 9 writes)."""

from __future__ import annotations

import pytest

from hardex.report import AnalysisError
from hardex.report.timings import compute_table, load_timings

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def timing_file(root, rel, s, rss="512.00", cpu="10.00"):
    path = root / "results" / "timings" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{s}\t0:00:00\t{rss}\t900.00\t400.00\t450.00\t1.00\t2.00\t50.00\t{cpu}\n")
    return path


def test_stages_are_summed_in_pipeline_order(tmp_path):
    files = [
        timing_file(tmp_path, "train/tiny/swaps/hard/seed0.tsv", "60.00", "2048.00", "100.00"),
        timing_file(tmp_path, "train/tiny/swaps/easy/seed0.tsv", "120.00", "1024.00", "200.00"),
        timing_file(tmp_path, "train/tiny/arith/hard/seed0.tsv", "30.00"),
        timing_file(tmp_path, "probe/tiny/swaps.tsv", "6.00"),
        timing_file(tmp_path, "build_model/tiny.tsv", "90.00", "NA", "NA"),  # Snakemake's NA: not measured
        timing_file(tmp_path, "evaluate_run/tiny/swaps/hard/seed0.tsv", "12.00"),
    ]
    table = compute_table(load_timings(files))
    assert table["stage"].to_list() == ["build_model", "probe", "train", "evaluate_run", "all"]
    train = table.row(2, named=True)
    assert train["jobs"] == 3 and train["wall_min"] == pytest.approx(210 / 60)
    assert train["median_s"] == 60 and train["max_s"] == 120 and train["peak_rss_gib"] == 2.0
    assert train["cpu_min"] == pytest.approx(310 / 60)
    build = table.row(0, named=True)
    assert build["peak_rss_gib"] is None and build["wall_min"] == 1.5
    total = table.row(4, named=True)
    assert total["jobs"] == 6 and total["wall_min"] == pytest.approx(318 / 60) and total["peak_rss_gib"] == 2.0


def test_a_file_outside_the_layout_or_not_a_benchmark_is_refused(tmp_path):
    stray = tmp_path / "timing.tsv"
    stray.write_text(HEADER + "1.0\t0:00:01\t1\t1\t1\t1\t0\t0\t0\t1\n")
    with pytest.raises(AnalysisError, match="not a timing file of the results layout"):
        load_timings([stray])
    empty = tmp_path / "results/timings/probe/tiny/swaps.tsv"
    empty.parent.mkdir(parents=True)
    empty.write_text("s\th:m:s\n")
    with pytest.raises(AnalysisError, match="not a Snakemake timing file"):
        load_timings([empty])
