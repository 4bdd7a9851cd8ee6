#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "core/config/job_config.hpp"
#include "core/config/outer_defaults.hpp"
#include "core/config/wan_profiles.hpp"
#include "core/util/error.hpp"
#include "crosssite/codec/codec.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
  return file;
}

JobConfig load_ok(const fs::path& file, const std::vector<std::string>& overrides = {}) {
  auto result = try_load_job_config(file, overrides);
  if (auto* problems = std::get_if<std::vector<ConfigProblem>>(&result)) {
    for (const auto& p : *problems) MESSAGE(p.to_string());
    FAIL("expected the config to load");
  }
  return std::get<JobConfig>(result);
}

std::vector<std::string> problems_of(const fs::path& file, const std::vector<std::string>& overrides = {}) {
  auto result = try_load_job_config(file, overrides);
  REQUIRE_MESSAGE(std::holds_alternative<std::vector<ConfigProblem>>(result), "expected problems");
  std::vector<std::string> lines;
  for (const auto& p : std::get<std::vector<ConfigProblem>>(result)) lines.push_back(p.to_string());
  return lines;
}

// The single problem of a job with the given extra body, as text.
std::string only_problem(const TempDir& dir, const std::string& body, const std::vector<std::string>& overrides = {}) {
  const auto lines = problems_of(write(dir / "job.toml", body), overrides);
  REQUIRE_MESSAGE(lines.size() == 1, [&] {
    std::string all;
    for (const auto& l : lines) all += l + "\n";
    return all;
  }());
  return lines[0];
}

const std::string kData = "[data]\npath = \"corpus.txt\"\n";

}  // namespace

TEST_CASE("defaults and the default preset") {
  TempDir dir("config");
  const auto file = write(dir / "job.toml", kData);
  const JobConfig c = load_ok(file);
  CHECK(c.job.name == "meridian");
  CHECK(c.job.run_dir == (fs::current_path() / "runs" / "meridian").lexically_normal());
  CHECK(c.job.seed == 1337);
  CHECK(c.model_preset == "small");
  CHECK(c.model == *find_model_preset("small"));
  CHECK(c.data.sources.at(0).path == (dir.path() / "corpus.txt").lexically_normal());
  CHECK(c.data.format == JobConfig::Data::Format::Text);
  CHECK(c.data.val_fraction == 0.1);
  CHECK(!c.data.val_path);
  CHECK(c.inner.optimizer == JobConfig::Inner::Optimizer::AdamW);
  CHECK(c.inner.lr == 1e-3);
  CHECK(c.inner.min_lr_ratio == 0.1);
  CHECK(c.inner.warmup_steps == 0);
  CHECK(c.inner.schedule == JobConfig::Inner::Schedule::Cosine);
  CHECK(c.inner.batch_per_replica == 8);
  CHECK(c.inner.grad_accum == 1);
  CHECK(c.inner.steps == 1000);
  CHECK(c.inner.clip == 1.0);
  CHECK(c.inner.weight_decay == 0.1);
  CHECK(c.inner.beta1 == 0.9);
  CHECK(c.inner.beta2 == 0.95);
  CHECK(c.inner.eps == 1e-8);
  CHECK(c.log.every == 10);
  CHECK(c.log.eval_every == 100);
  CHECK(c.log.eval_windows == 64);
  CHECK(c.checkpoint.every == 0);
  CHECK(c.checkpoint.keep == 3);
  CHECK(c.guard.enabled);
  CHECK(c.guard.window == 50);
  CHECK(c.guard.min_history == 20);
  CHECK(c.guard.loss_z == 6.0);
  CHECK(c.guard.min_rel_std == 0.01);
  CHECK(c.guard.grad_norm_ratio == 10.0);
  CHECK(c.guard.snapshot_every == 50);
  CHECK(c.guard.lr_factor == 0.5);
  CHECK(c.guard.max_attempts == 3);
  CHECK(c.guard.inject_lr_step == -1);
  CHECK_FALSE(c.guard.across_sites);
  CHECK(c.guard.loss_scale_floor_factor == 4.0);
  CHECK(c.guard.loss_scale_halvings == 8);
  CHECK(c.guard.inject_lr_steps == 1);
  CHECK(c.guard.inject_lr_factor == 1.0);
  CHECK(c.ops.metrics);
  CHECK(c.ops.metrics_address == "127.0.0.1");
  CHECK(c.ops.metrics_port == 0);
  CHECK(c.ops.port == 0);
  CHECK_FALSE(c.ops.token_file.has_value());
  CHECK(c.source == fs::absolute(file).lexically_normal());
}

TEST_CASE("a preset gives the shape and explicit keys override it") {
  TempDir dir("config");
  const JobConfig tiny = load_ok(write(dir / "a.toml", kData + "[model]\npreset = \"tiny\"\n"));
  CHECK(tiny.model_preset == "tiny");
  CHECK(tiny.model == *find_model_preset("tiny"));

  const JobConfig custom =
      load_ok(write(dir / "b.toml", kData + "[model]\npreset = \"tiny\"\nn_layer = 3\nd_model = 48\nvocab = 512\n"));
  ModelConfig expected = *find_model_preset("tiny");
  expected.n_layer = 3;
  expected.d_model = 48;
  expected.vocab = 512;
  CHECK(custom.model == expected);
}

TEST_CASE("include chains deep-merge and resolve paths against their own file") {
  TempDir dir("config");
  write(dir / "shared/base.toml",
        "[job]\nname = \"base\"\nseed = 7\n"
        "[data]\npath = \"../data/train.txt\"\nformat = \"llmc-bin\"\n"
        "[inner]\nlr = 0.002\nsteps = 50\n");
  write(dir / "shared/mid.toml",
        "include = \"base.toml\"\n"
        "[inner]\nsteps = 60\nschedule = \"linear\"\n");
  const auto top = write(dir / "jobs/top.toml",
                         "include = \"../shared/mid.toml\"\n"
                         "[job]\nname = \"top\"\nrun_dir = \"out\"\n"
                         "[data]\nval_path = \"val.txt\"\n");
  const JobConfig c = load_ok(top);
  CHECK(c.job.name == "top");
  CHECK(c.job.seed == 7);
  CHECK(c.job.run_dir == dir.path() / "jobs" / "out");
  CHECK(c.data.sources.at(0).path == dir.path() / "data" / "train.txt");
  CHECK(c.data.val_path == dir.path() / "jobs" / "val.txt");
  CHECK(c.data.format == JobConfig::Data::Format::LlmcBin);
  CHECK(c.inner.lr == 0.002);
  CHECK(c.inner.steps == 60);
  CHECK(c.inner.schedule == JobConfig::Inner::Schedule::Linear);
}

TEST_CASE("an include cycle is a problem, not a hang") {
  TempDir dir("config");
  write(dir / "a.toml", "include = \"b.toml\"\n" + kData);
  write(dir / "b.toml", "\n\ninclude = \"a.toml\"\n");
  const auto lines = problems_of(dir / "a.toml");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("b.toml:3: include: include cycle:") != std::string::npos);
  CHECK(lines[0].find("a.toml -> ") != std::string::npos);

  write(dir / "self.toml", "include = \"self.toml\"\n");
  CHECK(problems_of(dir / "self.toml").at(0).find("include cycle") != std::string::npos);
}

TEST_CASE("a missing include names the include line") {
  TempDir dir("config");
  const auto file = write(dir / "job.toml", "include = \"nope.toml\"\n" + kData);
  const auto lines = problems_of(file);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("job.toml:1: include: cannot read") != std::string::npos);
  CHECK(lines[0].find("nope.toml") != std::string::npos);
}

TEST_CASE("--set overrides numbers, strings and paths, and rejects unknown keys") {
  TempDir dir("config");
  const auto file = write(dir / "job.toml", kData + "[inner]\nlr = 0.5\n");
  const JobConfig c = load_ok(file, {"inner.lr=3e-3", "inner.steps = 20", "job.name=\"run-1\"", "data.path=foo.txt",
                                     "inner.schedule=constant", "model.preset=tiny"});
  CHECK(c.inner.lr == 3e-3);
  CHECK(c.inner.steps == 20);
  CHECK(c.job.name == "run-1");
  CHECK(c.data.sources.at(0).path == (fs::current_path() / "foo.txt").lexically_normal());
  CHECK(c.inner.schedule == JobConfig::Inner::Schedule::Constant);
  CHECK(c.model == *find_model_preset("tiny"));

  CHECK(only_problem(dir, kData, {"inner.steps=abc"}) ==
        "--set inner.steps=abc: inner.steps: expected an integer >= 1, found string \"abc\"");
  CHECK(only_problem(dir, kData, {"inner.lrr=1"}) == "--set inner.lrr=1: inner.lrr: unknown key (did you mean lr?)");
  CHECK(only_problem(dir, kData, {"inner.lr"}).find("expected key=value") != std::string::npos);
  const auto both = problems_of(write(dir / "both.toml", kData + "[log]\nevery = 0\n"), {"bad", "log.keep=1"});
  REQUIRE(both.size() == 3);  // file problems first, then the values set by --set, then malformed --set
  CHECK(both[0].find("both.toml:4: log.every") != std::string::npos);
  CHECK(both[1] == "--set log.keep=1: log.keep: unknown key");
  CHECK(both[2].starts_with("--set bad: expected key=value"));
  CHECK(only_problem(dir, kData, {"include=x.toml"}).find("only be given in a job file") != std::string::npos);
}

