# Helpers shared by the kernels of this fixture package (written for the distiller's tests).
import triton
import triton.language as tl


@triton.jit
def exp(x):
    return tl.exp(x.to(tl.float32))


gather = tl.gather
make_tensor_descriptor = triton.language.make_tensor_descriptor


def my_autotune(configs, key):
    # a project-defined wrapper around triton.autotune, as FLA's fla_cache_autotune
    return triton.autotune(configs=configs, key=key)
