// Weights copied onto huge pages at load (model/resident_weights.h): the same values, each
// matrix one BF16 block on a cache line, independent of the source's storage, and matrices that
// are not BF16 left as they are.

#include "model/resident_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/random_checkpoint.h"

namespace dscale {
namespace {

// Every matrix CopyLayerToHugePages copies, in a fixed order.
std::vector<const WeightMatrix*> Copied(DecoderLayerWeights& layer) {
  std::vector<const WeightMatrix*> all;
  ForEachProjection(layer, [&all](WeightMatrix& m) { all.push_back(&m); });
  if (!layer.moe.empty()) all.push_back(&layer.moe.router);
  if (!layer.moe.shared_gate.empty()) all.push_back(&layer.moe.shared_gate);
  return all;
}

bool AllBf16(const WeightMatrix& m) {
  for (const WeightMatrix::Block& b : m.blocks()) {
    if (b.format != WeightFormat::kBF16) return false;
  }
  return true;
}

// Returns how many matrices were BF16 (and so copied).
int ExpectCopiedAsOneAlignedBlock(DecoderLayerWeights layer) {
  std::vector<std::vector<float>> before;
  std::vector<bool> bf16;
  std::vector<const void*> data;
  for (const WeightMatrix* m : Copied(layer)) {
    before.push_back(m->ToF32());
    bf16.push_back(AllBf16(*m));
    data.push_back(m->blocks()[0].data);
  }
  CopyLayerToHugePages(&layer);
  const std::vector<const WeightMatrix*> after = Copied(layer);
  EXPECT_EQ(after.size(), before.size());
  int copied = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    SCOPED_TRACE("matrix " + std::to_string(i));
    EXPECT_EQ(after[i]->ToF32(), before[i]);
    if (!bf16[i]) {
      EXPECT_EQ(after[i]->blocks()[0].data, data[i]);  // f32: left where it is
      continue;
    }
    ++copied;
    EXPECT_EQ(after[i]->blocks().size(), 1u);
    EXPECT_EQ(after[i]->blocks()[0].format, WeightFormat::kBF16);
    EXPECT_NE(after[i]->blocks()[0].data, data[i]);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(after[i]->blocks()[0].data) % 64, 0u);
  }
  return copied;
}

// A Qwen3.5-MoE checkpoint's layer as loaded from its mapping (linear attention, 8 fused experts
// sliced, a shared expert and its gate) and an attention layer whose q/k/v are two stacked
// blocks: every BF16 matrix becomes one block of its own on a cache line, with the values it had.
TEST(ResidentWeightsTest, ALayersBf16MatricesBecomeOneAlignedBlockEachWithTheirValues) {
  const DecoderConfig moe = TinyQwen3_5MoeConfig();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("dscale_resident_" + std::to_string(::getpid())))
          .string();
  ASSERT_TRUE(WriteRandomCheckpoint(dir, moe, 3, DType::kBF16).ok());
  Result<Checkpoint> opened = Checkpoint::Open(dir);
  std::filesystem::remove_all(dir);  // the mapping keeps the data readable
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const auto checkpoint = std::make_shared<const Checkpoint>(std::move(opened).value());
  const TensorReader read = CheckpointTensorReader(checkpoint);
  Result<DecoderLayerWeights> layer = LoadDecoderLayer(moe, moe.TensorPrefix(), 0, read);
  ASSERT_TRUE(layer.ok()) << layer.status().message();
  // in_proj, out_proj, 8 experts' gate_up and down, the shared expert's two, its gate, the router.
  EXPECT_EQ(ExpectCopiedAsOneAlignedBlock(*layer), 2 + 2 * 8 + 2 + 2);
  const DecoderConfig dense = TinyQwen3Config();
  DecoderWeights d = RandomDecoderWeights(dense, 4, DType::kBF16);
  DecoderLayerWeights stacked = d.layers[0];
  stacked.qkv = WeightMatrix::Stack(
      {stacked.qkv.RowRange(0, 5), stacked.qkv.RowRange(5, stacked.qkv.rows() - 5)});
  ASSERT_EQ(stacked.qkv.blocks().size(), 2u);
  EXPECT_EQ(ExpectCopiedAsOneAlignedBlock(stacked), 4);
}

// The copy keeps its own storage alive: the source may go.
TEST(ResidentWeightsTest, TheCopyOutlivesItsSource) {
  const DecoderConfig config = TinyQwen3Config();
  WeightMatrix head;
  std::vector<float> want;
  {
    DecoderWeights w = RandomDecoderWeights(config, 5, DType::kBF16);
    head = w.embed;
    want = head.ToF32();
    CopyToHugePages(&head);
  }
  EXPECT_EQ(head.ToF32(), want);
}

// f32 matrices (an f32 checkpoint's) are the process's own already: left as they are.
TEST(ResidentWeightsTest, MatricesThatAreNotBf16StayAsTheyAre) {
  const DecoderConfig config = TinyQwen3Config();
  DecoderWeights w = RandomDecoderWeights(config, 6, DType::kF32);
  const void* data = w.layers[0].down.blocks()[0].data;
  CopyLayerToHugePages(&w.layers[0]);
  EXPECT_EQ(w.layers[0].down.blocks()[0].data, data);
  EXPECT_EQ(w.layers[0].down.blocks()[0].format, WeightFormat::kF32);
}

}  // namespace
}  // namespace dscale
