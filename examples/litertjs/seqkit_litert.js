// Run a seqkit `.tflite` step model in a web page with LiteRT.js (@litertjs/core): no Python.
//
// Everything besides the weights is read from the metadata seqkit embeds in the file (the
// `seqkit_metadata` entry of the flatbuffer's metadata table; docs/export-metadata.md), or from the
// export folder's `metadata.json`, which holds the same object. Covers what
// examples/litert_stream.py covers: the explicit-state step models of a language model (greedy
// generation) and a tagger (a tag per word), float inputs and outputs, `char` and `whitespace`
// tokenization. Each function here is what a web app would call; index.html is a page around them.
//
//   import {loadLiteRt} from '@litertjs/core';
//   import {readMetadata, openStepModel, generateGreedy, tagLines} from './seqkit_litert.js';
//   await loadLiteRt('./node_modules/@litertjs/core/wasm/');
//   const bytes = new Uint8Array(await (await fetch('model.tflite')).arrayBuffer());
//   const meta = readMetadata(bytes);               // or: await (await fetch('metadata.json')).json()
//   const model = await openStepModel(bytes, meta);
//   const out = await generateGreedy(model, meta, 'The ', 40);   // out.text: prompt + continuation

import {loadAndCompile, Tensor} from '@litertjs/core';

export const METADATA_KEY = 'seqkit_metadata';

/** An error in what the caller gave (not a seqkit export, an unsupported model): one sentence
 * naming the file or field and what to do. */
export class SeqkitModelError extends Error {}

// --- The embedded metadata: a few fields of the TFLite flatbuffer (schema.fbs), read by hand ---

function fieldPos(view, table, field) {
  // position of `field` of the table at `table`, or 0 when the field is absent
  const vtable = table - view.getInt32(table, true);
  const vsize = view.getUint16(vtable, true);
  const slot = 4 + 2 * field;
  if (slot >= vsize) return 0;
  const off = view.getUint16(vtable + slot, true);
  return off ? table + off : 0;
}

function deref(view, pos) {
  return pos + view.getUint32(pos, true);  // an offset field points forwards from itself
}

function vectorOf(view, table, field) {
  // [start of elements, length] of a vector field, or null
  const pos = fieldPos(view, table, field);
  if (!pos) return null;
  const vec = deref(view, pos);
  return [vec + 4, view.getUint32(vec, true)];
}

/**
 * The JSON object seqkit embedded in a `.tflite` file.
 * @param {Uint8Array} bytes the whole `.tflite` file.
 * @returns {object} the metadata (docs/export-metadata.md).
 * @throws {SeqkitModelError} when the file has no `seqkit_metadata` entry (not a seqkit export,
 *   or written before metadata was embedded: pass the export folder's metadata.json instead).
 */
export function readMetadata(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const model = deref(view, 0);
  // Model: 4 buffers, 6 metadata.  Metadata: 0 name, 1 buffer.  Buffer: 0 data, 1 offset, 2 size.
  const entries = vectorOf(view, model, 6);
  const buffers = vectorOf(view, model, 4);
  if (entries && buffers) {
    for (let i = 0; i < entries[1]; i++) {
      const entry = deref(view, entries[0] + 4 * i);
      const namePos = fieldPos(view, entry, 0);
      if (!namePos) continue;
      const str = deref(view, namePos);
      const name = new TextDecoder().decode(bytes.subarray(str + 4, str + 4 + view.getUint32(str, true)));
      if (name !== METADATA_KEY) continue;
      const bufPos = fieldPos(view, entry, 1);
      const buffer = deref(view, buffers[0] + 4 * (bufPos ? view.getUint32(bufPos, true) : 0));
      let data = vectorOf(view, buffer, 0);
      if (!data || !data[1]) {  // a buffer stored after the flatbuffer (files over 2 GB)
        const offPos = fieldPos(view, buffer, 1), sizePos = fieldPos(view, buffer, 2);
        if (!offPos || !sizePos) break;
        data = [Number(view.getBigUint64(offPos, true)), Number(view.getBigUint64(sizePos, true))];
      }
      return JSON.parse(new TextDecoder().decode(bytes.subarray(data[0], data[0] + data[1])));
    }
  }
  throw new SeqkitModelError(
      `the model has no '${METADATA_KEY}' entry in its metadata table, so it is not a seqkit ` +
      'export (or was exported before metadata was embedded): give the export folder\'s ' +
      'metadata.json with it.');
}

/**
 * A copy of the model with every dynamic dimension pinned to the size the converter resolved it
 * to. seqkit's step signature takes any batch (`shape_signature` `[-1, H]`, `shape` `[1, H]`);
 * LiteRT.js 2.5 compiles static shapes only and refuses a `[1, H]` tensor for a `[-1, H]` input.
 * Pinning gives what `Interpreter.resize_tensor_input(i, [1, H])` gives in Python: batch 1.
 * @param {Uint8Array} bytes the `.tflite` file.
 * @returns {{bytes: Uint8Array, pinned: number}} the pinned copy and how many dimensions were pinned.
 */
