"""The ``seqkit`` command line (click).

Every command takes ``--plugin PATH_OR_MODULE`` (repeatable), ``--debug``, and ``-v/--verbose``
(seqkit's DEBUG lines too) or ``-q/--quiet`` (warnings and errors only, no progress). Progress
lines with an ETA (:mod:`seqkit.progress`) are drawn on stderr only when it is a terminal.
A user error prints one paragraph to stderr and exits with status 2; an
internal error exits with 1 (``--debug`` shows the traceback).

One module per command family, each command a thin layer over the Python API (:mod:`seqkit.api`,
:class:`seqkit.Run`):

* :mod:`~seqkit.cli.train` -- ``train``, ``validate``, ``list``;
* :mod:`~seqkit.cli.evaluate` -- ``evaluate``;
* :mod:`~seqkit.cli.decode` -- ``generate``, ``predict``, ``attention``;
* :mod:`~seqkit.cli.diagnose` -- ``diagnose``, ``plot``;
* :mod:`~seqkit.cli.export` -- ``export``, ``stream``, ``inspect``, ``bench-step``;
* :mod:`~seqkit.cli.starter` -- ``recipes``, ``init``;
* :mod:`~seqkit.cli.common` -- the options and error handling every command shares.

The modules import only click at their top (TensorFlow when a command runs), so ``seqkit --help``
stays fast.
"""

from __future__ import annotations

import click

from seqkit import __version__
from seqkit.cli import decode, diagnose, evaluate, export, starter, train


class _Group(click.Group):
    """The ``seqkit`` group: an argument that no path may hold (a NUL byte: ``os.stat`` raises
    ValueError while click checks a path) is a usage error, not a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ValueError as exc:
            if "null byte" not in str(exc):
                raise
            raise click.UsageError("an argument holds a NUL byte (\\x00), which no path, option or "
                                   "text argument of seqkit may hold; check how the command line was "
                                   "built.") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(version=__version__, prog_name="seqkit")
def main():
    """seqkit: train, decode and ship recurrent sequence models (Keras 3).

    \b
    Typical use:
      seqkit recipes                      # the shipped recipes
      seqkit train lm-pydoc-chars         # one of them, by name (or a recipe file)
      seqkit init --task classify --data reviews.csv   # a starter recipe for your data
      seqkit evaluate runs/lm-pydoc-chars
      seqkit generate runs/lm-pydoc-chars --prompt "The " --temperature 0.8
    """


for _command in (train.train, train.validate, train.list_, evaluate.evaluate, decode.generate, decode.predict,
                 decode.attention, diagnose.diagnose, diagnose.plot, export.export, export.stream,
                 export.inspect, export.bench_step, starter.recipes_, starter.init):
    main.add_command(_command)
