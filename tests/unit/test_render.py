"""Tables as people read them: the p a verdict rests on must not round to 0.00."""

import polars as pl

from hardex.report import render


def test_p_values_and_levels_keep_significant_digits_in_every_format(tmp_path):
    df = pl.DataFrame({"strategy": ["hard", "easy"], "difference": [-8.0213, 14.7798], "p": [0.0084, 1.3e-4],
                       "p_holm": [0.052, None], "p_equivalence": [0.64, 0.99826], "level": [0.044, 0.001]})
    render.write_table(df, tmp_path / "verdicts", "Verdicts")
    md = (tmp_path / "verdicts.md").read_text()
    assert "| hard | -8.02 | 0.0084 | 0.052 | 0.64 | 0.044 |" in md  # other floats keep their decimals
    assert "| easy | 14.78 | 1.3e-04 | – | 1 | 0.001 |" in md
    for fmt in ("tex", "html"):
        text = (tmp_path / f"verdicts.{fmt}").read_text()
        assert "0.0084" in text and "e-04" in text and "0.00 " not in text
    assert "0.008400" in (tmp_path / "verdicts.csv").read_text()  # the CSV keeps full precision for tools
