// One random generator per device, apart from the CPU's: seeding the device never moves the CPU
// stream. Its state is CUDA's (CUDAGeneratorImpl): a Philox seed and an offset per thread, read and
// written as 16 bytes (seed, then offset, both 64-bit), the offset a multiple of 4, reset by seeding,
// advanced by each random kernel as CUDA's distribution kernels advance it. Graph-safe states share
// that state between generators as CUDA's do.
//
// The CPU kernels draw, from a CPU (mt19937) stream that the seed starts: for the same seed the device
// draws the CPU's values (a program and its CPU-written twin get the same numbers; a GPU's Philox
// values differ). A state read from a generator (get_state, clone_state) remembers the stream's
// position, so setting it back replays the same values; a state never read (an offset moved by
// arithmetic, as DTensor's RNG tracker moves it) draws from a stream seeded by the pair (seed, offset).
#include "shim.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace cudashim {
namespace {

struct PhiloxState : c10::intrusive_ptr_target {
  uint64_t seed = c10::default_rng_seed_val;
  uint64_t offset = 0;
  at::Generator stream = at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val);
  bool in_step = true;  // stream is the one positioned at (seed, offset)
  std::map<uint64_t, uint64_t> intragraph;  // per open capture: the offset within its graph (g_rng_mutex)
};

// Streams at the states programs have read, to replay them when a state is set back: a few, the most
// recent (checkpointing, fork_rng and DTensor read a state and set it back soon after).
constexpr size_t kRemembered = 64;
std::mutex g_seen_mutex;
std::deque<std::pair<std::pair<uint64_t, uint64_t>, at::Generator>> g_seen;

void remember(const PhiloxState& s) {
  if (!s.in_step) return;
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  for (auto& e : g_seen) {
    if (e.first == std::make_pair(s.seed, s.offset)) {
      e.second = s.stream.clone();
      return;
    }
  }
  g_seen.emplace_back(std::make_pair(s.seed, s.offset), s.stream.clone());
  if (g_seen.size() > kRemembered) g_seen.pop_front();
}

// a stream remembered at (seed, offset), cloned, or false
bool find_seen(uint64_t seed, uint64_t offset, at::Generator* out) {
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  for (const auto& e : g_seen) {
    if (e.first == std::make_pair(seed, offset)) {
      *out = e.second.clone();
      return true;
    }
  }
  return false;
}

// `stream` as the one at (seed, offset): itself, not a copy (a replayed kernel is still to draw from it)
void remember_at(uint64_t seed, uint64_t offset, const at::Generator& stream) {
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  for (auto& e : g_seen) {
    if (e.first == std::make_pair(seed, offset)) {
      e.second = stream;
      return;
    }
  }
  g_seen.emplace_back(std::make_pair(seed, offset), stream);
  if (g_seen.size() > kRemembered) g_seen.pop_front();
}

void position(PhiloxState& s) {  // after the seed or the offset was set
  if (s.offset == 0) {
    s.stream = at::make_generator<at::CPUGeneratorImpl>(s.seed);  // the CPU's stream for this seed
    s.in_step = true;
    return;
  }
  std::lock_guard<std::mutex> lock(g_seen_mutex);
  for (const auto& e : g_seen) {
    if (e.first == std::make_pair(s.seed, s.offset)) {
      s.stream = e.second.clone();
      s.in_step = true;
      return;
    }
  }
  s.in_step = false;
}

// threads per round of a distribution kernel: multiProcessorCount * maxThreadsPerMultiProcessor
std::atomic<int64_t> g_round_threads{2048};

