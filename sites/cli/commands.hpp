#pragma once
// The subcommands of the `meridian` program. Each registers its options on the CLI11 app and
// returns the action to run once parsing succeeded.
#include <functional>
#include <string_view>

#include <CLI/CLI.hpp>

namespace meridian::cli {

using Action = std::function<int()>;

Action add_train_command(CLI::App& app);
Action add_eval_command(CLI::App& app);
Action add_generate_command(CLI::App& app);
Action add_export_command(CLI::App& app);
Action add_import_command(CLI::App& app);
Action add_tokenize_command(CLI::App& app);
Action add_tokenizer_command(CLI::App& app);
Action add_site_command(CLI::App& app);
Action add_replica_command(CLI::App& app);
Action add_launch_command(CLI::App& app);
Action add_validate_command(CLI::App& app);
Action add_sim_command(CLI::App& app);
Action add_report_command(CLI::App& app);
Action add_keys_command(CLI::App& app);

}  // namespace meridian::cli

namespace meridian {
struct JobConfig;
}

namespace meridian::cli {

// Start-up check of the sites' devices (`site` empty: every site of the job): a site with
// device = "cuda" on a machine without a usable GPU is an Error(Config) saying why, before any
// file is written or process started.
void require_devices(const JobConfig& config, std::string_view site = {});

}  // namespace meridian::cli
