#!/usr/bin/env python3
"""torch_graph.py: PyTorch CUDA graphs, for the real-GPU kit (run-all.sh runs
it without the library and under every policy and compares the checksums).

1. A small MLP step (matmul, bias, GELU, layer norm, a reduction) is captured
   once with torch.cuda.graph on static input tensors, then replayed for
   STEPS steps, the step's input copied into the static input each time
   (torch's documented pattern). The output feeds the next step's state.
2. A few more steps with fresh inputs: each step allocates a new input
   tensor, captures a new graph over it (its own memory pool), replays it
   and drops it, so every capture sees new addresses.

Prints "checksum: <16 hex>" (SHA-256 of the final state's bytes) and a line
of figures. Deterministic settings: TF32 off, deterministic algorithms on
(run-all.sh sets CUBLAS_WORKSPACE_CONFIG). Exit 77 with "skip: ..." when
torch does not import or sees no CUDA device."""
import hashlib
import sys

STEPS, FRESH, BATCH, WIDTH = 20, 5, 64, 256

try:
    import torch
except Exception as e:  # not installed, or broken: a skip, not a failure
    print("skip: PyTorch does not import (%s: %s)" % (type(e).__name__, e))
    sys.exit(77)
if not torch.cuda.is_available():
    print("skip: PyTorch %s imports but torch.cuda.is_available() is False" % torch.__version__)
    sys.exit(77)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.use_deterministic_algorithms(True)
dev = torch.device("cuda")
gen = torch.Generator(device="cpu").manual_seed(1234)
w1 = (torch.randn(WIDTH, WIDTH, generator=gen) / WIDTH ** 0.5).to(dev)
w2 = (torch.randn(WIDTH, WIDTH, generator=gen) / WIDTH ** 0.5).to(dev)
b1 = torch.randn(WIDTH, generator=gen).to(dev)
inputs = [torch.randn(BATCH, WIDTH, generator=gen).to(dev) for _ in range(STEPS + FRESH)]


def step(x, state):
    h = torch.nn.functional.gelu(x @ w1 + b1)
    h = torch.nn.functional.layer_norm(h @ w2, (WIDTH,))
    return 0.5 * state + 0.5 * torch.tanh(h) + h.mean(dim=0, keepdim=True) * 0.01


static_x = torch.zeros(BATCH, WIDTH, device=dev)
static_state = torch.zeros(BATCH, WIDTH, device=dev)
# Warm-up on a side stream before capture, as the PyTorch documentation does.
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        step(static_x, static_state)
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_out = step(static_x, static_state)

for i in range(STEPS):
    static_x.copy_(inputs[i])
    graph.replay()
    static_state.copy_(static_out)

for i in range(STEPS, STEPS + FRESH):
    fresh = inputs[i].clone()  # a new allocation every step
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step(fresh, static_state)
    g.replay()
    static_state.copy_(out)
    del g, out, fresh

torch.cuda.synchronize()
final = static_state.cpu().contiguous()
digest = hashlib.sha256(bytes(final.view(torch.uint8).flatten().tolist())).hexdigest()  # no numpy needed
print("torch_graph: torch %s, device %s, %d replays + %d fresh captures, state sum %.6f"
      % (torch.__version__, torch.cuda.get_device_name(0), STEPS, FRESH, float(final.double().sum())))
print("checksum: %s" % digest[:16])