uint64_t mix(uint64_t seed, uint64_t offset) {  // splitmix64 of the pair: a seed for the CPU generator
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (offset / 4 + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Graph capture (graph.cpp): the capture recording the calling thread's current stream of `device`,
// 0 when none (a replay's calls are no capture's)
uint64_t capture_on(c10::DeviceIndex device) {
  if (C10_LIKELY(!capture_open()) || graph_replaying()) return 0;
  return capture_of_stream(device, current_stream_id(device));
}

std::mutex g_rng_mutex;  // the states' intragraph offsets and each capture's participants
std::map<uint64_t, std::vector<c10::intrusive_ptr<PhiloxState>>> g_participants;

// the state's offset within `capture`'s graph, the state taking part in it from now (under g_rng_mutex):
// torch_npu registers a generator with the capturing graph at its first use (get_capture_state)
uint64_t& intragraph(const c10::intrusive_ptr<PhiloxState>& s, uint64_t capture) {
  auto it = s->intragraph.find(capture);
  if (it == s->intragraph.end()) {
    it = s->intragraph.emplace(capture, 0).first;
    g_participants[capture].push_back(s);
  }
  return it->second;
}

const char* impl_name() { return is_cuda() ? "CUDAGeneratorImpl" : "NPUGeneratorImpl"; }

// what a distribution kernel over `numel` elements advances the offset by (calc_execution_policy): 4 per
// round of the grid, a round covering 4 elements per thread (2 for 8-byte types)
uint64_t increment_for(int64_t numel, size_t element_size);

// the replayed call's draws: absolute (seed, offset) per generator argument (set_replay_draws)
thread_local std::vector<std::pair<uint64_t, uint64_t>> t_replay_draws;
thread_local size_t t_replay_next = 0;

class DeviceGenerator final : public c10::GeneratorImpl {
 public:
  DeviceGenerator(c10::DeviceIndex index, c10::intrusive_ptr<PhiloxState> state)
      : c10::GeneratorImpl(c10::Device(kType, index), c10::DispatchKeySet(kKey)), state_(std::move(state)) {}

  void set_current_seed(uint64_t seed) override {
    if (C10_UNLIKELY(capture_on(device().index()) != 0)) {  // the seed stays; the graph's offsets are its own
      TORCH_CHECK(state_->seed == seed, impl_name(), "::set_current_seed can be called during stream capture only if "
                  "new seed is the same as the original seed.");
      return;
    }
    state_->seed = seed;
    state_->offset = 0;
    position(*state_);
  }
  uint64_t current_seed() const override { return state_->seed; }
  uint64_t seed() override {
    TORCH_CHECK(capture_on(device().index()) == 0, "Cannot call ", impl_name(), "::seed while in capture mode");
    const uint64_t s = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(s);
    return s;
  }
  void set_offset(uint64_t offset) override {
    TORCH_CHECK(capture_on(device().index()) == 0, "Cannot call ", impl_name(), "::set_offset while in capture mode");
    TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4");
    state_->offset = offset;
    position(*state_);
  }
  uint64_t get_offset() const override {
    TORCH_CHECK(capture_on(device().index()) == 0, "Cannot call ", impl_name(), "::get_offset while in capture mode");
    return state_->offset;
  }

  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    const uint64_t capture = capture_on(device().index());
    if (capture == 0) remember(*state_);
    at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte));
    const uint64_t seed = state_->seed;
    int64_t offset = static_cast<int64_t>(state_->offset);
    if (capture != 0) {  // philox_offset_per_thread() under capture: the offset within the graph
      std::lock_guard<std::mutex> lock(g_rng_mutex);
      offset = static_cast<int64_t>(intragraph(state_, capture));
    }
    std::memcpy(t.data_ptr<uint8_t>(), &seed, 8);
    std::memcpy(t.data_ptr<uint8_t>() + 8, &offset, 8);
    return t.getIntrusivePtr();
  }
  void set_state(const c10::TensorImpl& s) override {
    TORCH_CHECK_TYPE(s.layout() == at::kStrided, "expected a torch.ByteTensor, but got a tensor of layout ", s.layout());
    TORCH_CHECK_TYPE(s.dtype() == at::kByte, "expected a torch.ByteTensor, but got ", s.dtype());
    TORCH_CHECK(s.is_contiguous(), "RNG state must be contiguous");
    const int64_t n = s.numel();
    TORCH_CHECK(n == 16 || n == 8, "RNG state is wrong size");  // 8: a seed alone (offset 0), as CUDA takes it
    const auto* bytes = static_cast<const uint8_t*>(s.data());
    uint64_t seed = 0;
    int64_t offset = 0;
    std::memcpy(&seed, bytes, 8);
    if (n == 16) std::memcpy(&offset, bytes + 8, 8);
    TORCH_CHECK(offset % 4 == 0, "offset must be a multiple of 4");
    if (const uint64_t capture = capture_on(device().index())) {  // set_philox_offset_per_thread under capture
      set_current_seed(seed);
      std::lock_guard<std::mutex> lock(g_rng_mutex);
      intragraph(state_, capture) = static_cast<uint64_t>(offset);
      return;
    }
    state_->seed = seed;
    state_->offset = static_cast<uint64_t>(offset);
    position(*state_);
  }
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& gen) override {
    auto* other = dynamic_cast<DeviceGenerator*>(gen.get());
    TORCH_CHECK(other != nullptr, "Expected a CUDA Generator");
    state_ = other->state_;
  }
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override {
    return c10::make_intrusive<DeviceGenerator>(device().index(), state_);
  }

  // The CPU generator one kernel draws from, its offset then advanced by `increment` rounded up to
  // a multiple of 4 (CUDAGeneratorState::increase). The caller holds mutex_.
  at::Generator draw(uint64_t increment) {
    if (!state_->in_step) {
      if (!find_seen(state_->seed, state_->offset, &state_->stream)) {  // a replay may have drawn there
        state_->stream = at::make_generator<at::CPUGeneratorImpl>(mix(state_->seed, state_->offset));
      }
      state_->in_step = true;
    }
    state_->offset += (increment + 3) / 4 * 4;
    return state_->stream;  // the kernel advances it: it stays positioned at the new offset
  }

 private:
  DeviceGenerator* clone_impl() const override {
    remember(*state_);
    auto copy = c10::make_intrusive<PhiloxState>();
    copy->seed = state_->seed;
    copy->offset = state_->offset;
    copy->stream = state_->stream.clone();
    copy->in_step = state_->in_step;
    return new DeviceGenerator(device().index(), copy);
  }


 public:
  const c10::intrusive_ptr<PhiloxState>& state() const { return state_; }

 private:
  c10::intrusive_ptr<PhiloxState> state_;
};

