// A Llama / Qwen2 decoder layer over k-quant weights in one call: RMSNorm, the q/k/v product (+
// biases), RoPE, the cache write, attention over each token's own cached prefix, the output
// product, RMSNorm, gate/up, SiLU, down, both residuals (LeanLlama's layer, specvideo/text/runtime/lean.py).
//
// A decode step spends a few milliseconds in the ~20 PyTorch ops around the four products of each
// layer (dispatch, allocation, a 4-row padded attention call); here they are plain loops. Every
// token is computed by the same operations whatever the call's token count: the products' rows are
// their own (qmm.h), norms and RoPE are per token, and a query attends over slots 0 .. its slot of
// its batch row in a fixed order, one (token, head) per task. A k-token check therefore gives each
// token the bits of a 1-token step (the invariant verifier's contract), with no padded rows.
#include "qmm.h"

namespace {

using PartT = std::tuple<torch::Tensor, torch::Tensor, torch::Tensor, int64_t, int64_t, int64_t>;

struct Projection {  // weights sharing an input, outputs side by side (q/k/v of two formats)
  std::vector<qmm::Part> parts;
  int64_t N = 0, K = 0;

  explicit Projection(const std::vector<PartT>& given) {
    for (const auto& [codes, scales, supers, bits, group, S] : given) {
      parts.push_back({codes.contiguous(), scales.contiguous(), supers.contiguous(), bits, group, S});
      qmm::check(parts.back());
      TORCH_CHECK(K == 0 || parts.back().K() == K, "the parts of a projection share their input width");
      K = parts.back().K();
      N += parts.back().N();
    }
  }

  void operator()(const float* x, int64_t M, float* y) const {  // y (M, N)
    int64_t offset = 0;
    for (const auto& p : parts) {
      qmm::product(p, x, M, y + offset, N);
      offset += p.N();
    }
  }
};

// y (M, d) = RMSNorm(x) * weight, per row.
void rms_norm(const float* x, const float* weight, int64_t M, int64_t d, float eps, float* y) {
  for (int64_t m = 0; m < M; ++m) {
    const float* r = x + m * d;
    float sum = 0.f;
    for (int64_t i = 0; i < d; ++i) sum += r[i] * r[i];
    const float scale = 1.f / std::sqrt(sum / d + eps);
    for (int64_t i = 0; i < d; ++i) y[m * d + i] = r[i] * scale * weight[i];
  }
}

// exp of 16 floats: 2^n p(x - n ln 2) with a degree-5 polynomial and two-part ln 2 (the routine of
// ARM's optimized-routines that ggml's CPU backend uses; about 1.5 ulp); overflow to inf, underflow to 0.
inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 high = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), r, _mm512_set1_ps(0x1.573e2ep-5f)), r2,
                                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), r, _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 poly = _mm512_fmadd_ps(high, r2, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), r, _mm512_set1_ps(1.f)));
  const __m512 out = _mm512_scalef_ps(poly, n);
  const __mmask16 far = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.f), _CMP_GT_OQ);
  if (!far) return out;
  const __m512 limit = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                            _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(far, out, limit);
}

// y[i] = exp(x[i] - shift) for i < n, and their sum in index order; 16 at a time, the tail one by one
// (a given n always splits alike).
float exp_shifted(float* y, const float* x, int64_t n, float shift) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(shift))));
  for (; i < n; ++i) y[i] = std::exp(x[i] - shift);
  float sum = 0.f;
  for (i = 0; i < n; ++i) sum += y[i];
  return sum;
}

