"""``python -m seqkit.cli``: the ``seqkit`` command."""

from seqkit.cli import main

main()
