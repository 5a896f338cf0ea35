"""What a results folder's stored Markdown tables support, recomputed from those tables alone.

    python perf/stored_tables_audit.py docs/results-real-model-study/addition

Four checks, each printed as a table; a check whose tables are missing from the folder is skipped:
- controls (learnable.md, accuracy_gain.md, power.md): did each control train? Its learnable % beside its
  strategy's, and the comparisons with a control in power.md (paired t, uncorrected).
- sharpening (pass_at_k.md): the pass@k that sharpening alone predicts. A Beta(a, b) is fitted to the base
  row's pass@k (pass@k = 1 - B(a, b+k)/B(a, b), least squares over its k's); each strategy's p -> p^gamma
  with E[p^gamma] its pass@1; predicted: its pass@k for its own k's and beyond_base = E[(1-p)^K (1 -
  (1-p^gamma)^n)] (K the base's samples, n the strategy's). Means over seeds only, so a point comparison.
- pairs (power.md): each pair of strategies (controls left out): paired t from n_seeds, difference and
  difference_sd; Holm over all pairs, and over the pairs of the strategy that gained most (the headline's);
  verdict differs (Holm p < 0.05), equivalent within +-margin (two one-sided tests, Holm p < 0.05: the
  90 % interval inside the margin), else undecided.
- seeds (power.md): seeds needed with the SD pooled over those pairs (noncentral t, the smallest n >= 2
  whose power is >= 0.8 and not NaN), for each pair's difference and for true differences of 5 and 10,
  and the chance that a truly level pair is found equivalent; power.md's own seeds_needed redone beside it.
Stored numbers are rounded to two decimals, so the last digit of a p-value can differ from the raw data's.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
from scipy import integrate, optimize, special, stats

from hardex.selection import RunName
from hardex.statistics import holm, paired_t_power, seeds_needed as library_seeds_needed

ALPHA, POWER, MAX_SEEDS = 0.05, 0.8, 1000


def read_table(path: Path) -> list[dict]:
    """The first Markdown table in `path` as a list of rows (column -> cell text)."""
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip().startswith("|")]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    return [dict(zip(cells[0], row)) for row in cells[2:]]


def num(cell: str) -> float:
    """A table cell as a number; nan for an empty cell ('–', '', '>1000')."""
    try:
        return float(cell.replace("+", ""))
    except ValueError:
        return math.nan


def is_control(run: str) -> bool:
    return RunName.parse(run).control is not None


def fmt(x: float, digits: int = 1) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def print_table(header: list[str], rows: list[list]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
    print()


# --- controls -------------------------------------------------------------------------------------------

def controls(folder: Path) -> None:
    gain = {r["strategy"]: r for r in read_table(folder / "accuracy_gain.md")} \
        if (folder / "accuracy_gain.md").exists() else {}
    learn = {r["strategy"]: num(r["learnable_pct"]) for r in read_table(folder / "learnable.md")} \
        if (folder / "learnable.md").exists() else {}
    ctrl = [s for s in gain if is_control(s)]
    if ctrl:
        print("### controls: did they train? (learnable.md, accuracy_gain.md)\n")
        rows = []
        for c in ctrl:
            s = RunName.parse(c).strategy
            rows.append([s, c, gain[s]["n_seeds"], fmt(learn.get(s, math.nan)), fmt(learn.get(c, math.nan)),
                         fmt(num(gain[s]["gain"]), 2), fmt(num(gain[c]["gain"]), 2),
                         f"{fmt(num(gain[s].get('beyond_format', '–')), 2)} {gain[s].get('beyond_format CI', '')}"])
        print_table(["strategy", "control", "seeds", "strategy learnable %", "control learnable %",
                     "strategy gain", "control gain", "beyond_format"], rows)
    if (folder / "power.md").exists():
        rows = []
        for r in read_table(folder / "power.md"):
            if r["kind"] in ("pair", "control") and (is_control(r["strategy"]) or is_control(r["versus"])):
                n, d, sd = int(r["n_seeds"]), num(r["difference"]), num(r["difference_sd"])
                half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
                p = 2 * stats.t.sf(abs(d) / (sd / math.sqrt(n)), n - 1)
                rows.append([r["strategy"], r["versus"], n, fmt(d, 2), f"[{d - half:+.1f}, {d + half:+.1f}]",
                             fmt(p, 4)])
        if rows:
            print("### comparisons with a control (power.md; 95 % paired t, uncorrected)\n")
            print_table(["strategy", "versus", "seeds", "difference", "95 % CI", "p"], rows)


# --- sharpening ------------------------------------------------------------------------------------------

def beta_pass_at_k(a: float, b: float, k: float) -> float:
    return 1 - math.exp(special.betaln(a, b + k) - special.betaln(a, b))


def beta_mean(f, a: float, b: float) -> float:
    """E[f(p)] for p ~ Beta(a, b), integrated in u = p^a (density (1 - u^(1/a))^(b-1) / (a B(a, b)) du),
    which takes away the singularity at 0 when a < 1."""
    norm = a * math.exp(special.betaln(a, b))
    val, _ = integrate.quad(lambda u: (1 - u ** (1 / a)) ** (b - 1) * f(u ** (1 / a)), 0, 1, limit=200)
    return val / norm


def fit_beta(pass_k: dict[int, float]) -> tuple[float, float]:
    ks = np.array(sorted(pass_k))
    obs = np.array([pass_k[k] for k in ks])

    def loss(x):
        a, b = np.exp(x)
        return sum((beta_pass_at_k(a, b, k) - o) ** 2 for k, o in zip(ks, obs))

    res = optimize.minimize(loss, x0=np.log([0.5, 3.0]), method="Nelder-Mead",
                            options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 4000})
    return tuple(np.exp(res.x))


def sharpening(folder: Path) -> None:
    path = folder / "pass_at_k.md"
    if not path.exists():
        return
    rows = read_table(path)
    kcols = sorted(int(c.split("@")[1]) for c in rows[0] if c.startswith("pass@"))
    base = next(r for r in rows if r["strategy"] == "base")
    K = int(base["n_samples"])
    base_pk = {k: num(base[f"pass@{k}"]) / 100 for k in kcols if not math.isnan(num(base[f"pass@{k}"]))}
    a, b = fit_beta(base_pk)
    fitted = " / ".join(f"pass@{k} {100 * beta_pass_at_k(a, b, k):.1f} ({100 * v:.1f})" for k, v in base_pk.items())
    print(f"### sharpening null (pass_at_k.md): base fitted by Beta(a={a:.3f}, b={b:.3f}); "
          f"fit (stored): {fitted}; K = {K}\n")
    out = []
    for r in rows:
        if r["strategy"] == "base":
            continue
        n, p1 = int(r["n_samples"]), num(r["pass@1"]) / 100
        # E[p^g] = B(a+g, b)/B(a, b), decreasing in g
        gamma = optimize.brentq(lambda g: math.exp(special.betaln(a + g, b) - special.betaln(a, b)) - p1,
                                1e-4, 50)
        ks = [k for k in kcols if k <= n]
        pred = {k: 1 - beta_mean(lambda p: (1 - p ** gamma) ** k, a, b) for k in ks}
        beyond = beta_mean(lambda p: (1 - p) ** K * (1 - (1 - p ** gamma) ** n), a, b)
        cells = [f"{fmt(num(r[f'pass@{k}']))} / {100 * pred[k]:.1f}" for k in ks]
        obs_b = num(r["beyond_base_pct"])
        out.append([r["strategy"], r["n_seeds"], f"{gamma:.3f}", *cells,
                    f"{fmt(obs_b)} / {100 * beyond:.1f}", f"{obs_b - 100 * beyond:+.1f}"])
    ks = [k for k in kcols if k <= max(int(r["n_samples"]) for r in rows if r["strategy"] != "base")]
    print_table(["strategy", "seeds", "gamma", *[f"pass@{k} obs / pred" for k in ks],
                 "beyond_base obs / pred", "beyond obs - pred"], out)


# --- pairs and seeds -------------------------------------------------------------------------------------

def pair_rows(folder: Path) -> list[dict]:
    """power.md's comparisons of two strategies, controls left out (a 'control' row whose versus is no
    control by name, e.g. tier_low against tier_low_random, is a pair)."""
    rows = []
    for r in read_table(folder / "power.md"):
        if r["kind"] in ("pair", "control") and not (is_control(r["strategy"]) or is_control(r["versus"])):
            n, d, sd = int(r["n_seeds"]), num(r["difference"]), num(r["difference_sd"])
            if n > 1 and sd > 0:
                rows.append({"strategy": r["strategy"], "versus": r["versus"], "n": n, "d": d, "sd": sd})
    return rows


def pairs(folder: Path, margin: float) -> None:
    rows = pair_rows(folder)
    if not rows:
        return
    for r in rows:
        se, df = r["sd"] / math.sqrt(r["n"]), r["n"] - 1
        r["p"] = 2 * stats.t.sf(abs(r["d"]) / se, df)
        r["p_tost"] = max(stats.t.sf((r["d"] + margin) / se, df), stats.t.cdf((r["d"] - margin) / se, df))
        h95, h90 = stats.t.ppf(0.975, df) * se, stats.t.ppf(0.95, df) * se
        r["ci95"], r["ci90"] = (r["d"] - h95, r["d"] + h95), (r["d"] - h90, r["d"] + h90)
        r["sd_up"] = r["sd"] * math.sqrt(df / stats.chi2.ppf(0.05, df))  # one-sided 95 % upper bound
    for r, ph, th in zip(rows, holm([r["p"] for r in rows]), holm([r["p_tost"] for r in rows])):
        r["p_holm"], r["tost_holm"] = ph, th
        r["verdict"] = ("differs" if ph < ALPHA else f"equivalent within +-{margin:g}" if th < ALPHA
                        else "undecided")
    gain_path = folder / "accuracy_gain.md"
    best = None
    if gain_path.exists():
        gains = [r for r in read_table(gain_path) if not is_control(r["strategy"])]
        best = max(gains, key=lambda r: num(r["gain"]))["strategy"]
        head = [r for r in rows if best in (r["strategy"], r["versus"])]
        for r, ph in zip(head, holm([r["p"] for r in head])):
            r["p_head"] = ph
    print(f"### pairs (power.md): {len(rows)} pair(s) of strategies, Holm over all of them"
          + (f"; headline family: the {len([r for r in rows if 'p_head' in r])} pair(s) of {best}" if best else "")
          + f"; equivalence margin +-{margin:g}\n")
    out = [[r["strategy"], r["versus"], r["n"], f"{r['d']:+.2f}", f"{r['sd']:.2f} (<= {r['sd_up']:.1f})",
            f"[{r['ci95'][0]:+.1f}, {r['ci95'][1]:+.1f}]", f"[{r['ci90'][0]:+.1f}, {r['ci90'][1]:+.1f}]",
            f"{r['p']:.4f}", f"{r['p_holm']:.3f}", fmt(r.get("p_head", math.nan), 3), f"{r['p_tost']:.3f}",
            f"{r['tost_holm']:.3f}", f"{tost_power(r['sd'], r['n'], margin):.2f}", r["verdict"]]
           for r in sorted(rows, key=lambda r: r["p"])]
    print_table(["strategy", "versus", "seeds", "difference", "sd (95 % upper)", "95 % CI", "90 % CI", "p",
                 "p Holm (all)", "p Holm (headline)", "p TOST", "p TOST Holm", "TOST power if level", "verdict"], out)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})}
    print(f"95 % intervals excluding zero, uncorrected: {sum(r['p'] < ALPHA for r in rows)} of {len(rows)}; "
          f"verdicts: {counts}\n")


def paired_power(effect: float, n: int) -> float:
    return paired_t_power(effect, n, ALPHA)


def seeds_needed(effect: float) -> int | None:
    """The report's search at POWER and ALPHA (never NaN taken as enough); None beyond MAX_SEEDS."""
    return library_seeds_needed(effect, 1.0, POWER, ALPHA, MAX_SEEDS)


