// Every other operator: PyTorch's CPU kernel, run on CPU views of the device tensors' memory.
//
// Unlike at::native::cpu_fallback nothing is copied: inputs are viewed in place, in-place and out=
// arguments are written in place, and the memory a CPU kernel allocates for its outputs becomes
// device memory (adopted into the device's statistics), handed back as device tensors. Before that, the
// devices are checked as a GPU checks them, and a random operator draws from the device's generator
// (its default one when none is given; a CPU generator is refused as CUDA refuses it).
#include "call.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/ConvUtils.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/strides.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cudashim {
void register_sparse_cpu_kernels();  // sparse.cpp

namespace {

// operators a GPU runs with CPU tensors among their arguments (indices may live on the host)
bool mixes_devices(const c10::OperatorName& name) {
  const auto& n = name.name;
  return n == "aten::index" || n == "aten::index_put_" || n == "aten::_index_put_impl_" || n == "aten::index_put";
}

bool is_generator_slot(const c10::Argument& a) {
  const auto& type = a.type();
  if (type->kind() != c10::TypeKind::OptionalType) return false;
  return type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

void run(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t n = args.size();
  const size_t base = stack->size() - n;

  // one pass: check the devices as a GPU does and turn device tensors into CPU views of their memory
  Call call;
  c10::SmallVector<size_t, 2> generators;  // generator slots: the device's generator, once the device is known
  int64_t numel = 1;                       // of the first tensor: how far a random kernel advances the offset
  size_t element_size = 4;
  bool sized = false;
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[base + i];
    const c10::AliasInfo* alias = args[i].alias_info();
    const bool written = alias != nullptr && alias->isWrite();
    if (v.isTensor()) {
      at::Tensor t = std::move(v).toTensor();
      if (!sized && t.defined()) {
        numel = t.numel();
        element_size = t.element_size();
        sized = true;
      }
      call.see(t);
      v = call.view(t, written);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList()) {
        call.see(t);
        list.push_back(call.view(t, written));
      }
      v = std::move(list);
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> o = t;
        if (o.has_value()) call.see(*o);
        list.push_back(o.has_value() ? std::optional<at::Tensor>(call.view(*o, written)) : std::nullopt);
      }
      v = std::move(list);
    } else if ((v.isNone() || v.isGenerator()) && is_generator_slot(args[i])) {
      generators.push_back(i);
    }
  }
  call.settle(!call.host_tensor || mixes_devices(schema.operator_name()), schema.name().c_str());
  if (C10_UNLIKELY(!call.sparse.empty())) call.mark_requires_grad();
  for (const size_t i : generators) {
    (*stack)[base + i] = kernel_generator((*stack)[base + i], call.device, numel, element_size);
  }

  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU) | call.sparse, stack);
  } catch (const c10::Error& e) {
    host_refused(call.device, e);  // an output the host could not give: the device's out of memory
    throw;
  }

  // an out= argument the CPU kernel resized now lives in new memory: move it onto the device
  for (const auto& v : call.viewed) {
    if (!v.written) continue;
    const at::Tensor& view = v.view;
    if (C10_UNLIKELY(!v.original.has_storage())) {  // sparse: its twin's new components
      sparse_written(call, v.original, view);
      continue;
    }
    if (view.storage().data() != v.original.storage().data() || view.sizes() != v.original.sizes()) {
      // the device storage as large as the kernel's, not as the elements: LAPACK's column-major
      // results live in a padded buffer (linalg_lstsq's solution: strides [1, 4] for 3 x 3)
      at::Tensor original = v.original;
      const size_t itemsize = view.element_size();
      const size_t need = at::detail::computeStorageNbytes(view.sizes(), view.strides(), itemsize, view.storage_offset());
      if (need > original.storage().nbytes()) {  // grow the device storage itself, as the kernel grew its view's
        original.as_strided_({0}, {1}, 0);
        original.resize_({static_cast<int64_t>((need + itemsize - 1) / itemsize)});
      }
      original.as_strided_(view.sizes(), view.strides(), view.storage_offset());
      cpu_view(original, false).copy_(view);
    }
    // a kernel may hand part of its answer back as a conjugate or negative bit of its out= argument
    // (linalg_lu_solve with left=False solves the adjoint system, then flips the conj bit of its result
    // in place): the device tensor takes the bit as the CPU tensor would have
    if (v.written && view.is_conj() != v.original.is_conj()) v.original._set_conj(view.is_conj());
    if (v.written && view.is_neg() != v.original.is_neg()) v.original._set_neg(view.is_neg());
  }

  const size_t m = schema.returns().size();
  for (size_t i = stack->size() - m; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor()) {
      v = call.back(std::move(v).toTensor());  // moved: the CPU kernel's output held once
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list = std::move(v).toTensorList();
      for (size_t j = 0; j < list.size(); ++j) list.set(j, call.back(list.extract(j)));
      v = std::move(list);
    }
  }
}

