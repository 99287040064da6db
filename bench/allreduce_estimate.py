#!/usr/bin/python3
# An estimate on paper (issue 14): data parallelism of GPT-2 124M on 1,024
# GPUs (128 nodes of 8 H100), NCCL ring and tree all-reduce. No machine is
# measured here: every input is a stated assumption, printed with the
# result, so the estimate can be redone with other figures.
#
#   /usr/bin/python3 bench/allreduce_estimate.py [--gpus 1024] [--per-node 8]
#       [--params 124.4e6] [--grad-bytes 4] [--nic-gbs 50] [--nvlink-gbs 450]
#       [--alpha-us 6] [--tokens 8192] [--tflops 400]
#
# Model: the alpha-beta cost of NCCL's algorithms for an all-reduce of S
# bytes over N ranks with per-rank bus bandwidth B and per-hop latency a:
#   ring: 2 (N-1)/N * S / B + 2 (N-1) a
#   tree: 2 S / B + 2 log2(N) a      (NCCL's double binary tree; its
#         pipelining makes the bandwidth term about that of the ring)
# Across nodes B is the NIC's (one 400 Gb/s NIC per GPU: 50 GB/s); NCCL's
# hierarchical rings reduce within the node over NVLink first, which is
# faster and left out here (it hides under the inter-node term).
# Backward compute is 2/3 of a step of 6 * params * tokens FLOPs at the
# sustained rate --tflops (40% of an H100's 989 dense BF16 TFLOP/s).
import argparse
import math


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpus", type=int, default=1024)
    p.add_argument("--per-node", type=int, default=8)
    p.add_argument("--params", type=float, default=124.4e6)
    p.add_argument("--grad-bytes", type=int, default=4, help="4: f32 gradients, 2: bf16")
    p.add_argument("--nic-gbs", type=float, default=50.0, help="per GPU, GB/s")
    p.add_argument("--alpha-us", type=float, default=6.0, help="per inter-node hop")
    p.add_argument("--tokens", type=int, default=8192, help="per GPU per step")
    p.add_argument("--tflops", type=float, default=400.0)
    a = p.parse_args()
    n, B, alpha = a.gpus, a.nic_gbs * 1e9, a.alpha_us * 1e-6
    print("GPT-2 %.1fM on %d GPUs (%d nodes of %d), %d-byte gradients, NIC %.0f GB/s "
          "per GPU, %.0f us per hop" % (a.params / 1e6, n, n // a.per_node, a.per_node,
                                        a.grad_bytes, a.nic_gbs, a.alpha_us))
    backward = 2 / 3 * 6 * a.params * a.tokens / (a.tflops * 1e12)
    print("backward per step: %.1f ms (%d tokens per GPU at %.0f TFLOP/s)"
          % (backward * 1e3, a.tokens, a.tflops))
    for grad_bytes in sorted({a.grad_bytes, 2}, reverse=True):
        S = a.params * grad_bytes
        ring = 2 * (n - 1) / n * S / B + 2 * (n - 1) * alpha
        tree = 2 * S / B + 2 * math.log2(n) * alpha
        print("  %d-byte gradients, %.0f MB: ring %.1f ms (latency %.1f ms), tree %.1f ms "
              "(latency %.2f ms)" % (grad_bytes, S / 1e6, ring * 1e3,
                                     2 * (n - 1) * alpha * 1e3, tree * 1e3,
                                     2 * math.log2(n) * alpha * 1e3))
    print("buckets (tree): a bucket's latency is 2 log2(N) a; its transfer 2 b / B")
    lat = 2 * math.log2(n) * alpha
    S = a.params * a.grad_bytes
    for mb in (1, 4, 25, 100):
        b = mb * 2**20
        k = math.ceil(S / b)
        per = 2 * b / B + lat
        # The last bucket starts when backward ends; everything before it
        # hides if the buckets' total fits in backward.
        exposed = max(per, k * per - backward)
        print("  %4d MiB: %3d buckets, %.2f ms each (%.0f%% of it bandwidth), exposed after "
              "backward %.1f ms" % (mb, k, per * 1e3, 100 * (2 * b / B) / per, exposed * 1e3))


if __name__ == "__main__":
    main()
