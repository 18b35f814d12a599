#include "dvl/predictor.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <span>

#include "io/byte_buffer.h"
#include "io/file_util.h"

namespace dscale::dvl {
namespace {

static_assert(std::endian::native == std::endian::little,
              "predictor files are little-endian; a big-endian host needs byte swaps here");

// Limits that keep size arithmetic far from overflow; real drafters are well inside them.
constexpr uint64_t kMaxHiddenSize = 1u << 20;
constexpr uint64_t kMaxVocabSize = 1u << 24;

struct Header {
  uint32_t version = kPredictorFileVersion;
  uint32_t feature_count = kFeatureCount;
  uint32_t mlp_hidden = kPredictorHidden;
  uint32_t outputs = kDraftPositions;
  uint32_t hidden_proj = kHiddenProjDim;
  uint32_t logit_proj = kLogitProjDim;
  uint32_t drafter_hidden = 0;
  uint32_t drafter_vocab = 0;
  uint64_t seed = 0;
};

uint64_t PayloadFloats(uint64_t hidden_size, uint64_t vocab_size) {
  return hidden_size * kHiddenProjDim + vocab_size * kLogitProjDim + 2 * kFeatureCount +
         kFeatureCount * kPredictorHidden + kPredictorHidden + kPredictorHidden * kDraftPositions +
         kDraftPositions;
}

// The payload arrays in file order (const or mutable with the arguments).
template <typename P, typename W>
auto PayloadArrays(P& p, W& w) {
  return std::array{&p.hidden, &p.logit, &w.feature_mean, &w.feature_std,
                    &w.w1,     &w.b1,    &w.w2,           &w.b2};
}

Status CheckFixedDims(const Header& h) {
  const std::array<std::pair<const char*, std::pair<uint32_t, uint32_t>>, 5> dims = {{
      {"feature count", {h.feature_count, kFeatureCount}},
      {"MLP hidden width", {h.mlp_hidden, kPredictorHidden}},
      {"output count", {h.outputs, kDraftPositions}},
      {"hidden projection width", {h.hidden_proj, kHiddenProjDim}},
      {"logit projection width", {h.logit_proj, kLogitProjDim}},
  }};
  for (const auto& [name, values] : dims) {
    if (values.first != values.second) {
      return DataLoss(std::string(name) + " is " + std::to_string(values.first) + ", expected " +
                      std::to_string(values.second));
    }
  }
  if (h.drafter_hidden == 0 || h.drafter_hidden > kMaxHiddenSize) {
    return DataLoss("drafter hidden size " + std::to_string(h.drafter_hidden) +
                    " is out of range [1, " + std::to_string(kMaxHiddenSize) + "]");
  }
  if (h.drafter_vocab < kTopRanks || h.drafter_vocab > kMaxVocabSize) {
    return DataLoss("drafter vocabulary size " + std::to_string(h.drafter_vocab) +
                    " is out of range [16, " + std::to_string(kMaxVocabSize) + "]");
  }
  return Status::Ok();
}

Status CheckDrafter(const Header& h, DrafterDims expected) {
  if (expected.hidden_size != 0 && h.drafter_hidden != expected.hidden_size) {
    return InvalidArgument("built for drafter hidden size " + std::to_string(h.drafter_hidden) +
                           ", but the running drafter has " + std::to_string(expected.hidden_size));
  }
  if (expected.vocab_size != 0 && h.drafter_vocab != expected.vocab_size) {
    return InvalidArgument("built for drafter vocabulary size " + std::to_string(h.drafter_vocab) +
                           ", but the running drafter has " + std::to_string(expected.vocab_size));
  }
  return Status::Ok();
}

Result<Header> ParseHeader(ByteReader& in) {
  std::array<char, 8> magic{};
  in.Bytes(magic.data(), magic.size());
  if (!std::equal(magic.begin(), magic.end(), kPredictorMagic)) {
    return DataLoss("bad magic: not a dscale predictor file");
  }
  Header h;
  h.version = in.U32();
  if (h.version != kPredictorFileVersion) {
    return DataLoss("unsupported version " + std::to_string(h.version) + " (this build reads " +
                    std::to_string(kPredictorFileVersion) + ")");
  }
  for (uint32_t* field : {&h.feature_count, &h.mlp_hidden, &h.outputs, &h.hidden_proj,
                          &h.logit_proj, &h.drafter_hidden, &h.drafter_vocab}) {
    *field = in.U32();
  }
  h.seed = in.U64();
  DSCALE_RETURN_IF_ERROR(CheckFixedDims(h));
  return h;
}

Status CheckValues(const Projections& p, const PredictorWeights& w) {
  const char* names[] = {"hidden projection",
                         "logit projection",
                         "feature mean",
                         "feature std",
                         "w1",
                         "b1",
                         "w2",
                         "b2"};
  const auto arrays = PayloadArrays(p, w);
  for (size_t a = 0; a < arrays.size(); ++a) {
    const std::vector<float>& v = *arrays[a];
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        return DataLoss(std::string(names[a]) + "[" + std::to_string(i) + "] is not finite");
      }
    }
  }
  for (size_t i = 0; i < w.feature_std.size(); ++i) {
    if (!(w.feature_std[i] > 0.0f)) {
      return DataLoss("feature std[" + std::to_string(i) + "] is " +
                      std::to_string(w.feature_std[i]) + ", must be > 0");
    }
  }
  return Status::Ok();
}

