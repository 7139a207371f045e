// `strata info`: what this build contains (version, MPI, NCCL, GPUs seen).
#include <cstdio>

#include "cli/command_registry.h"
#include "core/build_config.h"
#include "transport/nccl/nccl.h"

namespace strata::cli {
namespace {

const CommandRegistrar registrar("info", [](CLI::App& app, int& exitCode) {
  CLI::App* cmd = app.add_subcommand("info", "Show what this build of Strata contains");
  cmd->callback([&exitCode] {
    std::printf("strata %s\n", STRATA_VERSION_STRING);
    std::printf("mpi bootstrap: %s\n", STRATA_HAVE_MPI ? "yes" : "no");
    std::printf("nccl transport: %s (%d CUDA device(s) visible)\n", STRATA_HAVE_NCCL ? "compiled" : "not compiled",
                nccl::deviceCount());
    exitCode = 0;
  });
});

}  // namespace
}  // namespace strata::cli
