# leasehold sidecar image: a static binary on distroless, run as non-root.
# Build with `make image` (which passes VERSION and REVISION). The build
# stage runs on the build machine's platform and cross-compiles for the
# target's (docker buildx build --platform linux/amd64,linux/arm64): no
# emulation. The build flags are the ones of internal/buildflags/flags.env,
# their one definition, which the tests build with too (internal/testing/fleet,
# test/image), so CI tests the binary that ships.
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

FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="leasehold" \
      org.opencontainers.image.description="A leader-election sidecar for Kubernetes: a Lease held for the app, fencing tokens and leadership on localhost HTTP" \
      org.opencontainers.image.source="https://github.com/leasehold/leasehold" \
      org.opencontainers.image.url="https://github.com/leasehold/leasehold" \
      org.opencontainers.image.documentation="https://github.com/leasehold/leasehold#readme" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/leasehold /leasehold
USER 65532:65532
ENTRYPOINT ["/leasehold"]
