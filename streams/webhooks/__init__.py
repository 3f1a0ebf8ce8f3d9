"""streams.webhooks"""
