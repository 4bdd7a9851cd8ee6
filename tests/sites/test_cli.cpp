// The `meridian` program end to end, run as a child process with its output captured: train
// (run directory contents, resume), eval (agrees with evaluate() in-process), export, and the
// exit codes and messages of config, data, checkpoint and usage errors.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/data/tokens.hpp"
#include "core/device/cuda_probe.hpp"
#include "core/hf/safetensors.hpp"
#include "core/io/env.hpp"
#include "core/model/gpt.hpp"
#include "core/model/param_layout.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/train_checkpoint.hpp"
#include "tests/support/run_meridian.hpp"
#include "tests/support/temp_dir.hpp"

using namespace meridian;
using meridian::testing::ProcessResult;
using meridian::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = testing::source_dir() / "data/tinyshakespeare/input.txt";
constexpr int kSeqLen = 32;  // the "tiny" preset
constexpr int kBatch = 4;

ProcessResult meridian_run(const std::vector<std::string>& args, const fs::path& cwd) {
  return testing::run_meridian(args, cwd);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  for (const auto& line : lines_of(read_file(p))) {
    INFO(p.string(), ": ", line);
    REQUIRE(nlohmann::json::accept(line));
    out.push_back(nlohmann::json::parse(line));
    REQUIRE(out.back().is_object());
  }
  return out;
}

// A tiny job (2 layers x 32 channels, context 32, 4 sequences a step) in <dir>/job.toml, with run
// dir "run" relative to the job file. `lines` are the file's lines, so tests can edit them and
// know the line numbers their errors must name.
struct Job {
  fs::path file, run_dir, cwd;
  std::vector<std::string> lines;

  Job(const TempDir& dir, int steps) : file(dir / "job.toml"), run_dir(dir / "run"), cwd(dir / "cwd") {
    fs::create_directories(cwd);  // the program runs from elsewhere: paths resolve against the job file
    lines = {"[job]",
             "name = \"cli\"",
             "seed = 7",
             "run_dir = \"run\"",
             "[model]",
             "preset = \"tiny\"",
             "[data]",
             "path = \"" + kCorpus.string() + "\"",
             "[inner]",
             "lr = 3e-3",
             "warmup_steps = 2",
             "batch_per_replica = " + std::to_string(kBatch),
             "steps = " + std::to_string(steps),
             "[log]",
             "every = 2",
             "eval_every = 0",
             "eval_windows = 8"};
  }
  // 1-based line of the first line starting with `prefix`.
  int line_of(const std::string& prefix) const {
    for (std::size_t i = 0; i < lines.size(); ++i)
      if (lines[i].rfind(prefix, 0) == 0) return static_cast<int>(i) + 1;
    FAIL("no line starts with ", prefix);
    return 0;
  }
  void replace(const std::string& prefix, const std::string& with) { lines[line_of(prefix) - 1] = with; }
  void insert_after(const std::string& prefix, const std::string& line) {
    lines.insert(lines.begin() + line_of(prefix), line);
  }
  void write() const {
    std::ofstream out(file);
    for (const auto& l : lines) out << l << "\n";
  }
  ProcessResult train(std::vector<std::string> extra = {}) const {
    write();
    std::vector<std::string> args{"train", "--config", file.string()};
    for (const auto& e : extra) args.insert(args.end(), {"--set", e});
    return meridian_run(args, cwd);
  }
};

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// An llm.c shard: 256 little-endian int32 header (magic, version, count), then uint16 tokens.
void write_llmc(const fs::path& p, const std::vector<std::uint16_t>& tokens, std::int32_t magic = 20240520) {
  std::int32_t header[256] = {};
  header[0] = magic;
  header[1] = 1;
  header[2] = static_cast<std::int32_t>(tokens.size());
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
}

std::string corpus_prefix(std::size_t n) { return read_file(kCorpus).substr(0, n); }

// The loss evaluate() gives in-process for what load_model_snapshot finds at `checkpoint`.
EvalResult evaluate_in_process(const fs::path& checkpoint, const fs::path& data, int batch = 8) {
  const auto snap = load_model_snapshot(posix_env(), checkpoint, [](const std::string&) {});
  Gpt<float> model(snap.shape);
  std::copy(snap.params.begin(), snap.params.end(), model.params().begin());
  const auto tokens = load_tokens(data, DataFormat::Text);
  return evaluate(model, tokens, batch);
}

