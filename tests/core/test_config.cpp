// The job file as a whole: defaults, presets, includes, --set, every rule's file:line, to_toml, the shipped files.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/util/error.hpp"
#include "tests/support/config_files.hpp"

using namespace meridian;
using namespace meridian::testing;
namespace fs = std::filesystem;

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