// When an operator of the synchronizing table (cudashim/emulated/synchronizing.json) synchronizes on
// CUDA: always, when an argument is None (repeat_interleave without output_size), when an argument
// holds a boolean mask (indexing with one runs nonzero), or when an argument is a tensor on the device
// (a value read back with item(): masked_fill's value, linspace's ends; a CPU tensor there reads no
// device memory).
// index_put (put:ARG, ARG its indices) synchronizes by its arguments as CUDA's _index_put_impl_ does:
// a mask is expanded with nonzero unless the call is a masked fill (one mask, no accumulate, a
// one-element value on the host: masked_fill_ with the value read on the host); an index or a
// one-element value on the host is copied to the device first.
struct SyncRule {
  enum class When { Always, ArgNone, ArgMask, ArgOnDevice, IndexPut } when;
  size_t arg;
  size_t self = 0, values = 0, accumulate = 0;  // IndexPut: where its other arguments are
};

// by schema: its address is stable while the operator is registered, and cheap to hash
std::unordered_map<const c10::FunctionSchema*, SyncRule>& sync_rules() {
  static std::unordered_map<const c10::FunctionSchema*, SyncRule> rules;
  return rules;
}

bool is_mask(const at::Tensor& t) { return t.defined() && (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte); }

bool holds_mask(const c10::IValue& v) {
  if (v.isTensor()) return is_mask(v.toTensor());
  if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) {
      if (is_mask(t)) return true;
    }
  } else if (v.isOptionalTensorList()) {
    for (const auto& t : v.toOptionalTensorList()) {
      const std::optional<at::Tensor> o = t;
      if (o.has_value() && is_mask(*o)) return true;
    }
  }
  return false;
}

// CUDA's canDispatchToMaskedFill: a one-element value on the host, exactly one index, a mask on self's device
bool masked_fill_call(const at::Tensor& self, const c10::IValue& indices, const at::Tensor& values) {
  if (!values.defined() || values.numel() != 1 || !values.device().is_cpu() || !indices.isOptionalTensorList()) {
    return false;
  }
  int masks = 0;
  for (const auto& t : indices.toOptionalTensorList()) {
    const std::optional<at::Tensor> o = t;
    if (!o.has_value() || !o->defined()) continue;
    if (!is_mask(*o) || o->device() != self.device()) return false;
    ++masks;
  }
  return masks == 1;
}

bool index_put_synchronizes(const SyncRule& rule, const torch::jit::Stack& stack, size_t base) {
  const c10::IValue& indices = stack[base + rule.arg];
  const at::Tensor& self = stack[base + rule.self].toTensor();
  const at::Tensor& values = stack[base + rule.values].toTensor();
  const bool accumulate = stack[base + rule.accumulate].toBool();
  if (holds_mask(indices)) return accumulate || !masked_fill_call(self, indices, values);
  if (indices.isOptionalTensorList()) {
    for (const auto& t : indices.toOptionalTensorList()) {
      const std::optional<at::Tensor> o = t;
      if (o.has_value() && o->defined() && o->device() != self.device()) return true;  // an index copied to the device
    }
  }
  return values.defined() && values.dim() == 0 && values.device() != self.device();  // copied to the device
}