TEST_CASE("--set reaches the asynchronous [outer] keys") {
  TempDir dir("config");
  const auto file = write(dir / "job.toml", kData + "[outer]\noverlap = true\n");
  const JobConfig c =
      load_ok(file, {"outer.overlap=false", "outer.staleness=constant", "outer.delayed_nesterov=5",
                     "outer.deadline_k=4", "outer.max_norm_ratio=1e3", "outer.dynamic_inner_steps=true",
                     "outer.algorithm=streaming", "outer.fragments=2", "control.lease_ttl_s=10",
                     "control.keepalive_ms=2000", "control.end_unreachable_s=0", "outer.partial_commit=averaged"});
  CHECK_FALSE(c.outer.overlap);
  CHECK(c.outer.partial_commit == JobConfig::Outer::PartialCommit::Averaged);
  CHECK(JobConfig{}.outer.partial_commit == JobConfig::Outer::PartialCommit::Scaled);
  CHECK(c.outer.staleness == JobConfig::Outer::Staleness::Constant);
  CHECK(c.outer.delayed_nesterov == 5);
  CHECK(c.outer.deadline_k == 4.0);
  CHECK(c.outer.max_norm_ratio == 1000.0);
  CHECK(c.outer.dynamic_inner_steps);
  CHECK(c.outer.fragments == 2);
  CHECK((c.control.lease_ttl_s == 10 && c.control.keepalive_ms == 2000 && c.control.end_unreachable_s == 0));
  CHECK(only_problem(dir, kData, {"outer.max_norm_ratio=0.5"}) ==
        "--set outer.max_norm_ratio=0.5: outer.max_norm_ratio: expected a number > 1, found 0.5");
  CHECK(only_problem(dir, kData, {"outer.partial_commit=full"}) ==
        "--set outer.partial_commit=full: outer.partial_commit: expected one of \"scaled\", \"averaged\", found \"full\"");
  CHECK(only_problem(dir, kData, {"outer.fragmets=2"}) ==
        "--set outer.fragmets=2: outer.fragmets: unknown key (did you mean fragments?)");
}

TEST_CASE("unknown tables and keys, with suggestions") {
  TempDir dir("config");
  CHECK(only_problem(dir, kData + "[model]\nn_layr = 2\n") == (dir / "job.toml").string() +
                                                                  ":4: model.n_layr: unknown key (did you mean n_layer?)");
  CHECK(only_problem(dir, kData + "\n[inne]\nlr = 1.0\n").find("job.toml:4: inne: unknown table (did you mean inner?)") !=
        std::string::npos);
  CHECK(only_problem(dir, kData + "[inner]\nzzz = 1\n") == (dir / "job.toml").string() + ":4: inner.zzz: unknown key");
  CHECK(only_problem(dir, kData + "[foo]\n").ends_with("foo: unknown table"));  // "job" is too far to suggest
  CHECK(only_problem(dir, kData + "[inner]\nstpes = 1\n").ends_with("inner.stpes: unknown key (did you mean steps?)"));
  CHECK(only_problem(dir, "steps = 3\n" + kData).find("job.toml:1: steps: unknown key") != std::string::npos);
  CHECK(only_problem(dir, "inner = 3\n" + kData).find("job.toml:1: inner: expected a table, found integer 3") !=
        std::string::npos);
  CHECK(only_problem(dir, kData + "[inner.lr]\nx = 1\n").find("job.toml:3: inner.lr: expected a number > 0, found a table") !=
        std::string::npos);
}

TEST_CASE("every rule names file:line, the key, what was expected and what was found") {
  TempDir dir("config");
  const std::string name_rule =
      "expected a name of 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or '-' (it names the run "
      "directory's default, the job's etcd keys and role)";
  struct Case {
    std::string body, expected;
  };
  const std::vector<Case> cases = {
      {"[job]\nname = \"\"\n", ":2: job.name: " + name_rule + ", found an empty string"},
      {"[job]\nname = 3\n", ":2: job.name: " + name_rule + ", found integer 3"},
      {"[job]\nname = \"../up\"\n", ":2: job.name: " + name_rule + ", found \"../up\""},
      {"[job]\nname = \"-x\"\n", ":2: job.name: " + name_rule + ", found \"-x\""},
      {"[job]\nname = \"" + std::string(65, 'j') + "\"\n",
       ":2: job.name: " + name_rule + ", found \"" + std::string(65, 'j') + "\""},
      {"[job]\nrun_dir = true\n", ":2: job.run_dir: expected a non-empty string (a file path), found boolean true"},
      {"[job]\nseed = -1\n", ":2: job.seed: expected an integer >= 0, found -1"},
      {"[model]\npreset = \"huge\"\n",
       ":2: model.preset: expected one of \"tiny\", \"small\", \"medium\", \"gpt2\", "
       "\"gpt2-medium\", \"llama-small\", \"llama-debug\", \"llama3.2-1b\", "
       "\"llama3-8b\", found \"huge\""},
      {"[model]\nn_layer = 2.5\n", ":2: model.n_layer: expected an integer, found float 2.5"},
      {"[model]\nn_layer = 0\n", ":2: model.n_layer: n_layer must be at least 1, found 0"},
      {"[model]\nvocab = 3000000000\n", ":2: model.vocab: expected an integer <= 2147483647, found 3000000000"},
      {"[model]\nfamily = \"t5\"\n", ":2: model.family: expected one of \"gpt2\", \"llama\", found \"t5\""},
      {"[model]\npreset = \"llama-small\"\nfamily = \"gpt2\"\n",
       ":3: model.family: the preset \"llama-small\" is a llama model, not gpt2"},
      {"[model]\nfamily = \"llama\"\nn_kv_head = 3\n", ":3: model.n_kv_head: n_kv_head (3) must divide n_head (4)"},
      {"[model]\nfamily = \"llama\"\nd_model = 132\nn_head = 4\n",
       ":3: model.d_model: d_model (132) / n_head (4) must be even: rotary embeddings turn pairs of channels"},
      {"[model]\nn_kv_head = 2\n", ":2: model.n_kv_head: n_kv_head applies to family = \"llama\" only"},
      {"[model]\nrope_theta = 500000\n", ":2: model.rope_theta: rope_theta applies to family = \"llama\" only"},
      {"[model]\ntied = false\n", ":2: model.tied: tied must be true for family = \"gpt2\""},
      {"[model]\nseq_len = 128\ncontext = 64\n",
       ":2: model.seq_len: seq_len (128) must be at most the model's context (64)"},
      {"[model]\nfamily = \"llama\"\nrope_scaling = \"llama3\"\nrope_low_freq_factor = 4\nrope_high_freq_factor = 1\n",
       ":3: model.rope_scaling: rope_scaling = \"llama3\" needs rope_factor > 0, 0 < rope_low_freq_factor"},
      {"[model]\nfamily = \"llama\"\nrope_factor = 8\n",
       ":3: model.rope_factor: applies with rope_scaling = \"llama3\" only"},
      {"[model]\nrope_scaling = \"yarn\"\n",
       ":2: model.rope_scaling: expected one of \"none\", \"llama3\", found \"yarn\""},
      {"[data]\nformat = \"csv\"\npath = \"c.txt\"\n",
       ":2: data.format: expected one of \"text\", \"llmc-bin\", found \"csv\""},
      {"[data]\nval_fraction = 1\npath = \"c.txt\"\n", ":2: data.val_fraction: expected a number in (0, 1), found 1"},
      {"[data]\nval_fraction = 0.0\npath = \"c.txt\"\n", ":2: data.val_fraction: expected a number in (0, 1), found 0"},
      {"[data]\nval_path = 5\npath = \"c.txt\"\n",
       ":2: data.val_path: expected a non-empty string (a file path), found integer 5"},
      {"[inner]\noptimizer = \"lamb\"\n",
       ":2: inner.optimizer: expected one of \"adamw\", \"sgd\", \"muon\", found \"lamb\""},
      {"[inner]\nlr = -0.5\n", ":2: inner.lr: expected a number > 0, found -0.5"},
      {"[inner]\nlr = nan\n", ":2: inner.lr: expected a number > 0, found nan"},
      {"[inner]\nlr = \"fast\"\n", ":2: inner.lr: expected a number > 0, found string \"fast\""},
      {"[inner]\nmin_lr_ratio = 1.5\n", ":2: inner.min_lr_ratio: expected a number in [0, 1], found 1.5"},
      {"[inner]\nwarmup_steps = -1\n", ":2: inner.warmup_steps: expected an integer >= 0, found -1"},
      {"[inner]\nschedule = \"step\"\n",
       ":2: inner.schedule: expected one of \"cosine\", \"linear\", \"constant\", \"wsd\", found \"step\""},
      {"[inner]\nbatch_per_replica = 0\n", ":2: inner.batch_per_replica: expected an integer >= 1, found 0"},
      {"[inner]\ngrad_accum = 0\n", ":2: inner.grad_accum: expected an integer >= 1, found 0"},
      {"[inner]\nsteps = 0\n", ":2: inner.steps: expected an integer >= 1, found 0"},
      {"[inner]\nsteps = 1e3\n", ":2: inner.steps: expected an integer >= 1, found float 1000"},
      {"[inner]\nsteps = 9999999999\n", ":2: inner.steps: expected an integer <= 2147483647, found 9999999999"},
      {"[inner]\nclip = -1\n", ":2: inner.clip: expected a number >= 0, found -1"},
      {"[inner]\nweight_decay = -0.1\n", ":2: inner.weight_decay: expected a number >= 0, found -0.1"},
      {"[inner]\nbeta1 = 1.0\n", ":2: inner.beta1: expected a number in [0, 1), found 1"},
      {"[inner]\nbeta2 = -0.1\n", ":2: inner.beta2: expected a number in [0, 1), found -0.1"},
      {"[inner]\neps = 0\n", ":2: inner.eps: expected a number > 0, found 0"},
      {"[log]\nevery = 0\n", ":2: log.every: expected an integer >= 1, found 0"},
      {"[log]\neval_every = -1\n", ":2: log.eval_every: expected an integer >= 0, found -1"},
      {"[log]\neval_windows = 0\n", ":2: log.eval_windows: expected an integer >= 1, found 0"},
      {"[checkpoint]\nevery = -5\n", ":2: checkpoint.every: expected an integer >= 0, found -5"},
      {"[checkpoint]\nkeep = 0\n", ":2: checkpoint.keep: expected an integer >= 1, found 0"},
      {"[ops]\nmetrics_port = 70000\n", ":2: ops.metrics_port: expected an integer <= 65535, found 70000"},
      {"[ops]\nmetrics_address = \"\"\n",
       ":2: ops.metrics_address: expected a non-empty string, found an empty string"},
      {"[guard]\nenabled = 1\n", ":2: guard.enabled: expected true or false, found integer 1"},
      {"[guard]\nwindow = 1\n", ":2: guard.window: expected an integer >= 2, found 1"},
      {"[guard]\nmin_history = 60\n", ":2: guard.min_history: expected at most guard.window = 50, found 60"},
      {"[guard]\nwindow = 10\n", ":2: guard.min_history: expected at most guard.window = 10, found 20"},
      {"[guard]\nloss_z = 0\n", ":2: guard.loss_z: expected a number > 0, found 0"},
      {"[guard]\nmin_rel_std = -1\n", ":2: guard.min_rel_std: expected a number >= 0, found -1"},
      {"[guard]\ngrad_norm_ratio = 1\n", ":2: guard.grad_norm_ratio: expected a number > 1, found 1"},
      {"[guard]\nsnapshot_every = 0\n", ":2: guard.snapshot_every: expected an integer >= 1, found 0"},
      {"[guard]\nlr_factor = 1.5\n", ":2: guard.lr_factor: expected a number in (0, 1], found 1.5"},
      {"[guard]\nmax_attempts = -1\n", ":2: guard.max_attempts: expected an integer >= 0, found -1"},
      {"[guard]\ninject_lr_step = -2\n", ":2: guard.inject_lr_step: expected an integer >= -1, found -2"},
      {"[guard]\ninject_lr_factor = 0\n", ":2: guard.inject_lr_factor: expected a number > 0, found 0"},
      {"[guard]\ninject_lr_steps = 0\n", ":2: guard.inject_lr_steps: expected an integer >= 1, found 0"},
      {"[guard]\nloss_scale_floor_factor = 0.5\n",
       ":2: guard.loss_scale_floor_factor: expected a number >= 1, found 0.5"},
      {"[guard]\nloss_scale_halvings = 0\n", ":2: guard.loss_scale_halvings: expected an integer >= 1, found 0"},
      {"[guard]\nloss_scale_halvings = 60\n",
       ":2: guard.loss_scale_halvings: expected at most guard.window = 50, found 60"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    const bool has_data = c.body.starts_with("[data]");
    const std::string problem = only_problem(dir, has_data ? c.body : c.body + kData);
    CHECK(problem.starts_with((dir / "job.toml").string() + c.expected));
  }
}

TEST_CASE("edge values on the right side of each bound load") {
  TempDir dir("config");
  const JobConfig c = load_ok(write(dir / "job.toml", kData +
                                                          "val_fraction = 0.999\n"
                                                          "[job]\nseed = 0\n"
                                                          "[inner]\nlr = 1\nmin_lr_ratio = 0\nclip = 0\nbeta1 = 0\n"
                                                          "[log]\neval_every = 0\n"));
  CHECK(c.inner.lr == 1.0);  // an integer where a float is expected
  CHECK(c.inner.clip == 0.0);
  CHECK(c.job.seed == 0);
  CHECK(c.data.val_fraction == 0.999);
}

TEST_CASE("a missing data.path is reported at its table, or at line 1") {
  TempDir dir("config");
  CHECK(only_problem(dir, "[job]\nname = \"x\"\n\n[data]\nformat = \"text\"\n") ==
        (dir / "job.toml").string() + ":4: data.path: missing required key (expected a string: the training data (a file, a directory or a glob), "
                                                  "or [[data.source]] entries)");
  CHECK(only_problem(dir, "[job]\nname = \"x\"\n").starts_with((dir / "job.toml").string() + ":1: data.path: missing"));
}

TEST_CASE("[[data.source]] entries: paths against the file's directory, weights > 0, never beside data.path") {
  TempDir dir("config");
  const std::string sources =
      "[job]\nname = \"x\"\n\n[data]\nformat = \"llmc-bin\"\ntokenizer = \"tok/tokenizer.json\"\n\n"
      "[[data.source]]\npath = \"web/train_*.bin\"\nweight = 3\n\n[[data.source]]\npath = \"code\"\n";
  std::ofstream(dir / "job.toml") << sources;
  const JobConfig c = load_job_config(dir / "job.toml");
  REQUIRE(c.data.sources.size() == 2);
  CHECK(c.data.sources[0].path == dir.path() / "web" / "train_*.bin");
  CHECK(c.data.sources[0].weight == 3);
  CHECK(c.data.sources[1].path == dir.path() / "code");
  CHECK(c.data.sources[1].weight == 1);
  CHECK(c.data.tokenizer == dir.path() / "tok" / "tokenizer.json");
  std::ofstream(dir / "again.toml") << to_toml(c);
  CHECK(load_job_config(dir / "again.toml").data == c.data);

  CHECK(only_problem(dir, sources + "weight = 0\n") ==
        (dir / "job.toml").string() + ":14: data.source[1].weight: expected a number > 0, found 0");
  CHECK(only_problem(dir, "[job]\nname = \"x\"\n\n[data]\npath = \"a.txt\"\n\n[[data.source]]\npath = \"b\"\n") ==
        (dir / "job.toml").string() + ":5: data.path: expected either data.path or [[data.source]] entries, found both");
  CHECK(only_problem(dir, "[job]\nname = \"x\"\n\n[[data.source]]\nweight = 2\n").find(
            "data.source[0].path: missing required key") != std::string::npos);
}

TEST_CASE("d_model not divisible by n_head") {
  TempDir dir("config");
  CHECK(only_problem(dir, kData + "[model]\nn_head = 3\nd_model = 100\n") ==
        (dir / "job.toml").string() + ":5: model.d_model: d_model (100) must be divisible by n_head (3)");
}

TEST_CASE("every problem is listed, in file order, and load_job_config throws them all") {
  TempDir dir("config");
  const auto file = write(dir / "job.toml", "[inner]\nlr = 0\nsteps = 0\n[log]\nevery = 0\n");
  const auto lines = problems_of(file);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].find(":1: data.path: missing") != std::string::npos);
  CHECK(lines[1].find(":2: inner.lr") != std::string::npos);
  CHECK(lines[2].find(":3: inner.steps") != std::string::npos);
  CHECK(lines[3].find(":5: log.every") != std::string::npos);
  try {
    load_job_config(file);
    FAIL("load_job_config did not throw");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Config);
    CHECK(std::string(e.what()) == lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n" + lines[3]);
  }
}

