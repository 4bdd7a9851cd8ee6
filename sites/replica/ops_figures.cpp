#include "sites/replica/ops_figures.hpp"

#include <algorithm>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "core/train/trainer.hpp"
#include "sites/replica/site_exchange.hpp"
#include "intrasite/comm/store.hpp"
#include "intrasite/group/protocol.hpp"

namespace meridian {

void OpsFigures::joined(double seconds) {
  if (joins_++ > 0) ++heals_;
  last_join_s_ = seconds;
}

void OpsFigures::computed(double step_s) {
  ++computed_;
  step_s_ = step_s;
}

void OpsFigures::publish(Store& store, const SiteExchange& exchange, const Trainer& trainer, const StepResult& r,
                         double computing_s, double now) {
  nlohmann::json f = exchange.ops_figures(trainer.param_count());
  const auto& state = trainer.state();
  f.update({{"step", state.step},
            {"loss", r.loss},
            {"lr", r.lr},
            {"lr_scale", state.lr_scale},
            {"rollbacks", state.rollbacks},
            {"tokens", state.tokens},
            {"tok_s", (state.tokens - last_tokens_) / std::max(1e-9, now - last_t_)},
            {"step_s", step_s_},
            {"utilization", computing_s / std::max(1e-9, now - started_)},
            {"goodput", computed_ > 0 ? static_cast<double>(computed_ - discarded_) / computed_ : 1.0},
            {"heals", heals_},
            {"heal_s", last_join_s_},
            {"sdc_findings", sdc_findings_}});
  // A rollback moves tokens back: the rate restarts from there rather than going negative.
  last_tokens_ = state.tokens;
  last_t_ = now;
  const std::string text = f.dump();
  store.set(site_keys::figures(), std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace meridian
