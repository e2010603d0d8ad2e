# Builds the oria manager image: docker build -t oria:latest .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /oria ./cmd/oria

FROM gcr.io/distroless/static:nonroot
COPY --from=build /oria /oria
USER 65532:65532
ENTRYPOINT ["/oria"]
