// `meridian generate` end to end, run as a child process: a trained checkpoint's samples are
// generate()'s in-process and replay by seed; a Hugging Face directory's tokenizer.json decodes the
// text and its end-of-text token ends a sample; bad requests exit with the option named.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/generate/generator.hpp"
#include "core/hf/hf_export.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/tokenizer/hf_tokenizer.hpp"
#include "core/train/train_checkpoint.hpp"
#include "tests/support/run_meridian.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::ProcessResult;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A byte-level job trained a few steps on the bundled corpus: its run directory.
fs::path trained_run(const TempDir& dir) {
  const auto file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"gen\"\nseed = 7\nrun_dir = \"run\"\n[model]\npreset = \"tiny\"\n"
                      << "[data]\npath = \"" << (testing::source_dir() / "data/tinyshakespeare/input.txt").string()
                      << "\"\n"
                      << "[inner]\nlr = 3e-3\nwarmup_steps = 2\nbatch_per_replica = 4\nsteps = 6\n"
                      << "[log]\nevery = 2\neval_every = 0\neval_windows = 8\n";
  const auto r = testing::run_meridian({"train", "--config", file.string()});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  return dir / "run";
}

std::vector<nlohmann::json> json_lines(const ProcessResult& r) {
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  std::vector<nlohmann::json> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// A GPT-2 over 256 bytes and <|endoftext|> (id 256) whose every prediction is <|endoftext|>: the
// final norm's output is its bias (gain 0), all ones, and only the end-of-text embedding row is
// not zero. With `tokenizer`, the directory holds its tokenizer.json.
fs::path end_of_text_model(const TempDir& dir, bool tokenizer) {
  ModelConfig shape{1, 2, 16, 8, 257, ModelFamily::Gpt2};
  const ParamLayout layout = ParamLayout::of(shape);
  std::vector<float> params(layout.total(), 0.0f);
  const auto& bias = layout.at("ln_f.bias");
  std::fill_n(params.begin() + static_cast<std::ptrdiff_t>(bias.offset), bias.numel, 1.0f);
  const auto& wte = layout.at("wte.weight");
  std::fill_n(params.begin() + static_cast<std::ptrdiff_t>(wte.offset + 256 * 16), 16, 1.0f);
  const fs::path out = dir / (tokenizer ? "hf" : "hf-bare");
  export_hf(shape, params, out);
  if (tokenizer) {
    ByteLevelBpe bpe;
    for (int b = 0; b < 256; ++b) bpe.tokens.push_back(std::string(1, static_cast<char>(b)));
    bpe.pattern = kByteLevelPattern;
    bpe.specials = {{"<|endoftext|>", 256}};
    std::ofstream(out / "tokenizer.json") << tokenizer_json(bpe);
  }
  return out;
}

}  // namespace

