#include "kernels/cuda/graph.h"

// A replay runs the recorded kernels with the recorded arguments, so it reads and writes the
// same device addresses as the capture did. The caller therefore keeps every input and output at
// fixed addresses (the bucket's fixed-address workspace), copies each step's inputs into them
// (cudaMemcpyAsync on the replay stream) before the replay, and passes anything that changes
// from step to step — the live count, the budget — through device memory, never as a kernel
// argument (see dvl_device.h).
//
// What may be captured: kernel launches, cudaMemcpyAsync and cudaMemsetAsync on the capture
// stream. Capture runs in cudaStreamCaptureModeThreadLocal, so on this thread a cudaMalloc, a
// synchronous copy or a stream or device synchronisation fails (and its DSCALE_CUDA_CHECK
// aborts naming it) instead of being silently left out of the graph; stream-ordered
// allocations (cudaMallocAsync) would become allocation nodes, which Capture rejects. A replay
// therefore never allocates and never waits for the host.
//
// Run the work once eagerly before capturing it: that loads the kernels' modules (drivers
// before CUDA 12.3 cannot load them during a capture) and proves the launches valid.

#include <utility>
#include <vector>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"

namespace dscale::cuda {
namespace {

// Owns a cudaGraph_t between capture and instantiation.
class GraphOwner {
 public:
  explicit GraphOwner(cudaGraph_t graph) : graph_(graph) {}
  ~GraphOwner() {
    if (graph_ != nullptr) static_cast<void>(cudaGraphDestroy(graph_));
  }
  GraphOwner(const GraphOwner&) = delete;
  GraphOwner& operator=(const GraphOwner&) = delete;
  cudaGraph_t get() const { return graph_; }

 private:
  cudaGraph_t graph_;
};

struct NodeCounts {
  int64_t total = 0;
  int64_t kernels = 0;
  int64_t allocations = 0;  // memory allocation or free nodes
};

NodeCounts CountNodes(cudaGraph_t graph) {
  size_t count = 0;
  DSCALE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) DSCALE_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  NodeCounts counts;
  counts.total = static_cast<int64_t>(count);
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    DSCALE_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) ++counts.kernels;
    if (type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree) {
      ++counts.allocations;
    }
  }
  return counts;
}

}  // namespace

CapturedGraph::~CapturedGraph() { Release(); }

CapturedGraph::CapturedGraph(CapturedGraph&& other) noexcept
    : exec_(std::exchange(other.exec_, nullptr)),
      nodes_(std::exchange(other.nodes_, 0)),
      kernel_nodes_(std::exchange(other.kernel_nodes_, 0)) {}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& other) noexcept {
  if (this != &other) {
    Release();
    exec_ = std::exchange(other.exec_, nullptr);
    nodes_ = std::exchange(other.nodes_, 0);
    kernel_nodes_ = std::exchange(other.kernel_nodes_, 0);
  }
  return *this;
}

void CapturedGraph::Release() {
  // Destroying can only fail once the device is lost; there is nothing left to do then.
  if (exec_ != nullptr) static_cast<void>(cudaGraphExecDestroy(exec_));
  exec_ = nullptr;
  nodes_ = 0;
  kernel_nodes_ = 0;
}

CapturedGraph CapturedGraph::Capture(cudaStream_t stream, const EnqueueWork& enqueue) {
  DSCALE_CHECK_MSG(stream != nullptr, "graph capture needs a created stream, not the default one");
  DSCALE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue(stream);
  cudaGraph_t raw = nullptr;
  // Fails (cudaErrorStreamCaptureInvalidated) when the work did something a graph cannot hold.
  DSCALE_CUDA_CHECK(cudaStreamEndCapture(stream, &raw));
  const GraphOwner graph(raw);

  const NodeCounts counts = CountNodes(graph.get());
  DSCALE_CHECK_MSG(counts.allocations == 0,
                   "captured work allocates device memory; a replayed graph must not");
  CapturedGraph captured;
  DSCALE_CUDA_CHECK(cudaGraphInstantiate(&captured.exec_, graph.get(), 0));
  DSCALE_CUDA_CHECK(cudaGraphUpload(captured.exec_, stream));
  captured.nodes_ = counts.total;
  captured.kernel_nodes_ = counts.kernels;
  return captured;
}

void CapturedGraph::Replay(cudaStream_t stream) const {
  DSCALE_CHECK_MSG(exec_ != nullptr, "replay of an empty CapturedGraph");
  DSCALE_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

void GraphCache::Run(int64_t bucket, cudaStream_t stream, const EnqueueWork& enqueue) {
  auto it = graphs_.find(bucket);
  if (it == graphs_.end()) {
    it = graphs_.emplace(bucket, CapturedGraph::Capture(stream, enqueue)).first;
  }
  it->second.Replay(stream);
}

const CapturedGraph* GraphCache::Find(int64_t bucket) const {
  const auto it = graphs_.find(bucket);
  return it == graphs_.end() ? nullptr : &it->second;
}

}  // namespace dscale::cuda
