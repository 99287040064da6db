#!/usr/bin/python3
"""Writes the models of hostile-sizes.test into OUTDIR: sizes a model implies
that overflow int64 or that no machine could hold."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, os.path.join(out, name + ".onnx"))


def fill(shape, name="fill", output="c"):
    """A ConstantOfShape node (f32 zeros) of `shape`, given as an initializer."""
    init = numpy_helper.from_array(np.array(shape, np.int64), output + "_shape")
    node = helper.make_node("ConstantOfShape", [init.name], [output], name=name)
    return node, init


# 2^34 f32 = 64 GiB: a valid size, but one no plan should materialise.
node, init = fill([1 << 34])
save("const64g", [node], [], [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1 << 34])], [init])

# The same constant feeding a trainable model: y = x * w + c[0:4].
node, init = fill([1 << 34])
w = numpy_helper.from_array(np.ones(4, np.float32), "w")
starts = numpy_helper.from_array(np.array([0], np.int64), "starts")
ends = numpy_helper.from_array(np.array([4], np.int64), "ends")
save("train64g",
     [node,
      helper.make_node("Slice", ["c", "starts", "ends"], ["c4"], name="slice"),
      helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"),
      helper.make_node("Add", ["xw", "c4"], ["y"], name="add")],
     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
     [init, w, starts, ends])

# 2^62 f32 elements: 2^64 bytes, which wraps to 0 in 64 bits.
node, init = fill([1 << 62])
save("wrap", [node], [], [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1 << 62])], [init])

# A sample of 2^32 f32 elements: a batch of 2^31 makes 2^63 elements.
save("bigsample",
     [helper.make_node("Relu", ["x"], ["y"], name="relu")],
     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1 << 32])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1 << 32])])

# An initializer whose dims multiply past int64 (no data needed to refuse it).
big = TensorProto(name="big", data_type=TensorProto.INT64, dims=[1 << 40, 1 << 40])
save("biginit",
     [helper.make_node("Identity", ["big"], ["y"], name="id")],
     [], [helper.make_tensor_value_info("y", TensorProto.INT64, [1 << 40, 1 << 40])], [big])

# The 2^62 elements computed (2^31 * 2^31) rather than given: ONNX shape
# inference leaves the output's shape unknown, the conversion computes it.
s = numpy_helper.from_array(np.array([1 << 31], np.int64), "s")
save("wrapcomputed",
     [helper.make_node("Mul", ["s", "s"], ["s2"], name="square"),
      helper.make_node("ConstantOfShape", ["s2"], ["c"], name="fill")],
     [], [helper.make_tensor_value_info("c", TensorProto.FLOAT, ["n"])], [s])

# An initializer stored as external data in w.bin (hostile-files.test puts a
# FIFO there): y = x * w.
w = numpy_helper.from_array(np.ones(3, np.float32), "w")
w.ClearField("raw_data")
w.data_location = TensorProto.EXTERNAL
for key, value in (("location", "w.bin"), ("offset", "0"), ("length", "12")):
    entry = w.external_data.add()
    entry.key, entry.value = key, value
save("extdata",
     [helper.make_node("Mul", ["x", "w"], ["y"], name="mul")],
     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
with open(os.path.join(out, "w.bin"), "wb") as f:
    f.write(np.ones(3, np.float32).tobytes())
