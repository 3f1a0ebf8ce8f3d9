"""streams.kafka"""
