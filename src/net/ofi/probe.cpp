// SPDX-License-Identifier: BSD-3-Clause
// What libfabric offers here, for weft-info: its version and every provider that answers
// the hints the ofi backend asks with (reliable datagrams, messages and RMA).
#include <rdma/fabric.h>

#include <set>
#include <string>

#include "net/backend.hpp"
#include "net/ofi/fabric_lib.hpp"

namespace weft::net {
namespace ofi {
fi_info* weft_hints();
}

void probe_ofi(std::vector<finding>& out) {
  const uint32_t v = ofi::fab().fi_version();
  out.push_back({"libfabric", std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v))});
  fi_info* hints = ofi::weft_hints();
  fi_info* info = nullptr;
  const int rc = ofi::fab().fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
  ofi::fab().fi_freeinfo(hints);
  if (rc != 0 || !info) {
    out.push_back({"providers", std::string("none usable (") + ofi::fab().fi_strerror(-rc) + ")"});
    return;
  }
  std::set<std::string> seen;
  std::string list;
  for (fi_info* i = info; i; i = i->next) {
    const std::string p = i->fabric_attr->prov_name;
    if (!seen.insert(p).second) continue;
    list += (list.empty() ? "" : ", ") + p;
  }
  ofi::fab().fi_freeinfo(info);
  out.push_back({"providers", list + " (first is the default)"});
}

}  // namespace weft::net