Result<Predictor> ParsePredictor(std::span<const char> bytes, DrafterDims expected) {
  if (bytes.size() < static_cast<size_t>(kPredictorHeaderBytes)) {
    return DataLoss("truncated header: " + std::to_string(bytes.size()) + " of " +
                    std::to_string(kPredictorHeaderBytes) + " bytes");
  }
  ByteReader in(bytes);
  DSCALE_ASSIGN_OR_RETURN(const Header h, ParseHeader(in));
  DSCALE_RETURN_IF_ERROR(CheckDrafter(h, expected));
  const uint64_t want =
      kPredictorHeaderBytes + 4 * PayloadFloats(h.drafter_hidden, h.drafter_vocab);
  if (bytes.size() < want) {
    return DataLoss("truncated: " + std::to_string(bytes.size()) + " bytes, the header implies " +
                    std::to_string(want));
  }
  if (bytes.size() > want) {
    return DataLoss(std::to_string(bytes.size() - want) + " trailing bytes after the payload");
  }
  Projections p;
  p.hidden_size = h.drafter_hidden;
  p.vocab_size = h.drafter_vocab;
  p.seed = h.seed;
  p.hidden.resize(static_cast<size_t>(p.hidden_size) * kHiddenProjDim);
  p.logit.resize(static_cast<size_t>(p.vocab_size) * kLogitProjDim);
  PredictorWeights w = PredictorWeights::Zeros();
  for (std::vector<float>* array : PayloadArrays(p, w)) in.Floats(array->data(), array->size());
  DSCALE_RETURN_IF_ERROR(CheckValues(p, w));
  SetLogitColumnSums(p);
  return Predictor(std::move(p), std::move(w));
}

}  // namespace

PredictorWeights PredictorWeights::Zeros() {
  PredictorWeights w;
  w.feature_mean.assign(kFeatureCount, 0.0f);
  w.feature_std.assign(kFeatureCount, 1.0f);
  w.w1.assign(static_cast<size_t>(kFeatureCount) * kPredictorHidden, 0.0f);
  w.b1.assign(kPredictorHidden, 0.0f);
  w.w2.assign(static_cast<size_t>(kPredictorHidden) * kDraftPositions, 0.0f);
  w.b2.assign(kDraftPositions, 0.0f);
  return w;
}

