// tiktoken's npm ports as the references for meridian's tokenizer (tests/tokenizer):
//   node reference.mjs ranks OUT_DIR            writes OUT_DIR/<encoding>.tiktoken for gpt2, cl100k_base
//                                               and o200k_base (js-tiktoken ships them compressed)
//   node reference.mjs encode PORT ENCODING FILE...
//                                               prints, per file, one JSON line: the port, the file, its
//                                               token count, and the SHA-256 of its ids as little-
//                                               endian int32 (the whole file is one text, decoded
//                                               as UTF-8; specials encoded as text). PORT: "tiktoken"
//                                               (OpenAI's Rust core compiled to WebAssembly, with
//                                               ranks of its own) or "js-tiktoken" (a port in
//                                               JavaScript, three times slower)
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { Tiktoken } from "js-tiktoken/lite";
import { get_encoding } from "tiktoken";

const ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"];

async function ranksOf(name) {
  return (await import(`js-tiktoken/ranks/${name}`)).default;
}

// js-tiktoken's compressed form: lines "<marker> <offset> <token> <token> ...", rank = offset + i.
function expand(bpeRanks) {
  const out = [];
  for (const line of bpeRanks.split("\n")) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(" ");
    tokens.forEach((t, i) => out.push(`${t} ${Number.parseInt(offset, 10) + i}`));
  }
  return out.join("\n") + "\n";
}

const [command, ...args] = process.argv.slice(2);
if (command === "ranks") {
  mkdirSync(args[0], { recursive: true });
  for (const name of ENCODINGS) writeFileSync(`${args[0]}/${name}.tiktoken`, expand((await ranksOf(name)).bpe_ranks));
} else if (command === "encode") {
  const [port, name, ...files] = args;
  if (port !== "tiktoken" && port !== "js-tiktoken") throw new Error(`unknown port ${port}`);
  const wasm = port === "tiktoken" ? get_encoding(name) : null;
  const js = wasm ? null : new Tiktoken(await ranksOf(name));
  for (const file of files) {
    const text = readFileSync(file).toString("utf8");
    // No special allowed, none disallowed: specials are text.
    const ids = wasm ? wasm.encode(text, [], []) : js.encode(text, [], []);
    const bytes = Buffer.alloc(ids.length * 4);
    ids.forEach((id, i) => bytes.writeInt32LE(id, i * 4));
    console.log(JSON.stringify({ port, file, tokens: ids.length, sha256: createHash("sha256").update(bytes).digest("hex") }));
  }
  wasm?.free();
} else {
  console.error("usage: node reference.mjs ranks OUT_DIR | encode tiktoken|js-tiktoken ENCODING FILE...");
  process.exit(2);
}