// The one JSON object eval prints, checked to be exactly one line holding exactly loss and tokens.
nlohmann::json eval_output(const ProcessResult& r) {
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 1);
  REQUIRE(nlohmann::json::accept(lines[0]));
  const auto j = nlohmann::json::parse(lines[0]);
  REQUIRE(j.is_object());
  CHECK(j.size() == 2);
  REQUIRE(j.contains("loss"));
  REQUIRE(j.contains("tokens"));
  CHECK(j["loss"].is_number_float());
  CHECK(j["tokens"].is_number_unsigned());
  return j;
}

void check_relative(double a, double b, double tol) {
  CHECK_MESSAGE(std::abs(a - b) <= tol * std::abs(b), a, " vs ", b);
}

void flip_byte(const fs::path& p, std::streamoff at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  const char c = static_cast<char>(f.get());
  f.seekp(at);
  f.put(static_cast<char>(c ^ 0x5a));
}

std::string ckpt_name(int step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "ckpt-%010d.mrdn", step);
  return buf;
}

// stderr of a failed run: the kind's exit code (error.hpp) and the one "meridian: <kind> error: "
// line format.
void check_input_error(const ProcessResult& r, const std::string& kind) {
  INFO(r.describe());
  const std::map<std::string, int> codes = {{"config", 78}, {"data", 65}, {"checkpoint", 66}, {"io", 1}};
  CHECK(r.exit_code == codes.at(kind));
  CHECK(contains(r.err, "meridian: " + kind + " error: "));
  CHECK(!contains(r.err, "internal error"));
}

}  // namespace

TEST_CASE("train: a tiny job leaves metrics, events, summary and a checkpoint, and progress is plain lines on a pipe") {
  TempDir dir("cli-train");
  const Job job(dir, 6);
  const auto r = job.train();
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(!contains(r.err, "error"));
  // stdout is a pipe: one line per update, no carriage returns or terminal escapes.
  CHECK(!contains(r.out, "\r"));
  CHECK(!contains(r.out, "\033"));
  const auto out = lines_of(r.out);
  for (const char* expected : {"step 2/6 | loss ", "step 4/6 | loss ", "step 6/6 | loss "}) {
    int n = 0;
    for (const auto& l : out) n += l.rfind(expected, 0) == 0;
    CHECK_MESSAGE(n == 1, expected);
  }
  CHECK(contains(r.out, "done: 6 steps, 768 tokens"));

  // The run dir is relative to the job file, not to the working directory.
  REQUIRE(fs::is_directory(job.run_dir));
  CHECK(!fs::exists(job.cwd / "run"));

  // metrics.jsonl: every line an object with the common fields; the train lines carry loss and lr.
  const auto metrics = read_jsonl(job.run_dir / "metrics.jsonl");
  std::vector<std::int64_t> train_steps;
  for (const auto& m : metrics) {
    INFO(m.dump());
    for (const char* key : {"time", "site", "replica", "step", "version", "tokens"}) CHECK_MESSAGE(m.contains(key), key);
    CHECK(m["time"].is_number());
    CHECK(m["time"].get<double>() > 1.6e9);  // seconds since the epoch
    CHECK(m["site"].is_string());
    CHECK(m["replica"] == 0);
    CHECK(m["version"] == 0);
    if (!m.contains("loss")) {
      CHECK(m.contains("val_loss"));
      continue;
    }
    for (const char* key : {"loss", "lr", "tok_s"}) CHECK_MESSAGE(m.contains(key), key);
    const auto step = m["step"].get<std::int64_t>();
    train_steps.push_back(step);
    CHECK(m["tokens"].get<std::int64_t>() == step * kBatch * kSeqLen);
    CHECK(std::isfinite(m["loss"].get<double>()));
    CHECK(m["loss"].get<double>() > 0);
    CHECK(m["lr"].get<double>() > 0);
    CHECK(m["lr"].get<double>() <= 3e-3 + 1e-12);
    CHECK(m["tok_s"].get<double>() > 0);
  }
  CHECK(train_steps == std::vector<std::int64_t>{2, 4, 6});

  // events.jsonl: start, checkpoint, end, in that order.
  const auto events = read_jsonl(job.run_dir / "events.jsonl");
  std::vector<std::string> kinds;
  for (const auto& e : events) {
    CHECK(e["time"].is_number());
    kinds.push_back(e["event"].get<std::string>());
  }
  CHECK(kinds == std::vector<std::string>{"start", "checkpoint", "end"});
  REQUIRE(events.size() == 3);
  CHECK(events[1]["step"] == 6);
  CHECK(events[2]["step"] == 6);

  // summary.json: the final figures, consistent with the logs.
  const auto summary_text = read_file(job.run_dir / "summary.json");
  REQUIRE(nlohmann::json::accept(summary_text));
  const auto summary = nlohmann::json::parse(summary_text);
  for (const char* key : {"final_val_loss", "tokens", "wall_s", "tokens_per_s"}) CHECK_MESSAGE(summary.contains(key), key);
  CHECK(summary["tokens"] == 6 * kBatch * kSeqLen);
  CHECK(summary["final_val_loss"].get<double>() > 0);
  CHECK(summary["final_val_loss"].get<double>() < std::log(256.0) + 0.5);  // near or below uniform after 6 steps
  CHECK(summary["final_val_loss"].get<double>() == events[2]["val_loss"].get<double>());
  CHECK(summary["wall_s"].get<double>() > 0);
  CHECK(summary["tokens_per_s"].get<double>() > 0);
  CHECK(!fs::exists(job.run_dir / "summary.json.tmp"));

  // checkpoints/: exactly the final one.
  std::vector<std::string> ckpts;
  for (const auto& e : fs::directory_iterator(job.run_dir / "checkpoints")) ckpts.push_back(e.path().filename());
  CHECK(ckpts == std::vector<std::string>{ckpt_name(6)});
}

