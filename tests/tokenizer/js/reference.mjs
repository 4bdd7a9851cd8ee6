// tiktoken's npm port as the reference for meridian's tokenizer (tests/tokenizer):
//   node reference.mjs ranks OUT_DIR            writes OUT_DIR/<encoding>.tiktoken for gpt2, cl100k_base
//                                               and o200k_base (js-tiktoken ships them compressed)
//   node reference.mjs encode ENCODING FILE...  prints, per file, one JSON line: the file, its
//                                               token count, and the SHA-256 of its ids as little-
//                                               endian int32 (the whole file is one text, decoded
//                                               as UTF-8; specials encoded as text)
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { Tiktoken } from "js-tiktoken/lite";

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
  const [name, ...files] = args;
  const enc = new Tiktoken(await ranksOf(name));
  for (const file of files) {
    const text = readFileSync(file).toString("utf8");
    const ids = enc.encode(text, [], []);  // no special allowed, none disallowed: specials are text
    const bytes = Buffer.alloc(ids.length * 4);
    ids.forEach((id, i) => bytes.writeInt32LE(id, i * 4));
    console.log(JSON.stringify({ file, tokens: ids.length, sha256: createHash("sha256").update(bytes).digest("hex") }));
  }
} else {
  console.error("usage: node reference.mjs ranks OUT_DIR | encode ENCODING FILE...");
  process.exit(2);
}
