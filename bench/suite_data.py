"""Input-pipeline throughput: can seqkit's ``tf.data`` pipeline starve the training step?

Measures how many tokens per second each pipeline hands out when nothing else
consumes them (iterating the dataset alone, three epochs per measurement), beside
what the training step eats (``bench --suite train``: ~10-15 thousand tokens/s
at the LM shape on 2 cores). A pipeline far above the step never starves it
(``prefetch`` overlaps it with the step).

Contenders:

* ``seqkit text (LM shape)``: ``make_split_dataset`` of the LM-shape recipe of
  :mod:`bench.suite_train` (63-word lines, whitespace tokens, ``StringLookup``,
  teacher-forcing pairs, bucketing, epoch-seeded shuffle): every line encoded
  once when the dataset is built, then per pass a numpy batch plan and one
  gather + pad per batch (:mod:`seqkit.data.pipeline`).
* ``seqkit text (pydoc chars)``: the main recipe's pipeline
  (``recipes/lm-pydoc-chars.yaml``, real text, character tokens, variable lengths).
* ``keras TextVectorization``: what a hand-written Keras script does with the
  same text file: lines -> shuffle -> batch -> ``TextVectorization``
  (whitespace split, fitted vocabulary) -> teacher-forcing pairs -> prefetch.
* ``tf.data from arrays``: pre-tokenized ``[N, 64]`` arrays, shuffle, batch,
  prefetch -- the floor (no text handling at all).
"""

from __future__ import annotations

import os
import tempfile
import time


def tokens_per_second(ds, passes: int = 1) -> float:
    """Iterate ``passes`` epochs of ``ds`` (batches of ``(x, y)``); tokens = non-padding targets."""
    import numpy as np

    t0, n = time.perf_counter(), 0
    for _ in range(passes):
        for _, y in ds:
            n += int(np.count_nonzero(y.numpy()))
    return n / (time.perf_counter() - t0)


def run(args):
    import numpy as np
    import tensorflow as tf

    from bench.common import interleaved, summarize
    from bench.suite_train import B, T, corpus, recipe
    from seqkit.recipe import load_recipe
    from seqkit.training.train import make_split_dataset, prepare

    tmp = tempfile.mkdtemp(prefix="seqkit-bench-")
    path = os.path.join(tmp, "corpus.txt")
    ids = corpus(path, lines=B * (20 if args.quick else 300))  # 300 batches a pass
    shape_prep = prepare(recipe(path))
    pydoc = load_recipe(os.path.join("recipes", "lm-pydoc-chars.yaml"))
    pydoc_prep = prepare(pydoc)
    arr = np.asarray(ids, np.int32) + 4
    x = np.concatenate([np.full((len(arr), 1), 2, np.int32), arr], axis=1)
    y = np.concatenate([arr, np.full((len(arr), 1), 3, np.int32)], axis=1)
    arrays = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=1)
              .batch(B).prefetch(tf.data.AUTOTUNE))
    import keras

    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    vec = keras.layers.TextVectorization(standardize=None, split="whitespace", output_mode="int")
    vec.adapt(tf.data.Dataset.from_tensor_slices(lines).batch(256))

    def pairs(batch):
        ids = tf.cast(vec(batch), tf.int32)
        n = tf.shape(ids)[0]
        return (tf.concat([tf.fill([n, 1], 2), ids], 1), tf.concat([ids, tf.fill([n, 1], 3)], 1))

    text = (tf.data.Dataset.from_tensor_slices(lines).shuffle(len(lines), seed=1).batch(B)
            .map(pairs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))
    datasets = {"seqkit text (LM shape)": make_split_dataset(shape_prep, "train", training=True),
                "keras TextVectorization": text,
                "seqkit text (pydoc chars)": make_split_dataset(pydoc_prep, "train", training=True),
                "tf.data from arrays": arrays}
    if args.quick:
        datasets["seqkit text (pydoc chars)"] = datasets["seqkit text (pydoc chars)"].take(40)
    passes = 1 if args.quick else 3  # one pass is 30-70 ms: three make a steadier measurement
    res = interleaved({k: (lambda d=d: tokens_per_second(d, passes)) for k, d in datasets.items()},
                      repeats=2 if args.quick else args.repeats, warmup=1)
    keras_median = summarize(res["keras TextVectorization"])["median"]
    rows = [{"contender": k, "metric": "tokens/s", **summarize(v),
             "ratio": None if "pydoc" in k else summarize(v)["median"] / keras_median,
             "notes": "real text, chars" if "pydoc" in k else f"{T - 1}-word lines"}
            for k, v in res.items()]
    return rows, {"what": "tokens per second a pipeline yields alone (non-padding targets)",
                  "ratio": "median tokens/s over the hand-written Keras TextVectorization pipeline's "
                           "(same 63-word lines; pydoc is other text)"}
