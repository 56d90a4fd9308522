// SPDX-License-Identifier: BSD-3-Clause
// The PMIx bootstrap through libpmix (Open MPI's mpirun, Slurm's srun --mpi=pmix): rank,
// size and host sharing from the job's attributes, put/commit, fence collecting the data,
// and gets addressed to the rank that put the key, as PMIx itself works.
#include "bootstrap/pmix.hpp"

#ifdef WEFT_HAVE_PMIX
#include <cstring>
#include <mutex>

#include "bootstrap/pmix_lib.hpp"
#include "util/fail.hpp"

namespace weft::bootstrap {
namespace {

constexpr const char* call = "bootstrap (PMIx)";

void check(pmix_status_t rc, const char* what, const std::string& detail = "") {
  if (rc != PMIX_SUCCESS)
    util::fail(call, what, detail.empty() ? PMIx_Error_string(rc) : detail,
               std::string("failed: ") + PMIx_Error_string(rc));
}

class pmix_bootstrap final : public bootstrap {
 public:
  pmix_bootstrap() {
    check(PMIx_Init(&me_, nullptr, 0), "PMIx_Init",
          "cannot reach the launcher's PMIx server (PMIX_NAMESPACE, PMIX_SERVER_URI*)");
    rank_ = int(me_.rank);
    pmix_proc_t job;
    PMIX_PROC_CONSTRUCT(&job);
    memcpy(job.nspace, me_.nspace, PMIX_MAX_NSLEN + 1);
    job.rank = PMIX_RANK_WILDCARD;
    size_ = int(get_u32(job, PMIX_JOB_SIZE));
    local_size_ = int(get_u32(job, PMIX_LOCAL_SIZE));
    local_rank_ = int(get_u32(me_, PMIX_LOCAL_RANK));
    publish_host("pmix-" + std::to_string(get_u32(me_, PMIX_NODEID)));
    agree_job_id();
    apply_host_override();
  }
  ~pmix_bootstrap() override { PMIx_Finalize(nullptr, 0); }

  const char* name() const override { return "pmix"; }

  void put(const std::string& key, const std::string& v) override {
    std::lock_guard<std::mutex> g(lock_);
    pmix_value_t val;
    PMIX_VALUE_CONSTRUCT(&val);
    val.type = PMIX_BYTE_OBJECT;
    val.data.bo.bytes = const_cast<char*>(v.data());
    val.data.bo.size = v.size();
    check(PMIx_Put(PMIX_GLOBAL, key.c_str(), &val), "PMIx_Put", key);
    check(PMIx_Commit(), "PMIx_Commit");
  }

  std::string get(int rank, const std::string& key) override {
    std::lock_guard<std::mutex> g(lock_);
    pmix_proc_t who;
    PMIX_PROC_CONSTRUCT(&who);
    memcpy(who.nspace, me_.nspace, PMIX_MAX_NSLEN + 1);
    who.rank = pmix_rank_t(rank);
    pmix_value_t* val = nullptr;
    pmix_status_t rc = PMIx_Get(&who, key.c_str(), nullptr, 0, &val);
    if (rc != PMIX_SUCCESS || !val || val->type != PMIX_BYTE_OBJECT) {
      if (val) PMIX_VALUE_RELEASE(val);
      util::fail(
          call, "key", owned_key(rank, key),
          std::string("not found (was it put before the last fence?): ") + PMIx_Error_string(rc));
    }
    std::string out(val->data.bo.bytes, val->data.bo.size);
    PMIX_VALUE_RELEASE(val);
    return out;
  }

  void fence() override {
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    pmix_status_t rc = PMIx_Fence(nullptr, 0, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    check(rc, "PMIx_Fence");
  }

 private:
  uint32_t get_u32(const pmix_proc_t& who, const char* key) {
    pmix_value_t* val = nullptr;
    check(PMIx_Get(&who, key, nullptr, 0, &val), "PMIx_Get", key);
    uint32_t out = 0;
    switch (val->type) {
      case PMIX_UINT32: out = val->data.uint32; break;
      case PMIX_UINT16: out = val->data.uint16; break;
      case PMIX_INT: out = uint32_t(val->data.integer); break;
      case PMIX_PROC_RANK: out = val->data.rank; break;
      default: {
        const int type = int(val->type);
        PMIX_VALUE_RELEASE(val);
        util::fail(call, key, "type " + std::to_string(type), "an unexpected value type");
      }
    }
    PMIX_VALUE_RELEASE(val);
    return out;
  }

  pmix_proc_t me_;
  std::mutex lock_;
};

}  // namespace

bool pmix_available() {
  return true;
}
std::shared_ptr<bootstrap> make_pmix_bootstrap() {
  return std::make_shared<pmix_bootstrap>();
}

}  // namespace weft::bootstrap

#else  // built without libpmix

#include "util/fail.hpp"

namespace weft::bootstrap {
bool pmix_available() {
  return false;
}
std::shared_ptr<bootstrap> make_pmix_bootstrap() {
  util::fail("bootstrap", "WEFT_BOOTSTRAP", "pmix",
             "this Weft was built without libpmix (install libpmix-dev and rebuild)");
}
}  // namespace weft::bootstrap

#endif
