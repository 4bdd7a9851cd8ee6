#pragma once
// Secrets live in files only their owner can read, named by path: never inline in a job file
// (which is shared and stored in every checkpoint) and never on a command line (which `ps` shows
// to every user of the host).
#include <filesystem>
#include <string>

namespace meridian {

// 32 random bytes from the kernel, as 64 hex digits. Error(Io) if the kernel gives none.
std::string random_secret();
// Writes `secret` to path, readable and writable by its owner only (mode 0600, also when the file
// was there before), at once: a reader sees all of it or the file as it was. Error(Io) when it cannot.
void write_secret_file(const std::filesystem::path& path, const std::string& secret);
// The secret in path, without a trailing newline. `what` names it in errors: Error(Config) when the
// file is missing, empty, or readable or writable by anyone but its owner (its mode is printed,
// with the chmod that fixes it).
std::string read_secret_file(const std::filesystem::path& path, const std::string& what);
// Creates dir (and its parents) and makes it its owner's alone (0700): where secrets are written.
// Error(Io) when it cannot.
void make_private_directory(const std::filesystem::path& dir);

}  // namespace meridian
