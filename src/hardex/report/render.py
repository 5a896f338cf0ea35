"""Writing a table as Markdown, CSV, LaTeX (booktabs) and a standalone HTML page, atomically."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import polars as pl

from hardex.io import write_text_atomic
from hardex.report import AnalysisError

TABLE_FORMATS = ("md", "csv", "tex", "html")


def _fmt(v: Any, decimals: int) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{decimals}f}"
    return str(v)


def _is_probability(column: str) -> bool:
    """p-values and test levels ("p", "p_holm", "p_equivalence", "level"): read in significant digits,
    since at fixed decimals every p a verdict rests on shows as 0.00."""
    return column in ("p", "level") or column.startswith("p_")


def _fmt_probability(v: Any) -> str:
    if not isinstance(v, float) or math.isnan(v):
        return _fmt(v, 2)
    return f"{v:.2g}" if v >= 1e-3 or v == 0 else f"{v:.1e}"


def _display(df: pl.DataFrame, decimals: int) -> tuple[list[str], list[list[str]]]:
    """Header and string cells; an interval pair x_ci_low, x_ci_high becomes one "[lo, hi]" column."""
    header, getters = [], []
    cols = list(df.columns)
    skip = set()
    for c in cols:
        if c in skip:
            continue
        if c.endswith("_ci_low") and c.replace("_ci_low", "_ci_high") in cols:
            hi = c.replace("_ci_low", "_ci_high")
            skip.add(hi)
            header.append(c.replace("_ci_low", " CI"))
            getters.append(lambda r, lo=c, hi=hi: "–"
                           if r[lo] is None or (isinstance(r[lo], float) and math.isnan(r[lo]))
                           else f"[{_fmt(r[lo], decimals)}, {_fmt(r[hi], decimals)}]")
        else:
            header.append(c)
            getters.append((lambda r, c=c: _fmt_probability(r[c])) if _is_probability(c)
                           else (lambda r, c=c: _fmt(r[c], decimals)))
    cells = [[g(r) for g in getters] for r in df.iter_rows(named=True)]
    return header, cells


def to_markdown(df: pl.DataFrame, decimals: int = 2, title: str | None = None, note: str | None = None,
                footnote: str | None = None) -> str:
    """Title, note, the table, then the footnote (what the columns mean, for a table whose note is its answer)."""
    header, cells = _display(df, decimals)
    lines = [f"## {title}", ""] if title else []
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---:" if all(_numeric(c[i]) for c in cells) and cells else "---"
                                for i in range(len(header))) + "|")
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    if footnote:
        lines += ["", footnote]
    return "\n".join(lines) + "\n"


def _numeric(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return s == "–"


_TEX_ESCAPE = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
               "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}", "–": "--"}


def _tex(s: str) -> str:
    return "".join(_TEX_ESCAPE.get(ch, ch) for ch in s)


def to_latex(df: pl.DataFrame, decimals: int = 2, caption: str | None = None, label: str | None = None) -> str:
    """A booktabs table (needs \\usepackage{booktabs})."""
    header, cells = _display(df, decimals)
    align = "".join("r" if cells and all(_numeric(c[i]) for c in cells) else "l" for i in range(len(header)))
    out = ["\\begin{table}[t]", "\\centering"]
    if caption:
        out.append(f"\\caption{{{_tex(caption)}}}")
    if label:
        out.append(f"\\label{{{label}}}")
    out += [f"\\begin{{tabular}}{{{align}}}", "\\toprule", " & ".join(_tex(h) for h in header) + " \\\\", "\\midrule"]
    out += [" & ".join(_tex(c) for c in row) + " \\\\" for row in cells]
    out += ["\\bottomrule", "\\end{tabular}", "\\end{table}"]
    return "\n".join(out) + "\n"


def to_html(df: pl.DataFrame, decimals: int = 2, title: str | None = None, note: str | None = None,
            footnote: str | None = None) -> str:
    """A standalone HTML page (the Snakemake report shows HTML, not CSV, inline)."""
    import html

    header, cells = _display(df, decimals)
    num = [bool(cells) and all(_numeric(c[i]) for c in cells) for i in range(len(header))]
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="{"num" if num[i] else ""}">{html.escape(c)}</td>'
                                    for i, c in enumerate(row)) + "</tr>" for row in cells)
    if not cells:
        body = f'<tr><td colspan="{len(header)}"><em>no rows</em></td></tr>'
    style = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:13px}"
             "th,td{border-bottom:1px solid #ccc;padding:3px 8px}th{background:#f0f0f0;text-align:left}"
             "td.num{text-align:right;font-variant-numeric:tabular-nums}")
    head = f"<h3>{html.escape(title)}</h3>" if title else ""
    para = "".join(f"<p>{html.escape(part)}</p>" for part in (note or "").split("\n\n") if part)
    foot = "".join(f"<p>{html.escape(part)}</p>" for part in (footnote or "").split("\n\n") if part)
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title or '')}</title>"
            f"<style>{style}</style></head><body>{head}{para}<table><thead><tr>{th}</tr></thead>"
            f"<tbody>{body}</tbody></table>{foot}</body></html>\n")


def write_table(df: pl.DataFrame, stem: str | Path, title: str, note: str | None = None, decimals: int = 2,
                formats: Sequence[str] = TABLE_FORMATS, banner: str | None = None, columns: Sequence[str] | None = None,
                footnote: str | None = None) -> list[Path]:
    """Write stem.md / .csv / .tex / .html (atomically); CSV keeps full precision for tools and every column.
    A banner (a rehearsal's: its numbers are not results) leads the title. `columns`: the ones the Markdown,
    LaTeX and HTML show (those present; every one where None), for a table read at a glance whose CSV holds
    more; `footnote`: text after the table (the note is then its answer, the footnote its definitions)."""
    shown = df.select([c for c in columns if c in df.columns]) if columns is not None else df
    stem = Path(stem)
    title = f"{banner}. {title}" if banner else title
    written = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        if fmt == "csv":
            text = df.write_csv(float_precision=6)
        elif fmt == "md":
            text = to_markdown(shown, decimals, title, note, footnote)
        elif fmt == "tex":
            caption = title + "".join(f". {t}" for t in (note, footnote) if t)
            text = to_latex(shown, decimals, caption=caption, label=f"tab:{stem.name}")
        elif fmt == "html":
            text = to_html(shown, decimals, title, note, footnote)
        else:
            raise AnalysisError(f"unknown table format {fmt!r}; known: {', '.join(TABLE_FORMATS)}")
        write_text_atomic(text, path)
        written.append(path)
    return written
