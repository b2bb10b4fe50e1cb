"""Run a seqkit ``.tflite`` export with LiteRT alone: no seqkit, no TensorFlow.

Needs only ``ai-edge-litert`` and ``numpy`` (``pip install ai-edge-litert numpy``). Everything the
model needs besides its weights is read from the metadata embedded in the file (the
``seqkit_metadata`` entry of the flatbuffer's metadata table; docs/export-metadata.md), so the
``.tflite`` alone is enough. Covers the explicit-state step models of a language model (text
generation) and a tagger (a tag per word, as the words come), with float inputs and outputs and
``char`` / ``whitespace`` tokenization; docs/on-device.md walks through it step by step.

    python examples/litert_stream.py model.tflite --prompt "The " --max-length 40 --greedy
    python examples/litert_stream.py model.tflite --prompt "The " --temperature 0.8 --seed 3
    echo "the dog runs" | python examples/litert_stream.py tagger.tflite

It prints what ``seqkit stream`` prints for the same inputs (greedy generation and tagging give
the same text; sampling draws with ``numpy.random.default_rng(seed)`` as seqkit does).
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

METADATA_KEY = "seqkit_metadata"


def read_metadata(path: str) -> dict:
    """The JSON object seqkit embedded in the model's metadata table."""
    with open(path, "rb") as f:
        data = f.read()
    model = schema.Model.GetRootAs(data, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name().decode("utf-8") == METADATA_KEY:
            return json.loads(model.Buffers(entry.Buffer()).DataAsNumpy().tobytes().decode("utf-8"))
    sys.exit(f"{path}: no '{METADATA_KEY}' entry; not a seqkit export.")


class Stepper:
    """One explicit-state ``step`` signature: ``(input [B], states [B, H]...) -> (logits [B, C],
    states...)``; the states are carried here between calls."""

    def __init__(self, path: str, meta: dict):
        # LiteRT's default configuration (XNNPACK on), as an app gets it; seqkit verified it there
        self.runner = Interpreter(model_path=path).get_signature_runner("step")
        self.input_name = meta["input"]["name"]
        self.layout = [(s["name"], int(s["size"])) for s in meta["state_layout"]]
        self.reset()

    def reset(self) -> None:
        """Zero states: the next step starts a new sequence."""
        self.states = {name: np.zeros((1, size), np.float32) for name, size in self.layout}

    def step(self, token_id: int) -> np.ndarray:
        """Feed one id; return this step's logits ``[C]`` (float32)."""
        out = self.runner(**{self.input_name: np.array([token_id], np.int32)}, **self.states)
        self.states = {name: out[name] for name, _ in self.layout}
        return out["logits"][0]


def split(text: str, meta: dict) -> list[str]:
    """Raw text -> tokens, as the metadata's ``tokenization`` says."""
    mode = meta.get("tokenization") or meta.get("token_mode") or meta.get("tokenizer")
    if meta.get("lowercase"):
        text = text.lower()
    if mode == "char":
        return list(text)
    if mode == "whitespace":
        return text.split()
    sys.exit(f"tokenization '{mode}' is not covered by this example (char and whitespace are).")


def generate(path: str, meta: dict, prompt: str, max_length: int, greedy: bool,
             temperature: float, top_k: int, seed: int) -> str:
    """A language model: prime the state with ``<s>`` + the prompt's ids, then feed each new id
    back; stop at ``</s>`` (a line model) or read ``</s>`` back as ``<s>`` and go on (a model
    trained with ``layout: stream``)."""
    vocab = meta["vocab"]
    index = {tok: i for i, tok in enumerate(vocab)}
    ids_ = meta["special_ids"]
    start, end, unk = int(ids_["start"]), int(ids_["end"]), int(ids_["unk"])
    across = meta.get("layout") == "stream"
    join = "" if (meta.get("tokenization") or meta.get("tokenizer")) == "char" else " "

    def encode(line):
        return [index.get(t, unk) for t in split(line, meta)]

    if across:  # earlier prompt lines: each read, then <s> (the input side of a line's </s>)
        *done, last = prompt.split("\n")
        ids = [start]
        for line in (ln.rstrip() for ln in done):
            if line.strip():
                ids += encode(line) + [start]
        ids += encode(last)
    else:
        ids = [start] + encode(prompt)
    model, rng = Stepper(path, meta), np.random.default_rng(seed)
    for t in ids[:-1]:
        model.step(t)
    last_id, new = ids[-1], []
    for _ in range(max_length):
        z = model.step(last_id).astype(np.float64)
        if greedy:
            nxt = int(np.argmax(z))
        else:
            z = z / temperature
            if 0 < top_k < len(z):
                z[z < np.sort(z)[-top_k]] = -np.inf
            p = np.exp(z - z.max())
            nxt = int(rng.choice(len(p), p=p / p.sum()))
        if nxt == end and not across:
            break
        new.append(nxt)
        last_id = start if nxt == end else nxt
    special = {int(ids_["pad"]), start}
    if across:  # </s> is a line break
        lines, cur = [], []
        for i in new:
            if i == end:
                lines.append(join.join(cur))
                cur = []
            elif i not in special:
                cur.append(vocab[i])
        cont = "\n".join(lines + [join.join(cur)])
        sep = join if prompt and cont and join and not prompt.endswith(("\n", " ")) \
            and not cont.startswith("\n") else ""
        return prompt + sep + cont
    text = join.join(vocab[i] for i in new if i not in special)
    return prompt + (join if prompt and join else "") + text


def tag(path: str, meta: dict, lines: list[str]) -> list[str]:
    """A tagger: per line, reset the state and step each word's id; its tag is the arg-max."""
    if meta.get("crf") or meta.get("char_vocab"):
        sys.exit("CRF and character-aware taggers are not covered by this example.")
    index = {tok: i for i, tok in enumerate(meta["vocab"])}
    unk = int(meta["special_ids"]["unk"])
    model, out = Stepper(path, meta), []
    for line in lines:
        words = split(line, {**meta, "lowercase": False})  # printed as written, looked up lower-cased
        if not words:
            continue
        model.reset()
        keys = [w.lower() for w in words] if meta.get("lowercase") else words
        out.append(" ".join(f"{w}/{meta['labels'][int(np.argmax(model.step(index.get(k, unk))))]}"
                            for w, k in zip(words, keys)))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a seqkit .tflite export (explicit-state step model)")
    ap.add_argument("--prompt", default="")
    ap.add_argument("--max-length", type=int, default=80)
    ap.add_argument("--greedy", action="store_true")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--input", default="-", help="tagger: text, one sequence per line [stdin]")
    a = ap.parse_args(argv)
    meta = read_metadata(a.model)
    if meta.get("artefact") != "step" or meta.get("state") == "internal" or meta.get("io_type") == "int":
        sys.exit("this example runs explicit-state step models with float I/O (seqkit export's default).")
    if meta["head"] == "language_model":
        print(generate(a.model, meta, a.prompt, a.max_length, a.greedy, a.temperature, a.top_k, a.seed))
    elif meta["head"] == "tagger":
        text = sys.stdin.read() if a.input == "-" else open(a.input, encoding="utf-8").read()
        for line in tag(a.model, meta, text.split("\n")):
            print(line)
    else:
        sys.exit(f"head '{meta['head']}' is not covered by this example (language_model, tagger).")


if __name__ == "__main__":
    main()
