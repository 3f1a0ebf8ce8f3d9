"""What every pagestream process reports about itself, under the same names.

- `tracing`: each hop an OpenTelemetry span in the document's W3C trace;
- `metrics`: the metrics both the agents and the GPU node export.
"""
