"""Pictures of what each layer holds: probe accuracy and selectivity by layer, and a CKA heatmap."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .cka import CkaResult
    from .compare import Comparison
    from .probe import ProbeResult

__all__ = ["plot_probe", "plot_cka", "plot_compare"]


def save_figure(figure: Any, path: str | Path) -> Path:
    from .plots import save_figure as save

    return save(figure, path)


def _figure(size: tuple[float, float]) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=size)


def plot_probe(result: ProbeResult, path: str | Path, *, title: str = "probe") -> Path:
    """Accuracy per row (static, 0..L) with its 95% interval, the majority line, control and selectivity."""
    labels = [str(r["layer"]) for r in result.rows]
    x = np.arange(len(labels))
    accuracy = np.array([r["accuracy"] for r in result.rows])
    low = accuracy - np.array([r["accuracy_ci"][0] for r in result.rows])
    high = np.array([r["accuracy_ci"][1] for r in result.rows]) - accuracy
    figure = _figure((7.0, 4.2))
    ax = figure.add_subplot()
    ax.errorbar(x, accuracy, yerr=[low, high], marker="o", capsize=3, label="task accuracy (95% CI)")
    ax.axhline(
        result.majority, linestyle="--", color="gray", label=f"majority baseline ({result.majority:.2f})"
    )
    if result.rows[0]["control_accuracy"] is not None:
        ax.plot(x, [r["control_accuracy"] for r in result.rows], marker="s", label="control task accuracy")
        ax.plot(x, [r["selectivity"] for r in result.rows], marker="^", label="selectivity (task - control)")
    ax.set_xticks(x, labels)
    ax.set_xlabel("static rows, then layer (0 = embedding layer output)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(min(0.0, float(np.nanmin(accuracy)) - 0.05), 1.05)
    ax.set_title(f"{title}: {result.n_items} {result.level} items, {result.folds}-fold grouped CV")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(figure, path)


def plot_cka(result: CkaResult, path: str | Path, *, title: str | None = None) -> Path:
    """Heatmap of CKA: A's layers down, B's layers across, each cell written."""
    values = np.asarray(result.cka, dtype=float)
    figure = _figure((1.6 + 0.55 * len(result.layers_b), 1.4 + 0.5 * len(result.layers_a)))
    ax = figure.add_subplot()
    image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=ax, label="CKA")
    ax.set_xticks(range(len(result.layers_b)), [str(k) for k in result.layers_b])
    ax.set_yticks(range(len(result.layers_a)), [str(k) for k in result.layers_a])
    ax.set_xlabel(f"layer of {result.settings.get('model_b', 'B')}")
    ax.set_ylabel(f"layer of {result.settings.get('model_a', 'A')}")
    for (i, j), value in np.ndenumerate(values):
        text = "–" if np.isnan(value) else f"{value:.2f}"
        ax.text(j, i, text, ha="center", va="center", fontsize=7, color="w" if value < 0.6 else "k")
    level, estimator = result.settings.get("level"), result.settings.get("estimator")
    ax.set_title(title or f"{estimator} CKA, {level} level, {result.n_rows} rows")
    return save_figure(figure, path)


def plot_compare(result: Comparison, path: str | Path) -> Path:
    """Per layer CKA and mean token cosine between the two models."""
    layers = [r["layer"] for r in result.layers]
    figure = _figure((6.4, 4.0))
    ax = figure.add_subplot()
    ax.plot(layers, [r["cka"] for r in result.layers], marker="o", label="CKA (A vs B)")
    ax.plot(layers, [r["mean_cosine"] for r in result.layers], marker="s", label="mean token cosine")
    ax.set_xlabel("layer (0 = embedding layer output)")
    ax.set_ylim(min(0.0, *(r["mean_cosine"] for r in result.layers)) - 0.05, 1.05)
    ax.set_title(f"{result.settings['model_a']} vs {result.settings['model_b']}", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(figure, path)
