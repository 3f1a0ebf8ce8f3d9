"""streams"""
