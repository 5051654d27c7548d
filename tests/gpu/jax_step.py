#!/usr/bin/env python3
"""jax_step.py: a jitted JAX training-style step on the GPU, for the real-GPU
kit (run-all.sh runs it without the library and under every policy and
compares the checksums). XLA:GPU may run the step's kernels as CUDA graphs
(command buffers), which is what the library acts on.

The step fits a small model by gradient descent: parameters, a batch that
changes every iteration (so inputs live at new addresses), jax.grad, an
update. Elementwise math and reductions only, no matrix products, so no
autotuned kernel choice can make two runs differ.

Prints "checksum: <16 hex>" (SHA-256 of the final parameters' bytes) and a
line of figures. Exit 77 with "skip: ..." when jax does not import or has
no GPU backend. run-all.sh sets XLA_PYTHON_CLIENT_PREALLOCATE=false."""
import hashlib
import sys

ITERS, N = 25, 4096

try:
    import jax
    import jax.numpy as jnp
except Exception as e:  # not installed, or broken: a skip, not a failure
    print("skip: JAX does not import (%s: %s)" % (type(e).__name__, e))
    sys.exit(77)
gpus, why = [], "no GPU device listed"
try:
    gpus = jax.devices("gpu")
except Exception as e:
    why = "%s: %s" % (type(e).__name__, e)
if not gpus:
    print("skip: JAX %s imports but has no GPU backend (%s)" % (jax.__version__, why))
    sys.exit(77)


def loss(params, x, y):
    w, b, c = params
    pred = jnp.tanh(x * w + b) * c
    return jnp.mean((pred - y) ** 2)


@jax.jit
def step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return tuple(p - 0.1 * g for p, g in zip(params, grads)), loss(params, x, y)


dev = gpus[0]
key = jax.random.PRNGKey(7)
params = tuple(jax.device_put(jnp.full((N,), v, jnp.float32), dev) for v in (0.5, 0.1, 1.0))
losses = []
for i in range(ITERS):
    key, kx = jax.random.split(key)
    x = jax.device_put(jax.random.normal(kx, (N,), jnp.float32), dev)
    y = jnp.sin(x)
    params, l = step(params, x, y)
    losses.append(l)
jax.block_until_ready(params)
blob = b"".join(jax.device_get(p).tobytes() for p in params)
print("jax_step: jax %s, device %s, %d iterations, loss %.6f -> %.6f"
      % (jax.__version__, dev.device_kind, ITERS, float(losses[0]), float(losses[-1])))
print("checksum: %s" % hashlib.sha256(blob).hexdigest()[:16])
