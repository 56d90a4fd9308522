// SPDX-License-Identifier: BSD-3-Clause
// What the Weft and MPI versions of the k-mer counter share: the command line, the inputs
// cut into one byte range per (rank, thread), the owner of a k-mer, batches of k-mers on the
// wire and their counting, and the histogram in `jellyfish histo`'s format.
#ifndef WEFT_APPS_KMER_COMMON_HPP
#define WEFT_APPS_KMER_COMMON_HPP

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fastq.hpp"
#include "kmer.hpp"
#include "table.hpp"

namespace kmer {

struct options {
  int k = 21;
  bool exact = false;     // no Bloom filter: every k-mer counted
  int threads = 1;        // per rank, each producing and serving
  size_t buffer = 8192;   // bytes per aggregation buffer (one message)
  size_t bloom_bits = 0;  // per layer per rank; 0: from the input size
  std::string histo;      // where rank 0 writes the histogram
  std::vector<std::string> files;
};

// Parses argv; on bad input or --help prints to stderr/stdout and returns false with *code
// set (2 for an error, 0 for --help).
bool parse_options(int argc, char** argv, const char* prog, options* o, int* code);

// The inputs, mapped (throws std::runtime_error naming a file that cannot be read).
std::vector<std::unique_ptr<fastq_file>> open_inputs(const options& o);

// Range `part` of `nparts` of a file: [begin, end).
inline void part_of(size_t size, int part, int nparts, size_t* begin, size_t* end) {
  *begin = size * size_t(part) / size_t(nparts);
  *end = size * size_t(part + 1) / size_t(nparts);
}

// Reads part `part` of `nparts` of every input: on_kmer(key, hash) for each canonical
// k-mer, idle() after every 64 reads (to serve what arrived); adds to *reads and *kmers.
template <class OnKmer, class Idle>
void read_share(const std::vector<std::unique_ptr<fastq_file>>& files, int part, int nparts, int k,
                OnKmer&& on_kmer, Idle&& idle, uint64_t* reads, uint64_t* kmers) {
  uint64_t since = 0;
  for (const auto& f : files) {
    size_t begin, end;
    part_of(f->size(), part, nparts, &begin, &end);
    *reads += f->for_each_read(begin, end, [&](const char* seq, size_t len) {
      for_each_kmer(seq, len, k, [&](const mer_t& key) {
        on_kmer(key, hash(key));
        ++*kmers;
      });
      if (++since == 64) {
        since = 0;
        idle();
      }
    });
  }
}

// The rank that counts a k-mer: high hash bits (the low ones pick table shards and filter
// words on that rank).
inline int owner(uint64_t h, int nranks) {
  return int((h >> 40) % uint64_t(nranks));
}

// A batch on the wire: a phase word, then keys of key_bytes(k) bytes each (8 when k <= 32).
inline size_t key_bytes(int k) {
  return k <= 32 ? 8 : 16;
}
inline void put_key(char* at, const mer_t& key, size_t kb) {
  std::memcpy(at, &key.lo, 8);
  if (kb == 16) std::memcpy(at + 8, &key.hi, 8);
}
inline mer_t get_key(const char* at, size_t kb) {
  mer_t key{0, 0};
  std::memcpy(&key.lo, at, 8);
  if (kb == 16) std::memcpy(&key.hi, at + 8, 8);
  return key;
}
constexpr size_t batch_header = 8;

// Counts an arrived batch (its phase word, then keys) through `pipe`, every key in before it
// returns; returns the batch's phase.
inline uint32_t apply_batch(const char* p, size_t size, size_t kb, apply_pipe& pipe) {
  uint32_t phase;
  std::memcpy(&phase, p, 4);
  for (size_t at = batch_header; at + kb <= size; at += kb) {
    const mer_t k = get_key(p + at, kb);
    pipe.push(int(phase), k, hash(k));
  }
  pipe.drain();
  return phase;
}

// The threads of one rank meeting: each waits until all `nthreads` have arrived, calling
// spin() meanwhile. Both programs serve their arrivals there, so that a thread that has read
// its share keeps handling the batches the others' reading sends it (a sleeping barrier
// would leave them to the threads still reading, and hold back the peers' sends).
class team_barrier {
 public:
  template <class Spin>
  void wait(int nthreads, Spin&& spin) {
    const uint32_t gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == nthreads) {
      arrived_.store(0, std::memory_order_relaxed);  // seen by whoever sees the new generation
      generation_.store(gen + 1, std::memory_order_release);
      return;
    }
    while (generation_.load(std::memory_order_acquire) == gen) spin();
  }

 private:
  std::atomic<int> arrived_{0};
  std::atomic<uint32_t> generation_{0};
};

using histogram_t = std::map<uint64_t, uint64_t>;  // count -> distinct k-mers seen that often

// The sum of histograms (the parts a rank's threads counted, count_table::histogram).
inline histogram_t sum_histograms(const std::vector<histogram_t>& parts) {
  histogram_t h;
  for (const histogram_t& p : parts)
    for (const auto& [c, k] : p) h[c] += k;
  return h;
}

// Writes "count number" lines, ascending (jellyfish histo's format); false on a write error.
bool write_histogram(const std::string& path, const std::map<uint64_t, uint64_t>& h);

}  // namespace kmer

#endif
