# leasehold sidecar image: a static binary on distroless, run as non-root.
# Build with `make image`. The build flags below are the ones the tests
# build with (internal/fleet), so CI tests the binary that ships.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/leasehold ./cmd/sidecar

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/leasehold /leasehold
USER 65532:65532
ENTRYPOINT ["/leasehold"]
