"""A run directory: what training leaves behind and everything that reads it.

* :mod:`~seqkit.runs.run` -- :class:`~seqkit.runs.run.Run` (``seqkit.load(path)``), the Python
  object every command that reads a run (evaluate, generate, predict, attention, export) calls;
* :mod:`~seqkit.runs.rundir` -- the files of a run directory, their checks and atomic writes;
* :mod:`~seqkit.runs.lifecycle` -- one writer at a time (lock), safe replacement, staging.
"""
