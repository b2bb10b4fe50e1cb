"""``seqkit attention``: the attention matrix of an encoder-decoder for one input, as a PNG.

The best beam-search output ``y_1..y_n`` for the source ``x_1..x_m`` is fed back
under teacher forcing (``[<s>, y_1..y_n]``) and the decoder's attention weights
``alpha[t, i]`` (:meth:`seqkit.heads.seq2seq.Seq2SeqStepper.alignment`; each row
sums to 1 over the source) are drawn with the source symbols along x and the
output symbols (then ``</s>``) along y. Needs matplotlib (the ``plot`` extra).

The optional package matplotlib is imported where used, so seqkit works without it.
"""

from __future__ import annotations

import os

import numpy as np

from seqkit.errors import SeqkitError
from seqkit.outputs import picture_outputs, png_metadata


def draw(source: list, target: list, weights: np.ndarray, path: str, title: str = "", outputs=None) -> None:
    """Write the heatmap PNG (source along x, target along y; darker = more weight), staged and
    renamed by ``outputs`` (a :class:`seqkit.outputs.FileOutputs` of ``path``; default: checked
    here without ``--overwrite``).

    Raises:
        SeqkitError: matplotlib is missing (with the pip command), or the file cannot be written.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SeqkitError("seqkit attention draws with matplotlib, which is not installed. Install "
                          "it with `pip install matplotlib` (or `pip install \"seqkit[plot]\"`).") from exc
    fig, ax = plt.subplots(figsize=(0.45 * len(source) + 2, 0.4 * len(target) + 1.5))
    im = ax.imshow(weights, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(source)), source)
    ax.set_yticks(range(len(target)), target)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.05)
    fig.tight_layout()

    try:
        outputs = outputs or picture_outputs(path, with_json=False)
        outputs.write({path: lambda tmp: fig.savefig(tmp, dpi=120, format="png", metadata=png_metadata())})
    finally:
        plt.close(fig)