TEST_CASE("missing, unreadable and malformed files are problems") {
  TempDir dir("config");
  const auto missing = problems_of(dir / "nope.toml");
  REQUIRE(missing.size() == 1);
  CHECK(missing[0] == (dir / "nope.toml").string() + ": cannot read the job file: no such file");

  fs::create_directories(dir / "folder.toml");
  CHECK(problems_of(dir / "folder.toml").at(0).find("is a directory") != std::string::npos);

  const auto bad = problems_of(write(dir / "bad.toml", kData + "[inner]\nlr = = 3\n"));
  REQUIRE(bad.size() == 1);
  CHECK(bad[0].starts_with((dir / "bad.toml").string() + ":4: TOML syntax error:"));
  CHECK_THROWS_AS(load_job_config(dir / "bad.toml"), Error);
}

TEST_CASE("to_toml round-trips to an equal config") {
  TempDir dir("config");
  const auto file =
      write(dir / "job.toml", kData +
                                  "val_path = \"v \\\"q\\\"\\ttab\\\\.txt\"\n"
                                  "[job]\nname = \"round-trip\"\nseed = 99\ninsecure = true\n"
                                  "[model]\npreset = \"tiny\"\nn_layer = 3\n"
                                  "[inner]\nlr = 0.0003\neps = 1e-10\nbeta2 = 0.999\nschedule = \"linear\"\n"
                                  "clip = 1\nsteps = 12345\n"
                                  "[checkpoint]\nevery = 100\n"
                                  "[log]\nsample_every = 9\nsample_prompt = \"a \\\"b\\\"\\n\"\n"
                                  "[launch]\nmax_site_restarts = 7\nrestart_backoff_ms = 50\n"
                                  "[guard]\nenabled = false\nwindow = 30\nloss_z = 4.5\n"
                                  "lr_factor = 0.25\ninject_lr_step = 7\ninject_lr_factor = 100\n"
                                  "[ops]\nmetrics = false\nmetrics_address = \"0.0.0.0\"\nmetrics_port = 9400\n"
                                  "port = 9500\n"
                                  "[outer]\nalgorithm = \"streaming\"\nlr = 1\noverlap = false\n"
                                  "staleness = \"constant\"\ndelayed_nesterov = 3\ndeadline_k = 1.5\n"
                                  "max_norm_ratio = 50.5\ndynamic_inner_steps = true\nfragments = 4\n[control]\n"
                                  "endpoints = [\"http://a:2379\", \"http://b:2379\"]\n"
                                  "[[site]]\nname = \"a\"\nport = 7000\n[[site]]\nname = \"b\"\n"
                                  "device = \"cuda\"\nspeed = 2.5\nprecision = \"bf16\"\nattention = "
                                  "\"tiled\"\n[wan]\nprofile = \"transatlantic\"\n"
                                  "loss = 0.01\n[[wan.link]]\nsites = [\"b\", \"a\"]\njitter = \"pareto\"\n"
                                  "[[wan.fault]]\nkind = \"partition\"\nsites = [\"b\"]\nfrom_s = 1\nto_s = 2.5\n"
                                  "[[wan.fault]]\nkind = \"latency\"\nsites = [\"a\", \"b\"]\npair = true\n"
                                  "from_s = 0\nto_s = 9\nlatency_ms = 200\n");
  const JobConfig original = load_ok(file);
  CHECK(original.sites.size() == 2);
  CHECK((original.wan.links.size() == 1 && original.wan.faults.size() == 2));
  CHECK(original.job.name == "round-trip");
  CHECK(original.data.val_path->filename() == "v \"q\"\ttab\\.txt");
  CHECK(original.job.insecure);
  CHECK(original.log.sample_prompt == "a \"b\"\n");
  const auto copy = write(dir / "elsewhere/resolved.toml", to_toml(original));
  JobConfig again = load_ok(copy);
  CHECK(again.source == fs::absolute(copy).lexically_normal());
  again.source = original.source;
  again.derived = original.derived;  // written out as settings: read back, they are the file's own
  CHECK(again == original);
  CHECK(again.data.val_path == dir.path() / "v \"q\"\ttab\\.txt");

  JobConfig changed = original;
  changed.inner.eps = 2e-10;
  CHECK_FALSE(changed == original);

  // The ops token is a secret: a job file names the file that holds it, and never holds it itself,
  // not even through --set (which `ps` would show on every process the job starts).
  const JobConfig with_file = load_ok(write(dir / "token.toml", kData + "[ops]\ntoken_file = \"secrets/ops.token\"\n"));
  CHECK(with_file.ops.token_file == dir.path() / "secrets/ops.token");
  CHECK(to_toml(with_file).find("token_file = ") != std::string::npos);
  std::string problem = only_problem(dir, kData + "[ops]\ntoken = \"abc\"\n");
  CHECK(problem.find("job.toml:4") != std::string::npos);
  CHECK(problem.find("ops.token: a secret does not belong in a job file") != std::string::npos);
  problem = only_problem(dir, kData, {"ops.token=abc"});
  CHECK(problem.find("--set") != std::string::npos);
  CHECK(problem.find("token_file") != std::string::npos);
}

