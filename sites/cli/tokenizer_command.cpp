// `meridian tokenizer train --vocab N --out tokenizer.json INPUT...`: a byte-level BPE trained on
// the user's corpus (text files, a document each, and JSON Lines), written as a Hugging Face
// tokenizer.json: Llama 3's pre-tokenizer pattern, the merges, and <|endoftext|> after them.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/data/documents.hpp"
#include "core/io/atomic_write.hpp"
#include "core/io/env.hpp"
#include "core/tokenizer/bpe_trainer.hpp"
#include "core/tokenizer/tiktoken_file.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_tokenizer_command(CLI::App& app) {
  struct Options {
    int vocab = 8192;
    std::int64_t min_frequency = 2;
    std::string out, field = "text";
    std::vector<std::string> inputs;
  };
  auto opts = std::make_shared<Options>();
  app.require_subcommand(1);
  CLI::App* train = app.add_subcommand("train", "train a byte-level BPE on text files and JSON Lines");
  train->add_option("--vocab", opts->vocab, "tokens in all: 256 bytes, the merges, <|endoftext|>")
      ->capture_default_str()->check(CLI::Range(257, 1 << 30));
  train->add_option("--min-frequency", opts->min_frequency, "pairs seen fewer times are not merged")->capture_default_str();
  train->add_option("--out", opts->out, "the tokenizer.json to write")->required();
  train->add_option("--field", opts->field, "the field of a JSON Lines (.jsonl) document")->capture_default_str();
  train->add_option("inputs", opts->inputs, "text files (a document each) and JSON Lines files")->required();
  return [opts] {
    const auto start = std::chrono::steady_clock::now();
    BpeTrainOptions options;
    options.vocab = opts->vocab;
    options.min_frequency = opts->min_frequency;
    options.pattern = std::string(find_tiktoken_encoding("llama3")->pattern);
    const Pretokenizer pretokenizer(options.pattern, "llama3");
    DocumentReader reader({opts->inputs.begin(), opts->inputs.end()}, opts->field);
    std::vector<PieceCounts> counts(static_cast<std::size_t>(omp_get_max_threads()));
    std::vector<std::string> batch;
    while (reader.next_batch(batch, 32 << 20)) {
#pragma omp parallel for schedule(dynamic, 1)
      for (std::size_t d = 0; d < batch.size(); ++d) counts[static_cast<std::size_t>(omp_get_thread_num())].add(pretokenizer, batch[d]);
      batch.clear();
    }
    for (std::size_t t = 1; t < counts.size(); ++t) counts[0].merge(counts[t]);
    const ByteLevelBpe bpe = train_bpe(counts[0], options);
    const std::string json = tokenizer_json(bpe);
    Env& env = posix_env();
    const std::filesystem::path out(opts->out);
    if (out.has_parent_path()) env.create_dirs(out.parent_path());
    write_atomically(env, out, std::filesystem::path(out).concat(".tmp"),
                     [&](WritableFile& f) { f.append(std::as_bytes(std::span(json.data(), json.size()))); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("trained %zu tokens (%zu merges, %zu special) on %lld documents, %lld bytes, %zu distinct pieces, in %.1f s: %s\n",
                bpe.tokens.size() + bpe.specials.size(), bpe.merges.size(), bpe.specials.size(),
                static_cast<long long>(reader.documents()), static_cast<long long>(reader.bytes()),
                counts[0].counts().size(), s, opts->out.c_str());
    return 0;
  };
}

}  // namespace meridian::cli
