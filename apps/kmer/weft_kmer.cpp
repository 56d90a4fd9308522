// SPDX-License-Identifier: BSD-3-Clause
// weft-kmer: the k-mer counting mini-app of seed 001 section 5.3 on Weft's active messages.
// Every thread of every rank reads its byte range of the inputs, sends each canonical
// k-mer to its owner rank in per-destination aggregation buffers (one active message per
// full buffer) and serves the batches that arrive (the all-worker setup: each thread calls
// progress, and the handler runs on whichever thread progressed). Without --exact a first
// pass fills a two-layer Bloom filter and the counting pass counts only the k-mers in its
// second layer; with --exact every k-mer is counted. Rank 0 gathers the histograms and
// writes them in jellyfish histo's format.
//   weftrun -n N weft-kmer -k K [--exact] [--threads T] [--buffer B] --histo OUT FILE.fq...
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <weft/weft.hpp>

#include "bloom.hpp"
#include "common.hpp"
#include "table.hpp"

namespace {

using namespace kmer;

enum : weft::tag_t { tag_batch = 1, tag_end = 2, tag_histo = 3 };

// What every thread and the message handler share.
struct job {
  options o;
  int me = 0, n = 1;
  size_t kb = 8;     // bytes per key on the wire
  size_t eager = 0;  // the largest eager message
  std::vector<std::unique_ptr<fastq_file>> files;
  std::unique_ptr<count_table> table;
  std::unique_ptr<bloom2> bloom;
  weft::rcomp_t rc;
  std::atomic<uint64_t> received[2]{}, announced[2]{}, ends[2]{};
  std::atomic<uint64_t> sent_to[2][1024]{};  // batches each phase, per destination (<= 1024 ranks)
  std::mutex histo_lock;
  std::map<uint64_t, uint64_t> histo;
  std::vector<histogram_t> parts;  // this rank's histogram, the part each thread counted
  std::atomic<int> histos{0};
  team_barrier team;
  std::atomic<uint64_t> reads{0}, kmers{0};
};
job* g;

// Phase 0 fills the filter, phase 1 counts (table.hpp), a few k-mers behind their
// arrival, each one's line prefetched meanwhile.
kmer::apply_pipe new_pipe() {
  return kmer::apply_pipe(g->o.exact, g->bloom.get(), g->table.get());
}

// Every arriving active message, on the thread whose progress call delivered it.
void on_message(weft::status_t s) {
  const char* p = static_cast<const char*>(s.buf);
  if (s.tag == tag_batch) {
    kmer::apply_pipe pipe = new_pipe();
    const uint32_t phase = apply_batch(p, s.size, g->kb, pipe);  // counted before the batch is
    g->received[phase].fetch_add(1, std::memory_order_release);
  } else if (s.tag == tag_end) {
    uint64_t v[2];
    std::memcpy(v, p, sizeof(v));
    g->announced[v[0]].fetch_add(v[1], std::memory_order_relaxed);
    g->ends[v[0]].fetch_add(1, std::memory_order_release);
  } else if (s.tag == tag_histo) {
    std::lock_guard<std::mutex> l(g->histo_lock);
    for (size_t at = 0; at + 16 <= s.size; at += 16) {
      uint64_t v[2];
      std::memcpy(v, p + at, sizeof(v));
      g->histo[v[0]] += v[1];
    }
    g->histos.fetch_add(1, std::memory_order_release);
  }
  // Lent in place: the batch is read where it arrived and stays Weft's.
}

// Sends one message, progressing while Weft asks to retry; waits for a rendezvous send's
// completion (the buffer is reused at once). A packet (from get_upacket) is Weft's once
// the post is accepted.
void send(int rank, void* buf, size_t size, weft::tag_t tag, weft::comp_t done,
          bool packet = false) {
  weft::status_t s;
  while ((s = weft::post_am_x(rank, buf, size, done, g->rc).tag(tag).buffer_is_packet(packet)())
             .error.is_retry())
    weft::progress();
  if (s.error.is_posted()) weft::sync_wait(done, nullptr);
}

// A packet to fill, progressing until the pool has one.
char* new_packet() {
  void* p;
  while (!(p = weft::get_upacket())) weft::progress();
  return static_cast<char*>(p);
}

// One thread's aggregation buffers, one per destination rank: packets when a buffer fits
// in one (filled in place and sent without a copy into Weft's own), else plain memory sent
// by rendezvous without waiting: up to `in_flight` buffers in transfer at once (as the MPI
// version's Isends), each back in `spare` when its completion reaches `cq`.
struct sender {
  static constexpr size_t in_flight = 8;
  int phase = 0;
  bool packets = g->o.buffer <= g->eager;
  std::vector<std::unique_ptr<char[]>> mem;  // every plain buffer, for freeing
  std::vector<char*> spare;                  // plain buffers neither filling nor in transfer
  size_t sending = 0;                        // plain buffers in transfer
  std::vector<char*> bufs;
  std::vector<size_t> fill;
  weft::comp_t done = weft::alloc_sync();
  weft::comp_t cq = weft::alloc_cq();
  kmer::apply_pipe local = new_pipe();  // this rank's own k-mers
  sender() : bufs(size_t(g->n)), fill(size_t(g->n), batch_header) {
    for (int d = 0; d < g->n; ++d)
      if (d != g->me) bufs[d] = packets ? new_packet() : plain();
  }
  ~sender() {
    for (int d = 0; d < g->n; ++d)
      if (packets && d != g->me) weft::put_upacket(bufs[d]);
    weft::free_comp(&done);
    weft::free_comp(&cq);
  }

