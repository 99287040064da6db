//===- KilnInterfaces.td - op interfaces of the kiln dialect -*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The rules every pass needs from an op live here, as interfaces, so that a
// pass asks the op instead of switching over op kinds.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
#define KILN_DIALECT_KILN_IR_KILNINTERFACES_TD

include "mlir/IR/OpBase.td"

def Kiln_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::kiln";
  let description = [{
    The work an op does, for planners (fusion, pipeline balancing, overlap)
    and for `--kiln-print-cost`. Counts are for the op's static shapes: one
    fused multiply-add is 2 FLOPs; bytes are the operand and result bytes an
    unfused kernel would move.

    ```mlir
    // 2 * 4 * 8 * 16 = 1024 FLOPs
    %0 = kiln.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Floating-point operations of one execution of the op.
                 The default is one per result element.}],
      /*retTy=*/"int64_t", /*methodName=*/"getFlops", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::kiln::detail::defaultFlops($_op.getOperation());
      }]>,
    InterfaceMethod<
      /*desc=*/[{Bytes read and written by an unfused kernel for the op:
                 the sizes of all tensor operands and results.}],
      /*retTy=*/"int64_t", /*methodName=*/"getBytesAccessed", /*args=*/(ins),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::kiln::detail::defaultBytesAccessed($_op.getOperation());
      }]>,
  ];
}

#endif // KILN_DIALECT_KILN_IR_KILNINTERFACES_TD
