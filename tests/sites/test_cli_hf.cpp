// The Hugging Face commands end to end, as a user runs them: `meridian import` writes a checkpoint
// and prints the [model] table that trains it, which `train` resumes and `init_from` starts from;
// `eval` reads the import; `export --dtype bf16`; a bad directory is exit 65 and writes nothing;
// `validate` holds init_from to the job's [model].
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/hf/hf_export.hpp"
#include "core/model/param_layout.hpp"
#include "core/util/rng.hpp"
#include "tests/support/run_meridian.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::run_meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = testing::source_dir() / "data/tinyshakespeare/input.txt";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A small Llama (the llama-small preset's family, smaller) written as a Hugging Face directory.
ModelConfig small_llama() {
  ModelConfig c{2, 4, 32, 16, 256, ModelFamily::Llama, 64};
  c.n_kv_head = 2;
  c.ffn_hidden = 48;
  c.tied = false;
  return c;
}

void write_hf(const fs::path& dir) {
  const ModelConfig c = small_llama();
  Rng rng(3);
  std::vector<float> params(ParamLayout::of(c).total());
  for (auto& p : params) p = static_cast<float>(rng.normal() * 0.05);
  export_hf(c, params, dir);
}

// A job whose [model] is `model_table`, training `steps` steps on the bundled corpus.
fs::path write_job(const TempDir& dir, const std::string& model_table, int steps) {
  const fs::path file = dir / "job.toml";
  std::ofstream(file) << "[job]\nname = \"hf\"\nseed = 7\n" << model_table << "[data]\npath = \"" << kCorpus.string()
                      << "\"\n[inner]\nlr = 1e-3\nbatch_per_replica = 2\nsteps = " << steps
                      << "\n[log]\nevery = 1\neval_every = 0\neval_windows = 4\n";
  return file;
}

}  // namespace

TEST_CASE("import prints the [model] table, train resumes the import, init_from starts from it, eval and export read it") {
  TempDir dir("cli-hf");
  write_hf(dir / "hf");
  const auto imported = run_meridian({"import", (dir / "hf").string(), "--out", (dir / "run").string(), "--seq-len", "16"});
  REQUIRE_MESSAGE(imported.exit_code == 0, imported.describe());
  CHECK(contains(imported.out, "llama: 2 layers, 4 heads (2 key/value), 32 channels, SwiGLU 48, context 16 of 64"));
  CHECK(fs::exists(dir / "run/checkpoints/ckpt-0000000000.mrdn"));
  const std::string out = imported.out;
  const std::string table = out.substr(out.find("[model]"));
  CHECK(contains(table, "init_from = \"" + (dir / "hf").string() + "\""));

  // The printed table, as is: a job that starts from the directory.
  const auto job = write_job(dir, table, 3);
  const auto from = run_meridian({"train", "--config", job.string(), "--set", "job.run_dir=\"" + (dir / "from").string() + "\""});
  REQUIRE_MESSAGE(from.exit_code == 0, from.describe());
  // Without init_from, in the import's run directory: it resumes the imported weights at step 0.
  const auto resumed = run_meridian({"train", "--config", job.string(), "--set", "job.run_dir=\"" + (dir / "run").string() + "\""});
  REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.describe());
  CHECK(contains(resumed.out, "at step 0"));
  CHECK(contains(resumed.out, "final val loss"));
  // Both started from the same weights and data: the same first step, the same result.
  const auto final_loss = [](const std::string& text) { return text.substr(text.rfind("final val loss")); };
  CHECK(final_loss(from.out) == final_loss(resumed.out));

  const auto eval = run_meridian({"eval", "--checkpoint", (dir / "run").string(), "--data", kCorpus.string()});
  REQUIRE_MESSAGE(eval.exit_code == 0, eval.describe());
  CHECK(contains(eval.out, "\"tokens\":"));
  const auto exported = run_meridian({"export", "--checkpoint", (dir / "run").string(), "--out", (dir / "bf16").string(), "--dtype", "bf16"});
  REQUIRE_MESSAGE(exported.exit_code == 0, exported.describe());
  for (const char* f : {"model.safetensors", "config.json", "generation_config.json"}) CHECK(fs::exists(dir / "bf16" / f));
  CHECK(run_meridian({"export", "--checkpoint", (dir / "run").string(), "--out", (dir / "x").string(), "--dtype", "f8"}).exit_code == 2);
}

TEST_CASE("import of a bad directory exits 65 naming the file and writes nothing, and validate holds init_from to [model]") {
  TempDir dir("cli-hf");
  write_hf(dir / "hf");
  std::ofstream(dir / "hf/config.json") << R"({"model_type": "t5"})";
  const auto bad = run_meridian({"import", (dir / "hf").string(), "--out", (dir / "run").string()});
  CHECK(bad.exit_code == 65);
  CHECK(contains(bad.err, (dir / "hf/config.json").string() + ": \"model_type\" is \"t5\""));
  CHECK_FALSE(fs::exists(dir / "run"));

  write_hf(dir / "hf");
  const auto job = write_job(dir, "[model]\npreset = \"llama-small\"\ninit_from = \"hf\"\n", 3);
  const auto refused = run_meridian({"validate", job.string()});
  CHECK(refused.exit_code == 78);
  CHECK(contains(refused.err, "holds a model whose n_layer is 2, not 4"));
}

TEST_CASE("validate prints each preset's parameter count, as its model publishes it") {
  TempDir dir("cli-hf");
  const std::pair<const char*, const char*> presets[] = {{"llama3.2-1b", "1,235,814,400"},
                                                         {"llama3-8b", "8,030,261,248"},
                                                         {"llama-debug", "6,163,712"},
                                                         {"llama-small", "803,968"},
                                                         {"gpt2", "124,439,808"}};
  for (const auto& [preset, count] : presets) {
    CAPTURE(preset);
    const auto job = write_job(dir, std::string("[model]\npreset = \"") + preset + "\"\n", 1);
    const auto r = run_meridian({"validate", job.string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
    CHECK(contains(r.out, std::string("# Model: ") + count + " parameters"));
  }
}
