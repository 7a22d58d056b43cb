# One image for every binary of the workspace (api, ops and the worker stages, each in its folder under workers/src);
# docker-compose.yml picks the command. `.dockerignore` keeps a local target/ out, so only the
# binaries built here are copied.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The worker stages are built on their own, so their `api` library is built without the HTTP
# face (feature `http`): they link no router, swagger UI or checkout page, and the `api` binary
# links no signer (the signers are the workers' own).
# The second build does not touch the worker binaries of the first.
RUN cargo build --release -p workers --bins \
 && cargo build --release -p api -p ops --bins \
 && mkdir /out && find target/release -maxdepth 1 -type f -executable -exec cp {} /out/ \;

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 paygate
COPY --from=build /out/ /usr/local/bin/
USER paygate
WORKDIR /var/lib/paygate
ENV RUST_LOG=info,sqlx=warn PAYGATE_LOG_FORMAT=json
# 8080: api; 9090: a worker's /health, /ready and /metrics (PAYGATE_WORKER__LISTEN).
EXPOSE 8080 9090
CMD ["api"]
