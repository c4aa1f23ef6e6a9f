# The cluster-dns image: the same binary every test and benchmark runs (BENCHMARKS.md): the
# glibc build of `cargo build --release`, with glibc's malloc, on a distroless base that ships
# glibc (distroless/cc: libc, libm, libgcc_s, no shell), running as non-root.
#   docker build -t cluster-dns:0.1.0 .
# Debian 12 in both stages: the binary links against bookworm's glibc 2.36, the one the base
# has. tests/integration/image.rs checks the binary needs no library the base lacks.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin cluster-dns

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/cluster-dns /cluster-dns
USER 65532:65532
EXPOSE 53/udp 53/tcp 9153/tcp 8080/tcp 8181/tcp
ENTRYPOINT ["/cluster-dns"]
CMD ["-conf", "/etc/cluster-dns/Corefile"]