TEST_CASE("[replicas]: defaults, values, and errors with file:line") {
  meridian::testing::TempDir dir("cfg-replicas");
  std::ofstream(dir / "d.txt") << "data";
  std::ofstream(dir / "ok.toml") << "[data]\npath = \"d.txt\"\n[replicas]\ncount = 3\nrestart = false\n"
                                    "on_failure = \"scale\"\nsdc_every = 10\nstore_port = 29500\n";
  const auto c = load_job_config(dir / "ok.toml");
  CHECK(c.replicas.count == 3);
  CHECK_FALSE(c.replicas.restart);
  CHECK(c.replicas.on_failure == JobConfig::Replicas::OnFailure::Scale);
  CHECK(c.replicas.sdc_every == 10);
  CHECK(c.replicas.store_port == 29500);
  CHECK(load_job_config(dir / "ok.toml", {"replicas.count=1"}).replicas.count == 1);

  std::ofstream(dir / "bad.toml") << "[data]\npath = \"d.txt\"\n[replicas]\ncount = 0\nrestart = 1\n"
                                     "on_failure = \"retry\"\nstore_port = 70000\n";
  const auto r = try_load_job_config(dir / "bad.toml");
  REQUIRE(std::holds_alternative<std::vector<ConfigProblem>>(r));
  std::string all;
  for (const auto& p : std::get<std::vector<ConfigProblem>>(r)) all += p.to_string() + "\n";
  CHECK(all.find("bad.toml:4: replicas.count: expected an integer >= 1, found 0") != std::string::npos);
  CHECK(all.find("bad.toml:5: replicas.restart: expected true or false, found") != std::string::npos);
  CHECK(all.find("bad.toml:6: replicas.on_failure: expected one of \"keep_batch\", \"scale\"") != std::string::npos);
  CHECK(all.find("bad.toml:7: replicas.store_port: expected an integer <= 65535, found 70000") != std::string::npos);
}

TEST_CASE("[parallel] zero_stage: 0 by default, 1 to 3 on CPU AdamW sites, refused beside what cannot work, naming both") {
  TempDir dir("cfg-parallel");
  CHECK(load_ok(write(dir / "job.toml", kData)).parallel.zero_stage == 0);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 1\n")).parallel.zero_stage == 1);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 2\n")).parallel.zero_stage == 2);
  CHECK(load_ok(write(dir / "job.toml", kData + "[checkpoint]\nper_replica = true\n[parallel]\nzero_stage = 1\n"))
            .checkpoint.per_replica);
  CHECK(only_problem(dir, kData + "[checkpoint]\nper_replica = true\n").find(
            "job.toml:4: checkpoint.per_replica: per_replica = true writes each replica's part of a sharded optimizer "
            "state, and parallel.zero_stage (its default) is 0") != std::string::npos);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 3\n")).parallel.zero_stage == 3);
  CHECK(only_problem(dir, kData + "[parallel]\nzero_stage = 4\n").find(
            "job.toml:4: parallel.zero_stage: expected 0, 1, 2 or 3, found 4") != std::string::npos);
  CHECK(only_problem(dir, kData + "[inner]\noptimizer = \"muon\"\n[parallel]\nzero_stage = 2\n").find(
            "zero_stage = 2 shards AdamW's moments") != std::string::npos);
  CHECK(only_problem(dir, kData + "[parallel]\nzero_stage = -1\n").find(
            "parallel.zero_stage: expected an integer >= 0, found -1") != std::string::npos);
  const auto muon = only_problem(dir, kData + "[inner]\noptimizer = \"muon\"\n[parallel]\nzero_stage = 1\n");
  CHECK(muon.find("job.toml:6: parallel.zero_stage: zero_stage = 1 shards AdamW's moments, and inner.optimizer "
                  "(line 4) is \"muon\"") != std::string::npos);
  const auto overlap = only_problem(dir, kData + "[replicas]\noverlap_allreduce = true\n[parallel]\nzero_stage = 1\n");
  CHECK(overlap.find("parallel.zero_stage:") != std::string::npos);
  CHECK(overlap.find("replicas.overlap_allreduce (line 4)") != std::string::npos);
  const std::string two_sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  const auto sync = only_problem(dir, kData + "[outer]\nalgorithm = \"sync\"\n" + two_sites + "[parallel]\nzero_stage = 1\n");
  CHECK(sync.find("outer.algorithm (line 4) = \"sync\"") != std::string::npos);
  CHECK(load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 1\n")).parallel.zero_stage == 1);
  const auto cuda = only_problem(dir, kData + two_sites + "device = \"cuda\"\n[parallel]\nzero_stage = 1\n");
  CHECK(cuda.find("site[1] (\"b\") has device = \"cuda\"") != std::string::npos);
  CHECK(only_problem(dir, kData + "[parallel]\nzero_stage = 1\n", {"inner.optimizer=sgd"}).find(
            "inner.optimizer (--set inner.optimizer=sgd) is \"sgd\"") != std::string::npos);
}

TEST_CASE(
    "[parallel] shard_outer: on by default where the weights are sharded (stage 3), DiLoCo's outer state of two sites "
    "or more, refused beside the rest naming both") {
  TempDir dir("cfg-shard-outer");
  const std::string two_sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + two_sites)).parallel.shard_outer);
  CHECK_FALSE(
      load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 2\n")).parallel.shard_outer);
  // Stage 3 left out of it: the outer state is cut as the weights are, and validate says why.
  const auto stage3 = load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 3\n"));
  CHECK(stage3.parallel.shard_outer);
  CHECK(std::any_of(stage3.derived.begin(), stage3.derived.end(), [](const std::string& line) {
    return line.starts_with("parallel.shard_outer = true (zero_stage = 3");
  }));
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nzero_stage = 3\nshard_outer = false\n"))
                  .parallel.shard_outer);
  // ... but only where a sharded one can work: elsewhere it stays whole, and nothing is refused.
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + "[parallel]\nzero_stage = 3\n")).parallel.shard_outer);
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + "[outer]\nalgorithm = \"streaming\"\nfragments = 2\n" +
                                                  two_sites + "[parallel]\nzero_stage = 3\n"))
                  .parallel.shard_outer);
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData + "[outer]\noverlap_update = \"eager\"\n" + two_sites +
                                                  "[parallel]\nzero_stage = 3\n"))
                  .parallel.shard_outer);
  CHECK(load_ok(write(dir / "job.toml", kData + two_sites + "[parallel]\nshard_outer = true\n")).parallel.shard_outer);
  CHECK(only_problem(dir, kData + "[parallel]\nshard_outer = true\n").find(
            "job.toml:4: parallel.shard_outer: shard_outer = true shards DiLoCo's outer state, and a job of one site "
            "keeps none") != std::string::npos);
  const auto sync = only_problem(dir, kData + "[outer]\nalgorithm = \"sync\"\n" + two_sites + "[parallel]\nshard_outer = true\n");
  CHECK(sync.find("parallel.shard_outer: shard_outer = true shards DiLoCo's outer state, and outer.algorithm (line 4) = "
                  "\"sync\" keeps none") != std::string::npos);
  const auto streaming = only_problem(
      dir, kData + "[outer]\nalgorithm = \"streaming\"\nfragments = 2\n" + two_sites + "[parallel]\nshard_outer = true\n");
  CHECK(streaming.find("outer.algorithm (line 4) = \"streaming\" keeps it per fragment") != std::string::npos);
  const auto eager = only_problem(
      dir, kData + "[outer]\noverlap_update = \"eager\"\n" + two_sites + "[parallel]\nshard_outer = true\n");
  CHECK(eager.find("outer.overlap_update (line 4) = \"eager\" steps the whole model ahead") != std::string::npos);
  const auto cuda = only_problem(dir, kData + two_sites + "device = \"cuda\"\n[parallel]\nshard_outer = true\n");
  CHECK(cuda.find("shard_outer = true shards DiLoCo's outer state, and its parts go between a site's CPU replicas for "
                  "now, and site[1] (\"b\") has device = \"cuda\"") != std::string::npos);
}

TEST_CASE("[parallel] recompute: none by default, cheap and full, refused on a CUDA site naming both") {
  TempDir dir("cfg-recompute");
  CHECK(load_ok(write(dir / "job.toml", kData)).parallel.recompute == Recompute::None);
  CHECK(load_ok(write(dir / "job.toml", kData + "[parallel]\nrecompute = \"full\"\n")).parallel.recompute ==
        Recompute::Full);
  CHECK(load_ok(write(dir / "job.toml", kData), {"parallel.recompute=cheap"}).parallel.recompute == Recompute::Cheap);
  CHECK(only_problem(dir, kData + "[parallel]\nrecompute = \"all\"\n").find(
            "job.toml:4: parallel.recompute: expected one of \"none\", \"cheap\", \"full\", found \"all\"") !=
        std::string::npos);
  const std::string sites = "[[site]]\nname = \"a\"\ndevice = \"cuda\"\n[[site]]\nname = \"b\"\n";
  CHECK(only_problem(dir, kData + sites + "[parallel]\nrecompute = \"cheap\"\n").find(
            "parallel.recompute: recompute = \"cheap\" runs in the CPU trainer for now, and site[0] (\"a\") has "
            "device = \"cuda\"") != std::string::npos);
}

