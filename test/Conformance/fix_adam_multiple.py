#!/usr/bin/env python3
"""Copies ONNX 1.12's test_adam_multiple with epsilon = 0.01 set on its Adam
node: the value its expected outputs were computed with (see
training-ops.test)."""
import os
import shutil
import sys

import onnx

src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
m = onnx.load(os.path.join(src, "model.onnx"))
(node,) = m.graph.node
assert node.op_type == "Adam" and not any(a.name == "epsilon" for a in node.attribute)
node.attribute.append(onnx.helper.make_attribute("epsilon", 0.01))
onnx.save(m, os.path.join(dst, "model.onnx"))
