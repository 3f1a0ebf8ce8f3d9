"""streams.security"""
