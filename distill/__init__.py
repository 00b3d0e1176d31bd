"""patterns.distill"""
