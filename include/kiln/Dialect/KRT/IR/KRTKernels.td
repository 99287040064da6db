//===- KRTKernels.td - the kernels a plan may name ----------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The input of `kiln-tblgen -gen-kernel-manifest`, which writes the kernel
// manifest (runtime/core/include/kiln/runtime/KernelManifest.inc): the name,
// operands, results and attributes of every kernel a `krt.launch`, and so a
// plan step, may name. It is the single source of the compiler-runtime
// contract: the plan writer and the runtime both check against it.
//
// The kernels are:
//  - every `kiln` op, under its mnemonic, with the op's operands, results and
//    attributes (--kiln-lower-to-runtime lowers each to a launch of that
//    name, passing every attribute with its default filled in), except the
//    ops KRT_NotLaunched lists;
//  - the KRT_Kernel defs below, which the lowering emits itself.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KRT_IR_KRTKERNELS_TD
#define KILN_DIALECT_KRT_IR_KRTKERNELS_TD

include "kiln/Dialect/Kiln/IR/Kiln.td"

/// A runtime kernel that no `kiln` op names. `arguments` lists the buffers it
/// reads (and any attributes), `results` the buffers it writes, with the
/// same constraint classes an op uses (Optional<>, Variadic<>, *Attr).
class KRT_Kernel<string kernelName> {
  string name = kernelName;
  string summary = "";
  dag arguments = (ins);
  dag results = (outs);
}

def KRT_CopyKernel : KRT_Kernel<"copy"> {
  let summary = "copies a buffer into another of the same type; "
                "--kiln-lower-to-runtime writes a training update back into "
                "its parameter with it";
  let arguments = (ins AnyType:$input);
  let results = (outs AnyType:$output);
}

def KRT_AllReduceKernel : KRT_Kernel<"all_reduce"> {
  let summary = "the reduction (sum, max, min or average) of the input over "
                "the ranks of the mesh axis `axis` (axes joined by `+`, as "
                "dp+tp: the ranks of all of them), in every rank's output; "
                "--kiln-lower-to-runtime lowers shard.all_reduce to it, and "
                "the runtime runs it on the executable's communicator (one "
                "rank: a copy), in the wire format `compression` (none, "
                "bf16, fp16, int8; error feedback per kernel)";
  let arguments = (ins AnyType:$input, StrAttr:$reduction, StrAttr:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$compression);
  let results = (outs AnyType:$output);
}

def KRT_AllReduceStartKernel : KRT_Kernel<"all_reduce_start"> {
  let summary = "packs the inputs, in order, into the output (a bucket) and "
                "starts its reduction over the ranks of the mesh axis `axis` "
                "(sum, max, min; average sums here and divides in the wait) "
                "on the executable's communicator, in the wire format "
                "`compression`; it returns at once, and the communicator "
                "writes the output until the all_reduce_wait that reads it. "
                "--kiln-lower-to-runtime lowers dist.all_reduce_start to it";
  let arguments = (ins Variadic<AnyType>:$inputs, StrAttr:$reduction,
                   StrAttr:$axis,
                   DefaultValuedStrAttr<StrAttr, "none">:$compression);
  let results = (outs AnyType:$bucket);
}

def KRT_AllReduceWaitKernel : KRT_Kernel<"all_reduce_wait"> {
  let summary = "waits for the reduction all_reduce_start started on the "
                "input bucket and unpacks it into the outputs, dividing by "
                "the ranks of `axis` for an average; lowered from "
                "dist.all_reduce_wait";
  let arguments = (ins AnyType:$bucket, StrAttr:$reduction, StrAttr:$axis);
  let results = (outs Variadic<AnyType>:$outputs);
}

def KRT_ReduceScatterKernel : KRT_Kernel<"reduce_scatter"> {
  let summary = "this rank's block, along dimension `dim`, of the reduction "
                "(sum, max, min or average) of the input over the ranks of "
                "mesh axis `axis`; the input holds one block per rank. "
                "Lowered from shard.reduce_scatter (dim: its scatter_axis)";
  let arguments = (ins AnyType:$input, StrAttr:$reduction, StrAttr:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$dim);
  let results = (outs AnyType:$output);
}

def KRT_AllGatherKernel : KRT_Kernel<"all_gather"> {
  let summary = "the inputs of the ranks of mesh axis `axis`, concatenated "
                "along dimension `dim` in rank order. Lowered from "
                "shard.all_gather (dim: its gather_axis)";
  let arguments = (ins AnyType:$input, StrAttr:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$dim);
  let results = (outs AnyType:$output);
}

def KRT_AllToAllKernel : KRT_Kernel<"all_to_all"> {
  let summary = "the input cut into one block per rank of mesh axis `axis` "
                "along dimension `split_dim`, block j sent to rank j, and the "
                "blocks received joined along `concat_dim` in rank order "
                "(expert parallelism's dispatch and combine). Lowered from "
                "shard.all_to_all";
  let arguments = (ins AnyType:$input, StrAttr:$axis, I64Attr:$split_dim,
                   I64Attr:$concat_dim);
  let results = (outs AnyType:$output);
}

def KRT_SendKernel : KRT_Kernel<"send"> {
  let summary = "sends the input to member `peer` of this rank's group along "
                "mesh axis `axis` with `tag`, without waiting for the "
                "receiver (the communicator keeps a copy). Lowered from "
                "dist.send";
  let arguments = (ins AnyType:$input, StrAttr:$axis, I64Attr:$peer,
                   I64Attr:$tag);
}

def KRT_RecvKernel : KRT_Kernel<"recv"> {
  let summary = "waits for the tensor member `peer` of this rank's group "
                "along `axis` sends with `tag`. Lowered from dist.recv";
  let arguments = (ins StrAttr:$axis, I64Attr:$peer, I64Attr:$tag);
  let results = (outs AnyType:$output);
}

def KRT_AllSliceKernel : KRT_Kernel<"all_slice"> {
  let summary = "this rank's block, along dimension `dim`, of an input every "
                "rank of mesh axis `axis` holds alike (no communication). "
                "Lowered from shard.all_slice (dim: its slice_axis)";
  let arguments = (ins AnyType:$input, StrAttr:$axis,
                   DefaultValuedAttr<I64Attr, "0">:$dim);
  let results = (outs AnyType:$output);
}

def KRT_MeshBroadcastKernel : KRT_Kernel<"mesh_broadcast"> {
  let summary = "rank `root`'s input, in the output of every rank of the "
                "mesh axis `axis`; --kiln-lower-to-runtime lowers "
                "shard.broadcast to it (one rank: a copy)";
  let arguments = (ins AnyType:$input, I64Attr:$root, StrAttr:$axis);
  let results = (outs AnyType:$output);
}

/// `kiln` ops --kiln-lower-to-runtime turns into something other than a
/// launch, so no plan step names them (they stay in the manifest, marked
/// not launched: the plan writer refuses a launch of one).
def KRT_NotLaunched {
  list<Op> ops = [
    Kiln_ConstantOp, // krt.constant: data in the plan's blob
    Kiln_ReshapeOp   // krt.view: the same bytes with another shape
  ];
}

#endif // KILN_DIALECT_KRT_IR_KRTKERNELS_TD
