"""Eval reports: a folder with report.md, report.json and PNG plots, plus one eval.csv row per run."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import uuid
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

EVAL_COLUMNS = [
    "eval_id",
    "timestamp",
    "kind",
    "dataset",
    "dataset_sha256",
    "questions",
    "modes",
    "headline",
    "headline_value",
    "metrics",
    "report",
]


def eval_id_new() -> str:
    return timezone.now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def report_folder_check(requested: Path | None) -> None:
    """Refuse a ``--report`` that is a file before the evaluation runs, not after."""
    if requested is not None and Path(requested).exists() and not Path(requested).is_dir():
        raise ValueError(f"--report: {requested} is a file; give a folder (it is created if missing)")


def report_folder(kind: str, eval_id: str, requested: Path | None) -> Path:
    """``--report DIR`` if given, else ``FOUNDRY_HOME/artifacts/eval/<date>/<kind>-<eval_id>``."""
    if requested is not None:
        return Path(requested)
    day = timezone.now().strftime("%Y-%m-%d")
    return Path(settings.FOUNDRY_ARTIFACTS) / "eval" / day / f"{kind}-{eval_id}"


def machine() -> dict:
    """Where the numbers were measured; latency means little without the load average."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "loadavg": [round(x, 2) for x in load],
    }


def report_write(folder: Path, *, payload: dict, markdown: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    (folder / "report.md").write_text(markdown, encoding="utf-8")
    return {"markdown": str(folder / "report.md"), "json": str(folder / "report.json")}


def bars_plot(path: Path, *, title: str, groups: dict[str, dict[str, float]]) -> str:
    """Grouped bars: one group per metric, one bar per series (e.g. per mode)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    series = list(groups)
    keys = list(dict.fromkeys(k for values in groups.values() for k in values))
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(keys)), 4))
    for i, name in enumerate(series):
        xs = [j + i * width for j in range(len(keys))]
        bars = ax.bar(xs, [groups[name].get(k, 0.0) for k in keys], width, label=name)
        ax.bar_label(bars, fmt="%.3f", fontsize=7)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(keys))], keys)
    ax.set_ylim(0, 1.05)
    return _save(fig, ax, path, title=title)


def _save(fig: Any, ax: Any, path: Path, *, title: str) -> str:
    """Title and legend on ``ax``; ``fig`` written to ``path`` as PNG and closed."""
    from matplotlib import pyplot as plt

    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def latency_plot(path: Path, *, title: str, series: dict[str, list[float]]) -> str:
    """Overlaid latency histograms (milliseconds), one per series."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in series.items():
        if values:
            ax.hist(values, bins=40, alpha=0.5, label=name)
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("queries")
    return _save(fig, ax, path, title=title)


def eval_csv_append(
    *,
    eval_id: str,
    kind: str,
    dataset: str,
    dataset_sha256: str,
    questions: int,
    modes: str,
    headline: str,
    headline_value: float,
    metrics: dict,
    report: str,
) -> Path:
    """Append one row to FOUNDRY_HOME/eval.csv in a single write (header first if the file is new)."""
    path = Path(settings.FOUNDRY_HOME) / "eval.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if not path.exists():
        writer.writerow(EVAL_COLUMNS)
    writer.writerow(
        [
            eval_id,
            timezone.now().isoformat(),
            kind,
            dataset,
            dataset_sha256,
            questions,
            modes,
            headline,
            round(headline_value, 4),
            json.dumps(metrics, sort_keys=True),
            report,
        ]
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, buffer.getvalue().encode("utf-8"))
    finally:
        os.close(fd)
    return path