// operators whose output size depends on the data: CUDA synchronizes to learn it
void synchronizing_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // the simulated NPU (npu_coverage.cpp): an operator torch_npu has no kernel for runs its composite, else
  // takes torch_npu's CPU fallback (warned, counted, refused when fallback is off); one it has a kernel
  // for passes torch_npu's dtype checks
  if (C10_UNLIKELY(npu_coverage_active())) {
    if (npu_run_composite(op, stack)) return;
    npu_cpu_fallback_check(op, *stack);
  }
  if (C10_UNLIKELY(capturing()) && capture_boxed(op, stack)) return;
  const auto& schema = op.schema();
  const auto it = sync_rules().find(&schema);
  if (it != sync_rules().end()) {
    const size_t base = stack->size() - schema.arguments().size();
    const c10::IValue& v = (*stack)[base + it->second.arg];
    const auto when = it->second.when;
    if (when == SyncRule::When::Always || (when == SyncRule::When::ArgNone && v.isNone()) ||
        (when == SyncRule::When::IndexPut && index_put_synchronizes(it->second, *stack, base)) ||
        (when == SyncRule::When::ArgMask && holds_mask(v)) ||
        (when == SyncRule::When::ArgOnDevice && v.isTensor() && v.toTensor().device().type() == kType)) {
      synchronizing(schema.name().c_str());
    }
  }
  run(op, stack);
}

// operators that change a tensor's metadata in place: the CPU kernel would change the view's only
bool metadata_in_place(const std::string& name) {
  return name == "aten::as_strided_" || name == "aten::resize_" || name == "aten::resize_as_" || name == "aten::set_" ||
         name == "aten::squeeze_" || name == "aten::unsqueeze_" || name == "aten::transpose_" || name == "aten::t_" ||
         name == "aten::swapdims_" || name == "aten::swapaxes_" || name == "aten::detach_";
}

// A composite operator that draws random numbers (sdpa's dropout) keeps its parts on the device, so
// they draw from the device's generator, not the CPU's.
bool draws(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name() == "dropout_p" && stack[base + i].toDouble() != 0.0) return true;
  }
  return false;
}

// Composite operators run whole by the CPU (host_composite below), where nothing can see their parts
// or needs their gradient. Otherwise (a gradient or forward gradient to record, a tensor subclass, a
// functional or functorch wrapper, a dispatch mode) their composite runs as it does without us.
bool parts_wanted(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  constexpr auto seen = c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                             c10::DispatchKey::Functionalize, c10::DispatchKey::FuncTorchBatched,
                                             c10::DispatchKey::FuncTorchGradWrapper, c10::DispatchKey::Batched,
                                             c10::DispatchKey::FuncTorchDynamicLayerFrontMode});
  if (c10::impl::tls_local_dispatch_key_set().included_.has_any(seen) || draws(op, stack)) return true;
  const bool grad = c10::GradMode::is_enabled();
  auto wanted = [&](const at::Tensor& t) {
    return t.defined() && (t.key_set().has_any(seen) || (grad && t.requires_grad()) || t._fw_grad(0).defined());
  };
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      if (wanted(v.toTensor())) return true;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        if (wanted(t)) return true;
      }
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) {
        const std::optional<at::Tensor> o = t;
        if (o.has_value() && wanted(*o)) return true;
      }
    }
  }
  return false;
}

// the autograd slot: the composite when its parts are wanted, else the device's kernel below
void composite_or_host(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  if (parts_wanted(op, *stack)) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    return;
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
}

// the device's slot (inference mode reaches it directly)
void host_composite(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (draws(op, *stack)) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
    return;
  }
  core_boxed(op, stack);
}

}  // namespace

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(npu_coverage_active())) npu_cpu_fallback_check(op, *stack);  // the simulated NPU (npu_coverage.cpp)
  if (C10_UNLIKELY(capturing()) && capture_boxed(op, stack)) return;  // CUDA graph capture (graph.cpp)
  if (C10_UNLIKELY(model_active())) {  // a matrix product takes cuBLAS's workspace on a GPU (after its output)
    const int blas = blas_kind(op, *stack);
    run(op, stack);
    if (blas >= 0) blas_call(blas == 1);
    return;
  }
  run(op, stack);
}

