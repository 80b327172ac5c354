"""cepsql.plot_matches: matched spans shaded, rows marked per variable, files written."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import cepsql  # noqa: E402
from cepsql.errors import CepAnalysisError  # noqa: E402

SERIES = pd.DataFrame({"sym": ["a"] * 10 + ["b"] * 4,
                       "t": list(range(10)) + list(range(4)),
                       "p": [5, 4, 3, 4, 5, 6, 5, 4, 5, 6, 1, 2, 3, 4]})
QUERY = """SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY sym ORDER BY t
  MEASURES MATCH_NUMBER() AS match_num, CLASSIFIER() AS var ALL ROWS PER MATCH
  PATTERN (DOWN+ UP+) DEFINE DOWN AS DOWN.p < PREV(DOWN.p), UP AS UP.p > PREV(UP.p)) m"""


@pytest.fixture(scope="module")
def matches():
    return cepsql.match_recognize(QUERY, s=SERIES)


def test_spans_markers_and_legend(matches, tmp_path):
    out = tmp_path / "m.png"
    fig = cepsql.plot_matches(matches, SERIES, x="t", y="p", where={"sym": "a"}, file=str(out))
    ax = fig.axes[0]
    assert sorted(matches[matches.sym == "a"].match_num.unique()) == [1, 2]
    assert len(ax.patches) == 2                       # one shaded span per match
    spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
    assert spans == [(1, 5), (6, 9)]                  # first to last matched row of each
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["p", "DOWN", "UP"]              # the series line, then the variables
    assert ax.get_title() == "2 matches where sym = a"
    assert out.stat().st_size > 1000 and out.read_bytes()[:4] == b"\x89PNG"


def test_svg_without_series_or_labels(matches, tmp_path):
    out = tmp_path / "m.svg"
    fig = cepsql.plot_matches(matches, x="t", y="p", label=None, file=str(out), max_matches=1)
    assert len(fig.axes[0].patches) == 1
    assert "first 1 drawn" in fig.axes[0].get_title()
    assert out.read_text().lstrip().startswith("<?xml")


def test_missing_column_names_the_columns(matches):
    with pytest.raises(CepAnalysisError, match="no column price"):
        cepsql.plot_matches(matches, x="t", y="price")


def test_spark_dataframe_input(spark, matches):
    frame = spark.createDataFrame(matches)
    fig = cepsql.plot_matches(frame, x="t", y="p", where={"sym": "a"})
    assert len(fig.axes[0].patches) == 2
