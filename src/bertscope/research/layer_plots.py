"""Pictures of what each layer holds: probe accuracy and selectivity by layer, and a CKA heatmap."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .cka import CkaResult
    from .compare import Comparison
    from .probe import ProbeResult

__all__ = ["plot_probe", "plot_confusion", "plot_cka", "plot_compare"]


def save_figure(figure: Any, path: str | Path, *, overwrite: bool = False) -> Path:
    from .plots import save_figure as save

    return save(figure, path, overwrite=overwrite)


def _figure(size: tuple[float, float]) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=size)


def plot_probe(
    result: ProbeResult, path: str | Path, *, title: str = "probe", overwrite: bool = False
) -> Path:
    """Accuracy per row (static, 0..L) with its 95% interval, the majority line, control and selectivity;
    with a capacity sweep, accuracy and selectivity per layer for each probe size."""
    layers = list(dict.fromkeys(str(r["layer"]) for r in result.rows))
    x = np.arange(len(layers))
    sizes = list(dict.fromkeys((r["probe"], r["capacity"]) for r in result.rows))
    figure = _figure((7.0, 4.2))
    ax = figure.add_subplot()
    for kind, capacity in sizes:
        rows = [r for r in result.rows if (r["probe"], r["capacity"]) == (kind, capacity)]
        _probe_lines(ax, x, rows, "" if len(sizes) == 1 else f"{_size_name(kind, capacity)}: ")
    ax.axhline(
        result.majority, linestyle="--", color="gray", label=f"majority baseline ({result.majority:.2f})"
    )
    ax.set_xticks(x, layers)
    ax.set_xlabel("static rows, then layer (0 = embedding layer output)")
    ax.set_ylabel("accuracy")
    lowest = min(float(np.nanmin([r["accuracy"] for r in result.rows])) - 0.05, 0.0)
    ax.set_ylim(lowest, 1.05)
    how = f"{result.folds}-fold grouped CV" if not result.n_test else f"{result.n_test} held-out items"
    unit = "sentence" if result.level == "sentence" else "word"  # words (word in results made before)
    ax.set_title(f"{title}: {result.n_items} {unit} items, {how}")
    ax.legend(fontsize=7 if len(sizes) > 1 else 8)
    ax.grid(alpha=0.3)
    return save_figure(figure, path, overwrite=overwrite)


def _size_name(kind: str, capacity: int | None) -> str:
    if kind == "mlp":
        return f"mlp {capacity}"
    return "linear" if capacity is None else f"linear rank {capacity}"


def _probe_lines(ax: Any, x: np.ndarray, rows: list[dict[str, Any]], prefix: str) -> None:
    accuracy = np.array([r["accuracy"] for r in rows])
    low = accuracy - np.array([r["accuracy_ci"][0] for r in rows])
    high = np.array([r["accuracy_ci"][1] for r in rows]) - accuracy
    shown = ax.errorbar(
        x, accuracy, yerr=[low, high], marker="o", capsize=3, label=f"{prefix}task accuracy (95% CI)"
    )
    if rows[0]["control_accuracy"] is None:
        return
    if prefix:  # a sweep: one colour per size, selectivity dashed
        color = shown.lines[0].get_color()
        selectivity = [r["selectivity"] for r in rows]
        ax.plot(x, selectivity, marker="^", linestyle="--", color=color, label=f"{prefix}selectivity")
        return
    ax.plot(x, [r["control_accuracy"] for r in rows], marker="s", label="control task accuracy")
    ax.plot(x, [r["selectivity"] for r in rows], marker="^", label="selectivity (task - control)")


def plot_confusion(report: dict[str, Any], path: str | Path, *, overwrite: bool = False) -> Path:
    """The confusion matrix of a per-label report (rows true, columns predicted), each row's share
    coloured and each count written."""
    counts = np.asarray(report["confusion"], dtype=float)
    shares = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    n = len(report["labels"])
    figure = _figure((2.0 + 0.45 * n, 1.6 + 0.4 * n))
    ax = figure.add_subplot()
    image = ax.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    figure.colorbar(image, ax=ax, label="share of the true label")
    ax.set_xticks(range(n), report["labels"], rotation=90)
    ax.set_yticks(range(n), report["labels"])
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for (i, j), value in np.ndenumerate(counts):
        if value:
            color = "w" if shares[i, j] > 0.6 else "k"
            ax.text(j, i, str(int(value)), ha="center", va="center", fontsize=7, color=color)
    size = _size_name(report["probe"], report["capacity"])
    ax.set_title(f"confusion matrix, layer {report['layer']}, {size}")
    return save_figure(figure, path, overwrite=overwrite)


def plot_cka(
    result: CkaResult, path: str | Path, *, title: str | None = None, overwrite: bool = False
) -> Path:
    """Heatmap of CKA: A's layers down, B's layers across, each cell written."""
    values = np.asarray(result.cka, dtype=float)
    figure = _figure((1.6 + 0.55 * len(result.layers_b), 1.4 + 0.5 * len(result.layers_a)))
    ax = figure.add_subplot()
    # debiased CKA can read below 0 over few rows: the scale reaches it rather than clip it to 0's colour
    lowest = float(np.nanmin(values)) if np.isfinite(values).any() else 0.0
    image = ax.imshow(values, cmap="viridis", vmin=min(0.0, lowest), vmax=1.0)
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
    return save_figure(figure, path, overwrite=overwrite)


def plot_compare(result: Comparison, path: str | Path, *, overwrite: bool = False) -> Path:
    """Per layer CKA (its estimator named) and mean token cosine between the two models."""
    layers = [r["layer"] for r in result.layers]
    cka, cosine = ([r[key] for r in result.layers] for key in ("cka", "mean_cosine"))
    estimator = result.settings.get("estimator", "linear")
    figure = _figure((6.4, 4.0))
    ax = figure.add_subplot()
    ax.plot(layers, cka, marker="o", label=f"{estimator} CKA (A vs B)")
    ax.plot(layers, cosine, marker="s", label="mean token cosine")
    ax.set_xticks(layers)  # whole layers: matplotlib's own ticks read 0.25, 0.5 on a 2-layer model
    ax.set_xlabel("layer (0 = embedding layer output)")
    # debiased CKA and a cosine can be negative: the axis reaches the lowest figure (nan left out)
    shown = np.array([*cka, *cosine], dtype=float)
    lowest = float(np.nanmin(shown)) if np.isfinite(shown).any() else 0.0
    ax.set_ylim(min(0.0, lowest) - 0.05, 1.05)
    ax.set_title(f"{result.settings['model_a']} vs {result.settings['model_b']}, {estimator} CKA", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    return save_figure(figure, path, overwrite=overwrite)
