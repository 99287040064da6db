//===- KRTOps.td - krt dialect ops --------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KRT_IR_KRTOPS_TD
#define KILN_DIALECT_KRT_IR_KRTOPS_TD

include "kiln/Dialect/KRT/IR/KRTDialect.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

def KRT_AllocOp : KRT_Op<"alloc", [
    MemoryEffects<[MemAlloc<DefaultResource>]>]> {
  let summary = "a buffer in the device arena";
  let description = [{
    A dense row-major buffer of static shape. Before buffer assignment it has
    no place; `--kiln-assign-buffers` sets `offset`, its byte offset in the
    arena (a multiple of the arena alignment). Two allocs may share bytes when
    their lifetimes do not overlap, or when one is written in place over the
    other.
    ```mlir
    %0 = krt.alloc {offset = 128 : i64} : memref<4x16xf32>
    ```
  }];
  let arguments = (ins OptionalAttr<I64Attr>:$offset);
  let results = (outs KRT_Buffer:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def KRT_ConstantOp : KRT_Op<"constant", [Pure]> {
  let summary = "a read-only buffer with a value";
  let description = [{
    Constant data the plan carries in its blob (a `kiln.constant` after
    lowering). The value's shape and element type match the buffer's.
    ```mlir
    %c = krt.constant dense<[2, 3]> : tensor<2xi64> : memref<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs KRT_Buffer:$result);
  let assemblyFormat = "attr-dict $value `:` type($result)";
  let hasVerifier = 1;
}

def KRT_ViewOp : KRT_Op<"view", [Pure]> {
  let summary = "the same bytes with another shape";
  let description = [{
    Reinterprets a buffer's row-major elements with a new static shape (a
    `kiln.reshape` after lowering): no copy, no new bytes. The element type
    and count agree.
    ```mlir
    %v = krt.view %0 : memref<2x3x4xf32> -> memref<6x4xf32>
    ```
  }];
  let arguments = (ins KRT_Buffer:$source);
  let results = (outs KRT_Buffer:$result);
  let assemblyFormat = "$source attr-dict `:` type($source) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def KRT_LaunchOp : KRT_Op<"launch", [AttrSizedOperandSegments]> {
  let summary = "runs one runtime kernel";
  let description = [{
    Runs the kernel `kernel` (the name of the `kiln` op it came from, without
    the dialect prefix) on `stream`. It reads `ins` and writes `outs`, which
    follow the `kiln` op's operand and result order; `params` holds the op's
    attributes. With `in_place`, the kernel is elementwise (it reads element
    `i` of every input before writing element `i`), so buffer assignment may
    give an output the bytes of an input of the same type that dies here.
    `flops` is the op's floating-point work (its CostOpInterface), carried to
    the plan for the profiler's achieved GFLOP/s.
    ```mlir
    krt.launch "matmul" ins(%x, %w : memref<4x8xf32>, memref<16x8xf32>)
        outs(%0 : memref<4x16xf32>) {params = {transpose_rhs = true}}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<KRT_Buffer>:$ins,
                   Variadic<KRT_Buffer>:$outs,
                   DefaultValuedAttr<DictionaryAttr, "{}">:$params,
                   UnitAttr:$in_place,
                   DefaultValuedAttr<I64Attr, "0">:$stream,
                   OptionalAttr<I64Attr>:$flops);
  let assemblyFormat = [{
    $kernel (`ins` `(` $ins^ `:` type($ins) `)`)? `outs` `(` $outs `:` type($outs) `)`
    attr-dict (`flops` $flops^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives, streams and events (for the distributed and CUDA runtimes)
//===----------------------------------------------------------------------===//

def KRT_ReduceKind : I64EnumAttr<"ReduceKind", "a collective's reduction", [
    I64EnumAttrCase<"sum", 0>, I64EnumAttrCase<"max", 1>,
    I64EnumAttrCase<"min", 2>, I64EnumAttrCase<"avg", 3>]> {
  let cppNamespace = "::kiln::krt";
}

class KRT_CollectiveOp<string mnemonic> : KRT_Op<mnemonic> {
  let assemblyFormat = [{
    $input `,` $output attr-dict `:` type($input) `,` type($output)
  }];
  let hasVerifier = 1;
}

def KRT_AllReduceOp : KRT_CollectiveOp<"all_reduce"> {
  let summary = "reduces a buffer across the ranks of a group";
  let description = [{
    Every rank of `group` (the ranks `replica_groups` lists, all ranks when
    empty) ends with the elementwise `reduction` of their `input`s in
    `output` (same type; may be the same buffer).
    ```mlir
    krt.all_reduce %g, %g {reduction = 0 : i64} : memref<1024xf32>, memref<1024xf32>
    ```
  }];
  let arguments = (ins KRT_Buffer:$input, KRT_Buffer:$output,
                   KRT_ReduceKind:$reduction,
                   DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$replica_groups,
                   DefaultValuedAttr<I64Attr, "0">:$stream);
}

def KRT_AllGatherOp : KRT_CollectiveOp<"all_gather"> {
  let summary = "concatenates each rank's buffer along dimension 0";
  let description = [{
    `output` (dimension 0 is `input`'s times the group size) holds every
    rank's `input`, in rank order.
    ```mlir
    krt.all_gather %s, %full : memref<256xf32>, memref<1024xf32>
    ```
  }];
  let arguments = (ins KRT_Buffer:$input, KRT_Buffer:$output,
                   DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$replica_groups,
                   DefaultValuedAttr<I64Attr, "0">:$stream);
}

def KRT_ReduceScatterOp : KRT_CollectiveOp<"reduce_scatter"> {
  let summary = "reduces across ranks and keeps this rank's slice";
  let description = [{
    Reduces `input` across the group and leaves rank `r`'s slice `r` of
    dimension 0 in `output` (dimension 0 is `input`'s divided by the group
    size).
    ```mlir
    krt.reduce_scatter %g, %s {reduction = 0 : i64} : memref<1024xf32>, memref<256xf32>
    ```
  }];
  let arguments = (ins KRT_Buffer:$input, KRT_Buffer:$output,
                   KRT_ReduceKind:$reduction,
                   DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$replica_groups,
                   DefaultValuedAttr<I64Attr, "0">:$stream);
}

def KRT_RecordEventOp : KRT_Op<"record_event"> {
  let summary = "marks a point of a stream";
  let description = [{
    Event `event` completes when the work queued on `stream` before it has.
    ```mlir
    krt.record_event {event = 0 : i64, stream = 1 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$event, DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = "attr-dict";
}

def KRT_WaitEventOp : KRT_Op<"wait_event"> {
  let summary = "makes a stream wait for an event";
  let description = [{
    Work queued on `stream` after this op starts once `event` has completed.
    ```mlir
    krt.wait_event {event = 0 : i64, stream = 0 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$event, DefaultValuedAttr<I64Attr, "0">:$stream);
  let assemblyFormat = "attr-dict";
}

#endif // KILN_DIALECT_KRT_IR_KRTOPS_TD
