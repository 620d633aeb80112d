# phasegate sidecar: a static binary on distroless, running as nonroot.
# Build: docker build -t phasegate .
# Without a registry (CI here): images/build.sh passes local images as
# GO_IMAGE (a Debian base with the host's Go) and RUNTIME_IMAGE (scratch with
# CA certificates and the nonroot user); see images/build.sh.
ARG GO_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot
FROM ${GO_IMAGE} AS build
ARG GOPROXY
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sidecar ./cmd/sidecar

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/sidecar /sidecar
# nonroot:nonroot of distroless, by number so that any runtime base works.
USER 65532:65532
EXPOSE 9464
# No shell in the image: the binary checks its own /healthz.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["/sidecar", "healthcheck"]
ENTRYPOINT ["/sidecar"]
