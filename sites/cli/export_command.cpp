#include <cstdio>
#include <string>

#include "core/export/export.hpp"
#include "core/io/env.hpp"
#include "core/train/train_checkpoint.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_export_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, out;
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--checkpoint", opts->checkpoint, "checkpoint file, checkpoints/ directory or run directory")
      ->required();
  app.add_option("--out", opts->out, "output directory (model.safetensors + config.json)")->required();
  return [opts] {
    const auto snap = load_model_snapshot(posix_env(), opts->checkpoint,
                                          [](const std::string& why) { std::fprintf(stderr, "warning: %s\n", why.c_str()); });
    export_hf_gpt2(snap.shape, snap.params, opts->out);
    std::printf("exported %s (step %lld, %s) to %s\n", snap.source.string().c_str(),
                static_cast<long long>(snap.step), describe(snap.shape).c_str(), opts->out.c_str());
    return 0;
  };
}

}  // namespace meridian::cli
