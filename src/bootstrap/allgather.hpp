// SPDX-License-Identifier: BSD-3-Clause
// The bootstrap over a program's own allgather (weft::set_bootstrap).
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"
#include "weft/types.hpp"

namespace weft::bootstrap {

void set_user_bootstrap(const bootstrap_ops_t& ops);
// The bootstrap built from the ops given to set_user_bootstrap; nullptr when none were.
std::shared_ptr<bootstrap> make_user_bootstrap();
// True while some runtime holds the process-wide bootstrap.
bool bootstrap_active();

}  // namespace weft::bootstrap