// A kernel torch_npu has for sparse npu tensors (sparse.cpp): the CPU's sparse kernel on the twins,
// without the dense operators' coverage check (torch_npu's sparse registrations are not in its table)
void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(capturing()) && capture_boxed(op, stack)) return;
  run(op, stack);
}

void core_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(npu_coverage_active()) && npu_run_composite(op, stack)) return;
  fallback(op, stack);
}

// The synchronizing table's operators take synchronizing_fallback, before the CPU kernels are
// registered directly below (an operator takes one kernel). Operators the device implements itself
// (copies, item) decide for themselves; an operator this build of torch lacks is skipped.
void register_synchronizing(const std::vector<std::pair<std::string, std::string>>& table) {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& [name, when] : table) {
    const auto dot = name.find('.');
    const c10::OperatorName opname(name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1));
    auto h = dispatcher.findOp(opname);
    if (!h || !h->hasSchema() || device_has_kernel(*h, kKey)) continue;
    SyncRule rule{SyncRule::When::Always, 0};
    if (when != "always") {
      const auto colon = when.find(':');
      const std::string kind = when.substr(0, colon), arg = colon == std::string::npos ? "" : when.substr(colon + 1);
      const auto index = h->schema().argumentIndexWithName(arg);
      const auto& schema = h->schema();
      const auto self = schema.argumentIndexWithName("self"), values = schema.argumentIndexWithName("values"),
                 accumulate = schema.argumentIndexWithName("accumulate");
      const bool put = kind == "put" && self && values && accumulate;
      TORCH_CHECK(index.has_value() && (kind == "none" || kind == "bool" || kind == "device" || put),
                  "the synchronizing table's entry ", name, ": '", when,
                  "' is not always, none:ARG, bool:ARG, device:ARG or put:ARG with ARG an argument of ", schema,
                  " (put: an index_put with self, values and accumulate)");
      rule = {put ? SyncRule::When::IndexPut
                  : kind == "none" ? SyncRule::When::ArgNone
                  : kind == "bool" ? SyncRule::When::ArgMask : SyncRule::When::ArgOnDevice,
              static_cast<size_t>(*index)};
      if (put) {
        rule.self = *self;
        rule.values = *values;
        rule.accumulate = *accumulate;
      }
    }
    sync_rules()[&h->schema()] = rule;
    lib->impl(name.substr(name.find("::") + 2).c_str(), torch::CppFunction::makeFromBoxedFunction<&synchronizing_fallback>());
  }
}

