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
  auto* train = app.add_subcommand("train", "train one replica from a job file");
  commands.emplace_back(train, meridian::cli::add_train_command(*train));
  auto* eval = app.add_subcommand("eval", "mean next-token loss of a checkpoint on a data file, as JSON");
  commands.emplace_back(eval, meridian::cli::add_eval_command(*eval));
  auto* exp = app.add_subcommand("export", "write a checkpoint as Hugging Face GPT-2 files");
  commands.emplace_back(exp, meridian::cli::add_export_command(*exp));
  auto* site = app.add_subcommand("site", "the site agent: runs and watches a site's replicas");
  commands.emplace_back(site, meridian::cli::add_site_command(*site));
  auto* replica = app.add_subcommand("replica", "one replica of a site (started by `meridian site`)");
  commands.emplace_back(replica, meridian::cli::add_replica_command(*replica));
  auto* validate = app.add_subcommand("validate", "check a job file and print it resolved, or list every problem");
  commands.emplace_back(validate, meridian::cli::add_validate_command(*validate));
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
    return e.kind() == meridian::ErrorKind::Usage ? 2 : 1;
  } catch (const meridian::InvariantError& e) {
    std::fprintf(stderr, "meridian: internal error (a bug): %s\n", e.what());
    return 70;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "meridian: internal error (a bug): %s\n", e.what());
    return 70;
  }
  return 2;
}