uint64_t increment_for(int64_t numel, size_t element_size) {
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(numel, 1));
  const uint64_t unroll = element_size > 4 ? 2 : 4;
  const uint64_t blocks = std::min<uint64_t>((n + 255) / 256, static_cast<uint64_t>(g_round_threads.load()) / 256);
  return ((n - 1) / (256 * std::max<uint64_t>(blocks, 1) * unroll) + 1) * 4;
}

// the stream a draw at (seed, offset) starts from: one remembered there, the seed's own, or the pair's
at::Generator stream_at(uint64_t seed, uint64_t offset) {
  at::Generator g;
  if (find_seen(seed, offset, &g)) return g;
  return at::make_generator<at::CPUGeneratorImpl>(offset == 0 ? seed : mix(seed, offset));
}

bool is_generator_argument(const c10::Argument& a) {
  const auto& type = a.type();
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

}  // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex mutex;
  static std::vector<at::Generator> generators;
  const auto i = check_index(index);
  std::lock_guard<std::mutex> lock(mutex);
  while (generators.size() <= static_cast<size_t>(i)) {
    const auto d = static_cast<c10::DeviceIndex>(generators.size());
    generators.push_back(at::make_generator<DeviceGenerator>(d, c10::make_intrusive<PhiloxState>()));
  }
  return generators[i];
}

at::Generator new_generator(c10::DeviceIndex index) {
  return at::make_generator<DeviceGenerator>(check_index(index), c10::make_intrusive<PhiloxState>());
}

void set_philox_round_threads(int64_t threads) { g_round_threads.store(std::max<int64_t>(threads, 256)); }

