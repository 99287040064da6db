#!/usr/bin/env python3
"""Backend-test folders whose Reshape takes its shape as a graph input, for
onnx-test-bind.test: `same` has one shape value in both data sets (it can be
bound at compile time), `differ` has two (it cannot)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
s = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])
node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")
model = helper.make_model(helper.make_graph([node], "bind", [x, s], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
for name, shapes in (("same", [[3, 4], [3, 4]]), ("differ", [[3, 4], [4, 3]])):
    d = os.path.join(out, name)
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, shp in enumerate(shapes):
        ds = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(ds)
        xv = np.arange(12, dtype=np.float32).reshape(2, 6) * (k + 1)
        for i, (n, v) in enumerate((("x", xv), ("shape", np.array(shp, np.int64)))):
            with open(os.path.join(ds, "input_%d.pb" % i), "wb") as f:
                f.write(numpy_helper.from_array(v, n).SerializeToString())
        with open(os.path.join(ds, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(xv.reshape(shp), "y").SerializeToString())
        if name == "same" and k == 0:
            np.save(os.path.join(out, "x.npy"), xv)
            np.save(os.path.join(out, "expect_y.npy"), xv.reshape(shp))
