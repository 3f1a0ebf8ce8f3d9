# CPU image: CLI and stream agents. No torch (the GPU node has its own image).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY schemas schemas
COPY reading reading
COPY streams streams
COPY gpu_node gpu_node
COPY gateway gateway
COPY synth synth
COPY ops ops
RUN pip install --no-cache-dir -c constraints.txt '.[s3]'
USER 65534
ENTRYPOINT []
CMD ["pagestream", "--help"]
