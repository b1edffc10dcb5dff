"""PASS's figures: the substitution confusion of appendix F.2."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_confusion(matrices: dict, roles: dict, names: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(matrices), figsize=(3.6 * len(matrices), 3.4), squeeze=False)
    for ax, (attr, matrix) in zip(axes[0], matrices.items()):
        image = ax.imshow(matrix, cmap="viridis", vmin=0.0, vmax=1.0)
        ax.set_title(f"{attr} ({roles[attr]})", fontsize=9)
        ax.set_xlabel("substitute's class", fontsize=8)
        ax.set_ylabel("original class", fontsize=8)
        ticks = np.arange(len(matrix)) if len(matrix) <= 16 else []
        labels = [str(n) for n in names.get(attr, [])] if len(names.get(attr, [])) == len(matrix) else ticks
        ax.set_xticks(ticks, labels[:len(ticks)], fontsize=7, rotation=90)
        ax.set_yticks(ticks, labels[:len(ticks)], fontsize=7)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle("PASS substitution confusion on the test split (appendix F.2)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
