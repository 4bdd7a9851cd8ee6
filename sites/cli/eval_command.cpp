#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/data/tokens.hpp"
#include "core/io/env.hpp"
#include "core/model/language_model.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"
#include "sites/cli/model_source.hpp"

namespace meridian::cli {

namespace {

// The logits of the first `windows` evaluation windows (their first seq_len tokens), as raw
// little-endian float32 (windows, seq_len, vocab): what a check in another framework compares.
void write_logits(LanguageModel<float>& model, const std::vector<std::int32_t>& tokens, int windows,
                  const std::string& path) {
  const int T = model.config().seq_len;
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(windows) * T);
  for (int w = 0; w < windows; ++w)
    std::copy_n(tokens.begin() + static_cast<std::ptrdiff_t>(w) * (T + 1), T, inputs.begin() + w * T);
  model.forward(inputs.data(), nullptr, windows);
  const auto logits = model.logits();
  auto file = posix_env().create(path);
  file->append(std::as_bytes(logits));
  file->sync();
  file->close();
}

}  // namespace

Action add_eval_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, data, format = "text", logits;
    int batch = 8, seq_len = 0;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--checkpoint", opts->checkpoint,
                 "checkpoint file, checkpoints/ directory, run directory or Hugging Face model directory")
      ->required();
  app.add_option("--data", opts->data, "data file to score")->required();
  app.add_option("--format", opts->format, "data format: text | llmc-bin")->capture_default_str();
  app.add_option("--batch", opts->batch, "windows per forward pass")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seq-len", opts->seq_len, "window length (default: the checkpoint's; a Hugging Face model's "
                 "context, at most 1024)")->check(CLI::PositiveNumber);
  app.add_option("--logits", opts->logits, "also write the logits of the first batch of windows to this file "
                 "(float32, [windows, seq_len, vocab])");
  return [opts] {
    const auto format = parse_data_format(opts->format);
    if (!format) throw make_error(ErrorKind::Usage, "--format: expected text or llmc-bin, found \"", opts->format, "\"");
    const ModelSnapshot snap = model_at(opts->checkpoint, opts->seq_len);
    const TokenFile tokens = load_token_file(opts->data, *format);
    check_vocab(tokens, snap.shape.vocab, opts->data);
    if (tokens.ids.size() < static_cast<std::size_t>(snap.shape.seq_len) + 1)
      throw make_error(ErrorKind::Data, opts->data, ": ", tokens.ids.size(), " tokens, fewer than one window of ",
                       snap.shape.seq_len + 1);
    const auto model = make_model<float>(snap.shape);
    std::copy(snap.params.begin(), snap.params.end(), model->params().begin());
    const auto r = evaluate(*model, tokens.ids, opts->batch);
    if (!opts->logits.empty())
      write_logits(*model, tokens.ids, static_cast<int>(std::min<std::size_t>(opts->batch, r.windows)), opts->logits);
    std::printf("%s\n", nlohmann::json{{"loss", r.loss}, {"tokens", r.tokens}}.dump().c_str());
    return 0;
  };
}

}  // namespace meridian::cli
