"""Pictures of matches: a series with every matched span shaded and its rows marked by
pattern variable.

Why: a pattern is easier to check by eye than by reading a table of row numbers. The
input is what users already have after a query: the matches of an ``ALL ROWS PER MATCH``
query (one row per matched row, with ``MATCH_NUMBER()`` and ``CLASSIFIER()`` measures)
and, optionally, the whole series the pattern ran over. matplotlib is an optional
dependency (``pip install 'cepsql[plot]'``).
"""
from __future__ import annotations

from typing import Any

from cepsql.errors import CepAnalysisError, CepEnvironmentError

MAX_ROWS = 200_000  # rows taken from a Spark DataFrame: a plot of more cannot be read


def plot_matches(matches: Any, series: Any = None, *, x: str, y: str,
                 match: str = "match_num", label: str | None = "var",
                 where: dict[str, Any] | None = None, title: str | None = None,
                 file: str | None = None, ax: Any = None, max_matches: int = 50):
    """Draw ``y`` over ``x`` with each match's span shaded and labelled by match number,
    and each matched row marked with the colour of its pattern variable.

    ``matches``: the rows of an ``ALL ROWS PER MATCH`` query (pandas or Spark DataFrame)
    with columns ``x``, ``y``, ``match`` (``MATCH_NUMBER()``) and ``label``
    (``CLASSIFIER()``; None draws all matched rows alike). ``series``: the whole input
    (optional) drawn as the line under the matches. ``where``: column = value filters
    applied to both (e.g. ``{"symbol": "AAPL"}``: one partition per picture). ``file``:
    save the picture there (format from the suffix: .png, .svg, .pdf); the figure is
    returned either way. At most ``max_matches`` matches are drawn (the first ones).
    """
    plt = _pyplot()
    rows = _filtered(_as_pandas(matches, "matches"), where, "matches")
    needed = [x, y, match] + ([label] if label else [])
    _require_columns(rows, needed, "matches")
    line = None
    if series is not None:
        line = _filtered(_as_pandas(series, "series"), where, "series")
        _require_columns(line, [x, y], "series")

    if ax is None:
        fig, ax = plt.subplots(figsize=(11, 4.5))
    else:
        fig = ax.figure
    if line is not None:
        ordered = line.sort_values(x, kind="stable")
        ax.plot(ordered[x], ordered[y], color="0.55", linewidth=1.0, label=y, zorder=1)

    numbers = sorted(rows[match].dropna().unique())[:max_matches]
    shown = rows[rows[match].isin(numbers)]
    for i, number in enumerate(numbers):
        span = shown[shown[match] == number]
        start, end = span[x].min(), span[x].max()
        ax.axvspan(start, end, color="tab:blue" if i % 2 == 0 else "tab:cyan", alpha=0.12,
                   zorder=0)
        ax.annotate(f"#{_plain(number)}", xy=(start, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -12 - 10 * (i % 3)), textcoords="offset points", fontsize=8, color="tab:blue")
    if label:
        variables = list(dict.fromkeys(shown[label].dropna()))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, var in enumerate(variables):
            part = shown[shown[label] == var]
            ax.scatter(part[x], part[y], s=22, color=colours[(k + 1) % len(colours)],
                       label=str(var), zorder=3, edgecolors="white", linewidths=0.5)
    else:
        ax.scatter(shown[x], shown[y], s=22, color="tab:orange", label="matched", zorder=3)

    ax.set_xlabel(x)
    ax.set_ylabel(y)
    total = rows[match].nunique()
    caption = f"{total} match{'es' if total != 1 else ''}"
    if total > len(numbers):
        caption += f" (first {len(numbers)} drawn)"
    if where:
        caption += " where " + ", ".join(f"{k} = {v}" for k, v in where.items())
    ax.set_title(title or caption)
    if len(ax.get_legend_handles_labels()[0]):
        ax.legend(loc="best", fontsize=8, title=label if label else None)
    if _is_time(rows[x]):
        fig.autofmt_xdate()
    fig.tight_layout()
    if file:
        fig.savefig(file)
    return fig


def _pyplot():
    try:
        import matplotlib
    except ImportError as err:
        raise CepEnvironmentError(
            "plot_matches needs matplotlib: pip install 'cepsql[plot]'") from err
    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        import os
        if not os.environ.get("DISPLAY") and os.name != "nt":
            matplotlib.use("Agg")  # no screen: draw to files only
    import matplotlib.pyplot as plt
    return plt


def _as_pandas(frame: Any, what: str):
    import pandas as pd
    if isinstance(frame, pd.DataFrame):
        return frame
    if hasattr(frame, "limit") and hasattr(frame, "toPandas"):  # a Spark DataFrame
        return frame.limit(MAX_ROWS).toPandas()
    if hasattr(frame, "to_pandas"):  # Arrow table
        return frame.to_pandas()
    raise CepAnalysisError(f"plot_matches: {what} must be a pandas or Spark DataFrame, "
                           f"not {type(frame).__name__}")


def _filtered(frame, where: dict[str, Any] | None, what: str):
    if not where:
        return frame
    _require_columns(frame, list(where), what)
    keep = None
    for column, value in where.items():
        test = frame[column] == value
        keep = test if keep is None else keep & test
    return frame[keep]


