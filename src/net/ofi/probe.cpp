// SPDX-License-Identifier: BSD-3-Clause
// What libfabric offers here, for weft-info: its version and every provider that answers
// the hints the ofi backend asks with (reliable datagrams, messages and RMA).
#include <rdma/fabric.h>

#include <set>
#include <string>

#include "net/backend.hpp"

namespace weft::net {
namespace ofi {
fi_info* weft_hints();
}

void probe_ofi(std::vector<finding>& out) {
  const uint32_t v = fi_version();
  out.push_back({"libfabric", std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v))});
  fi_info* hints = ofi::weft_hints();
  fi_info* info = nullptr;
  const int rc = fi_getinfo(FI_VERSION(1, 9), nullptr, nullptr, 0, hints, &info);
  fi_freeinfo(hints);
  if (rc != 0 || !info) {
    out.push_back({"providers", std::string("none usable (") + fi_strerror(-rc) + ")"});
    return;
  }
  std::set<std::string> seen;
  std::string list;
  for (fi_info* i = info; i; i = i->next) {
    const std::string p = i->fabric_attr->prov_name;
    if (!seen.insert(p).second) continue;
    list += (list.empty() ? "" : ", ") + p;
  }
  fi_freeinfo(info);
  out.push_back({"providers", list + " (first is the default)"});
}

}  // namespace weft::net
