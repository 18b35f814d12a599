#pragma once
// CUDA graphs for the fixed-shape work of each step (paper §Graph Integration, Algorithm 2):
// the work of one bucket is recorded once by stream capture, instantiated, and then replayed
// every step with one launch.
//
// A replay reads and writes the addresses the capture did: the caller keeps inputs and outputs
// at fixed addresses, copies each step's inputs into them on the replay stream, and passes what
// changes per step (live count, budget) through device memory (dvl_device.h). Only kernel
// launches and async copies/memsets on the capture stream may be captured; run the work once
// eagerly first. Why, and what Capture rejects: graph.cc.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>

namespace dscale::cuda {

// Work to record: queues everything on the stream it is given.
using EnqueueWork = std::function<void(cudaStream_t)>;

// One captured, instantiated graph; destroyed with the object. Move-only.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&& other) noexcept;
  CapturedGraph& operator=(CapturedGraph&& other) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  // Records what `enqueue` queues on `stream` (a created stream, not the legacy default one,
  // and not already capturing), instantiates it and uploads it to the device, so the first
  // replay does no setup. Nothing runs: the work executes only on Replay.
  static CapturedGraph Capture(cudaStream_t stream, const EnqueueWork& enqueue);

  // Queues one execution of the recorded work on `stream`; returns once queued.
  void Replay(cudaStream_t stream) const;

  bool empty() const { return exec_ == nullptr; }
  int64_t nodes() const { return nodes_; }                // operations in the graph
  int64_t kernel_nodes() const { return kernel_nodes_; }  // of which kernel launches

 private:
  void Release();

  cudaGraphExec_t exec_ = nullptr;
  int64_t nodes_ = 0;
  int64_t kernel_nodes_ = 0;
};

// One graph per bucket (N_bs), each captured the first time its bucket runs and kept for the
// cache's lifetime. Not thread-safe.
class GraphCache {
 public:
  // Replays the graph of `bucket`, first capturing `enqueue` into it if the bucket has none.
  // `enqueue` must queue the same work (same addresses) every time it is passed for a bucket.
  void Run(int64_t bucket, cudaStream_t stream, const EnqueueWork& enqueue);

  // The graph of `bucket`, or null before its first Run.
  const CapturedGraph* Find(int64_t bucket) const;
  int64_t size() const { return static_cast<int64_t>(graphs_.size()); }

 private:
  std::map<int64_t, CapturedGraph> graphs_;
};

}  // namespace dscale::cuda