  // Waits for the transfers still reading this thread's buffers (before they are freed).
  void finish() {
    while (sending) reclaim(true);
  }
  // A plain buffer to fill: a spare one, a new one while fewer than in_flight are in
  // transfer, else the next whose transfer completes.
  char* plain() {
    reclaim(false);
    while (spare.empty() && sending >= in_flight) reclaim(true);
    if (spare.empty()) {
      mem.push_back(std::make_unique<char[]>(g->o.buffer));
      return mem.back().get();
    }
    char* b = spare.back();
    spare.pop_back();
    return b;
  }
  // Takes back the buffers whose transfers completed; `wait`: progresses until one does.
  void reclaim(bool wait) {
    for (;;) {
      const weft::status_t s = weft::cq_pop(cq);
      if (s.error.is_retry()) {  // none completed yet
        if (!wait) return;
        weft::progress();
        continue;
      }
      if (!s.error.is_done())
        throw std::runtime_error("a batch to rank " + std::to_string(s.rank) +
                                 " failed: " + s.error.get_str());
      spare.push_back(static_cast<char*>(s.user_context));
      --sending;
      wait = false;
    }
  }
  // Posts a plain buffer's batch; true when Weft still reads it (a rendezvous in transfer).
  bool post_plain(int dest) {
    weft::status_t s;
    while ((s = weft::post_am_x(dest, bufs[dest], fill[dest], cq, g->rc)
                    .tag(tag_batch)
                    .user_context(bufs[dest])())
               .error.is_retry())
      weft::progress();
    return s.error.is_posted();
  }

