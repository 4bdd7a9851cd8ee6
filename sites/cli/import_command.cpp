// `meridian import HF_DIR --out RUN_DIR`: a Hugging Face model as a meridian checkpoint of weights
// (RUN_DIR/checkpoints/ckpt-0000000000.mrdn) that `eval`, `export` and training read; and the
// [model] table a job needs to train it (with init_from, or resuming in RUN_DIR).
#include <cstdio>
#include <string>

#include "core/checkpoint/store.hpp"
#include "core/config/job_config.hpp"
#include "core/hf/hf_import.hpp"
#include "core/io/env.hpp"
#include "core/model/param_layout.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_import_command(CLI::App& app) {
  struct Options {
    std::string from, out;
    int seq_len = 0;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("hf_dir", opts->from, "Hugging Face model directory (config.json, safetensors)")->required();
  app.add_option("--out", opts->out, "run directory to write the checkpoint into")->required();
  app.add_option("--seq-len", opts->seq_len, "training window of the imported shape (default: the model's "
                 "context, at most 1024)")->check(CLI::PositiveNumber);
  return [opts] {
    const std::filesystem::path from = std::filesystem::absolute(opts->from).lexically_normal();
    const HfModel model = read_hf_model(from, opts->seq_len);
    const std::string table = model_toml(model.config, {}, from);
    CheckpointStore store(posix_env(), std::filesystem::path(opts->out) / "checkpoints", 1);
    const auto path = store.save(0, encode_weights(model.config, model.params, "# imported from " + from.string() +
                                                                                    "\n" + table));
    std::printf("imported %s: %s, %s parameters\nwrote %s\n", from.string().c_str(), describe(model.config).c_str(),
                with_commas(ParamLayout::of(model.config).total()).c_str(), path.string().c_str());
    std::printf("a job trains it with this table (or resumes in %s with the same shape):\n%s", opts->out.c_str(),
                table.c_str());
    return 0;
  };
}

}  // namespace meridian::cli
