# phasegate sidecar: a static binary on distroless, running as nonroot.
# Build: docker build -t phasegate .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sidecar ./cmd/sidecar

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sidecar /sidecar
USER nonroot:nonroot
EXPOSE 9464
# No shell in the image: the binary checks its own /healthz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["/sidecar", "healthcheck"]
ENTRYPOINT ["/sidecar"]
