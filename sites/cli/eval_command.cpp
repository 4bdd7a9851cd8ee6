#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "core/data/tokens.hpp"
#include "core/io/env.hpp"
#include "core/model/gpt.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_eval_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, data, format = "text";
    int batch = 8;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--checkpoint", opts->checkpoint, "checkpoint file, checkpoints/ directory or run directory")
      ->required();
  app.add_option("--data", opts->data, "data file to score")->required();
  app.add_option("--format", opts->format, "data format: text | llmc-bin")->capture_default_str();
  app.add_option("--batch", opts->batch, "windows per forward pass")->capture_default_str()->check(CLI::PositiveNumber);
  return [opts] {
    const auto format = parse_data_format(opts->format);
    if (!format) throw make_error(ErrorKind::Usage, "--format: expected text or llmc-bin, found \"", opts->format, "\"");
    const auto snap = load_model_snapshot(posix_env(), opts->checkpoint,
                                          [](const std::string& why) { std::fprintf(stderr, "warning: %s\n", why.c_str()); });
    const auto tokens = load_tokens(opts->data, *format);
    check_vocab(tokens, snap.shape.vocab, opts->data);
    if (tokens.size() < static_cast<std::size_t>(snap.shape.seq_len) + 1)
      throw make_error(ErrorKind::Data, opts->data, ": ", tokens.size(), " tokens, fewer than one window of ",
                       snap.shape.seq_len + 1);
    Gpt<float> model(snap.shape);
    std::copy(snap.params.begin(), snap.params.end(), model.params().begin());
    const auto r = evaluate(model, tokens, opts->batch);
    std::printf("%s\n", nlohmann::json{{"loss", r.loss}, {"tokens", r.tokens}}.dump().c_str());
    return 0;
  };
}

}  // namespace meridian::cli