TEST_CASE("train: running again with more steps resumes from the last checkpoint") {
  TempDir dir("cli-resume");
  const Job job(dir, 4);
  const auto first = job.train();
  REQUIRE_MESSAGE(first.exit_code == 0, first.describe());
  CHECK(!contains(read_file(job.run_dir / "events.jsonl"), "\"resume\""));

  const auto second = job.train({"inner.steps=6"});
  INFO(second.describe());
  REQUIRE(second.exit_code == 0);
  CHECK(contains(second.out, "resumed from "));
  CHECK(contains(second.out, ckpt_name(4)));

  const auto events = read_jsonl(job.run_dir / "events.jsonl");
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e["event"].get<std::string>());
  // Both runs append to the same file.
  CHECK(kinds == std::vector<std::string>{"start", "checkpoint", "end", "resume", "start", "checkpoint", "end"});
  REQUIRE(kinds.size() == 7);
  CHECK(events[3]["step"] == 4);
  CHECK(contains(events[3]["checkpoint"].get<std::string>(), ckpt_name(4)));
  CHECK(events[4]["step"] == 4);  // the second run starts where the first stopped
  CHECK(events[6]["step"] == 6);

  // The second run trains steps 5..6 only: its metrics continue the first run's.
  std::vector<std::int64_t> train_steps;
  for (const auto& m : read_jsonl(job.run_dir / "metrics.jsonl"))
    if (m.contains("loss")) train_steps.push_back(m["step"].get<std::int64_t>());
  CHECK(train_steps == std::vector<std::int64_t>{2, 4, 6});

  const auto summary = nlohmann::json::parse(read_file(job.run_dir / "summary.json"));
  CHECK(summary["steps"] == 6);
  CHECK(summary["tokens"] == 6 * kBatch * kSeqLen);
  CHECK(summary["resumed_from_step"] == 4);
  CHECK(fs::exists(job.run_dir / "checkpoints" / ckpt_name(6)));
}

TEST_CASE("train: config errors exit 78 naming file:line and the key, and write nothing") {
  TempDir dir("cli-config");
  Job job(dir, 6);
  std::string expected;

  SUBCASE("unknown key") {
    job.insert_after("lr = ", "lrr = 1");
    expected = "job.toml:" + std::to_string(job.line_of("lrr")) + ": inner.lrr: unknown key (did you mean lr?)";
  }
  SUBCASE("wrong type") {
    job.replace("steps = ", "steps = \"six\"");
    expected = "job.toml:" + std::to_string(job.line_of("steps")) +
               ": inner.steps: expected an integer >= 1, found string \"six\"";
  }
  SUBCASE("d_model not divisible by n_head") {
    job.insert_after("preset = ", "d_model = 33");
    expected = "job.toml:" + std::to_string(job.line_of("d_model")) +
               ": model.d_model: d_model (33) must be divisible by n_head (2)";
  }
  SUBCASE("out of range") {
    job.replace("lr = ", "lr = -0.5");
    expected = "job.toml:" + std::to_string(job.line_of("lr = ")) + ": inner.lr: expected a number > 0, found -0.5";
  }
  SUBCASE("unknown table") {
    job.lines.push_back("[innr]");
    job.lines.push_back("x = 1");
    expected = "job.toml:" + std::to_string(job.line_of("[innr]")) + ": innr: unknown table (did you mean inner?)";
  }
  SUBCASE("TOML syntax error") {
    job.replace("seed = ", "seed = = 7");
    expected = "job.toml:" + std::to_string(job.line_of("seed")) + ": TOML syntax error";
  }
  job.write();
  const auto r = meridian_run({"train", "--config", job.file.string()}, job.cwd);
  INFO(r.describe());
  check_input_error(r, "config");
  CHECK(contains(r.err, expected));
  CHECK(contains(r.err, job.file.string()));  // named as given on the command line
  CHECK(!fs::exists(job.run_dir));          // nothing is created for a job that does not load
  CHECK(r.out.empty());
}

