// SPDX-License-Identifier: BSD-3-Clause
// The PMIx bootstrap (libpmix): Open MPI's mpirun, Slurm's srun --mpi=pmix.
#pragma once

#include <memory>

#include "bootstrap/bootstrap.hpp"

namespace weft::bootstrap {

// False when this Weft was built without libpmix.
bool pmix_available();
std::shared_ptr<bootstrap> make_pmix_bootstrap();

}  // namespace weft::bootstrap
