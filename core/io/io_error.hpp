#pragma once
// The error of a failed system call on a file: what was done, to which path, and why. The default
// `err` reads errno at the call site, before anything else can overwrite it.
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "core/util/error.hpp"

namespace meridian {

[[noreturn]] inline void throw_io(const char* op, const std::filesystem::path& path, int err = errno) {
  throw make_error(ErrorKind::Io, op, " ", path.string(), ": ", std::generic_category().message(err));
}

}  // namespace meridian