TEST_CASE("device = \"cuda\" on a machine without a usable GPU: train, site and launch exit 78 (config) at start-up saying why") {
  if (cuda_device_count() > 0) {
    MESSAGE("skipped: a CUDA device is present (tests/core/test_cuda_trainer.cpp trains on it)");
    return;
  }
  TempDir dir("cli-cuda");
  Job job(dir, 6);
  job.lines.insert(job.lines.end(), {"[[site]]", "name = \"gpu\"", "device = \"cuda\""});
  job.write();
  const std::string file = job.file.string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"train", "--config", file}, {"site", "--config", file, "--site", "gpu"}, {"launch", file}}) {
    const auto r = meridian_run(args, job.cwd);
    INFO(args[0], ": ", r.describe());
    check_input_error(r, "config");
    CHECK(contains(r.err, "site gpu: device = \"cuda\": "));
    CHECK(contains(r.err, "set device = \"cpu\""));  // the way out
    CHECK(!contains(r.err, "cudaError"));
    CHECK(!fs::exists(job.run_dir));  // refused before anything was written or started
  }
}

TEST_CASE("validate: a good job prints it resolved, a bad one lists every problem and exits 78 (config)") {
  TempDir dir("cli-validate");
  Job job(dir, 6);
  job.write();
  const auto ok = meridian_run({"validate", job.file.string(), "--set", "outer.inner_steps=10"}, job.cwd);
  INFO(ok.describe());
  CHECK(ok.exit_code == 0);
  CHECK(contains(ok.out, "[outer]"));
  CHECK(contains(ok.out, "inner_steps = 10"));
  CHECK(contains(ok.out, "name = \"local\""));
  CHECK(!fs::exists(job.run_dir));

  job.lines.insert(job.lines.end(), {"[outer]", "inner_steps = 0", "codec = \"int3\""});
  job.write();
  const auto bad = meridian_run({"validate", job.file.string(), "--set", "wan.loss=1.0"}, job.cwd);
  INFO(bad.describe());
  CHECK(bad.exit_code == 78);
  CHECK(bad.out.empty());
  const auto lines = lines_of(bad.err);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == job.file.string() + ":" + std::to_string(job.line_of("inner_steps")) +
                        ": outer.inner_steps: expected an integer >= 1, found 0");
  CHECK(contains(lines[1], job.file.string() + ":" + std::to_string(job.line_of("codec")) + ": outer.codec: "));
  CHECK(contains(lines[2], "wan.loss: expected a number in [0, 1), found 1"));
}

