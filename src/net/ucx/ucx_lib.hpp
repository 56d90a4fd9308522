// SPDX-License-Identifier: BSD-3-Clause
// UCX (libucp, with libuct and libucs it links), opened when the first ucx context starts
// (util/dynlib.hpp says why). Included by the ucx backend's sources after every UCX header:
// each UCX function they call becomes a call through the table.
#pragma once

#include <ucp/api/ucp.h>
#include <uct/api/uct.h>

#include "util/dynlib.hpp"

#define WEFT_UCX_FUNCTIONS(X)       \
  X(ucp_am_data_release)            \
  X(ucp_am_send_nbx)                \
  X(ucp_cleanup)                    \
  X(ucp_config_read)                \
  X(ucp_config_release)             \
  X(ucp_ep_close_nbx)               \
  X(ucp_ep_create)                  \
  X(ucp_ep_flush_nbx)               \
  X(ucp_ep_rkey_unpack)             \
  X(ucp_get_nbx)                    \
  X(ucp_get_version_string)         \
  X(ucp_init_version)               \
  X(ucp_mem_map)                    \
  X(ucp_mem_unmap)                  \
  X(ucp_put_nbx)                    \
  X(ucp_request_check_status)       \
  X(ucp_request_free)               \
  X(ucp_rkey_buffer_release)        \
  X(ucp_rkey_destroy)               \
  X(ucp_rkey_pack)                  \
  X(ucp_worker_create)              \
  X(ucp_worker_arm)                 \
  X(ucp_worker_destroy)             \
  X(ucp_worker_get_address)         \
  X(ucp_worker_get_efd)             \
  X(ucp_worker_progress)            \
  X(ucp_worker_release_address)     \
  X(ucp_worker_set_am_recv_handler) \
  X(ucs_status_string)              \
  X(uct_component_query)            \
  X(uct_config_release)             \
  X(uct_md_close)                   \
  X(uct_md_config_read)             \
  X(uct_md_open)                    \
  X(uct_md_query_tl_resources)      \
  X(uct_query_components)           \
  X(uct_release_component_list)     \
  X(uct_release_tl_resource_list)

namespace weft::net::ucx {

// ucx(): the functions of libucp, and of libuct and libucs which it loads, looked up on
// the first call; a fatal_error when UCX cannot be loaded.
WEFT_DYNLIB_TABLE(ucx_lib, ucx, WEFT_UCX_FUNCTIONS, WEFT_UCX_SONAME, "the ucx backend")

}  // namespace weft::net::ucx

// A macro does not expand inside its own expansion, so the member names stay as they are.
#define ucp_am_data_release (::weft::net::ucx::ucx().ucp_am_data_release)
#define ucp_am_send_nbx (::weft::net::ucx::ucx().ucp_am_send_nbx)
#define ucp_cleanup (::weft::net::ucx::ucx().ucp_cleanup)
#define ucp_config_read (::weft::net::ucx::ucx().ucp_config_read)
#define ucp_config_release (::weft::net::ucx::ucx().ucp_config_release)
#define ucp_ep_close_nbx (::weft::net::ucx::ucx().ucp_ep_close_nbx)
#define ucp_ep_create (::weft::net::ucx::ucx().ucp_ep_create)
#define ucp_ep_flush_nbx (::weft::net::ucx::ucx().ucp_ep_flush_nbx)
#define ucp_ep_rkey_unpack (::weft::net::ucx::ucx().ucp_ep_rkey_unpack)
#define ucp_get_nbx (::weft::net::ucx::ucx().ucp_get_nbx)
#define ucp_get_version_string (::weft::net::ucx::ucx().ucp_get_version_string)
#define ucp_init_version (::weft::net::ucx::ucx().ucp_init_version)
#define ucp_mem_map (::weft::net::ucx::ucx().ucp_mem_map)
#define ucp_mem_unmap (::weft::net::ucx::ucx().ucp_mem_unmap)
#define ucp_put_nbx (::weft::net::ucx::ucx().ucp_put_nbx)
#define ucp_request_check_status (::weft::net::ucx::ucx().ucp_request_check_status)
#define ucp_request_free (::weft::net::ucx::ucx().ucp_request_free)
#define ucp_rkey_buffer_release (::weft::net::ucx::ucx().ucp_rkey_buffer_release)
#define ucp_rkey_destroy (::weft::net::ucx::ucx().ucp_rkey_destroy)
#define ucp_rkey_pack (::weft::net::ucx::ucx().ucp_rkey_pack)
#define ucp_worker_create (::weft::net::ucx::ucx().ucp_worker_create)
#define ucp_worker_arm (::weft::net::ucx::ucx().ucp_worker_arm)
#define ucp_worker_destroy (::weft::net::ucx::ucx().ucp_worker_destroy)
#define ucp_worker_get_efd (::weft::net::ucx::ucx().ucp_worker_get_efd)
#define ucp_worker_get_address (::weft::net::ucx::ucx().ucp_worker_get_address)
#define ucp_worker_progress (::weft::net::ucx::ucx().ucp_worker_progress)
#define ucp_worker_release_address (::weft::net::ucx::ucx().ucp_worker_release_address)
#define ucp_worker_set_am_recv_handler (::weft::net::ucx::ucx().ucp_worker_set_am_recv_handler)
#define ucs_status_string (::weft::net::ucx::ucx().ucs_status_string)
#define uct_component_query (::weft::net::ucx::ucx().uct_component_query)
#define uct_config_release (::weft::net::ucx::ucx().uct_config_release)
#define uct_md_close (::weft::net::ucx::ucx().uct_md_close)
#define uct_md_config_read (::weft::net::ucx::ucx().uct_md_config_read)
#define uct_md_open (::weft::net::ucx::ucx().uct_md_open)
#define uct_md_query_tl_resources (::weft::net::ucx::ucx().uct_md_query_tl_resources)
#define uct_query_components (::weft::net::ucx::ucx().uct_query_components)
#define uct_release_component_list (::weft::net::ucx::ucx().uct_release_component_list)
#define uct_release_tl_resource_list (::weft::net::ucx::ucx().uct_release_tl_resource_list)
