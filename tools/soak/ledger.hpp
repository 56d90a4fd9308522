// SPDX-License-Identifier: BSD-3-Clause
// The exactly-once ledger of one channel (one kind of message from one source thread to one
// receiving thread): which sequence numbers arrived. A second arrival of a number is a
// duplicate; at the end, the numbers below what the sender says it sent that never arrived
// are lost, and any number at or above it is a message nobody sent (counted as duplicated:
// it is one arrival too many). Only its receiving thread touches it.
#pragma once

#include <cstdint>
#include <vector>

namespace soak {

class ledger {
 public:
  // Records `seq`; false when it had arrived before.
  bool record(uint64_t seq) {
    const uint64_t word = seq / 64, bit = uint64_t(1) << (seq % 64);
    if (word >= bits_.size()) bits_.resize(word + 1 + bits_.size() / 2, 0);
    if (bits_[word] & bit) return false;
    bits_[word] |= bit;
    ++distinct_;
    if (seq >= end_) end_ = seq + 1;
    return true;
  }
  bool has(uint64_t seq) const {
    const uint64_t word = seq / 64;
    return word < bits_.size() && (bits_[word] >> (seq % 64)) & 1;
  }
  uint64_t distinct() const { return distinct_; }
  // One past the highest number that arrived.
  uint64_t end() const { return end_; }
  // Numbers in [0, sent) that never arrived.
  uint64_t missing(uint64_t sent) const {
    uint64_t below = 0;
    for (uint64_t s = 0; s < sent && s < end_; ++s) below += has(s);
    return sent - below;
  }
  // Numbers at or above `sent` that arrived (sent by nobody).
  uint64_t beyond(uint64_t sent) const { return distinct_ - (sent - missing(sent)); }

 private:
  std::vector<uint64_t> bits_;
  uint64_t distinct_ = 0, end_ = 0;
};

}  // namespace soak
