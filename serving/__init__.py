"""patterns.serving"""
