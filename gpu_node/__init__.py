"""gpu_node"""
