// SPDX-License-Identifier: BSD-3-Clause
// mpi-kmer: weft-kmer's algorithm over MPI, the baseline of issue 25 (same input ranges,
// owners, aggregation buffers, table, filter and histogram: common.hpp). Two ways to use
// threads, as an MPI program would:
//   --mpi multiple: MPI_THREAD_MULTIPLE, every thread sends its own batches (MPI_Isend) and
//     serves its own pre-posted receives (MPI_ANY_SOURCE, MPI_Testsome): the all-worker
//     setup, with every call through MPI's own locking;
//   --mpi funneled: MPI_THREAD_FUNNELED, thread 0 is the only one calling MPI: the other
//     threads hand it full buffers through a queue; it sends them, serves every arriving
//     batch, and reads its own share of the input between.
//   mpiexec -n N mpi-kmer-<flavour> --mpi multiple|funneled -k K [--exact] [--threads T]
//          [--buffer B] --histo OUT FILE.fq...
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "bloom.hpp"
#include "common.hpp"
#include "table.hpp"

namespace {

using namespace kmer;

enum { tag_batch = 1, tag_end = 2 };
enum { receives = 4, in_flight = 8 };  // per MPI-calling thread

struct job {
  options o;
  bool funneled = false;
  int me = 0, n = 1;
  size_t kb = 8;
  std::vector<std::unique_ptr<fastq_file>> files;
  std::unique_ptr<count_table> table;
  std::unique_ptr<bloom2> bloom;
  std::atomic<uint64_t> received[2]{}, announced[2]{}, ends[2]{};
  std::atomic<uint64_t> sent_to[2][1024]{};
  std::atomic<uint64_t> reads{0}, kmers{0};
  std::vector<histogram_t> parts;  // this rank's histogram, the part each thread counted
  // funneled: full buffers waiting for thread 0, and empty ones to reuse
  std::mutex q_lock;
  std::vector<std::pair<int, std::vector<char>>> outq;
  std::vector<std::vector<char>> spare;
  team_barrier team;
};
job* g;

// Phase 0 fills the filter, phase 1 counts (table.hpp), a few k-mers behind their
// arrival, each one's line prefetched meanwhile.
kmer::apply_pipe new_pipe() {
  return kmer::apply_pipe(g->o.exact, g->bloom.get(), g->table.get());
}

void handle_batch(const char* p, size_t size) {
  kmer::apply_pipe pipe = new_pipe();
  const uint32_t phase = apply_batch(p, size, g->kb, pipe);  // counted before the batch is
  g->received[phase].fetch_add(1, std::memory_order_release);
}

// One MPI-calling thread's communication: pre-posted receives, sends in flight, and (thread
// 0) the receive of the end-of-pass counts.
struct comm {
  std::vector<std::vector<char>> rbuf;
  std::vector<MPI_Request> rreq;
  std::vector<std::vector<char>> sbuf;
  std::vector<MPI_Request> sreq;
  uint64_t end_msg[2];
  MPI_Request end_req = MPI_REQUEST_NULL;
  std::vector<int> idx;
  std::vector<MPI_Status> st;

