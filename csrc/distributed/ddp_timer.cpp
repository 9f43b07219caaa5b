// DDP's timer for the device. DistributedDataParallel's reducer asks c10d's TimerRegistry for a timer
// of its parameters' device type and, from its second iteration on, samples forward/backward times
// through it (Logger::set_runtime_stats_and_log asserts it exists). A CPU build registers a timer for
// the CPU only (CUDA's, on CUDA events, is in the CUDA build), so every DDP training on the device
// stopped at its second step with "INTERNAL ASSERT FAILED … reducer_->timer_" (pytorch/examples'
// ddp-tutorial-series/multigpu.py). The device runs synchronously on the host, so the host clock
// measures it, as c10d's own CPU timer does.
#include "shim.h"

#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace cudashim {
namespace {

class HostTimer final : public c10d::Timer {
 public:
  explicit HostTimer(c10::Device /*device*/) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const int64_t start_time = getTimeRef(start), end_time = getTimeRef(end);
    if (start_time == c10d::kUnsetTime || end_time < start_time) return std::nullopt;  // not both in this iteration
    return end_time - start_time;
  }
};

}  // namespace

// preferred over a timer already registered for the type: a CUDA build's own, on CUDA events, is there
// before this library loads (an equal priority would end the process)
void register_timer() {
  using c10d::TimerRegistry, c10d::RegistererTimerRegistry;  // the registration macro names them unqualified
  C10_REGISTER_TYPED_CLASS_WITH_PRIORITY(TimerRegistry, kType, c10::REGISTRY_PREFERRED, HostTimer)
}

}  // namespace cudashim
