// A job file (core/config/job_config.hpp): the TOML text as `meridian validate`, `launch` and every
// site read it, from a file under /dev/shm (the loader takes a path; includes are resolved next to
// it). A job that loads must be written out by to_toml and load again to an equal config (the
// resolved file `launch` hands each site); every refusal names a problem; each site's own config
// and every pair's WAN link can be derived.
#include "core/config/job_config.hpp"
#include "fuzz/fuzz_common.hpp"

int meridian_fuzz_config(const std::uint8_t* data, std::size_t size) {
  using namespace meridian;
  const meridian::fuzz::TempFile file("job.toml", {reinterpret_cast<const std::byte*>(data), size});
  auto loaded = try_load_job_config(file.path());
  if (const auto* problems = std::get_if<std::vector<ConfigProblem>>(&loaded)) {
    MERIDIAN_FUZZ_EXPECT(!problems->empty(), "a job refused without a problem");
    for (const auto& p : *problems) MERIDIAN_FUZZ_EXPECT(!p.message.empty() && !p.to_string().empty());
    return 0;
  }
  const JobConfig& config = std::get<JobConfig>(loaded);
  for (const auto& site : config.sites) {
    try {
      (void)config_for_site(config, site.name);
      for (const auto& other : config.sites) (void)wan_link(config, site.name, other.name);
    } catch (const Error&) {
      // e.g. two sites of one name: refused where a site's config is made
    }
  }
  const std::string text = to_toml(config);
  file.write(std::as_bytes(std::span(text)));
  auto again = try_load_job_config(file.path());
  if (const auto* problems = std::get_if<std::vector<ConfigProblem>>(&again))
    throw meridian::fuzz::Finding("a loaded job, written out by to_toml, does not load again: " +
                                  problems->front().to_string() + "\n" + text);
  JobConfig& copy = std::get<JobConfig>(again);
  copy.derived = config.derived;  // written out as settings: read back, they are the file's own
  MERIDIAN_FUZZ_EXPECT(copy == config, "a job written out by to_toml loads as another:\n", text);
  return 0;
}

MERIDIAN_FUZZ_TARGET(config)
