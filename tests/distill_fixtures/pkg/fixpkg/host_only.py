# No Triton, no native bindings: the distiller ignores this file.
def add(a, b):
    return a + b
