// torch.distributed's collectives (the c10d:: operators) on device tensors, over the CPU backend.
//
// c10d dispatches each collective on its tensors' key; a CPU build registers CUDA kernels for them
// that hand the tensors to the process group's CUDA backend, which Gloo cannot serve (it crashes).
// The device replaces those kernels with one that views the device tensors as CPU tensors over the
// same memory and runs the CPU kernel: Gloo reads and writes the device memory in place, and the
// collective's returned tensors are the caller's own. This covers DDP's reducer and every Python
// collective alike. The replacement is registered with torch's "overriding a kernel" warning muted.
//
// On a group that answers as NCCL (its default backend type is NCCL: nccl.py's groups), the
// reductions are NCCL's, not Gloo's (ProcessGroupNCCL's getNcclReduceOp, NCCL's hostToDevRedOp):
// SUM of bools is MAX; AVG of integers is a sum in the type then a division truncated toward zero;
// AVG of floating types and PREMUL_SUM multiply each rank's input by the factor rounded to the
// type (1/world for AVG) and then sum; BAND/BOR/BXOR, AVG of bools and PREMUL_SUM of other types
// raise ProcessGroupNCCL's errors. Such a collective completes before it returns (its work is
// waited for), since its result is finished after Gloo's.
#include "shim.h"

#include <ATen/ThreadLocalPythonObjects.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/library.h>

#include <functional>
#include <memory>
#include <string>

namespace cudashim {
namespace {

struct Viewed {
  at::Tensor view, original;
};
using Views = std::vector<Viewed>;

c10::IValue to_host(const c10::IValue& v, Views& views) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.device().type() != kType) return v;
    at::Tensor view = cpu_view(t);
    views.push_back({view, t});
    return view;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(to_host(t, views).toTensor());
    return out;
  }
  if (v.isList()) {  // Tensor[][] (allgather's outputs)
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const c10::IValue& e : in) out.push_back(to_host(e, views));
    return out;
  }
  return v;
}

c10::IValue back(const c10::IValue& v, const Views& views) {
  if (v.isTensor()) {
    for (const auto& w : views) {
      if (w.view.unsafeGetTensorImpl() == v.toTensor().unsafeGetTensorImpl()) return w.original;
    }
    return v;
  }
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(back(t, views).toTensor());
    return out;
  }
  if (v.isList()) {
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const c10::IValue& e : in) out.push_back(back(e, views));
    return out;
  }
  return v;
}

c10::IValue map_tensors(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) out.push_back(fn(t));
    return out;
  }
  if (v.isList()) {
    auto in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (const c10::IValue& e : in) out.push_back(map_tensors(e, fn));
    return out;
  }
  return v;
}

