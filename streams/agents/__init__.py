"""streams/agents"""
