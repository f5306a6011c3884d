// Encodes every corpus case with the JS port of HF tokenizers (@huggingface/tokenizers) and writes
// the ids and decoded text as JSON, for tokenizer_compare to check mkserve against.
// usage: node reference.mjs TOKENIZER_DIR OUT.json CORPUS_FILE...
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const [dir, outPath, ...corpusFiles] = process.argv.slice(2);
if (!dir || !outPath || corpusFiles.length === 0) {
  console.error("usage: node reference.mjs TOKENIZER_DIR OUT.json CORPUS_FILE...");
  process.exit(2);
}
const readJson = (file) => JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
const configPath = path.join(dir, "tokenizer_config.json");
const config = fs.existsSync(configPath) ? readJson("tokenizer_config.json") : {};
const tokenizer = new Tokenizer(readJson("tokenizer.json"), config);

const cases = [];
for (const file of corpusFiles) {
  const text = fs.readFileSync(file, "utf8");
  const parts = text.split(/\n%%%%\n/);
  parts.forEach((part, i) => cases.push({ name: `${path.basename(file)}#${i}`, text: part }));
}
const results = cases.map(({ name, text }) => {
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  const ids_special = tokenizer.encode(text, { add_special_tokens: true }).ids;
  const decoded = tokenizer.decode(ids, {
    skip_special_tokens: false,
    clean_up_tokenization_spaces: false,
  });
  return { name, text, ids, ids_special, decoded };
});
fs.writeFileSync(outPath, JSON.stringify({ tokenizer: dir, cases: results }));
console.log(`reference: ${results.length} cases from ${dir}`);
