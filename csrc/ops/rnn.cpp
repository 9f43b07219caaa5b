// LSTM and GRU cells on the device. PyTorch's RNN layers take a different path on a CUDA (or
// PrivateUse1) tensor than on a CPU one: each step calls the fused cell operators
// (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backwards), which exist only as CUDA kernels,
// so the boxed fallback finds no CPU kernel and nn.LSTM / nn.GRU / LSTMCell / GRUCell raised
// NotImplementedError. These kernels compute the fused cells from CPU ops on views of the same
// memory, in the order the CPU's unfused cell computes them (RNN.cpp's LSTMCell / GRUCell), and keep
// CUDA's workspace layout, which the backward operators read:
//   LSTM: workspace (B, 4H) = activated gates [i, f, g, o]
//   GRU:  workspace (B, 5H) = [r, z, n, hx, hidden new-gate pre-activation + hidden bias]
#include "call.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace cudashim {
namespace {

using OptT = std::optional<at::Tensor>;

using cudashim::host;  // shim.h's, beside the optional overload below (which would hide it)
at::Tensor host(const OptT& t) { return t.has_value() ? cudashim::host(*t) : at::Tensor(); }

// CPU: gates = linear_hh(hx) + linear_ih(x), each linear adding its own bias
at::Tensor gates(const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& ib, const at::Tensor& hb) {
  if (!ib.defined()) return hg + ig;
  return (hg + hb) + (ig + ib);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx, const OptT& input_bias,
                                                         const OptT& hidden_bias) {
  const auto index = input_gates.device().index();
  at::Tensor g = gates(host(input_gates), host(hidden_gates), host(input_bias), host(hidden_bias));
  auto c = g.chunk(4, 1);
  at::Tensor i = c[0].sigmoid(), f = c[1].sigmoid(), n = c[2].tanh(), o = c[3].sigmoid();
  at::Tensor cy = f * host(cx) + i * n;
  at::Tensor hy = o * cy.tanh();
  at::Tensor ws = at::cat({i, f, n, o}, 1);
  return {as_device(std::move(hy), index), as_device(std::move(cy), index), as_device(std::move(ws), index)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const OptT& grad_hy, const OptT& grad_cy,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  const auto index = workspace.device().index();
  auto w = host(workspace).chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &n = w[2], &o = w[3];
  at::Tensor t = host(cy).tanh();
  at::Tensor ghy = grad_hy.has_value() && grad_hy->defined() ? host(*grad_hy) : at::zeros_like(t);
  at::Tensor gcy = at::tanh_backward(ghy * o, t);
  if (grad_cy.has_value() && grad_cy->defined()) gcy = gcy + host(*grad_cy);
  at::Tensor gi = at::sigmoid_backward(gcy * n, i);
  at::Tensor gf = at::sigmoid_backward(gcy * host(cx), f);
  at::Tensor gn = at::tanh_backward(gcy * i, n);
  at::Tensor go = at::sigmoid_backward(ghy * t, o);
  at::Tensor grad_gates = at::cat({gi, gf, gn, go}, 1);
  at::Tensor grad_cx = gcy * f;
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {as_device(std::move(grad_gates), index), as_device(std::move(grad_cx), index),
          grad_bias.defined() ? as_device(std::move(grad_bias), index) : grad_bias};
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const OptT& input_bias, const OptT& hidden_bias) {
  const auto index = input_gates.device().index();
  at::Tensor ig = host(input_gates), hg = host(hidden_gates), ib = host(input_bias), hb = host(hidden_bias);
  if (ib.defined()) {
    ig = ig + ib;
    hg = hg + hb;
  }
  auto ic = ig.chunk(3, 1);
  auto hc = hg.chunk(3, 1);
  at::Tensor r = (hc[0] + ic[0]).sigmoid();
  at::Tensor z = (hc[1] + ic[1]).sigmoid();
  at::Tensor n = (ic[2] + hc[2] * r).tanh();
  at::Tensor h = host(hx);
  at::Tensor hy = (h - n) * z + n;
  at::Tensor ws = at::cat({r, z, n, h, hc[2]}, 1);
  return {as_device(std::move(hy), index), as_device(std::move(ws), index)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(const at::Tensor& grad_hy,
                                                                                       const at::Tensor& workspace,
                                                                                       bool has_bias) {
  const auto index = workspace.device().index();
  auto w = host(workspace).chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &h = w[3], &hn = w[4];
  at::Tensor g = host(grad_hy);
  at::Tensor gz = at::sigmoid_backward(g * (h - n), z);
  at::Tensor ghx = g * z;
  at::Tensor gn = at::tanh_backward(g - g * z, n);  // d hy / d n = 1 - z
  at::Tensor ghn = gn * r;
  at::Tensor gr = at::sigmoid_backward(gn * hn, r);
  at::Tensor gi = at::cat({gr, gz, gn}, 1);
  at::Tensor gh = at::cat({gr, gz, ghn}, 1);
  at::Tensor gib = has_bias ? gi.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? gh.sum(0) : at::Tensor();
  auto dev = [index](const at::Tensor& t) { return t.defined() ? as_device(t, index) : t; };
  return {dev(gi), dev(gh), dev(ghx), dev(gib), dev(ghb)};
}

}  // namespace

void register_rnn() {
  static torch::Library m(torch::Library::IMPL, "aten", kKey, __FILE__, __LINE__);
  kernel<&lstm_cell>(m, "_thnn_fused_lstm_cell");
  kernel<&lstm_cell_backward>(m, "_thnn_fused_lstm_cell_backward_impl");
  kernel<&gru_cell>(m, "_thnn_fused_gru_cell");
  kernel<&gru_cell_backward>(m, "_thnn_fused_gru_cell_backward");
}

}  // namespace cudashim
