#include "sites/keys/link_keys.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/io/secret_file.hpp"
#include "core/util/error.hpp"
#include "transport/link/curve.hpp"

namespace meridian {
namespace {

std::string public_key_in(const std::filesystem::path& file, const std::string& site) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string key = text.str();
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (!in || !is_curve_key(key))
    throw make_error(ErrorKind::Config, "[transport] link_public_key_file ", file.string(), ": no CURVE public key of site ",
                     site, " there (40 characters of Z85, as `meridian keys` writes it)");
  return key;
}

}  // namespace

std::filesystem::path site_path(const std::filesystem::path& path, const std::string& site) {
  std::string text = path.string();
  constexpr std::string_view kSite = "{site}";
  for (auto at = text.find(kSite); at != std::string::npos; at = text.find(kSite, at + site.size()))
    text.replace(at, kSite.size(), site);
  return text;
}

std::filesystem::path link_key_file(const JobConfig& config, const std::string& site) {
  MERIDIAN_CHECK(config.transport.link_key_file.has_value(), "link_key_file: the job's links speak no CURVE");
  return site_path(*config.transport.link_key_file, site);
}

std::map<std::string, std::string> listed_link_keys(const JobConfig& config) {
  std::map<std::string, std::string> keys;
  if (!config.transport.link_key_file) return keys;
  for (const auto& s : config.sites) {
    if (!s.link_public_key.empty())
      keys[s.name] = s.link_public_key;
    else if (config.transport.link_public_key_file)
      keys[s.name] = public_key_in(site_path(*config.transport.link_public_key_file, s.name), s.name);
  }
  return keys;
}

std::optional<LinkCurve> link_curve(const JobConfig& config, const std::string& site) {
  if (!config.transport.link_key_file) return std::nullopt;
  const auto keys = listed_link_keys(config);
  const auto listed = keys.find(site);
  MERIDIAN_CHECK(listed != keys.end(), "link_curve: no key listed for site ", site);
  const std::filesystem::path file = link_key_file(config, site);
  LinkCurve curve{read_curve_secret_file(file, "[transport] link_key_file: site " + site + "'s CURVE secret key"), {}};
  if (curve.own.public_key != listed->second)
    throw make_error(ErrorKind::Config, "[transport] link_key_file ", file.string(), " holds the secret key of ",
                     curve.own.public_key, ", but site ", site, "'s listed key is ", listed->second,
                     ": the file is another site's, or the list is out of date");
  for (const auto& [name, key] : keys) curve.job_keys.insert(key);
  return curve;
}

std::map<std::string, std::string> write_link_keys(const JobConfig& config, const std::filesystem::path& dir) {
  for (const auto& site : config.sites)
    if (std::filesystem::exists(dir / site.name / "link.key"))
      throw make_error(ErrorKind::Config, (dir / site.name / "link.key").string(), " exists: keys are never overwritten "
                       "(the job's peers know the old key); remove the directory first to replace them");
  std::map<std::string, std::string> keys;
  for (const auto& site : config.sites) {
    const CurveKeypair pair = make_curve_keypair();
    make_private_directory(dir / site.name);
    write_secret_file(dir / site.name / "link.key", pair.secret_key + "\n");
    std::ofstream pub(dir / site.name / "link.pub");
    pub << pair.public_key << "\n";
    if (!pub.flush())
      throw make_error(ErrorKind::Io, "cannot write ", (dir / site.name / "link.pub").string());
    keys[site.name] = pair.public_key;
  }
  return keys;
}

}  // namespace meridian
