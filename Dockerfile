# Lark in a container: a static binary (pure-Go SQLite, no cgo), run as a non-root user from a
# read-only root filesystem, with its data in a volume.
#
#   docker build -t lark:dev --build-arg VERSION=$(git describe --tags --always) .
#   docker run --read-only --tmpfs /tmp -v lark-data:/var/lib/lark -p 8080:8080 \
#     -e LARK_ADMIN_TOKEN=$(openssl rand -hex 32) lark:dev
#
# docs/operations.md, "Install", has the details (PostgreSQL, workers, systemd). The build context
# is the module's sources only (.dockerignore): never lark-data/ with its master key and tokens.

FROM golang:1.26.10-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
RUN CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /out/lark ./cmd/lark \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lark /usr/local/bin/lark
# The data directory belongs to the image's non-root user (65532), so a new volume mounted there
# does too; Lark warns about a data directory other users can read (it holds credentials).
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /var/lib/lark
USER 65532:65532
VOLUME ["/var/lib/lark"]
EXPOSE 8080
ENV LARK_ADDR=0.0.0.0:8080 LARK_DATA=/var/lib/lark
ENTRYPOINT ["/usr/local/bin/lark"]
CMD ["serve"]
