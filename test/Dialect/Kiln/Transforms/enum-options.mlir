// The training passes' and the lowering's enum options (KilnEnums.td): each
// accepts exactly its enum's names, prints them back in the pipeline, and the
// option parser refuses any other name with the option and the valid names.

// RUN: kiln-opt %s --dump-pass-pipeline --kiln-attach-loss=loss=mse --kiln-autodiff=bn-running-var=biased --kiln-attach-optimizer=optimizer=adamw --kiln-lower-to-runtime=target=cpu 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
// PIPE: kiln-attach-loss{{{.*}}loss=mse{{.*}}}
// PIPE-NEXT: kiln-autodiff{bn-running-var=biased{{.*}}}
// PIPE-NEXT: kiln-attach-optimizer{{{.*}}optimizer=adamw{{.*}}}
// PIPE-NEXT: kiln-lower-to-runtime{target=cpu}

// RUN: not kiln-opt %s --kiln-attach-loss=loss=hinge 2>&1 | FileCheck %s --check-prefix=LOSS
// LOSS: for the --loss option: unknown loss 'hinge' (expected cross-entropy, mse or output)

// RUN: not kiln-opt %s --kiln-autodiff=bn-running-var=sample 2>&1 | FileCheck %s --check-prefix=BNVAR
// BNVAR: for the --bn-running-var option: unknown bn-running-var 'sample' (expected unbiased or biased)

// RUN: not kiln-opt %s --kiln-attach-optimizer=optimizer=SGD 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: for the --optimizer option: unknown optimizer 'SGD' (expected sgd, momentum, adam or adamw)

// RUN: not kiln-opt %s --kiln-lower-to-runtime=target=cuda 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: for the --target option: unknown target 'cuda' (expected cpu)

func.func @forward(%x: tensor<4x2xf32> {onnx.name = "x"}, %w: tensor<2x3xf32> {kiln.param, onnx.name = "w"})
    -> (tensor<4x3xf32> {onnx.name = "y"}) {
  %y = kiln.matmul %x, %w : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
