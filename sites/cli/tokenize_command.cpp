// `meridian tokenize --tokenizer FILE [--encoding NAME] --out DIR INPUT...`: a corpus as llm.c
// shards. Every document (a text file, or a line of a JSON Lines file) is preceded by the
// tokenizer's end-of-text token, as llm.c does; the first --val-tokens ids go to val_*.bin, the
// rest to train_*.bin, shards of --shard-tokens ids. Documents are encoded on every core, a batch
// at a time, and written in input order: the shards are the same whatever the thread count.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/data/documents.hpp"
#include "core/data/shard_writer.hpp"
#include "core/io/env.hpp"
#include "core/model/model_config.hpp"
#include "core/runlog/progress.hpp"
#include "core/tokenizer/tokenizer_file.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

namespace {

constexpr std::size_t kBatchBytes = 32 << 20;

struct Split {
  std::int64_t val_left;
  ShardWriter val, train;
  void append(std::span<const std::int32_t> ids) {
    const auto to_val = static_cast<std::size_t>(std::min<std::int64_t>(val_left, static_cast<std::int64_t>(ids.size())));
    val.append(ids.first(to_val));
    train.append(ids.subspan(to_val));
    val_left -= static_cast<std::int64_t>(to_val);
  }
};

}  // namespace

Action add_tokenize_command(CLI::App& app) {
  struct Options {
    std::string tokenizer, encoding, out, field = "text";
    std::vector<std::string> inputs;
    std::int64_t shard_tokens = 100'000'000, val_tokens = 0;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--tokenizer", opts->tokenizer, "tokenizer.json, or a tiktoken rank file")->required();
  app.add_option("--encoding", opts->encoding, "the rank file's encoding (gpt2, r50k_base, p50k_base, cl100k_base, "
                 "o200k_base, llama3); a file named <encoding>.tiktoken says it itself");
  app.add_option("--out", opts->out, "directory for the shards (train_000000.bin, ..., val_000000.bin, ...)")->required();
  app.add_option("--shard-tokens", opts->shard_tokens, "ids per shard")->capture_default_str()->check(CLI::Range(1, 2147483647));
  app.add_option("--val-tokens", opts->val_tokens, "the first ids go to the validation shards")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--field", opts->field, "the field of a JSON Lines (.jsonl) document")->capture_default_str();
  app.add_option("inputs", opts->inputs, "text files (a document each) and JSON Lines files")->required();
  return [opts] {
    const Tokenizer tokenizer = load_tokenizer(opts->tokenizer, opts->encoding);
    const auto end_of_text = tokenizer.end_of_text();
    if (!end_of_text)
      throw make_error(ErrorKind::Config, opts->tokenizer, ": the tokenizer has no <|endoftext|> or <|end_of_text|> token "
                       "to separate documents");
    Env& env = posix_env();
    Split split{opts->val_tokens, ShardWriter(env, opts->out, "val", tokenizer.vocab_size(), opts->shard_tokens),
                ShardWriter(env, opts->out, "train", tokenizer.vocab_size(), opts->shard_tokens)};
    DocumentReader reader({opts->inputs.begin(), opts->inputs.end()}, opts->field);
    ProgressPrinter progress(stderr);
    const auto start = std::chrono::steady_clock::now();
    auto last_update = start;
    std::int64_t tokens = 0;
    std::vector<std::string> batch;
    while (reader.next_batch(batch, kBatchBytes)) {
      std::vector<std::vector<std::int32_t>> ids(batch.size());
      std::vector<std::optional<Error>> failed(batch.size());  // nothing may leave an OpenMP region
#pragma omp parallel for schedule(dynamic, 1)
      for (std::size_t d = 0; d < batch.size(); ++d) {
        ids[d].push_back(*end_of_text);
        try {
          tokenizer.encode(batch[d], ids[d]);
        } catch (const Error& e) {
          failed[d] = e;
        }
      }
      for (std::size_t d = 0; d < batch.size(); ++d)
        if (failed[d])
          throw make_error(failed[d]->kind(), "document ",
                           reader.documents() - static_cast<std::int64_t>(batch.size() - d) + 1,
                           " of the inputs: ", failed[d]->what());
      for (const auto& doc : ids) {
        split.append(doc);
        tokens += static_cast<std::int64_t>(doc.size());
      }
      batch.clear();
      const auto now = std::chrono::steady_clock::now();
      if (now - last_update > std::chrono::seconds(1)) {
        const double s = std::chrono::duration<double>(now - start).count();
        progress.update("tokenize: " + with_commas(reader.documents()) + " documents, " + with_commas(tokens) +
                        " tokens, " + std::to_string(static_cast<int>(reader.bytes() / 1e6 / s)) + " MB/s");
        last_update = now;
      }
    }
    const auto val = split.val.finish(), train = split.train.finish();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress.line("tokenize: " + with_commas(reader.documents()) + " documents, " + with_commas(tokens) + " tokens (" +
                  std::to_string(reader.bytes()) + " bytes) in " + std::to_string(s) + " s on " +
                  std::to_string(omp_get_max_threads()) + " threads");
    std::printf("%zu train and %zu val shards of %d-bit ids (vocabulary %d, %s) in %s\n", train.size(), val.size(),
                8 * split.train.bytes_per_token(), tokenizer.vocab_size(), tokenizer.name().c_str(), opts->out.c_str());
    return 0;
  };
}

}  // namespace meridian::cli
