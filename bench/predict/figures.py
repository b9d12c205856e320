"""The performance model's figures (a frame in, a figure out, as in :mod:`bench.plots`): the validation's predicted
against measured throughput, and the forecasts of S(n)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from ..plots import empty


def predicted_vs_measured(df: pd.DataFrame, title: str = "model against measurement (samples/s)") -> plt.Figure:
    """``measured`` against ``predicted`` per cell (log axes), coloured by ``family``; the ±10 % and ±25 % bands."""
    if df.empty:
        return empty(title)
    fig, ax = plt.subplots(figsize=(6.5, 6))
    sns.scatterplot(data=df, x="measured", y="predicted", hue="family", style="family", ax=ax, s=36)
    lo, hi = df[["measured", "predicted"]].min().min() * 0.8, df[["measured", "predicted"]].max().max() * 1.25
    for f, ls in ((1.0, "-"), (1.1, "--"), (0.9, "--"), (1.25, ":"), (0.75, ":")):
        ax.plot([lo, hi], [lo * f, hi * f], ls, color="0.5", lw=0.8)
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), title=title)
    return fig


def forecast_speedup(df: pd.DataFrame, title: str = "forecast S(n) over sync at one worker") -> plt.Figure:
    """S(n) (``speedup``) against ``np`` per ``algorithm``, one panel per ``hardware``, the ideal S(n) = n dotted."""
    if df.empty:
        return empty(title)
    g = sns.relplot(data=df, x="np", y="speedup", hue="algorithm", style="family", col="hardware", col_wrap=2,
                    kind="line", markers=True, height=3.6, facet_kws={"sharey": False})
    for ax in g.axes.flat:
        ax.plot(sorted(df["np"].unique()), sorted(df["np"].unique()), ":", color="0.4")
        ax.set(xscale="log", yscale="log")
    g.figure.suptitle(title, y=1.02)
    return g.figure
