"""streams.local"""
