# A static cluster-dns binary on a distroless base (no shell, no libc, runs as non-root).
#   docker build -t cluster-dns:0.1.0 .
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
RUN rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin cluster-dns --target x86_64-unknown-linux-musl && \
    strip target/x86_64-unknown-linux-musl/release/cluster-dns

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/cluster-dns /cluster-dns
USER 65532:65532
EXPOSE 53/udp 53/tcp 9153/tcp 8080/tcp 8181/tcp
ENTRYPOINT ["/cluster-dns"]
CMD ["-conf", "/etc/cluster-dns/Corefile"]
