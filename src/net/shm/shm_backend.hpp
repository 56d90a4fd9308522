// The shared-memory backend: one inbox per (rank, device) that every local peer enqueues
// into (a bounded MPMC ring of fixed-size cells), and per-device put channels for large
// transfers, drained either by a pipelined two-process copy or by cross-memory attach.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "net/backend.hpp"
#include "net/shm/layout.hpp"
#include "net/shm/segment.hpp"
#include "net/shm/work_list.hpp"

namespace weft::net::shm {

enum class put_mode { pipeline, cma };

struct settings {
  put_mode mode;
  size_t nchannels;
  size_t chunk_size;
  size_t nslots;
  size_t nlanes;
};

class shm_context;

class shm_device final : public device {
 public:
  shm_device(shm_context& ctx, int index, const device_config& cfg);
  ~shm_device() override;

  size_t max_message_size() const override { return geo_.cell_size - sizeof(cell_header); }
  size_t max_inject_size() const override { return util::cache_line - sizeof(cell_header); }
  bool try_send(int rank, const void* hdr, size_t hdr_len, const void* payload,
                size_t len) override;
  bool try_put(int rank, const void* src, size_t size, uint64_t remote_addr, rkey_t rkey,
               bool notify, uint64_t imm, void* ctx) override;
  bool try_get(int rank, void* dst, size_t size, uint64_t remote_addr, rkey_t rkey,
               void* ctx) override;
  size_t poll(sink& s, size_t max) override;
  bool peer_alive(int rank) override;
  void forget_peer(int rank) override;
  void wait_for_message(uint32_t timeout_us) override;

 private:
  struct lane {
    ring_index* head = nullptr;  // own lanes only
    ring_index* tail = nullptr;
    char* cells = nullptr;
  };
  struct peer {
    segment seg;
    char* base = nullptr;
    bell* bell_ = nullptr;
    std::vector<lane> lanes;
    pid_t pid = 0;
  };
  struct outgoing_put {
    int rank;
    uint32_t channel;
    const char* src;
    size_t size;
    uint64_t next_chunk;
    void* ctx;
  };
  struct incoming_put {
    int rank;
    channel_header* channel;
    char* slots;
    char* dst;
    size_t size;
    uint64_t consumed;
    bool notify;
    uint64_t imm;
  };
  struct local_event {
    enum { put_done, get_done, notify } kind;
    int rank;
    void* ctx;
    uint64_t imm;
  };

  bool enqueue(int rank, uint8_t kind, const void* a, size_t alen, const void* b, size_t blen);
  void handle_cell(sink& s, const cell_header* c);
  size_t drain_lane(sink& s, const lane& ln, size_t max);
  channel_header* channel_of(char* base, uint32_t c) const;
  char* slots_of(char* base, uint32_t c) const;
  size_t nchunks(size_t size) const { return (size + geo_.chunk_size - 1) / geo_.chunk_size; }

  shm_context& ctx_;
  int index_;
  geometry geo_;
  uint64_t mask_;
  segment own_;
  char* own_base_ = nullptr;
  bell* own_bell_ = nullptr;
  std::vector<lane> own_lanes_;
  std::vector<std::unique_ptr<peer>> peers_;  // by rank; ours points at own_
  work_list<outgoing_put> outgoing_;
  work_list<incoming_put> incoming_;
  work_list<local_event> events_;
};

class shm_context final : public context {
 public:
  shm_context(std::shared_ptr<bootstrap::bootstrap> boot, int context_id);
  const char* name() const override { return "shm"; }
  std::unique_ptr<device> alloc_device(int index, const device_config& cfg) override;
  mr_t register_memory(void* base, size_t size) override;
  void deregister_memory(mr_t& mr) override;
  rkey_t get_rkey(const mr_t& mr) override;
  std::string describe() const override;

  bootstrap::bootstrap& boot() { return *boot_; }
  int context_id() const { return context_id_; }
  const settings& config() const { return settings_; }
  bool cma_permitted() const { return cma_ok_; }
  pid_t pid_of(int rank) const { return pids_[size_t(rank)]; }

 private:
  std::shared_ptr<bootstrap::bootstrap> boot_;
  int context_id_;
  settings settings_;
  bool cma_ok_ = false;
  std::vector<pid_t> pids_;
};

}  // namespace weft::net::shm