def tost_power(sd: float, n: int, margin: float) -> float:
    """Chance that two one-sided tests at 0.05 (the 90 % paired t-interval inside +-margin) find a truly
    level pair equivalent with n seeds and true SD sd: an integral over the sample SD (chi-square)."""
    df, tc, se = n - 1, stats.t.ppf(0.95, n - 1), sd / math.sqrt(n)
    x_max = df * (margin / (tc * se)) ** 2  # beyond it the interval's half-width exceeds the margin

    def inside(x):
        half = tc * se * math.sqrt(x / df)
        return (2 * stats.norm.cdf((margin - half) / se) - 1) * stats.chi2.pdf(x, df)

    return integrate.quad(inside, 0, x_max, limit=200)[0]


def stored_seeds(folder: Path) -> None:
    """power.md's seeds_needed redone from each row's own difference / difference_sd with the search
    above (the stored table read a NaN power as enough). Printed where the two differ by more than the
    stored numbers' rounding can explain (any difference up to 10 seeds, else more than 5 %)."""
    out = []
    for r in read_table(folder / "power.md"):
        d, sd = num(r["difference"]), num(r["difference_sd"])
        if int(r["n_seeds"]) > 1 and sd > 0:
            n, stored = seeds_needed(d / sd), num(r["seeds_needed"].replace(">", ""))
            if (n or math.inf) != stored and (stored <= 10 or abs((n or MAX_SEEDS) / stored - 1) > 0.05):
                out.append([r["kind"], r["strategy"], r["versus"], r["effect_size"], r["seeds_needed"],
                            n or f">{MAX_SEEDS}"])
    print(f"### power.md's seeds_needed at each row's own SD, redone: {len(out)} rows differ\n")
    if out:
        print_table(["kind", "strategy", "versus", "effect_size", "stored", "redone"], out)