  explicit comm(bool ends)
      : rbuf(receives, std::vector<char>(g->o.buffer)),
        rreq(receives),
        sbuf(in_flight),
        sreq(in_flight, MPI_REQUEST_NULL),
        idx(receives),
        st(receives) {
    for (int i = 0; i < receives; ++i) post(i);
    if (ends)
      MPI_Irecv(end_msg, 2, MPI_UINT64_T, MPI_ANY_SOURCE, tag_end, MPI_COMM_WORLD, &end_req);
  }
  ~comm() {
    for (MPI_Request& r : rreq) {
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    if (end_req != MPI_REQUEST_NULL) {
      MPI_Cancel(&end_req);
      MPI_Wait(&end_req, MPI_STATUS_IGNORE);
    }
    MPI_Waitall(in_flight, sreq.data(), MPI_STATUSES_IGNORE);
  }
  void post(int i) {
    MPI_Irecv(rbuf[i].data(), int(g->o.buffer), MPI_BYTE, MPI_ANY_SOURCE, tag_batch, MPI_COMM_WORLD,
              &rreq[i]);
  }
  // Handles what arrived; returns whether anything did.
  bool serve() {
    int out = 0;
    MPI_Testsome(receives, rreq.data(), &out, idx.data(), st.data());
    for (int k = 0; k < out && out != MPI_UNDEFINED; ++k) {
      int bytes = 0;
      MPI_Get_count(&st[k], MPI_BYTE, &bytes);
      handle_batch(rbuf[idx[k]].data(), size_t(bytes));
      post(idx[k]);
    }
    int flag = 0;
    if (end_req != MPI_REQUEST_NULL) MPI_Test(&end_req, &flag, MPI_STATUS_IGNORE);
    if (flag) {
      g->announced[end_msg[0]].fetch_add(end_msg[1]);
      g->ends[end_msg[0]].fetch_add(1, std::memory_order_release);
      MPI_Irecv(end_msg, 2, MPI_UINT64_T, MPI_ANY_SOURCE, tag_end, MPI_COMM_WORLD, &end_req);
    }
    return out > 0 || flag;
  }
  // Sends a batch (its buffer taken; an empty one given back), serving while every slot is
  // in flight.
  void send(int dest, std::vector<char>& buf, size_t size) {
    for (;;) {
      int i = 0, flag = 0;
      while (i < in_flight && sreq[i] != MPI_REQUEST_NULL) ++i;  // a free slot
      if (i < in_flight)
        flag = 1;
      else
        MPI_Testany(in_flight, sreq.data(), &i, &flag, MPI_STATUS_IGNORE);
      if (flag) {
        sbuf[i].swap(buf);
        if (buf.size() < g->o.buffer) buf.resize(g->o.buffer);
        MPI_Isend(sbuf[i].data(), int(size), MPI_BYTE, dest, tag_batch, MPI_COMM_WORLD, &sreq[i]);
        return;
      }
      serve();
    }
  }
  void drain() {  // every send of this thread complete
    for (int done = 0; !done;) {
      MPI_Testall(in_flight, sreq.data(), &done, MPI_STATUSES_IGNORE);
      serve();
    }
  }
};

// funneled: thread 0 sends what the other threads queued.
void pump(comm& c) {
  std::vector<std::pair<int, std::vector<char>>> take;
  {
    std::lock_guard<std::mutex> l(g->q_lock);
    take.swap(g->outq);
  }
  for (auto& [dest, buf] : take) {
    uint32_t size;
    std::memcpy(&size, buf.data() + 4, 4);
    c.send(dest, buf, size);
    std::lock_guard<std::mutex> l(g->q_lock);
    g->spare.push_back(std::move(buf));
  }
}

struct sender {
  int phase = 0;
  comm* c;  // null: a funneled worker
  std::vector<std::vector<char>> bufs;
  std::vector<size_t> fill;
  kmer::apply_pipe local = new_pipe();  // this rank's own k-mers
  explicit sender(comm* cm)
      : c(cm),
        bufs(size_t(g->n), std::vector<char>(g->o.buffer)),
        fill(size_t(g->n), batch_header) {}

