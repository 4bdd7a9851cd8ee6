// Tokenizer throughput of tiktoken's npm ports on one core, for bench/tokenize_bench.sh:
//   node timing.mjs ENCODING REPEATS FILE...
// prints one JSON line per port: MB/s of encoding the files (each a text, specials as text), the
// median of REPEATS passes, and the token count (the same for both ports, and for meridian).
import { readFileSync } from "node:fs";
import { Tiktoken as JsTiktoken } from "js-tiktoken/lite";
import { get_encoding } from "tiktoken";

const [name, repeats, ...files] = process.argv.slice(2);
const texts = files.map((f) => readFileSync(f).toString("utf8"));
const bytes = files.reduce((n, f) => n + readFileSync(f).length, 0);

function time(encode) {
  const rates = [];
  let tokens = 0;
  for (let r = 0; r < Number(repeats); ++r) {
    const t0 = process.hrtime.bigint();
    tokens = 0;
    for (const t of texts) tokens += encode(t);
    rates.push(bytes / 1e6 / (Number(process.hrtime.bigint() - t0) / 1e9));
  }
  rates.sort((a, b) => a - b);
  return { mb_s: rates[Math.floor(rates.length / 2)], tokens };
}

const js = new JsTiktoken((await import(`js-tiktoken/ranks/${name}`)).default);
console.log(JSON.stringify({ port: "js-tiktoken", ...time((t) => js.encode(t, [], []).length) }));
const wasm = get_encoding(name);
console.log(JSON.stringify({ port: "tiktoken (Rust core, WebAssembly)", ...time((t) => wasm.encode(t, [], []).length) }));
wasm.free();
