#include "crosssite/round/vouches.hpp"

#include "crosssite/round/mutant.hpp"

namespace meridian {

void Vouches::read(const Vouch& vouch) {
  // Its own too: a restarted site's earlier incarnation applied what it vouched for.
  const auto [it, fresh] = read_.try_emplace(vouch.site, vouch);
  if (!fresh && it->second.version < vouch.version) it->second = vouch;
}

std::optional<CommitLog::Contradiction> Vouches::against(const CommitRecord& record, const CommitLog& log,
                                                         CrossSiteEvents& events) {
  if (mutant(Mutant::IgnoreVouches)) return std::nullopt;
  const auto judge = [&](const std::string& by, std::int64_t vouched,
                         const Digest& digest) -> std::optional<CommitLog::Contradiction> {
    auto found = log.contradiction(record.number, vouched, digest);
    if (!found) return std::nullopt;
    found->why = (by == site_ ? "version " + std::to_string(vouched) + " read here"
                              : by + "'s vouch for version " + std::to_string(vouched)) +
                 ": " + found->why;
    if (said_.emplace(record.number, by).second)
      events.push_back({"commit_contradicted", by, record.number, found->why});
    return found;
  };
  if (const auto newest = log.digest(log.newest()))
    if (auto why = judge(site_, log.newest(), *newest)) return why;
  for (const auto& [site, vouch] : read_)
    if (vouch.version >= record.number)
      if (auto why = judge(site, vouch.version, vouch.digest)) return why;
  return std::nullopt;
}

std::optional<Digest> Vouches::own(std::int64_t version) const {
  const auto mine = read_.find(site_);
  if (mine == read_.end() || mine->second.version != version) return std::nullopt;
  return mine->second.digest;
}

}  // namespace meridian
