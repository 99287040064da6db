//===- Dist.td - the dist dialect ---------------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Kiln's distribution dialect: what upstream's `shard` lacks. `shard`
// declares the mesh and the collectives as values (a `shard.all_reduce`
// returns the reduced tensor); `dist` splits a collective into a start and a
// wait joined by a bucket in flight, so the communication of one group of
// tensors runs while the ops between the two compute
// (../shared/design/DISTRIBUTION.md).
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_DIST_IR_DIST_TD
#define KILN_DIALECT_DIST_IR_DIST_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Dialect/Shard/IR/ShardBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::kiln::dist";
  let summary = "Kiln's asynchronous collectives: buckets in flight";
  let description = [{
    A collective as two ops. `dist.all_reduce_start` packs its tensors into
    one contiguous bucket and starts reducing it over mesh axes; its result,
    a `!dist.bucket`, is the reduction in flight. `dist.all_reduce_wait`
    waits for it and unpacks the reduced tensors. Every op between the two
    runs while the bucket travels. `--kiln-bucket-all-reduce` builds them
    from `shard.all_reduce`; `--kiln-lower-to-runtime` lowers them to the
    runtime kernels `all_reduce_start` and `all_reduce_wait`.

    Every rank runs the same program, so every rank starts its buckets in
    the same order, as the communicator requires; waits may come in any
    order.
  }];
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_BucketType : TypeDef<Dist_Dialect, "Bucket"> {
  let mnemonic = "bucket";
  let summary = "a reduction in flight: `size` elements of `elementType`";
  let description = [{
    The packed tensors of one `dist.all_reduce_start`, in operand order, row
    major: `!dist.bucket<1034xf32>`. Its value is defined only once a
    `dist.all_reduce_wait` has waited for it; the runtime buffer it lowers to
    is written by the communicator in between.
  }];
  let parameters = (ins "int64_t":$size, "::mlir::Type":$elementType);
  let assemblyFormat = "`<` $size `x` $elementType `>`";
  let genVerifyDecl = 1;
}

def Dist_AllReduceStartOp : Dist_Op<"all_reduce_start"> {
  let summary = "packs tensors into a bucket and starts reducing it";
  let description = [{
    Packs `inputs` (one element type, the bucket's) into a bucket of their
    total size and starts their reduction over `grid_axes` of `grid`, as
    `shard.all_reduce` would reduce each of them. `compression` (bf16, fp16,
    int8; sums and averages of f32) names the wire format, as
    `kiln.compression` does on `shard.all_reduce`.

    ```mlir
    %b = dist.all_reduce_start %g1, %g0 on @kiln_mesh grid_axes = [0]
        reduction = average : tensor<64x784xf32>, tensor<64xf32>
        -> !dist.bucket<50240xf32>
    ```
  }];
  let arguments = (ins
    Variadic<AnyRankedTensor>:$inputs,
    FlatSymbolRefAttr:$grid,
    DefaultValuedAttr<DenseI16ArrayAttr, "{}">:$grid_axes,
    DefaultValuedAttr<Shard_ReductionKindAttr, "::mlir::shard::ReductionKind::Sum">:$reduction,
    OptionalAttr<StrAttr>:$compression
  );
  let results = (outs Dist_BucketType:$bucket);
  let assemblyFormat = [{
    $inputs `on` $grid (`grid_axes` `=` $grid_axes^)? (`reduction` `=` $reduction^)?
    attr-dict `:` type($inputs) `->` qualified(type($bucket))
  }];
  let hasVerifier = 1;
}

def Dist_AllReduceWaitOp : Dist_Op<"all_reduce_wait"> {
  let summary = "waits for a bucket and unpacks the reduced tensors";
  let description = [{
    Waits until the reduction `bucket` started is complete and returns its
    tensors, of the types its `dist.all_reduce_start` packed. A bucket is
    waited for once.

    ```mlir
    %w1, %w0 = dist.all_reduce_wait %b : !dist.bucket<50240xf32>
        -> tensor<64x784xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Dist_BucketType:$bucket);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $bucket attr-dict `:` qualified(type($bucket)) `->` type($results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start this waits for (null if the bucket has another origin).
    AllReduceStartOp getStart() {
      return getBucket().getDefiningOp<AllReduceStartOp>();
    }
  }];
}

def Dist_SendOp : Dist_Op<"send"> {
  let summary = "sends a tensor to another pipeline stage";
  let description = [{
    Sends `input` to member `peer` of this rank's group along mesh axis
    `axis` (the pipeline's `pp`), matched by the `dist.recv` with the same
    `tag` in the peer's program. It returns at once: the communicator
    keeps a copy until the peer has received it, so a send never waits for
    its receiver and the ops after it compute meanwhile.
    `--kiln-pipeline` builds the sends and receives of each stage's
    program; `--kiln-lower-to-runtime` lowers them to the runtime kernels
    `send` and `recv`.

    ```mlir
    dist.send %h to 1 on "pp" tag 3 : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, StrAttr:$axis, I64Attr:$peer,
                   I64Attr:$tag);
  let assemblyFormat = [{
    $input `to` $peer `on` $axis `tag` $tag attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let summary = "receives a tensor from another pipeline stage";
  let description = [{
    Waits for the tensor member `peer` of this rank's group along `axis`
    sends with `tag` (its `dist.send`), of the result's type.

    ```mlir
    %h = dist.recv from 0 on "pp" tag 3 : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins StrAttr:$axis, I64Attr:$peer, I64Attr:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `from` $peer `on` $axis `tag` $tag attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // KILN_DIALECT_DIST_IR_DIST_TD
