"""Beam search vs greedy on a trained language-model run (a measurement, not a test).

    python -m bench.beam_vs_greedy RUN_DIR [--prompts 12] [--max-length 80]   # from the repo root

For the first ``--prompts`` test lines longer than 20 characters, their first 8
characters are the prompt; prints, per setting, the best hypothesis's mean
log-probability (nats, ``</s>`` included when reached), mean length and how
many ended with ``</s>`` before ``--max-length``.
"""

from __future__ import annotations

import argparse
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-length", type=int, default=80)
    args = ap.parse_args()

    import numpy as np
    import tensorflow as tf

    from seqkit.inference.decoding import beam_search
    from seqkit.heads.language_model.generate import _encode_prompt
    from seqkit.training.train import load_run

    prep, model = load_run(args.run_dir, with_data=True)
    prompts = [line[:8] for line in prep.splits["test"] if len(line) > 20][:args.prompts]
    st = prep.head.stepper(model)
    for width, alpha in [(1, 0.0), (4, 0.0), (4, 0.6), (8, 0.6)]:
        @tf.function(reduce_retracing=True)
        def run(p, alpha, width=width):
            return beam_search(st.step, st.initial_state(1), p, beam_width=width,
                               max_length=args.max_length, length_penalty=alpha)

        logp, length, t0 = [], [], time.time()
        for p in prompts:
            ids, _ = _encode_prompt(prep, p)
            r = run(tf.constant([ids]), tf.constant(alpha))
            logp.append(float(r.log_probs[0, 0]))
            length.append(int(r.lengths[0, 0]))
        ended = sum(n < args.max_length for n in length)
        print(f"beam {width} alpha {alpha}: mean log P {np.mean(logp):.3f}, mean length "
              f"{np.mean(length):.1f}, ended {ended}/{len(prompts)}, {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
