"""patterns.validation"""
