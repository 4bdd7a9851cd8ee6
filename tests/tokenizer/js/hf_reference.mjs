// Hugging Face's tokenizer (its JavaScript implementation, @huggingface/tokenizers, the one
// Transformers.js uses) as the reference for meridian's tokenizer.json reader (tests/tokenizer):
//   node hf_reference.mjs gpt2-json RANK_FILE OUT_FILE   GPT-2's tokenizer.json (the byte-level BPE
//                                    Hugging Face ships for "gpt2"), rebuilt from tiktoken's gpt2
//                                    ranks: the same tokens, each merge the split of a token that its
//                                    lower ranks make, in rank order (as transformers converts them)
//   node hf_reference.mjs encode TOKENIZER_JSON FILE...  one JSON line per file, as reference.mjs's
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

// GPT-2's bytes_to_unicode.
function byteChars() {
  const chars = [];
  let next = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    chars.push(String.fromCodePoint(printable ? b : next++));
  }
  return chars;
}

function gpt2Json(rankFile, out) {
  const ranks = new Map();
  const tokens = [];
  for (const line of readFileSync(rankFile, "utf8").split("\n")) {
    if (!line) continue;
    const [b64, rank] = line.split(" ");
    const key = Buffer.from(b64, "base64").toString("latin1");
    ranks.set(key, Number(rank));
    tokens[Number(rank)] = key;
  }
  // The parts a token's bytes merge into using only the merges below `max`.
  const split = (key, max) => {
    let parts = [...key];
    for (;;) {
      let best = -1, bestRank = max;
      for (let i = 0; i + 1 < parts.length; ++i) {
        const r = ranks.get(parts[i] + parts[i + 1]);
        if (r !== undefined && r < bestRank) bestRank = r, best = i;
      }
      if (best < 0) return parts;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
    }
  };
  const chars = byteChars();
  const show = (key) => [...key].map((c) => chars[c.charCodeAt(0)]).join("");
  const vocab = {};
  tokens.forEach((key, id) => (vocab[show(key)] = id));
  vocab["<|endoftext|>"] = 50256;
  const merges = [];
  for (let id = 256; id < tokens.length; ++id) {
    const parts = split(tokens[id], id);
    if (parts.length !== 2) throw new Error(`token ${id} does not split in two`);
    merges.push(`${show(parts[0])} ${show(parts[1])}`);
  }
  const json = {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [{ id: 50256, content: "<|endoftext|>", single_word: false, lstrip: false, rstrip: false, normalized: true, special: true }],
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
             fuse_unk: false, byte_fallback: false, vocab, merges },
  };
  writeFileSync(out, JSON.stringify(json));
}

const [command, ...args] = process.argv.slice(2);
if (command === "gpt2-json") {
  gpt2Json(args[0], args[1]);
} else if (command === "encode") {
  const [json, ...files] = args;
  const tok = new Tokenizer(JSON.parse(readFileSync(json, "utf8")), {});
  for (const file of files) {
    const ids = tok.encode(readFileSync(file).toString("utf8"), { add_special_tokens: false }).ids;
    const bytes = Buffer.alloc(ids.length * 4);
    ids.forEach((id, i) => bytes.writeInt32LE(id, i * 4));
    console.log(JSON.stringify({ file, tokens: ids.length, sha256: createHash("sha256").update(bytes).digest("hex") }));
  }
} else {
  console.error("usage: node hf_reference.mjs gpt2-json RANK_FILE OUT_FILE | encode TOKENIZER_JSON FILE...");
  process.exit(2);
}
