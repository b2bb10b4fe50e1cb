"""What every ``seqkit`` command shares: ``--plugin``, ``--debug``, ``-v/--verbose``,
``-q/--quiet``, and turning errors into one clear paragraph (:func:`with_common_options`).

A user error (:class:`~seqkit.errors.SeqkitError`, or a failure :func:`seqkit.guards.user_error`
recognises) prints ``error: ...`` to stderr and exits with status 2; an internal error exits with 1
(``--debug`` shows the traceback). TensorFlow is imported (its start-up lines hidden) only for the
commands that need it.

The seqkit modules a command needs only when it runs are imported inside the functions that use
them, so ``seqkit --help`` does not load them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import sys

import click

from seqkit.data.base import read_input  # noqa: F401  (the commands read --input with it)
from seqkit.errors import SeqkitError
from seqkit.registry import load_plugin


_NEEDS_TF = {"train", "evaluate", "generate", "validate", "predict", "export", "stream", "inspect",
             "bench_step", "attention", "diagnose"}


def _third_party() -> bool:
    """True when an installed package declares seqkit plugins (their import may pull in TF)."""
    return any(importlib.metadata.entry_points(group=g) for g in ("seqkit.cells", "seqkit.heads", "seqkit.data"))


def with_common_options(f):
    """Add ``--plugin``, ``--debug``, ``-v/--verbose`` and ``-q/--quiet``, and turn errors into
    clear messages. A command with a ``quiet`` parameter receives ``-q`` (``train``: no Keras
    progress bar)."""
    takes_quiet = "quiet" in inspect.signature(f).parameters

    @click.option("--plugin", "plugins", multiple=True, metavar="PATH_OR_MODULE",
                  help="Import a plugin (.py file or module) that registers cells, heads or data sources. Repeatable.")
    @click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
    @click.option("-v", "--verbose", is_flag=True, help="More detail on stderr (seqkit's DEBUG lines).")
    @click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr; no progress.")
    @functools.wraps(f)
    def wrapper(*args, plugins=(), debug=False, verbose=False, quiet=False, **kwargs):
        if verbose and quiet:
            raise click.UsageError("-v/--verbose and -q/--quiet exclude each other; give one.")
        if takes_quiet:
            kwargs["quiet"] = quiet
        try:
            if not debug and (f.__name__ in _NEEDS_TF or (f.__name__ == "list_" and (plugins or _third_party()))):
                from seqkit._quiet import import_tensorflow_quietly

                import_tensorflow_quietly()
            import logging

            from seqkit.log import to_stderr
            from seqkit.progress import shown

            level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
            # seqkit's log lines (a library call prints none) and progress go to stderr
            with to_stderr(level), shown(not quiet):
                for p in plugins:
                    load_plugin(p)
                result = f(*args, **kwargs)
                sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
                return result
        except SeqkitError as exc:
            if debug:
                raise
            click.echo(f"error: {bounded_lines(str(exc))}", err=True)
            sys.exit(2)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except BrokenPipeError:  # the reader of stdout stopped (`| head`): nothing more to say
            _stdout_closed()
        except Exception as exc:  # an unexpected failure: say so plainly
            if debug:
                raise
            from seqkit.guards import user_error

            err = user_error(exc, f.__name__)  # a read-only folder, a failing plugin cell
            if err is None:
                _internal(exc)
            click.echo(f"error: {bounded_lines(str(err))}", err=True)
            sys.exit(2)

    return wrapper


#: Longest line of an error message shown (a value a user passed is echoed in part beyond it).
MAX_MESSAGE_LINE = 2000


def bounded_lines(text: str, limit: int = MAX_MESSAGE_LINE) -> str:
    """``text`` with each line over ``limit`` characters cut, its length said: a message that
    echoes a 100,000-character ``--set`` value stays readable."""
    return "\n".join(ln if len(ln) <= limit else f"{ln[:limit]}... (a line of {len(ln):,} characters, cut)"
                     for ln in text.split("\n"))


def _stdout_closed():
    """Exit quietly once the reader of stdout has gone (Python's documented handling of
    ``EPIPE``: stdout is pointed at ``os.devnull`` so the interpreter's last flush cannot fail
    again, and the exit status is 1)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(1)


def _internal(exc: BaseException):
    click.echo(f"internal error: {bounded_lines(f'{type(exc).__name__}: {exc}')}\n(run again with --debug for "
               f"the traceback, and please report it)", err=True)
    sys.exit(1)