def seeds(folder: Path, margin: float) -> None:
    rows = pair_rows(folder)
    if not rows:
        return
    dof = sum(r["n"] - 1 for r in rows)
    pooled = math.sqrt(sum((r["n"] - 1) * r["sd"] ** 2 for r in rows) / dof)
    print(f"### seeds needed (power.md): SD pooled over the {len(rows)} pair(s): {pooled:.2f} points "
          f"({dof} degrees of freedom, not independent: the pairs share runs); paired t, two-sided "
          f"{ALPHA:g}, power {POWER:g}\n")
    show = lambda n: str(n) if n else f">{MAX_SEEDS}"  # noqa: E731
    out = [[r["strategy"], r["versus"], f"{r['d']:+.2f}", f"{abs(r['d']) / pooled:.2f}",
            show(seeds_needed(r["d"] / pooled)), f"{paired_power(abs(r['d']) / pooled, r['n']):.2f}"]
           for r in sorted(rows, key=lambda r: -abs(r["d"]))]
    for d in (5.0, 10.0):
        out.append([f"(a true difference of {d:g})", "", f"{d:+.2f}", f"{d / pooled:.2f}",
                    show(seeds_needed(d / pooled)), f"{paired_power(d / pooled, rows[0]['n']):.2f}"])
    print_table(["strategy", "versus", "difference", "effect (pooled SD)", "seeds needed",
                 f"power at {rows[0]['n']} seeds"], out)
    n0 = rows[0]["n"]
    n_eq = next((n for n in range(2, MAX_SEEDS + 1) if tost_power(pooled, n, margin) >= POWER), None)
    print(f"equivalence within +-{margin:g} of a truly level pair at the pooled SD: power "
          f"{tost_power(pooled, n0, margin):.2f} at {n0} seeds, 0.8 at {show(n_eq)} seeds\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a folder of stored report tables (accuracy_gain.md, power.md, ...)")
    ap.add_argument("--margin", type=float, default=5.0, help="equivalence margin in points (default 5)")
    args = ap.parse_args()
    print(f"## {args.folder}\n")
    controls(args.folder)
    sharpening(args.folder)
    if (args.folder / "power.md").exists():
        pairs(args.folder, args.margin)
        stored_seeds(args.folder)
        seeds(args.folder, args.margin)


if __name__ == "__main__":
    main()