TEST_CASE("keys: a keypair per site, never overwritten, and validate holds each site's key file to its listed key") {
  TempDir dir("cli-keys");
  Job job(dir, 6);
  job.lines.insert(job.lines.end(), {"[[site]]", "name = \"a\"", "[[site]]", "name = \"b\""});
  job.write();
  const fs::path keys = dir / "keys";
  const auto made = meridian_run({"keys", job.file.string(), "--out", keys.string()}, job.cwd);
  INFO(made.describe());
  REQUIRE(made.exit_code == 0);
  CHECK(contains(made.out, "link_key_file = \"" + keys.string() + "/{site}/link.key\""));
  const auto listed = [&](const std::string& site) {
    const std::string mark = "name = \"" + site + "\": link_public_key = \"";
    const auto at = made.out.find(mark);
    REQUIRE(at != std::string::npos);
    return made.out.substr(at + mark.size(), 40);
  };
  const std::string key_a = listed("a"), key_b = listed("b");
  CHECK(key_a != key_b);
  CHECK(read_file(keys / "a" / "link.pub") == key_a + "\n");
  struct stat st{};
  REQUIRE(::stat((keys / "a" / "link.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((keys / "a").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  // The etcd side: the job's CA apart (its key signs and stays off the sites), each site's certificate.
  CHECK(contains(made.out, "cert_file = \"" + keys.string() + "/{site}/etcd.crt\""));
  CHECK(contains(made.out, "etcdctl user grant-role meridian/cli/b meridian/cli"));
  for (const char* file : {"ca/ca.key", "a/etcd.key", "b/etcd.key", "a/etcd.password", "b/etcd.password"}) {
    REQUIRE(::stat((keys / file).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  CHECK(read_file(keys / "a" / "ca.crt") == read_file(keys / "ca" / "ca.crt"));
  CHECK(contains(read_file(keys / "b" / "etcd.crt"), "-----BEGIN CERTIFICATE-----"));
  const auto again = meridian_run({"keys", job.file.string(), "--out", keys.string()}, job.cwd);
  CHECK(again.exit_code == 78);
  CHECK(contains(again.err, "keys are never overwritten"));
  CHECK(read_file(keys / "a" / "link.pub") == key_a + "\n");

  const std::vector<std::string> base = job.lines;
  const auto list_keys = [&](const std::string& for_a, const std::string& for_b) {
    job.lines = base;  // ... [[site]] name = "a" [[site]] name = "b"
    job.lines.insert(job.lines.end() - 2, "link_public_key = \"" + for_a + "\"");
    job.lines.push_back("link_public_key = \"" + for_b + "\"");
    job.lines.insert(job.lines.end() - 6, {"[transport]", "link_key_file = \"keys/{site}/link.key\""});
    job.write();
  };
  list_keys(key_a, key_b);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--site", "a"}, std::vector<std::string>{}}) {
    std::vector<std::string> argv{"validate", job.file.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto ok = meridian_run(argv, job.cwd);
    INFO(ok.describe());
    CHECK(ok.exit_code == 0);
    CHECK(contains(ok.out, "link_public_key = \"" + key_b + "\""));
  }
  CHECK(contains(meridian_run({"validate", job.file.string(), "--site", "zz"}, job.cwd).err, "no [[site]] of that name"));

  list_keys(key_b, key_a);  // the entries swapped: each file holds another site's key
  const auto swapped = meridian_run({"validate", job.file.string(), "--site", "a"}, job.cwd);
  CHECK(swapped.exit_code == 78);
  CHECK(contains(swapped.err, "holds the secret key of " + key_a + ", but site a's listed key is " + key_b));

  list_keys(key_a, key_b);
  ::chmod((keys / "a" / "link.key").c_str(), 0644);
  const auto open = meridian_run({"validate", job.file.string(), "--site", "a"}, job.cwd);
  CHECK(open.exit_code == 78);
  CHECK(contains(open.err, "chmod 600"));
}

TEST_CASE("train: a bad --set exits 78 naming the override and the key") {
  TempDir dir("cli-set");
  const Job job(dir, 6);
  std::string set, expected;
  SUBCASE("no '='") {
    set = "inner.steps";
    expected = "--set inner.steps: expected key=value";
  }
  SUBCASE("wrong type") {
    set = "inner.steps=abc";
    expected = "--set inner.steps=abc: inner.steps: expected an integer >= 1, found string \"abc\"";
  }
  SUBCASE("unknown key") {
    set = "inner.stepz=3";
    expected = "--set inner.stepz=3: inner.stepz: unknown key (did you mean steps?)";
  }
  SUBCASE("not a dotted key") {
    set = "..=3";
    expected = "expected a dotted key";
  }
  const auto r = job.train({set});
  INFO(r.describe());
  check_input_error(r, "config");
  CHECK(contains(r.err, expected));
  CHECK(!fs::exists(job.run_dir));
}

TEST_CASE("train: a missing job file or data file exits 78 or 65 naming it") {
  TempDir dir("cli-missing");
  SUBCASE("job file") {
    const auto r = meridian_run({"train", "--config", (dir / "nope.toml").string()}, dir.path());
    INFO(r.describe());
    check_input_error(r, "config");
    CHECK(contains(r.err, (dir / "nope.toml").string() + ": cannot read the job file: no such file"));
  }
  SUBCASE("data file, relative to the job file") {
    Job job(dir, 6);
    job.replace("path = ", "path = \"nope.txt\"");
    const auto r = job.train();
    INFO(r.describe());
    check_input_error(r, "data");
    CHECK(contains(r.err, (dir / "nope.txt").string()));
    CHECK(contains(r.err, "does not exist"));
  }
}

TEST_CASE("train and validate: bad data files exit 65 with a message naming the file") {
  TempDir dir("cli-data");
  Job job(dir, 6);
  const fs::path data = dir / "data.bin";
  std::vector<std::string> expected;
  SUBCASE("empty") {
    write_bytes(data, "");
    expected = {"is empty"};
  }
  SUBCASE("llmc-bin shard with a bad magic") {
    write_llmc(data, std::vector<std::uint16_t>(1000, 65), 12345);
    job.insert_after("path = ", "format = \"llmc-bin\"");
    expected = {"bad header", "magic is 12345, expected 20240520"};
  }
  SUBCASE("llmc-bin shard cut short") {
    write_llmc(data, std::vector<std::uint16_t>(1000, 65));
    fs::resize_file(data, fs::file_size(data) - 10);
    job.insert_after("path = ", "format = \"llmc-bin\"");
    expected = {"truncated", "the header says 1000 tokens"};
  }
  SUBCASE("llmc-bin token outside the vocabulary") {
    std::vector<std::uint16_t> tokens(1000, 65);
    tokens[500] = 300;
    write_llmc(data, tokens);
    job.insert_after("path = ", "format = \"llmc-bin\"");
    expected = {"token 300 at index 500", "vocabulary of 256"};
  }
  SUBCASE("validation split shorter than one window") {
    write_bytes(data, corpus_prefix(300));  // 10% of 300 = 30 tokens, fewer than 33
    expected = {"validation data", "fewer than one window"};
  }
  job.replace("path = ", "path = \"data.bin\"");
  const auto r = job.train();
  INFO(r.describe());
  check_input_error(r, "data");
  CHECK(contains(r.err, data.string()));
  for (const auto& e : expected) CHECK_MESSAGE(contains(r.err, e), e);
  // validate finds the same, before anything runs.
  const auto v = meridian_run({"validate", job.file.string()}, job.cwd);
  INFO(v.describe());
  check_input_error(v, "data");
  CHECK(v.out.empty());
  for (const auto& e : expected) CHECK_MESSAGE(contains(v.err, e), e);
}

TEST_CASE("train: a data file shorter than one window exits 65 naming the file") {
  TempDir dir("cli-short");
  Job job(dir, 6);
  write_bytes(dir / "short.txt", corpus_prefix(20));
  job.replace("path = ", "path = \"short.txt\"");
  const auto r = job.train();
  INFO(r.describe());
  check_input_error(r, "data");
  CHECK(contains(r.err, (dir / "short.txt").string()));
}

TEST_CASE("eval: one JSON object whose loss equals evaluate() in-process for the same checkpoint") {
  TempDir dir("cli-eval");
  const Job job(dir, 6);
  REQUIRE(job.train().exit_code == 0);

  // 1000 bytes = 30 whole windows of 33 tokens plus a 10-token tail that is dropped.
  const fs::path data = dir / "held_out.txt";
  write_bytes(data, corpus_prefix(1000));
  const std::size_t expected_tokens = 1000 / (kSeqLen + 1) * kSeqLen;
  REQUIRE(expected_tokens == 960);

  const auto r = meridian_run({"eval", "--checkpoint", job.run_dir.string(), "--data", data.string()}, job.cwd);
  const auto j = eval_output(r);
  CHECK(j["tokens"].get<std::size_t>() == expected_tokens);
  const auto in_process = evaluate_in_process(job.run_dir, data);
  CHECK(in_process.tokens == expected_tokens);
  check_relative(j["loss"].get<double>(), in_process.loss, 1e-6);
  CHECK(j["loss"].get<double>() < std::log(256.0));  // trained: better than uniform

  // The checkpoint file and the checkpoints/ directory give the same result.
  for (const auto& target : {job.run_dir / "checkpoints", job.run_dir / "checkpoints" / ckpt_name(6)}) {
    const auto other =
        eval_output(meridian_run({"eval", "--checkpoint", target.string(), "--data", data.string()}, job.cwd));
    CHECK_MESSAGE(other == j, target.string());
  }
  // The batch size does not change the definition.
  const auto batch7 = eval_output(meridian_run(
      {"eval", "--checkpoint", job.run_dir.string(), "--data", data.string(), "--batch", "7"}, job.cwd));
  CHECK(batch7["tokens"] == j["tokens"]);
  check_relative(batch7["loss"].get<double>(), in_process.loss, 1e-5);
  // An llm.c shard of the same tokens scores the same.
  const auto text = corpus_prefix(1000);
  write_llmc(dir / "held_out.bin", std::vector<std::uint16_t>(text.begin(), text.end()));
  const auto shard = eval_output(meridian_run({"eval", "--checkpoint", job.run_dir.string(), "--data",
                                               (dir / "held_out.bin").string(), "--format", "llmc-bin"},
                                              job.cwd));
  CHECK(shard == j);
}

TEST_CASE("eval: bad data files exit 65 naming the file") {
  TempDir dir("cli-eval-data");
  const Job job(dir, 2);
  REQUIRE(job.train().exit_code == 0);
  struct Case {
    std::string name, expected;
    std::vector<std::string> extra_args;
  };
  const std::vector<Case> cases = {{"empty", "is empty", {}},
                                   {"short", "32 tokens, fewer than one window of 33", {}},
                                   {"bad-magic", "magic is 1, expected 20240520", {"--format", "llmc-bin"}},
                                   {"missing", "does not exist", {}}};
  write_bytes(dir / "empty", "");
  write_bytes(dir / "short", corpus_prefix(32));
  write_llmc(dir / "bad-magic", std::vector<std::uint16_t>(100, 65), 1);
  for (const auto& c : cases) {
    const fs::path data = dir / c.name;
    std::vector<std::string> args{"eval", "--checkpoint", job.run_dir.string(), "--data", data.string()};
    args.insert(args.end(), c.extra_args.begin(), c.extra_args.end());
    const auto r = meridian_run(args, job.cwd);
    INFO(c.name, ": ", r.describe());
    check_input_error(r, "data");
    CHECK(contains(r.err, data.string()));
    CHECK(contains(r.err, c.expected));
    CHECK(r.out.empty());
  }
}

TEST_CASE("eval: a truncated newest checkpoint is skipped with a warning, and none usable is an error") {
  TempDir dir("cli-corrupt");
  const Job job(dir, 4);
  REQUIRE(job.train({"checkpoint.every=2"}).exit_code == 0);
  const fs::path ckpts = job.run_dir / "checkpoints";
  REQUIRE(fs::exists(ckpts / ckpt_name(2)));
  REQUIRE(fs::exists(ckpts / ckpt_name(4)));
  const fs::path data = dir / "held_out.txt";
  write_bytes(data, corpus_prefix(2000));
  const std::vector<std::string> args{"eval", "--checkpoint", job.run_dir.string(), "--data", data.string()};

  const double newest_loss = eval_output(meridian_run(args, job.cwd))["loss"].get<double>();
  const double previous_loss = evaluate_in_process(ckpts / ckpt_name(2), data).loss;
  REQUIRE(newest_loss != previous_loss);  // else falling back would go unnoticed

  fs::resize_file(ckpts / ckpt_name(4), fs::file_size(ckpts / ckpt_name(4)) / 2);
  const auto r = meridian_run(args, job.cwd);
  const auto j = eval_output(r);
  INFO(r.describe());
  check_relative(j["loss"].get<double>(), previous_loss, 1e-6);
  CHECK(contains(r.err, "warning"));
  CHECK(contains(r.err, (ckpts / ckpt_name(4)).string()));
  CHECK(contains(r.err, "truncated"));

  // Every checkpoint bad (one truncated, one with a flipped byte): exit 66, nothing on stdout.
  flip_byte(ckpts / ckpt_name(2), static_cast<std::streamoff>(fs::file_size(ckpts / ckpt_name(2)) / 2));
  for (const auto& sub : std::vector<std::vector<std::string>>{
           args, {"export", "--checkpoint", job.run_dir.string(), "--out", (dir / "exp").string()}}) {
    const auto bad = meridian_run(sub, job.cwd);
    INFO(bad.describe());
    check_input_error(bad, "checkpoint");
    CHECK(contains(bad.err, "no usable checkpoint in " + ckpts.string()));
    CHECK(contains(bad.err, (ckpts / ckpt_name(2)).string()));
    CHECK(contains(bad.err, (ckpts / ckpt_name(4)).string()));
    CHECK(bad.out.empty());
  }
  CHECK(!fs::exists(dir / "exp"));

  // Naming a corrupt file directly is an error too, not a fallback.
  const auto direct = meridian_run({"eval", "--checkpoint", (ckpts / ckpt_name(4)).string(), "--data", data.string()},
                                   job.cwd);
  INFO(direct.describe());
  check_input_error(direct, "checkpoint");
  CHECK(contains(direct.err, (ckpts / ckpt_name(4)).string()));

  const auto nowhere = meridian_run({"eval", "--checkpoint", (dir / "nope").string(), "--data", data.string()}, job.cwd);
  INFO(nowhere.describe());
  check_input_error(nowhere, "checkpoint");
  CHECK(contains(nowhere.err, "no checkpoint at " + (dir / "nope").string()));
}

TEST_CASE("export: model.safetensors holds every checkpoint tensor under its Hugging Face name") {
  TempDir dir("cli-export");
  const Job job(dir, 4);
  REQUIRE(job.train().exit_code == 0);
  const fs::path out = dir / "hf";
  const auto r = meridian_run({"export", "--checkpoint", job.run_dir.string(), "--out", out.string()}, job.cwd);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.out, ckpt_name(4)));

  const auto snap = load_model_snapshot(posix_env(), job.run_dir, [](const std::string&) {});
  CHECK(snap.step == 4);
  const auto tensors = read_safetensors(out / "model.safetensors");
  const auto layout = ParamLayout::of(snap.shape);
  CHECK(tensors.size() == layout.views().size());
  REQUIRE(tensors.contains("transformer.wte.weight"));
  CHECK(tensors.at("transformer.wte.weight").shape == std::vector<std::int64_t>{256, 32});
  for (const auto& v : layout.views()) {
    const auto it = tensors.find("transformer." + v.name);
    REQUIRE_MESSAGE(it != tensors.end(), v.name);
    CHECK(it->second.dtype == "F32");
    CHECK_MESSAGE(it->second.shape == v.shape, v.name);
    const auto expected = layout.slice(std::span<const float>(snap.params), v);
    CHECK_MESSAGE(std::equal(expected.begin(), expected.end(), it->second.data.begin(), it->second.data.end()),
                  v.name);
  }

  const auto config = nlohmann::json::parse(read_file(out / "config.json"));
  CHECK(config["n_embd"] == 32);
  CHECK(config["n_layer"] == 2);
  CHECK(config["n_head"] == 2);
  CHECK(config["n_positions"] == kSeqLen);
  CHECK(config["vocab_size"] == 256);
  CHECK(!fs::exists(out / "model.safetensors.tmp"));
}

TEST_CASE("usage errors exit 2 with a hint on stderr") {
  TempDir dir("cli-usage");
  const std::string cfg = (dir / "job.toml").string();
  const std::vector<std::vector<std::string>> cases = {
      {},                                                   // no subcommand
      {"frob"},                                             // unknown subcommand
      {"train"},                                            // missing --config
      {"train", "--config", cfg, "--bogus"},                // unknown option
      {"eval", "--checkpoint", "x"},                        // missing --data
      {"eval", "--checkpoint", "x", "--data", "y", "--batch", "0"},  // not a positive number
      {"export", "--out", "x"},                             // missing --checkpoint
  };
  for (const auto& args : cases) {
    const auto r = meridian_run(args, dir.path());
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    INFO("meridian ", shown, "\n", r.describe());
    CHECK(r.exit_code == 2);
    CHECK(contains(r.err, "--help"));
    CHECK(r.out.empty());
  }
  CHECK(!fs::exists(dir / "runs"));

  const auto help = meridian_run({"--help"}, dir.path());
  INFO(help.describe());
  CHECK(help.exit_code == 0);
  for (const char* sub : {"train", "eval", "export"}) CHECK(contains(help.out, sub));
}

TEST_CASE("usage errors found after parsing exit 2 too") {
  TempDir dir("cli-usage2");
  write_bytes(dir / "data.txt", corpus_prefix(100));
  const auto r = meridian_run(
      {"eval", "--checkpoint", (dir / "x").string(), "--data", (dir / "data.txt").string(), "--format", "csv"},
      dir.path());
  INFO(r.describe());
  CHECK(contains(r.err, "--format"));
  CHECK(r.exit_code == 2);
}

TEST_CASE("run_process: exit code and both streams captured, no deadlock on big output, killed at the deadline") {
  const auto r = testing::run_process(
      {"/bin/sh", "-c", "head -c 200000 /dev/zero | tr '\\0' o; head -c 150000 /dev/zero | tr '\\0' e >&2; exit 3"});
  CHECK(r.exit_code == 3);
  CHECK(!r.timed_out);
  CHECK(r.out == std::string(200000, 'o'));
  CHECK(r.err == std::string(150000, 'e'));

  testing::ProcessOptions quick;
  quick.timeout = std::chrono::milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  const auto hung = testing::run_process({"/bin/sh", "-c", "echo started; exec sleep 30"}, quick);
  CHECK(hung.timed_out);
  CHECK(hung.signal == SIGKILL);
  CHECK(hung.out == "started\n");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));

  const auto missing = testing::run_process({"/nonexistent/program"});
  CHECK(missing.exit_code == 127);
  CHECK(contains(missing.err, "execve failed"));
}
