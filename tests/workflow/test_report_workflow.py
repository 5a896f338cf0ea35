"""The report stage in a real `snakemake` run of the smoke config: its outputs, the HTML report, and
that a plot setting reruns only the figure rules (report_figures, report_figure_pool)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml

from hardex.config import check_config
from hardex.report.render import TABLE_FORMATS
from hardex.report.tables import TABLES
from hardex.settings import run_strategies
from tests.support import snakemake

pytestmark = pytest.mark.slow

FIGURES = ["accuracy_curves", "learnable_vs_gain", "pool_pass_rates", "zero_std_share", "gain_vs_compute", "pass_at_k",
           "gain_curve", "training_dynamics", "gain_by_difficulty"]
FIGURE_RULES = {"report_figures", "report_figure_pool"}  # every figure in one job, but the pool's (needs no training)


def _planned_rules(output: str) -> set[str]:
    """Rule names in the 'Job stats' table of a dry run."""
    block = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+\s*$", block, re.M)}


def test_report_outputs_exist(smoke_run):
    for name in [*TABLES, "compute", "recommend"]:
        for ext in TABLE_FORMATS:
            path = smoke_run / f"results/tables/{name}.{ext}"
            assert path.exists() and path.stat().st_size > 0, path
    for fig in FIGURES:
        for ext in ("png", "pdf"):
            assert (smoke_run / f"results/figures/{fig}.{ext}").stat().st_size > 1000
    # one job drew every figure but the pool's (a process each paid its imports every time)
    drawn = (smoke_run / "logs/report/figures.log").read_text()
    assert all(f"{fig}: " in drawn for fig in FIGURES if fig != "pool_pass_rates"), drawn
    assert "pool_pass_rates: " in (smoke_run / "logs/report/figure_pool.log").read_text()
    reg = json.loads((smoke_run / "results/regression.json").read_text())
    cfg = yaml.safe_load((smoke_run / "config.yaml").read_text())
    fitted = [s for s in cfg["selection"]["strategies"] if s in reg["this_run"]["strategies"]]  # one point a cell
    n_cells = len(cfg["models"]) * len(cfg["tasks"]) * len(fitted)
    assert reg["this_run"]["n"] == n_cells == len(reg["this_run"]["points"])
    assert reg["provenance"]["configfile"] == "config.yaml"
    gain = (smoke_run / "results/tables/accuracy_gain.md").read_text()
    for strategy in cfg["selection"]["strategies"]:
        assert f"| {strategy} |" in gain


def test_the_report_opens_with_the_headline_and_the_run_ends_by_printing_it(smoke_run, smoke_copy):
    assert next(iter(TABLES)) == "headline"
    headline = (smoke_run / "results/tables/headline.md").read_text()
    assert headline.startswith("## Headline: which strategy gained how much beyond form\n\n**tiny on swaps: ")
    # the answer, then the compact table, then the full reading and the definitions
    answer, table = headline.index("**tiny on swaps"), headline.index("| model |")
    rest = headline.rindex("tiny on swaps: ")
    assert answer < table and "| verdict |" in headline and "| behind_best |" not in headline
    assert headline.index("learnable_pct: the share") > table
    # the run ends by printing the answer and its table, which fit one screen, and says where the rest is
    printed = (smoke_run / "snakemake.stderr").read_text()
    shown = headline[:headline.rindex("|") + 1]
    assert f"hardex: results/tables/headline.md\n\n{shown}\n\n(the full reading" in printed
    assert "learnable_pct: the share" not in printed.split("hardex: results/tables/headline.md")[1]
    assert len(shown.splitlines()) <= 40 and rest > table
    # a later run that rebuilds nothing prints no stale headline
    again = snakemake(smoke_copy, "--cores", "1")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert "headline.md" not in again.stderr


def test_compute_table_counts_every_model_job(smoke_run):
    """The timing file of every model job, summed per stage in results/tables/compute.*."""
    import polars as pl

    cfg = yaml.safe_load((smoke_run / "config.yaml").read_text())
    runs = len(cfg["tasks"]) * len(run_strategies(check_config(cfg))) * len(cfg["seeds"])  # online and control runs too
    table = pl.read_csv(smoke_run / "results/tables/compute.csv")
    jobs = dict(zip(table["stage"], table["jobs"]))
    assert jobs == {"build_model": 1, "probe": len(cfg["tasks"]), "train": runs,
                    "evaluate_base": len(cfg["tasks"]), "evaluate_run": runs,
                    "all": 1 + 2 * len(cfg["tasks"]) + 2 * runs}
    assert (table["wall_min"] > 0).all() and (table["peak_rss_gib"] > 0.1).all()  # a torch job holds > 100 MiB
    assert "Compute per stage" in (smoke_run / "results/tables/compute.md").read_text()



def test_which_subset_learns_is_predicted_before_any_training(smoke_run, tmp_path):
    """The expected learnable % needs only the probe: the pool figure asks for no GRPO job, and
    after training Table 2 shows the prediction beside the measurement."""
    import polars as pl

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "config.yaml").write_text((smoke_run / "config.yaml").read_text())
    res = snakemake(fresh, "-n", "--cores", "1", "results/figures/pool_pass_rates.png")
    assert res.returncode == 0, res.stderr[-3000:]
    planned = _planned_rules(res.stdout + res.stderr)
    assert {"probe", "select", "report_figure_pool"} <= planned and not planned & {"train", "evaluate_run"}
    learn = pl.read_csv(smoke_run / "results/tables/learnable.csv")
    assert learn["expected_learnable_pct"].is_between(0, 100).all()
    subsets = pl.read_csv(smoke_run / "results/tables/subset_pass_rates.csv")
    assert subsets.filter(pl.col("strategy") == "pool")["expected_learnable_pct"].is_not_null().all()

def test_html_report(smoke_run, tmp_path):
    out = tmp_path / "report.html"
    res = snakemake(smoke_run, "--report", str(out))
    assert res.returncode == 0, res.stderr[-3000:]
    assert "WARNING" not in res.stderr and "ERROR" not in res.stderr, res.stderr[-3000:]  # captions render
    html = out.read_text()
    assert out.stat().st_size > 100_000
    # every figure embedded, its PNG's own bytes in the page (not only its name)
    for name in FIGURES:
        png = (smoke_run / f"results/figures/{name}.png").read_bytes()
        assert base64.b64encode(png).decode() in html, name
    # the menu (categories sorted by name) opens with the answer: the headline, alone
    categories = json.loads(re.search(r"var categories = (.+);", html).group(1))
    assert sorted(categories)[:2] == ["Answer", "Figures"]
    assert [Path(f).name for sub in categories["Answer"].values() for f in sub] == ["headline.html"]
    for name in [*TABLES, "compute", "recommend"]:
        assert f"{name}.html" in html


def _dry_run_with(workdir, report_settings: dict, ok: bool = True):
    """Rules a dry run plans after editing only the report section of a private copy's config (the
    shared run's config is read by other pytest workers meanwhile); with ok=False, the failed run itself."""
    path = workdir / "config.yaml"
    original = path.read_text()
    cfg = yaml.safe_load(original)
    cfg["report"] = report_settings
    try:
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        res = snakemake(workdir, "-n", "--cores", "1")
    finally:
        path.write_text(original)
    if not ok:
        return res
    assert res.returncode == 0, res.stderr[-3000:]
    return _planned_rules(res.stdout + res.stderr)


