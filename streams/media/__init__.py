"""streams.media"""
