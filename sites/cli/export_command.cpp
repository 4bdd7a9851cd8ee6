#include <cstdio>
#include <string>

#include "core/hf/hf_export.hpp"
#include "core/io/env.hpp"
#include "core/train/train_checkpoint.hpp"
#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

namespace meridian::cli {

Action add_export_command(CLI::App& app) {
  struct Options {
    std::string checkpoint, out, dtype = "f32";
  };
  auto opts = std::make_shared<Options>();
  app.add_option("--checkpoint", opts->checkpoint, "checkpoint file, checkpoints/ directory or run directory")
      ->required();
  app.add_option("--out", opts->out, "output directory (model.safetensors, config.json, generation_config.json, the job's tokenizer)")
      ->required();
  app.add_option("--dtype", opts->dtype, "weights as f32 or bf16 (rounded to nearest even)")->capture_default_str();
  return [opts] {
    if (opts->dtype != "f32" && opts->dtype != "bf16")
      throw make_error(ErrorKind::Usage, "--dtype: expected f32 or bf16, found \"", opts->dtype, "\"");
    const auto snap = load_model_snapshot(posix_env(), opts->checkpoint,
                                          [](const std::string& why) { std::fprintf(stderr, "warning: %s\n", why.c_str()); });
    export_hf(snap.shape, snap.params, opts->out, opts->dtype == "bf16" ? HfDtype::BF16 : HfDtype::F32);
    if (snap.tokenizer) export_tokenizer(*snap.tokenizer, opts->out, snap.shape.positions());
    std::printf("exported %s (step %lld, %s) as %s to %s\n", snap.source.string().c_str(),
                static_cast<long long>(snap.step), describe(snap.shape).c_str(), opts->dtype.c_str(), opts->out.c_str());
    return 0;
  };
}

}  // namespace meridian::cli