  void flush(int dest) {
    if (fill[dest] == batch_header) return;
    const uint32_t head[2] = {uint32_t(phase), uint32_t(fill[dest])};
    std::memcpy(bufs[dest].data(), head, 8);
    g->sent_to[phase][dest].fetch_add(1, std::memory_order_relaxed);
    if (c) {
      c->send(dest, bufs[dest], fill[dest]);
    } else {
      std::lock_guard<std::mutex> l(g->q_lock);
      g->outq.emplace_back(dest, std::move(bufs[dest]));
      if (!g->spare.empty()) {
        bufs[dest] = std::move(g->spare.back());
        g->spare.pop_back();
      }
    }
    if (bufs[dest].size() < g->o.buffer) bufs[dest].resize(g->o.buffer);
    fill[dest] = batch_header;
  }
  void add(const mer_t& k, uint64_t h) {
    const int dest = owner(h, g->n);
    if (dest == g->me) return local.push(phase, k, h);
    put_key(bufs[dest].data() + fill[dest], k, g->kb);
    if ((fill[dest] += g->kb) + g->kb > g->o.buffer) flush(dest);
  }
};

// Waits for every thread of this rank; the MPI-calling ones keep serving meanwhile.
void team_wait(comm* c, int t) {
  g->team.wait(g->o.threads, [&] {
    if (c) c->serve();
    if (c && t == 0 && g->funneled) pump(*c);
    if (!c) std::this_thread::yield();
  });
}

void produce(sender& out, int t) {
  uint64_t reads = 0, kmers = 0;
  read_share(
      g->files, g->me * g->o.threads + t, g->n * g->o.threads, g->o.k,
      [&](const mer_t& k, uint64_t h) { out.add(k, h); },
      [&] {
        if (!out.c) return;
        out.c->serve();
        if (g->funneled) pump(*out.c);
      },
      &reads, &kmers);
  out.local.drain();
  for (int d = 0; d < g->n; ++d) out.flush(d);
  if (out.phase == 1) {
    g->reads.fetch_add(reads);
    g->kmers.fetch_add(kmers);
  }
}

bool phase_received(int phase) {
  return g->ends[phase].load(std::memory_order_acquire) == uint64_t(g->n - 1) &&
         g->received[phase].load(std::memory_order_acquire) == g->announced[phase].load();
}

void worker(int t) try {
  std::unique_ptr<comm> c;
  if (t == 0 || !g->funneled) c = std::make_unique<comm>(t == 0);
  sender out(c.get());
  for (int phase = g->o.exact ? 1 : 0; phase < 2; ++phase) {
    out.phase = phase;
    produce(out, t);
    team_wait(c.get(), t);  // every thread flushed (funneled: into the queue)
    if (t == 0) {
      if (g->funneled) pump(*c);
      for (int d = 0; d < g->n; ++d) {
        if (d == g->me) continue;
        uint64_t v[2] = {uint64_t(phase), g->sent_to[phase][d].load()};
        MPI_Send(v, 2, MPI_UINT64_T, d, tag_end, MPI_COMM_WORLD);
      }
    }
    while (c && !phase_received(phase)) c->serve();
    if (c) c->drain();
    team_wait(c.get(), t);
    if (t == 0) MPI_Barrier(MPI_COMM_WORLD);  // every rank has every batch
    team_wait(c.get(), t);
  }
  team_wait(c.get(), t);  // nobody serves any more: the receives can go
  g->parts[size_t(t)] = g->table->histogram(size_t(t), size_t(g->o.threads));
} catch (const std::exception& e) {
  std::fprintf(stderr, "mpi-kmer: rank %d: %s\n", g->me, e.what());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

std::map<uint64_t, uint64_t> gather_histogram() {
  std::vector<uint64_t> flat;
  for (const auto& [c, k] : sum_histograms(g->parts)) flat.insert(flat.end(), {c, k});
  int len = int(flat.size());
  std::vector<int> lens(size_t(g->n)), at(size_t(g->n));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < g->n; ++r) at[r] = total, total += lens[r];
  std::vector<uint64_t> all(static_cast<size_t>(total));
  MPI_Gatherv(flat.data(), len, MPI_UINT64_T, all.data(), lens.data(), at.data(), MPI_UINT64_T, 0,
              MPI_COMM_WORLD);
  std::map<uint64_t, uint64_t> h;
  for (size_t i = 0; i + 1 < all.size(); i += 2) h[all[i]] += all[i + 1];
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  job j;
  g = &j;
  std::vector<char*> args{argv[0]};
  std::string mode = "multiple";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--mpi" && i + 1 < argc)
      mode = argv[++i];
    else
      args.push_back(argv[i]);
  }
  int code = 0;
  if (mode != "multiple" && mode != "funneled") {
    std::fprintf(stderr, "mpi-kmer: --mpi %s: multiple or funneled\n", mode.c_str());
    return 2;
  }
  if (!parse_options(int(args.size()), args.data(), "mpi-kmer", &j.o, &code)) return code;
  try {
    j.files = open_inputs(j.o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi-kmer: %s\n", e.what());
    return 2;
  }
  j.funneled = mode == "funneled";
  const int want = j.funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, want, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &j.me);
  MPI_Comm_size(MPI_COMM_WORLD, &j.n);
  if (provided < want || j.n > 1024) {
    std::fprintf(stderr, "mpi-kmer: thread level %d or %d ranks not supported\n", want, j.n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  j.kb = key_bytes(j.o.k);
  size_t bytes = 0;
  for (const auto& f : j.files) bytes += f->size();
  const size_t bases = bytes / 2;
  j.table = std::make_unique<count_table>(bases / size_t(j.n) / 4);
  j.parts.resize(size_t(j.o.threads));
  if (!j.o.exact)
    j.bloom = std::make_unique<bloom2>(j.o.bloom_bits ? j.o.bloom_bits : 2 * bases / size_t(j.n));
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> threads;
    for (int t = 1; t < j.o.threads; ++t) threads.emplace_back(worker, t);
    worker(0);
    for (std::thread& t : threads) t.join();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto h = gather_histogram();
  int rc = 0;
  if (j.me == 0 && !write_histogram(j.o.histo, h)) {
    std::fprintf(stderr, "mpi-kmer: %s: cannot write the histogram\n", j.o.histo.c_str());
    rc = 2;
  }
  std::printf(
      "rank %d: mpi-kmer: %llu reads, %llu k-mers, %zu distinct counted here, %.3f s, "
      "%.3g k-mers/s\n",
      j.me, (unsigned long long)j.reads.load(), (unsigned long long)j.kmers.load(),
      j.table->distinct(), secs, double(j.kmers.load()) / secs);
  // Every rank done before any finalizes: MPICH over UCX's tcp otherwise waits in finalize,
  // forever, for an acknowledgement a peer already past its own finalize no longer sends
  // (as bench/taskbench.cpp found; kmer_hosts.sh hung there).
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
