"""streams.operations"""