export function pinDynamicDimensions(bytes) {
  const out = bytes.slice();
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const model = deref(view, 0);
  let pinned = 0;
  // Model: 2 subgraphs.  SubGraph: 0 tensors.  Tensor: 0 shape, 7 shape_signature.
  const subgraphs = vectorOf(view, model, 2);
  for (let g = 0; subgraphs && g < subgraphs[1]; g++) {
    const subgraph = deref(view, subgraphs[0] + 4 * g);
    const tensors = vectorOf(view, subgraph, 0);
    for (let t = 0; tensors && t < tensors[1]; t++) {
      const tensor = deref(view, tensors[0] + 4 * t);
      const shape = vectorOf(view, tensor, 0), signature = vectorOf(view, tensor, 7);
      if (!shape || !signature || shape[1] !== signature[1]) continue;
      for (let d = 0; d < signature[1]; d++) {
        if (view.getInt32(signature[0] + 4 * d, true) === -1) {
          view.setInt32(signature[0] + 4 * d, view.getInt32(shape[0] + 4 * d, true), true);
          pinned++;
        }
      }
    }
  }
  return {bytes: out, pinned};
}

// --- Tokenization, as the metadata's `tokenization` field says ---

/** The metadata's tokenization (`tokenization`; files written before schema version 1 said
 * `token_mode`, then `tokenizer`). */
export function tokenizationOf(meta) {
  return meta.tokenization || meta.token_mode || meta.tokenizer;
}

/**
 * Raw text -> tokens: `char` gives Unicode code points, `whitespace` splits on white space
 * (JavaScript's `\s`; Python's `str.split()` also splits on the separators U+001C-U+001F).
 * @param {string} text
 * @param {object} meta the metadata (`tokenization`, `lowercase`).
 * @param {boolean} [lower] lower-case first; defaults to the metadata's `lowercase`.
 * @returns {string[]}
 * @throws {SeqkitModelError} for a tokenization other than `char` and `whitespace`.
 */
export function tokenize(text, meta, lower = Boolean(meta.lowercase)) {
  const mode = tokenizationOf(meta);
  if (lower) text = text.toLowerCase();
  if (mode === 'char') return Array.from(text);
  if (mode === 'whitespace') return text.split(/\s+/).filter((t) => t.length > 0);
  throw new SeqkitModelError(
      `tokenization '${mode}' is not covered by this page (char and whitespace are); ` +
      'export a model trained with one of those, or tokenize in the app.');
}

// --- The step model ---

/**
 * Check that the metadata describes a model this module runs: an explicit-state `step` model
 * with float inputs and outputs (seqkit export's default) of a language model or a tagger.
 * @throws {SeqkitModelError} naming the field that rules it out.
 */
export function checkSupported(meta) {
  if (meta.artefact !== 'step' || meta.state === 'internal' || meta.io_type === 'int') {
    throw new SeqkitModelError(
        `this page runs explicit-state step models with float I/O (seqkit export's default); ` +
        `this one has artefact '${meta.artefact}', state '${meta.state || 'explicit'}', ` +
        `io_type '${meta.io_type}': export again without --full-sequence / --state internal / ` +
        '--io-type int.');
  }
  if (meta.head !== 'language_model' && meta.head !== 'tagger') {
    throw new SeqkitModelError(`head '${meta.head}' is not covered by this page (language_model, tagger).`);
  }
  if (meta.crf || meta.char_vocab) {
    throw new SeqkitModelError('CRF and character-aware taggers are not covered by this page.');
  }
}

/**
 * One `step` signature, `(input [1] int32, states [1, H] float32...) -> (logits [1, C], states...)`,
 * compiled for LiteRT.js's CPU (WebAssembly, XNNPACK) accelerator; the states are carried here
 * between calls. `loadLiteRt` must have been awaited first.
 */
export class StepModel {
  constructor(compiled, meta) {
    this.compiled = compiled;
    this.runner = compiled.signatures.step;
    if (!this.runner) {
      throw new SeqkitModelError(
          `the model has no 'step' signature (it has: ${Object.keys(compiled.signatures).join(', ')}).`);
    }
    this.inputName = meta.input.name;
    this.layout = meta.state_layout.map((s) => [s.name, Number(s.size)]);
    this.reset();
  }

  /** Zero states: the next step starts a new sequence. */
  reset() {
    this.states = Object.fromEntries(this.layout.map(([name, size]) => [name, new Float32Array(size)]));
  }

  /**
   * Feed one token id; return this step's logits.
   * @param {number} tokenId an id of the metadata's vocab.
   * @returns {Promise<Float32Array>} logits `[C]`.
   */
  async step(tokenId) {
    const inputs = {[this.inputName]: new Tensor(new Int32Array([tokenId]), [1])};
    for (const [name, size] of this.layout) inputs[name] = new Tensor(this.states[name], [1, size]);
    let outputs;
    try {
      outputs = await this.runner.run(inputs);
    } finally {
      for (const t of Object.values(inputs)) t.delete();
    }
    const read = (name) => Float32Array.from(outputs[name].toTypedArray());
    try {
      const logits = read('logits');
      this.states = Object.fromEntries(this.layout.map(([name]) => [name, read(name)]));
      return logits;
    } finally {
      for (const t of Object.values(outputs)) t.delete();
    }
  }