// Composite operators that choose their backend from their tensors' device type run whole by the
// CPU on views of the device tensors, so the device takes the CPU's choice of algorithm and gives the
// CPU's bits. Left to their composite, a device tensor makes convolution pick a CUDA-only kernel
// (_conv_depthwise2d, conv_depthwise3d, the slow CUDA convolutions, none of which a CPU build has),
// and its backward call DispatchStubs keyed by the device type ("missing kernel for cuda"); on the
// simulated NPU it picks convolution_overrideable, which has no kernel. Their autograd formulas stay
// PyTorch's (derivatives.yaml): only the device's slot below autograd is replaced.
namespace {
const char* const kChoosesBackend[] = {"convolution", "_convolution", "_convolution.deprecated", "convolution_backward"};

// Predicates that ask whether a vendor library (cuDNN, MIOpen) takes the call; only a CUDA build
// implements them. The CPU's answer is no, so the composite around them takes the CPU's path.
const char* const kVendorPredicates[] = {"_use_cudnn_ctc_loss", "_use_cudnn_ctc_loss.Tensor", "_use_miopen_ctc_loss",
                                         "_use_miopen_ctc_loss.Tensor"};

// The layout a device tensor's convolution hands back is the one torch.compile's fake tensors predict
// for the device (fake_impls.py's conv: the memory format of the backend the device type selects), not
// the CPU kernel's own: a compiled graph checks each extern kernel's output strides against its
// prediction (inductor lays a GPU convolution's input out channels-last; CUDA's depthwise kernel
// answers contiguous where the CPU's answers channels-last). The values stay the CPU's bits. A CPU
// build selects no cuDNN, so for a channels-last input the prediction (and so the device) is
// contiguous where a GPU's cuDNN would answer channels-last: a layout, never a value.
c10::DimVector strides_in(c10::IntArrayRef sizes, at::MemoryFormat format) {
  if (format == at::MemoryFormat::ChannelsLast && sizes.size() == 3) {  // as fake_impls: unsqueeze(2), convert, squeeze(2)
    const int64_t four[] = {sizes[0], sizes[1], 1, sizes[2]};
    auto s = c10::get_channels_last_strides_2d(four);
    return {s[0], s[1], s[3]};
  }
  if (format == at::MemoryFormat::ChannelsLast && sizes.size() == 4) {
    auto s = c10::get_channels_last_strides_2d(sizes);
    return c10::DimVector(s.begin(), s.end());
  }
  if (format == at::MemoryFormat::ChannelsLast3d && sizes.size() == 5) {
    auto s = c10::get_channels_last_strides_3d(sizes);
    return c10::DimVector(s.begin(), s.end());
  }
  return c10::contiguous_strides(sizes);
}

void convolution_as_device(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(npu_coverage_active()) && npu_run_composite(op, stack)) return;  // no NPU kernel: its composite
  const auto& schema = op.schema();
  const size_t base = stack->size() - schema.arguments().size();
  auto arg = [&](const char* name) -> c10::IValue { return (*stack)[base + *schema.argumentIndexWithName(name)]; };
  const at::Tensor input = arg("input").toTensor(), weight = arg("weight").toTensor();
  const bool backward = schema.name() == "aten::convolution_backward";
  const std::optional<at::Tensor> bias = backward ? std::nullopt : arg("bias").toOptional<at::Tensor>();
  std::optional<std::vector<int64_t>> bias_sizes;
  if (backward && !arg("bias_sizes").isNone()) bias_sizes = arg("bias_sizes").toIntVector();
  const auto stride = arg("stride").toIntVector(), padding = arg("padding").toIntVector(),
             dilation = arg("dilation").toIntVector(), output_padding = arg("output_padding").toIntVector();
  const bool transposed = arg("transposed").toBool();
  const int64_t groups = arg("groups").toInt();
  fallback(op, stack);
  at::MemoryFormat format;
  try {
    const auto backend = at::native::select_conv_backend(
        input, weight, bias, c10::fromIntArrayRefSlow(stride), c10::fromIntArrayRefSlow(padding),
        c10::fromIntArrayRefSlow(dilation), transposed, c10::fromIntArrayRefSlow(output_padding), c10::SymInt(groups),
        bias_sizes ? at::OptionalSymIntArrayRef(c10::fromIntArrayRefSlow(*bias_sizes)) : at::OptionalSymIntArrayRef(std::nullopt));
    const bool one_d = weight.dim() == 3;
    format = at::native::_determine_backend_memory_format(one_d ? input.contiguous().unsqueeze(2) : input,
                                                          one_d ? weight.unsqueeze(2) : weight, backend);
  } catch (const c10::Error&) {
    return;  // no prediction to meet: the CPU's layout stands
  }
  const size_t outputs = backward ? 2 : 1;  // grad_bias keeps its own (fake_impls converts it to none)
  const size_t first = stack->size() - (backward ? 3 : 1);
  for (size_t i = 0; i < outputs; ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (!v.isTensor() || !v.toTensor().defined()) continue;
    const at::Tensor& out = v.toTensor();
    const auto want = strides_in(out.sizes(), format);
    if (out.strides() == c10::IntArrayRef(want)) continue;
    at::Tensor laid = at::empty_strided(out.sizes(), want, out.options());
    laid.copy_(out);
    v = std::move(laid);
  }
}

// Operators whose CPU kernel lays an output out otherwise than their meta function (what torch.compile
// traces with, and cuFFT's layout) says: pocketfft's complex results. The device computes with the CPU
// kernel and hands each output back in the meta function's strides (one copy where they differ), so a
// compiled graph's size and stride asserts on these extern kernels hold. Found by the meta-agreement
// oracle (benchmarks/opdb_oracles.py).
const char* const kMetaLayout[] = {"_fft_r2c", "_fft_c2c", "_fft_c2r"};

