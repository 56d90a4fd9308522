// SPDX-License-Identifier: BSD-3-Clause
// The PMI bootstrap: the PMI-1 or PMI-2 wire protocol over the launcher's PMI_FD socket.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"

namespace weft::bootstrap {

// version 1 or 2; throws fatal_error naming the variable when the environment is incomplete.
std::shared_ptr<bootstrap> make_pmi_bootstrap(int version);

}  // namespace weft::bootstrap