def _require_columns(frame, columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise CepAnalysisError(
            f"plot_matches: {what} has no column {', '.join(missing)} "
            f"(columns: {', '.join(map(str, frame.columns))})")


def _is_time(column) -> bool:
    import pandas as pd
    return pd.api.types.is_datetime64_any_dtype(column)


def _plain(number) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


#: how each trace event is marked: (marker, colour, legend text)
_TRACE_MARKS = {"extended": ("o", "tab:green", "held"), "failed": ("x", "tab:red", "failed"),
                "window": ("x", "tab:orange", "cut by window"),
                "pruned": (".", "0.6", "pruned (equivalent)")}


def plot_trace(trace: Any, series: Any = None, *, x: str = "row", y: str | None = None,
               where: dict[str, Any] | None = None, title: str | None = None,
               file: str | None = None, max_steps: int = 5_000):
    """Draw a trace (``cepsql.trace`` / ``spark.cep.trace``): rows along ``x`` (``row``
    or the ORDER BY column the trace carries), pattern variables up the y axis, each try
    marked held / failed / cut by the window / pruned, every attempt's rows joined as a
    path and each match's span shaded. With ``series`` and ``y``, the input's ``y``
    column is drawn above on the same x axis, over the slice's span (``where`` filters
    both, as in ``plot_matches``; one partition per picture). Returns the figure;
    ``file`` saves it too."""
    plt = _pyplot()
    steps = _filtered(_as_pandas(trace, "trace"), where, "trace")
    _require_columns(steps, [x, "row", "attempt", "variable", "event", "path", "path_rows"],
                     "trace")
    keys = list(steps.columns[:list(steps.columns).index("step")]) if "step" in steps else []
    if keys and len(steps.drop_duplicates(keys)) > 1:
        raise CepAnalysisError(
            f"plot_trace draws one partition: choose it with where={{...}} "
            f"({', '.join(keys)}), or trace one (partition={{...}})")
    steps = steps.head(max_steps)
    line = None
    if series is not None:
        if y is None:
            raise CepAnalysisError("plot_trace: give y= (the series column to draw)")
        line = _filtered(_as_pandas(series, "series"), where, "series")
        _require_columns(line, [x, y], "series")
        drawn = steps[x].dropna()
        if len(drawn):  # the series over the slice only
            line = line[(line[x] >= drawn.min()) & (line[x] <= drawn.max())]
    if line is not None:
        fig, (top, ax) = plt.subplots(2, 1, figsize=(11, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [2, 3]})
        ordered = line.sort_values(x, kind="stable")
        top.plot(ordered[x], ordered[y], color="0.55", linewidth=1.0)
        top.set_ylabel(y)
    else:
        fig, ax = plt.subplots(figsize=(11, 4))
        top = None
    variables = list(dict.fromkeys(steps["variable"].dropna()))
    level = {v: i for i, v in enumerate(variables)}
    position = dict(zip(steps["row"], steps[x]))
    for _, s in steps[steps["event"].isin(list(_TRACE_MARKS))].iterrows():
        names = s["path"].split()
        rows = [int(r) for r in str(s["path_rows"]).split(", ") if r]
        if len(names) >= 2 and len(rows) >= 2 and rows[-2] in position:
            ax.plot([position[rows[-2]], s[x]], [level[names[-2]], level[names[-1]]],
                    color="tab:green" if s["event"] == "extended" else "0.75",
                    linewidth=0.8, alpha=0.6, zorder=1)
    for event, (marker, colour, text) in _TRACE_MARKS.items():
        part = steps[steps["event"] == event]
        if len(part):
            ax.scatter(part[x], part["variable"].map(level), marker=marker, color=colour,
                       s=30, label=text, zorder=3)
    matches = steps[steps["event"] == "match"]
    for _, m in matches.iterrows():
        start = position.get(m["attempt"], m[x])
        for axis in (ax, top):
            if axis is not None:
                axis.axvspan(start, m[x], color="tab:blue", alpha=0.12, zorder=0)
        ax.annotate(f"#{_plain(m['match_number'])}", xy=(start, 1.0),
                    xycoords=("data", "axes fraction"), xytext=(2, -12),
                    textcoords="offset points", fontsize=8, color="tab:blue")
    ax.set_yticks(range(len(variables)), [str(v) for v in variables])
    ax.set_ylim(-0.6, len(variables) - 0.4)
    ax.set_ylabel("pattern variable")
    ax.set_xlabel(x)
    attempts = steps["attempt"].nunique()
    caption = (f"{attempts} attempt{'s' if attempts != 1 else ''}, {len(matches)} "
               f"match{'es' if len(matches) != 1 else ''}")
    if where:
        caption += " where " + ", ".join(f"{k} = {v}" for k, v in where.items())
    (top or ax).set_title(title or caption)
    if len(ax.get_legend_handles_labels()[0]):
        ax.legend(loc="upper right", fontsize=8, ncol=4)
    if _is_time(steps[x]):
        fig.autofmt_xdate()
    fig.tight_layout()
    if file:
        fig.savefig(file)
    return fig
