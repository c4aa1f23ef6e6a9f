# The cluster-dns image: the same binary every test and benchmark runs (BENCHMARKS.md): the
# glibc build of `cargo build --release`, with glibc's malloc, on a distroless base that ships
# glibc (distroless/cc: libc, libm, libgcc_s, no shell), running as non-root.
#   docker build --build-arg CLUSTER_DNS_REVISION=$(git rev-parse --short=12 HEAD) -t cluster-dns:0.1.0 .
# Debian 12 in both stages: the binary links against bookworm's glibc 2.36, the one the base
# has. tests/integration/image.rs checks the binary needs no library the base lacks.
#
# Port 53 as uid 65532: the binary carries the file capability cap_net_bind_service=+ep (as
# CoreDNS's image does), because `capabilities.add: [NET_BIND_SERVICE]` alone does not reach
# a non-root process on containerd 1.x or CRI-O; COPY --from keeps the capability.
# tests/integration/privileges.rs runs the binary as uid 65532 with and without it.
# The debug sections go to /cluster-dns.debug in the build stage (objcopy), linked from the
# shipped binary by its debuglink, so the image carries only the code.
# The git revision for coredns_build_info (build.rs): .git is not in the build context
# (.dockerignore), so it comes as the build argument CLUSTER_DNS_REVISION (empty without it).
#
# amd64 and arm64: docker buildx build --platform linux/amd64,linux/arm64 .
# The build stage has no --platform=$BUILDPLATFORM: each architecture's binary is built by that
# architecture's rust image, the same native `cargo build --release` as on amd64 (no cross
# toolchain, no --target). buildx runs it on a builder node of that architecture when the
# builder has one (docker buildx create --append), else under QEMU emulation (binfmt_misc),
# which is correct but slow: the fat-LTO release build takes many times its native 3 minutes.
# Docker does not run on the project's test machines: tests/integration/image.rs builds an
# image of the tested binary the way this file does (objcopy, setcap, the layer keeping the
# capability) with buildah and runs it with runc, on amd64. No arm64 build has been made yet.
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libcap2-bin binutils && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG CLUSTER_DNS_REVISION
RUN cargo build --release --locked --bin cluster-dns \
 && cp target/release/cluster-dns /cluster-dns \
 && objcopy --only-keep-debug /cluster-dns /cluster-dns.debug \
 && objcopy --strip-debug --add-gnu-debuglink=/cluster-dns.debug /cluster-dns \
 && setcap cap_net_bind_service=+ep /cluster-dns

FROM gcr.io/distroless/cc-debian12:nonroot
# What the image is, in the OCI annotation keys registries and scanners read; the revision is
# the build argument build.rs reads too.
ARG CLUSTER_DNS_REVISION
LABEL org.opencontainers.image.title="cluster-dns" \
      org.opencontainers.image.description="A Kubernetes cluster DNS server: a drop-in replacement for CoreDNS in kube-system" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${CLUSTER_DNS_REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /cluster-dns /cluster-dns
COPY LICENSE /LICENSE
USER 65532:65532
EXPOSE 53/udp 53/tcp 9153/tcp 8080/tcp 8181/tcp
ENTRYPOINT ["/cluster-dns"]
CMD ["-conf", "/etc/cluster-dns/Corefile"]
