#pragma once
// SiteParts over a site's Communicator: a sharded outer state's parts (each replica's ShardMap
// part) put together by the site's group. Bytes of any length go to the leader (gather) and, for
// every replica, back out in one bundle; values per parameter by the communicator's all-gather.
#include "core/model/shard_map.hpp"
#include "crosssite/round/site_parts.hpp"
#include "intrasite/comm/communicator.hpp"

namespace meridian {

class GroupParts final : public SiteParts {
 public:
  // `map`: the outer state's cut, one part per rank of `group`.
  GroupParts(Communicator& group, const ShardMap& map);
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine) override;
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine) override;
  void all_gather(std::span<float> values) override;
  std::size_t recut(OuterState& state, std::span<float> weights) override;

 private:
  Communicator& group_;
  const ShardMap& map_;
};

}  // namespace meridian
