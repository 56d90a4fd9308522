// A small dense index per thread, for per-thread slots in resources (packet pool deques).
#pragma once

#include <cstddef>

namespace weft::util {

size_t thread_index();

}  // namespace weft::util
