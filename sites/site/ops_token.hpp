#pragma once
// The site's ops token, as the agent checks it and meridianctl offers it: MERIDIAN_OPS_TOKEN when
// set, else the file [ops] token_file names. Never a job file's text or a command-line argument:
// a job file is shared and stored in every checkpoint, and `ps` shows any user every process's
// arguments (core/io/secret_file).
#include <string>

#include "core/config/job_config.hpp"

namespace meridian {

// Empty when neither is given (the agent then refuses every command that changes anything).
// Error(Config) when the token file is missing, empty, or open to other users.
std::string ops_token(const JobConfig& config);

}  // namespace meridian