TEST_CASE(
    "generate: a checkpoint's samples are generate()'s in-process, each replayed alone by its seed, streamed as text") {
  TempDir dir("generate-run");
  const fs::path run = trained_run(dir);
  const std::vector<std::string> base = {
      "generate", "--checkpoint", run.string(), "--prompt", "ROMEO:", "--max-new-tokens", "40", "--top-k", "50"};
  auto args = base;
  args.insert(args.end(), {"--seed", "3", "--samples", "2", "--json"});
  const auto samples = json_lines(testing::run_meridian(args));
  REQUIRE(samples.size() == 2);
  const auto snap = load_model_snapshot(posix_env(), run, [](const std::string&) {});
  const std::string prompt = "ROMEO:";
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.sampling.top_k = 50;
  for (int k = 0; k < 2; ++k) {
    CAPTURE(k);
    const auto& s = samples[static_cast<std::size_t>(k)];
    CHECK(s.at("seed") == 3 + k);
    CHECK(s.at("prompt_tokens") == 6);
    CHECK(s.at("stopped") == "length");
    const auto tokens = s.at("tokens").get<std::vector<std::int32_t>>();
    REQUIRE(tokens.size() == 40);
    o.seed = 3 + k;
    CHECK(tokens ==
          generate(snap.shape, snap.params, std::vector<std::int32_t>(prompt.begin(), prompt.end()), o).tokens);
    // Bytes, for a byte-level model; in JSON a byte that is not UTF-8 is U+FFFD (the tokens are exact).
    const nlohmann::json bytes = std::string(tokens.begin(), tokens.end());
    CHECK(s.at("text").dump() == bytes.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  CHECK(samples[0].at("tokens") != samples[1].at("tokens"));
  args = base;
  args.insert(args.end(), {"--seed", "4", "--json"});
  CHECK(json_lines(testing::run_meridian(args)).at(0).at("tokens") == samples[1].at("tokens"));

  // A byte above 127 is a token of its own (5 bytes, 5 tokens), not a negative id.
  const auto accented = json_lines(testing::run_meridian(
      {"generate", "--checkpoint", run.string(), "--prompt", "caf\xc3\xa9", "--max-new-tokens", "2", "--json"}));
  CHECK(accented.at(0).at("prompt_tokens") == 5);

  args = base;
  args.insert(args.end(), {"--seed", "3"});
  const auto text = testing::run_meridian(args);
  REQUIRE_MESSAGE(text.exit_code == 0, text.describe());
  const auto first = samples[0].at("tokens").get<std::vector<std::int32_t>>();
  CHECK(text.out == prompt + std::string(first.begin(), first.end()) + "\n");
  CHECK(contains(text.err, "40 tokens in"));
  CHECK(contains(text.err, "ended at --max-new-tokens"));
}

TEST_CASE("generate: a Hugging Face directory's tokenizer.json decodes the text, and <|endoftext|> ends a sample") {
  TempDir dir("generate-hf");
  const fs::path hf = end_of_text_model(dir, true);
  const auto stopped = json_lines(testing::run_meridian(
      {"generate", "--checkpoint", hf.string(), "--prompt", "hi", "--max-new-tokens", "5", "--json"}));
  REQUIRE(stopped.size() == 1);
  CHECK(stopped[0].at("tokens") == std::vector<int>{256});
  CHECK(stopped[0].at("stopped") == "end_of_text");
  CHECK(stopped[0].at("text") == "<|endoftext|>");
  CHECK(stopped[0].at("prompt_tokens") == 2);  // "h" and "i": bytes, no merges in this tokenizer
  const auto on = json_lines(testing::run_meridian(
      {"generate", "--checkpoint", hf.string(), "--max-new-tokens", "5", "--ignore-eos", "--json"}));
  CHECK(on[0].at("tokens") == std::vector<int>(5, 256));
  CHECK(on[0].at("stopped") == "length");
  CHECK(on[0].at("prompt_tokens") == 1);  // no prompt: a document's start, <|endoftext|>
}

TEST_CASE("generate: bad requests exit with the option or file named, and nothing is generated") {
  TempDir dir("generate-bad");
  const fs::path bare = end_of_text_model(dir, false);
  const fs::path hf = end_of_text_model(dir, true);
  const auto fails = [](const std::vector<std::string>& args, int code, const std::string& named) {
    std::vector<std::string> all = {"generate"};
    all.insert(all.end(), args.begin(), args.end());
    const auto r = testing::run_meridian(all);
    CHECK_MESSAGE(r.exit_code == code, r.describe());
    CHECK_MESSAGE(contains(r.err, named), r.err);
    CHECK(r.out.empty());
  };
  fails({"--checkpoint", bare.string()}, 2, "name its tokenizer with --tokenizer");
  fails({"--checkpoint", hf.string(), "--top-p", "0"}, 2, "top_p must be in (0, 1]");
  fails({"--checkpoint", hf.string(), "--temperature", "-1"}, 2, "temperature must be");
  fails({"--checkpoint", hf.string(), "--prompt-file", (dir / "absent.txt").string()}, 1, "absent.txt");
  fails({"--checkpoint", (dir / "nothing-here").string()}, 66, "nothing-here");
}