Predictor::Predictor(Projections projections, PredictorWeights weights)
    : projections_(std::move(projections)), weights_(std::move(weights)) {
  DSCALE_CHECK(weights_.feature_mean.size() == kFeatureCount);
  DSCALE_CHECK(weights_.feature_std.size() == kFeatureCount);
  DSCALE_CHECK(weights_.w1.size() == static_cast<size_t>(kFeatureCount) * kPredictorHidden);
  DSCALE_CHECK(weights_.b1.size() == kPredictorHidden);
  DSCALE_CHECK(weights_.w2.size() == static_cast<size_t>(kPredictorHidden) * kDraftPositions);
  DSCALE_CHECK(weights_.b2.size() == kDraftPositions);
  DSCALE_CHECK(projections_.hidden.size() ==
               static_cast<size_t>(projections_.hidden_size) * kHiddenProjDim);
  DSCALE_CHECK(projections_.logit.size() ==
               static_cast<size_t>(projections_.vocab_size) * kLogitProjDim);
}

Result<Predictor> Predictor::Load(const std::string& path, DrafterDims expected) {
  DSCALE_ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(path, kAnyFileSize));
  Result<Predictor> parsed = ParsePredictor(bytes, expected);
  if (!parsed.ok()) return parsed.status().WithContext("predictor file " + path);
  return parsed;
}

Status Predictor::Save(const std::string& path) const {
  ByteWriter out;
  out.Bytes(kPredictorMagic, sizeof(kPredictorMagic));
  const Header h{.drafter_hidden = static_cast<uint32_t>(projections_.hidden_size),
                 .drafter_vocab = static_cast<uint32_t>(projections_.vocab_size),
                 .seed = projections_.seed};
  for (uint32_t field : {h.version, h.feature_count, h.mlp_hidden, h.outputs, h.hidden_proj,
                         h.logit_proj, h.drafter_hidden, h.drafter_vocab}) {
    out.U32(field);
  }
  out.U64(h.seed);
  for (const std::vector<float>* array : PayloadArrays(projections_, weights_)) {
    out.Floats(array->data(), array->size());
  }
  return WriteFileAtomically(path, out.bytes().data(), out.bytes().size())
      .WithContext("predictor file " + path);
}

void PredictorMlpForward(const PredictorWeights& w, const float* normalised, float* hidden,
                         float* logits) {
  // Input-major weights: accumulate x̂_d · w1[d, :] so the inner loop runs over contiguous
  // hidden units (vectorisable without reassociating a dot product). The accumulators are
  // locals so the compiler can see they alias no weight.
  std::array<float, kPredictorHidden> h1;
  std::copy(w.b1.begin(), w.b1.end(), h1.begin());
  for (int d = 0; d < kFeatureCount; ++d) {
    const float x = normalised[d];
    if (x == 0.0f) continue;
    const float* row = w.w1.data() + static_cast<size_t>(d) * kPredictorHidden;
    for (int h = 0; h < kPredictorHidden; ++h) h1[h] += x * row[h];
  }
  std::array<float, kDraftPositions> out;
  std::copy(w.b2.begin(), w.b2.end(), out.begin());
  for (int h = 0; h < kPredictorHidden; ++h) {
    h1[h] = std::max(h1[h], 0.0f);
    const float* row = w.w2.data() + static_cast<size_t>(h) * kDraftPositions;
    for (int o = 0; o < kDraftPositions; ++o) out[o] += h1[h] * row[o];
  }
  std::copy(h1.begin(), h1.end(), hidden);
  std::copy(out.begin(), out.end(), logits);
}

void Predictor::Forward(const float* features, int64_t n, float* logits) const {
  std::array<float, kFeatureCount> normalised;
  std::array<float, kPredictorHidden> hidden;
  for (int64_t i = 0; i < n; ++i) {
    const float* x = features + i * kFeatureCount;
    for (int d = 0; d < kFeatureCount; ++d) {
      normalised[d] = (x[d] - weights_.feature_mean[d]) / weights_.feature_std[d];
    }
    PredictorMlpForward(weights_, normalised.data(), hidden.data(), logits + i * kDraftPositions);
  }
}

}  // namespace dscale::dvl
