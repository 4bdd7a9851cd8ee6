#pragma once
// What a cluster launcher tells the processes it starts, in the usual variables: torchrun's
// RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, or SLURM's SLURM_PROCID /
// SLURM_NTASKS. Read once, at the command line, and turned into explicit options; nothing below
// the command line reads the environment.
#include <cstdint>
#include <optional>
#include <string>

namespace meridian {

struct LauncherEnvironment {
  std::optional<int> rank;        // RANK, else SLURM_PROCID
  std::optional<int> world_size;  // WORLD_SIZE, else SLURM_NTASKS
  std::optional<std::string> master_addr;
  std::optional<std::uint16_t> master_port;
};

// Error(Config) naming the variable when one is set but is not a valid number.
LauncherEnvironment launcher_environment();

}  // namespace meridian
