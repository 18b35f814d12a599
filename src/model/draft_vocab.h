#pragma once
// A drafter's reduced vocabulary: the target token ids its LM head drafts over (EAGLE-3's d2t
// map, FR-Spec's frequency-ranked subset). The target verifies every draft, so a subset never
// changes what is committed; it only makes each draft step read fewer LM-head rows.
//
// Stored in the drafter folder as `draft_vocab.json`:
//   {"format": "dscale-draft-vocab", "version": 1, "target_vocab_size": V,
//    "token_ids": [t_0, t_1, ...]}
// token_ids: strictly increasing target ids in [0, V), at least kMinDraftVocabSize of them.
// Draft index i (a column of the draft logits) stands for target token t_i.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dscale {

inline constexpr const char* kDraftVocabFileName = "draft_vocab.json";
inline constexpr const char* kDraftVocabFormat = "dscale-draft-vocab";
inline constexpr int64_t kDraftVocabVersion = 1;
// The DVL features rank the top 16 draft logits of every position (core/dvl_shapes.h).
inline constexpr int64_t kMinDraftVocabSize = 16;

struct DraftVocab {
  int64_t target_vocab_size = 0;
  std::vector<int32_t> token_ids;  // strictly increasing, each < target_vocab_size

  int64_t size() const { return static_cast<int64_t>(token_ids.size()); }
};

// Checks the token_ids contract (size, order, range) against `target_vocab_size`; errors name
// `where` (a file and field) and the offending entry.
Status ValidateDraftVocabIds(std::span<const int32_t> ids, int64_t target_vocab_size,
                             std::string_view where);

// Parses a draft_vocab.json text read from `path`, for a target of `target_vocab_size` tokens.
Result<DraftVocab> ParseDraftVocab(std::string_view text, const std::string& path,
                                   int64_t target_vocab_size);
// `drafter_dir`/draft_vocab.json, or nullopt when the folder has none.
Result<std::optional<DraftVocab>> LoadDraftVocab(const std::string& drafter_dir,
                                                 int64_t target_vocab_size);
// Writes `vocab` (validated first) to `path` in the format above.
Status SaveDraftVocab(const std::string& path, const DraftVocab& vocab);

// The subset a count table ranks first: the `size` ids with the highest counts (ties: lower id
// first) after every id of `required` (EOS, the chat format's special tokens), sorted
// increasingly. counts[t] is target token t's count; ids of `required` must be < counts.size().
// `size` below required's distinct ids gives those alone; above counts.size(), every id.
std::vector<int32_t> RankDraftVocab(std::span<const int64_t> counts, int64_t size,
                                    std::span<const int32_t> required);

// Whether --draft-vocab drafts over the folder's subset (docs: README "Drafting over a reduced
// vocabulary"): kAuto when the folder has one, kFull never, kSubset always (an error without one).
enum class DraftVocabChoice { kAuto, kFull, kSubset };
// "auto", "full" or "subset"; errors name --draft-vocab and the choices.
Result<DraftVocabChoice> ParseDraftVocabChoice(std::string_view text);
std::string_view DraftVocabChoiceName(DraftVocabChoice choice);

}  // namespace dscale
