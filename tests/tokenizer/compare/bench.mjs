// Encode throughput of the JS reference (@huggingface/tokenizers), measured like
// `mkserve bench-tokenizer`: one cold pass, then the median of N warm passes, one thread.
// usage: node bench.mjs TOKENIZER_DIR INPUT_FILE [ITERATIONS] [--lines]
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const args = process.argv.slice(2);
const lines = args.includes("--lines");
const [dir, inputPath, iterationsArg] = args.filter((a) => a !== "--lines");
if (!dir || !inputPath) {
  console.error("usage: node bench.mjs TOKENIZER_DIR INPUT_FILE [ITERATIONS]");
  process.exit(2);
}
const iterations = Number(iterationsArg ?? 10);
const readJson = (file) => JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
const configPath = path.join(dir, "tokenizer_config.json");
const loadStart = performance.now();
const tokenizer = new Tokenizer(
  readJson("tokenizer.json"),
  fs.existsSync(configPath) ? readJson("tokenizer_config.json") : {},
);
const loadS = (performance.now() - loadStart) / 1000;
const text = fs.readFileSync(inputPath, "utf8");
const megabytes = Buffer.byteLength(text, "utf8") / 1e6;
// Each line keeps its newline, as in mkserve bench-tokenizer --lines.
const texts = lines ? text.match(/[^\n]*\n|[^\n]+$/g) : [text];
const timeEncode = () => {
  const start = performance.now();
  let numTokens = 0;
  for (const t of texts) numTokens += tokenizer.encode(t, { add_special_tokens: false }).ids.length;
  return [(performance.now() - start) / 1000, numTokens];
};
const [coldS, numTokens] = timeEncode();
const warm = [];
for (let i = 0; i < iterations; i++) warm.push(timeEncode()[0]);
warm.sort((a, b) => a - b);
const medianS = warm[Math.floor(warm.length / 2)];
console.log(
  `input: ${Buffer.byteLength(text, "utf8")} bytes in ${texts.length} texts, ${numTokens} tokens; load ${loadS.toFixed(2)} s`,
);
console.log(`encode cold (empty cache): ${(megabytes / coldS).toFixed(2)} MB/s`);
console.log(`encode warm (median of ${iterations}): ${(megabytes / medianS).toFixed(2)} MB/s`);
