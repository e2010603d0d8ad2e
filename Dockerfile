# oria's manager image:
#   make docker-build IMG=registry.example.com/oria:v0.1.0 VERSION=v0.1.0
# The build context is only what the build copies (.dockerignore).
#
# The build image is pinned to an exact Go release (at least go.mod's go
# line); append @sha256:<digest> to pin it byte for byte
# (`docker buildx imagetools inspect golang:1.26.8-bookworm`). The runtime
# image is scratch: a static binary, the CA bundle and nothing else.
ARG GO_IMAGE=golang:1.26.8-bookworm

FROM ${GO_IMAGE} AS build
# The version `oria --version` prints (main.version).
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" -o /oria ./cmd/oria

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /oria /oria
# Not root (no shell or users file is needed for a numeric user):
# config/manager runs the pod with runAsNonRoot and runAsUser 65532.
USER 65532:65532
ENTRYPOINT ["/oria"]