  void flush(int dest) {
    if (fill[dest] == batch_header) return;
    const uint32_t ph = uint32_t(phase);
    std::memcpy(bufs[dest], &ph, 4);
    if (packets) {
      send(dest, bufs[dest], fill[dest], tag_batch, done, true);
      bufs[dest] = new_packet();
    } else if (post_plain(dest)) {
      ++sending;
      bufs[dest] = plain();
    }
    g->sent_to[phase][dest].fetch_add(1, std::memory_order_relaxed);
    fill[dest] = batch_header;
  }
  void add(const mer_t& k, uint64_t h) {
    const int dest = owner(h, g->n);
    if (dest == g->me) return local.push(phase, k, h);
    put_key(bufs[dest] + fill[dest], k, g->kb);
    if ((fill[dest] += g->kb) + g->kb > g->o.buffer) flush(dest);
  }
};

// One thread's share of a phase: its byte range of every input.
void produce(sender& out, int t) {
  uint64_t reads = 0, kmers = 0;
  read_share(
      g->files, g->me * g->o.threads + t, g->n * g->o.threads, g->o.k,
      [&](const mer_t& k, uint64_t h) { out.add(k, h); }, [] { weft::progress(); }, &reads, &kmers);
  out.local.drain();
  for (int d = 0; d < g->n; ++d) out.flush(d);
  if (out.phase == 1) {
    g->reads.fetch_add(reads);
    g->kmers.fetch_add(kmers);
  }
}

// Tells every rank how many batches this rank sent it in `phase` (thread 0, once all of
// this rank's threads flushed).
void announce(int phase, weft::comp_t done) {
  for (int d = 0; d < g->n; ++d) {
    if (d == g->me) continue;
    uint64_t v[2] = {uint64_t(phase), g->sent_to[phase][d].load()};
    send(d, v, sizeof(v), tag_end, done);
  }
}

bool phase_received(int phase) {
  return g->ends[phase].load(std::memory_order_acquire) == uint64_t(g->n - 1) &&
         g->received[phase].load(std::memory_order_acquire) ==
             g->announced[phase].load(std::memory_order_relaxed);
}

// Waits for every thread of this rank, progressing meanwhile (team_barrier).
void team_wait() {
  uint32_t idle = 0;
  g->team.wait(g->o.threads, [&] {
    if (!weft::progress().is_done() && ++idle % 64 == 0)
      std::this_thread::yield();  // more threads than cores: let the readers run
  });
}

void worker(int t) try {
  sender out;
  for (int phase = g->o.exact ? 1 : 0; phase < 2; ++phase) {
    out.phase = phase;
    produce(out, t);
    team_wait();  // every thread of this rank flushed
    if (t == 0) announce(phase, out.done);
    while (!phase_received(phase)) weft::progress();
    team_wait();
    if (t == 0) weft::barrier();  // every rank has every batch: the filter is complete
    team_wait();
  }
  out.finish();
  g->parts[size_t(t)] = g->table->histogram(size_t(t), size_t(g->o.threads));
} catch (const std::exception& e) {  // a malformed input: the peers see this rank die
  std::fprintf(stderr, "weft-kmer: rank %d: %s\n", g->me, e.what());
  std::fflush(stderr);
  std::_Exit(2);
}

// Rank 0 gathers every rank's histogram and writes it.
bool gather_histogram() {
  const histogram_t mine = sum_histograms(g->parts);
  weft::comp_t done = weft::alloc_sync();
  if (g->me != 0) {
    std::vector<uint64_t> flat;
    for (const auto& [c, k] : mine) flat.insert(flat.end(), {c, k});
    send(0, flat.data(), flat.size() * 8, tag_histo, done);
  } else {
    while (g->histos.load(std::memory_order_acquire) < g->n - 1) weft::progress();
    std::lock_guard<std::mutex> l(g->histo_lock);
    for (const auto& [c, k] : mine) g->histo[c] += k;
  }
  weft::free_comp(&done);
  return g->me != 0 || write_histogram(g->o.histo, g->histo);
}

size_t input_bytes() {
  size_t b = 0;
  for (const auto& f : g->files) b += f->size();
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  job j;
  g = &j;
  int code = 0;
  if (!parse_options(argc, argv, "weft-kmer", &j.o, &code)) return code;
  try {
    j.files = open_inputs(j.o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft-kmer: %s\n", e.what());
    return 2;
  }
  // Packets as large as an aggregation buffer (up to 64 KiB), so that a full buffer is one
  // eager message: the runtime's packet size follows --buffer.
  size_t packet = 8192;
  while (packet - 32 < j.o.buffer && packet < 65536) packet *= 2;
  weft::g_runtime_init_x().packet_size(packet)();
  j.eager = weft::get_g_runtime().get_attr_eager_size();
  j.me = weft::get_rank_me();
  j.n = weft::get_rank_n();
  if (j.n > 1024) {
    std::fprintf(stderr, "weft-kmer: %d ranks: at most 1024\n", j.n);
    return 2;
  }
  j.kb = key_bytes(j.o.k);
  j.o.buffer = std::min(j.o.buffer, size_t(1) << 24);
  const size_t bases = input_bytes() / 2;  // about half of a FASTQ file is sequence
  j.table = std::make_unique<count_table>(bases / size_t(j.n) / 4);
  j.parts.resize(size_t(j.o.threads));
  if (!j.o.exact)
    j.bloom = std::make_unique<bloom2>(j.o.bloom_bits ? j.o.bloom_bits : 2 * bases / size_t(j.n));
  weft::comp_t handler = weft::alloc_handler(on_message);
  // Batches are counted where they arrived (no copy into a packet, no packet held).
  j.rc = weft::register_rcomp_x(handler).in_place(true)();
  weft::barrier();
  const auto t0 = std::chrono::steady_clock::now();
  int rc = 0;
  {
    std::vector<std::thread> threads;
    for (int t = 1; t < j.o.threads; ++t) threads.emplace_back(worker, t);
    worker(0);
    for (std::thread& t : threads) t.join();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!gather_histogram()) {
    std::fprintf(stderr, "weft-kmer: %s: cannot write the histogram\n", j.o.histo.c_str());
    rc = 2;
  }
  weft::barrier();
  std::printf(
      "rank %d: weft-kmer: %llu reads, %llu k-mers, %zu distinct counted here, %.3f s, %.3g "
      "k-mers/s\n",
      j.me, (unsigned long long)j.reads.load(), (unsigned long long)j.kmers.load(),
      j.table->distinct(), secs, double(j.kmers.load()) / secs);
  weft::free_comp(&handler);
  weft::g_runtime_fina();
  return rc;
}
