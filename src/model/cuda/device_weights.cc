#include "model/cuda/device_weights.h"

#include <cmath>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/cuda/random_fill.h"

namespace dscale::cuda {
namespace {

// Element counts of one layer's matrices and gains.
struct LayerSizes {
  int64_t qkv, o_proj, gate_up, down, hidden, head_dim;
};

LayerSizes SizesOf(const DecoderConfig& c) {
  const int64_t h = c.hidden_size;
  return {.qkv = (c.q_dim() + 2 * c.kv_dim()) * h,
          .o_proj = h * c.q_dim(),
          .gate_up = 2 * c.intermediate_size * h,
          .down = h * c.intermediate_size,
          .hidden = h,
          .head_dim = c.head_dim};
}

// Uniform on [−a, a] has variance a²/3: a = √3 · stddev.
DeviceBuffer<Bf16> RandomMatrix(int64_t rows, int64_t in, double stddev, uint64_t seed,
                                cudaStream_t stream) {
  DeviceBuffer<Bf16> m(Count(rows * in));
  const auto a = static_cast<float>(std::sqrt(3.0) * stddev);
  FillUniformBf16(m.data(), rows * in, seed, -a, a, stream);
  return m;
}

DeviceBuffer<float> UnitGains(int64_t n, cudaStream_t stream) {
  DeviceBuffer<float> g(Count(n));
  FillConstant(g.data(), n, 1.0f, stream);
  return g;
}

double ProjectionStddev(int64_t in) { return 1.0 / std::sqrt(static_cast<double>(in)); }

DeviceLayerWeights RandomLayer(const DecoderConfig& c, uint64_t seed, cudaStream_t stream) {
  const int64_t h = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  // Distinct seeds per matrix: seed · 8 + index keeps them apart across layers too.
  return {
      .input_norm = UnitGains(h, stream),
      .qkv = RandomMatrix(c.q_dim() + 2 * c.kv_dim(), h, ProjectionStddev(h), seed * 8 + 0, stream),
      .q_norm = UnitGains(c.head_dim, stream),
      .k_norm = UnitGains(c.head_dim, stream),
      .o_proj = RandomMatrix(h, c.q_dim(), ProjectionStddev(c.q_dim()), seed * 8 + 1, stream),
      .post_norm = UnitGains(h, stream),
      .gate_up = RandomMatrix(2 * inter, h, ProjectionStddev(h), seed * 8 + 2, stream),
      .down = RandomMatrix(h, inter, ProjectionStddev(inter), seed * 8 + 3, stream)};
}

}  // namespace

DeviceBuffer<Bf16> UploadAsBf16(const std::vector<float>& values) {
  std::vector<Bf16> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i].bits = F32ToBf16(values[i]);
  return DeviceBuffer<Bf16>(bits.data(), bits.size());
}

DeviceBuffer<Bf16> UploadAsBf16(const WeightMatrix& matrix) {
  const std::vector<uint16_t> host = matrix.ToBf16();
  std::vector<Bf16> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i].bits = host[i];
  return DeviceBuffer<Bf16>(bits.data(), bits.size());
}

DeviceBuffer<float> UploadF32(const std::vector<float>& values) {
  return DeviceBuffer<float>(values.data(), values.size());
}

DeviceLayerWeights UploadLayerWeights(const DecoderLayerWeights& w) {
  return {.input_norm = UploadF32(w.input_norm),
          .qkv = UploadAsBf16(w.qkv),
          .q_norm = UploadF32(w.q_norm),
          .k_norm = UploadF32(w.k_norm),
          .o_proj = UploadAsBf16(w.o_proj),
          .post_norm = UploadF32(w.post_norm),
          .gate_up = UploadAsBf16(w.gate_up),
          .down = UploadAsBf16(w.down)};
}

int64_t DeviceLayerWeights::bytes() const {
  return static_cast<int64_t>(input_norm.bytes() + qkv.bytes() + q_norm.bytes() + k_norm.bytes() +
                              o_proj.bytes() + post_norm.bytes() + gate_up.bytes() + down.bytes());
}

int64_t DeviceDecoderWeights::bytes() const {
  int64_t total = static_cast<int64_t>(embed.bytes() + final_norm.bytes() + lm_head.bytes());
  for (const DeviceLayerWeights& l : layers) total += l.bytes();
  return total;
}

DeviceDecoderWeights UploadDecoderWeights(const DecoderConfig& config,
                                          const DecoderWeights& weights) {
  DSCALE_CHECK(static_cast<int64_t>(weights.layers.size()) == config.num_hidden_layers);
  DSCALE_CHECK_MSG(!config.HasSparseLayers(), "sparse MLP layers are not on the device yet");
  DeviceDecoderWeights d;
  d.embed = UploadAsBf16(weights.embed);
  for (const DecoderLayerWeights& layer : weights.layers)
    d.layers.push_back(UploadLayerWeights(layer));
  d.final_norm = UploadF32(weights.final_norm);
  if (!weights.lm_head.empty()) d.lm_head = UploadAsBf16(weights.lm_head);
  return d;
}

DeviceDecoderWeights RandomDeviceDecoderWeights(const DecoderConfig& config, uint64_t seed,
                                                cudaStream_t stream) {
  const int64_t h = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  DSCALE_CHECK_MSG(!config.HasSparseLayers(), "sparse MLP layers are not on the device yet");
  DeviceDecoderWeights d;
  // Seeds: 1 the embedding, 2 the LM head, 3 + layer for each layer's matrices (mixed with the
  // caller's seed so different seeds give unrelated weights).
  const uint64_t base = seed * 0x100000001b3ull;
  d.embed = RandomMatrix(vocab, h, 1.0, base + 1, stream);
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    d.layers.push_back(RandomLayer(config, base + 3 + static_cast<uint64_t>(layer), stream));
  }
  d.final_norm = UnitGains(h, stream);
  if (!config.tie_word_embeddings) {
    d.lm_head = RandomMatrix(vocab, h, 3.0 * ProjectionStddev(h), base + 2, stream);
  }
  return d;
}

int64_t DeviceDecoderWeightBytes(const DecoderConfig& config) {
  const LayerSizes s = SizesOf(config);
  const int64_t bf16 = static_cast<int64_t>(sizeof(Bf16));
  const int64_t f32 = static_cast<int64_t>(sizeof(float));
  const int64_t per_layer =
      (s.qkv + s.o_proj + s.gate_up + s.down) * bf16 + (2 * s.hidden + 2 * s.head_dim) * f32;
  const int64_t table = config.vocab_size * config.hidden_size * bf16;
  return table * (config.tie_word_embeddings ? 1 : 2) + per_layer * config.num_hidden_layers +
         s.hidden * f32;
}

}  // namespace dscale::cuda
