// SPDX-License-Identifier: BSD-3-Clause
// What UCX offers here, for weft-info: its version and every transport and device its
// components find (what UCX_TLS and UCX_NET_DEVICES choose among), as ucx_info -d does.
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include <set>
#include <string>
#include <vector>

#include "net/backend.hpp"

// Last, in a block of its own: its macros route UCX calls through the table.
#include "net/ucx/ucx_lib.hpp"

namespace weft::net {
namespace {

// The transports of one memory domain, as "tl/device".
void transports_of(uct_component_h comp, const char* md_name, std::set<std::string>& out) {
  uct_md_config_t* config = nullptr;
  if (uct_md_config_read(comp, nullptr, nullptr, &config) != UCS_OK) return;
  uct_md_h md = nullptr;
  if (uct_md_open(comp, md_name, config, &md) == UCS_OK) {
    uct_tl_resource_desc_t* res = nullptr;
    unsigned n = 0;
    if (uct_md_query_tl_resources(md, &res, &n) == UCS_OK) {
      for (unsigned i = 0; i < n; ++i)
        out.insert(std::string(res[i].tl_name) + "/" + res[i].dev_name);
      uct_release_tl_resource_list(res);
    }
    uct_md_close(md);
  }
  uct_config_release(config);
}

}  // namespace

void probe_ucx(std::vector<finding>& out) {
  out.push_back({"ucx", ucp_get_version_string()});
  uct_component_h* comps = nullptr;
  unsigned ncomps = 0;
  if (uct_query_components(&comps, &ncomps) != UCS_OK) {
    out.push_back({"transports", "uct_query_components failed"});
    return;
  }
  std::set<std::string> tls;
  for (unsigned c = 0; c < ncomps; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(comps[c], &attr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(comps[c], &attr) != UCS_OK) continue;
    for (const auto& md : mds) transports_of(comps[c], md.md_name, tls);
  }
  uct_release_component_list(comps);
  std::string list;
  for (const std::string& t : tls) list += (list.empty() ? "" : ", ") + t;
  out.push_back({"transports", list.empty() ? "none" : list});
}

}  // namespace weft::net
