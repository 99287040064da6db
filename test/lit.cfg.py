# -*- Python -*-
# lit configuration for check-kiln.
import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "KILN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "parity.py", "gradcheck.py", "augment_ref.py", "soft_labels.py", "resume.py", "data_parallel.py", "CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "run_claimed.py", "fix_adam_multiple.py", "claimed-node-tests.txt", "excluded-node-tests.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
# The oracle (torch, onnx, numpy) lives in Debian's python.
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%models", os.path.join(config.kiln_obj_root, "test", "models")))
config.substitutions.append(("%kiln_src", config.kiln_src_root))
config.substitutions.append(("%kiln_bin", config.kiln_tools_dir))
# `%{status} CMD ARGS...` runs CMD under a 30 s timeout and prints its stdout
# and stderr, then "exit N": a test asserts the exact status (1, not a crash's
# 134 nor a hang's 124) and the message, and a hang fails instead of waiting.
config.substitutions.append(("%{status}", "sh -c 'timeout 30 \"$@\" 2>&1; echo \"exit $?\"' -"))
# MLIR's .td files, for kiln-tblgen (Debian puts them with LLVM's headers).
config.substitutions.append(("%mlir_include", os.path.join(config.llvm_tools_dir, "..", "include")))

# ONEDNN_MAX_CPU_ISA caps oneDNN's kernels (AVX2 as on a machine without
# AVX-512): the suite must pass on both.
llvm_config.with_system_environment(["HOME", "TMPDIR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.kiln_tools_dir, config.llvm_tools_dir]
tools = ["kiln-opt", "kiln-translate", "kiln-run", "kiln-runtime-tests", "kiln-train-tests",
         "kiln-comm-check"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# qemu-user runs the runtime on an emulated CPU without AVX-512
# (test/Runtime/portable-baseline.test).
if shutil.which("qemu-x86_64"):
    config.available_features.add("qemu-x86_64")

# Multi-rank tests (test/Runtime/comm.test): Open MPI's mpirun, allowed to
# run as root (the CI machine's user), one OpenMP thread per rank.
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMP_NUM_THREADS"] = "1"
    config.substitutions.append(("%mpirun", "mpirun --oversubscribe"))
