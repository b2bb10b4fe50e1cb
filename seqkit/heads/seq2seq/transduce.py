"""Reading and answering ``seqkit predict`` / ``seqkit attention`` input for an
encoder-decoder (``seq2seq``) run: one source string per line -> n-best target
symbol sequences with their beam scores.

Bad input: an empty line is skipped and counted (warning); a
line longer than the run's ``data.max_length`` source symbols is an error naming
the line; symbols never seen in training are read as ``[UNK]`` and counted
(warning); ``--n-best`` above ``--beam-width`` is refused before the run is loaded
(:func:`seqkit.inference.decoding.check_beam_args`).
"""

from __future__ import annotations

from seqkit import log
from seqkit.data.lines import split_lines
from seqkit.errors import SeqkitError


def read_sources(text: str, name: str, head, input_format: str = "auto") -> list[tuple[str, str]]:
    """``(where, source text)`` per non-empty line; or, for a table (``input_format`` ``table``,
    or ``auto`` and a name ending ``.csv``, ``.tsv``, ``.tab``, ``.jsonl``, ``.ndjson``), per row,
    its source column (:func:`seqkit.data.table.input_rows`).

    Raises:
        SeqkitError: no non-empty line, a line longer than the run's ``data.max_length``, a
            malformed table or one without the source column, or an input format other than
            ``auto``, ``text`` and ``table``.
    """
    from seqkit.data.table import input_rows, is_table_input

    if input_format not in ("auto", "text", "table"):
        raise SeqkitError(f"{name}: --input-format {input_format}: a seq2seq run reads one source a "
                          f"line (text) or a table's source column (table).")
    if is_table_input(name, input_format):
        key, rows = input_rows(text, name, head.recipe.data_options, head.table_columns)
        given = [(row.where, row.text(key)) for row in rows]
    else:
        given = [(f"{name}:{n}", line.strip()) for n, line in enumerate(split_lines(text), start=1)]
    out, empty = [], 0
    limit = head.recipe.data.max_length
    for where, src in given:
        if not src:
            empty += 1
            continue
        k = len(head.source_tokens(src))
        if k > limit:
            raise SeqkitError(f"{where}: the input has {k} symbols, more than the run's "
                              f"data.max_length ({limit}) it was trained for; shorten or split the "
                              f"line (the model never saw sources that long).")
        out.append((where, src))
    if empty:
        log.warn(f"{name}: {empty} empty line(s) skipped.")
    if not out:
        raise SeqkitError(f"{name}: no input (only empty lines); give one source per line, e.g. "
                          f"`echo keras | seqkit predict RUN`.")
    _, unk, total = head.encode_sources([s for _, s in out])
    if unk:
        log.warn(f"{unk} of {total} input symbols were never seen in training and were read as "
                 f"[UNK]; their outputs are guesses.")
    return out


def predict_pairs(prep, model, sources: list, *, beam_width: int, n_best: int,
                  length_penalty: float) -> list[dict]:
    """Beam-search each source: ``{"where", "input", "hypotheses": [{"output": [symbols], "score"}]}``;
    with a sentencepiece target each hypothesis also has ``"text"``, its pieces decoded."""
    head = prep.head
    hyps = head.decode_texts(model, [s for _, s in sources], beam_width=beam_width,
                             n_best=n_best, length_penalty=length_penalty)
    text = getattr(head, "target_subword", False)

    def hyp(out, score):
        return {"output": out, "score": round(score, 4), **({"text": head.target_text(out)} if text else {})}

    return [{"where": w, "input": s, "hypotheses": [hyp(out, score) for out, score in h]}
            for (w, s), h in zip(sources, hyps)]