// A random kernel's generator argument: the device's generator (the default one when none was
// given) turned into the CPU generator its CPU kernel draws from. The offset advances as CUDA's
// distribution kernels advance it (calc_execution_policy): 4 per round of the grid over `numel`
// elements, a round covering 4 elements per thread (2 for 8-byte types).
c10::IValue kernel_generator(const c10::IValue& given, c10::DeviceIndex device, int64_t numel, size_t element_size) {
  at::Generator gen = given.isNone() ? default_generator(device) : given.toGenerator();
  const c10::DeviceType type = gen.device().type();
  TORCH_CHECK(type == kType, "Expected a '", c10::DeviceTypeName(kType, true), "' device type for generator but found '",
              c10::DeviceTypeName(type, true), "'");
  auto* impl = dynamic_cast<DeviceGenerator*>(gen.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "Expected a generator of the emulated ", c10::DeviceTypeName(kType, true), " device");
  const uint64_t increment = increment_for(numel, element_size);
  if (C10_UNLIKELY(graph_replaying()) && t_replay_next < t_replay_draws.size()) {
    // a replayed call draws where the capture placed it in the graph, from the generator's offset at replay
    const auto [seed, offset] = t_replay_draws[t_replay_next++];
    at::Generator stream = stream_at(seed, offset);
    remember_at(seed, offset + (increment + 3) / 4 * 4, stream);  // positioned there once the kernel has drawn
    return stream;
  }
  if (C10_UNLIKELY(capture_on(device) != 0)) {
    // a call run once during a capture (capture_draws placed its draw): its numbers are not the replay's
    return at::make_generator<at::CPUGeneratorImpl>(mix(impl->current_seed(), ~uint64_t{0}));
  }
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return impl->draw(increment);
}

std::vector<RngDraw> capture_draws(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                                   c10::DeviceIndex device, uint64_t capture) {
  std::vector<RngDraw> out;
  const auto& formal = schema.arguments();
  int64_t numel = 1;
  size_t element_size = 4;
  bool sized = false;
  for (size_t i = 0; i < args.size() && i < formal.size() && !sized; ++i) {  // the size fallback.cpp draws for
    if (args[i].isTensor() && args[i].toTensor().defined()) {
      numel = args[i].toTensor().numel();
      element_size = args[i].toTensor().element_size();
      sized = true;
    }
  }
  for (size_t i = 0; i < args.size() && i < formal.size(); ++i) {
    const c10::IValue& v = args[i];
    if (!(v.isNone() || v.isGenerator()) || !is_generator_argument(formal[i])) continue;
    at::Generator gen = v.isNone() ? default_generator(device) : v.toGenerator();
    auto* impl = dynamic_cast<DeviceGenerator*>(gen.unsafeGetGeneratorImpl());
    if (impl == nullptr) continue;  // kernel_generator refuses it
    std::lock_guard<std::mutex> lock(g_rng_mutex);
    uint64_t& at = intragraph(impl->state(), capture);
    out.push_back({impl->state(), at});
    at += (increment_for(numel, element_size) + 3) / 4 * 4;
  }
  return out;
}

std::vector<std::pair<c10::intrusive_ptr<c10::intrusive_ptr_target>, uint64_t>> capture_finish(uint64_t capture) {
  std::vector<std::pair<c10::intrusive_ptr<c10::intrusive_ptr_target>, uint64_t>> out;
  std::lock_guard<std::mutex> lock(g_rng_mutex);
  auto it = g_participants.find(capture);
  if (it == g_participants.end()) return out;
  for (auto& s : it->second) {
    auto found = s->intragraph.find(capture);
    out.emplace_back(s, found == s->intragraph.end() ? 0 : found->second);
    if (found != s->intragraph.end()) s->intragraph.erase(found);
  }
  g_participants.erase(it);
  return out;
}

std::pair<uint64_t, uint64_t> replay_prologue(const c10::intrusive_ptr<c10::intrusive_ptr_target>& state,
                                              uint64_t increment) {
  auto* s = static_cast<PhiloxState*>(state.get());
  std::lock_guard<std::mutex> lock(g_rng_mutex);
  const std::pair<uint64_t, uint64_t> base{s->seed, s->offset};
  if (increment != 0) {
    s->offset += increment;
    position(*s);
  }
  return base;
}

void set_replay_draws(std::vector<std::pair<uint64_t, uint64_t>> draws) {
  t_replay_draws = std::move(draws);
  t_replay_next = 0;
}

}  // namespace cudashim
