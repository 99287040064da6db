#!/usr/bin/python3
"""Writes the model and input files of errors.test / run.test into OUTDIR."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

# y = relu(x * w + b), z = x + x; x: f32[2,3], w and b initializers.
w = numpy_helper.from_array(np.array([1, -2, 3], np.float32), "w")
b = numpy_helper.from_array(np.array([0.5], np.float32), "b")
graph = helper.make_graph(
    [helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"),
     helper.make_node("Add", ["xw", "b"], ["s"], name="add"),
     helper.make_node("Relu", ["s"], ["y"], name="relu"),
     helper.make_node("Add", ["x", "t"], ["z"], name="add2")],
    "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])],
    initializer=[w, b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(model, os.path.join(out, "model.onnx"))

x = np.array([[1, 2, 3], [-1, -2, -3]], np.float32)
t = np.full((2, 3), 10, np.float32)
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "t.npy"), t)
with open(os.path.join(out, "t.pb"), "wb") as f:
    f.write(numpy_helper.from_array(t, "t").SerializeToString())
np.save(os.path.join(out, "expect_y.npy"), np.maximum(x * np.array([1, -2, 3], np.float32) + 0.5, 0))
np.save(os.path.join(out, "expect_z.npy"), x + t)
np.save(os.path.join(out, "wrong_shape.npy"), np.zeros((3, 2), np.float32))
np.save(os.path.join(out, "wrong_dtype.npy"), np.zeros((2, 3), np.float64))
with open(os.path.join(out, "x.npy"), "rb") as f:
    data = f.read()
with open(os.path.join(out, "truncated.npy"), "wb") as f:
    f.write(data[:len(data) - 5])
with open(os.path.join(out, "garbage.npy"), "wb") as f:
    f.write(b"this is not a tensor")
