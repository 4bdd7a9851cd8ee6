#include "sites/replica/ops_inbox.hpp"

#include <algorithm>
#include <chrono>

#include "core/checkpoint/checkpoint.hpp"
#include "core/checkpoint/store.hpp"
#include "core/io/env.hpp"
#include "core/train/trainer.hpp"
#include "core/util/error.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {

std::int64_t OpsInbox::resume_after(const std::vector<std::optional<std::int64_t>>& applied, std::int64_t filed) {
  std::optional<std::int64_t> known;
  for (const auto& a : applied)
    if (a) known = std::max(known.value_or(*a), *a);
  return known.value_or(filed);
}

float OpsInbox::newest(bool leader) {
  if (!leader) return 0;
  return static_cast<float>(store_.add(site_keys::ops_commands(), 0));
}

OpsInbox::Applied OpsInbox::apply(std::int64_t newest, Trainer& trainer, bool leader) {
  Applied out;
  for (; applied_ < newest; ++applied_) {
    nlohmann::json result;
    try {
      const auto bytes = store_.get(site_keys::ops_command(applied_ + 1), std::chrono::seconds(10));
      const auto* text = reinterpret_cast<const char*>(bytes.data());
      const auto command = nlohmann::json::parse(text, text + bytes.size());
      const std::string kind = command.at("command").get<std::string>();
      result = {{"command", kind}, {"number", applied_ + 1}, {"step", trainer.state().step}};
      if (kind == "checkpoint") {
        trainer.save_checkpoint(leader);
      } else if (kind == "set-lr") {
        trainer.set_guard_state(command.at("scale").get<double>(), trainer.state().rollbacks);
        result["scale"] = trainer.state().lr_scale;
      } else if (kind == "rollback" && command.contains("version")) {
        if (!version_rollback_) throw make_error(ErrorKind::Usage, "rollback to a version: this job has no versions");
        std::optional<double> scale;
        if (command.contains("lr_scale")) scale = command["lr_scale"].get<double>();
        result.update(version_rollback_(trainer, command.at("version").get<std::int64_t>(), scale));
        result["scale"] = trainer.state().lr_scale;
      } else if (kind == "rollback") {
        const std::string path = command.at("path").get<std::string>();
        const double scale = command.contains("lr_scale") ? command["lr_scale"].get<double>() : trainer.state().lr_scale;
        const auto rollbacks = trainer.state().rollbacks;
        if (checkpoint_rollback_)
          result.update(checkpoint_rollback_(trainer, path));
        else
          trainer.restore(read_checkpoint(env_, path), path);
        trainer.set_guard_state(scale, rollbacks);
        out.restored = true;
        result.update({{"path", path}, {"to_step", trainer.state().step}, {"scale", scale}});
      } else if (kind == "drain" || kind == "resume" || kind == "pause-outer" || kind == "resume-outer") {
        on_mode_(kind, result);
      } else {
        result["error"] = "unknown command";
      }
    } catch (const Error& e) {
      // A peer lost in a collective (a sharded checkpoint's gather) is the group's to handle.
      if (e.kind() == ErrorKind::Peer || e.kind() == ErrorKind::Timeout) throw;
      result["error"] = e.what();
    } catch (const nlohmann::json::exception& e) {
      result["error"] = std::string("malformed command: ") + e.what();
    }
    out.done.push_back(std::move(result));
  }
  return out;
}

}  // namespace meridian
