"""Helpers for acceptor/tagger tests: tiny recipes and heads fitted on hand-made records."""

from __future__ import annotations

import numpy as np

from seqkit.data.records import Record


def seq_recipe(head="acceptor", *, units=4, emb=3, layers=1, bi=False, cell="lstm", head_opts=None,
               data=None, training=None):
    from seqkit.recipe import recipe_from_dict

    raw = {"name": "t", "seed": 3,
           "data": {"source": "word_tag", "path": "unused.txt", "max_length": 40, **(data or {})},
           "model": {"cell": cell, "units": units, "embedding_dim": emb, "layers": layers,
                     "bidirectional": bi},
           "head": {"type": head, **(head_opts or {})},
           "training": {"epochs": 1, "batch_size": 4, "early_stopping": None, **(training or {})}}
    return recipe_from_dict(raw)


def token_records(rows, labels=None, tags=None):
    return [Record(tokens=list(r), label=None if labels is None else labels[i],
                   tags=None if tags is None else list(tags[i]), where=f"row {i}")
            for i, r in enumerate(rows)]


def frame_records(arrays, labels):
    return [Record(frames=np.asarray(a, "float32"), label=lab, where=f"row {i}")
            for i, (a, lab) in enumerate(zip(arrays, labels))]


def fitted_head(recipe, records):
    from seqkit.registry import HEADS

    head = HEADS.get(recipe.head.type)(recipe)
    head.fit(records)
    return head
