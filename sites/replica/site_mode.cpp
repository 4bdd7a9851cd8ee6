#include "sites/replica/site_mode.hpp"

#include <span>
#include <thread>

#include "intrasite/comm/communicator.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {

std::string_view to_string(SiteMode::State s) {
  switch (s) {
    case SiteMode::State::Training: return "training";
    case SiteMode::State::Draining: return "draining";
    case SiteMode::State::Drained: return "drained";
  }
  return "?";
}

void SiteMode::agree(Communicator& group, bool leader) {
  float seen[2] = {0, 0};  // state, paused: the leader's reading, the others add nothing
  if (leader && store_.check(site_keys::ops_mode())) {
    const auto bytes = store_.get(site_keys::ops_mode(), std::chrono::milliseconds(0));
    const auto* text = reinterpret_cast<const char*>(bytes.data());
    const auto j = nlohmann::json::parse(text, text + bytes.size(), nullptr, false);
    if (j.is_object()) {
      const auto state = j.value("state", std::string());
      seen[0] = state == "drained" ? 2.0f : state == "draining" ? 1.0f : 0.0f;
      seen[1] = j.value("outer_paused", false) ? 1.0f : 0.0f;
    }
  }
  group.allreduce(std::span<float>(seen, 2), ReduceOp::Sum);
  state_ = seen[0] > 1.5f ? State::Drained : seen[0] > 0.5f ? State::Draining : State::Training;
  outer_paused_ = seen[1] > 0.5f;
  resume_wanted_ = false;
}

void SiteMode::command(const std::string& kind, nlohmann::json& result) {
  const auto refuse = [&](const char* why) { result["error"] = why; };
  if (kind == "drain") {
    if (state_ != State::Training) return refuse("already drained or draining");
    state_ = State::Draining;
  } else if (kind == "resume") {
    if (state_ == State::Training) return refuse("not drained");
    if (state_ == State::Draining) {
      state_ = State::Training;  // before the drain took effect: nothing to come back from
      result["note"] = "the drain was cancelled before it took effect";
    } else {
      resume_wanted_ = true;
    }
  } else if (kind == "pause-outer") {
    if (outer_paused_) return refuse("the outer exchange is paused already");
    outer_paused_ = true;
  } else if (kind == "resume-outer") {
    if (!outer_paused_) return refuse("the outer exchange is not paused");
    outer_paused_ = false;
  } else {
    return refuse("not a mode command");
  }
  result["state"] = to_string(state_);
  result["outer_paused"] = outer_paused_;
}

void SiteMode::drained(bool leader, nlohmann::json detail) {
  state_ = State::Drained;
  resume_wanted_ = false;
  publish(leader, std::move(detail));
}

void SiteMode::resumed(bool leader, nlohmann::json detail) {
  state_ = State::Training;
  resume_wanted_ = false;
  publish(leader, std::move(detail));
}

void SiteMode::publish(bool leader, nlohmann::json detail) const {
  if (!leader) return;
  detail.update({{"state", to_string(state_)}, {"outer_paused", outer_paused_}});
  const std::string text = detail.dump();
  store_.set(site_keys::ops_mode(), std::as_bytes(std::span(text.data(), text.size())));
}

Parked park(Communicator& group, bool leader, const SiteMode& mode, const ParkHooks& hooks,
            std::chrono::milliseconds every, std::chrono::milliseconds job_every) {
  const double job_every_s = static_cast<double>(job_every.count()) / 1000.0;
  double next_job_check = hooks.now();
  while (true) {
    float control[3] = {hooks.newer_generation() ? 1.0f : 0.0f, 0, 0};
    if (leader) {
      control[1] = static_cast<float>(hooks.newest_command());
      if (hooks.now() >= next_job_check) {
        next_job_check = hooks.now() + job_every_s;
        control[2] = hooks.job_over() ? 1.0f : 0.0f;
      }
    }
    group.allreduce(std::span<float>(control, 3), ReduceOp::Sum);
    if (control[0] > 0) return Parked::Regroup;
    hooks.apply(static_cast<std::int64_t>(control[1]));
    if (mode.resume_wanted()) return Parked::Resumed;
    if (control[2] > 0) return Parked::JobOver;
    std::this_thread::sleep_for(every);
  }
}

}  // namespace meridian
