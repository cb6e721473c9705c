# leasehold sidecar image: the static binary alone, FROM scratch, run as
# 65532:65532. `make image` builds the same image with no container engine
# (hack/image; test/image checks that the two agree); this file is for
# docker build, with the build arguments VERSION, REVISION and CREATED (the
# commit's time, RFC 3339 in UTC: README, "Releasing"). The build stage runs
# on the build machine's platform and cross-compiles for the target's
# (docker buildx build --platform linux/amd64,linux/arm64): no emulation.
# The build flags are the ones of internal/buildflags/flags.env, their one
# definition, which the tests build with too (internal/testing/fleet,
# test/image), so CI tests the binary that ships. No CA certificates: the
# apiserver's CA comes from the ServiceAccount mount; an https app-health
# URL needs a CA bundle mounted (docs/using.md).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
ARG TARGETOS TARGETARCH
ARG VERSION=dev
RUN . ./internal/buildflags/flags.env && \
    CGO_ENABLED=$BUILD_CGO_ENABLED GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build $BUILD_FLAGS -ldflags "$BUILD_LDFLAGS -X main.version=${VERSION}" -o /out/leasehold ./cmd/sidecar

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="leasehold" \
      org.opencontainers.image.description="A leader-election sidecar for Kubernetes: a Lease held for the app, fencing tokens and leadership on localhost HTTP" \
      org.opencontainers.image.source="https://github.com/leasehold/leasehold" \
      org.opencontainers.image.url="https://github.com/leasehold/leasehold" \
      org.opencontainers.image.documentation="https://github.com/leasehold/leasehold#readme" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/leasehold /leasehold
USER 65532:65532
ENTRYPOINT ["/leasehold"]
