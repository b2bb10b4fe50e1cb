"""Several encoder-decoder runs decoded together: one beam over their averaged log-probabilities.

At each decoder step every member reads the same token with its own states and attention memory;
the step's scores are the mean of the members' log-probabilities,

    s_t(y) = (1 / M) * sum_m log P_m(y | y_<t, x),

which the beam search renormalises with its own log-softmax: the normalised geometric mean of the
members' distributions, a token-level ensemble (OpenNMT-py's ensemble decoding also averages
log-probabilities by default, without renormalising; the ensemble rows of the G2P literature, e.g. Sun et
al. 2019, decode their members together like this). Members must share the source and target
vocabularies; their sizes, cells and depths may differ.

TensorFlow is imported inside the functions that use it, so importing this module does not load it.
"""

from __future__ import annotations


class EnsembleStepper:
    """The :class:`~seqkit.heads.seq2seq.decoding.Seq2SeqStepper` interface over ``M`` members.

    Args:
        steppers: the members' steppers (``start``/``step`` as :class:`Seq2SeqStepper`), ``M >= 1``.

    ``start(source [B, S] int32) -> (states, extras)`` concatenates the members' decoder states
    and their ``[memory, mask, keys]`` extras (member 1's first); ``step(token [B] int32, states,
    extras) -> (scores [B, V] float32, new_states)`` gives the mean log-probabilities above. The
    per-member list lengths are fixed by ``start``, so ``step`` must follow a ``start`` of the same
    steppers (as :func:`~seqkit.heads.seq2seq.decoding.transduce` does inside one traced function).
    """

    def __init__(self, steppers):
        if not steppers:
            raise ValueError("an ensemble needs at least one member")
        self.members = list(steppers)
        self._sizes: list[tuple[int, int]] | None = None

    def start(self, source):
        states, extras, sizes = [], [], []
        for member in self.members:
            s, e = member.start(source)
            states += list(s)
            extras += list(e)
            sizes.append((len(s), len(e)))
        self._sizes = sizes
        return states, extras

    def step(self, token, states, extras):
        import tensorflow as tf

        if self._sizes is None:
            raise RuntimeError("EnsembleStepper.step before start")
        scores, new_states, i, j = [], [], 0, 0
        for member, (ns, ne) in zip(self.members, self._sizes):
            logits, st = member.step(token, list(states[i:i + ns]), list(extras[j:j + ne]))
            scores.append(tf.nn.log_softmax(tf.cast(logits, tf.float32)))
            new_states += list(st)
            i, j = i + ns, j + ne
        mean = scores[0] if len(scores) == 1 else tf.add_n(scores) / float(len(scores))
        return mean, new_states
