#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/generate/generator.hpp"
#include "core/generate/text_codec.hpp"
#include "core/tokenizer/tokenizer_file.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/cli/model_source.hpp"

namespace meridian::cli {

namespace {

struct Options {
  std::string checkpoint, prompt, prompt_file, tokenizer, tokenizer_encoding;
  GenerateOptions generate;
  int samples = 1;
  bool ignore_eos = false, json = false;
};

TextCodec codec_of(const Options& o, const ModelSnapshot& snap) {
  std::optional<Tokenizer> tokenizer;
  if (!o.tokenizer.empty())
    tokenizer = load_tokenizer(o.tokenizer, o.tokenizer_encoding);
  else if (snap.tokenizer)
    tokenizer = load_tokenizer(*snap.tokenizer, snap.source);
  try {
    return TextCodec(std::move(tokenizer), snap.shape.vocab, snap.source.string());
  } catch (const Error& e) {
    if (!o.tokenizer.empty() || snap.tokenizer) throw;
    throw make_error(ErrorKind::Usage, e.what(), " with --tokenizer");
  }
}

std::vector<std::int32_t> prompt_ids(const Options& o, const TextCodec& codec) {
  if (o.prompt_file.empty()) return codec.prompt(o.prompt);
  std::ifstream in(o.prompt_file, std::ios::binary);
  if (!in) throw make_error(ErrorKind::Io, "--prompt-file ", o.prompt_file, " cannot be read");
  return codec.prompt(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
}

void sample(const Options& o, const ModelSnapshot& snap, const TextCodec& codec,
            const std::vector<std::int32_t>& prompt, int k) {
  GenerateOptions g = o.generate;
  g.seed += static_cast<std::uint64_t>(k);
  if (!o.ignore_eos) g.stop_token = codec.end_of_text();
  if (!o.json) {
    const std::string head = codec.decode(prompt);
    std::fwrite(head.data(), 1, head.size(), stdout);
  }
  const auto start = std::chrono::steady_clock::now();
  const Generation out = generate(snap.shape, snap.params, prompt, g, [&](std::int32_t t) {
    if (o.json) return;
    const std::string piece = codec.decode(std::span<const std::int32_t>(&t, 1));
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = static_cast<double>(out.tokens.size()) / std::max(seconds, 1e-9);
  if (o.json) {
    const nlohmann::json j = {{"sample", k},
                              {"seed", g.seed},
                              {"prompt_tokens", prompt.size()},
                              {"prompt_unseen", out.prompt_unseen},
                              {"tokens", out.tokens},
                              {"text", codec.decode(out.tokens)},
                              {"stopped", out.stopped ? "end_of_text" : "length"},
                              {"slides", out.slides},
                              {"seconds", seconds},
                              {"tokens_per_s", rate}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::printf("\n");
  if (k + 1 < o.samples) std::printf("----------\n");
  std::fflush(stdout);
  std::fprintf(stderr, "sample %d (seed %llu): %zu tokens in %.2f s, %.1f tokens/s, %s", k,
               static_cast<unsigned long long>(g.seed), out.tokens.size(), seconds, rate,
               out.stopped ? "ended at the end-of-text token" : "ended at --max-new-tokens");
  if (out.prompt_unseen)
    std::fprintf(stderr, "; the prompt's first %zu tokens were beyond the model's context", out.prompt_unseen);
  if (out.slides) std::fprintf(stderr, "; the window slid %d times", out.slides);
  std::fprintf(stderr, "\n");
}

}  // namespace

Action add_generate_command(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  auto& g = opts->generate;
  app.add_option("--checkpoint", opts->checkpoint,
                 "checkpoint file, checkpoints/ directory, run directory or Hugging Face model directory")
      ->required();
  auto* prompt = app.add_option("--prompt", opts->prompt, "text to continue (default: a document's start)");
  app.add_option("--prompt-file", opts->prompt_file, "a file whose text to continue")->excludes(prompt);
  app.add_option("--max-new-tokens", g.max_new_tokens, "tokens to generate per sample")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--temperature", g.sampling.temperature, "softmax temperature; 0: greedy")->capture_default_str();
  app.add_option("--top-k", g.sampling.top_k, "sample among the k most likely tokens; 0: all")->capture_default_str();
  app.add_option("--top-p", g.sampling.top_p, "sample among the fewest tokens whose probability reaches p; 1: all")
      ->capture_default_str();
  app.add_option("--seed", g.seed, "sample k draws with seed + k: each replays alone")->capture_default_str();
  app.add_option("--samples", opts->samples, "samples of the same prompt")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--tokenizer", opts->tokenizer, "tokenizer.json or rank file (default: the checkpoint's)");
  app.add_option("--tokenizer-encoding", opts->tokenizer_encoding, "the rank file's encoding (cl100k_base, ...)");
  app.add_flag("--ignore-eos", opts->ignore_eos, "go on past the end-of-text token");
  app.add_flag("--json", opts->json, "one JSON object per sample (tokens, text, figures) instead of the text");
  return [opts] {
    if (const auto problems = validate_sampling(opts->generate.sampling); !problems.empty())
      throw make_error(ErrorKind::Usage, "--", problems.front());
    const ModelSnapshot snap = model_at(opts->checkpoint, 0);
    const TextCodec codec = codec_of(*opts, snap);
    const auto prompt = prompt_ids(*opts, codec);
    std::fprintf(stderr, "generating from %s (step %lld, %s), %zu prompt tokens\n", snap.source.string().c_str(),
                 static_cast<long long>(snap.step), describe(snap.shape).c_str(), prompt.size());
    for (int k = 0; k < opts->samples; ++k) sample(*opts, snap, codec, prompt, k);
    return 0;
  };
}

}  // namespace meridian::cli
