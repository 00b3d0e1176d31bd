"""patterns.kernels"""
