#!/usr/bin/python3
# ===- make_fixtures.py - tensor files for TensorIOTest ----------------=== #
# SPDX-License-Identifier: Apache-2.0
#
# Regenerates runtime/test/data/*.npy and *.pb (run from anywhere with
# Debian's python3, which has numpy and onnx). Unless noted, a tensor holds
# arange(6) reshaped to (2, 3) in its dtype.
#
# export.plan is not made here: it is what the compiler wrote for
# test/Target/Plan/export.mlir (x: f32[2,3] -> y = x + [[1,2,3]], z =
# leaky_relu(reshape(y), 0.1)):
#   kiln-opt test/Target/Plan/export.mlir --kiln-lower-to-runtime \
#     --kiln-assign-buffers --mlir-print-debuginfo | kiln-translate \
#     --export-plan -o export.plan
# ===----------------------------------------------------------------------=== #
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def save_npy(name, arr, version=None):
    with open(path(name), "wb") as f:
        np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def save_pb(name, tensor):
    with open(path(name), "wb") as f:
        f.write(tensor.SerializeToString())


def main():
    base = np.arange(6).reshape(2, 3)
    # One .npy per numpy dtype the runtime reads.
    for code in ["f4", "f8", "f2", "i8", "i4", "i2", "i1", "u1", "u2", "u4", "u8"]:
        save_npy("npy_%s.npy" % code, base.astype(code))
    save_npy("npy_b1.npy", np.array([[True, False, True], [False, False, True]]))
    save_npy("npy_scalar.npy", np.array(2.5, dtype=np.float64))
    save_npy("npy_empty.npy", np.zeros((0, 3), dtype=np.float32))
    save_npy("npy_v2.npy", base.astype(np.float32), version=(2, 0))
    save_npy("npy_v3.npy", base.astype(np.float32), version=(3, 0))
    # Refused ones.
    save_npy("npy_fortran.npy", np.asfortranarray(base.astype(np.float32)))
    save_npy("npy_bigendian.npy", base.astype(">f4"))
    save_npy("npy_complex.npy", base.astype(np.complex64))
    with open(path("npy_f4.npy"), "rb") as f:
        good = f.read()
    with open(path("npy_truncated.npy"), "wb") as f:
        f.write(good[:-5])

    # TensorProto: raw_data, and each typed field.
    save_pb("pb_raw_f4.pb", numpy_helper.from_array(base.astype(np.float32), "t"))
    save_pb("pb_raw_i64.pb", numpy_helper.from_array(base.astype(np.int64), "t"))
    save_pb("pb_raw_b1.pb", numpy_helper.from_array(
        np.array([[True, False, True], [False, False, True]]), "t"))
    vals = list(range(6))
    for name, dt in [("f4", TensorProto.FLOAT), ("f8", TensorProto.DOUBLE),
                     ("i32", TensorProto.INT32), ("i64", TensorProto.INT64),
                     ("i16", TensorProto.INT16), ("i8", TensorProto.INT8),
                     ("u8", TensorProto.UINT8), ("u16", TensorProto.UINT16),
                     ("u32", TensorProto.UINT32), ("u64", TensorProto.UINT64),
                     ("f16", TensorProto.FLOAT16),
                     ("bf16", TensorProto.BFLOAT16)]:
        save_pb("pb_typed_%s.pb" % name,
                helper.make_tensor("t", dt, [2, 3], vals, raw=False))
    save_pb("pb_typed_b1.pb", helper.make_tensor(
        "t", TensorProto.BOOL, [2, 3], [1, 0, 1, 0, 0, 1], raw=False))
    save_pb("pb_scalar.pb", numpy_helper.from_array(np.array(7, dtype=np.int32), "t"))
    # Refused ones.
    save_pb("pb_string.pb", helper.make_tensor("t", TensorProto.STRING, [2],
                                               [b"a", b"b"]))
    ext = numpy_helper.from_array(base.astype(np.float32), "t")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    e = ext.external_data.add()
    e.key, e.value = "location", "weights.bin"
    save_pb("pb_external.pb", ext)
    short = helper.make_tensor("t", TensorProto.FLOAT, [3], [1, 2, 3], raw=False)
    short.dims[:] = [2, 3]
    save_pb("pb_count_mismatch.pb", short)
    neg = numpy_helper.from_array(np.zeros(0, dtype=np.float32), "t")
    neg.dims[:] = [-1]
    save_pb("pb_negative_dim.pb", neg)


if __name__ == "__main__":
    main()
