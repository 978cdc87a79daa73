# odradek broker image: docker build -t odradek . && docker run -p 9092:9092 odradek
# The build stage builds the wheel (what `make dist` builds and users install); the image
# installs that wheel and takes nothing else from the source tree but the shipped config.
FROM python:3.11-slim AS build
# a C compiler for the client's C helpers (odradek/client/native.py); only this stage has it
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
RUN groupadd --system --gid 10001 odradek \
    && useradd --system --uid 10001 --gid odradek --home-dir /var/lib/odradek --no-create-home odradek \
    && mkdir -p /var/lib/odradek/logs \
    && chown -R odradek:odradek /var/lib/odradek
COPY --from=build /dist /tmp/dist
# with the console's extra: `docker compose exec odradek odradek console` (docs/console.md);
# its versions are the wheel's own bounds (pyproject.toml), hence no pins here
# hadolint ignore=DL3013
RUN wheel="$(ls /tmp/dist/odradek-*.whl)" \
    && pip install --no-cache-dir "${wheel}[console]" && rm -rf /tmp/dist
COPY config/server.properties /etc/odradek/server.properties
# Any broker key can be set as ODRADEK_<KEY> (upper case, dots to underscores).
ENV ODRADEK_LOG_DIRS=/var/lib/odradek/logs \
    ODRADEK_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    ODRADEK_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    ODRADEK_METRICS_LISTENER=http://0.0.0.0:9644 \
    PYTHONUNBUFFERED=1
USER 10001:10001
VOLUME ["/var/lib/odradek"]
# 9092: Kafka and native clients; 9644: Prometheus metrics at /metrics
EXPOSE 9092 9644
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import socket; socket.create_connection(('127.0.0.1', 9092), 2).close()"]
# SIGTERM is a clean shutdown: flush, checkpoints, .kafka_cleanshutdown.
STOPSIGNAL SIGTERM
ENTRYPOINT ["odradek", "serve", "--config", "/etc/odradek/server.properties"]
CMD ["--log-format", "json"]
