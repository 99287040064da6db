#!/usr/bin/env python3
# ===- make_bad_models.py - fixtures for the ONNX importer ----------------===#
# SPDX-License-Identifier: Apache-2.0
#
# Writes small ONNX models, good and bad, into the folder given as the only
# argument. Needs Debian's python3 with onnx and numpy.
#
#   good: gemm_relu.onnx, opset9_gemm.onnx, external_ok.onnx (+ w.bin),
#         dynamic_batch.onnx (needs --batch-size N or --dim batch_size=N),
#         int_init.onnx (non-floating initializers, Constant, empty input)
#   bad:  truncated.onnx, not_onnx.onnx, cycle.onnx, dangling.onnx,
#         unknown_domain.onnx, opset6.onnx, wrong_attr_type.onnx,
#         external_escape.onnx (+ ../evil.bin), external_absolute.onnx,
#         external_short.onnx, graph_attr.onnx, string_input.onnx,
#         bad_tensor_attr.onnx, libonnx_crash.onnx (crashes libonnx 1.12's
#         Conv shape inference; the importer isolates it), missing.onnx
#         (never written)
# ===----------------------------------------------------------------------===#
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def gemm_relu_graph(name="gemm_relu", batch=4):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16])
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "fc.weight")
    b = numpy_helper.from_array(rng.standard_normal((16,)).astype(np.float32), "fc.bias")
    nodes = [
        helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"], name="/fc/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["y"], name="/relu/Relu"),
    ]
    return helper.make_graph(nodes, name, [x], [y], [w, b])


def model(graph, opset=17, domains=None, **kw):
    imports = [helper.make_opsetid("", opset)]
    for d, v in (domains or {}).items():
        imports.append(helper.make_opsetid(d, v))
    m = helper.make_model(graph, opset_imports=imports, producer_name="make_bad_models", **kw)
    return m


