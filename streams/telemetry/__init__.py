"""streams.telemetry"""
