"""patterns.retriever"""