// a (I) = SiLU(gate) * up.
void silu_mul(const float* gate, const float* up, int64_t I, float* a) {
  int64_t i = 0;
  const __m512 one = _mm512_set1_ps(1.f);
  for (; i + 16 <= I; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
    _mm512_storeu_ps(a + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i)));
  }
  for (; i < I; ++i) a[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

float dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  float sum = _mm512_reduce_add_ps(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

class Layer {
 public:
  Layer(const std::vector<PartT>& qkv, const std::vector<PartT>& o_proj, const std::vector<PartT>& gate_up,
        const std::vector<PartT>& down, torch::Tensor in_norm, torch::Tensor post_norm, std::optional<torch::Tensor> bias,
        double eps, int64_t heads, int64_t kv_heads, int64_t head_dim)
      : qkv_(qkv), o_(o_proj), gate_up_(gate_up), down_(down), in_norm_(in_norm.contiguous()),
        post_norm_(post_norm.contiguous()), eps_(eps), H_(heads), Hkv_(kv_heads), D_(head_dim) {
    const int64_t d = in_norm_.numel();
    TORCH_CHECK(qkv_.K == d && qkv_.N == (H_ + 2 * Hkv_) * D_, "q/k/v: ", (H_ + 2 * Hkv_) * D_, " x ", d, " expected");
    TORCH_CHECK(o_.K == H_ * D_ && o_.N == d, "the output projection: ", d, " x ", H_ * D_, " expected");
    TORCH_CHECK(gate_up_.K == d && gate_up_.N % 2 == 0 && down_.K == gate_up_.N / 2 && down_.N == d,
                "gate/up and down: 2I x d and d x I expected");
    TORCH_CHECK(H_ % Hkv_ == 0, "heads must be a multiple of the key/value heads");
    if (bias) {
      bias_ = bias->contiguous();
      TORCH_CHECK(bias_.numel() == qkv_.N, "the q/k/v biases: ", qkv_.N, " expected");
    }
  }

  // x (M, d) float32; kv (2, B, H_kv, capacity, D) this layer's cache; cos, sin (T, D) tables (sin
  // sign-folded: rotate_half(v) = roll(v, D / 2) * sign); positions, rows, slots (M,) int64: each
  // token's position, batch row and cache slot (-1: no real token, nothing written or attended).
  torch::Tensor forward(torch::Tensor x, torch::Tensor kv, torch::Tensor cos, torch::Tensor sin, torch::Tensor positions,
                        torch::Tensor rows, torch::Tensor slots) const {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x: contiguous (M, d) float32");
    TORCH_CHECK(kv.dim() == 5 && kv.is_contiguous() && kv.size(2) == Hkv_ && kv.size(4) == D_, "kv: (2, B, H_kv, capacity, D)");
    const int64_t M = x.size(0), d = x.size(1);
    TORCH_CHECK(d == in_norm_.numel(), "x has width ", d, ", the layer ", in_norm_.numel());
    std::vector<float> h(M * d), qkv(M * qkv_.N), att(M * H_ * D_, 0.f);
    rms_norm(x.data_ptr<float>(), in_norm_.data_ptr<float>(), M, d, eps_, h.data());
    qkv_(h.data(), M, qkv.data());
    rotate_and_store(qkv.data(), M, kv, cos, sin, positions, rows, slots);
    attend(qkv.data(), M, kv, rows, slots, att.data());
    auto out = torch::empty({M, d}, torch::kFloat32);
    float* y = out.data_ptr<float>();
    o_(att.data(), M, y);
    const float* xs = x.data_ptr<float>();
    for (int64_t i = 0; i < M * d; ++i) y[i] += xs[i];
    rms_norm(y, post_norm_.data_ptr<float>(), M, d, eps_, h.data());
    const int64_t I = gate_up_.N / 2;
    std::vector<float> gu(M * 2 * I), a(M * I), down(M * d);
    gate_up_(h.data(), M, gu.data());
    for (int64_t m = 0; m < M; ++m) silu_mul(gu.data() + m * 2 * I, gu.data() + m * 2 * I + I, I, a.data() + m * I);
    down_(a.data(), M, down.data());
    for (int64_t i = 0; i < M * d; ++i) y[i] += down[i];
    return out;
  }

 private:
  // Biases, RoPE on the q and k heads, then each real token's keys and values into its slot.
  void rotate_and_store(float* qkv, int64_t M, torch::Tensor& kv, const torch::Tensor& cos, const torch::Tensor& sin,
                        const torch::Tensor& positions, const torch::Tensor& rows, const torch::Tensor& slots) const {
    const int64_t N = qkv_.N, B = kv.size(1), capacity = kv.size(3), half = D_ / 2;
    const float* c = cos.data_ptr<float>();
    const float* s = sin.data_ptr<float>();
    const int64_t* pos = positions.data_ptr<int64_t>();
    const int64_t* row = rows.data_ptr<int64_t>();
    const int64_t* slot = slots.data_ptr<int64_t>();
    float* cache = kv.data_ptr<float>();
    std::vector<float> v(D_);
    for (int64_t m = 0; m < M; ++m) {
      float* t = qkv + m * N;
      if (bias_.defined())
        for (int64_t i = 0; i < N; ++i) t[i] += bias_.data_ptr<float>()[i];
      const float* cm = c + pos[m] * D_;
      const float* sm = s + pos[m] * D_;
      for (int64_t head = 0; head < H_ + Hkv_; ++head) {
        float* u = t + head * D_;
        std::copy(u, u + D_, v.begin());
        for (int64_t i = 0; i < D_; ++i) u[i] = v[i] * cm[i] + v[(i + half) % D_] * sm[i];
      }
      if (slot[m] < 0) continue;
      TORCH_CHECK(slot[m] < capacity && row[m] < B, "a token's cache slot or row lies outside the cache");
      for (int64_t which = 0; which < 2; ++which)
        for (int64_t head = 0; head < Hkv_; ++head) {
          const float* src = t + (H_ + which * Hkv_ + head) * D_;
          std::copy(src, src + D_, cache + (((which * B + row[m]) * Hkv_ + head) * capacity + slot[m]) * D_);
        }
    }
  }

  // att (M, H D): each real token's query heads over slots 0 .. its slot of its row. A task is one
  // (batch row, head): each key and value is read once for all the row's tokens, and each token's
  // scores, softmax and weighted sum run in the order a token alone would run them.
  void attend(const float* qkv, int64_t M, const torch::Tensor& kv, const torch::Tensor& rows, const torch::Tensor& slots,
              float* att) const {
    const int64_t N = qkv_.N, B = kv.size(1), capacity = kv.size(3), group = H_ / Hkv_;
    const int64_t* row = rows.data_ptr<int64_t>();
    const int64_t* slot = slots.data_ptr<int64_t>();
    const float* cache = kv.data_ptr<float>();
    const float scale = 1.f / std::sqrt((float)D_);
    std::vector<std::vector<int64_t>> tokens(B);  // each row's real tokens
    for (int64_t m = 0; m < M; ++m)
      if (slot[m] >= 0) tokens[row[m]].push_back(m);
    at::parallel_for(0, B * H_, 1, [&](int64_t t0, int64_t t1) {
      std::vector<float> p, sums;
      for (int64_t task = t0; task < t1; ++task) {
        const int64_t b = task / H_, head = task % H_;
        const auto& own = tokens[b];
        if (own.empty()) continue;
        int64_t n = 0;
        for (int64_t m : own) n = std::max(n, slot[m] + 1);
        const float* keys = cache + ((b * Hkv_ + head / group) * capacity) * D_;
        const float* values = cache + (((B + b) * Hkv_ + head / group) * capacity) * D_;
        const int64_t T = own.size();
        p.assign(T * n, 0.f);
        sums.assign(T, 0.f);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t t = 0; t < T; ++t)
            if (j <= slot[own[t]]) p[t * n + j] = dot(qkv + own[t] * N + head * D_, keys + j * D_, D_) * scale;
        for (int64_t t = 0; t < T; ++t) {
          float* pt = p.data() + t * n;
          const int64_t len = slot[own[t]] + 1;
          sums[t] = exp_shifted(pt, pt, len, *std::max_element(pt, pt + len));
        }
        for (int64_t j = 0; j < n; ++j) {
          const float* vj = values + j * D_;
          for (int64_t t = 0; t < T; ++t) {
            if (j > slot[own[t]]) continue;
            const float w = p[t * n + j] / sums[t];
            float* out = att + own[t] * H_ * D_ + head * D_;
            for (int64_t i = 0; i < D_; ++i) out[i] += w * vj[i];
          }
        }
      }
    });
  }

  Projection qkv_, o_, gate_up_, down_;
  torch::Tensor in_norm_, post_norm_, bias_;
  float eps_;
  int64_t H_, Hkv_, D_;
};

}  // namespace

void bind_layer(pybind11::module& m) {
  pybind11::class_<Layer>(m, "Layer", "a decoder layer over k-quant weights in one call (layer.cpp)")
      .def(pybind11::init<const std::vector<PartT>&, const std::vector<PartT>&, const std::vector<PartT>&,
                          const std::vector<PartT>&, torch::Tensor, torch::Tensor, std::optional<torch::Tensor>, double,
                          int64_t, int64_t, int64_t>())
      .def("forward", &Layer::forward);
}