  delete() {
    this.compiled.delete();
  }
}

/**
 * Compile a seqkit step model for LiteRT.js's CPU accelerator (WebAssembly, XNNPACK), its batch
 * pinned to 1 (see pinDynamicDimensions).
 * @param {Uint8Array} bytes the `.tflite` file.
 * @param {object} meta its metadata.
 * @returns {Promise<StepModel>}
 * @throws {SeqkitModelError} when the metadata rules the model out (see checkSupported).
 */
export async function openStepModel(bytes, meta) {
  checkSupported(meta);
  return new StepModel(await loadAndCompile(pinDynamicDimensions(bytes).bytes, {accelerator: 'wasm'}), meta);
}

function argmax(z) {
  let best = 0;
  for (let i = 1; i < z.length; i++) if (z[i] > z[best]) best = i;
  return best;
}

/**
 * A language model, greedily: prime the state with `<s>` and the prompt's ids, then feed each
 * arg-max back; stop at `</s>` (a `line` model) or read `</s>` back as `<s>` and go on (a model
 * trained with `layout: stream`). What `seqkit stream --greedy` prints for the same prompt.
 * @param {StepModel} model
 * @param {object} meta
 * @param {string} prompt
 * @param {number} maxLength the most new tokens.
 * @returns {Promise<{text: string, fed: number[], logits: Float32Array[]}>} the prompt and its
 *   continuation, every id fed to the model in order, and the logits each step returned.
 */
export async function generateGreedy(model, meta, prompt, maxLength) {
  const vocab = meta.vocab;
  const index = new Map(vocab.map((tok, i) => [tok, i]));
  const {start, end, unk, pad} = meta.special_ids;
  const across = meta.layout === 'stream';
  const join = tokenizationOf(meta) === 'char' ? '' : ' ';
  const encode = (line) => tokenize(line, meta).map((t) => (index.has(t) ? index.get(t) : unk));

  let ids;
  if (across) {  // earlier prompt lines: each read, then <s> (the input side of a line's </s>)
    const lines = prompt.split('\n');
    const last = lines.pop();
    ids = [start];
    for (const line of lines.map((l) => l.trimEnd())) {
      if (line.trim()) ids.push(...encode(line), start);
    }
    ids.push(...encode(last));
  } else {
    ids = [start, ...encode(prompt)];
  }
  model.reset();
  const fed = [], logits = [];
  const feed = async (id) => {
    fed.push(id);
    const z = await model.step(id);
    logits.push(z);
    return z;
  };
  for (const id of ids.slice(0, -1)) await feed(id);
  let lastId = ids[ids.length - 1];
  const generated = [];
  for (let n = 0; n < maxLength; n++) {
    const next = argmax(await feed(lastId));
    if (next === end && !across) break;
    generated.push(next);
    lastId = next === end ? start : next;
  }
  const special = new Set([pad, start]);
  let text;
  if (across) {  // </s> is a line break
    const lines = [];
    let cur = [];
    for (const i of generated) {
      if (i === end) {
        lines.push(cur.join(join));
        cur = [];
      } else if (!special.has(i)) {
        cur.push(vocab[i]);
      }
    }
    const cont = [...lines, cur.join(join)].join('\n');
    const sep = join && prompt && cont && !prompt.endsWith('\n') && !prompt.endsWith(' ') &&
        !cont.startsWith('\n') ? join : '';
    text = prompt + sep + cont;
  } else {
    const cont = generated.filter((i) => !special.has(i)).map((i) => vocab[i]).join(join);
    text = prompt + (prompt && join ? join : '') + cont;
  }
  return {text, fed, logits};
}

/**
 * A tagger: per non-empty line, reset the state and step each word's id; its tag is the
 * arg-max of the logits. What `seqkit stream` prints for the same lines.
 * @param {StepModel} model
 * @param {object} meta
 * @param {string[]} lines
 * @returns {Promise<{lines: string[], fed: number[][], logits: Float32Array[][]}>} `word/TAG ...`
 *   per tagged line, and per line the ids fed and the logits of each step.
 */
export async function tagLines(model, meta, lines) {
  const index = new Map(meta.vocab.map((tok, i) => [tok, i]));
  const unk = meta.special_ids.unk;
  const out = [], fed = [], logits = [];
  for (const line of lines) {
    const words = tokenize(line, meta, false);  // printed as written, looked up lower-cased
    if (!words.length) continue;
    model.reset();
    const ids = words.map((w) => (meta.lowercase ? w.toLowerCase() : w))
        .map((k) => (index.has(k) ? index.get(k) : unk));
    const zs = [];
    for (const id of ids) zs.push(await model.step(id));
    out.push(words.map((w, i) => `${w}/${meta.labels[argmax(zs[i])]}`).join(' '));
    fed.push(ids);
    logits.push(zs);
  }
  return {lines: out, fed, logits};
}
