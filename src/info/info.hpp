// SPDX-License-Identifier: BSD-3-Clause
// What this Weft is and what it finds: the build (version, options, parts built in and,
// for those left out, what they need), each backend's findings on this machine, and every
// setting with its default, its value now and where that came from. The layer under the
// weft-info tool; it only gathers, the tool formats.
#pragma once

#include <string>
#include <vector>

#include "net/backend.hpp"

namespace weft::info {

using net::finding;

// Version, build type, compiler, sanitizer, test hooks, bootstraps built in.
std::vector<finding> build();
// Every backend: built or not (and what it needs), and what it finds here.
std::vector<net::backend_report> backends();

}  // namespace weft::info