def test_plot_setting_reruns_only_figure_rules(smoke_copy):
    assert _dry_run_with(smoke_copy, {"figures": {"dpi": 72}}) == FIGURE_RULES | {"all"}
    # a statistics setting: the tables, the regression and the figures (capacity's intervals, and those drawn from
    # regression.json and from tables: rollout_budget's gain intervals, pass_at_k's file rewritten with the others);
    # not the pool figure
    assert _dry_run_with(smoke_copy, {"ci_level": 0.9}) == {"report_tables", "report_regression", "report_figures",
                                                           "all"}
    # which strategies the regression fits: the regression and the figures (learnable % vs gain is drawn from it)
    assert _dry_run_with(smoke_copy, {"regression_strategies": ["hard", "easy"]}) == {
        "report_regression", "report_figures", "all"}


def test_unknown_reference_stops_before_any_job(smoke_copy):
    res = _dry_run_with(smoke_copy, {"reference": "no_such_paper"}, ok=False)
    assert res.returncode != 0
    assert "hardex: config error: report.reference: no shipped reference 'no_such_paper'" in res.stderr


def test_rollout_budget_charges_the_probe_to_the_strategies_that_read_it(smoke_run):
    """hard, easy, hard_online and hard's controls were chosen by the probe: each is charged all its samples
    and their tokens; random is not. Training rollouts are the steps' completions; the online run counts what it
    generated and threw away, and says when it hit its cap."""
    import polars as pl

    cfg = yaml.safe_load((smoke_run / "config.yaml").read_text())
    probe = pl.read_parquet(smoke_run / "results/probe/tiny/swaps.parquet")
    table = pl.read_csv(smoke_run / "results/tables/rollout_budget.csv")
    row = {s: r for s, r in zip(table["strategy"], table.iter_rows(named=True))}
    assert set(row) == {"hard", "easy", "random", "hard_online", "hard_random_reward", "hard_format"}
    for strategy in ("hard", "easy", "hard_online", "hard_random_reward", "hard_format"):
        assert row[strategy]["probe_rollouts"] == probe["k"].sum()
        assert row[strategy]["probe_tokens"] == probe["tokens"].sum()
    assert row["random"]["probe_rollouts"] == 0 and row["random"]["probe_tokens"] == 0
    g = cfg["grpo"]
    per_run = g["max_steps"] * g["prompts_per_step"] * g["num_generations"]
    assert row["hard"]["train_rollouts"] == per_run and row["hard"]["discarded_rollouts"] == 0
    online = pl.read_parquet(smoke_run / "results/train/tiny/swaps/hard_online/seed0/steps.parquet")
    assert row["hard_online"]["train_rollouts"] == per_run
    assert row["hard_online"]["discarded_rollouts"] == online["rollouts_discarded"].sum()
    assert row["hard_online"]["capped_steps"] == online["filter_capped"].sum()
    assert ((online["frac_zero_std"] == 0) | online["filter_capped"]).all()  # mixed groups only, unless capped
    for r in row.values():
        assert r["total_rollouts"] == r["probe_rollouts"] + r["train_rollouts"] + r["discarded_rollouts"]