TEST_CASE("[log] samples: none by default, read, and refused where no text or no whole weights come, naming why") {
  TempDir dir("cfg-samples");
  const auto d = load_ok(write(dir / "job.toml", kData));
  CHECK(d.log.sample_every == 0);
  CHECK(d.log.sample_tokens == 64);
  CHECK(d.log.sample_prompt.empty());
  const auto c = load_ok(
      write(dir / "job.toml", kData + "[log]\nsample_every = 50\nsample_tokens = 20\nsample_prompt = \"ROMEO:\"\n"));
  CHECK(c.log.sample_every == 50);
  CHECK(c.log.sample_tokens == 20);
  CHECK(c.log.sample_prompt == "ROMEO:");
  CHECK(only_problem(dir, kData + "[log]\nsample_tokens = 0\n")
            .find("job.toml:4: log.sample_tokens: expected an integer >= 1, found 0") != std::string::npos);
  CHECK(
      only_problem(dir, kData + "[model]\nvocab = 512\n[log]\nsample_every = 5\n")
          .find(
              "job.toml:6: log.sample_every: a sample is text, and the data names no [data] tokenizer for a vocabulary "
              "of 512") != std::string::npos);
  CHECK(only_problem(dir, kData + "[log]\nsample_every = 5\n[parallel]\nzero_stage = 3\n")
            .find("job.toml:4: log.sample_every: zero_stage = 3 keeps no replica's weights whole") !=
        std::string::npos);
}

TEST_CASE(
    "[inner] schedule = wsd: its cooldown's fraction and shape, refused under another schedule or over the warmup") {
  TempDir dir("cfg-wsd");
  const auto d = load_ok(write(dir / "job.toml", kData));
  CHECK(d.inner.decay_fraction == 0.2);
  CHECK(d.inner.decay_shape == DecayShape::OneMinusSqrt);
  const auto c = load_ok(write(dir / "job.toml", kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\nwarmup_steps = 10\n"
                                                         "decay_fraction = 0.3\ndecay_shape = \"cosine\"\n"));
  CHECK(c.inner.schedule == ScheduleKind::Wsd);
  CHECK(c.inner.decay_fraction == 0.3);
  CHECK(c.inner.decay_shape == DecayShape::Cosine);
  JobConfig again = load_ok(write(dir / "resolved.toml", to_toml(c)));  // what validate prints reads back
  again.source = c.source;
  again.derived = c.derived;
  CHECK(again == c);
  CHECK(load_ok(write(dir / "job.toml", kData + "[inner]\nschedule = \"wsd\"\n"), {"inner.decay_shape=\"linear\""})
            .inner.decay_shape == DecayShape::Linear);

  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\ndecay_shape = \"sqrt\"\n") ==
        (dir / "job.toml").string() +
            ":5: inner.decay_shape: expected one of \"linear\", \"1-sqrt\", \"cosine\", found \"sqrt\"");
  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\ndecay_fraction = 1\n") ==
        (dir / "job.toml").string() + ":5: inner.decay_fraction: expected a number in (0, 1), found 1");
  CHECK(
      only_problem(dir, kData + "[inner]\ndecay_fraction = 0.1\n") ==
      (dir / "job.toml").string() +
          ":4: inner.decay_fraction: only shapes the cooldown of schedule = \"wsd\", and inner.schedule (its default) "
          "is \"cosine\"");
  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"linear\"\ndecay_shape = \"linear\"\n") ==
        (dir / "job.toml").string() +
            ":5: inner.decay_shape: only shapes the cooldown of schedule = \"wsd\", and inner.schedule (line 4) is "
            "\"linear\"");
  // 100 steps: a warmup of 80 and a cooldown of 20 leave no step at the peak, reported where each was set.
  CHECK(
      only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\nwarmup_steps = 80\n") ==
      (dir / "job.toml").string() +
          ":4: inner.schedule: a cooldown of 20 steps (decay_fraction 0.2) after a warmup of 80 leaves no step at the "
          "peak in 100 steps");
  CHECK(only_problem(dir, kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\ndecay_fraction = 0.5\n",
                     {"inner.warmup_steps=50"}) ==
        (dir / "job.toml").string() +
            ":6: inner.decay_fraction: a cooldown of 50 steps (decay_fraction 0.5) after a warmup of 50 leaves no step "
            "at the peak in 100 steps");
  CHECK(load_ok(write(dir / "job.toml", kData + "[inner]\nschedule = \"wsd\"\nsteps = 100\nwarmup_steps = 79\n"))
            .inner.warmup_steps == 79);
}

TEST_CASE("[launch]: defaults, values, and errors with file:line") {
  meridian::testing::TempDir dir("cfg-launch");
  std::ofstream(dir / "d.txt") << "data";
  std::ofstream(dir / "ok.toml") << "[data]\npath = \"d.txt\"\n";
  const auto d = load_job_config(dir / "ok.toml");
  CHECK(d.launch.max_site_restarts == 3);
  CHECK(d.launch.restart_backoff_ms == 1000);
  const auto c = load_job_config(dir / "ok.toml", {"launch.max_site_restarts=0", "launch.restart_backoff_ms=20"});
  CHECK(c.launch.max_site_restarts == 0);
  CHECK(c.launch.restart_backoff_ms == 20);
  std::ofstream(dir / "bad.toml") << "[data]\npath = \"d.txt\"\n[launch]\nmax_site_restarts = -1\n";
  const auto lines = problems_of(dir / "bad.toml");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("bad.toml:4: launch.max_site_restarts: expected an integer >= 0, found -1") != std::string::npos);
}

TEST_CASE("multi-site tables: defaults, the implicit site, and values") {
  TempDir dir("config");
  const JobConfig d = load_ok(write(dir / "job.toml", kData + "[replicas]\ncount = 2\n"));
  CHECK(d.outer == JobConfig::Outer{});
  CHECK((d.outer.algorithm == JobConfig::Outer::Algorithm::Diloco && d.outer.inner_steps == 50 && d.outer.lr == 0.7));
  CHECK((d.outer.codec == JobConfig::Outer::Codec::Int8 && d.outer.block == 512 && d.outer.max_staleness == 4));
  CHECK((d.transport.kind == JobConfig::Transport::Kind::Zmq && d.transport.chunk_bytes == 4194304));
  CHECK(d.transport.network == JobConfig::Transport::Network::Public);
  CHECK((d.control.endpoints.empty() && d.control.lease_ttl_s == 5 && d.control.keepalive_ms == 1000));
  CHECK(d.control.end_unreachable_s == 1800);
  CHECK((d.outer.overlap && d.outer.staleness == JobConfig::Outer::Staleness::Inverse && d.outer.delayed_nesterov == 0));
  CHECK((d.outer.deadline_k == 3.0 && d.outer.max_norm_ratio == 20.0 && !d.outer.dynamic_inner_steps));
  CHECK(d.outer.fragments == 1);
  CHECK(d.sites == std::vector{JobConfig::Site{.name = "local", .replicas = 2}});  // from [replicas].count
  CHECK(d.wan == JobConfig::Wan{});
  const JobConfig c = load_ok(write(
      dir / "job.toml",
      kData + "[outer]\nalgorithm = \"streaming\"\ninner_steps = 16\n"
              "codec = \"int4\"\nmomentum = 0\nquorum = 2\noverlap = false\nstaleness = \"constant\"\ndelayed_nesterov "
              "= 4\n"
              "deadline_k = 2.5\nmax_norm_ratio = 20\ndynamic_inner_steps = true\nfragments = 8\n[transport]\nkind = "
              "\"ucx\"\nnetwork = \"private\"\nchunk_bytes = 1024\n"
              "[control]\nendpoints = [\"http://127.0.0.2:2379\"]\nlease_ttl_s = 1\nkeepalive_ms = "
              "999\nend_unreachable_s = 90\n"
              "[[site]]\nname = \"eu\"\nhost = \"h1\"\nport = 7000\nreplicas = 4\ndevice = \"cuda\"\nspeed = 0.5\n"
              "precision = \"bf16\"\nattention = \"tiled\"\n[[site]]\nname = \"us\"\nhost = \"h2\"\nport = "
              "7000\n[wan]\nlatency_ms = 50\nloss = 0.01\n"));
  CHECK((c.outer.algorithm == JobConfig::Outer::Algorithm::Streaming && c.outer.inner_steps == 16 && c.outer.quorum == 2));
  CHECK((!c.outer.overlap && c.outer.staleness == JobConfig::Outer::Staleness::Constant && c.outer.delayed_nesterov == 4));
  CHECK((c.outer.deadline_k == 2.5 && c.outer.max_norm_ratio == 20.0 && c.outer.dynamic_inner_steps));
  CHECK(c.outer.fragments == 8);
  CHECK((c.transport.kind == JobConfig::Transport::Kind::Ucx && c.transport.chunk_bytes == 1024));
  CHECK(c.transport.network == JobConfig::Transport::Network::Private);
  CHECK((c.control.endpoints == std::vector<std::string>{"http://127.0.0.2:2379"} && c.control.keepalive_ms == 999));
  CHECK(c.control.end_unreachable_s == 90);
  REQUIRE(c.sites.size() == 2);
  CHECK(c.sites[0] == JobConfig::Site{"eu", "h1", 7000, 4, JobConfig::Site::Device::Cuda, 0.5,
                                      JobConfig::Site::Precision::Bf16, JobConfig::Site::Attention::Tiled});
  CHECK(c.sites[1] == JobConfig::Site{.name = "us", .host = "h2", .port = 7000});  // other hosts: no clash
  CHECK((c.wan.link.latency_ms == 50 && c.wan.link.loss == 0.01));
}

