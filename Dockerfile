# The cluster-dns image: one static binary on an empty base, for linux/amd64 and linux/arm64,
# as CoreDNS ships a static binary on distroless-static. Built offline, no registry, no
# emulation, from what deploy/image/binaries.sh puts in dist/:
#   deploy/image/binaries.sh release
#   buildah bud --platform linux/amd64,linux/arm64 --manifest cluster-dns \
#       --build-arg CLUSTER_DNS_REVISION=$(git rev-parse --short=12 HEAD) .
# (`buildah bud --platform linux/arm64 -t cluster-dns:0.1.0 .` for one architecture.)
# No base image, so no base digest to pin and nothing to pull. The binaries are static glibc
# (`crt-static`): same code and allocator as the benchmarked build; host names resolve from
# /etc/hosts and the resolv.conf the kubelet mounts. The CA bundle is the build host's
# (Debian's ca-certificates), for the system roots of `forward`, `tls` and `dnstap`.
#
# Port 53 as uid 65532: the binary carries the file capability cap_net_bind_service=+ep (as
# CoreDNS's image does), because `capabilities.add: [NET_BIND_SERVICE]` alone does not reach
# a non-root process on containerd 1.x or CRI-O. binaries.sh sets it; buildah's COPY keeps it
# (tests/integration/deploy/image.rs checks it in the built image). Docker's legacy builder drops
# file capabilities from the context: build with buildah, as CI and the release workflow do.
#
# .ci/run (test.sh) builds this file for both architectures and runs the images: amd64 with
# runc under the pod's securityContext, arm64's binary under qemu-user; both answer dig.
FROM scratch
ARG TARGETARCH
# What the image is, in the OCI annotation keys registries and scanners read; the revision is
# the one build.rs compiled in (coredns_build_info), given again here.
ARG CLUSTER_DNS_REVISION
LABEL org.opencontainers.image.title="cluster-dns" \
      org.opencontainers.image.description="A Kubernetes cluster DNS server: a drop-in replacement for CoreDNS in kube-system" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${CLUSTER_DNS_REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY dist/linux-${TARGETARCH}/cluster-dns /cluster-dns
COPY dist/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY dist/sbom.cdx.json /usr/share/doc/cluster-dns/sbom.cdx.json
COPY LICENSE /usr/share/doc/cluster-dns/LICENSE
USER 65532:65532
EXPOSE 53/udp 53/tcp 9153/tcp 8080/tcp 8181/tcp
ENTRYPOINT ["/cluster-dns"]
CMD ["-conf", "/etc/cluster-dns/Corefile"]
