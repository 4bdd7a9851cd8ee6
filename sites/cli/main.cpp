// meridian: the per-site program. Exit codes: 0 success, 1 a problem with the input or the
// environment (config, data, checkpoint, disk; the message says what and where), 2 bad usage,
// 70 an internal error (a bug in meridian: please report the message).
#include <cstdio>
#include <exception>
#include <vector>

#include "core/util/error.hpp"
#include "sites/cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"meridian: multi-datacenter LLM training"};
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, meridian::cli::Action>> commands;
  struct Command {
    const char* name;
    const char* help;
    meridian::cli::Action (*add)(CLI::App&);
  };
  static constexpr Command kCommands[] = {
      {"train", "train one replica from a job file", meridian::cli::add_train_command},
      {"eval", "mean next-token loss of a checkpoint on a data file, as JSON", meridian::cli::add_eval_command},
      {"generate", "continue a prompt with a checkpoint's model (sampling, top-k, top-p), streaming the text",
       meridian::cli::add_generate_command},
      {"export", "write a checkpoint as a Hugging Face model directory (GPT-2 or Llama)",
       meridian::cli::add_export_command},
      {"import", "read a Hugging Face model directory into a meridian checkpoint", meridian::cli::add_import_command},
      {"tokenize", "text and JSON Lines into llm.c shards with a BPE tokenizer", meridian::cli::add_tokenize_command},
      {"tokenizer", "tokenizer train: a byte-level BPE from a corpus, as a tokenizer.json",
       meridian::cli::add_tokenizer_command},
      {"site", "the site agent: runs and watches a site's replicas", meridian::cli::add_site_command},
      {"replica", "one replica of a site (started by `meridian site`)", meridian::cli::add_replica_command},
      {"launch", "run every site of a job on this machine (and a local etcd)", meridian::cli::add_launch_command},
      {"validate", "check a job file and print it resolved, or list every problem",
       meridian::cli::add_validate_command},
      {"report", "plots (SVG) and an index.html of a run directory", meridian::cli::add_report_command},
      {"keys", "write the CURVE keypairs of a job's links, a directory per site", meridian::cli::add_keys_command},
      {"sim", "predict a job at scale (sites, WAN, failures) on a virtual clock, per algorithm",
       meridian::cli::add_sim_command},
  };
  for (const auto& c : kCommands) {
    auto* sub = app.add_subcommand(c.name, c.help);
    commands.emplace_back(sub, c.add(*sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, action] : commands)
      if (sub->parsed()) return action();
  } catch (const meridian::Error& e) {
    std::fprintf(stderr, "meridian: %s error: %s\n", std::string(meridian::to_string(e.kind())).c_str(), e.what());
    return meridian::exit_code(e.kind());
  } catch (const meridian::InvariantError& e) {
    std::fprintf(stderr, "meridian: internal error (a bug): %s\n", e.what());
    return meridian::kBugExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meridian: internal error (a bug): %s\n", e.what());
    return meridian::kBugExitCode;
  }
  return 2;
}