TEST_CASE("plaintext off this machine is refused unless the job says insecure = true") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"a\"\nhost = \"10.0.0.1\"\n[[site]]\nname = \"b\"\nhost = \"10.0.0.2\"\n";
  std::string problem = only_problem(dir, kData + sites);
  CHECK(problem.find("transport.link_key_file: site \"a\" is on host \"10.0.0.1\"") != std::string::npos);
  CHECK(problem.find("insecure = true") != std::string::npos);
  problem = only_problem(dir, kData + "[control]\nendpoints = [\"http://127.0.0.1:2379\", \"http://etcd.example:2379\"]\n");
  CHECK(problem.find(": control.endpoints: etcd at \"http://etcd.example:2379\" is on another host") != std::string::npos);
  // Over https with the TLS files, etcd on another host is fine.
  const std::string tls = "ca_file = \"/k/ca.crt\"\ncert_file = \"/k/{site}/etcd.crt\"\nkey_file = \"/k/{site}/etcd.key\"\n";
  const JobConfig secure = load_ok(write(dir / "tls.toml", kData + "[control]\nendpoints = [\"https://etcd.example:2379\"]\n" + tls));
  CHECK(secure.control.cert_file == std::filesystem::path("/k/{site}/etcd.crt"));
  const JobConfig insecure = load_ok(write(dir / "insecure.toml", kData + "[job]\ninsecure = true\n" + sites +
                                                                      "[control]\nendpoints = [\"http://10.0.0.9:2379\"]\n"));
  CHECK(insecure.job.insecure);
  CHECK(load_ok(write(dir / "cli.toml", kData + sites), {"job.insecure=true"}).job.insecure);
  // On loopback nothing leaves the machine; UCX answers to network = "private" instead.
  const std::string local = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\nhost = \"localhost\"\nport = 7001\n";
  CHECK_FALSE(load_ok(write(dir / "local.toml", kData + local)).job.insecure);
  CHECK(load_ok(write(dir / "ucx.toml", kData + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\n" + sites))
            .sites.size() == 2);
}

TEST_CASE("etcd over TLS: all three files or none, and then every endpoint https") {
  TempDir dir("config");
  const std::string files = "ca_file = \"/k/ca.crt\"\ncert_file = \"/k/a.crt\"\nkey_file = \"/k/a.key\"\n";
  std::string problem = only_problem(dir, kData + "[control]\nendpoints = [\"https://127.0.0.1:2379\"]\n");
  CHECK(problem.find("control.endpoints: etcd at \"https://127.0.0.1:2379\": https needs [control] ca_file") !=
        std::string::npos);
  problem = only_problem(dir, kData + "[control]\nendpoints = [\"http://127.0.0.1:2379\"]\n" + files);
  CHECK(problem.find("every endpoint is https://") != std::string::npos);
  problem = only_problem(dir, kData + "[control]\nca_file = \"/k/ca.crt\"\n");
  CHECK(problem.find("takes all three of ca_file, cert_file and key_file") != std::string::npos);
  const JobConfig ok = load_ok(write(dir / "ok.toml", kData + "[control]\nendpoints = [\"https://127.0.0.1:2379\"]\n" + files));
  CHECK(ok.control.key_file == std::filesystem::path("/k/a.key"));
  // What validate prints loads back the same.
  CHECK(load_ok(write(dir / "again.toml", to_toml(ok))).control == ok.control);
}

TEST_CASE("UCX between sites only on a network the job calls private, and validate says why") {
  TempDir dir("config");
  const std::string two_sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  const std::string problem = only_problem(dir, kData + "[transport]\nkind = \"ucx\"\n" + two_sites);
  CHECK(problem.find("job.toml:4") != std::string::npos);
  CHECK(problem.find("transport.kind: UCX encrypts nothing") != std::string::npos);
  CHECK(problem.find("network = \"private\"") != std::string::npos);
  CHECK(load_ok(write(dir / "private.toml", kData + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\n" + two_sites))
            .transport.kind == JobConfig::Transport::Kind::Ucx);
  CHECK(load_ok(write(dir / "one.toml", kData + "[transport]\nkind = \"ucx\"\n")).transport.kind ==
        JobConfig::Transport::Kind::Ucx);  // one site: nothing crosses a network
  CHECK(only_problem(dir, kData + "[transport]\nnetwork = \"lan\"\n").find("one of \"public\", \"private\"") !=
        std::string::npos);
}

TEST_CASE("transport.exchange: leader or split, and split only where DiLoCo's deltas go") {
  TempDir dir("config");
  const std::string two_sites = "[[site]]\nname = \"a\"\nreplicas = 2\n[[site]]\nname = \"b\"\n";
  CHECK(load_ok(write(dir / "default.toml", kData + two_sites)).transport.exchange == JobConfig::Transport::Exchange::Leader);
  const auto split = load_ok(write(dir / "split.toml", kData + "[transport]\nexchange = \"split\"\n" + two_sites));
  CHECK(split.transport.exchange == JobConfig::Transport::Exchange::Split);
  CHECK(load_ok(write(dir / "again.toml", to_toml(split))).transport == split.transport);  // what validate prints
  CHECK(only_problem(dir, kData + "[transport]\nexchange = \"striped\"\n").find("one of \"leader\", \"split\"") !=
        std::string::npos);
  const std::string problem =
      only_problem(dir, kData + "[outer]\nalgorithm = \"sync\"\n[transport]\nexchange = \"split\"\n" + two_sites);
  CHECK(problem.find("job.toml:6") != std::string::npos);
  CHECK(problem.find("transport.exchange: expected \"leader\" with outer.algorithm = \"sync\"") != std::string::npos);
}

TEST_CASE("CURVE keys on the links: all sites list one and the file names this site's secret, or none does") {
  TempDir dir("config");
  // Z85 keys from ZeroMQ's own CURVE test (public halves).
  const std::string ka = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7", kb = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
  const auto site = [](const std::string& name, const std::string& key) {
    return "[[site]]\nname = \"" + name + "\"\n" + (key.empty() ? "" : "link_public_key = \"" + key + "\"\n");
  };
  const JobConfig c = load_ok(write(dir / "curve.toml", kData + "[transport]\nlink_key_file = \"keys/{site}/link.key\"\n" +
                                                            site("a", ka) + site("b", kb)));
  REQUIRE(c.transport.link_key_file.has_value());
  CHECK(*c.transport.link_key_file == dir / "keys/{site}/link.key");  // beside the file that names it
  CHECK(c.sites[0].link_public_key == ka);
  CHECK(c.sites[1].link_public_key == kb);
  // Read back from its own text, the config is the same (but for where it came from).
  const auto same_again = [&](const JobConfig& config, const char* name) {
    JobConfig again = load_ok(write(dir / name, to_toml(config)));
    again.source = config.source;
    again.derived = config.derived;
    return again == config;
  };
  CHECK(same_again(c, "again.toml"));

  std::string problem = only_problem(dir, kData + "[transport]\nlink_key_file = \"k\"\n" + site("a", ka) + site("b", ""));
  CHECK(problem.find("site[1].link_public_key") != std::string::npos);
  CHECK(problem.find("site \"b\" must list the public key it proves") != std::string::npos);
  problem = only_problem(dir, kData + site("a", ka) + site("b", kb));
  CHECK(problem.find("transport.link_key_file: the sites' CURVE public keys are given") != std::string::npos);
  const JobConfig files = load_ok(write(dir / "files.toml", kData + "[transport]\nlink_key_file = \"k/{site}.key\"\n"
                                                                "link_public_key_file = \"k/{site}.pub\"\n" + site("a", "") + site("b", kb)));
  CHECK(*files.transport.link_public_key_file == dir / "k/{site}.pub");
  CHECK(same_again(files, "files-again.toml"));
  problem = only_problem(dir, kData + "[transport]\nlink_key_file = \"k\"\n" + site("a", ka) + site("b", "too short"));
  CHECK(problem.find("site[1].link_public_key: expected a CURVE public key") != std::string::npos);
  problem = only_problem(dir, kData + "[transport]\nkind = \"ucx\"\nnetwork = \"private\"\nlink_key_file = \"k\"\n" +
                                  site("a", ka) + site("b", kb));
  CHECK(problem.find("UCX has no CURVE") != std::string::npos);
}

TEST_CASE("DiLoCo's outer lr and momentum follow the sites when the file leaves them out, a setting wins") {
  TempDir dir("config");
  const auto sites = [](int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += "[[site]]\nname = \"s" + std::to_string(i) + "\"\n";
    return out;
  };
  const JobConfig three = load_ok(write(dir / "three.toml", kData + sites(3)));
  CHECK(three.outer.lr == outer_defaults(3, 50).lr);
  CHECK(three.outer.momentum == outer_defaults(3, 50).momentum);
  CHECK(three.outer.momentum_warmup == outer_defaults(3, 50).momentum_warmup);
  // The ramp spans the job's first kMomentumWarmupInnerSteps inner steps, whatever H.
  CHECK(outer_defaults(3, 50).momentum_warmup == 5);
  CHECK(outer_defaults(3, 100).momentum_warmup == 3);
  CHECK(outer_defaults(3, 20).momentum_warmup == 13);
  // ... shorter early rounds counted as they come: 250 steps of H = 25, or 100 of 25 and 150 of 50.
  CHECK(outer_defaults(3, 50, false, 25, 500).momentum_warmup == 10);
  CHECK(outer_defaults(3, 50, false, 25, 100).momentum_warmup == 7);
  const JobConfig early =
      load_ok(write(dir / "early.toml", kData + "[outer]\nearly_inner_steps = 25\nearly_steps = 500\n" + sites(3)));
  CHECK((early.outer.early_inner_steps == 25 && early.outer.early_steps == 500 && early.outer.momentum_warmup == 10));
  CHECK(early.outer.lr == outer_defaults(3, 25).lr);  // its first rounds' H decides it
  CHECK(early.derived[0].find("(3 sites, H = 50 after 500 steps of H = 25)") != std::string::npos);
  JobConfig again = load_ok(write(dir / "early-again.toml", to_toml(early)));  // as `meridian validate` prints it
  again.source = early.source;
  again.derived = early.derived;
  CHECK(again == early);
  REQUIRE(three.derived.size() == 4);
  CHECK(three.derived[0].starts_with("outer.lr = "));
  CHECK(three.derived[0].find("(3 sites, H = 50)") != std::string::npos);
  CHECK(three.derived[2].starts_with("outer.momentum_warmup = "));
  CHECK(three.derived[3].starts_with("outer.overlap_steps = 5 "));
  const JobConfig eight = load_ok(write(dir / "eight.toml", kData + sites(8)));
  CHECK(eight.outer.lr > three.outer.lr);  // more sites, a less noisy mean: a longer step along it
  const JobConfig set = load_ok(write(dir / "set.toml", kData + "[outer]\nlr = 0.25\nmomentum_warmup = 0\n" + sites(3)));
  CHECK(set.outer.lr == 0.25);
  CHECK(set.outer.momentum_warmup == 0);
  REQUIRE(set.derived.size() == 2);
  CHECK(set.derived[0].starts_with("outer.momentum = "));
  CHECK(load_ok(write(dir / "cli.toml", kData + sites(3)), {"outer.lr=0.3"}).outer.lr == 0.3);
  const JobConfig sync = load_ok(write(dir / "sync.toml", kData + "[outer]\nalgorithm = \"sync\"\n" + sites(3)));
  CHECK(sync.derived.empty());
  CHECK(load_ok(write(dir / "one.toml", kData)).derived.empty());
  CHECK(load_ok(write(dir / "muon.toml", kData + "[inner]\noptimizer = \"muon\"\nmuon_momentum = 0.9\n")).inner.muon_momentum ==
        0.9);
}

TEST_CASE("a sparse job's density follows its byte budget and its outer lr the codec, a setting wins") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n[[site]]\nname = \"c\"\n";
  const std::string sparse = "[outer]\ncodec = \"sparse\"\n";
  const JobConfig derived = load_ok(write(dir / "sparse.toml", kData + sparse + sites));
  const int keep = sparse_keep_within(512, kSparseBytesPerValue);
  CHECK(derived.outer.sparse_keep() == keep);
  CHECK(derived.outer.density == doctest::Approx(keep / 512.0));
  CHECK(derived.outer.lr == outer_defaults(3, 50, true).lr);
  CHECK(derived.outer.lr > outer_defaults(3, 50).lr);
  bool noted = false;
  for (const auto& line : derived.derived)
    noted = noted || (line.starts_with("outer.density = ") && line.find("0.1 byte") != std::string::npos);
  CHECK(noted);
  // Another block, another keep; the budget holds at both.
  const JobConfig wide = load_ok(write(dir / "wide.toml", kData + sparse + "block = 4096\n" + sites));
  CHECK(wide.outer.sparse_keep() == sparse_keep_within(4096, kSparseBytesPerValue));
  const JobConfig set = load_ok(write(dir / "set.toml", kData + sparse + "density = 0.03\nlr = 0.7\n" + sites));
  CHECK(set.outer.density == 0.03);
  CHECK(set.outer.lr == 0.7);
  for (const auto& line : set.derived) CHECK_FALSE(line.starts_with("outer.density"));
  CHECK(load_ok(write(dir / "int8.toml", kData + sites)).outer.density == JobConfig{}.outer.density);
}

TEST_CASE("the overlap's bound follows H when the file leaves it out, a setting wins, lockstep derives none") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"a\"\n[[site]]\nname = \"b\"\n";
  CHECK(load_ok(write(dir / "h50.toml", kData + sites)).outer.overlap_steps == 5);
  CHECK(load_ok(write(dir / "h8.toml", kData + "[outer]\ninner_steps = 8\n" + sites)).outer.overlap_steps == 1);
  CHECK(load_ok(write(dir / "h200.toml", kData + "[outer]\ninner_steps = 200\n" + sites)).outer.overlap_steps == 20);
  CHECK(load_ok(write(dir / "set.toml", kData + "[outer]\noverlap_steps = 50\n" + sites)).outer.overlap_steps == 50);
  CHECK(load_ok(write(dir / "cli.toml", kData + sites), {"outer.overlap_steps=2"}).outer.overlap_steps == 2);
  const JobConfig lockstep = load_ok(write(dir / "lockstep.toml", kData + "[outer]\noverlap = false\n" + sites));
  for (const auto& line : lockstep.derived) CHECK_FALSE(line.starts_with("outer.overlap_steps"));
  CHECK(only_problem(dir, kData + "[outer]\noverlap_steps = 0\n" + sites).find("outer.overlap_steps") != std::string::npos);
}

TEST_CASE("multi-site rules name file:line and the key") {
  TempDir dir("config");
  const std::pair<std::string, std::string> cases[] = {
      {"[outer]\ninner_steps = 0\n", ":2: outer.inner_steps: expected an integer >= 1, found 0"},
      {"[outer]\ncodec = \"int3\"\n",
       ":2: outer.codec: expected one of \"fp32\", \"bf16\", \"int8\", \"int4\", \"sparse\", found \"int3\""},
      {"[outer]\ncodec = \"sparse\"\nerror_feedback = false\n",
       ":3: outer.error_feedback: expected true with outer.codec = \"sparse\" (what it leaves out is sent in later "
       "rounds), found false"},
      {"[outer]\ncodec = \"sparse\"\nblock = 70000\n",
       ":3: outer.block: expected at most 65536 with outer.codec = \"sparse\" (positions are 16-bit), found 70000"},
      {"[outer]\ndensity = 0\n", ":2: outer.density: expected a number in (0, 1], found 0"},
      {"[outer]\nearly_inner_steps = 10\nearly_steps = 25\n",
       ":3: outer.early_steps: expected outer.early_steps a positive multiple of outer.early_inner_steps (whole early "
       "rounds), found early_inner_steps = 10 and early_steps = 25"},
      {"[outer]\nearly_steps = 100\n",
       ":2: outer.early_steps: expected outer.early_inner_steps from 1 to outer.inner_steps - 1 = 49, found "
       "early_inner_steps = 0 and early_steps = 100"},
      {"[outer]\nearly_inner_steps = 50\nearly_steps = 100\n",
       ":3: outer.early_steps: expected outer.early_inner_steps from 1 to outer.inner_steps - 1 = 49"},
      {"[inner]\nsteps = 100\n[outer]\nearly_inner_steps = 10\nearly_steps = 100\n",
       ":5: outer.early_steps: expected outer.early_steps below inner.steps = 100"},
      {"[outer]\nalgorithm = \"streaming\"\nfragments = 2\nearly_inner_steps = 10\nearly_steps = 100\n",
       ":5: outer.early_steps: shorter early rounds are for outer.algorithm = \"diloco\""},
      {"[outer]\ndynamic_inner_steps = true\nearly_inner_steps = 10\nearly_steps = 100\n",
       ":4: outer.early_steps: shorter early rounds and outer.dynamic_inner_steps = true cut rounds two ways"},
      {"[outer]\noverlap_update = \"late\"\n",
       ":2: outer.overlap_update: expected one of \"rebase\", \"eager\", found \"late\""},
      {"[[site]]\nname = \"a\"\n[[site]]\nname = \"a\"\n",
       ":4: site[1].name: duplicate site name \"a\" (lines 2 and 4)"},
      {"[[site]]\nname = \"..\"\n[[site]]\nname = \"b\"\n",
       ":2: site[0].name: expected a name of 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or "
       "'-' (it names the site's directory, its etcd keys and user), found \"..\""},
      {"[[site]]\nname = \"a\"\n[[site]]\nname = \"eu/west\"\n",
       ":4: site[1].name: expected a name of 1 to 64 letters, digits, '_', '-' and '.', not starting with '.' or "
       "'-' (it names the site's directory, its etcd keys and user), found \"eu/west\""},
      {"[[site]]\nname = \"a\"\nport = 7\n[[site]]\nname = \"b\"\nport = 7\n",
       ":6: site[1].port: port clash: 127.0.0.1:7 is also used by site \"a\" (line 3)"},
      {"[[site]]\nname = \"a\"\nreplicas = 0\n", ":3: site[0].replicas: expected an integer >= 1, found 0"},
      {"[[site]]\nhost = \"h\"\n", ":1: site[0].name: missing required key (expected a string: the site's name)"},
      {"[[site]]\nname = \"a\"\nspeeed = 2\n", ":3: site[0].speeed: unknown key (did you mean speed?)"},
      {"[site]\nname = \"a\"\n", ":1: site: expected an array of tables ([[site]]), found a table"},
      {"[[site]]\nname = \"a\"\nprecision = \"fp8\"\n",
       ":3: site[0].precision: expected one of \"fp32\", \"bf16\", \"fp16\", found \"fp8\""},
      {"[[site]]\nname = \"a\"\nprecision = \"bf16\"\n",
       ":3: site[0].precision: expected \"fp32\" on a site with device = \"cpu\" (mixed precision runs on GPUs "
       "only), found \"bf16\""},
      {"[[site]]\nname = \"a\"\nattention = \"tiled\"\n",
       ":3: site[0].attention: expected \"materialized\" on a site with device = \"cpu\" (the other kernels run on "
       "GPUs only), found \"tiled\""},
      {"[[site]]\nname = \"a\"\ndevice = \"cuda\"\nattention = \"cudnn\"\n",
       ":4: site[0].attention: \"cudnn\" needs precision = \"bf16\" or \"fp16\" (cuDNN's flash attention has no fp32 "
       "form); this site's precision is \"fp32\""},
      {"[[site]]\nname = \"a\"\ndevice = \"cuda\"\nattention = \"flash\"\n",
       ":4: site[0].attention: expected one of \"materialized\", \"tiled\", \"cudnn\", found \"flash\""},
      {"[control]\nlease_ttl_s = 2\nkeepalive_ms = 2000\n",
       ":3: control.keepalive_ms: expected less than control.lease_ttl_s * 1000 = 2000"},
      // The defaults' pairing holds against a shorter TTL set alone: 1000 ms is not below 1 s.
      {"[control]\nlease_ttl_s = 1\n",
       ":2: control.keepalive_ms: expected less than control.lease_ttl_s * 1000 = 1000"},
      {"[control]\nend_unreachable_s = -1\n", ":2: control.end_unreachable_s: expected an integer >= 0, found -1"},
      {"[outer]\noverlap = 1\n", ":2: outer.overlap: expected true or false, found integer 1"},
      {"[outer]\nstaleness = \"linear\"\n",
       ":2: outer.staleness: expected one of \"inverse\", \"constant\", found \"linear\""},
      {"[outer]\ndelayed_nesterov = -1\n", ":2: outer.delayed_nesterov: expected an integer >= 0, found -1"},
      {"[outer]\nmomentum_warmup = -2\n", ":2: outer.momentum_warmup: expected an integer >= 0, found -2"},
      {"[outer]\nnesterov = false\ndelayed_nesterov = 2\n",
       ":3: outer.delayed_nesterov: expected 0 or 1 with outer.nesterov = false (delayed Nesterov needs Nesterov "
       "momentum), found 2"},
      {"[outer]\ndeadline_k = 0\n", ":2: outer.deadline_k: expected a number > 0, found 0"},
      {"[outer]\nmax_norm_ratio = 1\n", ":2: outer.max_norm_ratio: expected a number > 1, found 1"},
      {"[outer]\ndynamic_inner_steps = \"yes\"\n",
       ":2: outer.dynamic_inner_steps: expected true or false, found string \"yes\""},
      {"[outer]\nfragments = 0\n", ":2: outer.fragments: expected an integer >= 1, found 0"},
      {"[outer]\nfragments = 4\n",
       ":2: outer.fragments: expected 1 unless outer.algorithm = \"streaming\" (fragments are streaming DiLoCo's), "
       "found 4"},
      {"[outer]\nalgorithm = \"streaming\"\ninner_steps = 3\nfragments = 4\n",
       ":4: outer.fragments: expected at most outer.inner_steps = 3 (one fragment is synchronised every inner_steps / "
       "fragments steps), found 4"},
      {"[model]\npreset = \"tiny\"\nn_layer = 1\n[outer]\nalgorithm = \"streaming\"\ninner_steps = 100\nfragments = "
       "17\n",
       ":7: outer.fragments: expected at most 16 (the model's tensors; a fragment holds whole ones), found 17"},
      {"[control]\nendpoints = [\"10.0.0.1:2379\"]\n", ":2: control.endpoints: expected an array of strings"},
      {"[wan]\nloss = 1.0\n", ":2: wan.loss: expected a number in [0, 1), found 1"},
  };
  for (const auto& [body, expected] : cases) {
    CAPTURE(body);
    CHECK(only_problem(dir, body + kData).starts_with((dir / "job.toml").string() + expected));
  }
}

TEST_CASE("[wan]: profiles, per-pair links and the fault schedule") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"us\"\n[[site]]\nname = \"eu\"\n[[site]]\nname = \"ap\"\n";
  const JobConfig c = load_ok(write(dir / "job.toml", kData + sites +
      "[wan]\nprofile = \"transatlantic\"\nlatency_ms = 50\njitter = \"uniform\"\n"
      "[[wan.link]]\nsites = [\"us\", \"ap\"]\nprofile = \"transpacific\"\nbandwidth_mbps = 100\n"
      "[[wan.link]]\nsites = [\"eu\", \"ap\"]\nloss = 0\n"
      "[[wan.fault]]\nkind = \"partition\"\nsites = [\"ap\"]\nfrom_s = 30\nto_s = 60.5\n"
      "[[wan.fault]]\nkind = \"bandwidth\"\nsites = [\"us\", \"eu\"]\npair = true\nfrom_s = 0\nto_s = 10\n"
      "bandwidth_mbps = 10\n"));
  const WanLink atlantic = *find_wan_profile("transatlantic");
  const WanLink pacific = *find_wan_profile("transpacific");
  CHECK(c.wan.profile == "transatlantic");
  CHECK(c.wan.link == WanLink{50, atlantic.jitter_ms, WanLink::Jitter::Uniform, atlantic.bandwidth_mbps, atlantic.loss});
  CHECK(c.wan.emulated());
  // A pair's keys go over its profile, else over the default link; the pair reads both ways.
  const WanLink us_ap{pacific.latency_ms, pacific.jitter_ms, pacific.jitter, 100, pacific.loss};
  CHECK(wan_link(c, "us", "ap") == us_ap);
  CHECK(wan_link(c, "ap", "us") == us_ap);
  WanLink eu_ap = c.wan.link;
  eu_ap.loss = 0;
  CHECK(wan_link(c, "ap", "eu") == eu_ap);
  CHECK(wan_link(c, "us", "eu") == c.wan.link);
  REQUIRE(c.wan.faults.size() == 2);
  using Fault = JobConfig::Wan::Fault;
  CHECK(c.wan.faults[0] == Fault{Fault::Kind::Partition, {"ap"}, false, 30, 60.5, 0, 0});
  CHECK(c.wan.faults[1] == Fault{Fault::Kind::Bandwidth, {"us", "eu"}, true, 0, 10, 10, 0});

  // The keys of before: a [wan] of top-level values is the default link, and only they make it emulated.
  const JobConfig plain = load_ok(write(dir / "job.toml", kData + "[wan]\nlatency_ms = 5\nbandwidth_mbps = 100\n"));
  CHECK(plain.wan.link == WanLink{.latency_ms = 5, .bandwidth_mbps = 100});
  CHECK((plain.wan.profile.empty() && plain.wan.links.empty() && plain.wan.faults.empty() && plain.wan.emulated()));
  CHECK_FALSE(load_ok(write(dir / "job.toml", kData)).wan.emulated());
  for (const auto& p : wan_profiles()) {
    CAPTURE(p.name);
    CHECK((p.link.latency_ms > 0 && p.link.bandwidth_mbps > 0));
  }
  CHECK_FALSE(find_wan_profile("moon"));
}