// What is left to do once Gloo's part of an NCCL reduction is done.
struct NcclFinish {
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (scaled copy that was reduced, caller's view)
  std::vector<at::Tensor> divide;                           // integer AVG results
  int64_t world = 1;
  bool pending() const { return !copy_back.empty() || !divide.empty(); }
};

const char* op_name(c10d::ReduceOp::RedOpType t) {
  switch (t) {
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    default: return "BXOR";
  }
}

bool is_type(const c10::Argument& a, const char* name) {
  return a.type()->str().find(name) != std::string::npos;
}

// Rewrites the arguments (already CPU views) of a reduction on an NCCL-named group so that Gloo's
// SUM/MAX computes NCCL's result; returns what to finish after it ran.
NcclFinish nccl_reduction(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t base, Views& views) {
  NcclFinish finish;
  const auto& args = op.schema().arguments();
  int rop_i = -1, pg_i = -1, root_i = -1;
  for (size_t k = 0; k < args.size(); ++k) {
    if (is_type(args[k], "c10d.ReduceOp")) rop_i = static_cast<int>(k);
    if (is_type(args[k], "c10d.ProcessGroup")) pg_i = static_cast<int>(k);
    if (args[k].name() == "root_rank") root_i = static_cast<int>(k);
  }
  if (rop_i < 0 || pg_i < 0) return finish;
  auto pg = (*stack)[base + pg_i].toCustomClass<c10d::ProcessGroup>();
  if (pg->getBackendType() != c10d::ProcessGroup::BackendType::NCCL) return finish;  // Gloo's own semantics
  // reduce_: the result is the root's; NCCL leaves the other ranks' buffers as they were, where Gloo
  // reduces through them, so there it reduces a copy
  const bool result_here = root_i < 0 || (*stack)[base + root_i].toInt() == pg->getRank();
  if (!result_here) {
    for (size_t k = 0; k < args.size(); ++k) {
      if (args[k].name() == "tensors") {
        (*stack)[base + k] = map_tensors((*stack)[base + k], [](const at::Tensor& t) { return t.clone(); });
      }
    }
  }
  auto rop = (*stack)[base + rop_i].toCustomClass<c10d::ReduceOp>();
  const auto kind = rop->op_;
  at::ScalarType dtype = at::ScalarType::Undefined;
  for (size_t k = 0; k < args.size() && dtype == at::ScalarType::Undefined; ++k) {
    map_tensors((*stack)[base + k], [&](const at::Tensor& t) {
      if (dtype == at::ScalarType::Undefined && t.defined()) dtype = t.scalar_type();
      return t;
    });
  }
  if (kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR || kind == c10d::ReduceOp::BXOR) {
    C10_THROW_ERROR(ValueError, std::string("Cannot use ReduceOp.") + op_name(kind) + " with NCCL");
  }
  auto replace = [&](c10d::ReduceOp::RedOpType t) {
    (*stack)[base + rop_i] = c10::IValue(c10::make_intrusive<c10d::ReduceOp>(t));
  };
  if (dtype == at::kBool) {
    if (kind == c10d::ReduceOp::AVG) C10_THROW_ERROR(TypeError, "Cannot use ReduceOp.AVG with boolean inputs");
    if (kind == c10d::ReduceOp::SUM) replace(c10d::ReduceOp::MAX);  // an OR, without overflowing uint8
    return finish;
  }
  const bool avg = kind == c10d::ReduceOp::AVG, premul = kind == c10d::ReduceOp::PREMUL_SUM;
  if (!avg && !premul) return finish;
  finish.world = pg->getSize();
  auto original_of = [&](const at::Tensor& view) {
    for (const auto& w : views) {
      if (w.view.unsafeGetTensorImpl() == view.unsafeGetTensorImpl()) return w.original;
    }
    return view;
  };
  if (avg && at::isIntegralType(dtype, /*includeBool=*/false)) {
    replace(c10d::ReduceOp::SUM);
    for (size_t k = 0; k < args.size(); ++k) {
      const std::string& name = args[k].name();
      if (name.rfind("output", 0) == 0 || (name == "tensors" && result_here)) {
        map_tensors((*stack)[base + k], [&](const at::Tensor& t) { finish.divide.push_back(t); return t; });
      }
    }
    return finish;
  }
  if (premul && dtype != at::kHalf && dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kDouble) {
    C10_THROW_ERROR(TypeError, "PreMulSum Data type must be half, float, bfloat16 or double");
  }
  double factor = 1.0 / static_cast<double>(finish.world);
  if (premul) {
    const auto* sup = dynamic_cast<const c10d::PreMulSumSupplement*>(rop->supplement_.get());
    TORCH_CHECK(sup != nullptr, "ReduceOp.PREMUL_SUM without its factor: make it with torch.distributed._make_nccl_premul_sum(factor)");
    factor = sup->tensor_factor.defined() ? sup->tensor_factor.item<double>() : sup->double_factor;
  }
  if (!at::isFloatingType(dtype)) return finish;  // complex: Gloo's own (ProcessGroupNCCL views it as real)
  // the factor as the type holds it, each rank's input multiplied by it in the type: NCCL's pre-op
  const at::Tensor scale = at::scalar_tensor(factor, at::TensorOptions().dtype(dtype));
  replace(c10d::ReduceOp::SUM);
  for (size_t k = 0; k < args.size(); ++k) {
    const std::string& name = args[k].name();
    if (name.rfind("input", 0) == 0) {
      (*stack)[base + k] = map_tensors((*stack)[base + k], [&](const at::Tensor& t) { return t.mul(scale); });
    } else if (name == "tensors") {
      (*stack)[base + k] = map_tensors((*stack)[base + k], [&](const at::Tensor& t) {
        at::Tensor scaled = t.mul(scale);
        if (result_here) finish.copy_back.emplace_back(scaled, t);
        views.push_back({scaled, original_of(t)});  // returned as the caller's tensor
        return scaled;
      });
    }
  }
  return finish;
}

// Gloo's work keeps a copy of the issuing thread's state and is dropped on Gloo's own thread. A Python
// object in that state (the context autograd's backward stashes, so any collective DDP issues) would
// need the GIL there, while a thread destroying the group (the last reference, e.g. DDP's reducer
// freed) joins Gloo's thread holding the GIL: a deadlock. NCCL's work keeps no such state; here the
// state's Python objects are left out of the work and restored for the caller.
class NoPythonObjects {
 public:
  NoPythonObjects() : saved_(at::impl::ThreadLocalPythonObjects::get_state()) {
    at::impl::ThreadLocalPythonObjects::set_state(at::impl::ThreadLocalPythonObjects());
  }
  ~NoPythonObjects() { at::impl::ThreadLocalPythonObjects::set_state(saved_); }
  NoPythonObjects(const NoPythonObjects&) = delete;
  NoPythonObjects& operator=(const NoPythonObjects&) = delete;

 private:
  at::impl::ThreadLocalPythonObjects saved_;
};

void hosted(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(capturing()) && capture_boxed(op, stack)) return;  // CUDA graph capture (graph.cpp)
  const size_t n = op.schema().arguments().size();
  const size_t base = stack->size() - n;
  Views views;
  for (size_t i = base; i < stack->size(); ++i) (*stack)[i] = to_host((*stack)[i], views);
  const NcclFinish finish = nccl_reduction(op, stack, base, views);
  {
    NoPythonObjects unheld;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }
  const size_t m = op.schema().returns().size();
  if (finish.pending()) {
    for (size_t i = stack->size() - m; i < stack->size(); ++i) {
      if ((*stack)[i].isCustomClass()) (*stack)[i].toCustomClass<c10d::Work>()->wait();
    }
    for (const auto& [reduced, dest] : finish.copy_back) dest.copy_(reduced);
    for (const at::Tensor& t : finish.divide) t.div_(finish.world, "trunc");
  }
  for (size_t i = stack->size() - m; i < stack->size(); ++i) (*stack)[i] = back((*stack)[i], views);
}

struct Mute final : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

}  // namespace

void register_collectives() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  static Mute mute;
  c10::WarningUtils::WarningHandlerGuard quiet(&mute);  // "Overriding a previously registered kernel"
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "c10d", kKey, __FILE__, __LINE__);
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("c10d::", 0) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasKernelForDispatchKey(kKey)) continue;
    const std::string op = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&hosted>());
  }
}

}  // namespace cudashim