def save(m, out, name, check=True):
    if check:
        onnx.checker.check_model(m)
    onnx.save_model(m, os.path.join(out, name))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bad_models.py OUTPUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)

    # --- good ------------------------------------------------------------
    save(model(gemm_relu_graph()), out, "gemm_relu.onnx")

    # Opset 9: exercises the version converter (to 17).
    g9 = gemm_relu_graph("opset9_gemm")
    save(model(g9, opset=9, ir_version=4), out, "opset9_gemm.onnx")

    # External data, all tensors in one file next to the model.
    ext = model(gemm_relu_graph("external_ok"))
    onnx.save_model(ext, os.path.join(out, "external_ok.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="w.bin", size_threshold=0)

    # Symbolic batch dimension.
    gd = gemm_relu_graph("dynamic_batch", batch="batch_size")
    save(model(gd), out, "dynamic_batch.onnx")

    # Non-floating initializers, a Constant tensor attribute, an empty input.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3, 4])
    shape = numpy_helper.from_array(np.array([2, 12], dtype=np.int64), "shape")
    mask = numpy_helper.from_array(np.arange(5000, dtype=np.int32), "big_indices")
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape"),
        helper.make_node("Constant", [], ["lo"], name="lo_const",
                         value=helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0])),
        helper.make_node("Clip", ["x", "lo", ""], ["z"], name="clip"),
    ]
    gi = helper.make_graph(nodes, "int_init", [x], [y, z], [shape, mask])
    save(model(gi), out, "int_init.onnx")

    # --- bad -------------------------------------------------------------
    good = model(gemm_relu_graph()).SerializeToString()
    # Truncated: the longest prefix of the half that protobuf rejects.
    cut = len(good) // 2
    while cut > 1:
        try:
            onnx.ModelProto().ParseFromString(good[:cut])
            cut -= 1
        except Exception:
            break
    with open(os.path.join(out, "truncated.onnx"), "wb") as f:
        f.write(good[:cut])

    with open(os.path.join(out, "not_onnx.onnx"), "w") as f:
        f.write("This is a text file, not an ONNX model.\n")

    # Cycle: a depends on b, b on a.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
        helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
        helper.make_node("Identity", ["b"], ["y"], name="out"),
    ]
    save(model(helper.make_graph(nodes, "cycle", [x], [y])), out, "cycle.onnx", check=False)

    nodes = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")]
    save(model(helper.make_graph(nodes, "dangling", [x], [y])), out, "dangling.onnx", check=False)

    nodes = [helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")]
    save(model(helper.make_graph(nodes, "unknown_domain", [x], [y]), domains={"com.example": 1}),
         out, "unknown_domain.onnx", check=False)

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    save(model(helper.make_graph(nodes, "opset6", [x], [y]), opset=6, ir_version=3), out,
         "opset6.onnx")

    # LeakyRelu's alpha is a FLOAT; give it an INT.
    nodes = [helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky", alpha=1)]
    save(model(helper.make_graph(nodes, "wrong_attr_type", [x], [y])), out,
         "wrong_attr_type.onnx", check=False)

    # External data outside the model's folder.
    for name, loc in (("external_escape.onnx", "../evil.bin"),
                      ("external_absolute.onnx", "/etc/passwd")):
        m = model(gemm_relu_graph(name[:-5]))
        for t in m.graph.initializer:
            t.data_location = TensorProto.EXTERNAL
            t.ClearField("raw_data")
            e = t.external_data.add()
            e.key, e.value = "location", loc
        onnx.save_model(m, os.path.join(out, name))
    with open(os.path.join(os.path.dirname(os.path.abspath(out)), "evil.bin"), "wb") as f:
        f.write(b"\0" * 1024)

    # External data shorter than the tensor: offset/length past the file.
    m = model(gemm_relu_graph("external_short"))
    t = m.graph.initializer[0]
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    for k, v in (("location", "short.bin"), ("offset", "0"), ("length", "4096")):
        e = t.external_data.add()
        e.key, e.value = k, v
    onnx.save_model(m, os.path.join(out, "external_short.onnx"))
    with open(os.path.join(out, "short.bin"), "wb") as f:
        f.write(b"\0" * 16)

    # An If node: graph attributes are not supported.
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                              else_branch=else_g)]
    save(model(helper.make_graph(nodes, "graph_attr", [c, x], [y])), out, "graph_attr.onnx")

    # A string input.
    s = helper.make_tensor_value_info("s", TensorProto.STRING, [2])
    so = helper.make_tensor_value_info("so", TensorProto.STRING, [2])
    nodes = [helper.make_node("Identity", ["s"], ["so"], name="id")]
    save(model(helper.make_graph(nodes, "string_input", [s], [so])), out, "string_input.onnx")

    # A Constant whose tensor has fewer values than its dims say.
    bad = helper.make_tensor("v", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    del bad.float_data[2:]
    nodes = [helper.make_node("Constant", [], ["y"], name="const", value=bad)]
    save(model(helper.make_graph(nodes, "bad_tensor_attr", [], [y])), out, "bad_tensor_attr.onnx",
         check=False)

    # Conv of a rank-3 input with a rank-4 weight: libonnx 1.12's
    # convPoolShapeInference reads past the input's dims and segfaults.
    xc = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 3])
    wc = helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 2, 2])
    yc = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    save(model(helper.make_graph(nodes, "libonnx_crash", [xc, wc], [yc])), out,
         "libonnx_crash.onnx", check=False)


    # Gradient (ai.onnx.preview.training) whose inputs are not the tensors
    # its xs attribute names, and one whose y names no tensor.
    tr = {"ai.onnx.preview.training": 1}
    fa = helper.make_tensor_value_info("a", TensorProto.FLOAT, [])
    fb = helper.make_tensor_value_info("b", TensorProto.FLOAT, [])
    fc = helper.make_tensor_value_info("c", TensorProto.FLOAT, [])
    fg = helper.make_tensor_value_info("g", TensorProto.FLOAT, [])
    for name, ins, y in (("gradient_wrong_inputs", ["b"], "c"),
                         ("gradient_unknown_y", ["a"], "nothing")):
        nodes = [helper.make_node("Add", ["a", "b"], ["c"], name="add"),
                 helper.make_node("Gradient", ins, ["g"], name="grad", xs=["a"], y=y,
                                  domain="ai.onnx.preview.training")]
        save(model(helper.make_graph(nodes, name, [fa, fb], [fc, fg]), opset=12,
                   domains=tr), out, name + ".onnx", check=False)


if __name__ == "__main__":
    main()
