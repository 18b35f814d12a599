// Writes the small byte-level BPE tokenizer the server tests pair with a random 512-token
// model: vocab.json, merges.txt, added_tokens.json and tokenizer_config.json in Qwen's layout.
// Ids: 0..255 the bytes (in the byte-level alphabet's order), 256..506 merges learnt from the
// text below, 507..511 the added tokens. Deterministic: run `node make_tokenizer.mjs` in this
// folder to regenerate the committed files byte for byte.

import fs from 'node:fs';

const kMerges = 251;
const kAdded = [
  ['<|endoftext|>', true],
  ['<|im_start|>', true],
  ['<|im_end|>', true],
  ['<think>', false],
  ['</think>', false],
];

const kCorpus = `
The server answers requests over HTTP while one engine thread owns the model, the key and
value cache and the scheduler. Each request is a prompt and a few parameters: how many tokens
to generate, the temperature, the nucleus mass and the seed. A block of draft tokens is
proposed, the target model verifies the block in one forward pass, and the longest accepted
prefix is kept. When many requests run together, only the rows that are likely to be accepted
are verified, so the batch stays small and the step stays fast.
Hello, how are you today? I am fine, thank you. What is the weather like in the city?
It is sunny and warm, with a light wind from the sea. Numbers: 1, 2, 3, 10, 42, 100, 2024.
Streaming sends text as it is generated; a client that leaves early has its request cancelled.
`;

// GPT-2's byte-level alphabet: printable bytes map to themselves, the rest to U+0100 onwards.
function byteAlphabet() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; ++b) bs.push(b);
  for (let b = 0xa1; b <= 0xac; ++b) bs.push(b);
  for (let b = 0xae; b <= 0xff; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return bs.map((b, i) => [b, String.fromCodePoint(cs[i])]);
}

const alphabet = byteAlphabet();
const byteToChar = new Map(alphabet);
const spell = (text) => Array.from(Buffer.from(text, 'utf8'), (b) => byteToChar.get(b));

// Word counts after a split close to Qwen's pre-tokenizer.
const pieces = kCorpus.match(/'[sStTmMdD]|'(?:re|ve|ll)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+/gu);
const words = new Map();
for (const p of pieces) words.set(p, (words.get(p) ?? 0) + 1);
let seqs = [...words].map(([w, count]) => ({symbols: spell(w), count}));

const vocab = new Map(alphabet.map(([, ch], id) => [ch, id]));
const merges = [];
while (merges.length < kMerges) {
  const pairs = new Map();
  for (const {symbols, count} of seqs) {
    for (let i = 0; i + 1 < symbols.length; ++i) {
      const key = symbols[i] + ' ' + symbols[i + 1];
      pairs.set(key, (pairs.get(key) ?? 0) + count);
    }
  }
  let best = null;
  for (const [key, count] of pairs) {
    if (best === null || count > best[1] || (count === best[1] && key < best[0])) best = [key, count];
  }
  if (best === null) throw new Error('the corpus ran out of pairs');
  const [left, right] = best[0].split(' ');
  merges.push(best[0]);
  vocab.set(left + right, vocab.size);
  seqs = seqs.map(({symbols, count}) => {
    const out = [];
    for (let i = 0; i < symbols.length; ++i) {
      if (i + 1 < symbols.length && symbols[i] === left && symbols[i + 1] === right) {
        out.push(left + right);
        ++i;
      } else {
        out.push(symbols[i]);
      }
    }
    return {symbols: out, count};
  });
}

const added = {};
const decoder = {};
kAdded.forEach(([content, special], i) => {
  const id = vocab.size + i;
  added[content] = id;
  decoder[String(id)] = {content, lstrip: false, normalized: false, rstrip: false,
                         single_word: false, special};
});

fs.writeFileSync('vocab.json', JSON.stringify(Object.fromEntries(vocab)) + '\n');
fs.writeFileSync('merges.txt', '#version: 0.2\n' + merges.join('\n') + '\n');
fs.writeFileSync('added_tokens.json', JSON.stringify(added, null, 2) + '\n');
fs.writeFileSync('tokenizer_config.json', JSON.stringify({
  add_bos_token: false,
  added_tokens_decoder: decoder,
  bos_token: null,
  eos_token: '<|im_end|>',
  model_max_length: 4096,
  pad_token: '<|endoftext|>',
  tokenizer_class: 'Qwen2Tokenizer',
}, null, 2) + '\n');
console.log(`vocab ${vocab.size} + ${kAdded.length} added tokens, ${merges.length} merges`);