void meta_laid_out(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  torch::jit::Stack meta(stack->end() - n, stack->end());
  for (c10::IValue& v : meta) {
    if (!v.isTensor()) continue;
    const at::Tensor& t = v.toTensor();
    v = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  }
  fallback(op, stack);
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::Error&) {
    return;  // no prediction to meet: the CPU's layout stands
  }
  const size_t m = op.schema().returns().size();
  for (size_t i = 0; i < m && i < meta.size(); ++i) {
    c10::IValue& v = (*stack)[stack->size() - m + i];
    if (!v.isTensor() || !meta[i].isTensor()) continue;
    const at::Tensor got = v.toTensor();
    const at::Tensor& want = meta[i].toTensor();
    if (got.sizes() != want.sizes() || got.strides() == want.strides()) continue;
    at::Tensor laid = at::empty_strided(got.sizes(), want.strides(), got.options());
    laid.copy_(got);
    v = std::move(laid);
  }
}

void answers_no(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  torch::jit::drop(*stack, op.schema().arguments().size());
  stack->emplace_back(false);
}
}  // namespace

void register_fallback() {
  static torch::Library every(torch::Library::IMPL, "_", kKey, __FILE__, __LINE__);
  every.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  for (const char* op : kChoosesBackend) m.impl(op, torch::CppFunction::makeFromBoxedFunction<&convolution_as_device>());
  if (!is_cuda()) return;  // torch_npu has none of them: on the simulated NPU they take its fallback
  for (const char* op : kMetaLayout) m.impl(op, torch::CppFunction::makeFromBoxedFunction<&meta_laid_out>());
  for (const char* op : kVendorPredicates) m.impl(op, torch::CppFunction::makeFromBoxedFunction<&answers_no>());
}

// An operator with a CPU kernel and a composite one (structured, or CompositeExplicitAutograd) takes
// the CPU kernel on the device: a CPU build fills the CUDA slot with the composite, which runs
// its parts on the device one by one (three dispatches for a structured operator's out= wrapper) and
// may compute differently (native_layer_norm's math_native_layer_norm differs from the CPU's fused
// kernel by an ulp, so long trainings drifted from their CPU twins). The same for a CPU kernel beside
// a CompositeImplicitAutograd one that serves the other backends (silu_backward, mish_backward: their
// math_* composites round differently from the CPU's fused kernels); as on the CPU, autograd then
// sees the operator as a kernel, not through its composite.
void register_cpu_kernels_direct() {
  static std::unique_ptr<torch::Library> lib;
  if (lib) return;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0 || metadata_in_place(name.name)) continue;
    auto h = dispatcher.findOp(name);
    if (!h || !h->hasSchema() || device_has_kernel(*h, kKey) || !h->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        !(h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
          h->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
          h->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))) {
      continue;
    }
    bool view = false;  // a view must alias the device tensor's own storage: never through CPU views
    for (const auto& r : h->schema().returns()) view = view || (r.alias_info() != nullptr && !r.alias_info()->isWrite());
    if (view) continue;
    const std::string op = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    if (npu_coverage_active() && !npu_native(op)) continue;  // torch_npu has no kernel: its composite runs
    lib->impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&fallback>());
  }
  register_sparse_cpu_kernels();
}

// Composite operators (CompositeImplicitAutograd) that a serve loop calls thousands of times and that
// decompose into many small operators run whole on the CPU, over views of the device tensors: one
// fallback call instead of one per part (attention's math path is about twenty; nano-vllm's decode
// step runs it once per sequence and layer). The result is the CPU's: the same kernels the parts ran.
void register_host_composites() {
  static std::unique_ptr<torch::Library> lib, autograd;
  if (lib) return;
  lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  autograd = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                              c10::getAutogradKeyFromBackend(c10::toBackendComponent(kKey)), __FILE__, __LINE__);
  for (const char* op : {"scaled_dot_product_attention", "repeat_interleave.self_int"}) {
    lib->impl(op, torch::CppFunction::makeFromBoxedFunction<&host_composite>());
    autograd->impl(op, torch::CppFunction::makeFromBoxedFunction<&composite_or_host>());
  }
}

}  // namespace cudashim