TEST_CASE("[wan] rules name file:line and the key") {
  TempDir dir("config");
  const std::string sites = "[[site]]\nname = \"us\"\n[[site]]\nname = \"eu\"\n";  // lines 1-4
  const std::string fault = "[[wan.fault]]\nkind = \"partition\"\nsites = [\"eu\"]\n";  // lines 5-7
  const std::pair<std::string, std::string> cases[] = {
      {"[wan]\nprofile = \"moon\"\n",
       ":6: wan.profile: expected one of \"same-region\", \"cross-country\", \"transatlantic\", \"transpacific\", "
       "found \"moon\""},
      {"[wan]\nlatency_ms = -1\n", ":6: wan.latency_ms: expected a number >= 0, found -1"},
      {"[wan]\njitter = \"cauchy\"\n", ":6: wan.jitter: expected one of \"normal\", \"uniform\", \"pareto\""},
      {"[wan]\nloss = 1.0\n", ":6: wan.loss: expected a number in [0, 1), found 1"},
      {"[wan.link]\nsites = [\"us\", \"eu\"]\n", ":5: wan.link: expected an array of tables ([[wan.link]]), found"},
      {"[[wan.link]]\nsites = [\"us\", \"mars\"]\n",
       ":6: wan.link[0].sites: expected names of this job's sites (us, eu), found string \"mars\""},
      {"[[wan.link]]\nsites = [\"us\"]\n", ":6: wan.link[0].sites: expected 2 sites (a link joins a pair), found 1"},
      {"[[wan.link]]\nlatency_ms = 5\n", ":5: wan.link[0].sites: missing required key (expected an array of site names)"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\"]\nlatncy_ms = 5\n",
       ":7: wan.link[0].latncy_ms: unknown key (did you mean latency_ms?)"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\"]\nbandwidth_mbps = -5\n",
       ":7: wan.link[0].bandwidth_mbps: expected a number >= 0, found -5"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\"]\n[[wan.link]]\nsites = [\"eu\", \"us\"]\n",
       ":7: wan.link[1].sites: the link eu <-> us is given twice (lines 5 and 7)"},
      {fault + "from_s = 60\nto_s = 30\n", ":9: wan.fault[0].to_s: expected a number > from_s = 60, found 30"},
      {fault + "from_s = -1\nto_s = 30\n", ":8: wan.fault[0].from_s: expected a number >= 0, found -1"},
      {fault + "to_s = 30\n", ":5: wan.fault[0].from_s: missing required key"},
      {"[[wan.fault]]\nkind = \"flood\"\nsites = [\"eu\"]\nfrom_s = 0\nto_s = 1\n",
       ":6: wan.fault[0].kind: expected one of \"partition\", \"bandwidth\", \"latency\", found \"flood\""},
      {"[[wan.fault]]\nkind = \"partition\"\nsites = [\"eu\", \"us\"]\nfrom_s = 0\nto_s = 1\n",
       ":7: wan.fault[0].sites: a partition must leave some site on the other side, found every site"},
      {fault + "from_s = 0\nto_s = 1\nbandwidth_mbps = 10\n",
       ":10: wan.fault[0].bandwidth_mbps: only a fault of kind = \"bandwidth\" takes bandwidth_mbps"},
      {fault + "from_s = 0\nto_s = 1\npair = true\n", ":10: wan.fault[0].pair: a partition cuts sites off"},
      {"[[wan.fault]]\nkind = \"bandwidth\"\nsites = [\"eu\"]\nfrom_s = 0\nto_s = 1\n",
       ":5: wan.fault[0].bandwidth_mbps: missing required key (expected a number > 0)"},
      {"[[wan.fault]]\nkind = \"latency\"\nsites = [\"eu\"]\npair = true\nfrom_s = 0\nto_s = 1\nlatency_ms = 9\n",
       ":8: wan.fault[0].pair: pair = true needs exactly 2 sites, found 1"},
      {"[[wan.fault]]\nkind = \"latency\"\nsites = [\"eu\", \"eu\"]\nfrom_s = 0\nto_s = 1\nlatency_ms = 9\n",
       ":7: wan.fault[0].sites: site \"eu\" is named twice"},
      {"[[wan.link]]\nsites = [\"us\", \"eu\", \"us\"]\n", ":6: wan.link[0].sites: site \"us\" is named twice"},
      {"[[wan.fault]]\nkind = \"latency\"\nsites = []\nfrom_s = 0\nto_s = 1\nlatency_ms = 9\n",
       ":7: wan.fault[0].sites: expected a non-empty array of site names, found an empty array"},
  };
  for (const auto& [body, expected] : cases) {
    CAPTURE(body);
    CHECK(only_problem(dir, sites + body + kData).starts_with((dir / "job.toml").string() + expected));
  }
}

