// The k-quant product as a PyTorch op (the kernel is qmm.h's), a decoder layer in one call
// (layer.cpp), and the module's bindings.
#include "qmm.h"

void bind_layer(pybind11::module& m);  // layer.cpp

// x (M, K) float32; codes (N / 16, groups, bytes) uint8; scales (N / 16, groups, 2, 16) int8;
// supers (N / 16, groups / S, 2, 16) float32 -> (M, N) float32.
torch::Tensor qmm_op(torch::Tensor x, torch::Tensor codes, torch::Tensor scales, torch::Tensor supers,
                     int64_t bits, int64_t group, int64_t S) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x: contiguous (M, K) float32");
  const qmm::Part p{codes, scales, supers, bits, group, S};
  TORCH_CHECK(x.size(1) == p.K(), "x has ", x.size(1), " inputs, the weight ", p.K());
  qmm::check(p);
  auto y = torch::empty({x.size(0), p.N()}, torch::kFloat32);
  qmm::product(p, x.data_ptr<float>(), x.size(0), y.data_ptr<float>(), p.N());
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("qmm", &qmm_op, "quantised weight x float activations (VNNI)");
  bind_layer(m);
}
