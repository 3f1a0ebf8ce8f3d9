"""streams.client"""