TEST_CASE("every shipped job file is valid, per-site files include their base and agree on the sites") {
  const auto configs = meridian::testing::source_dir() / "configs";
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(configs)) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().string());
    const auto loaded = try_load_job_config(entry.path());
    if (const auto* problems = std::get_if<std::vector<ConfigProblem>>(&loaded))
      for (const auto& p : *problems) FAIL_CHECK(p.to_string());
    ++files;
  }
  CHECK(files >= 7);
  const auto demo = load_job_config(configs / "demo.toml");
  const auto twin = load_job_config(configs / "demo-sync.toml");
  CHECK(demo.sites.size() >= 2);
  CHECK(demo.outer.algorithm == JobConfig::Outer::Algorithm::Diloco);
  CHECK(twin.outer.algorithm == JobConfig::Outer::Algorithm::Sync);
  CHECK(twin.sites == demo.sites);
  CHECK(twin.model == demo.model);
  CHECK(twin.inner == demo.inner);
  const auto dir = configs / "examples" / "three-continent";
  const auto us = load_job_config(dir / "us-east.toml");
  const auto eu = load_job_config(dir / "eu-west.toml");
  CHECK(us.sites.size() == 3);
  CHECK(us.sites == eu.sites);
  CHECK(us.control.endpoints.size() == 3);
  CHECK_FALSE(us.job.insecure);  // mutual TLS to etcd, CURVE on the links
  CHECK(us.control.cert_file.has_value());
  CHECK(us.job.run_dir != eu.job.run_dir);
}
