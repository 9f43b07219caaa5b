// The device guard: current device, streams and events. Work runs on the calling thread when it
// is issued, so every stream is already ordered with every other and with the host: waits,
// queries and synchronizations have nothing to do. An event records the host clock when it is
// recorded, which is when all work issued before it has finished, so elapsed times are real.
#include "shim.h"

#include <atomic>
#include <chrono>

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace cudashim {
namespace {

using c10::Device;
using c10::DeviceIndex;
using c10::Stream;

thread_local c10::StreamId t_stream[kMaxDevices] = {};  // current stream per device, 0 = default
std::atomic<c10::StreamId> g_next_stream{1};

struct Event {
  double ms = 0;
  bool recorded = false;
  DeviceIndex device = 0;
  c10::StreamId stream = 0;  // the stream it was recorded on: a stream waiting on it joins its capture
  uint64_t capture = 0;      // the capture that stream was in when recorded (graph.cpp), 0: none
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }
  Device exchangeDevice(Device d) const override {
    Device old = getDevice();
    if (d.index() != old.index()) set_current_device(d.index());
    return old;
  }
  Device getDevice() const override { return Device(kType, current_device()); }
  void setDevice(Device d) const override { set_current_device(d.index()); }
  void uncheckedSetDevice(Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) {
      try {
        set_current_device(d.index());
      } catch (...) {
      }
    }
  }
  Stream getStream(Device d) const noexcept override {
    const auto i = d.index() < 0 ? current_device() : d.index();
    return Stream(Stream::UNSAFE, Device(kType, i), t_stream[i]);
  }
  Stream getDefaultStream(Device d) const override { return Stream(Stream::DEFAULT, d); }
  Stream getNewStream(Device d, int /*priority*/) const override {
    return Stream(Stream::UNSAFE, d, g_next_stream.fetch_add(1));
  }
  Stream getStreamFromGlobalPool(Device d, bool /*high_priority*/) const override { return getNewStream(d, 0); }
  Stream exchangeStream(Stream s) const noexcept override {
    const auto i = s.device_index() < 0 ? current_device() : s.device_index();
    Stream old(Stream::UNSAFE, Device(kType, i), t_stream[i]);
    t_stream[i] = s.id();
    return old;
  }
  DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const Stream& stream, const DeviceIndex /*device*/,
              const c10::EventFlag /*flag*/) const override {
    if (*event == nullptr) *event = new Event();
    auto* e = static_cast<Event*>(*event);
    e->ms = now_ms();
    e->recorded = true;
    e->device = stream.device_index();
    e->stream = stream.id();
    e->capture = capture_of_stream(e->device, e->stream);
  }
  void block(void* event, const Stream& stream) const override {
    const auto* e = static_cast<const Event*>(event);
    if (e != nullptr && e->recorded && e->device == stream.device_index()) capture_join(e->device, e->stream, stream.id());
  }
  bool queryEvent(void* event) const override {
    if (event != nullptr) capture_refuse_event(static_cast<Event*>(event)->capture, "querying an event");
    return true;
  }
  void destroyEvent(void* event, const DeviceIndex /*device*/) const noexcept override {
    delete static_cast<Event*>(event);
  }
  // a capture refuses these as CUDA does (graph.cpp); else all work is done already
  bool queryStream(const Stream& stream) const override {
    capture_refuse_stream(stream.device_index(), stream.id(), "querying a stream");
    return true;
  }
  void synchronizeStream(const Stream& stream) const override {
    capture_refuse_stream(stream.device_index(), stream.id(), "synchronizing a stream");
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) capture_refuse_event(static_cast<Event*>(event)->capture, "synchronizing an event");
  }
  void synchronizeDevice(const DeviceIndex /*device*/) const override { capture_refuse_device("synchronizing the device"); }
  void recordDataPtrOnStream(const c10::DataPtr& /*data*/, const Stream& /*stream*/) const override {}
  double elapsedTime(void* start, void* end, const DeviceIndex /*device*/) const override {
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    TORCH_CHECK(a != nullptr && b != nullptr && a->recorded && b->recorded,
                "Both events must be recorded before calculating elapsed time.");
    return b->ms - a->ms;
  }
};

}  // namespace

void register_guard() { static c10::impl::DeviceGuardImplRegistrar once(kType, new Guard()); }

c10::StreamId current_stream_id(c10::DeviceIndex index) { return t_stream[index]; }
}  // namespace cudashim
